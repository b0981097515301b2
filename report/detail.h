// Internals shared by the report's files: how a run is laid out (sweep points, variants,
// probes, the values of one cell), human formatting in a metric's unit, an aligned text
// table, and the statistics behind Summary and Difference.
//
// Contract: pure functions, NaN for "not measured"; not part of the report's public
// interface (tests include it to check the pieces). Thread-safe.
#pragma once

#include <cmath>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/human.h"
#include "probes/probe_spec.h"
#include "report/report.h"

namespace wanlab::report::detail {

// --- statistics (summary.cpp) -----------------------------------------------------------

/// Two-sided p-value of Welch's t-test of equal means; NaN with fewer than 2 values a side.
double welch_p_value(const std::vector<double>& a, const std::vector<double>& b);
/// Welch's test after Stein's two-stage rule: means over `a` and `b`, variances and degrees of
/// freedom from their first stages `a_first`, `b_first` (finite values only); NaN with fewer
/// than 2 finite first-stage values a side.
double stein_welch_p_value(const std::vector<double>& a, const std::vector<double>& b,
                           const std::vector<double>& a_first, const std::vector<double>& b_first);
/// P(X <= k) for X ~ Binomial(n, 1/2).
double binomial_half_cdf(std::size_t n, std::size_t k);

// --- formatting (format.cpp) ------------------------------------------------------------

/// "157.20 Mbit/s [150.10, 160.20]": the interval in the median's scale; "-" with no values.
std::string human_ci(probes::Unit unit, const Summary& s);
/// Bytes with a binary prefix: "208 KiB", "2.4 MiB".
std::string human_bytes(double bytes);
/// A relative change: "+61.2%", "-3.0%"; "-" for NaN.
std::string signed_percent(double fraction);
/// The unit as the json and csv outputs name it ("bit/s", "s", ...); "" for no spec.
std::string unit_of(const probes::MetricSpec* spec);
/// A number for json: null for NaN and infinities (json has neither).
template <class Json = nlohmann::json>
Json number(double v) {
    return std::isfinite(v) ? Json(v) : Json();
}
/// A csv field, quoted when it holds a comma, quote or newline (RFC 4180).
std::string csv_field(const std::string& s);
std::string csv_number(double v);  ///< full precision, empty for NaN

/// Text for XML or HTML content and quoted attribute values: the five entities (&amp; &lt;
/// &gt; &quot; &#39;), and '?' for the control characters XML 1.0 cannot carry (below 0x20
/// but tab, newline, return).
std::string escape_markup(std::string_view s);

/// Text for a markdown line: stars and pipes escaped, so "* significant" is not a list item.
std::string markdown_text(const std::string& s);

/// Rows of text cells printed with aligned columns, or as a markdown pipe table.
class TextTable {
public:
    explicit TextTable(std::vector<std::string> header, std::vector<bool> right_aligned = {});
    void add(std::vector<std::string> row);
    bool empty() const { return rows_.empty(); }
    std::string text(const std::string& indent) const;  ///< two spaces between columns
    std::string markdown() const;
    std::string html() const;  ///< a <table>, right-aligned cells of class "num"

private:
    std::vector<std::string> header_;
    std::vector<bool> right_;
    std::vector<std::vector<std::string>> rows_;
};

// --- the run's shape (layout.cpp) -------------------------------------------------------

/// "link.rtt=40ms" or "link.rtt=40ms, link.loss=1%"; "" for a run without sweep.
std::string point_label(const results::Trial& t);
/// Sweep points in plan order (one "" when the run has no sweep or no trials).
std::vector<std::string> points_of(const results::RunData& data);
/// The run's baseline, or the first variant when the run does not name one.
std::string baseline_of(const results::RunData& data);
/// Every variant, baseline first, then in plan order.
std::vector<std::string> variants_of(const results::RunData& data);
/// The trial of `variant` at sweep point `point`, or nullptr (not planned or not stored).
const results::Trial* trial_at(const results::RunData& data, const std::string& point, const std::string& variant);
bool has_sweep(const results::RunData& data);

/// Metrics no kind declares (a command probe's, from its output), with stable storage for
/// the MetricSpecs' names.
struct OwnMetrics {
    std::deque<std::string> names;
    std::vector<probes::MetricSpec> specs;
};

struct ProbeRef {
    std::string name;
    std::string kind;
    std::shared_ptr<const OwnMetrics> own;  ///< from the notes of its measurements; may be null
};
/// Probes in the order they first appear in the measurements.
std::vector<ProbeRef> probes_of(const results::RunData& data);
/// The probe named `name`, or when `name` is empty the first whose kind reports `metric`.
const ProbeRef* find_probe(const std::vector<ProbeRef>& probes, const std::string& name, const std::string& metric);
/// The metric's unit and direction, nullptr if the kind does not report it.
const probes::MetricSpec* metric_spec(const ProbeRef& probe, const std::string& metric);
/// The metrics a report shows by default for a probe: its kind's headline ones, and a
/// command probe's own metrics after its wall time.
std::vector<std::string> headline_metrics(const ProbeRef& probe);

/// One finite value per repeat of `probe` in trial `trial_index` (NaN values left out).
std::vector<double> values_of(const results::RunData& data, std::size_t trial_index, const std::string& probe,
                              const std::string& metric);
/// Above this share of failed exchanges a figure gets no verdict: it rests on the survivors,
/// which are not a sample of what was asked (the slow ones are the ones missing).
inline constexpr double kFailureLimit = 0.05;
/// What repeats of a probe attempted and lost (probes' `attempted` and `failed`, summed);
/// NaN when the kind does not count exchanges.
struct Tally {
    double attempted = results::kNaN, failed = results::kNaN;
    void add(const Tally& other);
    bool lost_some() const;      ///< any failed
    bool lost_too_many() const;  ///< over kFailureLimit of the attempts
    /// " (2 of 40 failed)", " (9 of 40 failed: no verdict)"; "" when none failed.
    std::string text() const;
};
/// Trial `trial_index`'s repeats of `probe`, summed.
Tally tally_of(const results::RunData& data, std::size_t trial_index, const std::string& probe);
/// True when the trial's emulated path did not behave as configured (check.held false).
bool emulation_failed(const results::Trial* t);
/// "bulk.throughput large-buffers @ link.rtt=40ms" without the parts that are empty.
std::string subject(const std::string& probe, const std::string& metric, const std::string& variant,
                    const std::string& point);

}  // namespace wanlab::report::detail
