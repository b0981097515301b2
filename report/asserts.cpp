// evaluate(): the experiment's [[assert]]s against a run, one outcome per (check, variant,
// sweep point), on medians over the repeats.
//
// Why per sweep point: a tuning that gains 60% at 80 ms may lose at 5 ms; pooling the
// points would hide exactly what a sweep is for. Why medians: one disturbed repeat should
// not decide a CI gate. Missing data fails: a gate that passes because nothing was
// measured is worse than none.
#include <cmath>

#include <fmt/format.h>

#include "report/detail.h"

namespace wanlab::report {
namespace {

using probes::human;

struct Cell {
    const results::Trial* trial = nullptr;
    Summary summary;
};

Cell cell_of(const results::RunData& data, const std::string& point, const std::string& variant,
             const std::string& probe, const std::string& metric) {
    Cell c;
    c.trial = detail::trial_at(data, point, variant);
    if (c.trial) c.summary = summarize(detail::values_of(data, c.trial->index, probe, metric));
    return c;
}

/// Why a cell has no value, for the "not measured" message.
std::string missing(const Cell& c, const std::string& variant, const std::string& point) {
    if (variant.empty()) return "the run has no trials";
    if (!c.trial)
        return point.empty() ? fmt::format("variant {} has no trial in this run", variant)
                             : fmt::format("variant {} has no trial at {}", variant, point);
    if (c.trial->status != results::TrialStatus::done)
        return fmt::format("trial {} is {}", c.trial->index, c.trial->status);
    return fmt::format("no repeat of trial {} reported it", c.trial->index);
}

std::string flags(const Cell& a, const Cell* b = nullptr) {
    std::string s;
    for (const Cell* c : {&a, b})
        if (c && detail::emulation_failed(c->trial))
            s += fmt::format(" [! emulation did not hold in trial {}]", c->trial->index);
    return s;
}

experiment::AssertSpec only(experiment::AssertSpec spec, const std::string& check) {
    if (check != "at_least") spec.at_least.reset();
    if (check != "at_most") spec.at_most.reset();
    if (check != "min_gain") spec.min_gain.reset();
    return spec;
}

// What every outcome of one assert shares.
struct Context {
    const results::RunData* data;
    experiment::AssertSpec spec;  // probe resolved
    const probes::MetricSpec* metric = nullptr;
    std::string baseline;
    std::string no_probe;                             // why the probe cannot have data, "" when it can
    std::shared_ptr<const detail::OwnMetrics> owner;  // where `metric` lives, for a command probe's own
};

AssertOutcome outcome(const Context& ctx, const std::string& check, const std::string& variant,
                      const std::string& point) {
    AssertOutcome o;
    o.spec = only(ctx.spec, check);
    o.variant = variant;
    o.point = point;
    return o;
}

AssertOutcome fail_unmeasured(AssertOutcome o, const std::string& why) {
    o.message = fmt::format("FAIL {}: not measured ({})", outcome_subject(o), why);
    return o;
}

AssertOutcome bound(const Context& ctx, bool at_least, const std::string& variant, const std::string& point) {
    auto o = outcome(ctx, at_least ? "at_least" : "at_most", variant, point);
    o.bound = at_least ? *ctx.spec.at_least : *ctx.spec.at_most;
    if (!ctx.no_probe.empty()) return fail_unmeasured(o, ctx.no_probe);
    auto c = cell_of(*ctx.data, point, variant, ctx.spec.probe, ctx.spec.metric);
    if (c.summary.n == 0) return fail_unmeasured(o, missing(c, variant, point));
    o.measured = c.summary.median;
    o.passed = at_least ? o.measured >= o.bound : o.measured <= o.bound;
    auto unit = ctx.metric ? ctx.metric->unit : probes::Unit::count;
    o.message = fmt::format("{} {}: median {} ({}{} {}){}", o.passed ? "PASS" : "FAIL", outcome_subject(o),
                            human(unit, o.measured), o.passed ? "" : "required ",
                            at_least ? ">=" : "<=", human(unit, o.bound), flags(c));
    return o;
}

AssertOutcome gain(const Context& ctx, const std::string& variant, const std::string& point) {
    auto o = outcome(ctx, "min_gain", variant, point);
    o.bound = *ctx.spec.min_gain;
    if (!ctx.no_probe.empty()) return fail_unmeasured(o, ctx.no_probe);
    auto other = cell_of(*ctx.data, point, variant, ctx.spec.probe, ctx.spec.metric);
    auto base = cell_of(*ctx.data, point, ctx.baseline, ctx.spec.probe, ctx.spec.metric);
    if (other.summary.n == 0) return fail_unmeasured(o, missing(other, variant, point));
    if (base.summary.n == 0) return fail_unmeasured(o, "baseline: " + missing(base, ctx.baseline, point));
    double b = base.summary.median, v = other.summary.median;
    auto unit = ctx.metric ? ctx.metric->unit : probes::Unit::count;
    if (b == 0) {
        o.message = fmt::format("FAIL {}: baseline {} median is 0, so no relative gain can be computed ({} -> {})",
                                outcome_subject(o), ctx.baseline, human(unit, b), human(unit, v));
        return o;
    }
    bool higher = !ctx.metric || ctx.metric->higher_is_better;
    o.measured = (higher ? v - b : b - v) / std::fabs(b);
    o.passed = o.measured >= o.bound;
    o.message =
        fmt::format("{} {}: gain {} ({}>= {}); {} {} -> {}{}", o.passed ? "PASS" : "FAIL", outcome_subject(o),
                    detail::signed_percent(o.measured), o.passed ? "" : "required ", detail::signed_percent(o.bound),
                    ctx.baseline, human(unit, b), human(unit, v), flags(base, &other));
    return o;
}

Context context_of(const results::RunData& data, const experiment::AssertSpec& spec) {
    Context ctx{&data, spec, nullptr, detail::baseline_of(data), "", nullptr};
    auto probes = detail::probes_of(data);
    if (const auto* p = detail::find_probe(probes, spec.probe, spec.metric)) {
        ctx.spec.probe = p->name;
        ctx.metric = detail::metric_spec(*p, spec.metric);
        ctx.owner = p->own;
    } else if (spec.probe.empty()) {
        ctx.no_probe = fmt::format("no probe in this run reports {}", spec.metric);
    } else {
        ctx.no_probe = fmt::format("probe {} has no measurement in this run", spec.probe);
    }
    return ctx;
}

}  // namespace

std::vector<AssertOutcome> evaluate(const results::RunData& data, const std::vector<experiment::AssertSpec>& asserts) {
    std::vector<AssertOutcome> out;
    auto points = detail::points_of(data);
    auto variants = detail::variants_of(data);
    for (const auto& spec : asserts) {
        auto ctx = context_of(data, spec);
        std::vector<std::string> targets = spec.variant.empty() ? variants : std::vector<std::string>{spec.variant};
        if (targets.empty()) targets.emplace_back();  // a run without trials: still one failing outcome
        bool gained = false;
        for (const auto& v : targets)
            for (const auto& p : points) {
                if (spec.at_least) out.push_back(bound(ctx, true, v, p));
                if (spec.at_most) out.push_back(bound(ctx, false, v, p));
                if (spec.min_gain && (!spec.variant.empty() || v != ctx.baseline)) {
                    out.push_back(gain(ctx, v, p));
                    gained = true;
                }
            }
        if (spec.min_gain && !gained)
            out.push_back(
                fail_unmeasured(outcome(ctx, "min_gain", "", ""), "the run has no variant besides the baseline"));
    }
    return out;
}

std::string check_name(const AssertOutcome& outcome) {
    if (outcome.spec.min_gain) return "min_gain";
    return outcome.spec.at_least ? "at_least" : "at_most";
}

std::string outcome_subject(const AssertOutcome& outcome) {
    return detail::subject(outcome.spec.probe, outcome.spec.metric, outcome.variant, outcome.point);
}

int gate_status(const std::vector<AssertOutcome>& outcomes, int run_status) {
    if (run_status != 0) return run_status;
    for (const auto& o : outcomes)
        if (!o.passed) return 3;
    return 0;
}

}  // namespace wanlab::report
