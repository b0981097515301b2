#include <catch2/catch.hpp>

#include <cmath>

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

TEST_CASE("report incomplete beta matches closed forms", "[report]") {
    CHECK(detail::incomplete_beta(3, 3, 0.5) == Approx(0.5));
    CHECK(detail::incomplete_beta(1, 1, 0.3) == Approx(0.3));
    CHECK(detail::incomplete_beta(2.5, 1, 0.4) == Approx(std::pow(0.4, 2.5)));
    CHECK(detail::incomplete_beta(1, 4, 0.2) == Approx(1 - std::pow(0.8, 4)));
    CHECK(detail::incomplete_beta(2, 3, 0) == 0);
    CHECK(detail::incomplete_beta(2, 3, 1) == 1);
}

// References: the two-sided tail of Student's t integrated numerically with mpmath at 30
// digits (an independent route from the incomplete beta used here); the first pair is
// Wikipedia's Welch example (t = -2.46, df = 24.99, p = 0.021).
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
