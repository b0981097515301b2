// The report's model: one run turned into cells (a sweep point, variant, probe and metric
// over its repeats), before/after rows, the sweep pivot, explanations and assert outcomes,
// built once (build()) and printed by each of the printers (report.cpp: table, markdown,
// json, csv; html.cpp: the page), with the pieces of text they share.
//
// Contract: pure functions of the results model; a Model points into the RunData it was
// built from, which must outlive it. Internal to report/. Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/detail.h"
#include "report/report.h"

namespace wanlab::report::detail {

inline constexpr std::size_t kNone = static_cast<std::size_t>(-1);

/// One (sweep point, variant, probe, metric) over its repeats.
struct Cell {
    std::string point;
    std::string variant;
    ProbeRef probe;
    std::string metric;
    const probes::MetricSpec* spec = nullptr;
    const results::Trial* trial = nullptr;  // nullptr: the variant has no trial at this point
    std::vector<double> values;
    Summary summary;
    /// An adaptive run's (results::RepeatRule): the first-stage values (repeat order, NaN where
    /// one did not report), and whether it stopped at max_repeats with its mean's 95% interval
    /// (Stein's, from the first stage) still wider than the rule's precision.
    std::vector<double> first;
    bool unsettled = false;
    /// An adaptive run's: the half-width of the mean's 95% interval (Stein's, the one the rule
    /// settles) as a fraction of the first stage's median, which the rule compares with its
    /// precision; NaN otherwise.
    double mean_half_width = results::kNaN;
    /// What the probe's repeats attempted and lost, over the cell's trials.
    Tally tally;
    /// The probe's repeats in the trial, and those not measured (an error recorded instead).
    std::size_t repeats = 0, unmeasured = 0;
};

/// A line of the before/after table: the baseline cell against one other variant's (or
/// alone, when the run has one variant).
struct Row {
    std::size_t base = kNone, other = kNone;
    Difference diff;
    bool too_many_failures = false;  ///< either side's tally lost_too_many(): no verdict
};

struct PivotGroup {
    std::string label;  // "" when the columns are the variants
    std::vector<std::string> rows, columns;
    std::map<std::pair<std::string, std::string>, Cell> cells;
};

struct Pivot {
    ProbeRef probe;
    std::string metric;
    const probes::MetricSpec* spec = nullptr;
    std::string row_key, column_key;
    std::vector<PivotGroup> groups;
};

/// One factor's effect on a metric across the other factors (report/effects.cpp): `level`
/// against `reference` (the baseline variant, the first sweep value), relative.
struct Effect {
    std::string factor;  ///< "variant" or a swept key
    std::string level, reference;
    double delta = results::kNaN, low = results::kNaN, high = results::kNaN;  ///< 95% Welch interval
    double p_value = results::kNaN;
    bool significant = false;
    bool too_few = false;  ///< a cell that took part had fewer than kMinJudgedRepeats repeats
    std::size_t over = 0;  ///< combinations of the other factors where both were measured
};

/// The measured configuration with the best median of a metric, and whether it is clearly
/// (Welch, 5%) ahead of the next.
struct Best {
    const results::Trial* trial = nullptr;
    double median = results::kNaN;
    std::vector<double> values;
    const results::Trial* runner_up = nullptr;
    double p_value = results::kNaN;
    bool clear = false;
};

/// The sweep's keys as factors: keys that moved together over every trial (a zip sweep's) are
/// one factor, named by its keys joined with " + ".
std::vector<std::string> sweep_factors(const results::RunData& data, const std::vector<std::string>& keys);
std::vector<Effect> factor_effects(const results::RunData& data, const ProbeRef& probe, const std::string& metric,
                                   const std::vector<std::string>& factors);
std::optional<Best> best_configuration(const results::RunData& data, const ProbeRef& probe, const std::string& metric);
/// "variant large-buffers against default-buffers: +65.2% [+58.1%, +72.3%] (significant, better), over 2
/// combinations of the other factors".
std::string effect_text(const Effect& e, const probes::MetricSpec* spec);
/// "best measured bulk.throughput: trial 2 (...) ...; its settings: variant ..., link.rtt = 20ms, ...".
std::string best_text(const Best& b, const ProbeRef& probe, const std::string& metric);
/// "trial 4 (aaaa0004) large-buffers @ link.rtt=40ms".
std::string trial_name(const results::Trial& t);

/// One probe of one trial under a [[link.schedule]]: each entry's phase with the median over
/// the repeats of each series' median in it (run/schedule_check.h phases_of()).
struct PhaseSummary {
    const results::Trial* trial = nullptr;
    std::string probe;
    struct Phase {
        std::size_t entry = 0;
        double from = 0, to = 0;                ///< seconds from the start, medians over the repeats
        std::map<std::string, double> medians;  ///< series name -> base units
        /// What the link allowed in it (run/schedule_check.h InForce): "rate" (bit/s, absent
        /// when no rate held), "outage" and "rtt" (s), "loss" (a fraction).
        std::map<std::string, double> in_force;
    };
    std::vector<Phase> phases;
    std::size_t repeats = 0;
};

struct Model {
    const results::RunData* data = nullptr;
    std::string baseline;
    std::vector<std::string> points, variants, sweep_keys;
    std::vector<Cell> cells;
    std::vector<Row> rows;
    std::vector<std::string> notes;  // what the reader asked for that the run cannot show
    std::optional<Pivot> pivot;
    ProbeRef effects_probe;  ///< the metric the effects are on (the pivot's)
    std::string effects_metric;
    std::vector<Effect> effects;
    std::optional<Best> best;
    std::vector<Explanation> explanations;
    std::vector<PhaseSummary> phases;
    std::vector<AssertOutcome> outcomes;
    bool asserted = false;
    std::string files_root;
};

Model build(const results::RunData& data, const std::vector<experiment::AssertSpec>& asserts,
            const ReportOptions& options);

/// "bulk, trial 1 default: [link] until 3.00 s: throughput 19.9 Mbit/s; #1 from 3.00 s: ..."
std::string phase_line(const PhaseSummary& p);

/// A capture's file as the reader finds it: under the results folder unless recorded absolute.
std::string capture_path(const Model& m, const results::Capture& c);
/// "bulk, default, client (wl-c): PATH: 300 packets, 40.3 KiB; stopped: ..."
std::string capture_line(const Model& m, const results::Trial& t, const results::Capture& c);

/// "complete", "interrupted: partial results: ...".
std::string status_text(const results::Run& run);
std::size_t trials_done(const results::RunData& data);
std::size_t trials_planned(const results::RunData& data);
/// Header lines a reader must not miss: a kernel measured that is not this machine's (the
/// micro-VM's, a hosts-mode machine's) with the defaults it did not share (keys every trial
/// set itself left out), trials whose emulation did not hold, failed trials, measurements a
/// tool refused, probes that lost exchanges.
std::vector<std::string> trial_warnings(const results::RunData& data);
/// A merged run's sources (wanlab results merge): each origin with its trials in plan order,
/// {"run 3f2a (shard 1/2) of r1 on lab-1, kernel 6.1.0", {1, 3, 5}}; empty for other runs.
std::vector<std::pair<std::string, std::vector<std::size_t>>> trial_origins(const results::RunData& data);
/// A resumed run's sessions (wanlab run --resume), one line each with the trials it measured:
/// "session 2: 2026-12-05T12:00:09Z to 12:03:10Z on lab-1, kernel 6.1.0-28-amd64 (host):
/// complete; trials 4, 5, 6"; empty for a run of one session.
std::vector<std::string> session_lines(const results::RunData& data);
/// The trials session `session` (1-based) of a resumed run measured, in plan order.
std::vector<std::size_t> session_trials(const results::RunData& data, std::size_t session);
probes::Unit unit(const Cell& c);
/// "34.28 Mbit/s [33.94, 34.62]", with " !" from a trial whose emulation did not hold; in an
/// adaptive run with its repeats, "n=4", or "n=10 max" when it stopped unsettled.
std::string cell_text(const Cell& c);
/// "+65.2% *" ("*": significant); "" for a row without a comparison.
std::string delta_text(const Row& r);
/// "better", "worse", "no verdict: failures" when a side lost too many, or "" when not
/// significant.
std::string verdict(const Row& r);
/// The coverage of the intervals shown: "75.0% at 3 repeats, ...".
std::string coverage_legend(const Model& m);
/// An adaptive run's rule and how many cells stopped at its maximum unsettled: "repeats: auto,
/// 3 first, then until the mean's 95% interval is within +-5% of the median (Stein's two-stage
/// rule), at most 10; n: repeats; max: stopped at 10 still wider (2 of 16 cells)"; "" for
/// fixed repeats.
std::string repeats_legend(const Model& m);
/// The before/after table and the pivot's tables, in human units.
TextTable before_after(const Model& m);
std::vector<TextTable> pivot_tables(const Model& m);
/// What more repeats would settle: for each comparison that is not significant (and lost no
/// more than kFailureLimit), about how many repeats a side would tell a difference of the
/// size measured (a two-sided test at 5% with 80% power, from the repeats' variances), or
/// that it is within the noise; empty when every comparison is settled.
std::vector<std::string> more_repeats(const Model& m);
/// "3 checks, 3 passed, 0 failed".
std::string assert_summary(const Model& m);
/// "host, kernel 6.1.0 x86_64 on lab-1, wanlab 0.1.0".
std::string environment_line(const results::Environment& e);

}  // namespace wanlab::report::detail
