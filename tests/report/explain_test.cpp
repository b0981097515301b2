#include <catch2/catch.hpp>

#include <algorithm>

#include "report/report.h"
#include "tests/report/fixtures.h"

using namespace wanlab;
using namespace wanlab::report;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> containing(const std::vector<std::string>& lines, const std::string& part) {
    std::vector<std::string> out;
    std::copy_if(lines.begin(), lines.end(), std::back_inserter(out),
                 [&part](const std::string& l) { return l.find(part) != std::string::npos; });
    return out;
}

}  // namespace

TEST_CASE("report explains a receive-window limited stream with its buffer's cap at the trial's RTT", "[report]") {
    auto d = fixtures::buffer_sweep();
    // As the kernel allows: half of a 416 KiB buffer per round trip.
    for (auto& m : d.measurements)
        if (m.trial == 1 || m.trial == 3) m.metrics["throughput"] = m.trial == 1 ? 80e6 : 41e6;
    auto lines = explain(d);
    auto rwnd = containing(lines, "receive-window limited");
    REQUIRE(rwnd.size() == 2);  // the default buffers at both RTTs; the large ones are not limited
    // Half of 425984 bytes is window: 212992 x 8 / 40 ms = 42.5984 Mbit/s.
    CHECK(rwnd[1] ==
          "bulk, default-buffers @ link.rtt=40ms: receive-window limited 92% of the time: a receive buffer of "
          "416 KiB (about 208 KiB of window) caps one stream near 42.60 Mbit/s at this RTT (40.00 ms); measured "
          "41.00 Mbit/s [! emulation did not hold in this trial]");
    CHECK_THAT(rwnd[0], Contains("link.rtt=20ms") && Contains("80% of the time") && Contains("near 85.20 Mbit/s"));
    CHECK(containing(lines, "send-buffer limited").empty());
}

TEST_CASE("report never names a buffer cap the measurement exceeds", "[report]") {
    // The fixture's default buffers carry 170 Mbit/s at 20 ms, twice the 85 Mbit/s a 416 KiB
    // buffer allows: the limited share is a fact, the cap would be refuted by the measurement.
    auto rwnd = containing(explain(fixtures::buffer_sweep()), "receive-window limited");
    REQUIRE(rwnd.size() == 2);
    CHECK(rwnd[0] ==
          "bulk, default-buffers @ link.rtt=20ms: receive-window limited 80% of the time; measured "
          "170.00 Mbit/s");
    CHECK_THAT(rwnd[1], !Contains("caps one stream"));
}

TEST_CASE("report takes the path's RTT from TCP's minimum, never from the RTT under load", "[report]") {
    // A bare path: no configured RTT; srtt 3.15 ms under load, min_rtt 0.05 ms.
    auto d = fixtures::buffer_sweep();
    for (auto& t : d.trials) t.link_rtt = results::kNaN, t.link_rate = results::kNaN;
    for (auto& m : d.measurements) {
        m.metrics["throughput"] = 2.13e9;
        m.connections[0]["values"]["rtt"] = 0.00315;
        m.connections[0]["values"]["min_rtt"] = 0.00005;
    }
    auto rwnd = containing(explain(d), "receive-window limited");
    REQUIRE_FALSE(rwnd.empty());
    for (const auto& l : rwnd) {
        CHECK_THAT(l, !Contains("3.15 ms"));
        CHECK_THAT(l, Contains("minimum measured"));  // the cap, if named, is at the path's own RTT
    }
}

