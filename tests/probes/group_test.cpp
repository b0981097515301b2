// Probe groups without a network: Jain's index, which probes run together, run_together()'s
// release, failure and cancellation rules, the group's own record and its clock.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "probes/group.h"
#include "probes/sockets.h"

using namespace wanlab;
using namespace std::chrono_literals;
using probes::Clock;

namespace {

probes::ProbeSpec spec(const std::string& name, const std::string& kind, const std::string& group) {
    probes::ProbeSpec s;
    s.name = name;
    s.kind = kind;
    s.options["group"] = group;
    return s;
}

probes::ConnectionStats flow(double bps) {
    probes::ConnectionStats c;
    c.direction = "upload";
    c.values["throughput"] = bps;
    return c;
}

// A job that measures until cancelled or until `for_how_long`, noting when it began.
probes::GroupJob timed_job(std::atomic<std::int64_t>& began_ns, Clock::duration for_how_long) {
    return [&began_ns, for_how_long](const probes::Tick& tick) {
        auto start = Clock::now();
        began_ns = start.time_since_epoch().count();
        probes::sleep_until(start + for_how_long, tick);
        probes::ProbeResult r;
        r.began = start;
        r.series["rtt"].add(0.5, 0.04);
        return r;
    };
}

}  // namespace

TEST_CASE("Jain's index is 1 for equal shares, 1/n when one flow has everything, NaN without data", "[probes]") {
    CHECK(probes::jain_index({5, 5, 5, 5}) == Approx(1));
    CHECK(probes::jain_index({9, 0, 0}) == Approx(1.0 / 3));
    CHECK(probes::jain_index({1, 3}) == Approx(16.0 / 20));  // (1+3)^2 / (2 (1+9))
    CHECK(std::isnan(probes::jain_index({})));
    CHECK(std::isnan(probes::jain_index({0, 0})));
    CHECK(std::isnan(probes::jain_index({1, -1})));
    CHECK(std::isnan(probes::jain_index({1, std::nan("")})));
    probes::ProbeResult one;
    one.connections = {flow(10e6)};
    CHECK(std::isnan(probes::flow_fairness(one)));  // one flow has no fairness to speak of
    one.connections.push_back(flow(30e6));
    CHECK(probes::flow_fairness(one) == Approx(0.8));
}

TEST_CASE("probes sharing a group run as one, where its first probe stands, the others alone", "[probes]") {
    std::vector<probes::ProbeSpec> all{spec("idle", "rtt", ""), spec("up", "throughput", "load"),
                                       spec("alone", "rr", ""), spec("ping", "rtt", "load")};
    auto groups = probes::probe_groups(all);
    REQUIRE(groups.size() == 3);
    CHECK(groups[0].name.empty());
    CHECK(groups[0].members.front()->name == "idle");
    CHECK(groups[1].name == "load");
    REQUIRE(groups[1].members.size() == 2);
    CHECK(groups[1].members[0]->name == "up");
    CHECK(groups[1].members[1]->name == "ping");
    CHECK(groups[2].members.front()->name == "alone");
    auto named = probes::with_group_records(all);
    REQUIRE(named.size() == 5);
    CHECK(named.back().name == "load");
    CHECK(named.back().kind == "group");
    CHECK(probes::find_metric(*probes::find_kind("group"), "fairness"));
}

TEST_CASE("run_together releases every job at once: each began before any ended", "[probes]") {
    std::atomic<std::int64_t> a{0}, b{0}, c{0};
    int ticks = 0;
    auto out = probes::run_together({timed_job(a, 300ms), timed_job(b, 300ms), timed_job(c, 300ms)}, [&] { ++ticks; });
    REQUIRE(out.size() == 3);
    auto latest_start = std::max({a.load(), b.load(), c.load()});
    auto released = out[0].released.time_since_epoch().count();
    for (const auto& o : out) {
        REQUIRE(o.result);
        CHECK(o.released == out[0].released);
        // Each ended 300 ms after its own start: after the last of them had started.
        CHECK(o.result->began->time_since_epoch().count() + std::chrono::nanoseconds(300ms).count() > latest_start);
        CHECK(o.result->began->time_since_epoch().count() >= released);
    }
    CHECK(ticks >= 1);  // the calling thread's tick ran while they did
}

