// Every diagnosis rule on evidence recorded from runs (the numbers in comments are the runs').
#include <catch2/catch.hpp>

#include "diagnosis/rules.h"

using namespace wanlab::diagnosis;
using Catch::Matchers::Contains;

namespace {

// Modelled on examples/nginx-delayed-ack.toml in the micro-VM, variant "stall": 2 connections
// over 2 ms, 52.6 ms per request and 76 requests per 2 s repeat as measured; the delayed ACKs
// as the host kernel's bare-veth run counted them (0.98 per transaction).
Evidence nginx_stall() {
    Evidence e;
    e.kind = "http";
    e.rtt_configured = 0.002;
    e.latency_mean = 0.0526;
    e.transactions = 76;
    e.client_delayed_acks = 75;
    return e;
}

// iperf3 (autotuning) across 45 ms at 200 Mbit/s: 180 Mbit/s whatever rmem_max was.
Evidence iperf3_rate_bound() {
    Evidence e;
    e.kind = "throughput";
    e.rtt_configured = 0.045;
    e.rate_configured = 200e6;
    e.throughput = 180e6;
    e.srtt = 0.052;
    e.min_rtt = 0.045;
    return e;
}

}  // namespace

TEST_CASE("delayed-ack stall: 40 ms over the path and one timer-fired ACK per request", "[diagnosis]") {
    auto v = delayed_ack_stall(nginx_stall());
    REQUIRE(v);
    CHECK(v->rule == "delayed-ack-stall");
    CHECK_THAT(v->text, Contains("52.60 ms") && Contains("50.60 ms more than the path's RTT (2.00 ms)") &&
                            Contains("fired 75 times for 76 requests") && Contains("0.99 per request") &&
                            Contains("TCP_NODELAY on the server") && Contains("TCP_QUICKACK on the client"));
    // A client that already quick-acks: quick-ack is no advice.
    auto quick = nginx_stall();
    quick.client_quickack = true;
    CHECK_THAT(delayed_ack_stall(quick)->text, !Contains("TCP_QUICKACK"));
}

TEST_CASE("delayed-ack stall: not without its evidence", "[diagnosis]") {
    // tcp_nodelay on: 4.1 ms per request, the timer never waited on.
    auto cured = nginx_stall();
    cured.latency_mean = 0.0041;
    cured.transactions = 900;
    cured.client_delayed_acks = 3;
    CHECK_FALSE(delayed_ack_stall(cured));
    // Slow for another reason (a 45 ms server), with few delayed ACKs.
    auto slow = nginx_stall();
    slow.client_delayed_acks = 10;
    CHECK_FALSE(delayed_ack_stall(slow));
    // No counters recorded (an older run): no verdict from latency alone.
    auto old = nginx_stall();
    old.client_delayed_acks = kUnknown;
    CHECK_FALSE(delayed_ack_stall(old));
    // A bulk probe is never judged by this rule.
    auto bulk = nginx_stall();
    bulk.kind = "throughput";
    CHECK_FALSE(delayed_ack_stall(bulk));
    // The path itself is 40 ms: that is the RTT, not a stall.
    auto far = nginx_stall();
    far.rtt_configured = 0.045;
    far.latency_mean = 0.047;
    CHECK_FALSE(delayed_ack_stall(far));
}

TEST_CASE("rate-bound: goodput near the configured rate, and no buffer can raise it", "[diagnosis]") {
    auto v = rate_bound(iperf3_rate_bound());
    REQUIRE(v);
    CHECK_THAT(v->text, Contains("180.00 Mbit/s of the configured 200.00 Mbit/s (90%)") && Contains("cannot raise it"));
    auto window = iperf3_rate_bound();
    window.throughput = 37e6;  // window-bound: far below the rate
    CHECK_FALSE(rate_bound(window));
    auto bare = iperf3_rate_bound();
    bare.rate_configured = kUnknown;
    CHECK_FALSE(rate_bound(bare));
}

TEST_CASE("loss-bound: near Mathis's MSS / (RTT x sqrt(p)) for a loss-based stream", "[diagnosis]") {
    // examples/cc-compare.toml at 1% loss and 40 ms: cubic 5.3 Mbit/s, bbr 37.6 Mbit/s.
    Evidence e;
    e.kind = "throughput";
    e.rtt_configured = 0.040;
    e.rate_configured = 100e6;
    e.loss_configured = 0.01;
    e.mss = 1448;
    e.throughput = 5.3e6;
    e.congestion_control = "cubic";
    auto v = loss_bound(e);
    REQUIRE(v);
    // 1448 x 8 / 0.04 x 1.2247 / 0.1 = 3.547 Mbit/s.
    CHECK_THAT(v->text, Contains("about 3.55 Mbit/s") && Contains("measured 5.30 Mbit/s (1.5x)") && Contains("bbr"));
    e.congestion_control = "bbr";
    e.throughput = 37.6e6;  // 10.6x: bbr does not follow the loss law
    CHECK_FALSE(loss_bound(e));
    e.loss_configured = kUnknown;
    CHECK_FALSE(loss_bound(e));
}

TEST_CASE("bufferbloat: the RTT under load far above the path's", "[diagnosis]") {
    // examples/bufferbloat.toml: a 1000-packet FIFO at 20 Mbit/s, 20 ms path, 257 ms loaded.
    Evidence e;
    e.kind = "throughput";
    e.rtt_configured = 0.020;
    e.rate_configured = 20e6;
    e.throughput = 19.1e6;
    e.srtt = 0.257;
    auto v = bufferbloat(e);
    REQUIRE(v);
    CHECK_THAT(v->text, Contains("257.00 ms against the path's 20.00 ms") && Contains("queue of 237.00 ms") &&
                            Contains("fq_codel"));
    e.srtt = 0.0284;  // fq_codel: 28.4 ms
    CHECK_FALSE(bufferbloat(e));
    // Without a configured rate the queue is not wanlab's: the verdict, no advice.
    e.srtt = 0.257;
    e.rate_configured = kUnknown;
    CHECK_THAT(bufferbloat(e)->text, !Contains("fq_codel"));
}

TEST_CASE("cpu-bound: a CPU near 100% during the measurement", "[diagnosis]") {
    Evidence e;
    e.cpu_busiest = 0.97;
    REQUIRE(cpu_bound(e));
    CHECK_THAT(cpu_bound(e)->text, Contains("97%"));
    e.cpu_busiest = 0.6;
    CHECK_FALSE(cpu_bound(e));
    e.cpu_busiest = kUnknown;
    CHECK_FALSE(cpu_bound(e));
}

TEST_CASE("path_rtt is the configured RTT, else TCP's minimum, never the smoothed one", "[diagnosis]") {
    Evidence e;
    e.srtt = 0.00315;
    CHECK(std::isnan(path_rtt(e)));
    e.min_rtt = 0.00005;
    CHECK(path_rtt(e) == 0.00005);
    e.rtt_configured = 0.04;
    CHECK(path_rtt(e) == 0.04);
}

TEST_CASE("diagnose: the rate-bound iperf3 case gets its verdict and nothing about buffers", "[diagnosis]") {
    auto all = diagnose(iperf3_rate_bound());
    REQUIRE(all.size() == 1);
    CHECK(all[0].rule == "rate-bound");
}
