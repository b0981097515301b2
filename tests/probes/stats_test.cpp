#include <catch2/catch.hpp>

#include <cmath>

#include "probes/series.h"
#include "probes/stats.h"

using namespace wanlab::probes;

TEST_CASE("stats mean and sample stdev match hand-computed values", "[probes][stats]") {
    std::vector<double> x{2, 4, 4, 4, 5, 5, 7, 9};
    CHECK(stats::mean(x) == Approx(5));
    CHECK(stats::stdev(x) == Approx(std::sqrt(32.0 / 7)));
    CHECK(stats::mdev(x) == Approx(2));  // population deviation, as ping prints it
    CHECK(stats::stdev({3}) == 0);
}

TEST_CASE("stats of no samples are NaN, not an exception", "[probes][stats]") {
    CHECK(std::isnan(stats::mean({})));
    CHECK(std::isnan(stats::median({})));
    CHECK(std::isnan(stats::percentile({}, 50)));
}

TEST_CASE("stats median averages the two middle values of an even count", "[probes][stats]") {
    CHECK(stats::median({5, 1, 3}) == 3);
    CHECK(stats::median({4, 1, 3, 2}) == 2.5);
}

TEST_CASE("stats percentiles use the nearest rank, so they are observed values", "[probes][stats]") {
    std::vector<double> x;
    for (int i = 1; i <= 100; ++i) x.push_back(i);
    CHECK(stats::percentile(x, 50) == 50);
    CHECK(stats::percentile(x, 99) == 99);
    CHECK(stats::percentile(x, 99.5) == 100);
    CHECK(stats::percentile(x, 100) == 100);
    CHECK(stats::percentile(x, 0) == 1);
    CHECK(stats::percentile({15, 20, 35, 40, 50}, 30) == 20);  // Wikipedia's nearest-rank example
    CHECK(stats::percentile({15, 20, 35, 40, 50}, 40) == 20);
    CHECK(stats::percentile({15, 20, 35, 40, 50}, 50) == 35);
}

TEST_CASE("stats histogram reports percentiles within its resolution", "[probes][stats]") {
    stats::Histogram h;
    for (std::uint64_t v = 1; v <= 100000; ++v) h.record(v * 1000);  // 1 us .. 100 ms
    CHECK(h.count() == 100000);
    CHECK(h.min() == 1000);
    CHECK(h.max() == 100'000'000);
    for (double p : {50.0, 90.0, 99.0, 99.9}) {
        double exact = p / 100 * 100000 * 1000;
        CHECK(std::abs(static_cast<double>(h.percentile(p)) - exact) / exact < 1.0 / 128);
    }
    CHECK(h.percentile(100) == 100'000'000);
    CHECK(h.mean() == Approx(50'000'500).epsilon(1e-9));
}

TEST_CASE("stats histogram keeps small values exact and merges counts", "[probes][stats]") {
    stats::Histogram a, b;
    for (std::uint64_t v : {1, 2, 3}) a.record(v);
    b.record(127, 5);
    a.merge(b);
    CHECK(a.count() == 8);
    CHECK(a.percentile(25) == 2);
    CHECK(a.percentile(50) == 127);
    CHECK(a.min() == 1);
}

TEST_CASE("interval tally gives rate and latency per interval, merged across threads", "[probes][stats][series]") {
    wanlab::probes::IntervalTally a(0.5), b(0.5);
    a.record(0.1, 0.010);
    a.record(0.2, 0.030);
    b.record(0.3, 0.020);
    b.record(1.2, 0.040);  // the third interval; the second has none
    a.merge(b);
    wanlab::probes::SeriesMap out;
    a.add_series(out, "requests_per_second", 1.25);
    const auto& rate = out.at("requests_per_second");
    REQUIRE(rate.t == std::vector<double>{0.5, 1.0, 1.25});
    CHECK(rate.value[0] == Approx(6));  // 3 in 0.5 s
    CHECK(rate.value[1] == 0);
    CHECK(rate.value[2] == Approx(4));  // 1 in the last 0.25 s
    // No latency for an interval without completions.
    CHECK(out.at("latency_mean").t == std::vector<double>{0.5, 1.25});
    CHECK(out.at("latency_mean").value[0] == Approx(0.020));
    CHECK(out.at("latency_max").value == std::vector<double>{0.030, 0.040});
    // A tail shorter than half an interval is no rate.
    wanlab::probes::SeriesMap tail;
    a.add_series(tail, "requests_per_second", 1.2);
    CHECK(tail.at("requests_per_second").t == std::vector<double>{0.5, 1.0});
}

