#include "report/model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "probes/human.h"
#include "probes/series.h"
#include "probes/stats.h"

namespace wanlab::report::detail {
namespace {

// "probe.metric" or "metric" -> (probe, metric); probe and metric names have no dots.
std::pair<std::string, std::string> split_metric(const std::string& name) {
    auto dot = name.find('.');
    if (dot == std::string::npos) return {"", name};
    return {name.substr(0, dot), name.substr(dot + 1)};
}

std::vector<std::string> metrics_for(const ProbeRef& p, const std::vector<std::string>& wanted) {
    if (wanted.empty()) return detail::headline_metrics(p);
    std::vector<std::string> out;
    for (const auto& w : wanted) {
        auto [probe, metric] = split_metric(w);
        if ((probe.empty() || probe == p.name) && detail::metric_spec(p, metric) &&
            std::find(out.begin(), out.end(), metric) == out.end())
            out.push_back(metric);
    }
    return out;
}

Cell make_cell(const results::RunData& data, const std::string& point, const std::string& variant, const ProbeRef& p,
               const std::string& metric) {
    Cell c;
    c.point = point;
    c.variant = variant;
    c.probe = p;
    c.metric = metric;
    c.spec = detail::metric_spec(p, metric);
    c.trial = detail::trial_at(data, point, variant);
    if (c.trial) c.values = detail::values_of(data, c.trial->index, p.name, metric);
    c.summary = summarize(c.values);
    if (c.trial) {
        c.tally = detail::tally_of(data, c.trial->index, p.name);
        for (const auto& ms : data.measurements) {
            if (ms.trial != c.trial->index || ms.probe != p.name) continue;
            ++c.repeats;
            c.unmeasured += std::any_of(ms.notes.begin(), ms.notes.end(),
                                        [](const std::string& n) { return n.starts_with(results::kErrorNote); });
        }
    }
    if (const auto& rule = data.run.repeats; rule.adaptive && c.trial && !c.values.empty()) {
        c.first = data.first_repeats(c.trial->index, p.name, metric, rule.first);
        auto finite = c.first;
        std::erase_if(finite, [](double v) { return !std::isfinite(v); });
        double half = probes::stats::stein_half_width(c.first, c.values.size());
        double reference = finite.size() >= 2 ? std::fabs(probes::stats::median(finite)) : 0;
        if (reference > 0 && std::isfinite(half)) c.mean_half_width = half / reference;
        c.unsettled = c.values.size() >= rule.max && finite.size() >= 2 && half > rule.precision * reference;
    }
    return c;
}

void build_rows(Model& m, const std::vector<ProbeRef>& probes, const ReportOptions& options) {
    const auto& data = *m.data;
    for (const auto& point : m.points)
        for (const auto& p : probes)
            for (const auto& metric : metrics_for(p, options.metrics)) {
                std::vector<Cell> cells;
                bool any = false;
                for (const auto& v : m.variants) {
                    cells.push_back(make_cell(data, point, v, p, metric));
                    any = any || cells.back().summary.n > 0;
                }
                if (!any) continue;  // e.g. a tool that does not report this metric
                std::size_t base = m.cells.size();
                m.cells.push_back(cells.front());
                if (cells.size() == 1) m.rows.push_back(Row{base, kNone, Difference{}});
                for (std::size_t i = 1; i < cells.size(); ++i) {
                    Row r{base, m.cells.size(), Difference{}};
                    bool higher = !cells[i].spec || cells[i].spec->higher_is_better;
                    r.diff = data.run.repeats.adaptive ? difference(cells.front().values, cells[i].values, higher,
                                                                    cells.front().first, cells[i].first)
                                                       : difference(cells.front().values, cells[i].values, higher);
                    if (cells.front().tally.lost_too_many() || cells[i].tally.lost_too_many()) {
                        r.too_many_failures = true;
                        r.diff.significant = false;
                    }
                    m.cells.push_back(cells[i]);
                    m.rows.push_back(r);
                }
            }
    for (const auto& w : options.metrics) {
        bool found = std::any_of(probes.begin(), probes.end(), [&w](const ProbeRef& p) {
            auto ms = metrics_for(p, {w});
            return !ms.empty();
        });
        if (!found) m.notes.push_back(fmt::format("metric {}: no probe in this run reports it", w));
    }
}

// The pivot's metric: asked for, else the first assert's (one that only bounds failures, such
// as failure_rate, guards the answer and is not the question: any other assert's comes first),
// else the first probe's headline.
std::optional<std::pair<ProbeRef, std::string>> pivot_metric(const std::vector<ProbeRef>& probes,
                                                             const std::vector<experiment::AssertSpec>& asserts,
                                                             const ReportOptions& options,
                                                             std::vector<std::string>& notes) {
    using Choice = std::pair<ProbeRef, std::string>;
    if (!options.pivot.empty()) {
        auto [probe, metric] = split_metric(options.pivot);
        for (const auto& p : probes)
            if ((probe.empty() || p.name == probe) && detail::metric_spec(p, metric)) return Choice{p, metric};
        notes.push_back(fmt::format("pivot {}: no probe in this run reports it", options.pivot));
        return std::nullopt;
    }
    static const std::set<std::string> kGuards{"attempted",    "completed", "failed",  "timed_out",
                                               "failure_rate", "errors",    "timeouts"};
    for (bool guard : {false, true})
        for (const auto& a : asserts)
            if (const auto* p = detail::find_probe(probes, a.probe, a.metric);
                p && detail::metric_spec(*p, a.metric) && kGuards.count(a.metric) == (guard ? 1u : 0u))
                return Choice{*p, a.metric};
    for (const auto& p : probes)
        if (auto h = detail::headline_metrics(p); !h.empty()) return Choice{p, h.front()};
    return std::nullopt;
}

// Rows: the first swept path's values. Columns: the second's, with one table per variant
// (and per value of any further path); else the variants, in one table.
void build_pivot(Model& m, const std::vector<ProbeRef>& probes, const std::vector<experiment::AssertSpec>& asserts,
                 const ReportOptions& options) {
    const auto& data = *m.data;
    if (!detail::has_sweep(data)) return;
    auto choice = pivot_metric(probes, asserts, options, m.notes);
    if (!choice) return;
    Pivot pv;
    pv.probe = choice->first;
    pv.metric = choice->second;
    pv.spec = detail::metric_spec(pv.probe, pv.metric);
    pv.row_key = m.sweep_keys.at(0);
    pv.column_key = m.sweep_keys.size() > 1 ? m.sweep_keys[1] : "variant";
    auto add_unique = [](std::vector<std::string>& list, const std::string& s) {
        if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
    };
    for (const auto& t : data.trials) {
        if (t.sweep.empty()) continue;
        std::string row = t.sweep[0].second, column = t.variant, label;
        if (m.sweep_keys.size() > 1 && t.sweep.size() > 1) {
            column = t.sweep[1].second;
            label = t.variant;
            for (std::size_t i = 2; i < t.sweep.size(); ++i)
                label += (i == 2 ? " @ " : ", ") + t.sweep[i].first + "=" + t.sweep[i].second;
        }
        auto g = std::find_if(pv.groups.begin(), pv.groups.end(),
                              [&label](const PivotGroup& x) { return x.label == label; });
        if (g == pv.groups.end()) {
            pv.groups.push_back(PivotGroup{label, {}, {}, {}});
            g = pv.groups.end() - 1;
        }
        add_unique(g->rows, row);
        add_unique(g->columns, column);
        auto& cell = g->cells[{row, column}];
        if (!cell.trial) cell.trial = &t;
        auto v = detail::values_of(data, t.index, pv.probe.name, pv.metric);
        cell.values.insert(cell.values.end(), v.begin(), v.end());
        cell.summary = summarize(cell.values);
        cell.tally.add(detail::tally_of(data, t.index, pv.probe.name));
    }
    // Variants as columns: the baseline first, as in every other table.
    if (pv.column_key == "variant")
        for (auto& g : pv.groups) {
            std::vector<std::string> ordered;
            for (const auto& v : m.variants)
                if (std::find(g.columns.begin(), g.columns.end(), v) != g.columns.end()) ordered.push_back(v);
            g.columns = ordered;
        }
    m.pivot = std::move(pv);
}

std::string flagged(const Cell& c, std::string text) { return detail::emulation_failed(c.trial) ? text + " !" : text; }

// Lines of the header that a reader must not miss: trials whose emulation did not hold (the
// numbers do not describe the configured path) and trials that failed.
// The measurements of trial `t` a tool refused, one line per probe: how many, and why.
std::vector<std::string> refused_measurements(const results::RunData& data, const results::Trial& t) {
    std::vector<std::string> out;
    std::map<std::string, std::pair<std::size_t, std::string>> by_probe;  // failed repeats, first message
    std::map<std::string, std::size_t> repeats;
    std::vector<std::string> order;
    for (const auto& m : data.measurements) {
        if (m.trial != t.index) continue;
        if (!repeats.count(m.probe)) order.push_back(m.probe);
        ++repeats[m.probe];
        for (const auto& n : m.notes)
            if (n.starts_with(results::kErrorNote)) {
                auto& [count, first] = by_probe[m.probe];
                if (count++ == 0) first = n.substr(std::string_view(results::kErrorNote).size());
            }
    }
    for (const auto& p : order)
        if (auto it = by_probe.find(p); it != by_probe.end())
            out.push_back(fmt::format("x {}: probe {}: {} of {} repeat{} not measured: {}", trial_name(t), p,
                                      it->second.first, repeats[p], repeats[p] == 1 ? "" : "s", it->second.second));
    return out;
}

// Trial `t`'s probes whose exchanges failed, one line each: how many of how many, and what the
// figures then rest on (probes' attempted and failed, summed over the repeats).
std::vector<std::string> lost_exchanges(const results::RunData& data, const results::Trial& t) {
    std::vector<std::pair<std::string, std::string>> probes;  // (name, kind), in the order measured
    for (const auto& m : data.measurements)
        if (m.trial == t.index &&
            std::none_of(probes.begin(), probes.end(), [&m](const auto& p) { return p.first == m.probe; }))
            probes.emplace_back(m.probe, m.kind);
    std::vector<std::string> out;
    for (const auto& [probe, kind] : probes) {
        const auto n = detail::tally_of(data, t.index, probe);
        if (!n.lost_some()) continue;
        double timeouts = 0;
        for (double x : detail::values_of(data, t.index, probe, "timeouts")) timeouts += x;
        const auto& traits = probes::traits_of(kind);
        const std::string one = traits.exchange ? traits.exchange : "probe";
        const char* figures = traits.measures_rtt ? "RTT" : "latency";
        out.push_back(fmt::format(
            "x {}: probe {}: {:.0f} of {:.0f} {}s failed{}: {}{}", trial_name(t), probe, n.failed, n.attempted, one,
            timeouts > 0 ? fmt::format(" ({:.0f} timed out)", timeouts) : "",
            n.failed >= n.attempted
                ? fmt::format("it has no {} figures", figures)
                : fmt::format("its {} figures rest on the other {:.0f}", figures, n.attempted - n.failed),
            n.lost_too_many() ? fmt::format("; over {:.0f}% failed, so no verdict on it", kFailureLimit * 100) : ""));
    }
    return out;
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Each probe's phases over its repeats, trial by trial in plan order; a probe whose repeats
// went through different phases (a schedule that stopped) counts the phases all reached.
std::vector<PhaseSummary> phase_summaries(const results::RunData& data) {
    std::vector<PhaseSummary> out;
    for (const auto& t : data.trials) {
        std::map<std::string, std::vector<const nlohmann::json*>> by_probe;
        std::vector<std::string> order;
        for (const auto& m : data.measurements) {
            if (m.trial != t.index || !m.counters.contains("schedule")) continue;
            const auto& sc = m.counters["schedule"];
            if (!sc.contains("phases") || !sc["phases"].is_array()) continue;
            if (!by_probe.count(m.probe)) order.push_back(m.probe);
            by_probe[m.probe].push_back(&sc["phases"]);
        }
        for (const auto& probe : order) {
            const auto& repeats = by_probe[probe];
            std::size_t n = repeats.front()->size();
            for (const auto* r : repeats) n = std::min(n, r->size());
            PhaseSummary s{&t, probe, {}, repeats.size()};
            for (std::size_t i = 0; i < n; ++i) {
                PhaseSummary::Phase p;
                std::vector<double> from, to;
                std::map<std::string, std::vector<double>> values, in_force;
                for (const auto* r : repeats) {
                    const auto& ph = (*r)[i];
                    p.entry = ph.value("entry", std::size_t{0});
                    from.push_back(ph.value("from", 0.0));
                    to.push_back(ph.value("to", 0.0));
                    if (ph.contains("medians") && ph["medians"].is_object())
                        for (const auto& [k, v] : ph["medians"].items())
                            if (v.is_number()) values[k].push_back(v.get<double>());
                    if (ph.contains("link") && ph["link"].is_object())
                        for (const auto& [k, v] : ph["link"].items())
                            if (v.is_number()) in_force[k].push_back(v.get<double>());
                }
                p.from = median_of(from);
                p.to = median_of(to);
                for (const auto& [k, v] : values) p.medians[k] = median_of(v);
                for (const auto& [k, v] : in_force) p.in_force[k] = median_of(v);
                s.phases.push_back(std::move(p));
            }
            if (!s.phases.empty()) out.push_back(std::move(s));
        }
    }
    return out;
}

}  // namespace

std::string phase_line(const PhaseSummary& p) {
    std::vector<std::string> parts;
    for (const auto& ph : p.phases) {
        std::string figures;
        for (const auto& [name, v] : ph.medians)
            figures +=
                fmt::format("{}{} {}", figures.empty() ? "" : ", ", name, probes::human(probes::series_unit(name), v));
        // What the link allowed: the rate in force (time-weighted), the delay both ways, loss
        // and outage where there were any.
        std::vector<std::string> allowed;
        auto at = [&ph](const char* k) {
            auto it = ph.in_force.find(k);
            return it == ph.in_force.end() ? std::nan("") : it->second;
        };
        // The rate outside the outage: the time-weighted mean would read as a rate of its own.
        const double length = ph.to - ph.from, outage = at("outage") > 0 ? at("outage") : 0;
        if (at("rate") > 0 && length > outage)
            allowed.push_back(probes::human(probes::Unit::bits_per_second, at("rate") * length / (length - outage)));
        if (at("rtt") >= 0) allowed.push_back("RTT " + probes::human(probes::Unit::seconds, at("rtt")));
        if (at("loss") > 0) allowed.push_back("loss " + probes::human(probes::Unit::fraction, at("loss")));
        if (at("outage") > 0) allowed.push_back("outage " + probes::human(probes::Unit::seconds, at("outage")));
        parts.push_back(fmt::format(
            "{} {:.2f}-{:.2f} s{}: {}", ph.entry == 0 ? std::string("[link]") : fmt::format("#{}", ph.entry), ph.from,
            ph.to, allowed.empty() ? "" : fmt::format(" ({} in force)", fmt::join(allowed, ", ")),
            figures.empty() ? "no samples" : figures));
    }
    auto point = detail::point_label(*p.trial);
    return fmt::format("{}, {}{} (median of {} repeat{}): {}", p.probe, p.trial->variant,
                       point.empty() ? "" : " @ " + point, p.repeats, p.repeats == 1 ? "" : "s",
                       fmt::join(parts, "; "));
}

std::string trial_name(const results::Trial& t) {
    auto point = detail::point_label(t);
    return fmt::format("trial {} ({}) {}{}", t.index, t.id, t.variant, point.empty() ? "" : " @ " + point);
}

Model build(const results::RunData& data, const std::vector<experiment::AssertSpec>& asserts,
            const ReportOptions& options) {
    Model m;
    m.data = &data;
    m.baseline = detail::baseline_of(data);
    m.points = detail::points_of(data);
    m.variants = detail::variants_of(data);
    for (const auto& t : data.trials)
        for (const auto& kv : t.sweep)
            if (std::find(m.sweep_keys.begin(), m.sweep_keys.end(), kv.first) == m.sweep_keys.end())
                m.sweep_keys.push_back(kv.first);
    auto probes = detail::probes_of(data);
    build_rows(m, probes, options);
    build_pivot(m, probes, asserts, options);
    // Factor effects and the best configuration, on the pivot's metric (a sweep has a pivot).
    if (m.pivot) {
        std::vector<std::string> factors{"variant"};
        auto swept = sweep_factors(data, m.sweep_keys);
        factors.insert(factors.end(), swept.begin(), swept.end());
        m.effects_probe = m.pivot->probe;
        m.effects_metric = m.pivot->metric;
        m.effects = factor_effects(data, m.effects_probe, m.effects_metric, factors);
        m.best = best_configuration(data, m.effects_probe, m.effects_metric);
    }
    m.explanations = explanations(data);
    m.phases = phase_summaries(data);
    m.outcomes = evaluate(data, asserts);
    m.asserted = !asserts.empty();
    m.files_root = options.files_root;
    return m;
}

std::string capture_path(const Model& m, const results::Capture& c) {
    std::filesystem::path p(c.path);
    if (p.is_absolute() || m.files_root.empty()) return p.string();
    return (std::filesystem::path(m.files_root) / p).lexically_normal().string();
}

std::string capture_line(const Model& m, const results::Trial& t, const results::Capture& c) {
    auto point = detail::point_label(t);
    auto s =
        fmt::format("{}, {}{}, {} ({}): {}: {} packets, {}", c.probe, t.variant, point.empty() ? "" : " @ " + point,
                    c.host, c.dev, capture_path(m, c), c.packets, detail::human_bytes(static_cast<double>(c.bytes)));
    if (c.dropped > 0) s += fmt::format(", {} dropped by the kernel (capture buffer full)", c.dropped);
    if (!c.stopped.empty()) s += "; stopped: " + c.stopped;
    return s;
}

std::string status_text(const results::Run& run) {
    std::string why = run.error.empty() ? "" : ": " + run.error;
    // "interrupted by SIGINT" says the status itself: not "interrupted: ...: interrupted by SIGINT".
    if (run.status == results::RunStatus::interrupted)
        return run.error.starts_with("interrupted") ? run.error + ": partial results"
                                                    : "interrupted: partial results" + why;
    if (run.status == results::RunStatus::failed) return "failed: partial results" + why;
    if (run.status == results::RunStatus::running) return "running: partial results";
    return to_string(run.status) + why;
}

std::size_t trials_done(const results::RunData& data) {
    return static_cast<std::size_t>(std::count_if(data.trials.begin(), data.trials.end(), [](const results::Trial& t) {
        return t.status == results::TrialStatus::done;
    }));
}

std::size_t trials_planned(const results::RunData& data) {
    return data.run.planned_trials ? data.run.planned_trials : data.trials.size();
}

std::vector<std::pair<std::string, std::vector<std::size_t>>> trial_origins(const results::RunData& data) {
    std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
    for (const auto& t : data.trials) {
        if (t.origin.empty()) continue;
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.first == t.origin; });
        if (it == out.end()) it = out.insert(out.end(), {t.origin, {}});
        it->second.push_back(t.index);
    }
    return out;
}

