// The link's qdisc statistics: TCA_STATS2 read from a dump message, and the tally of a
// measurement's dumps (deltas, peaks, limits, series) by role in wanlab's tree.
#include <catch2/catch.hpp>

#include <linux/gen_stats.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <cstring>

#include "diagnosis/qdisc_watch.h"

using namespace wanlab;

namespace {

void put(std::vector<std::uint8_t>& m, std::uint16_t type, const void* data, std::size_t n) {
    nlattr a{static_cast<std::uint16_t>(NLA_HDRLEN + n), type};
    auto at = m.size();
    m.resize(at + NLA_ALIGN(NLA_HDRLEN + n));
    std::memcpy(m.data() + at, &a, sizeof a);
    if (n > 0) std::memcpy(m.data() + at + NLA_HDRLEN, data, n);  // an empty vector's data() may be null
}

/// An RTM_NEWQDISC message as the kernel dumps it: kind, options, TCA_STATS2.
std::vector<std::uint8_t> qdisc_message(const char* kind, std::uint32_t handle,
                                        const std::vector<std::uint8_t>& options, std::uint64_t bytes,
                                        std::uint32_t packets, gnet_stats_queue q) {
    std::vector<std::uint8_t> m(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(tcmsg)));
    tcmsg t{};
    t.tcm_ifindex = 7;
    t.tcm_handle = handle;
    std::memcpy(m.data() + NLMSG_HDRLEN, &t, sizeof t);
    put(m, TCA_KIND, kind, std::strlen(kind) + 1);
    put(m, TCA_OPTIONS, options.data(), options.size());
    std::vector<std::uint8_t> stats;
    struct {
        std::uint64_t bytes;
        std::uint32_t packets;
        std::uint32_t pad;
    } basic{bytes, packets, 0};
    put(stats, TCA_STATS_BASIC, &basic, sizeof basic);
    put(stats, TCA_STATS_QUEUE, &q, sizeof q);
    put(m, TCA_STATS2, stats.data(), stats.size());
    nlmsghdr h{static_cast<std::uint32_t>(m.size()), RTM_NEWQDISC, 0, 0, 0};
    std::memcpy(m.data(), &h, sizeof h);
    return m;
}

std::vector<std::uint8_t> netem_options(std::uint32_t limit) {
    tc_netem_qopt q{};
    q.limit = limit;
    std::vector<std::uint8_t> out(sizeof q);
    std::memcpy(out.data(), &q, sizeof q);
    return out;
}

std::vector<std::uint8_t> fifo_options(std::uint32_t limit) {
    std::vector<std::uint8_t> out(4);
    std::memcpy(out.data(), &limit, 4);
    return out;
}

netem::TcObject netem_at(std::uint64_t bytes, std::uint32_t packets, std::uint32_t drops, std::uint32_t qlen,
                         std::uint32_t backlog) {
    return netem::parse_tc_message(
        qdisc_message("netem", 0x10000, netem_options(1000), bytes, packets, {qlen, backlog, drops, 0, 0}));
}

}  // namespace

TEST_CASE("a dumped qdisc's TCA_STATS2 reads as sent, drops, overlimits, requeues and the queue now", "[diagnosis]") {
    auto o = netem::parse_tc_message(qdisc_message("tbf", 0x20000, {}, 123456789012ull, 4242, {17, 25000, 9, 2, 31}));
    REQUIRE(o.stats.present);
    CHECK(o.kind == "tbf");
    CHECK(o.stats.bytes == 123456789012ull);
    CHECK(o.stats.packets == 4242);
    CHECK(o.stats.qlen == 17);
    CHECK(o.stats.backlog == 25000);
    CHECK(o.stats.drops == 9);
    CHECK(o.stats.requeues == 2);
    CHECK(o.stats.overlimits == 31);
    auto none = netem::parse_tc_message(qdisc_message("pfifo", 0x30000, {}, 0, 0, {}));
    none.stats = {};
    CHECK_FALSE(none.stats.present);
}

