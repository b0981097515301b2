#include "run/schedule_check.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "probes/sockets.h"

namespace wanlab::run {
namespace {

// One state of one direction: from the kernel's ACK of the change that set it to the next.
struct Span {
    double from = 0, to = 0;
    std::size_t step = 0;
};

std::vector<Span> spans_of(const netem::PlayLog& log, const std::string& dir, double end) {
    std::vector<Span> out{{0, end, 0}};
    for (const auto& c : log.changes)
        if (c.direction == dir || c.direction == "both") {
            out.back().to = c.applied;
            out.push_back({c.applied, end, c.step});
        }
    return out;
}

// The state that held all of [a, b], at least kScheduleGuard from either change around it.
const Span* within(const std::vector<Span>& spans, double a, double b) {
    for (std::size_t i = 0; i < spans.size(); ++i) {
        const auto& s = spans[i];
        const bool first = i == 0, last = i + 1 == spans.size();
        if (a >= s.from + (first ? 0 : kScheduleGuard) && b <= s.to - (last ? 0 : kScheduleGuard)) return &s;
    }
    return nullptr;
}

const netem::Direction& state(const netem::Schedule& s, std::size_t step, const std::string& dir) {
    return s.steps[step].of(dir);
}

}  // namespace

ScheduleCheck check_schedule(const netem::Schedule& schedule, const netem::PlayLog& log,
                             const probes::SeriesMap& series, std::uint32_t mtu) {
    ScheduleCheck c;
    std::vector<std::string> missed;
    if (!log.error.empty()) missed.push_back("the schedule stopped " + log.error);
    double end = log.ended;
    for (const auto& [name, s] : series)
        if (s.size()) end = std::max(end, s.t.back());

    // What the link delivered, window by window, against what the states in force over the
    // window allowed.
    std::size_t over = 0;
    double worst_excess = 0;
    std::string worst;
    for (const std::string dir : {"up", "down"}) {
        if (!state(schedule, 0, dir).scheduled) continue;
        auto it = series.find(fmt::format("qdisc.{}.netem.throughput", dir));
        if (it == series.end()) continue;
        const auto spans = spans_of(log, dir, end);
        auto rate_of = [&](const Span& sp) {
            return schedule.steps[sp.step].outage ? 0.0 : static_cast<double>(state(schedule, sp.step, dir).rate_bps);
        };
        double a = 0;
        for (std::size_t k = 0; k < it->second.size(); a = it->second.t[k], ++k) {
            const double b = it->second.t[k], v = it->second.value[k];
            if (b - a < 0.05) continue;  // a short last sample: too few packets to judge a rate
            double allowed = 0;          // bits
            bool unlimited = false;
            for (std::size_t i = 0; i < spans.size(); ++i) {
                const auto& sp = spans[i];
                const double lo = std::max(a, sp.from), hi = std::min(b, sp.to);
                if (hi <= lo) continue;
                if (rate_of(sp) == 0 && !schedule.steps[sp.step].outage) unlimited = true;
                allowed += rate_of(sp) * (hi - lo);
            }
            // Within kScheduleGuard of a change, the larger of the two rates: the clocks of
            // the samples and of the schedule differ by that much.
            for (std::size_t i = 1; i < spans.size(); ++i) {
                const double lo = std::max(a, spans[i].from - kScheduleGuard);
                const double hi = std::min(b, spans[i].from + kScheduleGuard);
                if (hi > lo) allowed += std::abs(rate_of(spans[i]) - rate_of(spans[i - 1])) * (hi - lo);
            }
            if (unlimited) continue;  // no rate in force for part of it: nothing to exceed
            ++c.windows;
            const double limit = allowed * (1 + kScheduleRateSlack) + 2.0 * (mtu + 14) * 8;
            const double carried = v * (b - a);
            if (carried <= limit) continue;
            ++over;
            if (carried - limit > worst_excess) {
                worst_excess = carried - limit;
                worst = fmt::format(
                    "{} carried {:.2f} Mbit/s from {:.2f} to {:.2f} s, where the schedule allowed "
                    "{:.2f} Mbit/s",
                    dir, v / 1e6, a, b, allowed / (b - a) / 1e6);
            }
        }
    }
    if (over)
        missed.push_back(fmt::format("{} of {} windows carried more than the schedule allowed (the most: {})", over,
                                     c.windows, worst));

    // RTT samples against the delay in force both ways.
    std::size_t under = 0;
    double worst_short = 0;
    std::string shortest;
    if (auto rtt = series.find("rtt");
        rtt != series.end() && (state(schedule, 0, "up").scheduled || state(schedule, 0, "down").scheduled)) {
        const auto up = spans_of(log, "up", end), down = spans_of(log, "down", end);
        for (std::size_t k = 0; k < rtt->second.size(); ++k) {
            const double a = rtt->second.t[k], v = rtt->second.value[k], b = a + v;
            const Span* su = within(up, a, b);
            const Span* sd = within(down, a, b);
            if (!su || !sd || schedule.steps[su->step].outage || schedule.steps[sd->step].outage) continue;
            const auto& u = state(schedule, su->step, "up").netem;
            const auto& d = state(schedule, sd->step, "down").netem;
            const double floor = probes::seconds(u.delay - std::min(u.delay, u.jitter)) +
                                 probes::seconds(d.delay - std::min(d.delay, d.jitter));
            if (floor <= 0) continue;
            ++c.rtts;
            const double least = 0.95 * floor - 0.0002;
            if (v >= least) continue;
            ++under;
            if (least - v > worst_short) {
                worst_short = least - v;
                shortest = fmt::format("{:.2f} ms at {:.2f} s, where {:.1f} ms of delay was in force", v * 1e3, a,
                                       floor * 1e3);
            }
        }
    }
    if (under)
        missed.push_back(fmt::format("{} of {} RTT samples were shorter than the delay in force (the shortest: {})",
                                     under, c.rtts, shortest));

    c.held = missed.empty();
    std::string compared =
        fmt::format("{} link windows and {} RTT samples compared with the state in force", c.windows, c.rtts);
    if (c.held) {
        c.note = compared;
    } else {
        for (const auto& m : missed) c.note += (c.note.empty() ? "" : "; ") + m;
        c.note += " (" + compared + ")";
    }
    return c;
}

InForce in_force(const netem::Schedule& schedule, const netem::PlayLog& log, double from, double to) {
    InForce f;
    const auto up = spans_of(log, "up", to), down = spans_of(log, "down", to);
    // Every instant either direction changed, so each piece between them has one state each.
    std::vector<double> cuts{from, to};
    for (const auto* spans : {&up, &down})
        for (const auto& sp : *spans)
            if (sp.from > from && sp.from < to) cuts.push_back(sp.from);
    std::sort(cuts.begin(), cuts.end());
    // The step in force just before t (a change at t itself begins what follows).
    auto step_at = [](const std::vector<Span>& spans, double t) {
        std::size_t step = 0;
        for (const auto& sp : spans)
            if (sp.from < t) step = sp.step;
        return step;
    };
    double bits = 0;
    bool unknown = false;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
        const double a = cuts[i], b = cuts[i + 1], mid = (a + b) / 2;
        if (b <= a) continue;
        const std::size_t su = step_at(up, mid), sd = step_at(down, mid);
        if (schedule.steps[su].outage || schedule.steps[sd].outage) {
            f.outage += b - a;
            continue;
        }
        double slowest = 0;  // 0: neither direction has a rate
        for (double r : {static_cast<double>(state(schedule, su, "up").rate_bps),
                         static_cast<double>(state(schedule, sd, "down").rate_bps)})
            if (r > 0 && (slowest == 0 || r < slowest)) slowest = r;
        if (slowest == 0) unknown = true;
        bits += slowest * (b - a);
    }
    if (!unknown && to > from) f.rate = bits / (to - from);
    const auto& u = state(schedule, step_at(up, to), "up");
    const auto& d = state(schedule, step_at(down, to), "down");
    f.rtt = probes::seconds(u.netem.delay) + probes::seconds(d.netem.delay);
    f.loss = std::max(netem::figures_of(u).loss, netem::figures_of(d).loss);
    return f;
}

