#include "tune/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "probes/human.h"
#include "probes/stats.h"
#include "report/report.h"

namespace wanlab::tune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Of the budget, what the confirmation keeps for itself.
constexpr double kConfirmShare = 0.3;
// Repeats a stage starts with: report::difference() judges from 3 a side.
constexpr std::size_t kStageRepeats = 3;
// What the confirmation's adaptive repeats are budgeted at (its most is the file's).
constexpr std::size_t kConfirmRepeatsBudgeted = 5;

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

std::size_t changes(const Candidate& c, const std::vector<int>& as_written) {
    std::size_t n = 0;
    for (std::size_t k = 0; k < c.choice.size(); ++k)
        if (c.choice[k] != kAsWritten && c.choice[k] != as_written[k]) ++n;
    return n;
}

// The value of key k in c as an amount: its own, the machine's (as_written) where it is as
// written and that is one of the values, else 0 (as written costs nothing).
double amount(const experiment::TuneKey& key, int choice, int as_written) {
    int i = choice == kAsWritten ? as_written : choice;
    if (key.amounts.empty() || i == kAsWritten) return 0;
    return key.amounts[static_cast<std::size_t>(i)];
}

// What a candidate's diagnosis family is: the keys a binding verdict points at.
bool in_family(const experiment::TuneKey& key, const std::string& verdict) {
    if (verdict == "receive-window-limited" || verdict == "send-buffer-limited") return key.socket_buffer;
    if (verdict == "loss-bound") return key.path.ends_with("congestion_control");
    if (verdict == "bufferbloat" || verdict == "queue-overflow") return key.path.starts_with("link.");
    return false;
}

double ratio_to(double mean, double best, bool higher) {
    if (!std::isfinite(mean)) return 0;
    if (higher) return best > 0 ? std::min(1.0, mean / best) : 1;
    return mean > 0 ? std::min(1.0, best / mean) : 1;
}

// The 95% half-width of a mean.
double half_width(const std::vector<double>& x) {
    if (x.size() < 2) return kNaN;
    return probes::stats::student_t_critical(0.05, static_cast<double>(x.size() - 1)) * probes::stats::stdev(x) /
           std::sqrt(static_cast<double>(x.size()));
}

std::string human(const experiment::MetricRef& m, double v) { return probes::human(m.unit, v); }

