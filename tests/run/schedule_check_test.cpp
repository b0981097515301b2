// The emulation check of a changing link (run/schedule_check.h) on series whose truth the
// test knows: a rate step the link kept, one it overran, an outage that leaked, and RTTs
// shorter than the delay in force.
#include <catch2/catch.hpp>

#include "run/schedule_check.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;

namespace {

// 20 Mbit/s under tbf, 5 Mbit/s from 1 s, an outage of 1 s from 2 s: up and down alike.
netem::Schedule schedule_of() {
    auto l = testing::load(R"([link]
delay = "10ms"
rate = "20mbit"
shaper = "tbf"
[[link.schedule]]
at = "1s"
rate = "5mbit"
[[link.schedule]]
at = "2s"
outage = "1s"
[[probe]]
kind = "rtt"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    return l.exp->trials.at(0).schedule;
}

// The player's log: each change acknowledged 1 ms after its instant.
netem::PlayLog log_of(const netem::Schedule& s, double ended) {
    netem::PlayLog log;
    for (std::size_t i = 1; i < s.steps.size(); ++i) {
        double at = static_cast<double>(s.steps[i].at.count()) / 1e9;
        log.changes.push_back({i, at, at + 0.001, "both"});
    }
    log.ended = ended;
    return log;
}

// What left netem per 100 ms, `rate(t)` bit/s in the window ending at t.
probes::Series link(double until, const std::function<double(double)>& rate) {
    probes::Series s;
    for (int k = 1; k * 0.1 <= until + 1e-9; ++k) s.add(k * 0.1, rate(k * 0.1));
    return s;
}

}  // namespace

TEST_CASE("a link that carried what its schedule said holds, window by window", "[run][schedule]") {
    auto s = schedule_of();
    probes::SeriesMap series;
    series["qdisc.up.netem.throughput"] = link(4, [](double t) {
        return t <= 1 ? 19.9e6 : t <= 2 ? 5e6 : t <= 3 ? 0 : 5e6;
    });
    // RTTs of 20.4 ms outside the outage.
    probes::Series rtt;
    for (double t = 0; t < 4; t += 0.05)
        if (t < 1.98 || t > 3.02) rtt.add(t, 0.0204);
    series["rtt"] = rtt;
    auto c = run::check_schedule(s, log_of(s, 4), series, 1500);
    INFO(c.note);
    CHECK(c.held);
    CHECK(c.windows == 40);
    CHECK(c.rtts > 50);
}

TEST_CASE("a window above the rate in force, or an outage that leaks, fails the schedule", "[run][schedule]") {
    auto s = schedule_of();
    probes::SeriesMap series;
    // The step to 5 Mbit/s shows 300 ms late (netem's queue at the old rate), and the
    // outage passes 2 Mbit/s in its first window (a shaper's queue below netem draining).
    series["qdisc.up.netem.throughput"] = link(4, [](double t) {
        if (t <= 1.3) return 19.9e6;
        if (t <= 2) return 5e6;
        if (t <= 2.2 && t > 2.1) return 2e6;
        return t <= 3 ? 0.0 : 5e6;
    });
    auto c = run::check_schedule(s, log_of(s, 4), series, 1500);
    CHECK_FALSE(c.held);
    CHECK_THAT(c.note, Contains("4 of 40 windows carried more than the schedule allowed") &&
                           Contains("up carried 19.90 Mbit/s from 1.10 to 1.20 s, where the schedule allowed 5.00 "
                                    "Mbit/s"));
    // Within 10% and two frames of slack, a window holds.
    series["qdisc.up.netem.throughput"] = link(4, [](double t) {
        return t <= 1 ? 21.9e6 : t <= 2 ? 5.4e6 : t <= 3 ? 0.2e6 : 5e6;
    });
    c = run::check_schedule(s, log_of(s, 4), series, 1500);
    INFO(c.note);
    CHECK(c.held);
}

TEST_CASE("an RTT shorter than the delay in force, or a schedule that stopped, fails it", "[run][schedule]") {
    auto s = schedule_of();
    probes::SeriesMap series;
    probes::Series rtt;
    rtt.add(0.5, 0.0204);
    rtt.add(1.5, 0.0150);  // 15 ms where 20 ms of delay was in force
    series["rtt"] = rtt;
    auto c = run::check_schedule(s, log_of(s, 4), series, 1500);
    CHECK_FALSE(c.held);
    CHECK_THAT(c.note, Contains("1 of 2 RTT samples were shorter than the delay in force") &&
                           Contains("15.00 ms at 1.50 s, where 20.0 ms of delay was in force"));
    auto stopped = log_of(s, 4);
    stopped.error = "at 2s: the kernel refused the change (Invalid argument)";
    series["rtt"] = probes::Series{};
    c = run::check_schedule(s, stopped, series, 1500);
    CHECK_FALSE(c.held);
    CHECK_THAT(c.note, Contains("the schedule stopped at 2s: the kernel refused"));
}

TEST_CASE("a measurement under a schedule is summarised per entry: the outage and what follows are one phase",
          "[run][schedule]") {
    auto s = schedule_of();
    probes::SeriesMap series;
    series["throughput"] = link(4, [](double t) { return t <= 1 ? 20e6 : t <= 2 ? 5e6 : t <= 3 ? 0 : 4e6; });
    series["stream1.cwnd"] = link(4, [](double) { return 10; });  // per stream: not summarised
    auto phases = run::phases_of(s, log_of(s, 4), series);
    INFO(phases.dump());
    REQUIRE(phases.size() == 3);
    CHECK(phases[0]["entry"] == 0);
    CHECK(phases[0]["to"].get<double>() == Approx(1.001));
    CHECK(phases[0]["medians"]["throughput"].get<double>() == Approx(20e6));
    CHECK(phases[1]["entry"] == 1);
    CHECK(phases[1]["medians"]["throughput"].get<double>() == Approx(5e6));
    // Entry 2: its outage (0) and the link back (4 Mbit/s), 10 samples each: the median between.
    CHECK(phases[2]["entry"] == 2);
    CHECK(phases[2]["from"].get<double>() == Approx(2.001));
    CHECK(phases[2]["medians"]["throughput"].get<double>() == Approx(2e6));
    CHECK_FALSE(phases[2]["medians"].contains("stream1.cwnd"));
    // What the link allowed in each: the rate in force, time-weighted, an outage counting 0;
    // the phase's own delay both ways.
    CHECK(phases[0]["link"]["rate"].get<double>() == Approx(20e6));
    CHECK(phases[0]["link"]["outage"].get<double>() == 0);
    CHECK(phases[0]["link"]["rtt"].get<double>() == Approx(0.020));
    CHECK(phases[1]["link"]["rate"].get<double>() == Approx(5e6));
    CHECK(phases[2]["link"]["outage"].get<double>() == Approx(1.0));
    CHECK(phases[2]["link"]["rate"].get<double>() == Approx(5e6 * 0.999 / 1.999));
    // Over the whole measurement (to the throughput series' last sample, 4 s).
    auto whole = run::in_force_over(s, log_of(s, 4.5), series);
    CHECK(whole.rate == Approx((20e6 * 1.001 + 5e6 * 1.0 + 5e6 * 0.999) / 4));
    CHECK(whole.outage == Approx(1.0));
}

TEST_CASE("what a link allowed: the slowest direction, and nothing known where no rate held", "[run][schedule]") {
    auto l = testing::load(R"([link]
delay = "10ms"
up.rate = "10mbit"
down.rate = "40mbit"
[[link.schedule]]
at = "1s"
up.rate = "80mbit"
[[link.schedule]]
at = "2s"
up.delay = "50ms"
up.loss = "2%"
[[probe]]
kind = "rtt"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& s = l.exp->trials.at(0).schedule;
    netem::PlayLog log;
    log.changes = {{1, 1.0, 1.0, "up"}, {2, 2.0, 2.0, "up"}};
    log.ended = 3;
    // 10 Mbit/s (up the slower) for 1 s, then 40 (down the slower) for 2 s.
    auto f = run::in_force(s, log, 0, 3);
    CHECK(f.rate == Approx((10e6 + 2 * 40e6) / 3));
    CHECK(f.outage == 0);
    CHECK(f.rtt == Approx(0.060));  // the state at the end: 50 ms up, 10 ms down
    CHECK(f.loss == Approx(0.02));
    CHECK(run::in_force(s, log, 0, 1).rtt == Approx(0.020));
    auto unshaped = testing::load(R"([link]
delay = "10ms"
[[link.schedule]]
at = "1s"
delay = "30ms"
[[probe]]
kind = "rtt"
)");
    REQUIRE(unshaped.exp);
    netem::PlayLog l2;
    l2.changes = {{1, 1.0, 1.0, "both"}};
    CHECK(std::isnan(run::in_force(unshaped.exp->trials.at(0).schedule, l2, 0, 2).rate));
    CHECK_FALSE(run::to_json(run::in_force(unshaped.exp->trials.at(0).schedule, l2, 0, 2)).contains("rate"));
}