TEST_CASE("a member's MeasurementError is its own outcome and the others measure", "[probes]") {
    std::atomic<std::int64_t> a{0};
    auto out = probes::run_together({timed_job(a, 100ms),
                                     [](const probes::Tick&) -> probes::ProbeResult {
                                         throw probes::MeasurementError("iperf3: the server is busy");
                                     }},
                                    {});
    REQUIRE(out.size() == 2);
    CHECK(out[0].result);
    CHECK_FALSE(out[1].result);
    CHECK(out[1].error == "iperf3: the server is busy");
}

TEST_CASE("a member's failure cancels the others and is rethrown, not their cancellation", "[probes]") {
    std::atomic<std::int64_t> a{0};
    auto start = Clock::now();
    CHECK_THROWS_WITH(probes::run_together({timed_job(a, 1h),
                                            [](const probes::Tick&) -> probes::ProbeResult {
                                                std::this_thread::sleep_for(20ms);
                                                throw Error("the probe server at 198.18.0.2:5201 refused");
                                            }},
                                           {}),
                      "the probe server at 198.18.0.2:5201 refused");
    CHECK(Clock::now() - start < 1h);  // the hour-long member was cancelled, not waited for
}

TEST_CASE("a tick that throws on the calling thread (Ctrl-C) stops every member and is rethrown", "[probes]") {
    std::atomic<std::int64_t> a{0}, b{0};
    int ticks = 0;
    auto tick = [&] {
        if (++ticks == 3) throw std::runtime_error("interrupted");
    };
    CHECK_THROWS_WITH(probes::run_together({timed_job(a, 1h), timed_job(b, 1h)}, tick), "interrupted");
    CHECK(ticks == 3);
}

TEST_CASE("a group's record: fairness over every flow, summed goodput, members' series on its clock", "[probes]") {
    auto up = spec("up", "throughput", "load"), down = spec("down", "throughput", "load"),
         ping = spec("ping", "rtt", "load"), web = spec("web", "http", "load");
    probes::ProbeResult a, b, p;
    a.metrics["throughput"] = 30e6;
    a.connections = {flow(10e6), flow(20e6)};
    a.series["throughput"].add(1, 30e6);
    a.series["stream1.cwnd"].add(1, 10);  // a stream's own series stays with its probe
    b.metrics["throughput"] = 10e6;
    b.connections = {flow(10e6)};
    p.series["rtt"].add(0.25, 0.6);
    auto zero = Clock::now();
    p.began = zero + 100ms;
    probes::align_series(p, zero);
    CHECK(p.series["rtt"].t.front() == Approx(0.35));
    auto g = probes::group_result({{&up, a, ""}, {&down, b, ""}, {&ping, p, ""}, {&web, std::nullopt, "refused"}});
    CHECK(g.kind == "group");
    CHECK(g.metrics.at("throughput") == Approx(40e6));
    CHECK(g.metrics.at("flows") == 3);
    CHECK(g.metrics.at("members") == 3);
    CHECK(g.metrics.at("fairness") == Approx(1600.0 / (3 * 600)));  // (10+20+10)^2 / (3 (100+400+100))
    CHECK(g.series.count("up.throughput"));
    CHECK(g.series.count("ping.rtt"));
    CHECK(g.series.at("ping.rtt").t.front() == Approx(0.35));
    CHECK_FALSE(g.series.count("up.stream1.cwnd"));
    REQUIRE(g.notes.size() == 1);
    CHECK(g.notes[0] == "member web: no measurement: refused");
    // A group without throughput probes reports no goodput, flows or fairness.
    auto latency_only = probes::group_result({{&ping, p, ""}, {&web, p, ""}});
    CHECK_FALSE(latency_only.metrics.count("fairness"));
    CHECK_FALSE(latency_only.metrics.count("throughput"));
    CHECK(latency_only.metrics.at("members") == 2);
}
