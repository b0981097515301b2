// The trial loop: an experiment measured end to end into the results store.
//
// Contract: run_experiment() opens the run's session once through the OpenSession it is given
// (open_session(): LabSession here or HostsSession across [lab] hosts, which check, journal
// and build the lab; a fake in the tests), then for each trial in plan order moves the lab to
// the trial's configuration (replace, no teardown between trials), starts its services and
// measures it (run/trial.h: the emulation check, each probe's warm-up and repeats through the
// session's testbed). Every measurement is committed to the store as soon as it is taken. A
// trial whose service fails is recorded failed and the run goes on (and ends failed). At the
// end, on an error and on Ctrl-C/SIGTERM (noticed by `tick`, which throws sys::Interrupted)
// the session is closed, restoring the machine, before the run's final status is written;
// the partial results stay. Errors found before the session exists (bad sysctl value for
// this kernel, no root, a stale journal) propagate unrecorded. Not thread-safe.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "lab/journal.h"
#include "lab/restore.h"
#include "lab/session.h"
#include "probes/probe.h"
#include "results/model.h"
#include "results/store.h"
#include "run/progress.h"

namespace wanlab::run {

struct RunnerOptions {
    std::string run_id;          ///< "" = a fresh one
    bool restore_stale = false;  ///< undo stale journals instead of refusing
    std::string where = "host";  ///< Environment::where
    /// A run in the micro-VM: the machine that started it (Environment::host), as a JSON file
    /// the controller wrote into the results share; "" otherwise.
    std::string host_env;
    std::string shard;  ///< "K/N" when `exp` holds one shard's trials (results::Run::shard)
    std::filesystem::path journal_dir = lab::kRunDir;
    bool force = false;               ///< host mode: see lab::SessionOptions::force
    bool allow_ssh_commands = false;  ///< hosts mode: remote::HostsOptions::allow_ssh_commands
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

/// What the session of a run is opened with.
struct SessionRequest {
    std::string run;  ///< the run's id
    bool restore_stale = false, resume = false, force = false, allow_ssh_commands = false;
    std::filesystem::path journal_dir = lab::kRunDir;
    double planned_seconds = 0;            ///< the run's planned measuring time
    std::vector<std::string> sysctl_keys;  ///< what an environment records (run/record.h)
    lab::Progress progress;                ///< after each stage of building the lab
    lab::Log log;                          ///< restore messages
};

/// Opens the machine side of a run of `trials` and adds what it learns of the machines to
/// `env` (hosts mode: each machine's environment). Throws before anything changes when the
/// machine cannot take the run.
using OpenSession = std::function<std::unique_ptr<lab::Session>(
    const std::vector<experiment::Trial>& trials, const SessionRequest& request, results::Environment& env)>;

/// The real sessions: LabSession on this machine, or HostsSession across the [lab] hosts.
std::unique_ptr<lab::Session> open_session(const std::vector<experiment::Trial>& trials, const SessionRequest& request,
                                           results::Environment& env);

struct Outcome {
    results::RunData data;
    int exit_code = 0;     ///< 0 complete, 130 interrupted, else the error's exit code
    bool recorded = true;  ///< false: stopped before anything was recorded (a micro-VM interrupted while booting)
};

/// `text` is the experiment file's text (stored with the run).
Outcome run_experiment(const experiment::Experiment& exp, const std::string& text, const RunnerOptions& options,
                       results::Store& store, Progress& progress, const probes::Tick& tick,
                       const OpenSession& open = open_session);

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

}  // namespace wanlab::run
