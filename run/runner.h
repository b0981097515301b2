// The runner: an experiment measured end to end on this machine, into the results store.
//
// Contract: run_experiment() builds the lab once (LabSession: checks, journal, namespaces,
// links), then for each trial in plan order moves the lab to the trial's configuration
// (replace, no teardown between trials), checks that the emulation holds (check.h), and runs
// each probe: one warm-up of [run].warmup (discarded; none for rtt probes, which carry no
// state to warm), then [run].repeats measurements each followed by [run].cooldown. Every
// measurement is committed to the store as soon as it is taken. At the end, on an error and
// on Ctrl-C/SIGTERM (noticed by `tick`, which throws sys::Interrupted) the session restores
// the machine before the run's final status is written; the partial results stay.
// Errors found before the lab exists (bad sysctl value for this kernel, no root, a stale
// journal) propagate unrecorded. Not thread-safe.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "experiment/experiment.h"
#include "lab/journal.h"
#include "probes/probe.h"
#include "results/model.h"
#include "results/store.h"
#include "run/progress.h"

namespace wanlab::run {

struct RunnerOptions {
    std::string run_id;          ///< "" = a fresh one
    bool restore_stale = false;  ///< undo stale journals instead of refusing
    std::string where = "host";  ///< Environment::where
    std::string shard;           ///< "K/N" when `exp` holds one shard's trials (results::Run::shard)
    std::filesystem::path journal_dir = lab::kRunDir;
    bool force = false;  ///< host mode: see lab::SessionOptions::force
    /// Called after each stage of building the lab ("journal", "namespaces", ...), from the
    /// calling thread before any probe thread exists (`wanlab run` arms its watchdog here).
    std::function<void(const std::string& stage)> on_stage;
    /// Called after each trial is recorded (done or failed), from the calling thread, with
    /// the run as recorded so far (`wanlab run --html` refreshes its page here). May throw.
    std::function<void(const results::RunData& so_far)> on_trial;
    /// Where each trial's folder goes ({dir} of its services: their logs and rendered
    /// templates): FILES/RUN/trial-N-ID. "" = the results store's folder.
    /// When files_dir is on a network filesystem (9p, as in the micro-VM; NFS; SMB), the
    /// services work in a private folder under /tmp instead and each trial's folder is moved
    /// to files_dir after the trial: a service reading its files over 9p is measured slower
    /// than it is (nginx's sendfile of a small page: ~18 ms per request in the micro-VM).
    std::filesystem::path files_dir;
    /// `wanlab run --resume`: the run to continue, as recorded (run/resume.h has checked that
    /// `exp` gives its trials). Its "done" trials and their measurements are kept; every other
    /// trial is measured anew, in a new session that records `resume_note`.
    const results::RunData* resume = nullptr;
    std::string resume_note;
};

/// One repeat's record as the results store keeps it (no counters: the caller adds them).
results::Measurement record_of(const probes::ProbeSpec& spec, const probes::ProbeResult& r, std::size_t trial,
                               unsigned repeat, const std::string& started);

/// Whether `dir` is on a network filesystem (9p, NFS, SMB/CIFS, Ceph, virtiofs, FUSE), by
/// the type of the mount that holds it in /proc/self/mountinfo.
bool on_network_fs(const std::filesystem::path& dir);
/// The file system type of the mount that holds the absolute path `dir`, from the text of a
/// /proc/self/mountinfo ("" when none does). Pure: for on_network_fs() and its tests.
std::string mount_type(const std::string& mountinfo, const std::filesystem::path& dir);

struct Outcome {
    results::RunData data;
    int exit_code = 0;  ///< 0 complete, 130 interrupted, else the error's exit code
};

/// The folder of trial `t` of run `run` under `files_dir`: FILES/RUN/trial-N-ID.
std::filesystem::path trial_dir(const std::filesystem::path& files_dir, const std::string& run, const lab::Trial& t);

/// `spec` as it measures in a lab whose probes run at `where`: placeholders in its url
/// filled with the lab's addresses, and with `server_port`, the server endpoint a service
/// already listening (the probe starts none).
std::pair<probes::ProbeSpec, probes::Endpoints> in_lab(const probes::ProbeSpec& spec, probes::Endpoints where);

/// `text` is the experiment file's text (stored with the run).
Outcome run_experiment(const lab::Experiment& exp, const std::string& text, const RunnerOptions& options,
                       results::Store& store, Progress& progress, const probes::Tick& tick);

/// The recorded part of a run: begins `data`'s record in `store` (status "running", its planned
/// trials), calls `measure`, which sets `current` to the trial it is in (nullptr between
/// trials), then `restore` (which must not throw), then ends the record: "complete", or on any
/// exception "interrupted" (sys::Interrupted, exit 130) or "failed" (exit the wanlab::Error's
/// code, 1 for any other exception) with the exception's message, the current trial likewise.
/// Returns the exit code; the exception does not propagate. Store errors of the final writes do.
/// The last of `data.run.sessions` (if any) ends with the run. `resume`: the record exists
/// (Store::resume_run instead of begin_run).
int recorded_run(results::Store& store, results::RunData& data,
                 const std::function<void(results::Trial*& current)>& measure, const std::function<void()>& restore,
                 bool resume = false);

/// The trial as the results model records it (configuration that explanations need).
results::Trial trial_record(const lab::Trial& t);

/// Seconds one trial is planned to take (warm-up, repeats x (duration + cooldown)), for ETAs;
/// with adaptive repeats, at the rule's first repeats (RepeatForecast corrects it as it runs).
double planned_seconds(const lab::Trial& t, const lab::RunSpec& run);
/// Seconds one repeat of every probe (or group) of a trial takes, cooldown included.
double repeat_seconds(const lab::Trial& t, const lab::RunSpec& run);

/// Now as ISO 8601 UTC ("2026-11-30T04:12:09Z").
std::string utc_now();

/// The machine as the run found it: uname, the sysctls the experiment touches and the usual
/// buffer and congestion-control keys (host namespace).
results::Environment environment(const lab::Experiment& exp, const std::string& where);

}  // namespace wanlab::run
