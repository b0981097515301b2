#include "report/html.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "probes/series.h"
#include "report/assets.h"

namespace wanlab::report::html {
namespace {

using json = nlohmann::ordered_json;
using detail::Cell;
using detail::kNone;
using detail::Model;

// A page stays quick to open: time series beyond this many points in all are thinned
// (every k-th point of each series kept, and the page says so).
constexpr std::size_t kMaxSeriesPoints = 60000;
// A latency distribution is drawn from this many quantiles of its samples.
constexpr int kQuantiles = 200;

constexpr const char* kHeld = "held";
constexpr const char* kNotHeld = "did not hold";

json scaled(double v, double divisor) { return std::isfinite(v) ? json(v / divisor) : json(); }

std::string trial_label(const results::Trial& t) {
    auto point = detail::point_label(t);
    return point.empty() ? t.variant : t.variant + " @ " + point;
}

std::string emulation(const results::Trial* t) { return detail::emulation_failed(t) ? kNotHeld : kHeld; }

/// Shape and legend that mark the points of trials whose emulation did not hold.
json emulation_shape() {
    return {{"field", "emulation"},
            {"type", "nominal"},
            {"title", "emulation"},
            {"scale", {{"domain", {kHeld, kNotHeld}}, {"range", {"circle", "cross"}}}}};
}

json base_spec(const std::string& title, const std::string& data_name, json values) {
    return {{"title", title},
            {"width", 520},
            {"height", 260},
            {"data", {{"name", data_name}, {"values", std::move(values)}}}};
}

double largest(const std::vector<double>& values) {
    double m = 0;
    for (double v : values)
        if (std::isfinite(v)) m = std::max(m, std::fabs(v));
    return m;
}

std::string axis_title(const std::string& what, const AxisUnit& u) { return what + " (" + u.label + ")"; }

// --- the sweep: a line per variant over the sweep axis --------------------------------------

std::vector<Chart> pivot_charts(const Model& m) {
    std::vector<Chart> out;
    if (!m.pivot) return out;
    const auto& pv = *m.pivot;
    auto unit = pv.spec ? pv.spec->unit : probes::Unit::count;
    for (std::size_t g = 0; g < pv.groups.size(); ++g) {
        const auto& group = pv.groups[g];
        std::vector<double> all;
        for (const auto& [key, cell] : group.cells)
            all.push_back(cell.summary.high), all.push_back(cell.summary.median);
        auto u = axis_unit(unit, largest(all));
        json values = json::array();
        for (std::size_t r = 0; r < group.rows.size(); ++r)
            for (const auto& column : group.columns) {
                auto it = group.cells.find({group.rows[r], column});
                if (it == group.cells.end() || it->second.summary.n == 0) continue;
                const auto& c = it->second;
                values.push_back({{"x", group.rows[r]},
                                  {"order", r},
                                  {"series", column},
                                  {"median", scaled(c.summary.median, u.divisor)},
                                  {"low", scaled(c.summary.low, u.divisor)},
                                  {"high", scaled(c.summary.high, u.divisor)},
                                  {"n", c.summary.n},
                                  {"emulation", emulation(c.trial)},
                                  {"failed", detail::number<json>(c.tally.failed)},
                                  {"attempted", detail::number<json>(c.tally.attempted)},
                                  {"text", detail::human_ci(unit, c.summary) + c.tally.text()}});
            }
        auto what = pv.probe.name + "." + pv.metric;
        auto title = fmt::format("{} against {}{}", what, pv.row_key, group.label.empty() ? "" : ": " + group.label);
        json spec = base_spec(title, "pivot", values);
        spec["encoding"] = {{"x",
                             {{"field", "x"},
                              {"type", "ordinal"},
                              {"sort", {{"field", "order"}}},
                              {"title", pv.row_key},
                              // labelLimit 0: whole labels (Vega-Lite cuts them at 180 px)
                              {"axis", {{"labelAngle", 0}, {"labelLimit", 0}}}}},
                            {"color", {{"field", "series"}, {"type", "nominal"}, {"title", pv.column_key}}}};
        json y = {{"field", "median"}, {"type", "quantitative"}, {"title", axis_title("median " + what, u)}};
        json tooltip = json::array({{{"field", "series"}, {"title", pv.column_key}},
                                    {{"field", "x"}, {"title", pv.row_key}},
                                    {{"field", "text"}, {"title", "median [CI]"}},
                                    {{"field", "n"}, {"title", "repeats"}},
                                    {{"field", "emulation"}}});
        spec["layer"] = json::array(
            {{{"mark", {{"type", "line"}}}, {"encoding", {{"y", y}}}},
             {{"mark", {{"type", "rule"}}},
              {"encoding", {{"y", {{"field", "low"}, {"type", "quantitative"}}}, {"y2", {{"field", "high"}}}}}},
             {{"mark", {{"type", "tick"}, {"size", 10}}},
              {"encoding", {{"y", {{"field", "low"}, {"type", "quantitative"}}}}}},
             {{"mark", {{"type", "tick"}, {"size", 10}}},
              {"encoding", {{"y", {{"field", "high"}, {"type", "quantitative"}}}}}},
             {{"mark", {{"type", "point"}, {"filled", true}, {"size", 70}}},
              {"encoding", {{"y", y}, {"shape", emulation_shape()}, {"tooltip", tooltip}}}}});
        out.push_back({fmt::format("pivot-{}", g), title, std::move(spec)});
    }
    return out;
}

// --- before/after: bars per variant with intervals and significance marks -------------------

std::vector<Chart> before_after_charts(const Model& m) {
    // One chart per probe and metric, in the table's order.
    std::vector<std::pair<std::string, std::string>> order;
    std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> rows_of;
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
        const auto& base = m.cells[m.rows[i].base];
        std::pair<std::string, std::string> key{base.probe.name, base.metric};
        if (!rows_of.count(key)) order.push_back(key);
        rows_of[key].push_back(i);
    }
    bool sweep = detail::has_sweep(*m.data);
    std::vector<Chart> out;
    for (const auto& key : order) {
        const auto& first = m.cells[m.rows[rows_of[key].front()].base];
        auto unit = first.spec ? first.spec->unit : probes::Unit::count;
        std::vector<double> all;
        std::vector<std::pair<const Cell*, const detail::Row*>> cells;  // each cell once, with its row if compared
        std::set<std::size_t> seen;
        for (auto i : rows_of[key]) {
            const auto& r = m.rows[i];
            if (seen.insert(r.base).second) cells.emplace_back(&m.cells[r.base], nullptr);
            if (r.other != kNone && seen.insert(r.other).second) cells.emplace_back(&m.cells[r.other], &r);
        }
        for (const auto& [c, r] : cells) all.push_back(c->summary.high), all.push_back(c->summary.median);
        auto u = axis_unit(unit, largest(all));
        json values = json::array();
        for (const auto& [c, r] : cells) {
            if (c->summary.n == 0) continue;
            bool significant = r && r->diff.significant;
            values.push_back({{"point", c->point.empty() ? "-" : c->point},
                              {"variant", c->variant},
                              {"median", scaled(c->summary.median, u.divisor)},
                              {"low", scaled(c->summary.low, u.divisor)},
                              {"high", scaled(c->summary.high, u.divisor)},
                              {"n", c->summary.n},
                              {"delta", r ? detail::signed_percent(r->diff.delta) : "baseline"},
                              {"significant", significant},
                              {"mark", significant ? (r->diff.better ? "* better" : "* worse") : ""},
                              {"emulation", emulation(c->trial)},
                              {"failed", detail::number<json>(c->tally.failed)},
                              {"attempted", detail::number<json>(c->tally.attempted)},
                              {"text", detail::cell_text(*c)}});
        }
        auto what = key.first + "." + key.second;
        auto title = fmt::format("{}: median and CI per variant (baseline {})", what, m.baseline);
        json spec = base_spec(title, "cells", values);
        json x = sweep ? json{{"field", "point"}, {"type", "nominal"}, {"sort", m.points}, {"title", "sweep point"}}
                       : json{{"field", "variant"}, {"type", "nominal"}, {"sort", m.variants}, {"title", "variant"}};
        x["axis"] = {{"labelAngle", 0}, {"labelLimit", 0}};
        spec["encoding"] = {{"x", x}};
        if (sweep) spec["encoding"]["xOffset"] = {{"field", "variant"}, {"sort", m.variants}};
        json tooltip = json::array({{{"field", "variant"}},
                                    {{"field", "point"}},
                                    {{"field", "text"}, {"title", "median [CI]"}},
                                    {{"field", "delta"}},
                                    {{"field", "mark"}, {"title", "significant"}},
                                    {{"field", "emulation"}}});
        spec["layer"] = json::array(
            {{{"mark", {{"type", "bar"}}},
              {"encoding",
               {{"y", {{"field", "median"}, {"type", "quantitative"}, {"title", axis_title("median " + what, u)}}},
                {"color", {{"field", "variant"}, {"type", "nominal"}, {"sort", m.variants}}},
                {"opacity",
                 {{"field", "emulation"},
                  {"type", "nominal"},
                  {"scale", {{"domain", {kHeld, kNotHeld}}, {"range", {1.0, 0.35}}}},
                  {"title", "emulation"}}},
                {"tooltip", tooltip}}}},
             {{"mark", {{"type", "rule"}, {"color", "black"}}},
              {"encoding", {{"y", {{"field", "low"}, {"type", "quantitative"}}}, {"y2", {{"field", "high"}}}}}},
             {{"transform", json::array({{{"filter", "datum.significant"}}})},
              {"mark", {{"type", "text"}, {"dy", -8}, {"fontSize", 16}, {"fontWeight", "bold"}, {"color", "black"}}},
              {"encoding", {{"y", {{"field", "high"}, {"type", "quantitative"}}}, {"text", {{"value", "*"}}}}}}});
        out.push_back({"bars-" + key.first + "-" + key.second, title, std::move(spec)});
    }
    return out;
}

// --- time series per repeat ---------------------------------------------------------------

std::string series_label(const std::string& name, const AxisUnit& u) {
    std::string what = name == "stream1.cwnd"            ? "cwnd, stream 1"
                       : name == "stream1.srtt"          ? "srtt, stream 1"
                       : name == "qdisc.up.netem.loss"   ? "loss up, dropped by netem"
                       : name == "qdisc.down.netem.loss" ? "loss down, dropped by netem"
                                                         : name;
    return axis_title(what, u);
}

/// Trial labels of the probe's measurements, in trial order, as the chart's filter offers them.
json trial_param(const std::vector<std::string>& labels) {
    return json::array({{{"name", "trial"},
                         {"value", labels.front()},
                         {"bind", {{"input", "select"}, {"options", labels}, {"name", "trial "}}}}});
}

/// A group's series: its members' on one clock ("MEMBER.NAME") and the queues', as recorded.
std::vector<std::string> group_series(const results::RunData& data, const std::string& group) {
    std::vector<std::string> out;
    for (const auto& ms : data.measurements)
        if (ms.probe == group)
            for (const auto& [name, s] : ms.series)
                if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    return out;
}

// Two step series combined, f(a(t), b(t)), at every instant either changes.
template <typename F>
probes::Series step_combine(const probes::Series& a, const probes::Series& b, F f) {
    auto at = [](const probes::Series& s, double t) {
        double v = s.size() ? s.value.front() : 0;
        for (std::size_t i = 0; i < s.size() && s.t[i] <= t; ++i) v = s.value[i];
        return v;
    };
    std::vector<double> times(a.t);
    times.insert(times.end(), b.t.begin(), b.t.end());
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    probes::Series out;
    for (double t : times) out.add(t, f(at(a, t), at(b, t)));
    return out;
}

// A full-size segment's payload at MTU 1500 with TCP timestamps: what cwnd counts.
constexpr double kSegmentBytes = 1448;

// What the link's schedule or trace set behind a measured series, as a step series: the
// configured rate of the direction that carried the traffic behind throughput, the
// configured delay both ways behind an RTT, the bandwidth-delay product in segments behind
// cwnd, a direction's configured loss behind what its netem dropped. None without link.*
// series (a fixed link).
std::optional<probes::Series> configured_for(const std::string& name, const results::Measurement& ms) {
    auto find = [&](const std::string& k) -> const probes::Series* {
        auto it = ms.series.find(k);
        return it == ms.series.end() ? nullptr : &it->second;
    };
    auto sum = [](const probes::Series* s) {
        double v = 0;
        if (s)
            for (double x : s->value) v += x;
        return v;
    };
    // The direction whose netem carried more is the probe's.
    auto carrying_rate = [&]() -> const probes::Series* {
        const auto* up = find("link.up.rate");
        const auto* down = find("link.down.rate");
        if (up && down)
            return sum(find("qdisc.down.netem.throughput")) > sum(find("qdisc.up.netem.throughput")) ? down : up;
        return up ? up : down;
    };
    const auto* up_delay = find("link.up.delay");
    const auto* down_delay = find("link.down.delay");
    if (name == "throughput") {
        if (const auto* rate = carrying_rate()) return *rate;
        return std::nullopt;
    }
    if (name == "rtt" || name.ends_with(".srtt")) {
        if (up_delay && down_delay) return step_combine(*up_delay, *down_delay, std::plus<>());
        return std::nullopt;
    }
    if (name.ends_with(".cwnd")) {
        const auto* rate = carrying_rate();
        if (!rate || !up_delay || !down_delay) return std::nullopt;
        auto rtt = step_combine(*up_delay, *down_delay, std::plus<>());
        return step_combine(*rate, rtt, [](double r, double d) { return r * d / 8 / kSegmentBytes; });
    }
    for (const char* dir : {"up", "down"})
        if (name == fmt::format("qdisc.{}.netem.loss", dir))
            if (const auto* loss = find(fmt::format("link.{}.loss", dir))) return *loss;
    return std::nullopt;
}

// The directions whose loss the link's schedule or trace set above 0 at some point (an
// outage's 100% included) in any repeat of `probe`, whose netem's drops were recorded: their
// drop share is charted against it.
std::vector<std::string> scheduled_loss_series(const results::RunData& data, const std::string& probe) {
    std::vector<std::string> out;
    for (const char* dir : {"up", "down"}) {
        const auto measured = fmt::format("qdisc.{}.netem.loss", dir);
        for (const auto& ms : data.measurements) {
            if (ms.probe != probe || !ms.series.count(measured)) continue;
            auto it = ms.series.find(fmt::format("link.{}.loss", dir));
            if (it == ms.series.end()) continue;
            if (std::any_of(it->second.value.begin(), it->second.value.end(), [](double v) { return v > 0; })) {
                out.push_back(measured);
                break;
            }
        }
    }
    return out;
}

std::vector<Chart> series_charts(const Model& m, std::vector<std::string>& notes) {
    const auto& data = *m.data;
    std::vector<Chart> out;
    for (const auto& p : detail::probes_of(data)) {
        const auto& traits = probes::traits_of(p.kind);
        auto shown = traits.charts_recorded_series
                         ? group_series(data, p.name)
                         : std::vector<std::string>(traits.charted_series.begin(), traits.charted_series.end());
        if (!traits.charts_recorded_series)
            for (auto& loss : scheduled_loss_series(data, p.name)) shown.push_back(std::move(loss));
        if (shown.empty()) continue;
        // Each series' scale over every repeat of the probe; the points, thinned if many.
        std::map<std::string, double> top;
        std::size_t points = 0;
        for (const auto& ms : data.measurements)
            if (ms.probe == p.name)
                for (const auto& name : shown)
                    if (auto it = ms.series.find(name); it != ms.series.end()) {
                        top[name] = std::max(top[name], largest(it->second.value));
                        points += it->second.size();
                    }
        if (points == 0) continue;
        std::size_t stride = (points + kMaxSeriesPoints - 1) / kMaxSeriesPoints;
        if (stride > 1)
            notes.push_back(fmt::format("{}: {} points of time series, every {}th drawn", p.name, points, stride));
        std::map<std::string, AxisUnit> units;
        std::vector<std::string> order;
        for (const auto& name : shown)
            if (top.count(name)) {
                units[name] = axis_unit(probes::series_unit(name), top[name]);
                order.push_back(series_label(name, units[name]));
            }
        json values = json::array();
        std::vector<std::string> labels;
        bool banded = false;
        for (const auto& ms : data.measurements) {
            if (ms.probe != p.name) continue;
            const auto* t = data.trial(ms.trial);
            auto label = t ? trial_label(*t) : fmt::format("trial {}", ms.trial);
            // The configured band once a trial (every repeat's schedule is the same).
            const bool first_of_trial = std::find(labels.begin(), labels.end(), label) == labels.end();
            if (first_of_trial) labels.push_back(label);
            for (const auto& name : shown) {
                auto it = ms.series.find(name);
                if (it == ms.series.end()) continue;
                const auto& s = it->second;
                for (std::size_t i = 0; i < s.size(); i += stride)
                    values.push_back({{"trial", label},
                                      {"repeat", fmt::format("repeat {}", ms.repeat)},
                                      {"series", series_label(name, units[name])},
                                      {"band", false},
                                      {"t", s.t[i]},
                                      {"value", scaled(s.value[i], units[name].divisor)}});
                if (!first_of_trial) continue;
                if (auto band = configured_for(name, ms)) {
                    banded = true;
                    for (std::size_t i = 0; i < band->size(); ++i)
                        values.push_back({{"trial", label},
                                          {"repeat", "configured"},
                                          {"series", series_label(name, units[name])},
                                          {"band", true},
                                          {"t", band->t[i]},
                                          {"value", scaled(band->value[i], units[name].divisor)}});
                }
            }
        }
        auto title = fmt::format("{}: over each repeat", p.name);
        json spec = {{"title", title}, {"data", {{"name", "series"}, {"values", values}}}};
        if (labels.size() > 1) {
            spec["params"] = trial_param(labels);
            spec["transform"] = json::array({{{"filter", "datum.trial == trial"}}});
        }
        spec["facet"] = {{"row", {{"field", "series"}, {"type", "nominal"}, {"sort", order}, {"title", nullptr}}}};
        spec["resolve"] = {{"scale", {{"y", "independent"}}}};
        json x = {{"field", "t"}, {"type", "quantitative"}, {"title", "time in the repeat (s)"}};
        json y = {{"field", "value"}, {"type", "quantitative"}, {"title", nullptr}};
        json measured_mark = {{"type", "line"}, {"point", points <= 2000}};
        json measured_encoding = {{"x", x},
                                  {"y", y},
                                  {"color", {{"field", "repeat"}, {"type", "nominal"}}},
                                  {"tooltip", json::array({{{"field", "trial"}},
                                                           {{"field", "repeat"}},
                                                           {{"field", "series"}},
                                                           {{"field", "t"}, {"format", ".2f"}},
                                                           {{"field", "value"}, {"format", ".4~g"}}})}};
        if (!banded) {
            spec["spec"] = {{"width", 520}, {"height", 120}, {"mark", measured_mark}, {"encoding", measured_encoding}};
        } else {
            // The link's configured figure as a grey band behind the measured lines.
            json band = {
                {"transform", json::array({{{"filter", "datum.band"}}})},
                {"mark", {{"type", "area"}, {"interpolate", "step-after"}, {"color", "#9e9e9e"}, {"opacity", 0.3}}},
                {"encoding", {{"x", x}, {"y", y}}}};
            json measured = {{"transform", json::array({{{"filter", "!datum.band"}}})},
                             {"mark", measured_mark},
                             {"encoding", measured_encoding}};
            spec["spec"] = {{"width", 520}, {"height", 120}, {"layer", json::array({band, measured})}};
            notes.push_back(
                fmt::format("{}: the grey band is what the link's schedule or trace set, at the instants "
                            "the kernel took each change: the rate behind throughput, the delay both ways "
                            "behind an RTT, the bandwidth-delay product in full-size segments ({:.0f} bytes) "
                            "behind cwnd, a direction's loss (an outage's 100%) behind the share of packets "
                            "its netem dropped",
                            p.name, kSegmentBytes));
        }
        out.push_back({"series-" + p.name, title, std::move(spec)});
    }
    return out;
}

// --- latency distributions --------------------------------------------------------------------

std::vector<Chart> latency_charts(const Model& m) {
    const auto& data = *m.data;
    std::vector<Chart> out;
    for (const auto& p : detail::probes_of(data)) {
        const probes::SampleTraits* samples = probes::traits_of(p.kind).samples;
        if (!samples) continue;
        const char* sample = samples->name;
        // Every repeat's samples of a trial, pooled.
        std::map<std::size_t, std::vector<double>> pooled;
        for (const auto& ms : data.measurements)
            if (ms.probe == p.name)
                if (auto it = ms.samples.find(sample); it != ms.samples.end())
                    for (double v : it->second)
                        if (std::isfinite(v)) pooled[ms.trial].push_back(v);
        if (pooled.empty()) continue;
        double lo = INFINITY, hi = 0;
        for (auto& [trial, v] : pooled) {
            std::sort(v.begin(), v.end());
            lo = std::min(lo, v.front());
            hi = std::max(hi, v.back());
        }
        auto u = axis_unit(probes::Unit::seconds, hi);
        json values = json::array();
        std::vector<std::string> points;
        for (const auto& [trial, v] : pooled) {
            const auto* t = data.trial(trial);
            auto point = t ? detail::point_label(*t) : "";
            if (std::find(points.begin(), points.end(), point) == points.end()) points.push_back(point);
            for (int q = 0; q <= kQuantiles; ++q) {
                double fraction = static_cast<double>(q) / kQuantiles;
                auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(v.size())));
                double x = v[rank == 0 ? 0 : std::min(rank, v.size()) - 1];  // nearest rank, as the report's
                values.push_back({{"variant", t ? t->variant : ""},
                                  {"point", point.empty() ? "-" : point},
                                  {"latency", x / u.divisor},
                                  {"fraction", fraction}});
            }
        }
        bool log = lo > 0 && hi / lo >= 20;
        auto title = fmt::format("{}: distribution of {} (every repeat's samples)", p.name, samples->plural);
        json spec = base_spec(title, "quantiles", values);
        if (points.size() > 1) {
            spec["params"] = json::array({{{"name", "point"},
                                           {"value", points.front()},
                                           {"bind", {{"input", "select"}, {"options", points}, {"name", "point "}}}}});
            spec["transform"] = json::array({{{"filter", "datum.point == point"}}});
        }
        spec["mark"] = {{"type", "line"}, {"interpolate", "step-after"}};
        spec["encoding"] = {
            {"x",
             {{"field", "latency"},
              {"type", "quantitative"},
              {"scale", {{"type", log ? "log" : "linear"}}},
              {"title", axis_title(samples->singular, u)}}},
            {"y",
             {{"field", "fraction"},
              {"type", "quantitative"},
              {"title", "fraction at or below"},
              {"axis", {{"format", "%"}}}}},
            {"color", {{"field", "variant"}, {"type", "nominal"}, {"sort", m.variants}}},
            {"tooltip", json::array({{{"field", "variant"}},
                                     {{"field", "latency"}, {"format", ".3~g"}, {"title", axis_title("at", u)}},
                                     {{"field", "fraction"}, {"format", ".1%"}}})}};
        out.push_back({"latency-" + p.name, title, std::move(spec)});
    }
    return out;
}

