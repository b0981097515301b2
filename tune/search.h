// `wanlab tune`'s search: which candidates of a [tune.space] to measure, how long, and which
// one to recommend, from measurements a caller takes.
//
// Contract: search() is pure apart from `measure`, which it calls once per stage with the
// candidates to measure, the length of each measurement and the repeats, and which returns
// each candidate's goal per path and repeat (and the constraints' metrics) and the seconds it
// took. The search is successive halving by racing (docs/tune.md): the first stage measures
// every candidate the budget allows (the baseline's diagnosis orders them when it cannot
// allow all) shortly; each next stage doubles the length for the survivors, up to the file's
// own duration, then adds repeats at it. A candidate is dropped only when Welch's test says
// it is worse than the stage's best on a path (5%, at least 3 repeats a side) by more than
// `tolerance` (one within it may be the cheapest answer), or it broke a constraint, or every
// repeat of it failed. Candidates are scored by the worst over the paths
// of their goal's ratio to that path's best. The recommendation is the cheapest survivor within
// `tolerance` of the best survivor's score (fewest keys changed from the baseline, then the
// smallest amounts, then the order written), confirmed against the baseline in a last stage of
// adaptive repeats at full length, beside the best and the recommendation with each changed
// key put back (what each key contributes), as far as the budget allows (the stages leave it
// room). When the recommendation does not beat the baseline by the search's own measure (a
// higher worst ratio, and significantly better on the baseline's worst path), the answer is
// the baseline.
// Deterministic for deterministic measurements. Not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "experiment/tune.h"

namespace wanlab::tune {

/// One configuration: for each key of the space, the index of its value, or kAsWritten (the
/// file's own, or the machine's where the file says nothing).
inline constexpr int kAsWritten = -1;
struct Candidate {
    std::vector<int> choice;
    bool operator==(const Candidate&) const = default;
    bool baseline() const;
};

/// What one stage asks to measure.
struct StageRequest {
    std::size_t number = 0;  ///< 1-based; the confirmation is the last
    std::vector<Candidate> candidates;
    std::chrono::nanoseconds duration{0};
    std::size_t repeats = 3;
    bool adaptive = false;  ///< repeats are [run] adaptive's, `repeats` its least
    bool confirmation = false;
};

/// What a stage measured, per candidate in the request's order.
struct Measured {
    /// goal[path][repeat]; a failed repeat is missing (counted in `failed`).
    std::vector<std::vector<double>> goal;
    /// constraints[k][path][repeat], as TuneSpec::constraints.
    std::vector<std::vector<std::vector<double>>> constraints;
    std::size_t failed = 0;  ///< repeats that gave no goal (errors, timeouts), all paths
    /// Why it could not be measured at all (its values together are refused: a key put back
    /// leaves another without what it needs); "" when it was measured.
    std::string refused;
};
struct StageResult {
    std::vector<Measured> candidates;
    double seconds = 0;  ///< measuring time the stage took
    /// The baseline's binding diagnosis per path for the goal's probe ("receive-window-limited",
    /// "loss-bound", "bufferbloat", ...; "" when nothing binds), when the stage measured it.
    std::vector<std::string> baseline_diagnosis;
};
using Measure = std::function<StageResult(const StageRequest&)>;

/// A candidate's figures in one stage.
struct Scored {
    Candidate candidate;
    std::vector<double> mean;  ///< per path, the goal's mean over the repeats (NaN: none)
    std::vector<std::size_t> n;
    double score = 0;  ///< worst over the paths of the ratio to that path's best, 0..1
    std::size_t failed = 0;
    bool feasible = true;                   ///< every constraint held (its mean, on every path)
    std::string dropped;                    ///< why the stage dropped it ("" = kept)
    std::vector<std::vector<double>> goal;  ///< the samples: goal[path][repeat]
};
struct Stage {
    StageRequest request;
    std::vector<Scored> scored;
    double seconds = 0;
};

/// A key's contribution: the recommendation with that key put back as written.
struct Contribution {
    std::size_t key = 0;
    double loss = 0;           ///< (score with it - score without) / score with it, on the confirmation's paths
    std::vector<double> mean;  ///< per path, without it
};

struct Outcome {
    std::vector<Stage> stages;  ///< the last is the confirmation (when the budget allowed one)
    Candidate baseline, best, recommended;
    /// The recommendation is significantly better than the baseline on the baseline's worst
    /// path (relative to the two's better on each path), and its own worst ratio is higher:
    /// the same maximin the search scores by. On one path: significantly better there.
    bool beats_baseline = false;
    /// Per path: recommended against baseline in the confirmation: (rec - base) / base, its
    /// p-value (Welch), and each side's mean and its 95% interval half-width.
    struct PathComparison {
        double delta = 0, p_value = 1;
        double base_mean = 0, base_half = 0, rec_mean = 0, rec_half = 0;
        double best_mean = 0, best_half = 0;
        bool significant = false, better = false;
    };
    std::vector<PathComparison> paths;
    std::vector<Contribution> contributions;
    std::size_t candidates = 0;  ///< the grid's, the baseline included
    std::string seeded_by;       ///< the baseline's diagnosis that ordered the first stage ("" = none needed)
    double measured_seconds = 0;
    std::vector<std::string> notes;  ///< what the user should know: budget ran out, candidates left tied, failures
};

/// The grid of a space: the baseline (every key as written) first, then every combination of
/// each key as written or at one of its values (the first key slowest), leaving out those over
/// the spec's buffer_budget; a value that is the machine's own is the key as written
/// (`as_written`: each key's value on the machine, as an index into its values, or kAsWritten
/// when it is none of them). So the cheapest ways to reach the best, leaving keys alone, are
/// candidates too.
std::vector<Candidate> grid(const experiment::TuneSpec& spec, const std::vector<int>& as_written);

/// Cheaper first: fewer keys changed from `as_written`, then smaller amounts (sizes, numbers)
/// key by key, then the order values were written.
bool cheaper(const experiment::TuneSpec& spec, const std::vector<int>& as_written, const Candidate& a,
             const Candidate& b);

/// "net.core.rmem_max=4MiB probe.bulk.congestion_control=bbr"; "as written" for the baseline.
std::string label(const experiment::TuneSpec& spec, const Candidate& c);
/// A variant name for c: "baseline", or its values ("rmem_max-4MiB_congestion_control-bbr"),
/// or, past 64 characters, "c-" and a hash of them.
std::string variant_name(const experiment::TuneSpec& spec, const Candidate& c);

struct SearchOptions {
    std::size_t paths = 1;
    std::chrono::nanoseconds full_duration{std::chrono::seconds(10)};  ///< the file's [run] duration
    /// Seconds a measurement costs beyond its duration (warm-up, cool-down, the emulation
    /// check), before the first stage tells.
    double overhead = 4;
};

Outcome search(const experiment::TuneSpec& spec, const std::vector<int>& as_written, const SearchOptions& options,
               const Measure& measure);

}  // namespace wanlab::tune
