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

TEST_CASE("bufferbloat: an rtt probe's median beside a group's bulk flows, never an idle one's", "[diagnosis]") {
    // examples/bufferbloat.toml: `ping` in group rrul behind the 1000-packet FIFO, 40 ms path.
    Evidence e;
    e.kind = "rtt";
    e.rtt_configured = 0.040;
    e.rate_configured = 20e6;
    e.rtt_p50 = 0.512;
    CHECK_FALSE(bufferbloat(e));  // not under load: a slow answer there is not a queue's
    e.under_load = true;
    auto v = bufferbloat(e);
    REQUIRE(v);
    CHECK(v->text ==
          "bufferbloat: RTT under load 512.00 ms (median, beside the group's bulk flows) against the path's 40.00 ms: "
          "a standing queue of 472.00 ms (about 1.1 MiB at 20.00 Mbit/s); an AQM on the link (qdisc = \"fq_codel\") "
          "or a shorter queue limit keeps the delay down");
    e.rtt_p50 = 0.0436;  // behind fq_codel
    CHECK_FALSE(bufferbloat(e));
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

// --- queue overflow: tests/vm/run/evidence.toml in the micro-VM (20 Mbit/s, 40 ms; medians
// of its two 4 s repeats) ---------------------------------------------------------------------

namespace {

Evidence evidence_bulk(double throughput) {
    Evidence e;
    e.kind = "throughput";
    e.rtt_configured = 0.040;
    e.rate_configured = 20e6;
    e.throughput = throughput;
    e.mss = 1448;
    return e;
}

// "short-limit": netem's own rate with limit = 20; 74 and 79 drops, peaks 19 and 20.
Evidence short_limit() {
    auto e = evidence_bulk(5.11e6);
    QueueEvidence up;
    up.direction = "up";
    up.loss = 0;
    up.netem_sent = 2061.5;
    up.netem_drops = 76.5;
    up.netem_limit = 20;
    up.netem_peak = 19.5;
    e.queues.push_back(up);
    QueueEvidence down = up;
    down.direction = "down";
    down.netem_sent = 1159.5;
    down.netem_drops = 0;
    e.queues.push_back(down);
    return e;
}

// "small-fifo": a tbf at 20 Mbit/s with a 10-packet pfifo below it; 35 and 17 drops.
Evidence small_fifo() {
    auto e = evidence_bulk(8.06e6);
    QueueEvidence up;
    up.direction = "up";
    up.loss = 0;
    up.netem_sent = 2990;
    up.netem_drops = 26;
    up.netem_limit = 1000;
    up.netem_peak = 30.5;
    up.child_drops = 26;
    up.bottleneck = "queue";
    up.bottleneck_drops = 26;
    up.bottleneck_sent = 2990;
    up.bottleneck_limit = 10;
    up.bottleneck_peak = 6;
    e.queues.push_back(up);
    return e;
}

}  // namespace

TEST_CASE("queue overflow: netem's limit below the path's BDP names its drops and the limit to set", "[diagnosis]") {
    auto v = queue_overflow(short_limit());
    REQUIRE(v);
    CHECK(v->rule == "queue-overflow");
    CHECK_THAT(v->text, Contains("queue overflow (up): netem dropped 76 of 2138 packets") &&
                            Contains("queue limit of 20 packets was reached (peak 20 queued") &&
                            Contains("below the bandwidth-delay product 97.7 KiB (67 packets)") &&
                            Contains("Raise [link] limit above 67"));
    CHECK_THAT(v->text, !Contains("(down)"));  // the direction that dropped nothing
    CHECK(diagnose(short_limit()).front().rule == "queue-overflow");
}

TEST_CASE("queue overflow: the fifo below a shaper, and netem's count of its child's drops is not netem's",
          "[diagnosis]") {
    auto v = queue_overflow(small_fifo());
    REQUIRE(v);
    CHECK_THAT(v->text, Contains("the bottleneck queue (qdisc, limit 10 packets) dropped 26 of 3016 packets (peak 6") &&
                            Contains("qdisc_limit = 67"));
    CHECK_THAT(v->text, !Contains("netem dropped"));
    // A link already full gains nothing from a deeper queue: the drops are named, no advice.
    auto full = small_fifo();
    full.throughput = 18.6e6;
    CHECK_THAT(queue_overflow(full)->text, !Contains("qdisc_limit ="));
}

TEST_CASE("queue overflow: not for drops the loss model explains, an AQM's, or none", "[diagnosis]") {
    // The same path with limit = "auto" (1000 packets): 0 drops, peak 416.
    auto none = short_limit();
    none.queues[0].netem_drops = 0;
    none.queues[0].netem_limit = 1000;
    none.queues[0].netem_peak = 416;
    CHECK_FALSE(queue_overflow(none));
    // 1% random loss (cc-compare): 1,012 drops of 100,000 packets is the model's 1,000 +- 3 sigma.
    auto lossy = short_limit();
    lossy.queues[0].loss = 0.01;
    lossy.queues[0].netem_sent = 98988;
    lossy.queues[0].netem_drops = 1012;
    lossy.queues[0].netem_limit = 1000;
    lossy.queues[0].netem_peak = 300;
    CHECK_FALSE(queue_overflow(lossy));
    // ... but 1,500 is 500 more than the model's: the limit's.
    lossy.queues[0].netem_drops = 1500;
    lossy.queues[0].netem_sent = 98500;
    auto v = queue_overflow(lossy);
    REQUIRE(v);
    CHECK_THAT(v->text, Contains("500 more than its loss model's 1.00% explains (about 1000)") &&
                            Contains("the 100 ms samples saw at most 300 queued"));
    // A Gilbert-Elliott model (no single loss rate): only a queue seen at its limit says so.
    auto ge = lossy;
    ge.queues[0].loss = kUnknown;
    CHECK_FALSE(queue_overflow(ge));
    ge.queues[0].netem_peak = 1000;
    CHECK_THAT(queue_overflow(ge)->text, Contains("its loss model's drops among them"));
    // fq_codel below the shaper: its drops are its method, not an overflow.
    auto aqm = small_fifo();
    aqm.queues[0].bottleneck.clear();
    CHECK_FALSE(queue_overflow(aqm));
}

TEST_CASE("buffer limits: the share of busy time, the cap only where the measurement does not refute it",
          "[diagnosis]") {
    // main example, default buffers at 40 ms: 88% receive-window limited, 416 KiB granted.
    auto e = evidence_bulk(34.28e6);
    e.rate_configured = 100e6;
    e.rwnd_limited = 0.881;
    e.rcvbuf = 425984;
    e.streams = 1;
    auto v = receive_window_limited(e);
    REQUIRE(v);
    CHECK(v->text ==
          "receive-window limited 88% of the time: a receive buffer of 416 KiB (about 208 KiB of window) caps one "
          "stream near 42.60 Mbit/s at this RTT (40.00 ms); measured 34.28 Mbit/s");
    CHECK_FALSE(send_buffer_limited(e));
    // The bare-path run: 2.13 Gbit/s against a "cap" of 333 Mbit/s at its 3.15 ms srtt.
    auto bare = e;
    bare.rtt_configured = kUnknown;
    bare.min_rtt = 0.00005;
    bare.srtt = 0.00315;
    bare.throughput = 2.13e9;
    bare.rcvbuf = 262144;
    // The path's RTT is TCP's minimum, not the srtt under load (whose cap, 333 Mbit/s, the
    // measurement refutes).
    CHECK_THAT(receive_window_limited(bare)->text, Contains("(50.0 us minimum measured)") && !Contains("333"));
    bare.min_rtt = kUnknown;
    bare.rcvbuf = 262144;
    bare.throughput = 2.13e9;
    CHECK_THAT(receive_window_limited(bare)->text, !Contains("caps one stream"));
}

TEST_CASE("emulation not held: the check's own words, and nothing for a trial that held", "[diagnosis]") {
    // evidence.toml's short-limit trial: its 20-packet limit let the rate check reach 8 Mbit/s.
    auto v = emulation_not_held(false, "up rate 8.0 Mbit/s for 20 Mbit/s configured (did not hold)");
    REQUIRE(v);
    CHECK(v->rule == "emulation-not-held");
    CHECK(v->text ==
          "emulation did not hold: up rate 8.0 Mbit/s for 20 Mbit/s configured (did not hold); this trial's "
          "numbers do not describe the configured path");
    CHECK_FALSE(emulation_not_held(true, "rtt 40.3 ms for 40 ms configured"));
}

// --- one verdict per measurement: the binding cause first, the rest observed ------------------

namespace {

// examples/buffer-sweep.toml, large-buffers at 40 ms (100 Mbit/s, netem's own rate, its limit
// "auto": 1000 packets): the link full, 13 drops of 84,392 packets at the limit as the stream
// found the rate, and the queue behind them standing under load.
Evidence large_buffers_40ms() {
    Evidence e;
    e.kind = "throughput";
    e.rtt_configured = 0.040;
    e.rate_configured = 100e6;
    e.loss_configured = kUnknown;
    e.throughput = 94.1e6;
    e.mss = 1448;
    e.min_rtt = 0.0401;
    e.srtt = 0.121;
    e.rwnd_limited = 0.0;
    e.sndbuf_limited = 0.0;
    e.rcvbuf = 67108864;
    e.streams = 1;
    e.congestion_control = "cubic";
    QueueEvidence up;
    up.direction = "up";
    up.loss = 0;
    up.netem_sent = 84379;
    up.netem_drops = 13;
    up.netem_limit = 1000;
    up.netem_peak = 1000;
    e.queues.push_back(up);
    QueueEvidence down = up;
    down.direction = "down";
    down.netem_sent = 42210;
    down.netem_drops = 0;
    down.netem_peak = 168;
    e.queues.push_back(down);
    return e;
}

std::vector<std::string> rules_of(const std::vector<Verdict>& vs) {
    std::vector<std::string> out;
    for (const auto& v : vs) out.push_back(v.rule);
    return out;
}

std::vector<Role> roles_of(const std::vector<Verdict>& vs) {
    std::vector<Role> out;
    for (const auto& v : vs) out.push_back(v.role);
    return out;
}

}  // namespace

TEST_CASE("one verdict: the main example's large buffers at 40 ms are rate-bound, the rest observed", "[diagnosis]") {
    auto all = diagnose(large_buffers_40ms());
    CHECK(rules_of(all) == std::vector<std::string>{"rate-bound", "queue-overflow", "bufferbloat"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed, Role::observed});
    CHECK_THAT(all[0].text, Contains("94.10 Mbit/s of the configured 100.00 Mbit/s (94%)"));
    // The drops are said, not blamed: the link was full.
    CHECK(all[1].text ==
          "queue overflow (up): netem dropped 13 of 84392 packets: its queue limit of 1000 packets was reached "
          "(peak 1000 queued, its delay line included); the link was full, so these drops (0.015% of the packets) "
          "cost no throughput: a loss-based stream finds the link's rate by such drops, and a longer queue would "
          "only add delay");
    // Nothing after the binding verdict tells the reader to raise a limit or a buffer.
    for (std::size_t i = 1; i < all.size(); ++i) {
        CHECK_THAT(all[i].text, !Contains("raise", Catch::CaseSensitive::No));
        CHECK_THAT(all[i].text, !Contains("qdisc_limit ="));
    }
    // A shorter queue agrees with a full link: it costs no throughput and saves the delay.
    CHECK_THAT(all[2].text, Contains("a standing queue of 81.00 ms") && Contains("shorter queue limit"));
}

TEST_CASE("one verdict: a queue limit is blamed where the link was not full", "[diagnosis]") {
    // evidence.toml's short-limit: 5.11 of 20 Mbit/s behind a 20-packet netem limit.
    auto all = diagnose(short_limit());
    REQUIRE(all.size() == 1);
    CHECK(all[0].rule == "queue-overflow");
    CHECK(all[0].role == Role::binding);
    CHECK_THAT(all[0].text, Contains("Raise [link] limit above 67") && !Contains("cost no throughput"));
    // The same drops with the link full are observations, with no advice to raise the limit.
    auto full = short_limit();
    full.throughput = 18.6e6;
    auto v = queue_overflow(full);
    REQUIRE(v);
    CHECK_THAT(v->text, Contains("the link was full") && !Contains("Raise"));
    CHECK(rules_of(diagnose(full)) == std::vector<std::string>{"rate-bound", "queue-overflow"});
    CHECK(roles_of(diagnose(full)) == std::vector<Role>{Role::binding, Role::observed});
}

TEST_CASE("one verdict: rate-bound binds before a receive window that was just enough", "[diagnosis]") {
    auto e = large_buffers_40ms();
    e.queues.clear();
    e.srtt = 0.045;
    e.rwnd_limited = 0.62;
    e.rcvbuf = 1048576;
    auto all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"rate-bound", "receive-window-limited"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed});
}