// One stage's figures: means, scores, constraints, failures and, against the stage's best,
// what Welch's test drops.
std::vector<Scored> score(const experiment::TuneSpec& spec, const StageRequest& req, const StageResult& res,
                          std::size_t paths, const std::function<std::string(const Candidate&)>& name) {
    const bool higher = spec.goal.higher_is_better;
    std::vector<Scored> out;
    for (std::size_t i = 0; i < req.candidates.size(); ++i) {
        Scored s;
        s.candidate = req.candidates[i];
        const Measured& m = i < res.candidates.size() ? res.candidates[i] : Measured{};
        s.failed = m.failed;
        s.goal = m.goal;
        s.goal.resize(paths);
        if (!m.refused.empty()) s.dropped = "cannot be set: " + m.refused;
        for (std::size_t p = 0; p < paths; ++p) {
            const auto* x = p < m.goal.size() ? &m.goal[p] : nullptr;
            s.mean.push_back(x && !x->empty() ? probes::stats::mean(*x) : kNaN);
            s.n.push_back(x ? x->size() : 0);
            if ((!x || x->empty()) && s.dropped.empty())
                s.dropped = fmt::format("no repeat measured {} on path {}", spec.goal.text(), p + 1);
        }
        for (std::size_t k = 0; k < spec.constraints.size() && s.dropped.empty(); ++k) {
            const auto& c = spec.constraints[k];
            for (std::size_t p = 0; p < paths; ++p) {
                const auto* x =
                    k < m.constraints.size() && p < m.constraints[k].size() ? &m.constraints[k][p] : nullptr;
                if (!x || x->empty()) {
                    s.feasible = false;
                    s.dropped = fmt::format("no repeat measured {} (a constraint) on path {}", c.metric.text(), p + 1);
                    break;
                }
                const double v = probes::stats::mean(*x);
                if (c.at_most ? v > c.bound : v < c.bound) {
                    s.feasible = false;
                    s.dropped = fmt::format("broke \"{}\": {} on path {}", c.text, human(c.metric, v), p + 1);
                    break;
                }
            }
        }
        out.push_back(std::move(s));
    }
    // Each path's best among those still standing; each candidate's worst ratio to it.
    for (std::size_t p = 0; p < paths; ++p) {
        double best = kNaN;
        for (const auto& s : out)
            if (s.dropped.empty() && std::isfinite(s.mean[p]))
                if (!std::isfinite(best) || (higher ? s.mean[p] > best : s.mean[p] < best)) best = s.mean[p];
        for (auto& s : out) {
            double r = ratio_to(s.mean[p], best, higher);
            s.score = p == 0 ? r : std::min(s.score, r);
        }
    }
    const Scored* lead = nullptr;
    for (const auto& s : out)
        if (s.dropped.empty() && (!lead || s.score > lead->score)) lead = &s;
    // The confirmation compares, it does not race: nothing is dropped there.
    if (!lead || req.confirmation) return out;
    const std::size_t lead_at = static_cast<std::size_t>(lead - out.data());
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto& s = out[i];
        if (i == lead_at || !s.dropped.empty()) continue;
        for (std::size_t p = 0; p < paths; ++p) {
            const auto& lead_x = res.candidates[lead_at].goal[p];
            const auto& x = res.candidates[i].goal[p];
            // Worse by the test and by more than the tolerance: a candidate that may be as good
            // as the best within the tolerance stays, since it may be the cheapest answer.
            auto d = report::difference(lead_x, x, higher);
            if (d.significant && !d.better && ratio_to(s.mean[p], out[lead_at].mean[p], higher) < 1 - spec.tolerance) {
                s.dropped = fmt::format("worse than {} on path {}: {} against {} (Welch p = {:.3f})",
                                        name(out[lead_at].candidate), p + 1, human(spec.goal, s.mean[p]),
                                        human(spec.goal, out[lead_at].mean[p]), d.p_value);
                break;
            }
        }
    }
    return out;
}

}  // namespace

bool Candidate::baseline() const {
    return std::all_of(choice.begin(), choice.end(), [](int c) { return c == kAsWritten; });
}

std::vector<Candidate> grid(const experiment::TuneSpec& spec, const std::vector<int>& as_written) {
    // Each key's choices: as written, then each of its values that is not the machine's own.
    std::vector<std::vector<int>> domains;
    for (std::size_t k = 0; k < spec.space.size(); ++k) {
        std::vector<int> d{kAsWritten};
        for (std::size_t i = 0; i < spec.space[k].values.size(); ++i)
            if (static_cast<int>(i) != as_written[k]) d.push_back(static_cast<int>(i));
        domains.push_back(std::move(d));
    }
    std::vector<Candidate> out{Candidate{std::vector<int>(spec.space.size(), kAsWritten)}};
    std::size_t total = 1;
    for (const auto& d : domains) total *= d.size();
    for (std::size_t n = 1; n < total; ++n) {  // 0: every key as written, the baseline
        Candidate c{std::vector<int>(spec.space.size())};
        std::size_t rest = n;
        for (std::size_t k = spec.space.size(); k-- > 0;) {
            c.choice[k] = domains[k][rest % domains[k].size()];
            rest /= domains[k].size();
        }
        bool over = false;
        for (std::size_t k = 0; k < spec.space.size(); ++k) {
            const auto& key = spec.space[k];
            if (spec.buffer_budget && key.socket_buffer && !key.amounts.empty() && c.choice[k] != kAsWritten &&
                key.amounts[static_cast<std::size_t>(c.choice[k])] > static_cast<double>(*spec.buffer_budget))
                over = true;
        }
        if (!over) out.push_back(std::move(c));
    }
    return out;
}

