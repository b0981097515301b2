#include "netem/schedule.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/units.h"
#include "netem/tc_command.h"

namespace wanlab::netem {
namespace {

using config::Node;
using config::Reader;
using std::chrono::nanoseconds;

// What an entry says besides the link keys it changes.
const std::set<std::string> kEventKeys{"at", "outage", "handover", "every", "for", "repeat"};

// Keys a schedule cannot change in place: they make or replace qdiscs (a new tree would leave
// an instant with no shaping), or belong to the whole run.
const std::set<std::string> kShapeKeys{"shaper", "qdisc", "qdisc_limit", "seed"};

void erase(Node& table, const std::string& key) {
    auto& m = table.members;
    m.erase(std::remove_if(m.begin(), m.end(), [&](const config::Member& x) { return x.first == key; }), m.end());
}

// The entry's keys over the link as the entries before left it: a key for both directions
// also replaces what [link.up]/[link.down] set of it, `delay` replaces `rtt` and the other
// way round (as a profile's keys are replaced, experiment/sections.cpp).
void apply_changes(Node& current, const Node& changes) {
    for (const auto& [key, value] : changes.members) {
        if (key == "up" || key == "down") {
            Node* dir = current.find(key);
            if (!dir || !dir->is_table()) {
                Node t;
                t.kind = Node::Kind::table;
                t.value_at = value.value_at;
                dir = &current.set(key, t);
            }
            for (const auto& [k, v] : value.members) dir->set(k, v);
            continue;
        }
        current.set(key, value);
        if (key == "delay") erase(current, "rtt");
        if (key == "rtt") erase(current, "delay");
        for (const char* name : {"up", "down"})
            if (Node* dir = current.find(name); dir && dir->is_table()) {
                erase(*dir, key);
                if (key == "rtt") erase(*dir, "delay");
            }
    }
}

// An outage of length `length`: netem drops every arriving packet (not ECN-marked, not
// duplicated: either would let a copy through), and holds what it has queued with a slot
// that opens only after the outage (kOutageHoldMargin later, so that the end of the outage,
// a change of its own, always comes first; netem/schedule.h).
Direction outage_of(Direction d, nanoseconds length) {
    d.netem.loss = Loss{};
    d.netem.loss.model = Loss::Model::random;
    d.netem.loss.probability = 1.0;
    d.netem.ecn = false;
    d.netem.duplicate = 0;
    d.netem.duplicate_correlation = 0;
    Slot hold;
    hold.min_delay = hold.max_delay = length + kOutageHoldMargin;
    hold.packets = 1;
    d.netem.slot = hold;
    return d;
}

// After an outage, on a direction whose rate is netem's own: a slot every kDrainSlot that lets
// kDrainPace of the rate's bytes for it leave (at least one frame), so what netem held drains
// at the rate (netem/schedule.h). netem opens the next slot only when a packet leaves after
// the last one closed, and a timer is late by tens of microseconds (hundreds under TCG): a
// slot of one frame per frame time carried 14-17 Mbit/s of a 20 Mbit/s rate in the micro-VM.
// And netem gives what arrives after the outage departures as if its queue were empty (the
// held packets' are past), so both are due at once: whatever was still due when the slot went
// left in one burst (a 100 ms window of 30 to 40 Mbit/s). A pace a little above the rate keeps
// the link near its rate while the held packets leave by the surplus (drain_time()); then
// netem's rate alone paces again. A slot the file set stays the file's.
constexpr nanoseconds kDrainSlot = std::chrono::milliseconds(5);
constexpr double kDrainPace = 1.05;
Direction draining_of(Direction d, std::uint32_t mtu) {
    if (d.rate_bps == 0 || d.shaper != Shaper::netem || d.netem.slot) return d;
    const std::uint64_t frame = mtu + 14;  // netem's rate counts the Ethernet header
    const auto frame_time = nanoseconds(frame * 8 * 1'000'000'000ull / d.rate_bps);
    Slot pace;
    pace.min_delay = pace.max_delay = std::max(frame_time, kDrainSlot);
    const long double bytes =
        static_cast<long double>(d.rate_bps) / 8 * kDrainPace * static_cast<long double>(pace.min_delay.count()) / 1e9L;
    pace.bytes = static_cast<std::uint32_t>(std::max<long double>(frame, std::min<long double>(bytes, 1u << 30)));
    d.netem.slot = pace;
    return d;
}

// How long netem's queue, full when the outage ended, takes to leave. Not at the rate: netem
// schedules what arrives after the outage as if the queue were empty (the held packets'
// departures are past), so the two share the slot, and the held ones drain only by the pace's
// surplus over the rate. The slot goes when they surely have (0 without a rate of netem's own).
nanoseconds drain_time(const Direction& d, std::uint32_t mtu) {
    if (d.rate_bps == 0 || d.shaper != Shaper::netem || d.netem.slot) return nanoseconds{0};
    long double s = static_cast<long double>(d.netem.limit_packets) * (mtu + 14) * 8 / d.rate_bps / (kDrainPace - 1);
    // In whole milliseconds, rounded up: the plan prints 12858ms, not 12857.466666ms.
    return nanoseconds(static_cast<std::int64_t>(std::ceil(std::min<long double>(s, 86400) * 1e3L)) * 1'000'000);
}

// Refuses keys that change the tree's shape, here or in an `up`/`down` table of the entry.
bool refuse_shape_keys(const Node& changes, const std::string& section, Diagnostics& diag) {
    bool ok = true;
    for (const auto& [key, value] : changes.members) {
        if (key == "up" || key == "down") {
            if (!value.is_table()) {
                diag.error(value.value_at, fmt::format("`{}` in {} must be a table of [link] keys", key, section));
                ok = false;
            } else if (!refuse_shape_keys(value, section, diag)) {
                ok = false;
            }
            continue;
        }
        if (kShapeKeys.count(key)) {
            diag.error(value.key_at,
                       fmt::format("`{}` cannot change during a measurement: it makes or replaces a qdisc, and a "
                                   "new tree leaves an instant with no shaping",
                                   key),
                       "set it in [link] (or compare values with a [[variant]] or [sweep]); a schedule changes "
                       "delay, jitter, loss, rate and the other netem figures in place");
            ok = false;
        } else if (key == "profile" || key == "schedule" || key == "trace" || key == "trace_window") {
            diag.error(value.key_at, fmt::format("`{}` cannot be set in a schedule entry", key),
                       "a schedule entry changes per-direction [link] keys (delay, rate, loss, ...)");
            ok = false;
        }
    }
    return ok;
}

// Where an entry sets `key`: in itself, else in its `dir` table (either direction's when `dir`
// is null); null when it does not.
const Node* changed_key(const Node& changes, const char* key, const char* dir = nullptr) {
    if (const Node* n = changes.find(key)) return n;
    for (const char* d : {"up", "down"}) {
        if (dir && std::string_view(d) != dir) continue;
        if (const Node* t = changes.find(d); t && t->is_table())
            if (const Node* n = t->find(key)) return n;
    }
    return nullptr;
}

// A tbf or htb shaper exists only with a rate: a step may change the rate, not remove it.
void check_shape(const Direction& base, const Direction& next, const char* dir, const Node& entry,
                 const std::string& section, Diagnostics& diag) {
    if (base.shaper == Shaper::netem || (base.rate_bps > 0) == (next.rate_bps > 0)) return;
    const Node* rate = changed_key(entry, "rate", dir);
    diag.error(rate ? rate->value_at : entry.value_at,
               fmt::format("{} leaves the {} direction without a rate, but its shaper = \"{}\" stays for the whole "
                           "measurement",
                           section, dir, to_string(base.shaper)),
               "give a rate above zero (an outage is `outage = \"2s\"`)");
}

std::string describe_direction(const Direction& before, const Direction& d, bool draining) {
    std::vector<std::string> parts;
    if (d.netem.delay != before.netem.delay || d.netem.jitter != before.netem.jitter)
        parts.push_back(d.netem.jitter.count() ? fmt::format("delay {} {}", units::format_duration(d.netem.delay),
                                                             units::format_duration(d.netem.jitter))
                                               : fmt::format("delay {}", units::format_duration(d.netem.delay)));
    if (d.rate_bps != before.rate_bps) parts.push_back(fmt::format("rate {}", units::format_rate(d.rate_bps)));
    if (!(d.netem.loss == before.netem.loss))
        parts.push_back(d.netem.loss.model == Loss::Model::none
                            ? std::string("no loss")
                            : netem_arguments(d.netem, {"limit", "rate", "delay", "jitter", "ecn", "seed"}));
    // Anything else netem carries (duplication, reordering, corruption, ...), as tc words.
    Direction a = before, b = d;
    a.netem.delay = b.netem.delay;
    a.netem.jitter = b.netem.jitter;
    a.rate_bps = b.rate_bps;
    a.netem.rate_bps = b.netem.rate_bps;
    a.netem.limit_packets = b.netem.limit_packets;
    a.netem.loss = b.netem.loss;
    if (draining) a.netem.slot = b.netem.slot;  // the pacing slot is said in words
    if (!same_conditions(a, b))
        parts.push_back(netem_arguments(d.netem, {"limit", "rate", "delay", "jitter", "loss", "loss_correlation"}));
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
    return out;
}

// Marks the directions a schedule changes, and makes its first step [link] itself.
void finish_schedule(Schedule& s, LinkSpec& base) {
    for (const auto& step : s.steps) {
        if (!same_conditions(step.up, base.up)) base.up.scheduled = true;
        if (!same_conditions(step.down, base.down)) base.down.scheduled = true;
    }
    for (auto& step : s.steps) {
        step.up.scheduled = base.up.scheduled;
        step.down.scheduled = base.down.scheduled;
        step.up.at.clear();  // where keys were written matters only while parsing
        step.down.at.clear();
    }
    s.steps.front().up = base.up;
    s.steps.front().down = base.down;
}

// --- traces --------------------------------------------------------------------------------

bool has_trace(const Node& link) {
    if (link.find("trace")) return true;
    for (const char* dir : {"up", "down"})
        if (const Node* d = link.find(dir); d && d->is_table() && d->find("trace")) return true;
    return false;
}

// One direction's `trace` and `trace_window`: [link.up]/[link.down] over [link].
struct TraceSetting {
    std::string file, path;
    nanoseconds window{std::chrono::milliseconds(100)};
    Location at;
    bool named = false;  ///< a `trace` names the file
};

// `table`'s `trace` and `trace_window` over `inherited` (what [link] says, for a direction).
TraceSetting trace_setting(const Node& table, const std::string& section, TraceSetting inherited, Diagnostics& diag) {
    TraceSetting t = std::move(inherited);
    Reader r(table, section, diag);
    if (auto w = r.duration("trace_window", std::chrono::milliseconds(1), std::chrono::hours(1))) t.window = *w;
    if (auto f = r.string("trace")) {
        t.named = true;
        t.file = *f;
        t.at = r.value_at("trace");
        std::filesystem::path p(*f);
        if (p.is_relative()) p = std::filesystem::path(t.at.file).parent_path() / p;
        t.path = p.string();
    }
    return t;
}

void apply_row(Direction& d, const TraceRow& row) {
    if (row.rate_bps) {
        d.rate_bps = *row.rate_bps;
        if (d.shaper == Shaper::netem) d.netem.rate_bps = *row.rate_bps;
    }
    if (row.delay) d.netem.delay = *row.delay;
    if (row.jitter) d.netem.jitter = *row.jitter;
    if (row.loss) {
        d.netem.loss = Loss{};
        if (*row.loss > 0) {
            d.netem.loss.model = Loss::Model::random;
            d.netem.loss.probability = *row.loss;
        }
    }
}

const TraceColumn* column_of(const Trace& t, const char* name) {
    for (const auto& c : t.columns)
        if (c.name == name) return &c;
    return nullptr;
}

// The steps of a link that follows traces: each row a step, both directions on one clock.
Schedule trace_schedule(const Node& link, LinkSpec& base, std::uint32_t mtu, TraceCache& traces, Diagnostics& diag) {
    Schedule s;
    s.steps.push_back({nanoseconds{0}, base.up, base.down, 0, false});
    struct Use {
        Direction* dir;
        const char* name;
        TraceSetting setting;
        const Trace* trace = nullptr;
    };
    std::vector<Use> uses;
    std::vector<ScheduledTrace> read;
    read.reserve(2);
    const std::size_t errors = diag.error_count();
    bool failed = false;
    // [link]'s keys read once (an error in them is one error), then each direction's over them.
    const TraceSetting shared = trace_setting(link, "[link]", {}, diag);
    for (auto [dir, name] : {std::pair{&base.up, "up"}, std::pair{&base.down, "down"}}) {
        const Node* own = link.find(name);
        auto setting =
            own && own->is_table() ? trace_setting(*own, fmt::format("[link.{}]", name), shared, diag) : shared;
        if (!setting.named) continue;
        // Both directions on the same file and window share one reading.
        auto same = std::find_if(uses.begin(), uses.end(), [&](const Use& u) {
            return u.setting.path == setting.path && u.setting.window == setting.window;
        });
        if (same != uses.end() && same->trace) {
            read.back().directions = "both";
            uses.push_back({dir, name, setting, same->trace});
            continue;
        }
        const Trace* trace = traces.read(setting.path, setting.file, setting.window, setting.at, diag);
        if (!trace) {
            failed = true;  // reported where a trial first named it
            continue;
        }
        read.push_back({name, *trace});
        uses.push_back({dir, name, setting, &read.back().trace});
    }
    if (failed || diag.error_count() != errors) return s;

    for (auto& u : uses) {
        Direction& d = *u.dir;
        const Trace& t = *u.trace;
        const TraceColumn* rate = column_of(t, "rate");
        if (rate && !d.at.count("shaper")) {
            d.shaper = kTraceShaper;
            d.netem.rate_bps = 0;
        } else if (rate && d.shaper == Shaper::netem) {
            diag.warning(d.at.at("shaper"),
                         fmt::format("the trace {} changes the rate under netem's own rate: what netem has queued "
                                     "leaves at the rate it had when it arrived, so each fall shows late",
                                     t.file),
                         "leave `shaper` out (a trace's rate goes to tbf) or set shaper = \"tbf\"");
        }
        // netem's queue holds what arrives during the delay: size it for the trace's worst.
        if (!d.netem.limit) {
            const TraceColumn* delay = column_of(t, "delay");
            const TraceColumn* jitter = column_of(t, "jitter");
            auto ns = [](double secs) { return nanoseconds(static_cast<std::int64_t>(secs * 1e9)); };
            d.netem.limit_packets =
                std::max(d.netem.limit_packets,
                         auto_limit(rate ? static_cast<std::uint64_t>(rate->max) : d.rate_bps,
                                    std::max(d.netem.delay, delay ? ns(delay->max) : nanoseconds{0}),
                                    std::max(d.netem.jitter, jitter ? ns(jitter->max) : nanoseconds{0}), mtu));
        }
        if (!t.rows.empty() && t.rows.front().at == nanoseconds{0}) apply_row(d, t.rows.front());
        if (d.shaper != Shaper::netem && d.rate_bps == 0)
            diag.error(u.setting.at,
                       rate ? fmt::format("the trace {} sets its first rate at {}, and [link] has no rate for the "
                                          "time before: shaper = \"{}\" needs one from the start",
                                          t.file, units::format_duration(t.rows.front().at), to_string(d.shaper))
                            : fmt::format("the trace {} has no rate column, and [link] no rate: shaper = \"{}\" "
                                          "needs one",
                                          t.file, to_string(d.shaper)),
                       "give [link] a `rate`, or start the trace at 0");
        const TraceColumn* delay = column_of(t, "delay");
        if (delay && delay->max > delay->min && d.netem.rate_bps == 0)
            diag.warning(u.setting.at,
                         fmt::format("the trace {}'s delay falls (from up to {:.1f} ms to {:.1f} ms): packets that "
                                     "arrive after a fall leave before some that arrived before it (netem orders its "
                                     "queue by departure), which TCP sees as loss",
                                     t.file, delay->max * 1e3, delay->min * 1e3),
                         "that is what a path whose delay falls does; with shaper = \"netem\" netem keeps the order");
    }
    if (diag.error_count() != errors) return s;
    s.steps.front() = {nanoseconds{0}, base.up, base.down, 0, false};

    // Every row of every trace on one clock: the longest trace is the period, a shorter one
    // starts over within it.
    nanoseconds period{0};
    for (const auto& u : uses) period = std::max(period, u.trace->period);
    struct Event {
        nanoseconds at;
        Direction* dir;  // base.up or base.down: which of the two current states it changes
        const TraceRow* row;
    };
    std::vector<Event> events;
    for (const auto& u : uses) {
        const Trace& t = *u.trace;
        for (nanoseconds offset{0}; offset == nanoseconds{0} || (t.period.count() && offset < period);
             offset += t.period) {
            for (const auto& row : t.rows) {
                nanoseconds at = offset + row.at;
                if (at == nanoseconds{0}) continue;  // in [link] already
                if (period.count() && at >= period) break;
                events.push_back({at, u.dir, &row});
            }
            if (!t.period.count()) break;
            if (events.size() > kMaxScheduleSteps * 2) break;
        }
    }
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.at < b.at; });
    Direction up = base.up, down = base.down;
    for (std::size_t i = 0; i < events.size();) {
        const nanoseconds at = events[i].at;
        for (; i < events.size() && events[i].at == at; ++i)
            apply_row(events[i].dir == &base.up ? up : down, *events[i].row);
        const auto& last = s.steps.back();
        if (same_conditions(up, last.up) && same_conditions(down, last.down)) continue;
        if (s.steps.size() >= kMaxScheduleSteps) {
            diag.error(uses.front().setting.at,
                       fmt::format("the trace makes more than {} changes of the link over {}", kMaxScheduleSteps,
                                   units::format_duration(period)),
                       "widen `trace_window` (mahimahi), or average a CSV trace over longer rows");
            s.steps.resize(1);
            return s;
        }
        ScheduleStep step{at, up, down, 0, false};
        step.from_trace = true;
        s.steps.push_back(std::move(step));
    }
    if (s.steps.size() > 1 && period.count()) s.period = period;
    s.traces = std::move(read);
    finish_schedule(s, base);
    return s;
}

}  // namespace