// --- the emulation check: configured against measured ------------------------------------------

json emulation_panel(const std::string& what, const std::string& data_name, json values, double hi) {
    json ideal = {
        {"data", {{"values", json::array({{{"v", 0}}, {{"v", hi}}})}}},
        {"mark", {{"type", "line"}, {"color", "#999"}, {"strokeDash", {4, 4}}}},
        {"encoding",
         {{"x", {{"field", "v"}, {"type", "quantitative"}}}, {"y", {{"field", "v"}, {"type", "quantitative"}}}}}};
    json trials = {{"data", {{"name", data_name}, {"values", std::move(values)}}},
                   {"mark", {{"type", "point"}, {"filled", true}, {"size", 80}}},
                   {"encoding",
                    {{"x", {{"field", "configured"}, {"type", "quantitative"}, {"title", "configured " + what}}},
                     {"y", {{"field", "measured"}, {"type", "quantitative"}, {"title", "measured " + what}}},
                     {"color",
                      {{"field", "emulation"},
                       {"type", "nominal"},
                       {"scale", {{"domain", {kHeld, kNotHeld}}, {"range", {"#2a7", "#d33"}}}}}},
                     {"shape", emulation_shape()},
                     {"tooltip", json::array({{{"field", "trial"}},
                                              {{"field", "configured"}},
                                              {{"field", "measured"}},
                                              {{"field", "emulation"}},
                                              {{"field", "note"}}})}}}};
    return {{"width", 250}, {"height", 230}, {"layer", json::array({ideal, trials})}};
}