TEST_CASE("report gives bandwidth-delay advice for 500 Mbit/s x 40 ms with rmem_max 212992", "[report]") {
    auto lines = explain(fixtures::buffer_sweep());
    auto advice = containing(lines, "default-buffers @ link.rtt=40ms: bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    const auto& a = advice[0];
    // BDP = 500e6 x 0.04 / 8 = 2.5 MB; 2 x BDP = 5 MB; the next power of two is 8 MiB.
    CHECK_THAT(a, Contains("500.00 Mbit/s x 40.00 ms = 2.4 MiB (2500000 bytes)"));
    // The probe asked for SO_RCVBUF (rmem_max caps it, autotuning is off) and left the send
    // buffer to autotuning (tcp_wmem caps it, wmem_max does not): only those two are named.
    CHECK_THAT(a, Contains("below the BDP: net.core.rmem_max = 212992 (208 KiB)"));
    CHECK_THAT(a, !Contains("net.core.wmem_max"));
    CHECK_THAT(a, Contains("below 2 x BDP (the kernel keeps about half of a buffer for overhead): "
                           "net.ipv4.tcp_wmem max = 4194304 (4 MiB)"));
    CHECK_THAT(a, Contains("set net.core.rmem_max=8388608, net.ipv4.tcp_wmem=\"4096 16384 8388608\" (8 MiB"));
    // tcp_rmem's maximum does not cap an explicit SO_RCVBUF: not named.
    CHECK_THAT(a, !Contains("tcp_rmem max"));
    // At 20 ms, 2 x BDP = 2.5 MB: only rmem_max is short, 4 MiB is enough.
    auto at20 = containing(lines, "default-buffers @ link.rtt=20ms: bandwidth-delay product");
    REQUIRE(at20.size() == 1);
    CHECK_THAT(at20[0], Contains("set net.core.rmem_max=4194304 (4 MiB"));
    CHECK(containing(lines, "large-buffers: bandwidth-delay").empty());
}

TEST_CASE("report says nothing the data does not support", "[report]") {
    auto d = fixtures::buffer_sweep();
    for (auto& t : d.trials) t.link_rate = results::kNaN;  // no rate: no bandwidth-delay product
    for (auto& m : d.measurements) {
        m.metrics["rwnd_limited"] = 0.3;  // limited a minority of the time
        m.connections = nlohmann::json::array();
    }
    // Only the emulation check that failed in trial 3, which the data does show.
    auto lines = explain(d);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Contains("emulation did not hold: rtt 52.1 ms for 40 ms configured"));
    d.trials[2].check.held = true;
    CHECK(explain(d).empty());
}

