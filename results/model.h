// What a run produced, as one data model shared by the runner (which fills it), the results
// store (which keeps it in SQLite) and the reports (which tabulate it).
//
// Contract: plain values, base units throughout (seconds, bit/s, bytes, fractions, counts),
// times as ISO 8601 UTC text ("2026-11-30T04:12:09Z"). A measurement is one repeat of one
// probe in one trial; a trial's repeats share its index. NaN means "not measured". No
// behaviour here beyond small helpers; thread-safe.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "probes/series.h"

namespace wanlab::results {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Where a run (and each of its sessions) stands: running, then complete, interrupted
/// (Ctrl-C/SIGTERM: partial) or failed (an error: partial). A session a later `--resume`
/// found still running (nobody recorded its end) is killed; a run never is.
enum class RunStatus { running, complete, interrupted, failed, killed };
/// Where a trial stands: pending (not measured yet), done, interrupted or failed.
enum class TrialStatus { pending, done, interrupted, failed };

/// Each status's word, as stored, exported and printed, in the enum's order: the one table
/// to_string() and status_named() read.
template <class Status>
struct StatusWords;
template <>
struct StatusWords<RunStatus> {
    static constexpr std::array<const char*, 5> words = {"running", "complete", "interrupted", "failed", "killed"};
};
template <>
struct StatusWords<TrialStatus> {
    static constexpr std::array<const char*, 4> words = {"pending", "done", "interrupted", "failed"};
};

template <class Status>
concept AStatus = requires {
    StatusWords<Status>::words;
};

template <AStatus Status>
constexpr const char* to_string(Status s) {
    return StatusWords<Status>::words[static_cast<std::size_t>(s)];
}

/// The status `word` names; nullopt for none.
template <AStatus Status>
constexpr std::optional<Status> status_named(std::string_view word) {
    const auto& words = StatusWords<Status>::words;
    for (std::size_t i = 0; i < words.size(); ++i)
        if (word == words[i]) return static_cast<Status>(i);
    return std::nullopt;
}

/// A status in JSON (the store's columns, the export) is its word; from_json throws
/// nlohmann::json::exception for a word that names none.
template <AStatus Status>
void to_json(nlohmann::json& j, Status s) {
    j = to_string(s);
}
template <AStatus Status>
void to_json(nlohmann::ordered_json& j, Status s) {
    j = to_string(s);
}
template <AStatus Status>
void from_json(const nlohmann::json& j, Status& s) {
    auto named = status_named<Status>(j.get<std::string>());
    if (!named) throw nlohmann::json::other_error::create(501, "unknown status \"" + j.get<std::string>() + "\"", &j);
    s = *named;
}

/// Where and on what the run measured, so two runs can be compared honestly.
/// Another machine of a run across machines ([lab] mode = "hosts"), as its agent saw it.
struct MachineEnvironment {
    std::string ssh;  ///< how it was reached ("local": this machine's own agent)
    std::string hostname;
    std::string kernel;                                 ///< uname -r
    std::string machine;                                ///< uname -m
    std::map<std::string, std::string> sysctls_before;  ///< the same keys as Environment's, there
};
// In JSON (the env column, the export): every member under its own name, all required.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MachineEnvironment, ssh, hostname, kernel, machine, sysctls_before)

struct Environment {
    std::string hostname;
    std::string kernel;   ///< uname -r of the kernel the lab ran on
    std::string machine;  ///< uname -m
    std::string wanlab_version;
    std::string where;  ///< "host", or "vm (tcg, 2 cpus)" when run inside the micro-VM
    /// Before the run: every sysctl the experiment touches plus the usual buffer/cc keys, as
    /// read in the namespace wanlab started in ("net.ipv4.tcp_rmem" -> "4096\t131072\t6291456").
    std::map<std::string, std::string> sysctls_before;
    /// hosts mode: each machine by role ("client", "server", "router"); empty otherwise.
    std::map<std::string, MachineEnvironment> machines = {};
    /// A run in the micro-VM: the machine that started it, with its kernel and the usual keys'
    /// values there, so the report can say which defaults the measured kernel did not share.
    std::optional<MachineEnvironment> host = {};
};

/// One stretch of a run's measuring: the first `wanlab run`, then each `wanlab run --resume`.
struct Session {
    std::string started, finished;          ///< ISO 8601 UTC; finished empty while it runs
    RunStatus status = RunStatus::running;  ///< as Run::status, for this session
    std::string error;
    std::string hostname, kernel, where;  ///< as Environment's, when this session ran
    std::string note;                     ///< what --force let through ("kernel 6.1.0-27 -> 6.1.0-28")
    /// The process that writes it, while it runs: its pid, start time (clock ticks since boot)
    /// and the kernel's boot id, so a reader on the same boot can tell a run still going from
    /// one whose process died without closing it (abandoned()). 0 and "": not recorded.
    std::int64_t pid = 0;
    unsigned long long start_time = 0;
    std::string boot;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Session, started, finished, status, error, hostname, kernel, where,
                                                note, pid, start_time, boot)

/// How many repeats each (trial, probe) got: a fixed count ([run] repeats = N), or Stein's
/// two-stage rule ([run] repeats = "auto", probes/stats.h stein_repeats()): `first` repeats,
/// then as many as give the mean a 95% interval within +-`precision`, at most `max`.
struct RepeatRule {
    bool adaptive = false;
    std::uint32_t first = 0, max = 0;  ///< adaptive only
    double precision = kNaN;           ///< fraction of the first repeats' median; adaptive only
};

struct Run {
    std::string id;                 ///< run id, as in the journal and the namespace names
    std::string experiment;         ///< the experiment's name
    std::string file;               ///< path as given
    std::string text;               ///< the experiment file's text, as read
    std::vector<std::string> sets;  ///< --set arguments, in order
    std::string baseline;           ///< variant every other one is compared with
    std::string started, finished;  ///< ISO 8601 UTC; finished empty while running
    RunStatus status = RunStatus::running;
    std::string error;  ///< what went wrong, for interrupted or failed runs
    std::size_t planned_trials = 0;
    Environment env;
    std::string shard;  ///< "K/N": the run measured shard K of N (experiment/shard.h); "" = every trial
    /// Its sessions, oldest first: one, or more when it was resumed (`wanlab run --resume`).
    /// Empty for a run recorded before wanlab kept them.
    std::vector<Session> sessions = {};
    RepeatRule repeats = {};  ///< not recorded before schema version 6: fixed
};

/// This kernel's boot id (/proc/sys/kernel/random/boot_id), "" if unreadable.
std::string this_boot();

/// Whether `run` is recorded as running but the process writing it, on this very boot of
/// this kernel, is gone (SIGKILL, a crash, the OOM killer): nobody will ever close it.
bool abandoned(const Run& run);

/// `run`, if abandoned(), closed as killed (run and last session) with a note saying so;
/// what every reader of a results database sees.
void close_if_abandoned(Run& run);

/// Whether the emulated path behaved as configured before a trial's probes ran.
struct EmulationCheck {
    bool checked = false;                               ///< false: nothing to check (no delay, no rate) or not reached
    bool held = true;                                   ///< measured within tolerance of configured
    double rtt_configured = kNaN, rtt_measured = kNaN;  ///< seconds
    double rate_configured = kNaN, rate_measured = kNaN;  ///< bit/s
    std::string note;                                     ///< "rtt 40.3 ms for 40 ms configured", or what did not hold
};

/// One packet capture file of a trial: a probe's packets as one lab host saw them.
struct Capture {
    std::string probe;
    std::string host;                      ///< "client", "server" (lab hosts) or "host" (host mode)
    std::string dev;                       ///< the device captured on
    std::string path;                      ///< the pcap file, as the run wrote it
    std::uint64_t packets = 0, bytes = 0;  ///< written to the file (bytes: the file's size)
    std::uint64_t dropped = 0;             ///< the kernel dropped (buffer full), pcap_stats
    std::string stopped;                   ///< "" (end of the probe), or the bound that stopped it
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Capture, probe, host, dev, path, packets, bytes, dropped, stopped)

struct Trial {
    std::size_t index = 0;  ///< 1-based position in the plan
    std::string id;         ///< stable id (hash of variant and sweep values)
    std::string variant;
    std::vector<std::pair<std::string, std::string>> sweep;  ///< swept path -> value as written
    /// The configuration that matters to explanations: sum of both directions' delays (s),
    /// the slowest direction's rate (bit/s, NaN: none), random loss fraction client->server
    /// and server->client (NaN: another loss model, whose mean is not one number).
    double link_rtt = kNaN, link_rate = kNaN, link_loss = kNaN, link_loss_down = kNaN;
    /// Sysctls this trial set, "host:key" or "key" for global ones -> value as written to /proc/sys.
    std::map<std::string, std::string> sysctls;
    EmulationCheck check;
    std::vector<Capture> captures;  ///< packet captures its probes asked for
    TrialStatus status = TrialStatus::pending;
    std::string error;
    /// Where a merged run's trial was measured ("run 3f2a (shard 1/2) of wanlab-results-1 on
    /// host, kernel 6.1.0"); "" = in this run (results/merge.h).
    std::string origin;
    /// The session (1-based, Run::sessions) that measured it; 0 = not measured, or recorded
    /// before wanlab kept sessions.
    std::size_t session = 0;
};

/// The note that marks a measurement a tool refused: "error: " and the tool's message with
/// the fix. Such a measurement has no metrics; the report lists it under its trial.
inline constexpr const char* kErrorNote = "error: ";

struct Measurement {
    std::size_t trial = 0;                  ///< Trial::index
    std::string probe;                      ///< probe name
    std::string kind;                       ///< probe kind ("throughput", "rtt", "rr", "http")
    std::string tool;                       ///< "builtin", "iperf3", ...
    unsigned repeat = 0;                    ///< 1-based
    std::string started;                    ///< ISO 8601 UTC
    std::map<std::string, double> metrics;  ///< base units
    std::map<std::string, std::vector<double>> samples;
    probes::SeriesMap series;  ///< time series (probes/series.h)
    std::vector<std::string> notes;
    nlohmann::json connections = nlohmann::json::array();  ///< per connection, as probes report them
    /// Kernel counters that moved during the measurement, per lab host, and the busiest
    /// CPU's share: {"client": {"TcpExt.DelayedACKs": 412, ...}, "server": {...},
    /// "cpu_busiest": 0.41} (diagnosis/counters.h); {} when not recorded.
    nlohmann::json counters = nlohmann::json::object();
};

struct RunData {
    Run run;
    std::vector<Trial> trials;
    std::vector<Measurement> measurements;

    const Trial* trial(std::size_t index) const {
        for (const auto& t : trials)
            if (t.index == index) return &t;
        return nullptr;
    }
    /// `metric` in repeats 1..n of `probe` in trial `index`, in repeat order, NaN where a
    /// repeat did not report it (an adaptive run's first stage: RepeatRule).
    std::vector<double> first_repeats(std::size_t index, const std::string& probe, const std::string& metric,
                                      std::size_t n) const {
        std::vector<double> v(n, kNaN);
        for (const auto& m : measurements) {
            if (m.trial != index || m.probe != probe || m.repeat < 1 || m.repeat > n) continue;
            if (auto it = m.metrics.find(metric); it != m.metrics.end()) v[m.repeat - 1] = it->second;
        }
        return v;
    }
};

}  // namespace wanlab::results

/// A status prints as its word: fmt::format("{}", run.status) == "complete".
template <wanlab::results::AStatus Status>
struct fmt::formatter<Status> : fmt::formatter<std::string_view> {
    template <class Context>
    auto format(Status s, Context& ctx) const {
        return fmt::formatter<std::string_view>::format(wanlab::results::to_string(s), ctx);
    }
};