TEST_CASE("one verdict: a receive window binds before loss, and bbr is not advised beside it", "[diagnosis]") {
    // The main example's default buffers at 40 ms (88% receive-window limited, 34.28 Mbit/s)
    // on a path with 0.01% loss, whose Mathis bound (35.5 Mbit/s) fits the number as well.
    auto e = evidence_bulk(34.28e6);
    e.rate_configured = 100e6;
    e.loss_configured = 0.0001;
    e.congestion_control = "cubic";
    e.rwnd_limited = 0.881;
    e.rcvbuf = 425984;
    auto all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"receive-window-limited", "loss-bound"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed});
    CHECK_THAT(all[1].text, Contains("Mathis") && !Contains("bbr"));
    // Without the window limit the loss binds, with its advice.
    e.rwnd_limited = 0.1;
    all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"loss-bound"});
    CHECK(all[0].role == Role::binding);
    CHECK_THAT(all[0].text, Contains("bbr"));
}

TEST_CASE("one verdict: a busy CPU beside a full link is observed, not blamed", "[diagnosis]") {
    auto e = large_buffers_40ms();
    e.queues.clear();
    e.srtt = 0.045;
    e.cpu_busiest = 0.95;
    auto all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"rate-bound", "cpu-bound"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed});
    CHECK(all[1].text == "a busy CPU: one CPU was busy 95% of the measurement, near its limit too");
    // Below the rate with nothing else to show, the CPU binds.
    e.throughput = 40e6;
    all = diagnose(e);
    REQUIRE(all.size() == 1);
    CHECK(all[0].role == Role::binding);
    CHECK_THAT(all[0].text, Contains("CPU-bound") && Contains("not the network, may set this number"));
}