TEST_CASE("report names tcp_rmem and never rmem_max for a probe that asked for no buffer", "[report]") {
    auto d = fixtures::buffer_sweep();
    for (auto& m : d.measurements) m.notes = {probes::kRcvbufAutotuned, probes::kSndbufAutotuned};
    auto advice = containing(explain(d), "default-buffers @ link.rtt=40ms: bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    // 6 MiB is above 2 x BDP (5 MB): tcp_rmem is fine, tcp_wmem's 4 MiB is short; the core
    // maxima cannot change an autotuned buffer, so no advice to raise them.
    CHECK_THAT(advice[0], Contains("net.ipv4.tcp_wmem max = 4194304 (4 MiB)"));
    CHECK_THAT(advice[0], !Contains("net.core.rmem_max") && !Contains("net.core.wmem_max="));
    CHECK_THAT(advice[0], Contains("rmem_max/wmem_max would not change it"));
}

TEST_CASE("report advises on a per-host buffer only where that host receives or sends", "[report]") {
    auto d = fixtures::buffer_sweep();
    for (auto& m : d.measurements) m.notes = {probes::kRcvbufAutotuned, probes::kSndbufAutotuned};
    d.trials.resize(1);  // default-buffers @ 20ms, upload: the server receives, the client sends
    d.trials[0].sysctls = {{"client:net.ipv4.tcp_rmem", "4096 131072 1048576"},
                           {"server:net.ipv4.tcp_rmem", "4096 131072 1048576"},
                           {"net.core.rmem_max", "8388608"},
                           {"net.core.wmem_max", "8388608"},
                           {"net.ipv4.tcp_wmem", "4096 16384 8388608"}};
    auto advice = containing(explain(d), "bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    CHECK_THAT(advice[0], Contains("net.ipv4.tcp_rmem max on server = 1048576 (1 MiB)"));
    CHECK_THAT(advice[0], Contains("net.ipv4.tcp_rmem=\"4096 131072 4194304\" on server"));
    CHECK_THAT(advice[0], !Contains("on client"));
    CHECK_THAT(advice[0], !Contains("SO_RCVBUF"));  // no core maximum named
}

TEST_CASE("report falls back to the host's sysctls before the run for keys a trial did not set", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.trials.resize(1);
    d.trials[0].sysctls.clear();
    d.run.env.sysctls_before = {{"net.core.rmem_max", "212992"}, {"net.ipv4.tcp_rmem", "4096\t131072\t6291456"}};
    auto advice = containing(explain(d), "bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    CHECK_THAT(advice[0], Contains("net.core.rmem_max = 212992 (208 KiB) before the run"));
}

TEST_CASE("report gives a rate-bound trial its verdict and no buffer advice", "[report]") {
    // iperf3 (autotuning) across 45 ms at 200 Mbit/s carried 180 Mbit/s whatever rmem_max was.
    auto d = fixtures::buffer_sweep();
    d.trials[2].link_rate = 90e6;  // default-buffers @ 40ms carried 85 Mbit/s
    d.trials[2].check.held = true;
    auto lines = explain(d);
    CHECK(containing(lines, "default-buffers @ link.rtt=40ms: bandwidth-delay product").empty());
    auto bound = containing(lines, "rate-bound");
    REQUIRE(bound.size() == 1);
    CHECK_THAT(bound[0], Contains("bulk, default-buffers @ link.rtt=40ms: rate-bound: 85.00 Mbit/s of the configured "
                                  "90.00 Mbit/s (94%)"));
    CHECK(containing(lines, "default-buffers @ link.rtt=20ms: bandwidth-delay product").size() == 1);
}

TEST_CASE("report names the delayed-ACK stall from an http probe's latency and the client's counters", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.measurements.clear();
    d.trials[0].link_rtt = 0.0015;  // the source's path
    d.trials[0].sweep.clear();
    for (unsigned r = 1; r <= 3; ++r) {
        results::Measurement m;
        m.trial = 1;
        m.probe = "web";
        m.kind = "http";
        m.tool = "wrk";
        m.repeat = r;
        m.metrics = {{"latency_mean", 0.0435}, {"requests", 4554}, {"requests_per_second", 2277}};
        m.counters = {{"client", {{"TcpExt.DelayedACKs", 4500 + r}}}, {"server", {{"Tcp.InSegs", 9000}}}};
        d.measurements.push_back(m);
        m.trial = 2;  // tcp_nodelay on: 1.9 ms, the timer never fired
        m.metrics = {{"latency_mean", 0.0019}, {"requests", 110746}, {"requests_per_second", 55373}};
        m.counters = {{"client", {{"Tcp.InSegs", 200000}}}};
        d.measurements.push_back(m);
    }
    auto lines = containing(explain(d), "delayed-ACK stall");
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Contains("web, default-buffers: delayed-ACK stall: a request took 43.50 ms") &&
                             Contains("fired 4502 times for 4554 requests"));
}

TEST_CASE("report does not advise quick-ack to a client that already quick-acks", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.measurements.clear();
    d.trials[0].link_rtt = 0.002;
    results::Measurement m;
    m.trial = 1;
    m.probe = "rr";
    m.kind = "rr";
    m.tool = "builtin";
    m.repeat = 1;
    m.metrics = {{"latency_mean", 0.044}, {"transactions", 45}};
    m.counters = {{"client", {{"TcpExt.DelayedACKs", 44}}}};
    d.measurements.push_back(m);
    auto stall = containing(explain(d), "delayed-ACK stall");
    REQUIRE(stall.size() == 1);
    CHECK_THAT(stall[0], Contains("TCP_QUICKACK on the client"));
    d.measurements[0].notes.push_back(probes::kClientQuickackNote);
    stall = containing(explain(d), "delayed-ACK stall");
    REQUIRE(stall.size() == 1);
    CHECK_THAT(stall[0], !Contains("TCP_QUICKACK"));
}

TEST_CASE("report names a queue overflow from the link's qdisc counters, per direction", "[report]") {
    // tests/vm/run/evidence.toml's "short-limit" trial: netem at 20 Mbit/s, limit 20 packets.
    auto d = fixtures::buffer_sweep();
    d.trials[0].link_rate = 20e6;
    d.trials[0].link_loss = 0;
    d.trials[0].link_loss_down = 0;
    for (auto& m : d.measurements) {
        if (m.trial != 1) continue;
        m.metrics["throughput"] = 5.11e6;
        m.counters["qdisc"] = {{"up.netem.sent_packets", 2062},
                               {"up.netem.drops", 76},
                               {"up.netem.limit", 20},
                               {"up.netem.qlen_peak", 20},
                               {"down.netem.sent_packets", 1160},
                               {"down.netem.drops", 0},
                               {"down.netem.limit", 20}};
    }
    auto lines = containing(explain(d), "queue overflow");
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Contains("bulk, default-buffers @ link.rtt=20ms: queue overflow (up): netem dropped 76 of "
                                  "2138 packets: its queue limit of 20 packets was reached (peak 20 queued") &&
                             Contains("Raise [link] limit above"));
    // A run recorded before wanlab read the link's qdiscs: no such counters, no verdict.
    for (auto& m : d.measurements) m.counters.erase("qdisc");
    CHECK(containing(explain(d), "queue overflow").empty());
}

namespace {

// examples/buffer-sweep.toml's large-buffers at 40 ms, as the main example's report saw it:
// 100 Mbit/s with netem's own 1000-packet limit, the link full, 13 drops of 84,392 packets at
// the limit and a standing queue behind them (srtt 121 ms on the 40 ms path).
results::RunData large_buffers_full_link() {
    auto d = fixtures::buffer_sweep();
    auto& t = d.trials[3];
    t.link_rate = 100e6;
    t.link_loss = 0;
    t.link_loss_down = 0;
    for (auto& m : d.measurements) {
        if (m.trial != 4) continue;
        m.metrics["throughput"] = 94.1e6;
        m.connections[0]["values"]["throughput"] = 94.1e6;
        m.connections[0]["values"]["rtt"] = 0.121;
        m.connections[0]["values"]["min_rtt"] = 0.0401;
        m.counters["qdisc"] = {{"up.netem.sent_packets", 84379},   {"up.netem.drops", 13},
                               {"up.netem.limit", 1000},           {"up.netem.qlen_peak", 1000},
                               {"down.netem.sent_packets", 42210}, {"down.netem.drops", 0},
                               {"down.netem.limit", 1000}};
    }
    return d;
}

}  // namespace

TEST_CASE("report gives one verdict per measurement: the binding cause first, the rest also observed", "[report]") {
    auto lines = containing(explain(large_buffers_full_link()), "bulk, large-buffers @ link.rtt=40ms");
    REQUIRE(lines.size() == 3);
    CHECK_THAT(lines[0], Contains("bulk, large-buffers @ link.rtt=40ms: rate-bound: 94.10 Mbit/s of the configured "
                                  "100.00 Mbit/s (94%)"));
    CHECK_THAT(lines[1], Contains("bulk, large-buffers @ link.rtt=40ms, also observed: queue overflow (up): netem "
                                  "dropped 13 of 84392 packets") &&
                             Contains("cost no throughput") && !Contains("Raise"));
    CHECK_THAT(lines[2], Contains("bulk, large-buffers @ link.rtt=40ms, also observed: bufferbloat: RTT under load "
                                  "121.00 ms against the path's 40.00 ms"));
    const auto data = large_buffers_full_link();  // the explanations point into it
    auto roles = explanations(data);
    std::vector<std::string> of_trial;
    for (const auto& e : roles)
        if (e.trial->index == 4) of_trial.push_back(e.rule + "/" + e.role);
    CHECK(of_trial ==
          std::vector<std::string>{"rate-bound/binding", "queue-overflow/observed", "bufferbloat/observed"});
}

TEST_CASE("report says observed, not also observed, where no cause binds the number", "[report]") {
    // 60 of 100 Mbit/s, nothing limited, the queue standing: a latency fact, not the throughput's cause.
    auto d = large_buffers_full_link();
    for (auto& m : d.measurements)
        if (m.trial == 4) {
            m.metrics["throughput"] = 60e6;
            m.counters.erase("qdisc");
        }
    auto lines = containing(explain(d), "bulk, large-buffers @ link.rtt=40ms");
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Contains("bulk, large-buffers @ link.rtt=40ms, observed: bufferbloat:"));
}

TEST_CASE("report gives no buffer advice where loss, not a buffer, binds the transfer", "[report]") {
    // default-buffers @ 20ms on a path with 1% loss: 10 Mbit/s, near Mathis's 7.1 Mbit/s, the
    // window limiting 10% of the time. Bigger buffers cannot lift it; the rmem_max advice goes.
    auto d = fixtures::buffer_sweep();
    d.trials[0].link_loss = 0.01;
    for (auto& m : d.measurements)
        if (m.trial == 1) {
            m.metrics["throughput"] = 10e6;
            m.metrics["rwnd_limited"] = 0.1;
        }
    auto lines = explain(d);
    auto at20 = containing(lines, "default-buffers @ link.rtt=20ms");
    REQUIRE(at20.size() == 1);
    CHECK_THAT(at20[0], Contains("bulk, default-buffers @ link.rtt=20ms: loss-bound:") && Contains("bbr"));
    // The same trial held by its receive window gets the advice, as before.
    CHECK(containing(explain(fixtures::buffer_sweep()), "default-buffers @ link.rtt=20ms: bandwidth-delay product")
              .size() == 1);
}
