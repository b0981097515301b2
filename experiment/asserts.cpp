#include "experiment/asserts.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/probe_spec.h"

namespace wanlab::experiment {

using config::Node;
using config::Reader;

namespace {

// A command probe's metric read from its output, nullptr if `p` declares none of that name.
const probes::OutputMetric* own_metric(const probes::ProbeSpec& p, const std::string& metric) {
    for (const auto& o : p.outputs)
        if (o.name == metric) return &o;
    return nullptr;
}

/// One [[assert]] as the file writes it, before it is checked against the probes and
/// variants: its keys read, its bounds still TOML (their unit is the metric's).
struct RawAssert {
    std::size_t number;  // 1-based, as the messages count
    Reader keys;         // where each key is, for the cross-checks' messages
    std::string metric;
    std::optional<std::string> probe, variant;
    const Node* at_least;
    const Node* at_most;
    std::optional<double> gain;
};

/// The parse pass: the keys of [[assert]] #`number`, with what needs no other section (a
/// metric, a bound). nullopt when the entry has an error of its own.
std::optional<RawAssert> read_assert(const Node& t, std::size_t number, Diagnostics& diag) {
    Reader r(t, fmt::format("[[assert]] #{}", number), diag);
    auto metric = r.string("metric");
    auto probe = r.string("probe");
    auto variant = r.string("variant");
    const Node* at_least = r.raw("at_least");
    const Node* at_most = r.raw("at_most");
    auto gain = r.gain("min_gain");
    std::size_t errors_before = diag.error_count();
    r.finish();
    // A misspelt key is the real problem; "needs a bound" on top of it would be noise.
    if (diag.error_count() > errors_before) return std::nullopt;
    if (!r.has("metric")) {
        diag.error(t.value_at, fmt::format("[[assert]] #{} needs `metric`", number));
        return std::nullopt;
    }
    if (!at_least && !at_most && !r.has("min_gain")) {
        diag.error(t.value_at,
                   fmt::format("[[assert]] #{} needs a bound: `at_least`, `at_most` or `min_gain`", number));
        return std::nullopt;
    }
    if (!metric) return std::nullopt;
    return RawAssert{number, std::move(r), *metric, probe, variant, at_least, at_most, gain};
}

/// The probe an assert is about: the one it names, or else the only probe whose kind has its
/// metric (nullptr when none has). nullopt after an error.
std::optional<const probes::ProbeSpec*> target_probe(const RawAssert& a, const std::vector<probes::ProbeSpec>& probes,
                                                     Diagnostics& diag) {
    if (a.probe) {
        const probes::ProbeSpec* named = nullptr;
        for (const auto& p : probes)
            if (p.name == *a.probe) named = &p;
        if (named) return named;
        std::vector<std::string> probe_names;
        for (const auto& p : probes) probe_names.push_back(p.name);
        auto guess = did_you_mean(*a.probe, probe_names);
        diag.error(a.keys.value_at("probe"),
                   fmt::format("no probe named `{}`{}", *a.probe,
                               guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
        return std::nullopt;
    }
    std::vector<const probes::ProbeSpec*> with;
    for (const auto& p : probes)
        if (const auto* k = probes::find_kind(p.kind);
            k && (probes::find_metric(*k, a.metric) || own_metric(p, a.metric)))
            with.push_back(&p);
    if (with.size() > 1) {
        diag.error(a.keys.key_at("metric"),
                   fmt::format("several probes report `{}`: say which with `probe`", a.metric));
        return std::nullopt;
    }
    return with.empty() ? nullptr : with.front();
}

/// The metric an assert bounds, of `target` (its kind's, or a command probe's own, which is
/// then described in `own`); nullptr after an error naming the metrics there are.
const probes::MetricSpec* assert_metric(const RawAssert& a, const probes::ProbeSpec* target,
                                        const std::vector<probes::ProbeSpec>& probes, probes::MetricSpec& own,
                                        Diagnostics& diag) {
    std::vector<std::string> metric_names;
    const probes::MetricSpec* m = nullptr;
    if (target) {
        const auto* kind = probes::find_kind(target->kind);
        for (const auto& ms : kind->metrics) metric_names.emplace_back(ms.name);
        for (const auto& o : target->outputs) metric_names.push_back(o.name);
        m = probes::find_metric(*kind, a.metric);
        if (const auto* o = own_metric(*target, a.metric)) {
            own = {o->name.c_str(), o->unit, o->higher_is_better, "read from the command's output"};
            m = &own;
        }
    } else {
        for (const auto& p : probes)
            if (const auto* k = probes::find_kind(p.kind))
                for (const auto& ms : k->metrics) metric_names.emplace_back(ms.name);
    }
    if (m) return m;
    auto guess = did_you_mean(a.metric, metric_names);
    std::string list;
    for (const auto& n : metric_names) list += (list.empty() ? "" : ", ") + n;
    diag.error(
        a.keys.value_at("metric"),
        fmt::format("unknown metric `{}`{}{}", a.metric, target ? fmt::format(" for probe `{}`", target->name) : "",
                    guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)),
        list.empty() ? "the experiment has no probes" : fmt::format("metrics: {}", list));
    return nullptr;
}

/// The variant an assert names against the file's variants (false after an error that drops
/// the assert), and `min_gain` against the baseline.
bool check_variant_and_gain(const RawAssert& a, const Experiment& exp, Diagnostics& diag) {
    if (a.variant) {
        if (std::find(exp.variants.begin(), exp.variants.end(), *a.variant) == exp.variants.end()) {
            auto guess = did_you_mean(*a.variant, exp.variants);
            diag.error(a.keys.value_at("variant"),
                       fmt::format("no variant named \"{}\"{}", *a.variant,
                                   guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
            return false;
        }
        if (a.gain && *a.variant == exp.run.baseline)
            diag.error(a.keys.value_at("variant"),
                       fmt::format("`min_gain` compares a variant with the baseline; \"{}\" "
                                   "is the baseline itself",
                                   *a.variant));
    }
    if (a.gain && exp.variants.size() < 2)
        diag.error(a.keys.key_at("min_gain"),
                   "`min_gain` needs at least two variants: a gain is measured against the baseline");
    return true;
}

/// A bound (`key`, absent when `n` is null) in the base unit of metric `m`.
std::optional<double> bound_value(const Node* n, const char* key, const probes::MetricSpec& m, Diagnostics& diag) {
    if (!n) return std::nullopt;
    switch (m.unit) {
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
            // nan would pass or fail every comparison; inf bounds nothing.
            if (n->kind == Node::Kind::value && n->value->is_number() && std::isfinite(*n->value->value<double>()))
                return n->value->value<double>();
            diag.error(n->value_at, fmt::format("`{}` for `{}` must be a finite number", key, m.name));
            return std::nullopt;
    }
}

/// The cross-check pass: one assert against the probes, their metrics and the variants,
/// its bounds read in the metric's unit. nullopt when it cannot be judged.
std::optional<AssertSpec> check_assert(const RawAssert& raw, const Experiment& exp,
                                       const std::vector<probes::ProbeSpec>& probes, Diagnostics& diag) {
    auto target = target_probe(raw, probes, diag);
    if (!target) return std::nullopt;
    probes::MetricSpec own{};
    const probes::MetricSpec* m = assert_metric(raw, *target, probes, own, diag);
    if (!m || !check_variant_and_gain(raw, exp, diag)) return std::nullopt;
    AssertSpec a;
    a.at = raw.keys.node().value_at;
    a.metric = raw.metric;
    a.probe = (*target)->name;
    if (raw.variant) a.variant = *raw.variant;
    a.min_gain = raw.gain;
    a.at_least = bound_value(raw.at_least, "at_least", *m, diag);
    a.at_most = bound_value(raw.at_most, "at_most", *m, diag);
    if (a.at_least && a.at_most && *a.at_least > *a.at_most)
        diag.error(raw.keys.key_at("at_most"), "`at_most` is below `at_least`: no measurement can pass");
    return a;
}

}  // namespace

void parse_asserts(const Node* table_array, const Experiment& exp, const std::vector<probes::ProbeSpec>& probes,
                   Diagnostics& diag, std::vector<AssertSpec>& out) {
    if (!table_array) return;
    std::vector<RawAssert> read;
    for (std::size_t i = 0; i < table_array->items.size(); ++i)
        if (auto a = read_assert(table_array->items[i], i + 1, diag)) read.push_back(std::move(*a));
    for (const auto& a : read)
        if (auto checked = check_assert(a, exp, probes, diag)) out.push_back(std::move(*checked));
}

}  // namespace wanlab::experiment