bool cheaper(const experiment::TuneSpec& spec, const std::vector<int>& as_written, const Candidate& a,
             const Candidate& b) {
    const auto ca = changes(a, as_written), cb = changes(b, as_written);
    if (ca != cb) return ca < cb;
    for (std::size_t k = 0; k < spec.space.size(); ++k) {
        const double x = amount(spec.space[k], a.choice[k], as_written[k]);
        const double y = amount(spec.space[k], b.choice[k], as_written[k]);
        if (x != y) return x < y;
    }
    return a.choice < b.choice;  // kAsWritten (-1) first, then the order written
}

std::string label(const experiment::TuneSpec& spec, const Candidate& c) {
    std::string out;
    for (std::size_t k = 0; k < spec.space.size(); ++k)
        if (c.choice[k] != kAsWritten)
            out += fmt::format("{}{}={}", out.empty() ? "" : " ", spec.space[k].path,
                               spec.space[k].labels[static_cast<std::size_t>(c.choice[k])]);
    return out.empty() ? "as written" : out;
}

std::string variant_name(const experiment::TuneSpec& spec, const Candidate& c) {
    if (c.baseline()) return "baseline";
    std::string out;
    for (std::size_t k = 0; k < spec.space.size(); ++k) {
        if (c.choice[k] == kAsWritten) continue;
        const auto& path = spec.space[k].path;
        std::string part =
            path.substr(path.rfind('.') + 1) + "-" + spec.space[k].labels[static_cast<std::size_t>(c.choice[k])];
        for (char& ch : part)
            if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
        out += (out.empty() ? "" : "_") + part;
    }
    if (out.size() <= 64) return out;
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : label(spec, c)) h = (h ^ ch) * 1099511628211ull;
    return fmt::format("c-{:016x}", h);
}

