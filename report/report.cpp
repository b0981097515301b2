// render(): one model of the report (header, before/after rows, pivot, explanations, assert
// outcomes) built once from a run, then printed by one of four printers. The human ones
// (table, markdown) write human units; the machine ones (json, csv) base units, and both
// halves come from the same rows, so they cannot disagree.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "core/text.h"
#include "report/html.h"
#include "report/model.h"
#include "results/store.h"

namespace wanlab::report {
namespace {

using namespace detail;  // the model (model.h) and its shared pieces
// Keys in the order a reader expects them (run first), not alphabetical.
using json = nlohmann::ordered_json;

// --- table and markdown ---------------------------------------------------------------------

std::string render_text(const Model& m, bool markdown) {
    const auto& data = *m.data;
    const auto& run = data.run;
    std::string out;
    auto section = [&out, markdown](const std::string& title) {
        out += markdown ? "\n## " + title + "\n\n" : "\n" + title + "\n";
    };
    auto line = [&out, markdown](const std::string& text) {
        out += (markdown ? "- " + detail::markdown_text(text) : "  " + text) + "\n";
    };
    auto table = [&out, markdown](const detail::TextTable& t) { out += markdown ? t.markdown() : t.text("  "); };

    out += markdown ? fmt::format("# {}\n\n", run.experiment) : fmt::format("Experiment {}\n", run.experiment);
    line(fmt::format("run {}{}", run.id, run.file.empty() ? "" : " (" + run.file + ")"));
    line("status: " + status_text(run));
    line("where: " + environment_line(run.env));
    line(fmt::format("trials: {} of {} done", trials_done(data), trials_planned(data)));
    if (!run.shard.empty()) line(fmt::format("shard {} of the experiment's trials (wanlab run --shard)", run.shard));
    for (const auto& l : session_lines(data)) line(l);        // a resumed run: which session measured what
    for (const auto& [origin, trials] : trial_origins(data))  // a merged run: where each trial was measured
        line(fmt::format("trial{} {} from {}", trials.size() == 1 ? "" : "s", fmt::join(trials, ", "), origin));
    if (!run.started.empty())
        line(fmt::format("started {}{}", run.started, run.finished.empty() ? "" : ", finished " + run.finished));
    for (const auto& s : run.sets) line("--set " + s);
    for (const auto& w : trial_warnings(data)) line(w);

    section("Before/after");
    line(fmt::format("median [CI] over repeats; baseline {}", m.baseline));
    if (auto cov = coverage_legend(m); !cov.empty())
        line("CI: distribution-free interval of the median (order statistics), coverage " + cov);
    if (auto rule = repeats_legend(m); !rule.empty()) line(rule);
    if (m.variants.size() > 1)
        line(m.data->run.repeats.adaptive
                 ? "* significant at 5% (Welch's t-test with each side's first-stage variance, as Stein's rule "
                   "requires); verdict only when significant"
                 : "* significant at 5% (Welch's t-test on the repeats); verdict only when significant");
    if (std::any_of(data.trials.begin(), data.trials.end(),
                    [](const results::Trial& t) { return detail::emulation_failed(&t); }))
        line("! from a trial whose emulation did not hold");
    for (const auto& n : m.notes) line(n);
    if (markdown) out += "\n";
    if (m.rows.empty())
        line("no measurements");
    else
        table(before_after(m));

    if (m.pivot) {
        const auto& pv = *m.pivot;
        section(fmt::format("Pivot: {}.{}, median", pv.probe.name, pv.metric));
        auto tables = pivot_tables(m);
        for (std::size_t i = 0; i < tables.size(); ++i) {
            if (!pv.groups[i].label.empty())
                out += markdown ? "\n**" + pv.groups[i].label + "**\n\n" : "  " + pv.groups[i].label + "\n";
            table(tables[i]);
        }
    }
    if (!m.effects.empty() || m.best) {
        section(fmt::format("Factor effects: {}.{}, each factor across the others", m.effects_probe.name,
                            m.effects_metric));
        const auto* spec = detail::metric_spec(m.effects_probe, m.effects_metric);
        for (const auto& e : m.effects) line(effect_text(e, spec));
        if (m.best) line(best_text(*m.best, m.effects_probe, m.effects_metric));
    }
    if (!m.explanations.empty()) {
        section("Explanations");
        for (const auto& e : m.explanations) line(e.text);
    }
    if (!m.phases.empty()) {
        section("Phases of the link's schedule: each entry's median (from [[link.schedule]])");
        for (const auto& p : m.phases) line(phase_line(p));
    }
    if (std::any_of(data.trials.begin(), data.trials.end(), [](const auto& t) { return !t.captures.empty(); })) {
        section("Captures");
        for (const auto& t : data.trials)
            for (const auto& c : t.captures) line(capture_line(m, t, c));
    }
    if (auto more = more_repeats(m); !more.empty()) {
        section("What more repeats would settle");
        for (const auto& l : more) line(l);
    }
    if (m.asserted) {
        section("Asserts: " + assert_summary(m));
        for (const auto& o : m.outcomes) line(o.message);
    }
    return out;
}

// --- json and csv ---------------------------------------------------------------------------

json sweep_json(const Cell& c) {
    json j = json::object();
    if (c.trial)
        for (const auto& kv : c.trial->sweep) j[kv.first] = kv.second;
    return j;
}

json sweep_json_of(const results::Trial& t) {
    json j = json::object();
    for (const auto& kv : t.sweep) j[kv.first] = kv.second;
    return j;
}

json cell_json(const Cell& c) {
    return json{{"point", c.point},
                {"sweep", sweep_json(c)},
                {"variant", c.variant},
                {"probe", c.probe.name},
                {"kind", c.probe.kind},
                {"metric", c.metric},
                {"unit", detail::unit_of(c.spec)},
                {"higher_is_better", c.spec ? json(c.spec->higher_is_better) : json()},
                {"trial", c.trial ? json(c.trial->index) : json()},
                {"trial_id", c.trial ? json(c.trial->id) : json()},
                {"n", c.summary.n},
                {"median", detail::number<json>(c.summary.median)},
                {"low", detail::number<json>(c.summary.low)},
                {"high", detail::number<json>(c.summary.high)},
                {"confidence", c.summary.confidence},
                {"values", c.values},
                {"settled", c.first.empty() ? json() : json(!c.unsettled)},
                {"mean_half_width", detail::number<json>(c.mean_half_width)},
                {"attempted", detail::number<json>(c.tally.attempted)},
                {"failed", detail::number<json>(c.tally.failed)},
                {"too_many_failures", c.tally.lost_too_many()},
                {"emulation_held", !detail::emulation_failed(c.trial)}};
}

std::string render_json(const Model& m) {
    const auto& data = *m.data;
    const auto& run = data.run;
    json trials_flagged = json::array();
    for (const auto& t : data.trials)
        if (detail::emulation_failed(&t) || t.status == results::TrialStatus::failed ||
            t.status == results::TrialStatus::interrupted)
            trials_flagged.push_back({{"trial", t.index},
                                      {"id", t.id},
                                      {"variant", t.variant},
                                      {"point", detail::point_label(t)},
                                      {"status", t.status},
                                      {"error", t.error},
                                      {"emulation_held", t.check.held},
                                      {"emulation_note", t.check.note}});
    json j;
    j["run"] = {{"id", run.id},
                {"experiment", run.experiment},
                {"file", run.file},
                {"status", run.status},
                {"partial", run.status != results::RunStatus::complete},
                {"error", run.error},
                {"baseline", m.baseline},
                {"started", run.started},
                {"finished", run.finished},
                {"sets", run.sets},
                {"shard", run.shard},
                {"repeats", run.repeats.adaptive ? json{{"rule", "auto"},
                                                        {"first", run.repeats.first},
                                                        {"max", run.repeats.max},
                                                        {"precision", run.repeats.precision}}
                                                 : json::object()},
                {"merged_from", json::array()},
                {"sessions", json::array()},
                {"trials_done", trials_done(data)},
                {"trials_planned", trials_planned(data)},
                {"trials_flagged", trials_flagged}};
    for (const auto& [origin, trials] : trial_origins(data))
        j["run"]["merged_from"].push_back({{"origin", origin}, {"trials", trials}});
    for (std::size_t i = 0; i < run.sessions.size(); ++i) {
        const auto& s = run.sessions[i];
        j["run"]["sessions"].push_back({{"started", s.started},
                                        {"finished", s.finished},
                                        {"status", s.status},
                                        {"error", s.error},
                                        {"hostname", s.hostname},
                                        {"kernel", s.kernel},
                                        {"where", s.where},
                                        {"note", s.note},
                                        {"trials", session_trials(data, i + 1)}});
    }
    j["environment"] = {{"hostname", run.env.hostname}, {"kernel", run.env.kernel},
                        {"machine", run.env.machine},   {"wanlab_version", run.env.wanlab_version},
                        {"where", run.env.where},       {"sysctls_before", run.env.sysctls_before}};
    if (!run.env.machines.empty()) j["environment"]["machines"] = nlohmann::json(run.env.machines);
    if (run.env.host) j["environment"]["host"] = nlohmann::json(*run.env.host);
    j["cells"] = json::array();
    for (const auto& c : m.cells) j["cells"].push_back(cell_json(c));
    j["comparisons"] = json::array();
    for (const auto& r : m.rows) {
        if (r.other == kNone) continue;
        const auto& b = m.cells[r.base];
        const auto& o = m.cells[r.other];
        j["comparisons"].push_back(
            {{"point", b.point},
             {"probe", b.probe.name},
             {"metric", b.metric},
             {"unit", detail::unit_of(b.spec)},
             {"baseline", b.variant},
             {"variant", o.variant},
             {"base_median", detail::number<json>(b.summary.median)},
             {"median", detail::number<json>(o.summary.median)},
             {"delta", detail::number<json>(r.diff.delta)},
             {"p_value", detail::number<json>(r.diff.p_value)},
             {"significant", r.diff.significant},
             {"better", r.diff.better},
             {"too_many_failures", r.too_many_failures},
             {"emulation_held", !detail::emulation_failed(b.trial) && !detail::emulation_failed(o.trial)}});
    }
    j["pivot"] = nullptr;
    if (m.pivot) {
        const auto& pv = *m.pivot;
        json groups = json::array();
        for (const auto& g : pv.groups) {
            json medians = json::array();
            for (const auto& r : g.rows) {
                json row = json::array();
                for (const auto& c : g.columns) {
                    auto it = g.cells.find({r, c});
                    row.push_back(it == g.cells.end() ? json() : detail::number<json>(it->second.summary.median));
                }
                medians.push_back(row);
            }
            groups.push_back({{"group", g.label}, {"rows", g.rows}, {"columns", g.columns}, {"median", medians}});
        }
        j["pivot"] = {{"probe", pv.probe.name}, {"metric", pv.metric},      {"unit", detail::unit_of(pv.spec)},
                      {"rows", pv.row_key},     {"columns", pv.column_key}, {"groups", groups}};
    }
    // "phases": each probe's median per [[link.schedule]] entry, in base units.
    j["phases"] = json::array();
    for (const auto& p : m.phases) {
        json phases = json::array();
        for (const auto& ph : p.phases) {
            json medians = json::object();
            for (const auto& [k, v] : ph.medians) medians[k] = detail::number<json>(v);
            json in_force = json::object();
            for (const auto& [k, v] : ph.in_force) in_force[k] = detail::number<json>(v);
            phases.push_back(
                {{"entry", ph.entry}, {"from", ph.from}, {"to", ph.to}, {"medians", medians}, {"link", in_force}});
        }
        j["phases"].push_back({{"trial", p.trial->index},
                               {"trial_id", p.trial->id},
                               {"variant", p.trial->variant},
                               {"point", detail::point_label(*p.trial)},
                               {"probe", p.probe},
                               {"repeats", p.repeats},
                               {"phases", phases}});
    }
    // "explanations": the lines as printed; "explanation_details": the same with what each one is.
    j["explanations"] = json::array();
    j["explanation_details"] = json::array();
    for (const auto& e : m.explanations) {
        j["explanations"].push_back(e.text);
        j["explanation_details"].push_back({{"trial", e.trial->index},
                                            {"trial_id", e.trial->id},
                                            {"variant", e.trial->variant},
                                            {"point", detail::point_label(*e.trial)},
                                            {"probe", e.probe.empty() ? json() : json(e.probe)},
                                            {"rule", e.rule},
                                            {"role", e.role},
                                            {"text", e.text}});
    }
    j["more_repeats"] = more_repeats(m);
    j["effects"] = json::array();
    for (const auto& e : m.effects)
        j["effects"].push_back({{"factor", e.factor},
                                {"level", e.level},
                                {"reference", e.reference},
                                {"probe", m.effects_probe.name},
                                {"metric", m.effects_metric},
                                {"delta", detail::number<json>(e.delta)},
                                {"interval", {detail::number<json>(e.low), detail::number<json>(e.high)}},
                                {"p_value", detail::number<json>(e.p_value)},
                                {"significant", e.significant},
                                {"too_few", e.too_few},
                                {"over", e.over}});
    j["best"] = nullptr;
    if (m.best)
        j["best"] = {{"probe", m.effects_probe.name},
                     {"metric", m.effects_metric},
                     {"trial", m.best->trial->index},
                     {"trial_id", m.best->trial->id},
                     {"variant", m.best->trial->variant},
                     {"point", detail::point_label(*m.best->trial)},
                     {"median", detail::number<json>(m.best->median)},
                     {"sweep", sweep_json_of(*m.best->trial)},
                     {"sysctls", m.best->trial->sysctls},
                     {"clearly_ahead", m.best->clear},
                     {"runner_up", m.best->runner_up ? json(m.best->runner_up->index) : json()}};
    j["captures"] = json::array();
    for (const auto& t : data.trials)
        for (const auto& c : t.captures)
            j["captures"].push_back({{"trial", t.index},
                                     {"trial_id", t.id},
                                     {"variant", t.variant},
                                     {"point", detail::point_label(t)},
                                     {"probe", c.probe},
                                     {"host", c.host},
                                     {"dev", c.dev},
                                     {"path", capture_path(m, c)},
                                     {"packets", c.packets},
                                     {"bytes", c.bytes},
                                     {"dropped", c.dropped},
                                     {"stopped", c.stopped}});
    j["asserts"] = json::array();
    for (const auto& o : m.outcomes)
        j["asserts"].push_back({{"probe", o.spec.probe},
                                {"metric", o.spec.metric},
                                {"variant", o.variant},
                                {"point", o.point},
                                {"check", check_name(o)},
                                {"measured", detail::number<json>(o.measured)},
                                {"bound", detail::number<json>(o.bound)},
                                {"passed", o.passed},
                                {"message", o.message}});
    return json_input::dump(j, 2) + "\n";
}

// One row per comparison (per baseline cell when the run has one variant), base units, with
// a column per swept path so a spreadsheet can pivot on them.
std::string render_csv(const Model& m) {
    using detail::csv_field;
    using detail::csv_number;
    std::vector<std::string> header{"run", "point"};
    for (const auto& k : m.sweep_keys) header.push_back(k);
    for (const char* h : {"probe",
                          "metric",
                          "unit",
                          "baseline",
                          "base_trial_id",
                          "base_n",
                          "base_median",
                          "base_low",
                          "base_high",
                          "base_confidence",
                          "base_emulation_held",
                          "variant",
                          "trial_id",
                          "n",
                          "median",
                          "low",
                          "high",
                          "confidence",
                          "emulation_held",
                          "delta",
                          "p_value",
                          "significant",
                          "better"})
        header.emplace_back(h);
    std::string out;
    auto emit = [&out](const std::vector<std::string>& fields) {
        for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
        out += "\n";
    };
    emit(header);
    auto summary = [](const Cell& c) {
        return std::vector<std::string>{c.trial ? c.trial->id : "",
                                        std::to_string(c.summary.n),
                                        csv_number(c.summary.median),
                                        csv_number(c.summary.low),
                                        csv_number(c.summary.high),
                                        csv_number(c.summary.confidence),
                                        detail::emulation_failed(c.trial) ? "false" : "true"};
    };
    for (const auto& r : m.rows) {
        const auto& b = m.cells[r.base];
        std::vector<std::string> f{m.data->run.id, b.point};
        for (const auto& k : m.sweep_keys) {
            std::string v;
            if (b.trial)
                for (const auto& kv : b.trial->sweep)
                    if (kv.first == k) v = kv.second;
            f.push_back(v);
        }
        for (const auto& x : {b.probe.name, b.metric, detail::unit_of(b.spec), b.variant}) f.push_back(x);
        auto bs = summary(b);
        f.insert(f.end(), bs.begin(), bs.end());
        if (r.other != kNone) {
            const auto& o = m.cells[r.other];
            f.push_back(o.variant);
            auto os = summary(o);
            f.insert(f.end(), os.begin(), os.end());
            f.push_back(csv_number(r.diff.delta));
            f.push_back(csv_number(r.diff.p_value));
            f.push_back(r.diff.significant ? "true" : "false");
            f.push_back(r.diff.better ? "true" : "false");
        }
        emit(f);
    }
    return out;
}

}  // namespace

Format parse_format(const std::string& name) {
    if (name == "table") return Format::table;
    if (name == "csv") return Format::csv;
    if (name == "json") return Format::json;
    if (name == "markdown") return Format::markdown;
    if (name == "html") return Format::html;
    throw InputError(fmt::format("unknown report format `{}`: choose table, markdown, csv, json or html", name));
}

std::string render(const results::RunData& data, const std::vector<experiment::AssertSpec>& asserts,
                   const ReportOptions& options) {
    auto m = build(data, asserts, options);
    switch (options.format) {
        // Text for a terminal: what services, agents and foreign databases said, escaped.
        case Format::table: return text::terminal_safe(render_text(m, false));
        case Format::markdown: return text::terminal_safe(render_text(m, true));
        case Format::json: return render_json(m);
        case Format::csv: return render_csv(m);
        case Format::html: return html::run_page(m);
    }
    return "";
}

}  // namespace wanlab::report