std::vector<std::size_t> session_trials(const results::RunData& data, std::size_t session) {
    std::vector<std::size_t> out;
    for (const auto& t : data.trials)
        if (t.session == session) out.push_back(t.index);
    return out;
}

std::vector<std::string> session_lines(const results::RunData& data) {
    std::vector<std::string> out;
    const auto& sessions = data.run.sessions;
    if (sessions.size() < 2) return out;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
        const auto& s = sessions[i];
        auto trials = session_trials(data, i + 1);
        out.push_back(fmt::format(
            "session {}: {}{} on {}, kernel {} ({}): {}{}{}; {}", i + 1, s.started,
            s.finished.empty() ? "" : " to " + s.finished, s.hostname, s.kernel, s.where, s.status,
            s.error.empty() ? "" : ": " + s.error, s.note.empty() ? "" : "; " + s.note,
            trials.empty() ? "no trial finished"
                           : fmt::format("trial{} {}", trials.size() == 1 ? "" : "s", fmt::join(trials, ", "))));
    }
    return out;
}

// A value as /proc/sys holds it, for a sentence: "4096 131072 6291456", not tab-separated.
std::string sysctl_words(std::string v) {
    std::replace(v.begin(), v.end(), '\t', ' ');
    return v;
}

std::vector<std::string> kernel_warnings(const results::RunData& data) {
    // Keys every trial set itself: their defaults did not reach the numbers.
    std::set<std::string> fixed;
    for (std::size_t i = 0; i < data.trials.size(); ++i) {
        std::set<std::string> keys;
        for (const auto& [k, v] : data.trials[i].sysctls)
            if (k.find(':') == std::string::npos) keys.insert(k);  // global: on every lab host
        if (i == 0)
            fixed = keys;
        else
            std::erase_if(fixed, [&keys](const std::string& k) { return !keys.count(k); });
    }
    auto differences = [&fixed](const std::map<std::string, std::string>& there,
                                const std::map<std::string, std::string>& here) {
        std::vector<std::string> out;
        for (const auto& [k, v] : there)
            if (auto h = here.find(k); h != here.end() && h->second != v && !fixed.count(k))
                out.push_back(fmt::format("{} {} (here {})", k, sysctl_words(v), sysctl_words(h->second)));
        return out;
    };
    std::vector<std::string> out;
    const auto& env = data.run.env;
    if (env.host) {
        auto d = differences(env.sysctls_before, env.host->sysctls_before);
        out.push_back(fmt::format(
            "! measured in the micro-VM's kernel {} ({}), not this machine's {} ({}){}; the numbers describe that "
            "kernel with its defaults: set what you compare in the experiment",
            env.kernel, env.where, env.host->kernel, env.host->hostname,
            d.empty() ? "" : fmt::format(", whose defaults differ: {}", fmt::join(d, ", "))));
    }
    for (const auto& [role, m] : env.machines) {
        if (m.ssh == "local") continue;
        auto d = differences(m.sysctls_before, env.sysctls_before);
        if (m.kernel == env.kernel && d.empty()) continue;
        out.push_back(fmt::format(
            "! the {} machine ({}) ran kernel {}{}{}", role, m.ssh, m.kernel,
            m.kernel == env.kernel ? "" : fmt::format(", not this machine's {}", env.kernel),
            d.empty() ? "" : fmt::format("; its defaults differ from this machine's: {}", fmt::join(d, ", "))));
    }
    return out;
}