Outcome search(const experiment::TuneSpec& spec, const std::vector<int>& as_written, const SearchOptions& options,
               const Measure& measure) {
    Outcome o;
    const std::size_t paths = std::max<std::size_t>(options.paths, 1);
    o.baseline = Candidate{std::vector<int>(spec.space.size(), kAsWritten)};
    o.best = o.recommended = o.baseline;
    auto name = [&spec](const Candidate& c) { return label(spec, c); };
    auto by_cost = [&](const Candidate& a, const Candidate& b) { return cheaper(spec, as_written, a, b); };
    const double budget = seconds(spec.budget);
    const double full = seconds(options.full_duration);
    double overhead = options.overhead;
    auto cost = [&](std::size_t n, double d, std::size_t r) {
        return static_cast<double>(n * paths * r) * (d + overhead);
    };
    auto run = [&](StageRequest req) {
        req.number = o.stages.size() + 1;
        StageResult res = measure(req);
        o.measured_seconds += res.seconds;
        const double measurements = static_cast<double>(req.candidates.size() * paths * req.repeats);
        if (measurements > 0 && res.seconds > 0)
            overhead = std::max(0.0, res.seconds / measurements - seconds(req.duration));
        Stage st{req, score(spec, req, res, paths, name), res.seconds};
        o.stages.push_back(std::move(st));
        return res;
    };

    std::vector<Candidate> alive = grid(spec, as_written);
    const std::size_t gridded = alive.size();
    o.candidates = gridded;
    double d = full >= 4 ? std::round(full / 4 * 10) / 10 : full;  // the first stage's length
    const double search_budget = budget * (1 - kConfirmShare);
    // When the budget cannot give every candidate a first look, the baseline's diagnosis says
    // which keys to look at first.
    if (cost(alive.size(), d, kStageRepeats) > search_budget / 2) {
        auto res = run({0,
                        {o.baseline},
                        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(d)),
                        kStageRepeats});
        for (const auto& v : res.baseline_diagnosis)
            if (!v.empty() && o.seeded_by.empty()) o.seeded_by = v;
        auto family = [&](const Candidate& c) {
            for (std::size_t k = 0; k < spec.space.size(); ++k)
                if (c.choice[k] != kAsWritten && c.choice[k] != as_written[k] && !in_family(spec.space[k], o.seeded_by))
                    return false;
            return true;
        };
        std::stable_sort(alive.begin() + 1, alive.end(), [&](const Candidate& a, const Candidate& b) {
            const bool fa = family(a), fb = family(b);
            if (fa != fb) return fa;
            return by_cost(a, b);
        });
        const double left = search_budget / 2 - o.measured_seconds;
        const auto fit = static_cast<std::size_t>(std::max(0.0, left / cost(1, d, kStageRepeats)));
        if (fit < alive.size()) {
            alive.resize(std::max<std::size_t>(fit, 2));
            o.notes.push_back(fmt::format(
                "the budget let the first stage measure {} of the {} candidates: {}", alive.size(), gridded,
                o.seeded_by.empty()
                    ? std::string("the cheapest first (the baseline's diagnosis named no cause a key here acts on)")
                    : fmt::format("those that change only the keys the baseline's diagnosis ({}) points at first, "
                                  "cheapest first",
                                  o.seeded_by)));
        }
    }

    // What the confirmation will likely take: the baseline, the recommendation, the best and
    // a candidate per key put back, at full length, adaptive repeats averaging kConfirmRepeatsBudgeted.
    auto confirm_cost = [&] { return cost(3 + spec.space.size(), full, kConfirmRepeatsBudgeted); };
    std::size_t repeats = kStageRepeats;
    while (true) {
        StageRequest req{
            0, alive, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(d)), repeats};
        run(req);
        const auto& st = o.stages.back();
        alive.clear();
        for (const auto& s : st.scored)
            if (s.dropped.empty()) alive.push_back(s.candidate);
        if (alive.size() <= 1) break;
        // At full length, survivors all within the tolerance of the best: what is left to
        // tell apart does not matter to the answer (the cheapest of them is it).
        if (d >= full && std::all_of(st.scored.begin(), st.scored.end(), [&](const Scored& s) {
                return !s.dropped.empty() || s.score >= 1 - spec.tolerance;
            })) {
            o.notes.push_back(
                fmt::format("{} candidates ended within {:.0f}% of each other at full length: the "
                            "cheapest of them is the answer",
                            alive.size(), spec.tolerance * 100));
            break;
        }
        double next_d = d;
        std::size_t next_r = repeats;
        if (d < full)
            next_d = std::min(full, 2 * d);
        else
            next_r = repeats + 2;
        if (o.measured_seconds + cost(alive.size(), next_d, next_r) + confirm_cost() > budget) {
            o.notes.push_back(
                fmt::format("the budget ran out with {} candidates that no test could tell apart", alive.size()));
            break;
        }
        d = next_d, repeats = next_r;
    }

    // The survivors as the last stage scored them: the best, and the cheapest near it.
    const auto& last = o.stages.back().scored;
    const Scored* best = nullptr;
    for (const auto& s : last)
        if (s.dropped.empty() && s.feasible && (!best || s.score > best->score)) best = &s;
    if (!best) {
        o.notes.push_back("no candidate kept every constraint on every path: the baseline stays");
        return o;
    }
    const Scored* least = best;
    for (const auto& s : last)
        if (s.dropped.empty() && s.feasible && s.score >= (1 - spec.tolerance) * best->score &&
            by_cost(s.candidate, least->candidate))
            least = &s;
    o.best = best->candidate;
    o.recommended = least->candidate;

    // The confirmation: baseline, recommendation, best, and the recommendation with each
    // changed key put back, at full length with adaptive repeats; what the budget allows of it.
    std::vector<Candidate> confirm{o.baseline};
    auto add = [&confirm](const Candidate& c) {
        if (std::find(confirm.begin(), confirm.end(), c) == confirm.end()) confirm.push_back(c);
    };
    add(o.recommended);
    add(o.best);
    const std::size_t core = confirm.size();
    std::vector<std::size_t> changed;
    for (std::size_t k = 0; k < spec.space.size(); ++k)
        if (o.recommended.choice[k] != kAsWritten && o.recommended.choice[k] != as_written[k]) changed.push_back(k);
    if (changed.size() > 1)
        for (auto k : changed) {
            Candidate without = o.recommended;
            without.choice[k] = kAsWritten;
            add(without);
        }
    const double left = budget - o.measured_seconds;
    bool adaptive = true;
    if (cost(confirm.size(), full, kConfirmRepeatsBudgeted) > left) {
        confirm.resize(core);  // without the keys' contributions
        if (cost(confirm.size(), full, kConfirmRepeatsBudgeted) > left) adaptive = false;
        o.notes.push_back("the budget left a smaller confirmation: without each key's contribution" +
                          std::string(adaptive ? "" : ", and with 3 repeats, not adaptive ones"));
    }
    const Stage* judged = nullptr;
    if (cost(confirm.size(), full, kStageRepeats) <= left) {
        run({0, confirm, options.full_duration, kStageRepeats, adaptive, true});
        judged = &o.stages.back();
    } else {
        // The last stage that measured all three: the baseline is in every stage until it is
        // dropped, and the recommendation and the best survived them all.
        for (auto it = o.stages.rbegin(); it != o.stages.rend() && !judged; ++it) {
            auto has = [&](const Candidate& c) {
                return std::any_of(it->scored.begin(), it->scored.end(),
                                   [&](const Scored& s) { return s.candidate == c; });
            };
            if (has(o.baseline) && has(o.recommended) && has(o.best)) judged = &*it;
        }
        o.notes.push_back(
            fmt::format("the budget left no confirmation at full length: the answer compares the "
                        "baseline and the recommendation as stage {} measured them",
                        judged ? judged->request.number : 0));
    }
    if (!judged) {
        o.recommended = o.baseline;
        return o;
    }
    const auto& scored = judged->scored;
    auto at = [&](const Candidate& c) {
        return static_cast<std::size_t>(
            std::find_if(scored.begin(), scored.end(), [&](const Scored& s) { return s.candidate == c; }) -
            scored.begin());
    };
    // Against the baseline: the recommendation, or the best when the baseline is the
    // recommendation (to show by how much the best missed).
    const Candidate& other = o.recommended.baseline() ? o.best : o.recommended;
    const std::size_t ib = at(o.baseline), ir = at(other), ibest = at(o.best);
    const bool higher = spec.goal.higher_is_better;
    auto first = [](const std::vector<double>& x) {
        return std::vector<double>(x.begin(),
                                   x.begin() + static_cast<std::ptrdiff_t>(std::min(x.size(), kStageRepeats)));
    };
    // The baseline's worst path, each path's ratios taken to the better of the two.
    std::size_t worst_path = 0;
    double base_worst = 2, rec_worst = 2;
    for (std::size_t p = 0; p < paths; ++p) {
        const double b = scored[ib].mean[p], r = scored[ir].mean[p];
        const double top = higher ? std::max(b, r) : std::min(b, r);
        const double rb = ratio_to(b, top, higher), rr = ratio_to(r, top, higher);
        if (rb < base_worst) base_worst = rb, worst_path = p;
        rec_worst = std::min(rec_worst, rr);
    }
    bool better_where_it_counts = false;
    for (std::size_t p = 0; p < paths; ++p) {
        const auto& base = scored[ib].goal[p];
        const auto& rec = scored[ir].goal[p];
        Outcome::PathComparison c;
        c.base_mean = scored[ib].mean[p], c.base_half = half_width(base);
        c.rec_mean = scored[ir].mean[p], c.rec_half = half_width(rec);
        c.best_mean = scored[ibest].mean[p], c.best_half = half_width(scored[ibest].goal[p]);
        // Adaptive repeats: each side's variance from its first stage (Stein's rule).
        auto d = judged->request.adaptive ? report::difference(base, rec, higher, first(base), first(rec))
                                          : report::difference(base, rec, higher);
        c.delta = d.delta, c.p_value = d.p_value, c.significant = d.significant, c.better = d.better;
        if (p == worst_path) better_where_it_counts = d.significant && d.better;
        o.paths.push_back(c);
    }
    const bool kept = scored[ir].feasible && scored[ir].failed == 0;
    const bool baseline_broke = !scored[ib].feasible;
    if (!scored[ir].feasible)
        o.notes.push_back("the recommendation broke a constraint at full length: " + scored[ir].dropped);
    if (o.recommended.baseline()) {
        // The best's change on its worst path, in the goal's own direction.
        double worst = 0;
        for (std::size_t p = 0; p < o.paths.size(); ++p) {
            const double gain = higher ? o.paths[p].delta : -o.paths[p].delta;
            if (p == 0 || gain < worst) worst = gain;
        }
        if (o.best.baseline())
            o.notes.push_back("no setting in this space beats the baseline: the file as written measured best");
        else
            o.notes.push_back(
                fmt::format("no setting in this space beats the baseline by more than the {:.0f}% "
                            "tolerance: the best found ({}) measured {:+.1f}% on its worst path",
                            spec.tolerance * 100, label(spec, o.best), worst * 100));
        if (baseline_broke) o.notes.push_back("the baseline itself broke a constraint: " + scored[ib].dropped);
        return o;
    }
    // The baseline that breaks a constraint is no answer: the least that keeps them is.
    o.beats_baseline = kept && ((better_where_it_counts && rec_worst > base_worst) || baseline_broke);
    if (baseline_broke && o.beats_baseline)
        o.notes.push_back(
            fmt::format("the baseline broke a constraint ({}): the recommendation is the least that "
                        "keeps them, whatever it costs the goal",
                        scored[ib].dropped));
    if (o.beats_baseline && paths > 1)
        for (std::size_t p = 0; p < paths; ++p)
            if (o.paths[p].significant && !o.paths[p].better)
                o.notes.push_back(
                    fmt::format("on path {} the recommendation is {:+.1f}% against the baseline: it is "
                                "chosen for the worst path (the baseline's worst is path {}), as the "
                                "score weighs every candidate by its worst path",
                                p + 1, o.paths[p].delta * 100, worst_path + 1));
    if (!o.beats_baseline) {
        o.notes.push_back(
            fmt::format("no setting in this space beats the baseline: the best found ({}) was not "
                        "significantly better where the baseline does worst (path {}), or its own "
                        "worst path was no better",
                        label(spec, o.recommended), worst_path + 1));
        o.recommended = o.baseline;
        return o;
    }
    for (auto k : changed) {
        // Putting a key back: the candidate without it, or, with one key changed, the baseline.
        Candidate without = o.recommended;
        without.choice[k] = kAsWritten;
        const std::size_t iw = changed.size() < 2 ? ib : at(without);
        if (iw >= scored.size()) continue;  // not measured: the budget left it out
        Contribution c{k, 0, {}};
        double loss = 0;
        for (std::size_t p = 0; p < paths; ++p) {
            c.mean.push_back(scored[iw].mean[p]);
            loss = std::max(loss, 1 - ratio_to(scored[iw].mean[p], scored[ir].mean[p], higher));
        }
        c.loss = loss;
        o.contributions.push_back(c);
    }
    return o;
}

}  // namespace wanlab::tune
