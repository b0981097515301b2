// Statistics shared by the probes and by reports: summaries of samples, percentiles, a
// bootstrap confidence interval of the median, and an HDR-style latency histogram.
//
// Contract: pure functions over a copy or a const view of the samples; empty input gives
// NaN (never throws). Percentiles use the nearest-rank definition: the p-th percentile is
// the smallest sample with at least p% of the samples at or below it, so it is always a
// value that was actually observed (as wrk and HdrHistogram report them). The bootstrap is
// seeded and deterministic for a given seed. Thread-safe (no shared state); Histogram is
// not thread-safe: give each thread its own and merge().
#pragma once

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
/// Percentile bootstrap CI of the median: `resamples` resamples with replacement, a
/// mt19937_64 seeded with `seed`, confidence `level` (0.95 = 95%).
Interval bootstrap_median_ci(const std::vector<double>& x, double level = 0.95, int resamples = 2000,
                             std::uint64_t seed = 1);

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
