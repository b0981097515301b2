// The udp probe's arithmetic without a network: what the receiver counts (RFC 3550 jitter,
// reordering, duplicates), the loss's Wilson interval, and iperf3 -u's JSON read into the
// same metrics.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "probes/external.h"
#include "probes/stats.h"
#include "probes/udp.h"
#include "tests/support/probe_helper.h"

using namespace wanlab::probes;

namespace {

std::string fixture(const std::string& name) {
    std::ifstream in(std::string(WANLAB_PROBE_FIXTURES) + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("the udp tally follows RFC 3550's jitter and counts reordered and duplicate datagrams", "[probes]") {
    UdpTally t;
    // Sent every 10 ms; transit 20 ms, then 25 ms, then 20 ms: |D| = 5 ms twice.
    t.add(0, 0, 20'000'000, 100);
    t.add(1, 10'000'000, 35'000'000, 100);
    t.add(2, 20'000'000, 40'000'000, 100);
    CHECK(t.jitter == Approx(0.005 / 16 + (0.005 - 0.005 / 16) / 16));
    t.add(4, 40'000'000, 60'000'000, 100);
    t.add(3, 30'000'000, 61'000'000, 100);  // after 4: reordered
    t.add(3, 30'000'000, 62'000'000, 100);  // again: a duplicate, counted once
    CHECK(t.received == 5);
    CHECK(t.reordered == 1);
    CHECK(t.duplicates == 1);
    CHECK(t.bytes == 500);
    CHECK(t.delays.size() == 5);
    CHECK(t.delays.front() == Approx(0.020));

    ProbeResult r;
    udp_metrics(r, t, 6, 0.05, true);
    CHECK(r.metrics.at("loss") == Approx(1.0 / 6));
    CHECK(r.metrics.at("reordered") == Approx(0.2));
    CHECK(r.metrics.at("throughput") == Approx(500 * 8 / 0.05));
    CHECK(r.metrics.at("delay_min") == Approx(0.020));
    ProbeResult other_clocks;
    udp_metrics(other_clocks, t, 6, 0.05, false);
    CHECK_FALSE(other_clocks.metrics.count("delay_p50"));  // two clocks: no one-way delay
}

TEST_CASE("the loss's 99% Wilson interval holds the rate it was drawn from and never leaves 0..1", "[probes]") {
    // 171 of 8562 lost (2.0%): the interval is about 1.6% to 2.4%.
    using wanlab::probes::stats::wilson_interval;
    CHECK(wilson_interval(171, 8562, kZ99).low == Approx(0.0162).margin(0.0005));
    CHECK(wilson_interval(171, 8562, kZ99).high == Approx(0.0246).margin(0.0005));
    CHECK(wilson_interval(0, 2083, kZ99).low == 0);
    CHECK(wilson_interval(0, 2083, kZ99).high == Approx(kZ99 * kZ99 / (2083 + kZ99 * kZ99)).epsilon(0.01));
    CHECK(wilson_interval(10, 10, kZ99).high == Approx(1));
    CHECK(std::isnan(wilson_interval(0, 0, kZ99).low));
}

TEST_CASE("iperf3 -u's JSON gives the udp metrics from its receiver's report", "[probes][external]") {
    auto r = parse_iperf3_udp_json(fixture("iperf3-udp.json"));  // 1 Mbit/s over loopback, 1 s
    CHECK(r.kind == "udp");
    CHECK(r.tool == "iperf3");
    CHECK(r.metrics.at("sent") == 86);
    CHECK(r.metrics.at("received") == 86);
    CHECK(r.metrics.at("loss") == 0);
    CHECK(r.metrics.at("throughput") == Approx(1000319.67));
    CHECK(r.metrics.at("jitter") == Approx(0.0002870307));
    CHECK(r.series.at("throughput").size() == 2);
    // With loss and reordering, as the receiver counts them.
    auto j = nlohmann::json::parse(fixture("iperf3-udp.json"));
    j["end"]["sum_received"]["lost_packets"] = 2;
    j["end"]["streams"][0]["udp"]["out_of_order"] = 3;
    auto lossy = parse_iperf3_udp_json(j.dump());
    CHECK(lossy.metrics.at("loss") == Approx(2.0 / 86));
    CHECK(lossy.metrics.at("received") == 84);
    CHECK(lossy.metrics.at("reordered") == Approx(3.0 / 84));
    CHECK(lossy.metrics.at("loss_low") < 2.0 / 86);
    CHECK(lossy.metrics.at("loss_high") > 2.0 / 86);
    CHECK_THROWS_WITH(parse_iperf3_udp_json(R"({"error": "unable to connect to server"})"),
                      "iperf3: unable to connect to server");
}

TEST_CASE("a datagram numbered beyond any stream is ignored, not a 2^63-entry table", "[probes]") {
    UdpTally t;
    t.add(std::uint64_t{1} << 62, 0, 1'000'000, 100);
    t.add(0, 0, 1'000'000, 100);
    CHECK(t.received == 1);
    CHECK(t.foreign == 1);
    CHECK(t.reordered == 0);
}

TEST_CASE("a udp pace far beyond what the socket takes still ends at its duration", "[probes][security]") {
    // The catch-up burst once sent every overdue datagram in one loop with no look at the
    // clock: a rate no socket carries made a 1 s probe one that never ended.
    const wanlab::probes::Endpoints loopback{{"", "127.0.0.1", 0}, {"", "", 0}};
    auto r = wanlab::probes::make_probe(wanlab::testing::probe_of("udp", "rate = \"100gbit\"\nduration = \"300ms\"\n"))
                 ->run(loopback, {});
    CHECK(r.metrics.at("sent") > 0);
    CHECK(r.metrics.at("received") <= r.metrics.at("sent"));
}
