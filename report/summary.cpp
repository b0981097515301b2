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

std::vector<double> finite(std::vector<double> v) {
    std::erase_if(v, [](double x) { return !std::isfinite(x); });
    return v;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
    if (std::isnan(x) || a <= 0 || b <= 0) return kNaN;
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double front =
        std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
    return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

double welch_p_value(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() < 2 || b.size() < 2) return kNaN;
    double n1 = static_cast<double>(a.size()), n2 = static_cast<double>(b.size());
    double m1 = probes::stats::mean(a), m2 = probes::stats::mean(b);
    double s1 = std::pow(probes::stats::stdev(a), 2) / n1, s2 = std::pow(probes::stats::stdev(b), 2) / n2;
    // No spread on either side: the repeats agree exactly, so any difference is real.
    if (s1 + s2 == 0) return m1 == m2 ? 1.0 : 0.0;
    double t = (m1 - m2) / std::sqrt(s1 + s2);
    double df = (s1 + s2) * (s1 + s2) / (s1 * s1 / (n1 - 1) + s2 * s2 / (n2 - 1));
    // P(|T| >= |t|) for Student's t with df degrees of freedom = I_{df/(df+t^2)}(df/2, 1/2).
    return incomplete_beta(df / 2, 0.5, df / (df + t * t));
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
    d.significant = !std::isnan(d.p_value) && d.p_value < 0.05;
    return d;
}

}  // namespace wanlab::report