TEST_CASE("one verdict: the delayed-ACK stall binds an exchange before a busy CPU", "[diagnosis]") {
    auto e = nginx_stall();
    e.cpu_busiest = 0.92;
    auto all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"delayed-ack-stall", "cpu-bound"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed});
    CHECK_THAT(all[0].text, Contains("TCP_NODELAY on the server"));
}

TEST_CASE("one verdict: a queue binds a ping's RTT, never a throughput", "[diagnosis]") {
    // A throughput below the rate whose only verdict is its queue's delay: observed, none binds.
    auto e = large_buffers_40ms();
    e.queues.clear();
    e.throughput = 60e6;
    auto all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"bufferbloat"});
    CHECK(all[0].role == Role::observed);
    // examples/bufferbloat.toml's ping beside the group's bulk flows: the queue sets its RTT.
    Evidence ping;
    ping.kind = "rtt";
    ping.rtt_configured = 0.040;
    ping.rate_configured = 20e6;
    ping.rtt_p50 = 0.512;
    ping.under_load = true;
    all = diagnose(ping);
    REQUIRE(all.size() == 1);
    CHECK(all[0].rule == "bufferbloat");
    CHECK(all[0].role == Role::binding);
}

TEST_CASE("one verdict: beside a queue limit blamed for its drops, no shorter queue is advised", "[diagnosis]") {
    // Built to test the contract (a limit below the BDP leaves no room for a standing queue of
    // a whole RTT): the binding queue-overflow says raise the limit, bufferbloat keeps only the AQM.
    auto e = short_limit();
    e.srtt = 0.2;
    auto all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"queue-overflow", "bufferbloat"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed});
    CHECK_THAT(all[1].text, Contains("fq_codel") && !Contains("shorter queue"));
    CHECK_THAT(bufferbloat(e)->text, Contains("shorter queue limit"));  // the rule on its own
}