std::vector<std::string> trial_warnings(const results::RunData& data) {
    std::vector<std::string> out = kernel_warnings(data);
    for (const auto& t : data.trials) {
        if (detail::emulation_failed(&t))
            out.push_back(fmt::format("! {}: emulation did not hold{}{}", trial_name(t),
                                      t.check.note.empty() ? "" : ": ", t.check.note));
        if (t.status == results::TrialStatus::failed || t.status == results::TrialStatus::interrupted)
            out.push_back(fmt::format("x {}: {}{}{}", trial_name(t), t.status, t.error.empty() ? "" : ": ", t.error));
        for (auto& line : refused_measurements(data, t)) out.push_back(std::move(line));
        for (auto& line : lost_exchanges(data, t)) out.push_back(std::move(line));
    }
    return out;
}

probes::Unit unit(const Cell& c) { return c.spec ? c.spec->unit : probes::Unit::count; }

std::string cell_text(const Cell& c) {
    auto text = detail::human_ci(unit(c), c.summary);
    if (!c.first.empty()) {
        text += fmt::format(" n={}{}", c.values.size(), c.unsettled ? " max" : "");
        // The interval the rule settles (the mean's), beside the median's shown before it.
        if (std::isfinite(c.mean_half_width)) text += fmt::format(", mean +-{:.1f}%", c.mean_half_width * 100);
    }
    if (c.unmeasured > 0) text += fmt::format(" ({} of {} repeats not measured)", c.unmeasured, c.repeats);
    return flagged(c, text + c.tally.text());
}

