// The evidence the rules judge, gathered from stored repeats (diagnosis/evidence.h): medians
// over repeats, TCP_INFO per connection, counters, the link's qdisc statistics; and which
// probes of a trial diagnose_trial() judges. Runs built by hand, no database.
#include <catch2/catch.hpp>

#include <cmath>

#include "diagnosis/evidence.h"
#include "probes/probe.h"

using namespace wanlab;
using namespace wanlab::diagnosis;

namespace {

results::Measurement repeat_of(const std::string& probe, const std::string& kind, unsigned repeat,
                               std::map<std::string, double> metrics) {
    results::Measurement m;
    m.trial = 1;
    m.probe = probe;
    m.kind = kind;
    m.tool = "builtin";
    m.repeat = repeat;
    m.metrics = std::move(metrics);
    m.connections = nlohmann::json::array();
    return m;
}

results::Trial evidence_trial() {
    results::Trial t;
    t.index = 1;
    t.variant = "base";
    t.link_rtt = 0.040;
    t.link_rate = 100e6;
    return t;
}

Repeats pointers(const std::vector<results::Measurement>& ms) {
    Repeats out;
    for (const auto& m : ms) out.push_back(&m);
    return out;
}

}  // namespace

TEST_CASE("evidence: medians over the repeats, TCP_INFO over every connection, NaN where none recorded",
          "[diagnosis]") {
    std::vector<results::Measurement> ms;
    for (unsigned r = 1; r <= 3; ++r) {
        auto m = repeat_of("bulk", "throughput", r, {{"throughput", 10e6 * r}, {"rwnd_limited", 0.1 * r}});
        m.connections.push_back(
            {{"direction", "upload"},
             {"congestion_control", "cubic"},
             {"values", {{"min_rtt", 0.040 + 0.001 * r}, {"rtt", 0.050}, {"rcvbuf_granted", 1e6}}}});
        ms.push_back(m);
    }
    auto e = evidence_of(evidence_trial(), pointers(ms));
    CHECK(e.kind == "throughput");
    CHECK(e.rtt_configured == 0.040);
    CHECK(e.rate_configured == 100e6);
    CHECK(e.throughput == Approx(20e6));
    CHECK(e.rwnd_limited == Approx(0.2));
    CHECK(e.min_rtt == Approx(0.042));
    CHECK(e.srtt == Approx(0.050));
    CHECK(e.rcvbuf == Approx(1e6));
    CHECK(e.streams == 1);
    CHECK(e.congestion_control == "cubic");
    CHECK(std::isnan(e.rtt_p50));
    CHECK(std::isnan(e.latency_mean));
    CHECK(std::isnan(e.transactions));  // a bulk transfer has no exchanges
    CHECK(std::isnan(e.client_delayed_acks));
    CHECK(e.queues.empty());
    CHECK_FALSE(e.under_load);
}

TEST_CASE("evidence: the limited share from the connections' busy time when the metric is absent", "[diagnosis]") {
    auto m = repeat_of("bulk", "throughput", 1, {{"throughput", 1e6}});
    m.connections.push_back({{"values", {{"busy_time", 10.0}, {"rwnd_limited_time", 9.0}}}});
    m.connections.push_back({{"values", {{"busy_time", 10.0}, {"rwnd_limited_time", 5.0}}}});
    std::vector<results::Measurement> ms{m};
    auto e = evidence_of(evidence_trial(), pointers(ms));
    CHECK(e.rwnd_limited == Approx(0.7));
    CHECK(e.streams == 2);
}

TEST_CASE("evidence: a request/response kind's exchanges are counted by its own metric", "[diagnosis]") {
    std::vector<results::Measurement> http{
        repeat_of("web", "http", 1, {{"requests", 400}, {"transactions", 1}, {"latency_mean", 0.044}})};
    std::vector<results::Measurement> rr{
        repeat_of("rr", "rr", 1, {{"requests", 1}, {"transactions", 45}, {"latency_mean", 0.044}})};
    CHECK(evidence_of(evidence_trial(), pointers(http)).transactions == 400);
    CHECK(evidence_of(evidence_trial(), pointers(rr)).transactions == 45);
    CHECK(evidence_of(evidence_trial(), pointers(rr)).latency_mean == Approx(0.044));
}

TEST_CASE("evidence: the client's counters, the quick-ack and under-load notes, the busiest CPU", "[diagnosis]") {
    auto a = repeat_of("rr", "rr", 1, {{"transactions", 45}});
    a.counters = {{"client", {{"TcpExt.DelayedACKs", 44}}}, {"cpu_busiest", 0.95}};
    auto b = repeat_of("rr", "rr", 2, {{"transactions", 45}});
    b.counters = {{"client", {{"Tcp.InSegs", 90}}}, {"cpu_busiest", 0.85}, {"cpu_busiest_machine", "server"}};
    b.notes = {probes::kClientQuickackNote, std::string(probes::kUnderLoadNote) + "beside bulk, up in group g"};
    std::vector<results::Measurement> ms{a, b};
    auto e = evidence_of(evidence_trial(), pointers(ms));
    CHECK(e.client_delayed_acks == Approx(22));  // 44 and a repeat that did not move it: 0
    CHECK(e.client_quickack);
    CHECK(e.under_load);
    CHECK(e.cpu_busiest == Approx(0.90));
    CHECK(e.cpu_machine == "server");
}

