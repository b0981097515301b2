// Statistics shared by the probes and by reports: summaries of samples, percentiles,
// intervals and tests, and an HDR-style latency histogram.
//
// Contract: pure functions over a copy or a const view of the samples; empty input gives
// NaN (never throws). Percentiles use the nearest-rank definition: the p-th percentile is
// the smallest sample with at least p% of the samples at or below it, so it is always a
// value that was actually observed (as wrk and HdrHistogram report them). Thread-safe (no
// shared state); Histogram is not thread-safe: give each thread its own and merge().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wanlab::probes::stats {

double mean(const std::vector<double>& x);
/// Sample standard deviation (n - 1); 0 for one sample.
double stdev(const std::vector<double>& x);
/// Mean absolute deviation as ping prints it as "mdev": sqrt(mean(x^2) - mean(x)^2).
double mdev(const std::vector<double>& x);
double min(const std::vector<double>& x);
double max(const std::vector<double>& x);
/// Nearest-rank percentile, p in [0, 100]; p = 0 gives the minimum.
double percentile(std::vector<double> x, double p);
/// Several percentiles with one sort.
std::vector<double> percentiles(std::vector<double> x, const std::vector<double>& ps);
/// The middle value (mean of the two middle ones for an even count).
double median(std::vector<double> x);

struct Interval {
    double low, high;
};
/// The Wilson score interval of `k` events in `n` trials at `z` (2.576 for 99%): NaN ends for
/// n = 0; exactly 0 (1) at its low (high) end when k = 0 (k = n). Holds its coverage near 0,
/// where the normal approximation does not.
Interval wilson_interval(double k, double n, double z);

/// I_x(a, b), the regularized incomplete beta function; NaN unless a, b > 0 and x is a number.
double incomplete_beta(double a, double b, double x);
/// P(|T| >= |t|) for Student's t with `df` degrees of freedom (df may be fractional, as
/// Welch's is); NaN for df <= 0.
double student_t_two_sided(double t, double df);
/// The t with P(|T| >= t) = `alpha` (0.05: the 97.5% quantile; 12.706 at df 1, 4.303 at df 2).
double student_t_critical(double alpha, double df);

/// Stein's two-stage rule (Stein 1945) for a mean known to +-`precision` (a fraction of the
/// first stage's median) at 95%: after n0 = first_stage.size() repeats with sample deviation
/// s0 and median m0, n = ceil((t(0.05, n0 - 1) * s0 / (precision * |m0|))^2) repeats in all,
/// within [n0, max_repeats]. As n depends on the first stage's spread only, the interval
/// mean(all n) +- t(0.05, n0 - 1) * s0 / sqrt(n) has its coverage exactly (normal repeats);
/// a rule that stops when the running interval is narrow enough does not (it stops on
/// spreads that are small by chance). Non-finite values (measurements a tool refused) are left
/// out; fewer than 2 finite values give n0 (nothing to learn from by repeating). m0 = 0 with
/// any spread gives max_repeats.
std::size_t stein_repeats(const std::vector<double>& first_stage, double precision, std::size_t max_repeats);
/// The half-width of Stein's 95% interval of the mean after `n` repeats in all:
/// t(0.05, n0 - 1) * s0 / sqrt(n); NaN with fewer than 2 finite first-stage values.
double stein_half_width(const std::vector<double>& first_stage, std::size_t n);

/// Histogram: counts of non-negative integer values (latencies in nanoseconds) in
/// logarithmic buckets with 2^kSubBits sub-buckets per power of two, so any recorded value
/// is reported within 1/2^kSubBits (0.8%) of itself, from 1 ns to hours, in fixed memory.
class Histogram {
public:
    static constexpr int kSubBits = 7;

    void record(std::uint64_t value, std::uint64_t count = 1);
    void merge(const Histogram& other);
    std::uint64_t count() const { return total_; }
    std::uint64_t min() const { return total_ ? min_ : 0; }
    std::uint64_t max() const { return max_; }
    double mean() const;
    /// Nearest-rank percentile, reported as the highest value of its bucket (clamped to max()).
    std::uint64_t percentile(double p) const;

private:
    static std::size_t index_of(std::uint64_t v);
    static std::uint64_t highest_in(std::size_t index);

    std::vector<std::uint64_t> counts_;
    std::uint64_t total_ = 0, min_ = UINT64_MAX, max_ = 0;
    long double sum_ = 0;
};

}  // namespace wanlab::probes::stats
