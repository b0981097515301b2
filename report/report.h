// Reports: what a run's measurements say, as before/after tables, sweep pivots,
// explanations, bandwidth-delay advice and CI gates, in four formats from the same rows.
//
// Contract: pure functions of a RunData (results/model.h) and the experiment's asserts;
// nothing here measures or touches the machine. A "cell" is one (sweep point, variant,
// probe, metric) over its repeats. The baseline variant is compared with every other
// variant at the same sweep point: medians, a confidence interval of each median, the
// relative difference, and whether it is significant. Human units in table/markdown, base
// units in json/csv. Trials whose emulation did not hold are flagged in every format.
// Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "results/model.h"

namespace wanlab::report {

/// The median of repeats with a distribution-free confidence interval (order statistics).
struct Summary {
    std::size_t n = 0;
    double median = results::kNaN;
    double low = results::kNaN, high = results::kNaN;  ///< CI of the median
    double confidence = 0;                             ///< its coverage, e.g. 0.94 (0 if n < 2)
};
Summary summarize(std::vector<double> values);

/// Baseline against another variant. `delta`: (other - base) / base. `better`: the change
/// goes in the metric's better direction. `significant`: a two-sided test at 5%.
struct Difference {
    double delta = results::kNaN;
    double p_value = results::kNaN;
    bool significant = false;
    bool better = false;
    /// A side has fewer than kMinJudgedRepeats: never significant, whatever the p-value (two
    /// values give a t-test one degree of freedom and a median interval of 50%).
    bool too_few = false;
};
inline constexpr std::size_t kMinJudgedRepeats = 3;
Difference difference(const std::vector<double>& base, const std::vector<double>& other, bool higher_is_better);
/// The same for runs of adaptive repeats (results::RepeatRule): the means over every repeat,
/// each side's variance from its first-stage repeats `base_first`, `other_first` (repeat
/// order, NaN where one did not report) with their degrees of freedom, as Stein's rule
/// requires: the variance of all the repeats is biased low by a count that was chosen on it.
Difference difference(const std::vector<double>& base, const std::vector<double>& other, bool higher_is_better,
                      const std::vector<double>& base_first, const std::vector<double>& other_first);

enum class Format { table, csv, json, markdown, html };
/// "table", "csv", "json", "markdown", "html"; throws wanlab::InputError naming the choices
/// otherwise. html is one self-contained page with charts (report/html.h).
Format parse_format(const std::string& name);

struct ReportOptions {
    Format format = Format::table;
    /// Metrics shown in the before/after table; empty = each probe kind's headline metrics.
    std::vector<std::string> metrics;
    /// The pivot's metric ("probe.metric" or "metric"); empty = the first asserted metric,
    /// else the first probe's headline metric. The pivot is shown when there is a sweep.
    std::string pivot;
    /// The folder trial files are kept in (the results database's folder): capture paths,
    /// recorded relative to it, are shown under it.
    std::string files_root;
};

/// The whole report of a run: header (experiment, environment, trials flagged), before/after
/// table, pivot for sweeps, explanations and advice, assert outcomes.
std::string render(const results::RunData& data, const std::vector<experiment::AssertSpec>& asserts,
                   const ReportOptions& options);

/// One sentence of explain(), with what it is: a probe's verdict, the trial's own, or advice.
struct Explanation {
    const results::Trial* trial = nullptr;
    std::string probe;  ///< "" for the trial's own verdict and for bandwidth-delay advice
    std::string rule;   ///< the verdict's rule; "bandwidth-delay" for the advice
    /// "binding" (the cause that set the probe's number, said first), "observed" (seen beside
    /// it, or with no cause shown to bind), "trial" (the trial's own verdict) or "advice".
    std::string role;
    std::string text;  ///< the whole line, as explain() gives it
};

/// Sentences the data supports, per trial: the trial's own verdict, then per probe its binding
/// verdict first ("bulk, default-buffers @ link.rtt=40ms: receive-window limited 92% of the
/// time: ...") and what else was seen ("bulk, ..., also observed: bufferbloat: ..."), then
/// bandwidth-delay advice (rate x RTT against tcp_rmem/tcp_wmem maxima and rmem_max/wmem_max
/// as the trial set them).
std::vector<Explanation> explanations(const results::RunData& data);
/// Each Explanation points into `data`: a temporary would leave them dangling.
std::vector<Explanation> explanations(const results::RunData&& data) = delete;

/// explanations()' lines.
std::vector<std::string> explain(const results::RunData& data);

struct AssertOutcome {
    experiment::AssertSpec spec;
    std::string variant;              ///< the variant it was evaluated on
    std::string point;                ///< sweep point ("link.rtt=40ms"), "" without sweep
    double measured = results::kNaN;  ///< median (bounds) or relative gain (min_gain), base units
    double bound = results::kNaN;
    bool passed = false;
    std::string message;  ///< "PASS bulk.throughput large-buffers @ link.rtt=40ms: gain +61.2% >= 20%"
};
/// Every assert on every (variant, sweep point) it applies to. A metric with no measurement
/// fails ("not measured").
std::vector<AssertOutcome> evaluate(const results::RunData& data, const std::vector<experiment::AssertSpec>& asserts);

/// The exit status a CI gate takes from a run: the run's own when it did not end well
/// (`run_status` non-zero), else 3 when an assert failed, else 0.
int gate_status(const std::vector<AssertOutcome>& outcomes, int run_status);

/// The check an outcome evaluated: "at_least", "at_most" or "min_gain". Each outcome's
/// `spec` keeps only that one bound, so an assert with two bounds gives two outcomes.
std::string check_name(const AssertOutcome& outcome);
/// What an outcome is about: "bulk.throughput large-buffers @ link.rtt=40ms" (the message
/// without PASS/FAIL and the numbers).
std::string outcome_subject(const AssertOutcome& outcome);

/// A JUnit XML report: one testsuite for the run, one testcase per outcome.
std::string junit_xml(const results::RunData& data, const std::vector<AssertOutcome>& outcomes);

/// The trial `wanlab results sysctl` writes: `variant` at sweep point `point` (its label as the
/// report writes it, "link.rtt=40ms", or a part of it only one label contains; "" when the run
/// has one point). Throws wanlab::InputError naming the choices for an unknown variant, a point
/// that matches none or several, a missing point of a run with several, and a `host` ("" =
/// none) that is no lab host of the run.
struct TrialChoice {
    const results::Trial* trial = nullptr;
    std::string point;  ///< the label matched
    std::string note;   ///< "--point \"40ms\" matched sweep point \"link.rtt=40ms\""; "" for an exact label
};
TrialChoice trial_for(const results::RunData& data, const std::string& variant, const std::string& point,
                      const std::string& host);

/// The sysctls `trial` set, as a sysctl.d drop-in (`man sysctl.d`): a header naming the run, its
/// experiment file, the trial, when, where and on which kernel it was measured (a warning when
/// that was the micro-VM's), then per key a comment on where its value came from and what the
/// trial measured, and `key = value` with a value's fields space-separated. Per-host keys
/// ("server:net.core.rmem_max"): with `host` "" the global keys, then each host's commented
/// out under its name; with `host` given, the global keys and that host's (its value replacing
/// a global one). A trial that set none gives the header and a line saying so.
std::string sysctl_dropin(const results::RunData& data, const results::Trial& trial, const std::string& host);

/// Two runs of the same experiment (another machine, kernel or wanlab version): per trial id,
/// probe and metric, the medians side by side with delta and significance.
std::string render_comparison(const results::RunData& a, const results::RunData& b, Format format);

}  // namespace wanlab::report
