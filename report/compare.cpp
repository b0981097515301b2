// render_comparison(): the same experiment run twice (another machine, kernel, wanlab
// version), cell by cell.
//
// Cells are matched by trial id, probe and metric, never by position: the id is a hash of
// the variant and sweep values, so it survives a sweep value added or a variant removed,
// where trial indexes shift. A cell with data in one run only is listed as such rather than
// dropped: a trial that vanished is itself a finding.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "core/json.h"
#include "core/text.h"
#include "report/detail.h"
#include "report/html.h"

namespace wanlab::report {
namespace {

// Keys in the order a reader expects them (run first), not alphabetical.
using json = nlohmann::ordered_json;

struct Side {
    const results::Trial* trial = nullptr;
    std::vector<double> values;
    Summary summary;
    detail::Tally tally;
};

struct Line {
    std::string trial_id, variant, point, probe, metric;
    const probes::MetricSpec* spec = nullptr;
    std::shared_ptr<const detail::OwnMetrics> owner;  // where `spec` lives, for a command probe's own
    std::optional<Side> a, b;
    Difference diff;
    bool too_many_failures = false;

    std::string presence() const { return a && b ? "both" : a ? "only in A" : "only in B"; }
};

// Each kind's headline metrics, as in the report's default table: a comparison is read for
// what moved, and every metric of every trial would bury it.
std::vector<Line> match(const results::RunData& a, const results::RunData& b) {
    std::vector<Line> lines;
    std::map<std::tuple<std::string, std::string, std::string>, std::size_t> index;
    for (const auto* run : {&a, &b}) {
        auto probes = detail::probes_of(*run);
        for (const auto& t : run->trials)
            for (const auto& p : probes)
                for (const auto& metric : detail::headline_metrics(p)) {
                    Side side;
                    side.trial = &t;
                    side.values = detail::values_of(*run, t.index, p.name, metric);
                    if (side.values.empty()) continue;
                    side.summary = summarize(side.values);
                    side.tally = detail::tally_of(*run, t.index, p.name);
                    auto key = std::make_tuple(t.id, p.name, metric);
                    auto it = index.find(key);
                    if (it == index.end()) {
                        it = index.emplace(key, lines.size()).first;
                        Line l;
                        l.trial_id = t.id, l.variant = t.variant, l.point = detail::point_label(t);
                        l.probe = p.name, l.metric = metric, l.spec = detail::metric_spec(p, metric);
                        l.owner = p.own;
                        lines.push_back(l);
                    }
                    (run == &a ? lines[it->second].a : lines[it->second].b) = side;
                }
    }
    for (auto& l : lines) {
        if (!(l.a && l.b)) continue;
        l.diff = difference(l.a->values, l.b->values, !l.spec || l.spec->higher_is_better);
        // Figures that rest on too few of their exchanges get no verdict (report/detail.h).
        l.too_many_failures = l.a->tally.lost_too_many() || l.b->tally.lost_too_many();
        if (l.too_many_failures) l.diff.significant = false;
    }
    return lines;
}

// What differs between the two runs' environments: a reader must know before trusting a delta.
std::vector<std::string> environment_differences(const results::Run& a, const results::Run& b) {
    std::vector<std::string> out;
    auto diff = [&out](const char* what, const std::string& x, const std::string& y) {
        if (x != y) out.push_back(fmt::format("{} {} -> {}", what, x.empty() ? "?" : x, y.empty() ? "?" : y));
    };
    diff("experiment", a.experiment, b.experiment);
    diff("host", a.env.hostname, b.env.hostname);
    diff("where", a.env.where, b.env.where);
    diff("kernel", a.env.kernel, b.env.kernel);
    diff("machine", a.env.machine, b.env.machine);
    diff("wanlab", a.env.wanlab_version, b.env.wanlab_version);
    std::map<std::string, std::pair<std::string, std::string>> sysctls;
    for (const auto& kv : a.env.sysctls_before) sysctls[kv.first].first = kv.second;
    for (const auto& kv : b.env.sysctls_before) sysctls[kv.first].second = kv.second;
    for (const auto& kv : sysctls) diff(kv.first.c_str(), kv.second.first, kv.second.second);
    return out;
}

std::string run_line(const results::Run& r) {
    std::string s = fmt::format("run {} of {}, {}", r.id, r.experiment, r.status);
    if (!r.env.where.empty()) s += ", " + r.env.where;
    if (!r.env.kernel.empty()) s += ", kernel " + r.env.kernel;
    if (!r.env.hostname.empty()) s += " on " + r.env.hostname;
    if (!r.started.empty()) s += ", started " + r.started;
    return s;
}

std::string side_text(const Line& l, const std::optional<Side>& s) {
    if (!s) return "-";
    auto text = detail::human_ci(l.spec ? l.spec->unit : probes::Unit::count, s->summary) + s->tally.text();
    return detail::emulation_failed(s->trial) ? text + " !" : text;
}

std::string render_text(const results::RunData& a, const results::RunData& b, const std::vector<Line>& lines,
                        bool markdown) {
    std::string out;
    auto line = [&out, markdown](const std::string& text) {
        out += (markdown ? "- " + detail::markdown_text(text) : "  " + text) + "\n";
    };
    out += markdown ? fmt::format("# Comparison: {}\n\n", a.run.experiment)
                    : fmt::format("Comparison of two runs of {}\n", a.run.experiment);
    line("A: " + run_line(a.run));
    line("B: " + run_line(b.run));
    for (const auto& d : environment_differences(a.run, b.run)) line("differs: " + d);
    line("delta: (B - A) / A on medians over repeats; * significant at 5% (Welch's t-test)");
    line("! from a trial whose emulation did not hold in that run");
    out += "\n";
    bool sweep = std::any_of(lines.begin(), lines.end(), [](const Line& l) { return !l.point.empty(); });
    std::vector<std::string> header{"trial", "variant"};
    if (sweep) header.emplace_back("point");
    for (const char* h : {"metric", "A", "B", "delta", "verdict"}) header.emplace_back(h);
    std::vector<bool> right(header.size(), false);
    right[header.size() - 4] = right[header.size() - 3] = right[header.size() - 2] = true;
    detail::TextTable table(header, right);
    for (const auto& l : lines) {
        std::vector<std::string> row{l.trial_id, l.variant};
        if (sweep) row.push_back(l.point);
        row.push_back(l.probe + "." + l.metric);
        row.push_back(l.a ? side_text(l, l.a) : "only in B");
        row.push_back(l.b ? side_text(l, l.b) : "only in A");
        row.push_back(l.a && l.b ? detail::signed_percent(l.diff.delta) + (l.diff.significant ? " *" : "") : "");
        row.push_back(l.too_many_failures  ? "no verdict: failures"
                      : l.diff.too_few     ? "too few repeats"
                      : l.diff.significant ? (l.diff.better ? "better" : "worse")
                                           : "");
        table.add(row);
    }
    if (lines.empty())
        line("no measurements in either run");
    else
        out += markdown ? table.markdown() : table.text("  ");
    return out;
}

json side_json(const std::optional<Side>& s) {
    if (!s) return nullptr;
    return {{"trial", s->trial->index},
            {"n", s->summary.n},
            {"median", detail::number<json>(s->summary.median)},
            {"low", detail::number<json>(s->summary.low)},
            {"high", detail::number<json>(s->summary.high)},
            {"confidence", s->summary.confidence},
            {"values", s->values},
            {"attempted", detail::number<json>(s->tally.attempted)},
            {"failed", detail::number<json>(s->tally.failed)},
            {"too_many_failures", s->tally.lost_too_many()},
            {"emulation_held", !detail::emulation_failed(s->trial)}};
}

json run_json(const results::Run& r) {
    return {{"id", r.id},
            {"experiment", r.experiment},
            {"status", r.status},
            {"started", r.started},
            {"hostname", r.env.hostname},
            {"kernel", r.env.kernel},
            {"machine", r.env.machine},
            {"where", r.env.where},
            {"wanlab_version", r.env.wanlab_version}};
}

std::string render_json(const results::RunData& a, const results::RunData& b, const std::vector<Line>& lines) {
    json rows = json::array();
    for (const auto& l : lines)
        rows.push_back({{"trial_id", l.trial_id},
                        {"variant", l.variant},
                        {"point", l.point},
                        {"probe", l.probe},
                        {"metric", l.metric},
                        {"unit", detail::unit_of(l.spec)},
                        {"presence", l.presence()},
                        {"a", side_json(l.a)},
                        {"b", side_json(l.b)},
                        {"delta", detail::number<json>(l.diff.delta)},
                        {"p_value", detail::number<json>(l.diff.p_value)},
                        {"significant", l.diff.significant},
                        {"better", l.diff.better}});
    json j{{"a", run_json(a.run)},
           {"b", run_json(b.run)},
           {"differences", environment_differences(a.run, b.run)},
           {"rows", rows}};
    return json_input::dump(j, 2) + "\n";
}

std::string render_csv(const std::vector<Line>& lines) {
    using detail::csv_field;
    using detail::csv_number;
    std::string out =
        "trial_id,variant,point,probe,metric,unit,presence,a_n,a_median,a_low,a_high,a_emulation_held,"
        "b_n,b_median,b_low,b_high,b_emulation_held,delta,p_value,significant,better\n";
    auto side = [](const std::optional<Side>& s) {
        if (!s) return std::string(",,,,");
        return fmt::format("{},{},{},{},{}", s->summary.n, csv_number(s->summary.median), csv_number(s->summary.low),
                           csv_number(s->summary.high), detail::emulation_failed(s->trial) ? "false" : "true");
    };
    for (const auto& l : lines)
        out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(l.trial_id), csv_field(l.variant),
                           csv_field(l.point), csv_field(l.probe), csv_field(l.metric), detail::unit_of(l.spec),
                           l.presence(), side(l.a), side(l.b), csv_number(l.diff.delta), csv_number(l.diff.p_value),
                           l.diff.significant ? "true" : "false", l.diff.better ? "true" : "false");
    return out;
}

// The comparison as a page: both runs, what differs, and per metric the two runs' medians
// side by side with their intervals.
std::string render_html(const results::RunData& a, const results::RunData& b, const std::vector<Line>& lines) {
    html::Page page(fmt::format("wanlab: {} compared (runs {} and {})", a.run.experiment, a.run.id, b.run.id));
    std::string runs = "<dl>";
    for (const auto& [name, r] : {std::pair{"A", &a.run}, std::pair{"B", &b.run}})
        runs += fmt::format("<dt>{}</dt><dd>{}</dd>", name, html::escape(run_line(*r)));
    page.markup(runs + "</dl>\n");
    if (auto d = environment_differences(a.run, b.run); !d.empty()) {
        page.paragraph("What differs between the runs:");
        page.list(d, "warning");
    }
    page.section("metrics", "A against B");
    page.paragraph(
        "Medians over repeats with their confidence intervals; delta (B - A) / A; * significant at 5% "
        "(Welch's t-test); faded: a trial whose emulation did not hold in that run.");
    std::vector<std::pair<std::string, std::string>> order;
    for (const auto& l : lines)
        if (std::find(order.begin(), order.end(), std::pair{l.probe, l.metric}) == order.end())
            order.emplace_back(l.probe, l.metric);
    for (const auto& [probe, metric] : order) {
        std::vector<double> all;
        const probes::MetricSpec* spec = nullptr;
        for (const auto& l : lines)
            if (l.probe == probe && l.metric == metric) {
                spec = l.spec;
                for (const auto* side : {&l.a, &l.b})
                    if (*side) all.push_back((*side)->summary.high), all.push_back((*side)->summary.median);
            }
        double top = 0;
        for (double v : all)
            if (std::isfinite(v)) top = std::max(top, std::fabs(v));
        auto u = html::axis_unit(spec ? spec->unit : probes::Unit::count, top);
        json values = json::array();
        for (const auto& l : lines) {
            if (l.probe != probe || l.metric != metric) continue;
            auto trial = l.point.empty() ? l.variant : l.variant + " @ " + l.point;
            for (const auto& [run, side] : {std::pair{"A", &l.a}, std::pair{"B", &l.b}}) {
                if (!*side) continue;
                const auto& s = (*side)->summary;
                auto scaled = [&u](double v) { return std::isfinite(v) ? json(v / u.divisor) : json(); };
                bool significant = std::string(run) == "B" && l.diff.significant;
                values.push_back({{"trial", trial},
                                  {"run", run},
                                  {"median", scaled(s.median)},
                                  {"low", scaled(s.low)},
                                  {"high", scaled(s.high)},
                                  {"significant", significant},
                                  {"delta", std::string(run) == "B" && l.a ? detail::signed_percent(l.diff.delta) : ""},
                                  {"emulation", detail::emulation_failed((*side)->trial) ? "did not hold" : "held"},
                                  {"text", side_text(l, *side)}});
            }
        }
        auto what = probe + "." + metric;
        json spec_json = {
            {"title", what + ": A against B"},
            {"width", 520},
            {"height", 240},
            {"data", {{"name", "sides"}, {"values", values}}},
            {"encoding",
             {{"x", {{"field", "trial"}, {"type", "nominal"}, {"title", "trial"}, {"axis", {{"labelAngle", 0}}}}},
              {"xOffset", {{"field", "run"}}}}},
            {"layer",
             json::array(
                 {{{"mark", {{"type", "bar"}}},
                   {"encoding",
                    {{"y", {{"field", "median"}, {"type", "quantitative"}, {"title", what + " (" + u.label + ")"}}},
                     {"color", {{"field", "run"}, {"type", "nominal"}, {"title", "run"}}},
                     {"opacity",
                      {{"field", "emulation"},
                       {"type", "nominal"},
                       {"scale", {{"domain", {"held", "did not hold"}}, {"range", {1.0, 0.35}}}}}},
                     {"tooltip", json::array({{{"field", "run"}},
                                              {{"field", "trial"}},
                                              {{"field", "text"}, {"title", "median [CI]"}},
                                              {{"field", "delta"}},
                                              {{"field", "emulation"}}})}}}},
                  {{"mark", {{"type", "rule"}, {"color", "black"}}},
                   {"encoding", {{"y", {{"field", "low"}, {"type", "quantitative"}}}, {"y2", {{"field", "high"}}}}}},
                  {{"transform", json::array({{{"filter", "datum.significant"}}})},
                   {"mark", {{"type", "text"}, {"dy", -8}, {"fontSize", 16}, {"fontWeight", "bold"}}},
                   {"encoding",
                    {{"y", {{"field", "high"}, {"type", "quantitative"}}}, {"text", {{"value", "*"}}}}}}})}};
        page.chart({"compare-" + probe + "-" + metric, what + ": A against B", std::move(spec_json)});
    }
    auto text = render_text(a, b, lines, false);
    page.section("table", "Every cell");
    page.markup("<pre>" + html::escape(text) + "</pre>\n");
    return page.document();
}

}  // namespace

std::string render_comparison(const results::RunData& a, const results::RunData& b, Format format) {
    auto lines = match(a, b);
    switch (format) {
        case Format::table: return text::terminal_safe(render_text(a, b, lines, false));
        case Format::markdown: return text::terminal_safe(render_text(a, b, lines, true));
        case Format::json: return render_json(a, b, lines);
        case Format::csv: return render_csv(lines);
        case Format::html: return render_html(a, b, lines);
    }
    return "";
}

}  // namespace wanlab::report