bool same_conditions(Direction a, Direction b) {
    a.at.clear();
    b.at.clear();
    a.scheduled = b.scheduled = false;
    return a == b;
}

const ScheduleStep& Schedule::at(nanoseconds t) const {
    if (period.count() > 0 && t >= period) t = t % period;
    auto it =
        std::upper_bound(steps.begin(), steps.end(), t, [](nanoseconds v, const ScheduleStep& s) { return v < s.at; });
    return it == steps.begin() ? steps.front() : *std::prev(it);
}

ScheduledFigures figures_of(const Direction& d) {
    ScheduledFigures f;
    f.rate = static_cast<double>(d.rate_bps);
    f.delay = static_cast<double>(d.netem.delay.count()) / 1e9;
    const Loss& l = d.netem.loss;
    switch (l.model) {
        case Loss::Model::random: f.loss = l.probability; break;
        case Loss::Model::gemodel: {
            // Stationary: the share of time in the bad state is p / (p + r).
            double bad = l.probability + l.r > 0 ? l.probability / (l.probability + l.r) : 0;
            f.loss = bad * l.one_minus_h + (1 - bad) * l.one_minus_k;
            break;
        }
        case Loss::Model::state: f.loss = -1; break;  // no closed form kept: not recorded
        default: f.loss = 0;
    }
    return f;
}

