// Summary and Difference: the statistics every report table stands on.
//
// Repeats are few (3 by default), so both halves avoid assumptions they cannot check: the
// median's interval comes from order statistics (distribution-free, exact coverage from the
// binomial), and the test of a difference is Welch's t-test, which does not assume the two
// variants vary alike (a tuned kernel often changes the spread as well as the level).
#include <algorithm>
#include <cmath>
#include <limits>

#include "probes/stats.h"
#include "report/detail.h"

namespace wanlab::report {
namespace detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> finite(std::vector<double> v) {
    std::erase_if(v, [](double x) { return !std::isfinite(x); });
    return v;
}

}  // namespace

namespace {

// Welch's statistic for means m1, m2 with squared standard errors v1, v2 and degrees of
// freedom f1, f2 for them: the two-sided p-value, df from Welch-Satterthwaite.
double welch_from(double m1, double m2, double v1, double v2, double f1, double f2) {
    // No spread on either side: the repeats agree exactly, so any difference is real.
    if (v1 + v2 == 0) return m1 == m2 ? 1.0 : 0.0;
    double t = (m1 - m2) / std::sqrt(v1 + v2);
    double df = (v1 + v2) * (v1 + v2) / (v1 * v1 / f1 + v2 * v2 / f2);
    return probes::stats::student_t_two_sided(t, df);
}

}  // namespace

double welch_p_value(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() < 2 || b.size() < 2) return kNaN;
    double n1 = static_cast<double>(a.size()), n2 = static_cast<double>(b.size());
    return welch_from(probes::stats::mean(a), probes::stats::mean(b), std::pow(probes::stats::stdev(a), 2) / n1,
                      std::pow(probes::stats::stdev(b), 2) / n2, n1 - 1, n2 - 1);
}

double stein_welch_p_value(const std::vector<double>& a, const std::vector<double>& b,
                           const std::vector<double>& a_first, const std::vector<double>& b_first) {
    auto fa = finite(a_first), fb = finite(b_first);
    if (a.size() < 2 || b.size() < 2 || fa.size() < 2 || fb.size() < 2) return kNaN;
    // Each side's variance: the first stage's, or all the repeats' where that is larger. Stein's
    // rule makes the first stage's the honest one for the metric that chose the count; a metric
    // that did not choose it (retransmits beside throughput) may have been quiet in its first
    // repeats and not after (first stage all 0), and the larger of the two is safe either way.
    auto side = [](const std::vector<double>& all, const std::vector<double>& first) {
        double v_all = std::pow(probes::stats::stdev(all), 2), v_first = std::pow(probes::stats::stdev(first), 2);
        double n = static_cast<double>(all.size());
        return v_all > v_first ? std::pair{v_all / n, n - 1} : std::pair{v_first / n, first.size() - 1.0};
    };
    auto [v1, f1] = side(a, fa);
    auto [v2, f2] = side(b, fb);
    return welch_from(probes::stats::mean(a), probes::stats::mean(b), v1, v2, f1, f2);
}

double binomial_half_cdf(std::size_t n, std::size_t k) {
    double sum = 0, nn = static_cast<double>(n);
    for (std::size_t i = 0; i <= k && i <= n; ++i) {
        double ii = static_cast<double>(i);
        // In logs, so 1000 repeats do not overflow C(n, i) or underflow 2^-n.
        sum += std::exp(std::lgamma(nn + 1) - std::lgamma(ii + 1) - std::lgamma(nn - ii + 1) - nn * std::log(2.0));
    }
    return std::min(sum, 1.0);
}

}  // namespace detail

Summary summarize(std::vector<double> values) {
    values = detail::finite(std::move(values));  // NaN is "not measured", not a repeat
    Summary s;
    s.n = values.size();
    if (values.empty()) return s;
    std::sort(values.begin(), values.end());
    s.median = probes::stats::median(values);
    if (s.n < 2) return s;  // one repeat: a value, no interval
    // [x(k), x(n+1-k)] covers the median with probability 1 - 2 P(B <= k - 1), B ~ Bin(n, 1/2).
    // The narrowest pair still at 95% (largest k); with too few repeats for 95% anywhere,
    // [min, max] and the coverage it really has (n = 3: 75%), so nobody reads it as 95%.
    std::size_t k = 1;
    while (k + 1 <= (s.n + 1) / 2 && 1 - 2 * detail::binomial_half_cdf(s.n, k) >= 0.95) ++k;
    s.low = values[k - 1];
    s.high = values[s.n - k];
    s.confidence = 1 - 2 * detail::binomial_half_cdf(s.n, k - 1);
    return s;
}

Difference difference(const std::vector<double>& base, const std::vector<double>& other, bool higher_is_better) {
    auto b = detail::finite(base), o = detail::finite(other);
    Difference d;
    if (b.empty() || o.empty()) return d;
    // The size of the change on medians (what the tables show, robust to one odd repeat);
    // its significance from Welch's test on the repeats, since a median test has no power
    // at 3 repeats.
    double mb = probes::stats::median(b), mo = probes::stats::median(o);
    if (mb != 0)
        d.delta = (mo - mb) / mb;
    else if (mo == 0)
        d.delta = 0;  // else undefined: a change from zero has no relative size
    d.better = higher_is_better ? mo > mb : mo < mb;
    d.p_value = detail::welch_p_value(b, o);
    d.too_few = b.size() < kMinJudgedRepeats || o.size() < kMinJudgedRepeats;
    d.significant = !d.too_few && !std::isnan(d.p_value) && d.p_value < 0.05;
    return d;
}

Difference difference(const std::vector<double>& base, const std::vector<double>& other, bool higher_is_better,
                      const std::vector<double>& base_first, const std::vector<double>& other_first) {
    auto d = difference(base, other, higher_is_better);
    d.p_value = detail::stein_welch_p_value(detail::finite(base), detail::finite(other), base_first, other_first);
    d.significant = !d.too_few && !std::isnan(d.p_value) && d.p_value < 0.05;
    return d;
}

}  // namespace wanlab::report