InForce in_force_over(const netem::Schedule& schedule, const netem::PlayLog& log, const probes::SeriesMap& series) {
    double end = 0;
    for (const auto& [name, s] : series)
        if (name.find('.') == std::string::npos && s.size()) end = std::max(end, s.t.back());
    if (auto it = series.find("throughput"); it != series.end() && it->second.size()) end = it->second.t.back();
    return in_force(schedule, log, 0, end > 0 ? end : log.ended);
}

nlohmann::json to_json(const InForce& f) {
    nlohmann::json j = {{"outage", f.outage}, {"rtt", f.rtt}, {"loss", f.loss}};
    if (std::isfinite(f.rate)) j["rate"] = f.rate;
    return j;
}

nlohmann::json phases_of(const netem::Schedule& schedule, const netem::PlayLog& log, const probes::SeriesMap& series) {
    nlohmann::json out = nlohmann::json::array();
    if (!schedule.traces.empty()) return out;
    double end = log.ended;
    for (const auto& [name, s] : series)
        if (s.size()) end = std::max(end, s.t.back());
    struct Phase {
        std::size_t entry;
        double from, to;
    };
    std::vector<Phase> phases{{0, 0, end}};
    for (const auto& c : log.changes) {
        const std::size_t entry = schedule.steps[c.step].entry;
        if (entry == phases.back().entry) continue;
        phases.back().to = c.applied;
        phases.push_back({entry, c.applied, end});
    }
    if (phases.size() < 2) return out;
    for (std::size_t i = 0; i < phases.size(); ++i) {
        const auto& p = phases[i];
        const bool last = i + 1 == phases.size();  // holds the measurement's last sample
        nlohmann::json medians = nlohmann::json::object();
        for (const auto& [name, s] : series) {
            if (name.find('.') != std::string::npos) continue;  // per stream, link.*, qdisc.*
            std::vector<double> in;
            for (std::size_t k = 0; k < s.size(); ++k)
                if (s.t[k] >= p.from && (s.t[k] < p.to || (last && s.t[k] <= p.to)) && std::isfinite(s.value[k]))
                    in.push_back(s.value[k]);
            if (in.empty()) continue;
            auto mid = in.begin() + static_cast<std::ptrdiff_t>(in.size() / 2);
            std::nth_element(in.begin(), mid, in.end());
            double median = *mid;
            if (in.size() % 2 == 0) median = (median + *std::max_element(in.begin(), mid)) / 2;
            medians[name] = median;
        }
        out.push_back({{"entry", p.entry},
                       {"from", p.from},
                       {"to", p.to},
                       {"medians", medians},
                       {"link", to_json(in_force(schedule, log, p.from, p.to))}});
    }
    return out;
}

}  // namespace wanlab::run