TEST_CASE("the qdisc tally gives deltas, peaks and limits by role, and backlog and drops over time", "[diagnosis]") {
    diagnosis::QdiscTally tally({{"up", "", "wl-rs", {}}});
    auto queue = [](std::uint32_t packets, std::uint32_t drops, std::uint32_t qlen) {
        return netem::parse_tc_message(qdisc_message("pfifo", 0x30000, fifo_options(50), packets * 1514ull, packets,
                                                     {qlen, qlen * 1514, drops, 0, 0}));
    };
    tally.add(0, 0.0, {netem_at(1000, 10, 4, 0, 0), queue(8, 1, 0)});
    tally.add(0, 0.1, {netem_at(500000, 400, 30, 900, 1362600), queue(300, 20, 50)});
    tally.add(0, 0.2,
              {netem_at(900000, 700, 34, 100, 151400), queue(600, 25, 10),
               // not wanlab's (host mode's htb root): no role, left out
               netem::parse_tc_message(qdisc_message("htb", 0x20000 + 0x10000 * 9, {}, 1, 1, {}))});
    auto c = tally.counters();
    CHECK(c["up.netem.sent_packets"] == 690);
    CHECK(c["up.netem.sent_bytes"] == 899000);
    CHECK(c["up.netem.drops"] == 30);
    CHECK(c["up.netem.qlen_peak"] == 900);
    CHECK(c["up.netem.backlog_peak"] == 1362600);
    CHECK(c["up.netem.limit"] == 1000);
    CHECK(c["up.queue.drops"] == 24);
    CHECK(c["up.queue.limit"] == 50);
    CHECK(c["up.queue.qlen_peak"] == 50);
    CHECK_FALSE(c.contains("up.shaper.drops"));
    probes::SeriesMap series;
    tally.add_series(series);
    CHECK(series.at("qdisc.up.netem.backlog").value == std::vector<double>{0, 1362600, 151400});
    CHECK(series.at("qdisc.up.netem.drops").t == std::vector<double>{0.1, 0.2});
    CHECK(series.at("qdisc.up.netem.drops").value == std::vector<double>{26, 4});
    CHECK(series.at("qdisc.up.queue.drops").value == std::vector<double>{19, 5});
    // What left netem (the top of the tree) per sample, in bit/s: 499000 bytes in 0.1 s, then
    // 400000; only netem's, the link's own delivery.
    REQUIRE(series.count("qdisc.up.netem.throughput"));
    CHECK(series.at("qdisc.up.netem.throughput").t == std::vector<double>{0.1, 0.2});
    CHECK(series.at("qdisc.up.netem.throughput").value[0] == Approx(499000 * 8 / 0.1));
    CHECK(series.at("qdisc.up.netem.throughput").value[1] == Approx(400000 * 8 / 0.1));
    CHECK_FALSE(series.count("qdisc.up.queue.throughput"));
    // netem's drops as a share of what it dropped or sent per sample: 26 of 416, 4 of 304.
    REQUIRE(series.count("qdisc.up.netem.loss"));
    CHECK(series.at("qdisc.up.netem.loss").value[0] == Approx(26.0 / 416));
    CHECK(series.at("qdisc.up.netem.loss").value[1] == Approx(4.0 / 304));
    CHECK_FALSE(series.count("qdisc.up.queue.loss"));
}

TEST_CASE("a queue grafted at its second handle keeps its role, so its drops are not the shaper's", "[diagnosis]") {
    // A trial that changes the queue grafts it at 7: instead of 3: (netem/device.cpp).
    diagnosis::QdiscTally tally({{"up", "", "wl-rs", {}}});
    auto at = [](const char* kind, std::uint32_t handle, std::uint32_t drops) {
        return netem::parse_tc_message(qdisc_message(kind, handle, {}, 100 * 1514ull, 100, {0, 0, drops, 0, 0}));
    };
    tally.add(0, 0.0,
              {at("tbf", 0x20000 + netem::kAlternateHandle, 0), at("fq_codel", 0x30000 + netem::kAlternateHandle, 0)});
    tally.add(
        0, 0.1,
        {at("tbf", 0x20000 + netem::kAlternateHandle, 120), at("fq_codel", 0x30000 + netem::kAlternateHandle, 120)});
    auto c = tally.counters();
    CHECK(c["up.queue.drops"] == 120);
    CHECK(c["up.shaper.drops"] == 120);  // a parent's drops include its child's; the rule subtracts
    CHECK(c["up.queue.sent_packets"] == 0);
}