std::string delta_text(const Row& r) {
    if (r.other == kNone) return "";
    return detail::signed_percent(r.diff.delta) + (r.diff.significant ? " *" : "");
}

std::string verdict(const Row& r) {
    if (r.other != kNone && r.too_many_failures) return "no verdict: failures";
    if (r.other != kNone && r.diff.too_few) return "too few repeats";
    if (r.other == kNone || !r.diff.significant) return "";
    return r.diff.better ? "better" : "worse";
}

// "[CI]: ... 75% at 3 repeats": the coverage of the intervals actually shown.
std::string coverage_legend(const Model& m) {
    std::map<std::size_t, double> by_n;
    for (const auto& c : m.cells)
        if (c.summary.n > 0) by_n[c.summary.n] = c.summary.confidence;
    std::string s;
    for (const auto& kv : by_n) {
        if (!s.empty()) s += ", ";
        s += kv.first < 2 ? "none at 1 repeat"
             : kv.first < kMinJudgedRepeats
                 ? fmt::format("at {} repeats the range of the values, not a confidence interval", kv.first)
                 : fmt::format("{:.1f}% at {} repeats", kv.second * 100, kv.first);
    }
    return s;
}

std::string repeats_legend(const Model& m) {
    const auto& rule = m.data->run.repeats;
    if (!rule.adaptive) return "";
    std::size_t cells = 0, unsettled = 0;
    for (const auto& c : m.cells)
        if (!c.first.empty()) ++cells, unsettled += c.unsettled;
    return fmt::format(
        "repeats: auto, {} first, then until the mean's 95% interval is within +-{:g}% of the median (Stein's "
        "two-stage rule), at most {}; n: repeats; mean +-: that interval's half-width, the one the rule settles (the "
        "brackets are the median's); max: stopped at {} still wider ({} of {} cells)",
        rule.first, rule.precision * 100, rule.max, rule.max, unsettled, cells);
}

