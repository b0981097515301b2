// One trial measured once the lab holds its configuration: the emulation check, then each
// probe (or group of probes together): its warm-up, its repeats (adaptive ones decided by
// Stein's rule after the first), the counters and queue statistics of each repeat, and its
// captures, every measurement committed to the store as it is taken.
//
// Contract: TrialRunner measures through the lab::Testbed it is given (Testbed::run_probe:
// here, or on another machine through its agent; a fake in the tests), never around it. A
// probe's refusal (probes::MeasurementError) is recorded with its message and the trial goes
// on; any other exception propagates. `tick` (probes/probe.h) is called while waiting. Not
// thread-safe.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "diagnosis/capture.h"
#include "experiment/experiment.h"
#include "lab/testbed.h"
#include "probes/group.h"
#include "probes/probe.h"
#include "results/model.h"
#include "results/store.h"
#include "run/progress.h"

namespace wanlab::run {

/// Nanoseconds (a [run] duration's count) as seconds.
inline double ns_to_s(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

/// What an emulation check is planned to take (its RTT and rate measurements), for the ETA.
inline constexpr double kCheckSeconds = 2;

/// Whether the trial gets an emulation check: it has link conditions, on a testbed where the
/// configured RTT and rate can be compared with a measurement.
bool checks_emulation(const experiment::Trial& t);

/// Whether a probe gets a warm-up (its kind's trait: rtt and udp probes carry no state to
/// warm; a command's warm-up is the user's, a command has no duration to shorten).
bool warms_up(const probes::ProbeSpec& p);

/// The seconds a repeat of a probe, or of a group's members together, is planned to take.
double longest(const probes::ProbeGroup& g);

/// `spec` as it measures in a lab whose probes run at `where`: placeholders in its url
/// filled with the lab's addresses, and with `server_port`, the server endpoint a service
/// already listening (the probe starts none).
std::pair<probes::ProbeSpec, probes::Endpoints> in_lab(const probes::ProbeSpec& spec, probes::Endpoints where);

/// The run's planned seconds, as the ETA counts them: `done` covered of `planned`; adaptive
/// repeats correct `planned` through `forecast` (nullptr: fixed repeats) as each probe
/// decides its count.
struct Eta {
    double done = 0;
    double planned = 0;
    RepeatForecast* forecast = nullptr;
};

class TrialRunner {
public:
    TrialRunner(const experiment::Experiment& exp, results::Store& store, Progress& progress, const probes::Tick& tick,
                results::RunData& data, Eta& eta)
        : exp_(exp), store_(store), progress_(progress), tick_(tick), data_(data), eta_(eta) {}

    /// Measures trial `t` into `rec` on `testbed`. `between` runs after each measurement (the
    /// services' liveness check); it may throw. Captures are written into `work` (the trial's
    /// folder, maybe staged) and recorded as `kept`/NAME (the folder's path relative to the
    /// results folder).
    void run(const experiment::Trial& t, results::Trial& rec, const lab::Testbed& testbed,
             const std::function<void()>& between, const std::filesystem::path& work,
             const std::filesystem::path& kept);

    /// "[2/6] variant key=value": how progress names trial `t`.
    std::string trial_label(const experiment::Trial& t) const;

private:
    /// One probe of a trial as it measures: its spec and endpoints in the lab, its captures.
    struct Member {
        probes::ProbeSpec spec;
        probes::Endpoints where;
        std::vector<std::unique_ptr<diagnosis::Capture>> captures;
    };

    void check(const experiment::Trial& t, const std::string& label, results::Trial& rec, const lab::Testbed& testbed);
    std::vector<Member> members_of(const probes::ProbeGroup& group, const lab::Testbed& testbed) const;
    void repeats(const experiment::Trial& t, const std::string& label, const std::string& name,
                 const probes::ProbeGroup& group, std::vector<Member>& members, const lab::Testbed& testbed,
                 const std::function<void()>& between);
    void keep_captures(std::vector<Member>& members, results::Trial& rec, const std::filesystem::path& kept);
    void warm_up(const std::string& label, const std::string& name, const std::vector<Member>& members,
                 const lab::Testbed& testbed);
    void measure(const experiment::Trial& t, const std::string& label, const std::string& group,
                 std::vector<Member>& members, unsigned r, const lab::Testbed& testbed,
                 const std::vector<netem::QdiscSite>& sites);
    unsigned repeats_needed(const experiment::Trial& t, const probes::ProbeGroup& group,
                            const std::vector<Member>& members);
    static std::string load_beside(const std::vector<Member>& members, const probes::ProbeSpec& self);
    static std::vector<std::unique_ptr<diagnosis::Capture>> start_captures(const probes::ProbeSpec& spec,
                                                                           const lab::Testbed& testbed,
                                                                           const std::filesystem::path& work);
    void commit(results::Measurement m);

    const experiment::Experiment& exp_;
    results::Store& store_;
    Progress& progress_;
    const probes::Tick& tick_;
    results::RunData& data_;
    Eta& eta_;
    /// The measurements of the trial under way whose schedule did not hold (run/schedule_check.h).
    std::vector<std::string> schedule_misses_;
    std::size_t schedule_held_ = 0;  ///< and those whose schedule held
    double schedule_late_p99_ = 0;   ///< the largest p99 lateness of its changes, seconds
    double schedule_late_max_ = 0;   ///< the latest of its changes, seconds
};

}  // namespace wanlab::run