TEST_CASE("evidence: each direction's queues from the qdisc counters, none for a direction not recorded",
          "[diagnosis]") {
    auto t = evidence_trial();
    t.link_loss = 0.01;
    auto m = repeat_of("bulk", "throughput", 1, {{"throughput", 5e6}});
    m.counters["qdisc"] = {{"up.netem.sent_packets", 2062}, {"up.netem.drops", 76},  {"up.netem.limit", 1000},
                           {"up.netem.qlen_peak", 20},      {"up.shaper.drops", 70}, {"up.queue.sent_packets", 2000},
                           {"up.queue.limit", 100},         {"up.queue.drops", 70},  {"up.queue.qlen_peak", 100}};
    std::vector<results::Measurement> ms{m};
    auto e = evidence_of(t, pointers(ms));
    REQUIRE(e.queues.size() == 1);
    const auto& q = e.queues[0];
    CHECK(q.direction == "up");
    CHECK(q.loss == 0.01);
    CHECK(q.netem_sent == 2062);
    CHECK(q.netem_drops == 76);
    CHECK(q.child_drops == 70);  // the shaper's, counted in netem's too
    CHECK(q.bottleneck == "queue");
    CHECK(q.bottleneck_limit == 100);
    CHECK(q.bottleneck_drops == 70);
    CHECK(q.bottleneck_peak == 100);
    CHECK(std::isnan(q.bottleneck_limit_bytes));
}

TEST_CASE(
    "diagnose_trial: each probe in the order first measured, on the repeats that measured, none without a "
    "verdict",
    "[diagnosis]") {
    results::RunData d;
    d.trials = {evidence_trial()};
    auto busy = [](results::Measurement m) {
        m.counters = {{"cpu_busiest", 0.99}};
        return m;
    };
    d.measurements = {
        busy(repeat_of("web", "http", 1, {{"requests", 10}})),
        repeat_of("quiet", "rtt", 1, {{"rtt_avg", 0.040}}),
        busy(repeat_of("failed", "throughput", 1, {})),  // the tool refused: no metrics, nothing to judge
        busy(repeat_of("bulk", "throughput", 1, {{"throughput", 99e6}})),
        busy(repeat_of("web", "http", 2, {{"requests", 10}})),
    };
    d.measurements[3].trial = 2;  // another trial's
    auto found = diagnose_probes(d, d.trials[0]);
    REQUIRE(found.size() == 1);
    CHECK(found[0].probe == "web");
    REQUIRE(found[0].verdicts.size() == 1);
    CHECK(found[0].verdicts[0].rule == "cpu-bound");
    auto by_probe = repeats_by_probe(d, d.trials[0]);
    REQUIRE(by_probe.size() == 3);
    CHECK(by_probe[0].first == "web");
    CHECK(by_probe[0].second.size() == 2);
    CHECK(by_probe[1].first == "quiet");
    CHECK(by_probe[2].first == "failed");
}

TEST_CASE("buffer advice: the maxima short of 2 x BDP that could limit the bulk transfers, none without a rate",
          "[diagnosis]") {
    auto t = evidence_trial();  // 100 Mbit/s x 40 ms: BDP 500,000 bytes, 2 x BDP 1,000,000
    t.sysctls = {{"net.core.rmem_max", "212992"},
                 {"server:net.ipv4.tcp_rmem", "4096\t131072\t600000"},
                 {"client:net.ipv4.tcp_rmem", "4096\t131072\t400000"}};
    results::RunData d;
    d.run.env.sysctls_before = {{"net.ipv4.tcp_wmem", "4096\t16384\t4194304"}};
    auto m = repeat_of("bulk", "throughput", 1, {{"throughput", 50e6}});
    m.notes = {probes::kRcvbufAutotuned, probes::kSndbufAutotuned};
    m.connections.push_back({{"direction", "upload"}});
    std::vector<results::Measurement> ms{m};
    auto a = buffer_advice(d, t, pointers(ms));
    REQUIRE(a);
    CHECK(a->bdp_bytes == Approx(500000));
    CHECK(a->target_bytes == 1048576);
    // Autotuned: tcp_rmem caps it, rmem_max does not; upload: the server receives, so the
    // client's tcp_rmem does not apply; tcp_wmem's 4 MiB is enough.
    REQUIRE(a->short_buffers.size() == 1);
    const auto& b = a->short_buffers[0];
    CHECK(b.key == "net.ipv4.tcp_rmem");
    CHECK(b.host == "server");
    CHECK(b.triple);
    CHECK(b.fields == std::vector<std::uint64_t>{4096, 131072, 600000});
    CHECK_FALSE(b.below_bdp);
    CHECK_FALSE(b.before);
    t.link_rate = results::kNaN;
    CHECK_FALSE(buffer_advice(d, t, pointers(ms)));
}