std::vector<Chart> emulation_charts(const Model& m) {
    json rtt = json::array(), rate = json::array();
    double rtt_hi = 0, rate_hi = 0;
    for (const auto& t : m.data->trials) {
        if (!t.check.checked) continue;
        if (std::isfinite(t.check.rtt_configured) && std::isfinite(t.check.rtt_measured))
            rtt_hi = std::max({rtt_hi, t.check.rtt_configured, t.check.rtt_measured});
        if (std::isfinite(t.check.rate_configured) && std::isfinite(t.check.rate_measured))
            rate_hi = std::max({rate_hi, t.check.rate_configured, t.check.rate_measured});
    }
    auto rtt_unit = axis_unit(probes::Unit::seconds, rtt_hi),
         rate_unit = axis_unit(probes::Unit::bits_per_second, rate_hi);
    for (const auto& t : m.data->trials) {
        if (!t.check.checked) continue;
        json base = {{"trial", trial_label(t)}, {"emulation", emulation(&t)}, {"note", t.check.note}};
        if (std::isfinite(t.check.rtt_configured) && std::isfinite(t.check.rtt_measured)) {
            json row = base;
            row["configured"] = t.check.rtt_configured / rtt_unit.divisor;
            row["measured"] = t.check.rtt_measured / rtt_unit.divisor;
            rtt.push_back(row);
        }
        if (std::isfinite(t.check.rate_configured) && std::isfinite(t.check.rate_measured)) {
            json row = base;
            row["configured"] = t.check.rate_configured / rate_unit.divisor;
            row["measured"] = t.check.rate_measured / rate_unit.divisor;
            rate.push_back(row);
        }
    }
    if (rtt.empty() && rate.empty()) return {};
    json panels = json::array();
    if (!rtt.empty())
        panels.push_back(emulation_panel("RTT (" + rtt_unit.label + ")", "rtt", rtt, rtt_hi / rtt_unit.divisor));
    if (!rate.empty())
        panels.push_back(emulation_panel("rate (" + rate_unit.label + ")", "rate", rate, rate_hi / rate_unit.divisor));
    auto title = std::string("The emulation check: configured against measured, before each trial's probes");
    json spec = {{"title", title}, {"hconcat", panels}};
    return {{"emulation", title, std::move(spec)}};
}