// The before/after table, for table and markdown.
detail::TextTable before_after(const Model& m) {
    bool sweep = detail::has_sweep(*m.data), compare = m.variants.size() > 1;
    std::vector<std::string> header;
    std::vector<bool> right;
    if (sweep) header.push_back("point"), right.push_back(false);
    header.push_back("metric"), right.push_back(false);
    header.push_back(m.baseline + (compare ? " (baseline)" : "")), right.push_back(true);
    if (compare) {
        for (const char* h : {"variant", "median [CI]", "delta", "verdict"}) header.push_back(h);
        for (bool r : {false, true, true, false}) right.push_back(r);
    }
    detail::TextTable table(header, right);
    std::string last_point, last_metric;
    for (const auto& r : m.rows) {
        const auto& base = m.cells[r.base];
        std::vector<std::string> row;
        std::string metric = base.probe.name + "." + base.metric;
        bool same = base.point == last_point && metric == last_metric;
        // Repeated point/metric/baseline cells left blank: the eye follows the variants.
        if (sweep) row.push_back(base.point == last_point ? "" : base.point);
        row.push_back(same ? "" : metric);
        row.push_back(same ? "" : cell_text(base));
        if (compare && r.other != kNone) {
            const auto& o = m.cells[r.other];
            row.push_back(o.variant);
            row.push_back(cell_text(o));
            row.push_back(delta_text(r));
            row.push_back(verdict(r));
        }
        last_point = base.point, last_metric = metric;
        table.add(row);
    }
    return table;
}