TEST_CASE("one verdict: a buffer limit binds only where its cap explains the number", "[diagnosis]") {
    // 5.11 Mbit/s behind the 20-packet limit, "receive-window limited" 80% with 416 KiB granted:
    // that buffer allows 42.6 Mbit/s at 40 ms, eight times the number, so the queue binds.
    auto e = short_limit();
    e.rwnd_limited = 0.8;
    e.rcvbuf = 425984;
    auto all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"queue-overflow", "receive-window-limited"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed});
    // A 49 KB buffer allows about 4.9 Mbit/s: the window explains the number and binds; the
    // short queue is observed, its advice kept (both limits hold the stream back).
    e.rcvbuf = 49000;
    all = diagnose(e);
    CHECK(rules_of(all) == std::vector<std::string>{"receive-window-limited", "queue-overflow"});
    CHECK(roles_of(all) == std::vector<Role>{Role::binding, Role::observed});
    CHECK_THAT(all[1].text, Contains("Raise [link] limit above 67"));
}

TEST_CASE("a link that changed during the measurement: no rule compares it with fixed figures", "[diagnosis]") {
    // tests/vm/schedule/outage.toml: 20 Mbit/s with a 3 s outage in a 7 s transfer; netem
    // dropped what arrived during the outage (its loss of 100% then), not by its queue limit.
    Evidence e = iperf3_rate_bound();
    e.throughput = 8.2e6;
    e.schedule_changes = 3;
    e.schedule_late_median = 0.002, e.schedule_late_p99 = 0.0039, e.schedule_late_max = 0.0043;
    QueueEvidence q;
    q.direction = "up";
    q.loss = 0;
    q.netem_sent = 7000, q.netem_drops = 210, q.netem_limit = 1000, q.netem_peak = 400;
    e.queues.push_back(q);
    auto verdicts = diagnose(e);
    REQUIRE(verdicts.size() == 1);
    CHECK(verdicts[0].rule == "link-schedule");
    CHECK(verdicts[0].role == Role::observed);
    CHECK_THAT(verdicts[0].text, Contains("3 changes in place") && Contains("link.up.rate"));
    CHECK_THAT(verdicts[0].text,
               Contains("each landing 2.00 ms after its planned instant (median; p99 3.90 ms, at most "
                        "4.30 ms)"));
    e.schedule_changes = kUnknown;  // the same numbers on a fixed link are queue overflow
    auto fixed = diagnose(e);
    REQUIRE_FALSE(fixed.empty());
    CHECK(fixed[0].rule == "queue-overflow");
}