// --- the page ---------------------------------------------------------------------------------

std::string dl(const std::vector<std::pair<std::string, std::string>>& items) {
    std::string out = "<dl>";
    for (const auto& [k, v] : items) out += "<dt>" + escape(k) + "</dt><dd>" + escape(v) + "</dd>";
    return out + "</dl>\n";
}

std::string kv_table(const std::map<std::string, std::string>& kv, const char* key, const char* value) {
    detail::TextTable t({key, value});
    for (const auto& [k, v] : kv) t.add({k, v});
    return t.html();
}

// JSON inside a <script> element: "</" cannot end it early ("<\/" is the same JSON string).
std::string script_json(const json& j) {
    // Inside <script>, the HTML parser looks for "</script" and for "<!--" (which turns the
    // rest into script data where "<script" nests): every '<' is written \u003c, so neither
    // can appear. U+2028 and U+2029 end a line in older JavaScript: escaped too. Each can only
    // occur inside a JSON string, where the escapes mean the same characters.
    auto text = j.dump(-1, ' ', false, json::error_handler_t::replace);
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '<') {
            out += "\\u003c";
        } else if (text.compare(i, 3, "\xe2\x80\xa8") == 0 || text.compare(i, 3, "\xe2\x80\xa9") == 0) {
            out += text[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

// A script's text inside <script>: the same guard against an early "</script".
std::string script_text(std::string_view js) {
    std::string out(js);
    for (std::size_t at = 0; (at = out.find("</script", at)) != std::string::npos; at += 2) out.insert(at + 1, "\\");
    return out;
}

constexpr const char* kStyle = R"css(
:root { color-scheme: light; --fg: #1d232a; --muted: #5b6570; --line: #d8dde3; --bad: #b3261e; --good: #1b7f3b; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); margin: 0 auto; max-width: 1100px; padding: 1.5em 2em 4em; }
h1 { font-size: 1.6em; margin: 0 0 .3em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid var(--line); }
nav { margin: .5em 0 1em; color: var(--muted); } nav a { margin-right: 1em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15em 1em; margin: .5em 0; }
dt { color: var(--muted); } dd { margin: 0; }
table { border-collapse: collapse; margin: .8em 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: .25em .7em; text-align: left; vertical-align: top; }
th { background: #f3f5f7; } td.num { text-align: right; white-space: nowrap; }
.chart { margin: 1em 0 .2em; overflow-x: auto; } .caption { color: var(--muted); font-size: .9em; margin: 0 0 1.2em; }
.warning { color: var(--bad); } .pass { color: var(--good); } .fail { color: var(--bad); font-weight: 600; }
ul.plain { padding-left: 1.2em; } li { margin: .25em 0; }
li.observed { margin-left: 1.5em; color: var(--muted); }
footer { margin-top: 3em; color: var(--muted); font-size: .85em; }
.vega-bindings { margin: .3em 0; } .vega-bind-name { color: var(--muted); }
)css";

// Draws every chart; window.wanlabCharts[id] holds its Vega view; the document's
// data-charts attribute says "ready" or "failed: ...".
constexpr const char* kDraw = R"js(
(function () {
  var root = document.documentElement;
  var charts = JSON.parse(document.getElementById('wanlab-charts').textContent);
  window.wanlabCharts = {};
  var failures = [];
  var runs = charts.map(function (c) {
    var el = document.getElementById(c.id);
    try {
      var spec = vegaLite.compile(c.spec).spec;
      var view = new vega.View(vega.parse(spec), { renderer: 'svg', container: el, hover: true });
      window.wanlabCharts[c.id] = view;
      return view.runAsync().catch(function (e) { failures.push(c.id + ': ' + e); });
    } catch (e) {
      failures.push(c.id + ': ' + e);
      el.textContent = 'This chart could not be drawn: ' + e;
      return Promise.resolve();
    }
  });
  Promise.all(runs).then(function () {
    root.dataset.charts = failures.length ? 'failed: ' + failures.join('; ') : 'ready';
    failures.forEach(function (f) { console.error('wanlab chart ' + f); });
  });
})();
)js";

}  // namespace

std::string escape(std::string_view text) { return detail::escape_markup(text); }

AxisUnit axis_unit(probes::Unit unit, double largest_value) {
    auto s = probes::scale_for(unit, largest_value);
    std::string label = s.suffix;
    while (!label.empty() && label.front() == ' ') label.erase(label.begin());
    if (unit == probes::Unit::count) label = "count";
    if (unit == probes::Unit::per_second) label = "per second";
    return {s.divisor, label};
}

Page::Page(std::string title) : title_(std::move(title)) {}

void Page::section(const std::string& id, const std::string& title) {
    if (open_) body_ += "</section>\n";
    body_ += fmt::format("<section id=\"{}\"><h2>{}</h2>\n", escape(id), escape(title));
    contents_.emplace_back(id, title);
    open_ = true;
}

void Page::markup(const std::string& html) { body_ += html; }

void Page::paragraph(const std::string& text, const std::string& css_class) {
    body_ += css_class.empty() ? "<p>" : "<p class=\"" + escape(css_class) + "\">";
    body_ += escape(text) + "</p>\n";
}

void Page::list(const std::vector<std::string>& items, const std::string& css_class) {
    body_ += "<ul class=\"plain\">";
    for (const auto& i : items)
        body_ += (css_class.empty() ? "<li>" : "<li class=\"" + escape(css_class) + "\">") + escape(i) + "</li>";
    body_ += "</ul>\n";
}

void Page::table(const detail::TextTable& t) { body_ += t.html(); }

void Page::chart(Chart c, const std::string& caption) {
    body_ +=
        fmt::format("<figure class=\"chart\" id=\"{}\" aria-label=\"{}\"></figure>\n", escape(c.id), escape(c.title));
    if (!caption.empty()) paragraph(caption, "caption");
    charts_.push_back(std::move(c));
}

std::string Page::document() const {
    json charts = json::array();
    for (const auto& c : charts_) charts.push_back({{"id", c.id}, {"spec", c.spec}});
    std::string nav;
    for (const auto& [id, title] : contents_) nav += fmt::format("<a href=\"#{}\">{}</a>", escape(id), escape(title));
    const auto& vega = assets::vega();
    const auto& vega_lite = assets::vega_lite();
    return fmt::format(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        // Nothing leaves the page: no fetch, no image, no font, no frame from anywhere.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline' "
        "'unsafe-eval'; style-src 'unsafe-inline'; img-src data:\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta name=\"generator\" content=\"wanlab\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n"
        "<h1>{}</h1>\n<nav>{}</nav>\n{}{}"
        "<footer>Charts drawn by Vega {} and Vega-Lite {} (BSD-3-Clause, https://vega.github.io), carried in "
        "this page.</footer>\n"
        "<script type=\"application/json\" id=\"wanlab-charts\">{}</script>\n"
        "<script>/* vega {} */\n{}</script>\n<script>/* vega-lite {} */\n{}</script>\n<script>{}</script>\n"
        "</body></html>\n",
        escape(title_), kStyle, escape(title_), nav, body_, open_ ? "</section>\n" : "", escape(vega.version),
        escape(vega_lite.version), script_json(charts), vega.version, script_text(vega.text), vega_lite.version,
        script_text(vega_lite.text), kDraw);
}

std::vector<Chart> run_charts(const Model& m) {
    std::vector<std::string> notes;
    std::vector<Chart> out;
    for (auto* part : {&pivot_charts, &before_after_charts})
        for (auto& c : (*part)(m)) out.push_back(std::move(c));
    for (auto& c : series_charts(m, notes)) out.push_back(std::move(c));
    for (auto* part : {&latency_charts, &emulation_charts})
        for (auto& c : (*part)(m)) out.push_back(std::move(c));
    return out;
}

std::string run_page(const Model& m) {
    const auto& data = *m.data;
    const auto& run = data.run;
    Page page(fmt::format("wanlab: {} (run {})", run.experiment, run.id));
    std::vector<std::pair<std::string, std::string>> meta{
        {"run", run.id},
        {"file", run.file},
        {"status", detail::status_text(run)},
        {"where", detail::environment_line(run.env)},
        {"trials", fmt::format("{} of {} done", detail::trials_done(data), detail::trials_planned(data))},
        {"baseline", m.baseline}};
    if (!run.started.empty())
        meta.emplace_back("time", run.started + (run.finished.empty() ? "" : " to " + run.finished));
    if (!run.shard.empty()) meta.emplace_back("shard", run.shard + " of the experiment's trials");
    for (const auto& l : detail::session_lines(data))
        meta.emplace_back(l.substr(0, l.find(':')), l.substr(l.find(':') + 2));
    for (const auto& [origin, trials] : detail::trial_origins(data))
        meta.emplace_back(trials.size() == 1 ? "trial" : "trials",
                          fmt::format("{} from {}", fmt::join(trials, ", "), origin));
    for (const auto& s : run.sets) meta.emplace_back("--set", s);
    page.markup(dl(meta));
    if (auto warnings = detail::trial_warnings(data); !warnings.empty()) page.list(warnings, "warning");

    std::vector<std::string> series_notes;
    auto pivots = pivot_charts(m);
    if (m.pivot) {
        page.section("sweep", fmt::format("Sweep: {}.{}", m.pivot->probe.name, m.pivot->metric));
        for (auto& c : pivots)
            page.chart(std::move(c),
                       "Median over the repeats with its confidence interval as whiskers; a cross marks a trial "
                       "whose emulation did not hold.");
        // Each table titled: what it holds, and which variant (or further sweep value) it is.
        auto tables = detail::pivot_tables(m);
        for (std::size_t i = 0; i < tables.size(); ++i) {
            const auto& pv = *m.pivot;
            page.paragraph(fmt::format("Median {}.{}: rows {}, columns {}{}", pv.probe.name, pv.metric, pv.row_key,
                                       pv.column_key, pv.groups[i].label.empty() ? "" : "; " + pv.groups[i].label));
            page.table(tables[i]);
        }
    }
    page.section("before-after", "Before/after");
    page.paragraph(
        fmt::format("Median [CI] over repeats; baseline {}. CI: distribution-free interval of the median "
                    "(order statistics){}. * significant at 5% (Welch's t-test on the repeats).",
                    m.baseline, detail::coverage_legend(m).empty() ? "" : ", coverage " + detail::coverage_legend(m)));
    if (auto rule = detail::repeats_legend(m); !rule.empty()) page.paragraph(rule);
    for (auto& c : before_after_charts(m))
        page.chart(std::move(c),
                   "Bars: median; whiskers: its CI; *: significantly different from the baseline; faded: "
                   "a trial whose emulation did not hold.");
    for (const auto& n : m.notes) page.paragraph(n);
    if (m.rows.empty())
        page.paragraph("no measurements");
    else
        page.table(detail::before_after(m));
    auto series = series_charts(m, series_notes);
    if (!series.empty()) {
        page.section("time-series", "Over time");
        for (auto& c : series)
            page.chart(std::move(c),
                       "Each repeat's own intervals: throughput and TCP_INFO (cwnd in segments, the "
                       "smoothed RTT) of the first stream, or completions and latency per interval.");
        for (const auto& n : series_notes) page.paragraph(n);
    }
    if (!m.phases.empty()) {
        page.section("phases", "Phases of the link's schedule");
        page.paragraph(
            "Each [[link.schedule]] entry's median of every measured series, the median over the "
            "repeats, beside what the link allowed in it (the rate in force, weighted by how long each "
            "rate held, outside any outage; the delay both ways; loss; the outage's length).");
        std::vector<std::string> lines;
        for (const auto& p : m.phases) lines.push_back(phase_line(p));
        page.list(lines);
    }
    auto latency = latency_charts(m);
    if (!latency.empty()) {
        page.section("latency", "Latency distributions");
        for (auto& c : latency)
            page.chart(std::move(c),
                       fmt::format("Every repeat's samples of a trial, pooled, drawn from {} quantiles.", kQuantiles));
    }
    auto emulation = emulation_charts(m);
    if (!emulation.empty()) {
        page.section("emulation", "Emulation check");
        for (auto& c : emulation)
            page.chart(std::move(c),
                       "On the dashed line the path measured what was configured; red: the trial's "
                       "check did not hold.");
    }
    if (!m.explanations.empty()) {
        page.section("explanations", "Explanations");
        // A probe's binding verdict as the answer; what was also observed set back under it.
        std::string items = "<ul class=\"plain\">";
        for (const auto& e : m.explanations)
            items += fmt::format("<li{}>{}</li>", e.role == "observed" ? " class=\"observed\"" : "", escape(e.text));
        page.markup(items + "</ul>\n");
    }
    if (!m.effects.empty() || m.best) {
        page.section("effects", fmt::format("Factor effects: {}.{}, each factor across the others",
                                            m.effects_probe.name, m.effects_metric));
        std::vector<std::string> lines;
        const auto* spec = detail::metric_spec(m.effects_probe, m.effects_metric);
        for (const auto& e : m.effects) lines.push_back(detail::effect_text(e, spec));
        if (m.best) lines.push_back(detail::best_text(*m.best, m.effects_probe, m.effects_metric));
        page.list(lines);
    }
    if (auto more = detail::more_repeats(m); !more.empty()) {
        page.section("more-repeats", "What more repeats would settle");
        page.list(more);
    }
    if (m.asserted) {
        page.section("asserts", "Asserts: " + detail::assert_summary(m));
        std::string items = "<ul class=\"plain\">";
        for (const auto& o : m.outcomes)
            items += fmt::format("<li class=\"{}\">{}</li>", o.passed ? "pass" : "fail", escape(o.message));
        page.markup(items + "</ul>\n");
    }
    if (std::any_of(data.trials.begin(), data.trials.end(), [](const auto& t) { return !t.captures.empty(); })) {
        page.section("captures", "Captures");
        std::vector<std::string> lines;
        for (const auto& t : data.trials)
            for (const auto& c : t.captures) lines.push_back(detail::capture_line(m, t, c));
        page.list(lines);
    }
    page.section("environment", "Environment");
    page.markup(dl({{"host", run.env.hostname},
                    {"kernel", run.env.kernel},
                    {"machine", run.env.machine},
                    {"where", run.env.where},
                    {"wanlab", run.env.wanlab_version}}));
    if (!run.env.sysctls_before.empty()) {
        page.paragraph("The kernel's settings before the run:");
        page.markup(kv_table(run.env.sysctls_before, "sysctl", "value"));
    }
    for (const auto& [role, m] : run.env.machines) {
        page.paragraph(fmt::format("Machine {} ({}):", role, m.ssh == "local" ? "this one" : "ssh " + m.ssh));
        page.markup(dl({{"host", m.hostname}, {"kernel", m.kernel}, {"machine", m.machine}}));
        if (!m.sysctls_before.empty()) page.markup(kv_table(m.sysctls_before, "sysctl", "value"));
    }
    if (!run.text.empty()) {
        page.paragraph("The experiment file, as run:");
        page.markup("<pre>" + escape(run.text) + "</pre>\n");
    }
    return page.document();
}

}  // namespace wanlab::report::html