TEST_CASE("a series' unit follows its name", "[probes][series]") {
    using wanlab::probes::series_unit;
    using wanlab::probes::Unit;
    CHECK(series_unit("throughput") == Unit::bits_per_second);
    CHECK(series_unit("stream2.delivery_rate") == Unit::bits_per_second);
    CHECK(series_unit("stream1.cwnd") == Unit::count);
    CHECK(series_unit("stream1.srtt") == Unit::seconds);
    CHECK(series_unit("stream1.min_rtt") == Unit::seconds);
    CHECK(series_unit("stream1.rwnd_limited_time") == Unit::seconds);
    CHECK(series_unit("stream1.snd_wnd") == Unit::bytes);
    CHECK(series_unit("stream1.in_flight") == Unit::bytes);
    CHECK(series_unit("qdisc.up.netem.backlog") == Unit::bytes);
    CHECK(series_unit("qdisc.up.netem.drops") == Unit::count);
    CHECK(series_unit("requests_per_second") == Unit::per_second);
    CHECK(series_unit("latency_mean") == Unit::seconds);
    CHECK(series_unit("rtt") == Unit::seconds);
}

TEST_CASE("stats incomplete beta matches closed forms", "[probes][stats]") {
    CHECK(stats::incomplete_beta(3, 3, 0.5) == Approx(0.5));
    CHECK(stats::incomplete_beta(1, 1, 0.3) == Approx(0.3));
    CHECK(stats::incomplete_beta(2.5, 1, 0.4) == Approx(std::pow(0.4, 2.5)));
    CHECK(stats::incomplete_beta(1, 4, 0.2) == Approx(1 - std::pow(0.8, 4)));
    CHECK(stats::incomplete_beta(2, 3, 0) == 0);
    CHECK(stats::incomplete_beta(2, 3, 1) == 1);
}

// References: the two-sided tail of Student's t integrated numerically with mpmath at 30
// digits (an independent route from the incomplete beta used here); the first pair is
// Wikipedia's Welch example (t = -2.46, df = 24.99, p = 0.021).
TEST_CASE("stats Student t critical values match the printed table", "[probes][stats]") {
    CHECK(stats::student_t_critical(0.05, 1) == Approx(12.7062).margin(1e-3));
    CHECK(stats::student_t_critical(0.05, 2) == Approx(4.3027).margin(1e-3));
    CHECK(stats::student_t_critical(0.05, 9) == Approx(2.2622).margin(1e-3));
    CHECK(stats::student_t_critical(0.01, 4) == Approx(4.6041).margin(1e-3));
    CHECK(stats::student_t_critical(0.05, 1e6) == Approx(1.95997).margin(1e-3));  // the normal's
    CHECK(stats::student_t_two_sided(stats::student_t_critical(0.05, 3.7), 3.7) == Approx(0.05));
    CHECK(std::isnan(stats::student_t_critical(0.05, 0)));
}

TEST_CASE("stats Stein's rule asks (t * s0 / (precision * median))^2 repeats, within its bounds", "[probes][stats]") {
    // s0 = 2, median 100, t(2 df) = 4.303: (4.303 * 2 / 5)^2 = 2.96 at 5%: the first three do.
    CHECK(stats::stein_repeats({100, 102, 98}, 0.05, 10) == 3);
    // At 2%: (4.303 * 2 / 2)^2 = 18.5: more than 10 allowed, so 10.
    CHECK(stats::stein_repeats({100, 102, 98}, 0.02, 10) == 10);
    // s0 = 3: (4.303 * 3 / 5)^2 = 6.67: 7 in all.
    CHECK(stats::stein_repeats({100, 103, 97}, 0.05, 10) == 7);
    CHECK(stats::stein_half_width({100, 103, 97}, 7) == Approx(4.3027 * 3 / std::sqrt(7.0)).epsilon(1e-4));
    CHECK(stats::stein_half_width({100, 103, 97}, 7) <= 0.05 * 100);
    // No spread: nothing to gain by repeating. A median of zero with spread: no relative
    // precision reaches it, so the maximum.
    CHECK(stats::stein_repeats({5, 5, 5}, 0.05, 10) == 3);
    CHECK(stats::stein_repeats({-1, 0, 1}, 0.05, 10) == 10);
    // A repeat the tool refused (NaN) is left out; with one value left there is no spread to
    // plan from, and no reason to repeat a probe that keeps failing.
    CHECK(stats::stein_repeats({100, std::nan(""), 103, 97}, 0.05, 10) == 7);
    CHECK(stats::stein_repeats({100, std::nan(""), std::nan("")}, 0.05, 10) == 3);
    CHECK(std::isnan(stats::stein_half_width({100}, 5)));
}