namespace {

PhaseEvidence phase(double entry, double from, double to, double rate, double throughput) {
    PhaseEvidence p;
    p.entry = entry, p.from = from, p.to = to, p.rate = rate, p.throughput = throughput;
    p.outage = 0, p.rtt = 0.045, p.loss = 0;
    return p;
}

}  // namespace

TEST_CASE("under a schedule, rate-bound compares with what the schedule allowed, phase by phase", "[diagnosis]") {
    // tests/vm/schedule/step.toml in the micro-VM: 20 Mbit/s, 5 Mbit/s from 3 s (applied at
    // 3.00 s), 6.27 s of transfer: the link allowed 12.18 Mbit/s on average.
    Evidence e = iperf3_rate_bound();
    e.rate_configured = 5e6;  // the slower of [link]'s and the entries' is not what bounds it
    e.schedule_changes = 1;
    e.schedule_rate = (20e6 * 3 + 5e6 * 3.27) / 6.27;
    e.schedule_outage = 0;
    e.throughput = 11.4e6;
    e.phases = {phase(0, 0, 3, 20e6, 19.14e6), phase(1, 3, 6.27, 5e6, 4.74e6)};
    auto verdicts = diagnose(e);
    REQUIRE(verdicts.size() == 3);
    CHECK(verdicts[0].rule == "rate-bound");
    CHECK(verdicts[0].role == Role::binding);
    CHECK_THAT(verdicts[0].text,
               Contains("11.40 Mbit/s of the 12.18 Mbit/s the link's schedule allowed") && Contains("(94%"));
    CHECK(verdicts[1].rule == "schedule-phases");
    CHECK(verdicts[1].role == Role::observed);
    CHECK_THAT(verdicts[1].text, Contains("[link] 0.00-3.00 s: median throughput 19.14 Mbit/s, 96% of the "
                                          "20.00 Mbit/s in force: the rate") &&
                                     Contains("#1 3.00-6.27 s: median throughput 4.74 Mbit/s, 95% of the 5.00 "
                                              "Mbit/s in force: the rate"));
    CHECK(verdicts[2].rule == "link-schedule");
    // A phase that fell short keeps the whole from being called rate-bound, though the whole
    // reached 85%: something else left room in it.
    e.phases[0].throughput = 15e6;
    e.throughput = 10.5e6;
    auto short_phase = diagnose(e);
    REQUIRE_FALSE(short_phase.empty());
    CHECK(short_phase[0].rule == "schedule-phases");
    CHECK(short_phase[0].role == Role::observed);
    CHECK_THAT(short_phase[0].text, Contains("median throughput 15.00 Mbit/s, 75% of the 20.00 Mbit/s in force;"));
}

