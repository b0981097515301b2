#include "experiment/asserts.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/probe_spec.h"

namespace wanlab::lab {

using config::Node;
using config::Reader;

namespace {

// A command probe's metric read from its output, nullptr if `p` declares none of that name.
const probes::OutputMetric* own_metric(const probes::ProbeSpec& p, const std::string& metric) {
    for (const auto& o : p.outputs)
        if (o.name == metric) return &o;
    return nullptr;
}

}  // namespace

void parse_asserts(const Node* table_array, const Experiment& exp, const std::vector<probes::ProbeSpec>& probes,
                   Diagnostics& diag, std::vector<AssertSpec>& out) {
    if (!table_array) return;
    std::vector<std::string> probe_names;
    for (const auto& p : probes) probe_names.push_back(p.name);
    for (std::size_t i = 0; i < table_array->items.size(); ++i) {
        const Node& t = table_array->items[i];
        Reader r(t, fmt::format("[[assert]] #{}", i + 1), diag);
        AssertSpec a;
        a.at = t.value_at;
        auto metric = r.string("metric");
        auto probe = r.string("probe");
        auto variant = r.string("variant");
        const Node* at_least = r.raw("at_least");
        const Node* at_most = r.raw("at_most");
        auto gain = r.gain("min_gain");
        std::size_t errors_before = diag.error_count();
        r.finish();
        // A misspelt key is the real problem; "needs a bound" on top of it would be noise.
        if (diag.error_count() > errors_before) continue;
        if (!r.has("metric")) {
            diag.error(t.value_at, fmt::format("[[assert]] #{} needs `metric`", i + 1));
            continue;
        }
        if (!at_least && !at_most && !r.has("min_gain")) {
            diag.error(t.value_at,
                       fmt::format("[[assert]] #{} needs a bound: `at_least`, `at_most` or `min_gain`", i + 1));
            continue;
        }
        if (!metric) continue;
        a.metric = *metric;
        // Which probe: the one named, or the only probe whose kind has this metric.
        const probes::ProbeSpec* target = nullptr;
        if (probe) {
            for (const auto& p : probes)
                if (p.name == *probe) target = &p;
            if (!target) {
                auto guess = did_you_mean(*probe, probe_names);
                diag.error(r.value_at("probe"),
                           fmt::format("no probe named `{}`{}", *probe,
                                       guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
                continue;
            }
        } else {
            std::vector<const probes::ProbeSpec*> with;
            for (const auto& p : probes)
                if (const auto* k = probes::find_kind(p.kind);
                    k && (probes::find_metric(*k, *metric) || own_metric(p, *metric)))
                    with.push_back(&p);
            if (with.size() > 1) {
                diag.error(r.key_at("metric"),
                           fmt::format("several probes report `{}`: say which with `probe`", *metric));
                continue;
            }
            if (!with.empty()) target = with.front();
        }
        std::vector<std::string> metric_names;
        const probes::MetricSpec* m = nullptr;
        probes::MetricSpec own{};  // a command probe's metric, named by its OutputMetric
        if (target) {
            const auto* kind = probes::find_kind(target->kind);
            for (const auto& ms : kind->metrics) metric_names.emplace_back(ms.name);
            for (const auto& o : target->outputs) metric_names.push_back(o.name);
            m = probes::find_metric(*kind, *metric);
            if (const auto* o = own_metric(*target, *metric)) {
                own = {o->name.c_str(), o->unit, o->higher_is_better, "read from the command's output"};
                m = &own;
            }
        } else {
            for (const auto& p : probes)
                if (const auto* k = probes::find_kind(p.kind))
                    for (const auto& ms : k->metrics) metric_names.emplace_back(ms.name);
        }
        if (!m) {
            auto guess = did_you_mean(*metric, metric_names);
            std::string list;
            for (const auto& n : metric_names) list += (list.empty() ? "" : ", ") + n;
            diag.error(r.value_at("metric"),
                       fmt::format("unknown metric `{}`{}{}", *metric,
                                   target ? fmt::format(" for probe `{}`", target->name) : "",
                                   guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)),
                       list.empty() ? "the experiment has no probes" : fmt::format("metrics: {}", list));
            continue;
        }
        a.probe = target->name;
        if (variant) {
            if (std::find(exp.variants.begin(), exp.variants.end(), *variant) == exp.variants.end()) {
                auto guess = did_you_mean(*variant, exp.variants);
                diag.error(r.value_at("variant"),
                           fmt::format("no variant named \"{}\"{}", *variant,
                                       guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
                continue;
            }
            a.variant = *variant;
            if (gain && *variant == exp.run.baseline)
                diag.error(r.value_at("variant"), fmt::format("`min_gain` compares a variant with the baseline; \"{}\" "
                                                              "is the baseline itself",
                                                              *variant));
        }
        if (gain && exp.variants.size() < 2)
            diag.error(r.key_at("min_gain"),
                       "`min_gain` needs at least two variants: a gain is measured against the baseline");
        a.min_gain = gain;
        auto bound = [&](const Node* n, const char* key) -> std::optional<double> {
            if (!n) return std::nullopt;
            switch (m->unit) {
                case probes::Unit::bits_per_second:
                    if (auto v = config::to_rate(*n, key, diag)) return static_cast<double>(*v);
                    return std::nullopt;
                case probes::Unit::seconds:
                    if (auto v = config::to_duration(*n, key, diag)) return static_cast<double>(v->count()) / 1e9;
                    return std::nullopt;
                case probes::Unit::fraction: return config::to_percent(*n, key, diag);
                case probes::Unit::bytes:
                    if (auto v = config::to_size(*n, key, diag)) return static_cast<double>(*v);
                    return std::nullopt;
                default:
                    if (n->kind == Node::Kind::value && n->value->is_number()) return n->value->value<double>();
                    diag.error(n->value_at, fmt::format("`{}` for `{}` must be a number", key, m->name));
                    return std::nullopt;
            }
        };
        a.at_least = bound(at_least, "at_least");
        a.at_most = bound(at_most, "at_most");
        if (a.at_least && a.at_most && *a.at_least > *a.at_most)
            diag.error(r.key_at("at_most"), "`at_most` is below `at_least`: no measurement can pass");
        out.push_back(a);
    }
}

}  // namespace wanlab::lab
