#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "probes/stats.h"
#include "report/detail.h"
#include "report/report.h"

using namespace wanlab::report;

TEST_CASE("report summary of one repeat is its value, with no interval", "[report]") {
    auto s = summarize({42});
    CHECK(s.n == 1);
    CHECK(s.median == 42);
    CHECK(std::isnan(s.low));
    CHECK(std::isnan(s.high));
    CHECK(s.confidence == 0);
}

TEST_CASE("report summary of three repeats is [min, max] at its real coverage of 75%", "[report]") {
    auto s = summarize({30, 10, 20});
    CHECK(s.n == 3);
    CHECK(s.median == 20);
    CHECK(s.low == 10);
    CHECK(s.high == 30);
    CHECK(s.confidence == Approx(0.75));
}

TEST_CASE("report summary of ten repeats takes the 2nd and 9th order statistics (97.85%)", "[report]") {
    // P(Bin(10, 1/2) <= 1) = 11/1024, so [x(2), x(9)] covers 1 - 22/1024; [x(3), x(8)] only 89%.
    auto s = summarize({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
    CHECK(s.n == 10);
    CHECK(s.median == 5.5);
    CHECK(s.low == 2);
    CHECK(s.high == 9);
    CHECK(s.confidence == Approx(1 - 22.0 / 1024));
}

TEST_CASE("report summary reaches 95% at six repeats and not at five", "[report]") {
    CHECK(summarize({1, 2, 3, 4, 5}).confidence == Approx(1 - 2.0 / 32));
    auto six = summarize({1, 2, 3, 4, 5, 6});
    CHECK(six.confidence == Approx(1 - 2.0 / 64));
    CHECK(six.low == 1);
    CHECK(six.high == 6);
}

TEST_CASE("report summary leaves out values that were not measured", "[report]") {
    auto s = summarize({1, std::nan(""), 3});
    CHECK(s.n == 2);
    CHECK(s.median == 2);
    auto none = summarize({});
    CHECK(none.n == 0);
    CHECK(std::isnan(none.median));
}

TEST_CASE("report Welch p-values match reference values", "[report]") {
    std::vector<double> a{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4};
    std::vector<double> b{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4};
    CHECK(detail::welch_p_value(a, b) == Approx(0.0213780014628670).margin(1e-6));
    CHECK(detail::welch_p_value({1, 2, 3}, {2, 3, 4, 5, 6}) == Approx(0.0718865965923056).margin(1e-6));
    CHECK(detail::welch_p_value({10.1, 10.3, 9.9, 10.0}, {10.2, 10.4, 10.1, 10.3}) ==
          Approx(0.156865184441975).margin(1e-6));
    CHECK(detail::welch_p_value({157.2e6, 150.1e6, 160.2e6}, {258.3e6, 250.0e6, 262.0e6}) ==
          Approx(3.30274127098263e-05).epsilon(1e-4));
    // Symmetric in its arguments.
    CHECK(detail::welch_p_value(b, a) == Approx(detail::welch_p_value(a, b)));
}

TEST_CASE("report difference of a lower-is-better metric that fell is better", "[report]") {
    std::vector<double> base{0.050, 0.051, 0.049}, other{0.040, 0.041, 0.039};
    auto d = difference(base, other, false);
    CHECK(d.delta == Approx(-0.2));
    CHECK(d.better);
    CHECK(d.significant);
    CHECK(d.p_value < 0.05);
    auto up = difference(base, other, true);  // the same change where higher is better
    CHECK(up.delta == Approx(-0.2));
    CHECK_FALSE(up.better);
    CHECK(up.significant);
}

TEST_CASE("report difference with one repeat a side is not significant and has no p-value", "[report]") {
    auto d = difference({100}, {200, 210}, true);
    CHECK(d.delta == Approx(1.05));
    CHECK(d.better);
    CHECK(std::isnan(d.p_value));
    CHECK_FALSE(d.significant);
}

TEST_CASE("report difference without spread on either side is significant when the means differ", "[report]") {
    auto d = difference({5, 5, 5}, {6, 6, 6}, true);
    CHECK(d.p_value == 0);
    CHECK(d.significant);
    auto same = difference({5, 5, 5}, {5, 5, 5}, true);
    CHECK(same.p_value == 1);
    CHECK_FALSE(same.significant);
    CHECK(same.delta == 0);
    CHECK_FALSE(same.better);
}

TEST_CASE("report difference from a zero baseline has no relative size", "[report]") {
    auto d = difference({0, 0, 0}, {3, 4, 5}, false);
    CHECK(std::isnan(d.delta));
    CHECK_FALSE(d.better);
    CHECK(d.significant);
}

TEST_CASE("report difference with a side not measured is empty", "[report]") {
    auto d = difference({}, {1, 2}, true);
    CHECK(std::isnan(d.delta));
    CHECK(std::isnan(d.p_value));
    CHECK_FALSE(d.significant);
}

namespace {

// One cell measured under an adaptive rule: `first` normal repeats of mean 100 and deviation
// 100 * cv, then as many as `stein` (Stein's rule) or a rule that stops once the running
// t-interval is narrow enough asks, at most `max`. Returns (all values, first stage).
std::pair<std::vector<double>, std::vector<double>> adaptive_cell(std::mt19937_64& rng, double cv, bool stein,
                                                                  std::size_t first, std::size_t max,
                                                                  double precision) {
    std::normal_distribution<double> draw(100, 100 * cv);
    std::vector<double> x;
    for (std::size_t i = 0; i < first; ++i) x.push_back(draw(rng));
    auto firsts = x;
    if (stein) {
        auto n = wanlab::probes::stats::stein_repeats(x, precision, max);
        while (x.size() < n) x.push_back(draw(rng));
        return {x, firsts};
    }
    while (x.size() < max) {
        double half = wanlab::probes::stats::student_t_critical(0.05, static_cast<double>(x.size() - 1)) *
                      wanlab::probes::stats::stdev(x) / std::sqrt(static_cast<double>(x.size()));
        if (half <= precision * wanlab::probes::stats::median(x)) break;
        x.push_back(draw(rng));
    }
    return {x, firsts};
}

}  // namespace

TEST_CASE("adaptive repeats keep Welch's false positives at 5%, where stopping on the running interval does not",
          "[report][repeats]") {
    // Two variants that do not differ, 3 first repeats, at most 10, precision 5%, at 5% and 10%
    // noise (where the count varies most). 4,000 pairs: the standard error of a 5% rate is 0.34%.
    std::mt19937_64 rng(24);
    for (double cv : {0.05, 0.10}) {
        int stein_positives = 0, naive_positives = 0, covered = 0;
        constexpr int kPairs = 4000;
        for (int i = 0; i < kPairs; ++i) {
            auto [a, a1] = adaptive_cell(rng, cv, true, 3, 10, 0.05);
            auto [b, b1] = adaptive_cell(rng, cv, true, 3, 10, 0.05);
            stein_positives += difference(a, b, true, a1, b1).significant;
            double half = wanlab::probes::stats::stein_half_width(a1, a.size());
            covered += std::fabs(wanlab::probes::stats::mean(a) - 100) <= half;
            auto [c, c1] = adaptive_cell(rng, cv, false, 3, 10, 0.05);
            auto [d, d1] = adaptive_cell(rng, cv, false, 3, 10, 0.05);
            naive_positives += difference(c, d, true).significant;
        }
        INFO("noise " << cv);
        CHECK(stein_positives / double(kPairs) <= 0.065);
        CHECK(stein_positives / double(kPairs) >= 0.02);   // a test, not a refusal to find anything
        CHECK(covered / double(kPairs) >= 0.93);           // Stein's interval keeps its 95%
        CHECK(naive_positives / double(kPairs) >= 0.075);  // why the runner does not stop that way
    }
}

TEST_CASE("report difference after adaptive repeats reads each side's first-stage variance", "[report][repeats]") {
    // The later repeats agree closely, the first ones did not: Welch on all ten values finds
    // the difference, the first stages' spread (the honest one after Stein's rule) does not.
    std::vector<double> a{95, 105, 100, 100.1, 99.9, 100, 100.1, 99.9, 100, 100};
    std::vector<double> b;
    for (double v : a) b.push_back(v + 3);
    CHECK(difference(a, b, true).significant);
    auto d = difference(a, b, true, {95, 105, 100}, {98, 108, 103});
    CHECK_FALSE(d.significant);
    CHECK(d.delta == Approx(0.03));
    // A metric quiet in its first repeats (retransmits: 0, 0, 0) takes the larger spread of all
    // its repeats instead of none at all.
    auto quiet = difference({0, 0, 0, 0, 3}, {0, 0, 0, 1, 0}, false, {0, 0, 0}, {0, 0, 0});
    CHECK_FALSE(quiet.significant);
    CHECK(quiet.p_value > 0.05);
}
