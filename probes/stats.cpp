#include "probes/stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

namespace wanlab::probes::stats {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Index into sorted data of the nearest-rank p-th percentile.
std::size_t rank_index(std::size_t n, double p) {
    if (p <= 0) return 0;
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
    return std::min(n, std::max<std::size_t>(rank, 1)) - 1;
}
}  // namespace

double mean(const std::vector<double>& x) {
    if (x.empty()) return kNaN;
    return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double stdev(const std::vector<double>& x) {
    if (x.empty()) return kNaN;
    if (x.size() == 1) return 0;
    double m = mean(x), ss = 0;
    for (double v : x) ss += (v - m) * (v - m);
    return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

double mdev(const std::vector<double>& x) {
    if (x.empty()) return kNaN;
    double m = mean(x), sq = 0;
    for (double v : x) sq += v * v;
    return std::sqrt(std::max(0.0, sq / static_cast<double>(x.size()) - m * m));
}

double min(const std::vector<double>& x) { return x.empty() ? kNaN : *std::min_element(x.begin(), x.end()); }
double max(const std::vector<double>& x) { return x.empty() ? kNaN : *std::max_element(x.begin(), x.end()); }

double percentile(std::vector<double> x, double p) { return percentiles(std::move(x), {p}).front(); }

std::vector<double> percentiles(std::vector<double> x, const std::vector<double>& ps) {
    std::vector<double> out;
    std::sort(x.begin(), x.end());
    for (double p : ps) out.push_back(x.empty() ? kNaN : x[rank_index(x.size(), p)]);
    return out;
}

double median(std::vector<double> x) {
    if (x.empty()) return kNaN;
    auto mid = x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2);
    std::nth_element(x.begin(), mid, x.end());
    if (x.size() % 2) return *mid;
    double upper = *mid;
    return (upper + *std::max_element(x.begin(), mid)) / 2;
}

Interval wilson_interval(double k, double n, double z) {
    if (!(n > 0)) return {std::nan(""), std::nan("")};
    double p = k / n, z2 = z * z;
    double centre = p + z2 / (2 * n), spread = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
    // Exactly 0 and 1 at the ends, not a rounding error's 1e-19 beside them.
    return {k <= 0 ? 0 : std::max(0.0, (centre - spread) / (1 + z2 / n)),
            k >= n ? 1 : std::min(1.0, (centre + spread) / (1 + z2 / n))};
}

std::size_t Histogram::index_of(std::uint64_t v) {
    constexpr std::uint64_t sub = 1u << kSubBits;
    if (v < sub) return static_cast<std::size_t>(v);
    int msb = 63 - std::countl_zero(v);
    int shift = msb - kSubBits;
    return static_cast<std::size_t>(sub + static_cast<std::uint64_t>(shift) * sub + ((v >> shift) - sub));
}

std::uint64_t Histogram::highest_in(std::size_t index) {
    constexpr std::uint64_t sub = 1u << kSubBits;
    if (index < sub) return index;
    std::uint64_t k = index - sub, shift = k / sub;
    std::uint64_t low = (sub + k % sub) << shift;
    return low + ((std::uint64_t{1} << shift) - 1);
}

void Histogram::record(std::uint64_t value, std::uint64_t count) {
    auto i = index_of(value);
    if (counts_.size() <= i) counts_.resize(i + 1, 0);
    counts_[i] += count;
    total_ += count;
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
    sum_ += static_cast<long double>(value) * count;
}

void Histogram::merge(const Histogram& o) {
    if (counts_.size() < o.counts_.size()) counts_.resize(o.counts_.size(), 0);
    for (std::size_t i = 0; i < o.counts_.size(); ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
    sum_ += o.sum_;
}

double Histogram::mean() const { return total_ ? static_cast<double>(sum_ / total_) : kNaN; }

std::uint64_t Histogram::percentile(double p) const {
    if (!total_) return 0;
    std::uint64_t rank = p <= 0 ? 1 : static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(total_)));
    rank = std::clamp<std::uint64_t>(rank, 1, total_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        seen += counts_[i];
        if (seen >= rank) return std::clamp(highest_in(i), min(), max_);
    }
    return max_;
}

namespace {

// Continued fraction of the incomplete beta function (modified Lentz), as in Numerical
// Recipes' betacf; converges fast for x < (a + 1) / (a + b + 2).
double beta_continued_fraction(double a, double b, double x) {
    constexpr double kTiny = 1e-300, kEps = 1e-15;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (std::fabs(d) < kTiny) d = kTiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 500; ++m) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (std::fabs(d) < kTiny) d = kTiny;
        c = 1 + aa / c;
        if (std::fabs(c) < kTiny) c = kTiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (std::fabs(d) < kTiny) d = kTiny;
        c = 1 + aa / c;
        if (std::fabs(c) < kTiny) c = kTiny;
        d = 1 / d;
        double delta = d * c;
        h *= delta;
        if (std::fabs(delta - 1) < kEps) break;
    }
    return h;
}

std::vector<double> finite_only(const std::vector<double>& x) {
    std::vector<double> out;
    for (double v : x)
        if (std::isfinite(v)) out.push_back(v);
    return out;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
    if (std::isnan(x) || !(a > 0) || !(b > 0)) return kNaN;
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double front =
        std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
    return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

double student_t_two_sided(double t, double df) {
    if (!(df > 0) || std::isnan(t)) return kNaN;
    return incomplete_beta(df / 2, 0.5, df / (df + t * t));
}

double student_t_critical(double alpha, double df) {
    if (!(df > 0) || !(alpha > 0 && alpha < 1)) return kNaN;
    // P(|T| >= t) falls as t grows: bisect on it. At df 1 and alpha 1e-6 t is ~3e5.
    double low = 0, high = 1;
    while (student_t_two_sided(high, df) > alpha && high < 1e12) high *= 2;
    for (int i = 0; i < 200 && high - low > 1e-12 * high; ++i) {
        double mid = (low + high) / 2;
        (student_t_two_sided(mid, df) > alpha ? low : high) = mid;
    }
    return (low + high) / 2;
}

std::size_t stein_repeats(const std::vector<double>& first_stage, double precision, std::size_t max_repeats) {
    const std::size_t n0 = first_stage.size();
    auto x = finite_only(first_stage);
    if (x.size() < 2 || n0 >= max_repeats) return n0;
    double s0 = stdev(x), m0 = std::fabs(median(x));
    if (s0 == 0) return n0;
    if (m0 == 0 || !(precision > 0)) return max_repeats;
    double n = std::pow(student_t_critical(0.05, static_cast<double>(x.size() - 1)) * s0 / (precision * m0), 2);
    if (!(n < static_cast<double>(max_repeats))) return max_repeats;
    return std::max(n0, static_cast<std::size_t>(std::ceil(n)));
}

double stein_half_width(const std::vector<double>& first_stage, std::size_t n) {
    auto x = finite_only(first_stage);
    if (x.size() < 2 || n == 0) return kNaN;
    return student_t_critical(0.05, static_cast<double>(x.size() - 1)) * stdev(x) / std::sqrt(static_cast<double>(n));
}

}  // namespace wanlab::probes::stats