std::vector<detail::TextTable> pivot_tables(const Model& m) {
    std::vector<detail::TextTable> out;
    const auto& pv = *m.pivot;
    auto u = pv.spec ? pv.spec->unit : probes::Unit::count;
    for (const auto& g : pv.groups) {
        std::vector<std::string> header{pv.row_key + " \\ " + pv.column_key};
        std::vector<bool> right{false};
        for (const auto& c : g.columns) header.push_back(c), right.push_back(true);
        detail::TextTable t(header, right);
        for (const auto& r : g.rows) {
            std::vector<std::string> row{r};
            for (const auto& c : g.columns) {
                auto it = g.cells.find({r, c});
                if (it == g.cells.end()) {
                    row.push_back("-");
                    continue;
                }
                const auto& cell = it->second;
                row.push_back(flagged(cell, probes::human(u, cell.summary.median) + cell.tally.text()));
            }
            t.add(row);
        }
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<std::string> more_repeats(const Model& m) {
    // The least n per side with n >= 2 (t(0.975, 2n-2) + t(0.80, 2n-2))^2 s^2 / d^2, s^2 the
    // two sides' mean variance: Welch's test at 5% with 80% power. Student's t, not the normal
    // quantiles, because the counts are small: with z, a difference that 3 repeats failed to
    // show was said to need "about 3".
    constexpr int kNoise = 50;  // repeats a side beyond which a difference is called noise
    std::vector<std::string> out;
    for (const auto& r : m.rows) {
        if (r.other == kNone || r.diff.significant || r.too_many_failures) continue;
        const auto& b = m.cells[r.base];
        const auto& o = m.cells[r.other];
        const auto& vb = b.values;  // finite: values_of() leaves NaN out
        const auto& vo = o.values;
        if (vb.size() < 2 || vo.size() < 2) continue;
        double d = probes::stats::mean(vo) - probes::stats::mean(vb);
        double s2 = (std::pow(probes::stats::stdev(vb), 2) + std::pow(probes::stats::stdev(vo), 2)) / 2;
        if (!(std::fabs(d) > 0) || !(s2 > 0)) continue;
        int needed = kNoise + 1;
        for (int n = kMinJudgedRepeats; n <= kNoise; ++n) {
            double df = 2.0 * n - 2, t = probes::stats::student_t_critical(0.05, df) +
                                         probes::stats::student_t_critical(0.40, df);  // two-sided 0.40: one-sided 0.80
            if (2 * t * t * s2 / (d * d) <= n) {
                needed = n;
                break;
            }
        }
        auto what = fmt::format("{}.{}, {}{}: {} at {} and {} repeats", b.probe.name, b.metric, o.variant,
                                b.point.empty() ? "" : " @ " + b.point, detail::signed_percent(r.diff.delta), vb.size(),
                                vo.size());
        auto have = static_cast<int>(std::min(vb.size(), vo.size()));
        if (needed > kNoise)
            out.push_back(
                fmt::format("{}: more than {} repeats a side would be needed to tell a difference this "
                            "size: within the noise",
                            what, kNoise));
        else if (needed <= have)
            out.push_back(
                fmt::format("{}: not significant, though {} repeats a side usually tell a difference this "
                            "size (a test at 5% with 80% power): run it again before reading a verdict",
                            what, needed));
        else
            out.push_back(
                fmt::format("{}: about {} repeats a side would tell a difference this size (a test at "
                            "5% with 80% power)",
                            what, needed));
    }
    if (!out.empty() && !m.data->run.repeats.adaptive)
        out.push_back("or [run] repeats = \"auto\": each cell repeated until its interval is within a precision");
    return out;
}

std::string assert_summary(const Model& m) {
    auto failed = std::count_if(m.outcomes.begin(), m.outcomes.end(), [](const AssertOutcome& o) { return !o.passed; });
    return fmt::format("{} checks, {} passed, {} failed", m.outcomes.size(), m.outcomes.size() - failed, failed);
}

std::string environment_line(const results::Environment& e) {
    std::string s = e.where.empty() ? "?" : e.where;
    if (!e.kernel.empty()) s += ", kernel " + e.kernel;
    if (!e.machine.empty()) s += " " + e.machine;
    if (!e.hostname.empty()) s += " on " + e.hostname;
    if (!e.wanlab_version.empty()) s += ", wanlab " + e.wanlab_version;
    for (const auto& [role, m] : e.machines)
        if (m.ssh != "local") s += fmt::format("; {}: kernel {} {} on {}", role, m.kernel, m.machine, m.hostname);
    return s;
}

}  // namespace wanlab::report::detail
