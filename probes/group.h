// Probe groups: probes that share a `group` run at the same time, for one duration, and the
// group's own record, which sees them together (flent's RRUL: bulk flows up and down with an
// rtt probe beside them; flows of different congestion control side by side; many flows).
//
// Contract: run_together() runs each job on its own thread, releases them at one instant
// (after every thread exists), and returns when every job has ended: each job's result, or
// the MeasurementError it threw (that member's measurement could not be made; the others
// stand). Any other failure of a job, or `tick` throwing on the calling thread (Ctrl-C),
// cancels the rest (their ticks throw) and is rethrown once every thread is joined.
// group_result() is pure: the group's metrics (group_kind()) from its members' results,
// and every member's main series on the group's clock, named "MEMBER.SERIES".
// Thread-safe: run_together() may be called from any one thread at a time per job set.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "probes/probe.h"

namespace wanlab::probes {

/// The probes of a trial as they run: each group (its probes, in file order) where its first
/// probe stands, every probe without a group alone (name "").
struct ProbeGroup {
    std::string name;
    std::vector<const ProbeSpec*> members;
};
std::vector<ProbeGroup> probe_groups(const std::vector<ProbeSpec>& probes);
/// The group a probe belongs to ("" = none).
std::string group_of(const ProbeSpec& spec);

/// `probes` and, after them, one spec per group standing for the group's own record (its
/// name, kind "group", no options): what asserts and reports may name.
std::vector<ProbeSpec> with_group_records(const std::vector<ProbeSpec>& probes);

/// Jain's fairness index of `x`: (sum x)^2 / (n * sum x^2), 1 when all are equal and 1/n
/// when one has everything; NaN for no values, a negative or non-finite one, or all zero.
double jain_index(const std::vector<double>& x);

/// Jain's index over the flows of a throughput result (its connections' "throughput"); NaN
/// with fewer than two flows.
double flow_fairness(const ProbeResult& r);

/// One member of a group as it ran: its spec and its result (nullopt when its measurement
/// could not be made: `error` says why).
struct MemberRun {
    const ProbeSpec* spec = nullptr;
    std::optional<ProbeResult> result;
    std::string error;
};

/// One job of run_together(): a member's measurement, given the tick it must call (at least
/// every 100 ms, as Probe::run's).
using GroupJob = std::function<ProbeResult(const Tick& tick)>;

/// The outcome of one job: its result, or the MeasurementError's message.
struct JobOutcome {
    std::optional<ProbeResult> result;
    std::string error;
    /// When the threads were released: the group's t = 0.
    std::chrono::steady_clock::time_point released;
};

/// Runs `jobs` concurrently, released together; see the contract above. `tick` is called on
/// the calling thread every 50 ms while they run.
std::vector<JobOutcome> run_together(const std::vector<GroupJob>& jobs, const Tick& tick);

/// Moves `r`'s series onto a clock that started at `zero`: each series' times shifted by the
/// time from `zero` to r.began (none without r.began).
void align_series(ProbeResult& r, std::chrono::steady_clock::time_point zero);

/// The group `name`'s record: kind "group", metrics of group_kind() over the members that
/// measured (`fairness` over every flow of the throughput members, their `throughput` summed,
/// `flows`, `members`), and each member's main series (already aligned) as "MEMBER.NAME";
/// a note per member that could not measure.
ProbeResult group_result(const std::vector<MemberRun>& members);

}  // namespace wanlab::probes
