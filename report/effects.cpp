// Factor effects (issue 39): each swept key's and the variant's effect on the report's chosen
// metric, across the other factors, with a Welch interval and test; and the best measured
// configuration. See report/model.h `Effect`.
//
// For a factor F at level L against its first level R (the baseline variant, the first sweep
// value): in each combination c of the other factors where both were measured, every repeat
// of (L, c) and of (R, c) is divided by the mean of (R, c) and 1 taken away. The effect is the
// difference of the two pooled means (the (R, c) side has mean 0 in each c), its interval and
// significance Welch's on the pooled values: an effect that differs between combinations (an
// interaction) widens the interval instead of hiding in an average.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "probes/stats.h"
#include "report/model.h"

namespace wanlab::report::detail {
namespace {

constexpr std::string_view kJoin = " + ";  // the keys of one factor that moved together

std::string key_level(const results::Trial& t, std::string_view key) {
    for (const auto& [k, v] : t.sweep)
        if (k == key) return v;
    return "";
}

// A factor's level: the variant, a swept key's value, or for keys that moved together their
// values (one, when they are named alike: "large").
std::string level_of(const results::Trial& t, const std::string& factor) {
    if (factor == "variant") return t.variant;
    std::string_view rest = factor;
    std::vector<std::string> parts;
    for (auto at = rest.find(kJoin);; at = rest.find(kJoin)) {
        parts.push_back(key_level(t, rest.substr(0, at)));
        if (at == std::string_view::npos) break;
        rest.remove_prefix(at + kJoin.size());
    }
    if (std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return p == parts.front(); }))
        return parts.front();
    std::string joined;
    for (const auto& p : parts) joined += (joined.empty() ? "" : ", ") + p;
    return joined;
}

// The other factors' levels of `t`, as one key.
std::string others_of(const results::Trial& t, const std::string& factor, const std::vector<std::string>& factors) {
    std::string key;
    for (const auto& f : factors)
        if (f != factor) key += f + "=" + level_of(t, f) + "\n";
    return key;
}

double variance(const std::vector<double>& x) { return std::pow(probes::stats::stdev(x), 2); }

}  // namespace

std::vector<std::string> sweep_factors(const results::RunData& data, const std::vector<std::string>& keys) {
    // Keys in one-to-one correspondence over every trial (a zip sweep's) cannot be told apart:
    // no two trials differ in one alone. They are one factor.
    auto together = [&](const std::string& a, const std::string& b) {
        std::map<std::string, std::string> ab, ba;
        for (const auto& t : data.trials) {
            auto x = key_level(t, a), y = key_level(t, b);
            if (auto [it, fresh] = ab.emplace(x, y); !fresh && it->second != y) return false;
            if (auto [it, fresh] = ba.emplace(y, x); !fresh && it->second != x) return false;
        }
        return true;
    };
    std::vector<std::vector<std::string>> groups;
    for (const auto& k : keys) {
        auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& group) { return together(group[0], k); });
        if (g == groups.end())
            groups.push_back({k});
        else
            g->push_back(k);
    }
    std::vector<std::string> out;
    for (const auto& g : groups) {
        std::string name;
        for (const auto& k : g) name += (name.empty() ? "" : std::string(kJoin)) + k;
        out.push_back(name);
    }
    return out;
}

