// A link that changes during a measurement: [[link.schedule]] entries turned into the states
// the link takes and the instants it takes them.
//
// Contract: parse_schedule() reads the `schedule` array of a merged [link] table. Each entry
// names `at` (from the start of each measurement) and any per-direction [link] key, for both
// directions or under `up`/`down`; what it does not name stays as the entry before left it.
// Events are shorthands that expand into states: `outage = "2s"` (nothing passes: netem
// drops every arriving packet in both directions and holds what it has queued until the
// outage ends, then lets it leave paced at the rate, as a link's queue drains: netem gave each
// held packet its departure time before the outage, so unpaced they would leave at once; a
// tbf or htb shaper's queue below netem still drains during the outage), `handover = "200ms"` (an outage after which
// the entry's keys hold), and `every`/`for` (an outage or handover that recurs: a flapping link). An entry holding only
// `at` and `repeat = true` ends the schedule's period: from then on it starts again from
// [link]. A schedule changes link conditions in place, never the tree's shape: the shaper,
// the bottleneck queue and whether a tbf or htb shaper is there at all are [link]'s, and an
// entry that would change them is refused with its location. Pure; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "netem/link_spec.h"
#include "netem/trace.h"

namespace wanlab::netem {

/// One state of a scheduled link: both directions as they are from `at` until the next step.
struct ScheduleStep {
    std::chrono::nanoseconds at{0};
    Direction up, down;
    std::size_t entry = 0;  ///< the [[link.schedule]] entry (1-based) that made it; 0: [link]
    bool outage = false;    ///< an outage (or a handover's) is under way
    /// After an outage: what netem held leaves paced at the link's rate (a slot every 5 ms of
    /// a little over the rate's bytes: netem/schedule.cpp draining_of()), until `drained`.
    bool draining = false;
    bool drained = false;     ///< the held queue has had time to leave: netem's rate alone again
    bool from_trace = false;  ///< a row (or window) of a trace (netem/trace.h), not an entry

    /// The state of one direction, "up" or "down".
    const Direction& of(std::string_view direction) const { return direction == "up" ? up : down; }
};

/// A trace one or both directions follow (`trace` in [link], [link.up] or [link.down]).
struct ScheduledTrace {
    std::string directions;  ///< "both", "up" or "down"
    Trace trace;
};

struct Schedule {
    /// In time order; steps[0] is [link] itself at 0 (the whole schedule when nothing changes).
    std::vector<ScheduleStep> steps;
    /// `repeat = true`: the steps start again every period; 0: the last step holds.
    std::chrono::nanoseconds period{0};
    /// The traces the steps come from: a link takes traces or [[link.schedule]] entries.
    std::vector<ScheduledTrace> traces;
    bool empty() const { return steps.size() <= 1; }
    /// The step in force `t` after the start, counting periods.
    const ScheduleStep& at(std::chrono::nanoseconds t) const;
};

/// An outage holds what netem has queued with a slot that would open this long after the
/// outage ends: the change that ends it (which clears the slot) comes first unless the player
/// is later than this. Held packets then leave with the next packet that arrives, or when the
/// slot's own timer fires, at most this long after the end.
inline constexpr std::chrono::milliseconds kOutageHoldMargin{100};

/// The most steps a schedule may expand to (a flapping link's outages count two each): a
/// file cannot make a run hold millions of states.
inline constexpr std::size_t kMaxScheduleSteps = 10'000;

/// The shaper a trace's rates get when [link] names none. netem's own rate reaches what it has
/// queued only after it has left; tbf refills its bucket at every change (the kernel's
/// tbf_change), a burst a window that delivered 2.7% above an LTE-like trace at 100 ms windows
/// in the micro-VM; htb keeps its tokens across a change and delivered it within 0.1%.
inline constexpr Shaper kTraceShaper = Shaper::htb;

/// Reads `link`'s `schedule` (absent: a schedule of `base` alone), or its traces (`trace`,
/// `trace_window`, for both directions or each: netem/trace.h), whose rows become the steps,
/// the whole trace one period (the shorter of two traces starts over within the longer's). `base` is [link] as
/// parse_link() read it, validated, its limits resolved against `line_rate_bps` and `mtu`;
/// each step is resolved the same way, and a direction a step changes is marked
/// `scheduled` in `base`. Errors are located at the entry's keys. `traces`: the load's traces
/// read so far (null: read them here).
Schedule parse_schedule(const config::Node& link, LinkSpec& base, std::uint64_t line_rate_bps, std::uint32_t mtu,
                        Diagnostics& diag, TraceCache* traces = nullptr);

/// Whether two directions carry the same conditions (where their keys were written aside).
bool same_conditions(Direction a, Direction b);

/// "at 10s: rate 5mbit; delay 40ms up" and the like, one line per step after the first, for
/// the plan.
std::vector<std::string> describe(const Schedule& s);

/// The figures a change sets, in base units, as the recorded series name them
/// (link.DIR.rate in bit/s, link.DIR.delay in seconds, link.DIR.loss as a fraction).
struct ScheduledFigures {
    double rate = 0, delay = 0, loss = 0;
};
ScheduledFigures figures_of(const Direction& d);

}  // namespace wanlab::netem
