// The emulation check of a link that changed during a measurement: window by window, did the
// link carry what its schedule or trace said was in force?
//
// Contract: check_schedule() is pure. It reads one measurement's series: what left each
// direction's netem qdisc per sample (qdisc.DIR.netem.throughput, the top of the tree: what
// the link delivered) and, for an RTT probe, its RTT samples (rtt). It compares each sample
// with the states of the link as the player applied them (PlayLog: the instants the kernel
// acknowledged each change). No window of the link may carry more than the states in force
// over it allowed (each state's rate over its part of the window, an outage's 0; within
// kScheduleGuard of a change the larger of the two rates), with kScheduleRateSlack and two
// frames of slack. No RTT sample that lies wholly within one state of each direction may be
// shorter than the delay in force both ways (less its jitter; 5% and 0.2 ms of slack); those
// that straddle a change, or come within kScheduleGuard of one, are not compared. A
// measurement whose schedule stopped early did not hold either. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "netem/player.h"
#include "netem/schedule.h"
#include "probes/series.h"

namespace wanlab::run {

/// Samples closer than this to a change are not compared with either state: the qdisc
/// sample's and the schedule's clocks start within a few milliseconds of each other.
inline constexpr double kScheduleGuard = 0.010;
/// A window may carry this much more than the schedule allowed: each qdisc sample is timed
/// at the middle of its dump's round trip, a few milliseconds in the micro-VM, so a 100 ms
/// window's own length is uncertain by a few percent.
inline constexpr double kScheduleRateSlack = 0.10;

struct ScheduleCheck {
    bool held = true;
    std::size_t windows = 0;  ///< link samples compared with the rates in force
    std::size_t rtts = 0;     ///< RTT samples compared with the delay in force
    std::string note;         ///< what was compared, and the worst of what did not hold
};

ScheduleCheck check_schedule(const netem::Schedule& schedule, const netem::PlayLog& log,
                             const probes::SeriesMap& series, std::uint32_t mtu);

/// What the link's states allowed over [from, to] of one measurement, in base units.
struct InForce {
    /// The slowest direction's rate, time-weighted (an outage counts 0); NaN when for part of
    /// it neither direction had a rate.
    double rate = std::numeric_limits<double>::quiet_NaN();
    double outage = 0;  ///< seconds of outage within it
    /// The state in force at `to` (the phase's own, after any outage that began it): the delay
    /// both ways (s) and the larger of the two directions' loss (a fraction).
    double rtt = 0, loss = 0;
};
InForce in_force(const netem::Schedule& schedule, const netem::PlayLog& log, double from, double to);
/// in_force() over the whole measurement: from its start to its throughput series' last sample
/// (the span its throughput is the mean of), else any measured series', else the schedule's end.
InForce in_force_over(const netem::Schedule& schedule, const netem::PlayLog& log, const probes::SeriesMap& series);
/// InForce as the counters store it: {"rate": bit/s (absent when unknown), "outage": s,
/// "rtt": s, "loss": fraction}.
nlohmann::json to_json(const InForce& f);

/// The measurement's phases, one per [[link.schedule]] entry in the order the link went
/// through them (an entry's outage and what follows it are one phase), each with the median
/// of every top-level measured series (throughput, rtt, requests_per_second, ...: no per-stream
/// or link.* series) over its samples in the phase, and what the link allowed in it (in_force()):
/// [{"entry": 0, "from": 0, "to": 3.0, "medians": {"throughput": 1.99e7}, "link": {"rate": 2e7,
/// "outage": 0, "rtt": 0.04, "loss": 0}}, {"entry": 1, ...}]. Empty for a trace (its rows are
/// not phases) or when the link never changed.
nlohmann::json phases_of(const netem::Schedule& schedule, const netem::PlayLog& log, const probes::SeriesMap& series);

}  // namespace wanlab::run
