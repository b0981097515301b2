// The shape of a run as the reports walk it: sweep points in plan order, variants with the
// baseline first, probes in the order measured, and the repeats of one cell.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "probes/probe.h"
#include "report/detail.h"

namespace wanlab::report::detail {
namespace {

void add_unique(std::vector<std::string>& list, const std::string& s) {
    if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
}

// A command probe's own metrics, as the notes of its measurements declare them.
std::shared_ptr<const OwnMetrics> own_metrics(const results::RunData& data, const std::string& probe) {
    auto own = std::make_shared<OwnMetrics>();
    for (const auto& m : data.measurements) {
        if (m.probe != probe) continue;
        for (const auto& note : m.notes) {
            auto noted = probes::parse_output_note(note);
            if (!noted || std::any_of(own->names.begin(), own->names.end(),
                                      [&](const std::string& n) { return n == noted->name; }))
                continue;
            own->names.push_back(noted->name);
            own->specs.push_back(
                {own->names.back().c_str(), noted->unit, noted->higher_is_better, "read from the command's output"});
        }
    }
    if (own->specs.empty()) return nullptr;
    return own;
}

}  // namespace

std::string point_label(const results::Trial& t) {
    std::string s;
    for (const auto& kv : t.sweep) s += (s.empty() ? "" : ", ") + kv.first + "=" + kv.second;
    return s;
}

std::vector<std::string> points_of(const results::RunData& data) {
    std::vector<std::string> points;
    for (const auto& t : data.trials) add_unique(points, point_label(t));
    if (points.empty()) points.emplace_back();
    return points;
}

std::string baseline_of(const results::RunData& data) {
    if (!data.run.baseline.empty()) return data.run.baseline;
    return data.trials.empty() ? "" : data.trials.front().variant;
}

std::vector<std::string> variants_of(const results::RunData& data) {
    std::vector<std::string> variants;
    if (auto b = baseline_of(data); !b.empty()) variants.push_back(b);
    for (const auto& t : data.trials) add_unique(variants, t.variant);
    return variants;
}

const results::Trial* trial_at(const results::RunData& data, const std::string& point, const std::string& variant) {
    for (const auto& t : data.trials)
        if (t.variant == variant && point_label(t) == point) return &t;
    return nullptr;
}

bool has_sweep(const results::RunData& data) {
    return std::any_of(data.trials.begin(), data.trials.end(),
                       [](const results::Trial& t) { return !t.sweep.empty(); });
}

std::vector<ProbeRef> probes_of(const results::RunData& data) {
    std::vector<ProbeRef> probes;
    for (const auto& m : data.measurements) {
        auto same = [&m](const ProbeRef& p) { return p.name == m.probe; };
        if (std::none_of(probes.begin(), probes.end(), same))
            probes.push_back(ProbeRef{m.probe, m.kind,
                                      probes::traits_of(m.kind).user_command ? own_metrics(data, m.probe) : nullptr});
    }
    return probes;
}

const ProbeRef* find_probe(const std::vector<ProbeRef>& probes, const std::string& name, const std::string& metric) {
    for (const auto& p : probes) {
        if (!name.empty() && p.name == name) return &p;
        if (name.empty() && metric_spec(p, metric)) return &p;
    }
    return nullptr;
}

const probes::MetricSpec* metric_spec(const ProbeRef& probe, const std::string& metric) {
    if (probe.own)
        for (const auto& s : probe.own->specs)
            if (metric == s.name) return &s;
    const auto* k = probes::find_kind(probe.kind);
    return k ? probes::describe_metric(*k, metric) : nullptr;
}

std::vector<std::string> headline_metrics(const ProbeRef& probe) {
    std::vector<std::string> out;
    // What a performance engineer looks at first for each kind (probes/probe_spec.h); a metric
    // the kind does not declare is dropped, so the table never shows a row that cannot exist.
    for (const char* m : probes::traits_of(probe.kind).headline)
        if (metric_spec(probe, m)) out.emplace_back(m);
    if (probe.own)
        for (const auto& s : probe.own->specs) out.emplace_back(s.name);
    return out;
}

std::vector<double> values_of(const results::RunData& data, std::size_t trial_index, const std::string& probe,
                              const std::string& metric) {
    std::vector<double> v;
    for (const auto& m : data.measurements) {
        if (m.trial != trial_index || m.probe != probe) continue;
        if (auto it = m.metrics.find(metric); it != m.metrics.end() && std::isfinite(it->second))
            v.push_back(it->second);
    }
    return v;
}

void Tally::add(const Tally& other) {
    auto sum = [](double& into, double x) {
        if (std::isfinite(x)) into = std::isfinite(into) ? into + x : x;
    };
    sum(attempted, other.attempted);
    sum(failed, other.failed);
}

bool Tally::lost_some() const { return std::isfinite(failed) && failed > 0; }

bool Tally::lost_too_many() const {
    return lost_some() && std::isfinite(attempted) && failed > kFailureLimit * attempted;
}

std::string Tally::text() const {
    if (!lost_some()) return "";
    return fmt::format(" ({:.0f} of {:.0f} failed{})", failed, attempted, lost_too_many() ? ": no verdict" : "");
}

Tally tally_of(const results::RunData& data, std::size_t trial_index, const std::string& probe) {
    Tally t;
    for (double x : values_of(data, trial_index, probe, "attempted")) t.add({x, results::kNaN});
    for (double x : values_of(data, trial_index, probe, "failed")) t.add({results::kNaN, x});
    return t;
}

bool emulation_failed(const results::Trial* t) { return t && !t->check.held; }

std::string subject(const std::string& probe, const std::string& metric, const std::string& variant,
                    const std::string& point) {
    std::string s = probe.empty() ? metric : probe + "." + metric;
    if (!variant.empty()) s += " " + variant;
    if (!point.empty()) s += " @ " + point;
    return s;
}

}  // namespace wanlab::report::detail