Schedule parse_schedule(const Node& link, LinkSpec& base, std::uint64_t line_rate_bps, std::uint32_t mtu,
                        Diagnostics& diag, TraceCache* traces) {
    const Node* entries = link.find("schedule");
    // A window with no trace to count it over would be ignored without a word.
    for (const char* dir : {"", "up", "down"}) {
        const Node* table = *dir ? link.find(dir) : &link;
        if (!table || !table->is_table()) continue;
        const Node* window = table->find("trace_window");
        if (!window || table->find("trace") || (*dir && link.find("trace")) || (!*dir && has_trace(link))) continue;
        diag.warning(window->key_at,
                     fmt::format("`trace_window` has no effect here: no trace is named for {}",
                                 *dir ? fmt::format("[link.{}]", dir) : std::string("[link]")),
                     "name one (`trace = \"FILE\"`, in mahimahi's format or a CSV), or drop `trace_window`");
    }
    if (has_trace(link)) {
        if (entries) {
            diag.error(entries->key_at, "a link follows a trace or a [[link.schedule]], not both",
                       "put the changes in the trace (a CSV trace has rate, delay, jitter and loss columns), or "
                       "drop `trace`");
            Schedule s;
            s.steps.push_back({nanoseconds{0}, base.up, base.down, 0, false});
            return s;
        }
        TraceCache own;
        return trace_schedule(link, base, mtu, traces ? *traces : own, diag);
    }
    Schedule s;
    s.steps.push_back({nanoseconds{0}, base.up, base.down, 0, false});
    if (!entries) return s;
    if (entries->kind != Node::Kind::table_array) {
        diag.error(entries->value_at, "`schedule` must be an array of tables",
                   "write each change as a [[link.schedule]] entry with `at` and the keys it changes");
        return s;
    }
    Node current = link;
    erase(current, "schedule");
    Direction up = base.up, down = base.down;  // the link as the entries so far leave it
    nanoseconds last_at{-1}, free_from{0};
    std::size_t last_entry = 0;
    bool repeated = false;
    for (std::size_t i = 0; i < entries->items.size(); ++i) {
        const Node& entry = entries->items[i];
        const std::string section = fmt::format("[[link.schedule]] #{}", i + 1);
        const std::size_t errors = diag.error_count();
        if (repeated) {
            diag.error(entry.value_at, fmt::format("{} comes after the entry with `repeat = true`", section),
                       "`repeat` marks the end of the schedule's period: put it last");
            break;
        }
        Reader r(entry, section, diag);
        auto at = r.duration("at");
        auto outage = r.duration("outage", std::chrono::milliseconds(1));
        auto handover = r.duration("handover", std::chrono::milliseconds(1));
        auto every = r.duration("every", std::chrono::milliseconds(1));
        auto span = r.duration("for", std::chrono::milliseconds(1));
        auto repeat = r.boolean("repeat");
        Node changes;
        changes.kind = Node::Kind::table;
        changes.value_at = entry.value_at;
        for (const auto& [key, value] : entry.members)
            if (!kEventKeys.count(key)) {
                r.raw(key);
                changes.members.emplace_back(key, value);
            }
        r.finish();
        if (!r.has("at")) {
            diag.error(entry.value_at, fmt::format("{} needs `at`", section),
                       "`at` is when, from the start of each measurement, the entry takes effect: at = \"10s\"");
            continue;
        }
        if (!at) continue;
        if (*at <= last_at) {
            diag.error(r.value_at("at"),
                       fmt::format("`at` = {} is not after the entry before ({}): entries are in time order",
                                   units::format_duration(*at), units::format_duration(last_at)));
        } else if (*at < free_from) {
            diag.error(r.value_at("at"),
                       fmt::format("`at` = {} comes before entry #{} has ended (at {})", units::format_duration(*at),
                                   last_entry, units::format_duration(free_from)),
                       "an entry starts once the outages of the one before are over");
        }
        if (repeat && *repeat) {
            if (!changes.members.empty() || outage || handover || every || span)
                diag.error(r.key_at("repeat"),
                           fmt::format("{} has `repeat = true` and more: it only marks where the schedule starts "
                                       "over from [link]",
                                       section),
                           "write `repeat = true` in an entry of its own, with `at` = the period");
            else if (*at == nanoseconds{0})
                diag.error(r.value_at("at"), "the period of a repeating schedule must be longer than 0");
            repeated = true;
            if (diag.error_count() == errors) s.period = *at;
            continue;
        }
        if (outage && handover)
            diag.error(r.key_at("handover"), fmt::format("{} has both `outage` and `handover`", section),
                       "a handover is an outage after which the entry's keys hold: keep one of them");
        if (handover && changes.members.empty())
            diag.error(r.key_at("handover"),
                       fmt::format("{}: a handover changes the path, but no key changes", section),
                       "give what holds after it (delay = \"40ms\", rate = ...), or write `outage` for a break alone");
        if (outage && !changes.members.empty())
            diag.error(
                r.key_at("outage"),
                fmt::format("{} has an outage and changes keys: an outage gives the link back as it was", section),
                "to change the path across the break write `handover` instead of `outage`");
        if (every && !outage && !handover)
            diag.error(r.key_at("every"), fmt::format("`every` repeats {}'s outage, but it has none", section),
                       "add `outage = \"300ms\"` (a flapping link), or `handover`");
        if (every && !span) diag.error(r.key_at("every"), "`every` needs `for`: how long the link keeps flapping");
        if (span && !every) diag.error(r.key_at("for"), "`for` needs `every`: how often the outage recurs");
        nanoseconds brk = outage ? *outage : handover ? *handover : nanoseconds{0};
        if (every && brk.count() && *every <= brk)
            diag.error(r.value_at("every"),
                       fmt::format("`every` = {} is not longer than the outage ({}): the link would never come back",
                                   units::format_duration(*every), units::format_duration(brk)));
        last_at = std::max(last_at, *at);  // later entries are ordered against this one, even if it is refused
        if (!refuse_shape_keys(changes, section, diag)) continue;
        check_link_keys(changes, section, diag, true);
        for (const char* dir : {"up", "down"})
            if (const Node* d = changes.find(dir); d && d->is_table())
                check_link_keys(*d, fmt::format("{} {}", section, dir), diag, false);
        if (diag.error_count() != errors) continue;

        apply_changes(current, changes);
        Diagnostics scratch;
        LinkSpec next = parse_link(current, scratch);
        validate_link(next, scratch);
        resolve_limit(next.up, line_rate_bps, mtu, scratch);
        resolve_limit(next.down, line_rate_bps, mtu, scratch);
        // A rate that falls to zero under a tbf or htb shaper is told once, in its own words.
        check_shape(base.up, next.up, "up", changes, section, diag);
        if (diag.error_count() == errors) check_shape(base.down, next.down, "down", changes, section, diag);
        const std::string as = fmt::format("as {} leaves the link", section);
        for (const auto& d : diag.error_count() != errors ? std::vector<Diagnostic>{} : scratch.items()) {
            if (d.severity == Severity::error && !diag.reported_at(d.where))
                diag.error(d.where, d.message, d.note.empty() ? as : d.note);
            else if (d.severity != Severity::error)
                diag.warning(d.where, d.message, d.note);
        }
        if (diag.error_count() != errors) continue;

        // netem fixes each packet's departure when it arrives: a rate that falls under netem's
        // own rate reaches what it has queued only once that has left at the old rate.
        for (const auto& [was_p, now_p] : {std::pair{&up, &next.up}, std::pair{&down, &next.down}}) {
            const Direction& was = *was_p;
            const Direction& now = *now_p;
            if (now.shaper != Shaper::netem || now.rate_bps >= was.rate_bps || now.rate_bps == 0) continue;
            const Node* rate = changed_key(changes, "rate");
            double queued_ms =
                static_cast<double>(was.netem.limit_packets) * (mtu + 14) * 8 / static_cast<double>(was.rate_bps) * 1e3;
            diag.warning(rate ? rate->key_at : entry.value_at,
                         fmt::format("the rate falls from {} to {} under netem's own rate: what netem has queued "
                                     "then still leaves at {} (up to {} packets, {:.0f} ms), so the step shows "
                                     "only after that",
                                     units::format_rate(was.rate_bps), units::format_rate(now.rate_bps),
                                     units::format_rate(was.rate_bps), was.netem.limit_packets, queued_ms),
                         "set shaper = \"tbf\" (or \"htb\") in [link]: the shaper's queue drains at the new rate "
                         "at once");
            break;
        }
        // A delay that falls lets later packets overtake earlier ones, except under netem's own
        // rate (which never sends a packet before the one queued ahead of it).
        for (const auto& [was_p, now_p] : {std::pair{&up, &next.up}, std::pair{&down, &next.down}}) {
            const Direction& was = *was_p;
            const Direction& now = *now_p;
            if (now.netem.delay >= was.netem.delay || now.netem.rate_bps > 0) continue;
            const Node* delay = changes.find("delay") ? changes.find("delay") : changes.find("rtt");
            if (!delay) delay = changed_key(changes, "delay");
            diag.warning(delay ? delay->key_at : entry.value_at,
                         fmt::format("the delay falls from {} to {}: packets that arrive in the {} after the change "
                                     "leave before some that arrived in the {} before it (netem orders its queue by "
                                     "departure): TCP sees that reordering as loss",
                                     units::format_duration(was.netem.delay), units::format_duration(now.netem.delay),
                                     units::format_duration(was.netem.delay - now.netem.delay),
                                     units::format_duration(was.netem.delay - now.netem.delay)),
                         "to keep the order, give the link netem's own rate (`rate` with shaper = \"netem\"), or "
                         "lower the delay in smaller steps");
            break;
        }
        auto push = [&](nanoseconds when, const Direction& u, const Direction& d, bool is_outage) {
            if (s.steps.size() >= kMaxScheduleSteps) return false;
            s.steps.push_back({when, u, d, i + 1, is_outage});
            return true;
        };
        bool fits = true;
        if (brk.count()) {
            for (std::size_t k = 0; fits; ++k) {
                nanoseconds start = *at + (every ? *every * static_cast<std::int64_t>(k) : nanoseconds{0});
                if (k > 0 && (!every || start >= *at + *span)) break;
                const Direction& from_up = k == 0 ? up : next.up;
                const Direction& from_down = k == 0 ? down : next.down;
                nanoseconds drain = std::max(drain_time(next.up, mtu), drain_time(next.down, mtu));
                fits = push(start, outage_of(from_up, brk), outage_of(from_down, brk), true) &&
                       (drain.count() == 0
                            ? push(start + brk, next.up, next.down, false)
                            : push(start + brk, draining_of(next.up, mtu), draining_of(next.down, mtu), false) &&
                                  push(start + brk + drain, next.up, next.down, false));
                if (drain.count() && fits) {
                    s.steps[s.steps.size() - 2].draining = true;
                    s.steps.back().drained = true;
                }
            }
        } else {
            fits = push(*at, next.up, next.down, false);
        }
        if (!fits) {
            diag.error(entry.value_at,
                       fmt::format("the schedule expands to more than {} changes at {}", kMaxScheduleSteps, section),
                       "a flapping link makes two changes per outage: lengthen `every` or shorten `for`");
            s.steps.resize(1);
            break;
        }
        up = next.up;
        down = next.down;
        last_entry = i + 1;
        free_from = s.steps.back().drained ? s.steps[s.steps.size() - 2].at : s.steps.back().at;
    }
    // The last change an entry makes (a drain's end is the pacing's, and the period cuts it).
    nanoseconds last_change{0};
    for (const auto& st : s.steps)
        if (!st.drained) last_change = std::max(last_change, st.at);
    if (s.period.count() && s.period <= last_change && s.steps.size() > 1)
        diag.error(entries->items.back().value_at,
                   fmt::format("the schedule repeats every {}, but its last change is at {}",
                               units::format_duration(s.period), units::format_duration(last_change)),
                   "the entry with `repeat = true` comes after every change");
    // A drain that a later change (or the next outage of a flapping link) overtakes ends there:
    // that change's state has no pacing slot.
    std::vector<ScheduleStep> kept;
    kept.reserve(s.steps.size());
    for (std::size_t i = 0; i < s.steps.size(); ++i)
        if (!(s.steps[i].drained && i + 1 < s.steps.size() && s.steps[i].at >= s.steps[i + 1].at))
            kept.push_back(std::move(s.steps[i]));
    s.steps = std::move(kept);
    if (s.period.count())
        while (s.steps.size() > 1 && s.steps.back().drained && s.steps.back().at >= s.period) s.steps.pop_back();
    finish_schedule(s, base);
    return s;
}