TEST_CASE("a throughput dip during an outage is the outage, not loss, and a lossy phase is loss-bound", "[diagnosis]") {
    // 20 Mbit/s, 1% loss, a 3 s outage from 2 s in a 7 s transfer: the outage's phase carried
    // nothing for most of it. Without phases the loss rule would have read the whole measurement.
    Evidence e = iperf3_rate_bound();
    e.rate_configured = 20e6;
    e.loss_configured = 0.01;
    e.mss = 1448;
    e.schedule_changes = 3;
    e.schedule_rate = 20e6 * 4 / 7;
    e.schedule_outage = 3;
    e.throughput = 1.1e6;
    auto outage = phase(1, 2, 7, 20e6 * 2 / 5, 0);
    outage.outage = 3;
    outage.loss = 0.01;
    auto before = phase(0, 0, 2, 20e6, 2.1e6);
    before.loss = 0.01;
    before.rtt = 0.1;
    e.phases = {before, outage};
    auto verdicts = diagnose(e);
    REQUIRE(verdicts.size() == 2);
    CHECK(verdicts[0].rule == "schedule-phases");
    CHECK(verdicts[0].role == Role::observed);
    // Mathis at 1%, 100 ms, MSS 1448: 1448 x 8 / 0.1 x 1.2247 / 0.1 = 1.42 Mbit/s.
    CHECK_THAT(verdicts[0].text, Contains("[link] 0.00-2.00 s: median throughput 2.10 Mbit/s, 1.5x the 1.42 Mbit/s "
                                          "that 1.00% loss at 100.00 ms allows one loss-based stream") &&
                                     Contains("loss-bound, below the 20.00 Mbit/s in force"));
    CHECK_THAT(verdicts[0].text, Contains("#1 2.00-7.00 s: median throughput 0 bit/s during an outage of 3.000 s: "
                                          "nothing passes, so the dip is the outage, not loss or a window"));
    // No advice: the phases are the experiment; bbr is not offered for the outage's dip.
    for (const auto& v : verdicts) CHECK_THAT(v.text, !Contains("bbr"));
}

TEST_CASE("an RTT probe's phases against the delay in force: a standing queue or none", "[diagnosis]") {
    Evidence e;
    e.kind = "rtt";
    e.rtt_configured = 0.040;
    e.schedule_changes = 1;
    auto quiet = phase(0, 0, 3, 20e6, kUnknown);
    quiet.rtt = 0.040, quiet.rtt_p50 = 0.0412;
    auto loaded = phase(1, 3, 6, 5e6, kUnknown);
    loaded.rtt = 0.080, loaded.rtt_p50 = 0.310;
    e.phases = {quiet, loaded};
    auto v = schedule_phases(e);
    REQUIRE(v);
    CHECK_THAT(v->text, Contains("[link] 0.00-3.00 s: median RTT 41.20 ms, the 40.00 ms in force and 1.20 ms of "
                                 "queueing") &&
                            Contains("#1 3.00-6.00 s: median RTT 310.00 ms against the 80.00 ms in force: a "
                                     "standing queue of 230.00 ms (bufferbloat)"));
    e.phases.pop_back();  // one phase is no schedule's phases
    CHECK_FALSE(schedule_phases(e));
}