std::vector<Effect> factor_effects(const results::RunData& data, const ProbeRef& probe, const std::string& metric,
                                   const std::vector<std::string>& factors) {
    std::vector<Effect> out;
    for (const auto& factor : factors) {
        std::vector<std::string> levels;
        for (const auto& t : data.trials)
            if (auto l = level_of(t, factor); std::find(levels.begin(), levels.end(), l) == levels.end())
                levels.push_back(l);
        if (levels.size() < 2) continue;
        // The reference: the baseline variant, else the first level in plan order.
        std::string reference = levels.front();
        if (factor == "variant")
            if (auto b = baseline_of(data); std::find(levels.begin(), levels.end(), b) != levels.end()) reference = b;
        // (others, level) -> the trial's values
        std::map<std::pair<std::string, std::string>, std::vector<double>> cells;
        for (const auto& t : data.trials) {
            auto v = values_of(data, t.index, probe.name, metric);
            if (!v.empty()) cells[{others_of(t, factor, factors), level_of(t, factor)}] = std::move(v);
        }
        for (const auto& level : levels) {
            if (level == reference) continue;
            Effect e;
            e.factor = factor, e.level = level, e.reference = reference;
            std::vector<double> x, y;
            std::size_t fewest = SIZE_MAX;  // repeats of the smallest cell that took part
            for (const auto& [key, ref] : cells) {
                if (key.second != reference) continue;
                auto it = cells.find({key.first, level});
                if (it == cells.end()) continue;
                double base = probes::stats::mean(ref);
                if (base == 0) continue;
                for (double v : it->second) x.push_back(v / base - 1);
                for (double v : ref) y.push_back(v / base - 1);
                fewest = std::min({fewest, ref.size(), it->second.size()});
                ++e.over;
            }
            if (x.empty()) continue;
            e.delta = probes::stats::mean(x) - probes::stats::mean(y);
            // As for a single comparison: below 3 repeats in a cell, no verdict, however many
            // cells are pooled.
            e.too_few = fewest < kMinJudgedRepeats;
            if (x.size() >= 2 && y.size() >= 2) {
                double vx = variance(x) / static_cast<double>(x.size()),
                       vy = variance(y) / static_cast<double>(y.size());
                e.p_value = welch_p_value(x, y);
                if (vx + vy > 0) {
                    double df =
                        (vx + vy) * (vx + vy) /
                        (vx * vx / static_cast<double>(x.size() - 1) + vy * vy / static_cast<double>(y.size() - 1));
                    double half = probes::stats::student_t_critical(0.05, df) * std::sqrt(vx + vy);
                    e.low = e.delta - half, e.high = e.delta + half;
                } else {
                    e.low = e.high = e.delta;
                }
            }
            e.significant = !e.too_few && std::isfinite(e.p_value) && e.p_value < 0.05;
            out.push_back(std::move(e));
        }
    }
    return out;
}

std::optional<Best> best_configuration(const results::RunData& data, const ProbeRef& probe, const std::string& metric) {
    const auto* spec = metric_spec(probe, metric);
    const bool higher = !spec || spec->higher_is_better;
    std::optional<Best> best, second;
    for (const auto& t : data.trials) {
        auto v = values_of(data, t.index, probe.name, metric);
        if (v.empty()) continue;
        Best b{&t, probes::stats::median(v), v};
        auto better = [higher](const Best& a, const Best& than) {
            return higher ? a.median > than.median : a.median < than.median;
        };
        if (!best || better(b, *best)) {
            second = best;
            best = b;
        } else if (!second || better(b, *second)) {
            second = b;
        }
    }
    if (best && second) {
        best->runner_up = second->trial;
        best->p_value = welch_p_value(best->values, second->values);
        best->clear = best->values.size() >= kMinJudgedRepeats && second->values.size() >= kMinJudgedRepeats &&
                      std::isfinite(best->p_value) && best->p_value < 0.05;
    }
    return best;
}

std::string effect_text(const Effect& e, const probes::MetricSpec* spec) {
    auto interval = std::isfinite(e.low) ? fmt::format(" [{}, {}]", signed_percent(e.low), signed_percent(e.high)) : "";
    std::string verdict = e.too_few                                            ? "too few repeats"
                          : !e.significant                                     ? "not significant"
                          : (spec && !spec->higher_is_better) == (e.delta < 0) ? "significant, better"
                                                                               : "significant, worse";
    return fmt::format("{} {} against {}: {}{} ({}), over {} combination{} of the other factors", e.factor, e.level,
                       e.reference, signed_percent(e.delta), interval, verdict, e.over, e.over == 1 ? "" : "s");
}

std::string best_text(const Best& b, const ProbeRef& probe, const std::string& metric) {
    const auto* spec = metric_spec(probe, metric);
    const auto& t = *b.trial;
    std::string settings = "variant " + t.variant;
    for (const auto& [k, v] : t.sweep) settings += ", " + k + " = " + v;
    for (const auto& [k, v] : t.sysctls) {
        std::string value = v;
        std::replace(value.begin(), value.end(), '\t', ' ');
        settings += ", " + k + " = " + value;
    }
    std::string against;
    if (b.runner_up)
        against = b.clear ? fmt::format("; significantly ahead of the next, {}", trial_name(*b.runner_up))
                          : fmt::format("; not significantly ahead of the next, {}", trial_name(*b.runner_up));
    return fmt::format("best measured {}.{}: {} ({} median){}; its settings: {}", probe.name, metric, trial_name(t),
                       probes::human(spec ? spec->unit : probes::Unit::count, b.median), against, settings);
}

}  // namespace wanlab::report::detail