std::vector<std::string> describe(const Schedule& s) {
    std::vector<std::string> out;
    // A trace's thousands of rows are told as the trace itself.
    for (const auto& t : s.traces)
        out.push_back(
            fmt::format("{} follows {}", t.directions == "both" ? "each direction" : t.directions, describe(t.trace)));
    if (!s.traces.empty()) return out;
    for (std::size_t i = 1; i < s.steps.size(); ++i) {
        // After an outage, what changed is told against the link before it.
        std::size_t before = i - 1;
        while (before > 0 && s.steps[before].outage) --before;
        const auto& prev = s.steps[before];
        const auto& step = s.steps[i];
        std::string what;
        if (step.outage) {
            what = "outage: nothing passes";
        } else {
            auto u = describe_direction(prev.up, step.up, step.draining);
            auto d = describe_direction(prev.down, step.down, step.draining);
            if (s.steps[i - 1].outage)
                what = step.draining ? "link back, what was held leaves at the rate" : "link back";
            if (step.drained) {
                out.push_back(fmt::format("at {} (#{}): the held queue has left: netem's rate alone paces again",
                                          units::format_duration(step.at), step.entry));
                continue;
            }
            if (u == d && !u.empty())
                what += (what.empty() ? "" : ", ") + u;
            else {
                if (!u.empty()) what += (what.empty() ? "up " : "; up ") + u;
                if (!d.empty()) what += (what.empty() ? "down " : "; down ") + d;
            }
            if (what.empty()) what = "no change";
        }
        out.push_back(fmt::format("at {} (#{}): {}", units::format_duration(step.at), step.entry, what));
    }
    if (s.period.count())
        out.push_back(fmt::format("at {}: starts over from [link], every {}", units::format_duration(s.period),
                                  units::format_duration(s.period)));
    return out;
}

}  // namespace wanlab::netem
