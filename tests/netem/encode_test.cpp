// The netem encoder against iproute2: for each case, tc's own bytes (recorded by
// tests/netem/fixtures/capture.py) and the same settings written as an experiment's [link].
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include "core/error.h"
#include "netem/attributes.h"
#include "netem/encode.h"
#include "netem/kernel.h"
#include "netem/queue.h"
#include "netem/readback.h"
#include "netem/tc_command.h"
#include "tests/support/load_helper.h"
#include "tests/support/tc_fixtures.h"

using namespace wanlab::netem;

namespace {

std::map<std::string, std::vector<std::uint8_t>> fixtures() {
    return wanlab::testing::tc_fixtures("iproute2-netem.txt");
}

struct Parsed {
    std::vector<std::uint8_t> qopt;
    std::map<int, std::vector<std::uint8_t>> attrs;  // type (without flags) -> payload
};

Parsed parse(const std::vector<std::uint8_t>& payload) {
    Parsed p;
    REQUIRE(payload.size() >= sizeof(tc_netem_qopt));
    p.qopt.assign(payload.begin(), payload.begin() + sizeof(tc_netem_qopt));
    std::size_t off = NLA_ALIGN(sizeof(tc_netem_qopt));
    while (off + 4 <= payload.size()) {
        std::uint16_t len, type;
        std::memcpy(&len, &payload[off], 2);
        std::memcpy(&type, &payload[off + 2], 2);
        REQUIRE(len >= 4);
        REQUIRE(off + len <= payload.size());
        p.attrs[type & NLA_TYPE_MASK].assign(payload.begin() + off + 4, payload.begin() + off + len);
        off += NLA_ALIGN(len);
    }
    REQUIRE(off == payload.size());
    return p;
}

bool all_zero(const std::vector<std::uint8_t>& v) {
    return std::all_of(v.begin(), v.end(), [](std::uint8_t b) { return b == 0; });
}

Netem netem_of(const std::string& link) { return wanlab::testing::up_of(link).netem; }

struct Case {
    const char* tc;
    const char* toml;
};

// limit = 1000 where tc's default applies (wanlab sizes it itself otherwise).
const Case kCases[] = {
    {"delay 10ms", "delay = \"10ms\"\nlimit = 1000"},
    {"delay 20ms 2ms", "delay = \"20ms\"\njitter = \"2ms\"\nlimit = 1000"},
    {"delay 20ms 2ms 25%", "delay = \"20ms\"\njitter = \"2ms\"\ncorrelation = \"25%\"\nlimit = 1000"},
    {"delay 20ms 2ms distribution normal",
     "delay = \"20ms\"\njitter = \"2ms\"\ndistribution = \"normal\"\nlimit = 1000"},
    {"delay 20ms 2ms 25% distribution pareto",
     "delay = \"20ms\"\njitter = \"2ms\"\ncorrelation = \"25%\"\ndistribution = \"pareto\"\nlimit = 1000"},
    {"loss random 1%", "loss = \"1%\""},
    {"loss random 1% 25%", "loss = \"1%\"\nloss_correlation = \"25%\""},
    {"loss gemodel 1% 10% 70% 0.1%",
     "loss = { model = \"gemodel\", p = \"1%\", r = \"10%\", 1-h = \"70%\", 1-k = \"0.1%\" }"},
    {"loss state 1% 90% 5% 8% 0.1%",
     "loss = { model = \"state\", p13 = \"1%\", p31 = \"90%\", p32 = \"5%\", p23 = \"8%\", p14 = \"0.1%\" }"},
    {"loss random 1% ecn", "loss = \"1%\"\necn = true"},
    {"duplicate 1%", "duplicate = \"1%\""},
    {"corrupt 0.1%", "corrupt = \"0.1%\""},
    {"corrupt 0.1% 5%", "corrupt = \"0.1%\"\ncorrupt_correlation = \"5%\""},
    {"delay 10ms reorder 25% 50% gap 5",
     "delay = \"10ms\"\nreorder = \"25%\"\nreorder_correlation = \"50%\"\ngap = 5\nlimit = 1000"},
    {"delay 10ms reorder 25%", "delay = \"10ms\"\nreorder = \"25%\"\nlimit = 1000"},
    {"rate 100mbit", "rate = \"100mbit\""},
    {"rate 10mbit 14 53 5", "rate = \"10mbit\"\npacket_overhead = 14\ncell_size = 53\ncell_overhead = 5"},
    {"rate 50gbit", "rate = \"50gbit\""},
    {"slot 1ms 4ms packets 32", "slot = { min_delay = \"1ms\", max_delay = \"4ms\", packets = 32 }"},
    {"slot 1ms 4ms bytes 65536", "slot = { min_delay = \"1ms\", max_delay = \"4ms\", bytes = 65536 }"},
    {"limit 50000 delay 1ms", "limit = 50000\ndelay = \"1ms\""},
    {"limit 12500 delay 20ms 2ms loss random 1% rate 100mbit",
     "limit = 12500\ndelay = \"20ms\"\njitter = \"2ms\"\nloss = \"1%\"\nrate = \"100mbit\""},
};

}  // namespace

TEST_CASE("netem options match iproute2's bytes, plus neutral values for what tc leaves out", "[netem][encode]") {
    auto reference = fixtures();
    REQUIRE(reference.size() >= std::size(kCases));
    Psched psched;  // 64 ns ticks, as on the machine the fixtures were recorded on
    for (const auto& c : kCases) {
        INFO("tc netem " << c.tc);
        REQUIRE(reference.count(c.tc));
        Netem n = netem_of(c.toml);
        std::vector<std::int16_t> table;
        if (!n.distribution.empty()) table = load_distribution(n.distribution);
        auto ours = parse(netem_options(n, psched, table));
        auto theirs = parse(reference[c.tc]);
        CHECK(ours.qopt == theirs.qopt);
        for (const auto& [type, bytes] : theirs.attrs) {
            INFO("attribute TCA_NETEM type " << type);
            REQUIRE(ours.attrs.count(type));
            CHECK(ours.attrs[type] == bytes);
        }
        // The seed [run] seed gives this trial's direction (tc 6.1 has no `seed`).
        REQUIRE(n.seed);
        REQUIRE(ours.attrs.count(kNetemPrngSeed));
        std::uint64_t seed;
        std::memcpy(&seed, ours.attrs[kNetemPrngSeed].data(), sizeof seed);
        CHECK(seed == *n.seed);
        ours.attrs.erase(kNetemPrngSeed);
        // What tc leaves out, wanlab sends as "off", so a replace clears a previous trial's value.
        for (const auto& [type, bytes] : ours.attrs) {
            if (theirs.attrs.count(type)) continue;
            INFO("extra attribute TCA_NETEM type " << type);
            CHECK(all_zero(bytes));
            CHECK((type == TCA_NETEM_CORR || type == TCA_NETEM_REORDER || type == TCA_NETEM_CORRUPT ||
                   type == TCA_NETEM_RATE || type == TCA_NETEM_ECN || type == TCA_NETEM_SLOT));
        }
    }
}

TEST_CASE("duplicate correlation is sent, where iproute2 6.1 drops it", "[netem][encode]") {
    // `tc qdisc add ... netem duplicate 1% 10%` sends no TCA_NETEM_CORR (see the fixture):
    // the 10% never reaches the kernel. wanlab sends it.
    auto reference = fixtures();
    CHECK(parse(reference["duplicate 1% 10%"]).attrs.count(TCA_NETEM_CORR) == 0);
    auto ours = parse(netem_options(netem_of("duplicate = \"1%\"\nduplicate_correlation = \"10%\""), Psched{}, {}));
    tc_netem_corr corr;
    std::memcpy(&corr, ours.attrs[TCA_NETEM_CORR].data(), sizeof corr);
    CHECK(corr.dup_corr == probability(0.10));
}

TEST_CASE("netem's seed: written, derived from [run] seed, or refused where the kernel drops it", "[netem][encode]") {
    auto load = [](const std::string& text) {
        auto l = wanlab::testing::load(text);
        INFO(l.messages);
        REQUIRE(l.exp);
        return *l.exp;
    };
    auto exp = load("[run]\nseed = 42\n[link]\nloss = \"1%\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n");
    const auto &a = exp.trials[0].link, &b = exp.trials[1].link;
    // Stable for the same file, different between trials and directions.
    CHECK(*a.up.netem.seed == seed_for(42, exp.trials[0].id, "up"));
    CHECK(*a.up.netem.seed == *load("[run]\nseed = 42\n[link]\nloss = \"1%\"\n[[variant]]\nname = \"a\"\n[[variant]]\n"
                                    "name = \"b\"\n")
                                   .trials[0]
                                   .link.up.netem.seed);
    CHECK(*a.up.netem.seed != *a.down.netem.seed);
    CHECK(*a.up.netem.seed != *b.up.netem.seed);
    CHECK(*a.up.netem.seed != seed_for(43, exp.trials[0].id, "up"));
    CHECK_FALSE(a.up.netem.seed_explicit);
    // A seed written in [link] is that seed, and tc's word for it is printed.
    auto own = load("[link]\nloss = \"1%\"\nseed = 7\n").trials[0].link.up;
    CHECK(*own.netem.seed == 7u);
    CHECK(own.netem.seed_explicit);
    CHECK(netem_arguments(own.netem).find("seed 7") != std::string::npos);
    CHECK(netem_arguments(a.up.netem).find("seed") == std::string::npos);
    // Read back: a kernel without the seed (before 6.6) dumps none. A derived seed is then
    // not a mismatch; a written one is, with what to do.
    Netem dumped = a.up.netem;
    dumped.seed.reset();
    CHECK(compare_netem(a.up.netem, dumped).empty());
    Netem dumped_own = own.netem;
    dumped_own.seed.reset();
    auto mm = compare_netem(own.netem, dumped_own);
    REQUIRE(mm.size() == 1);
    CHECK(mm[0].field == "seed");
    CHECK_THAT(mm[0].kernel, Catch::Contains("Linux 6.6"));
    // A kernel that keeps it dumps it: decoded from the attribute.
    auto bytes = netem_options(own.netem, Psched{}, {});
    CHECK(decode_netem(bytes, Psched{}).seed == std::optional<std::uint64_t>(7));
}

TEST_CASE("delays from 2^32 ns on travel as 64-bit nanoseconds, as tc sends them", "[netem][encode]") {
    Netem n = netem_of("delay = \"300s\"\njitter = \"1s\"\nlimit = 1000");
    auto p = parse(netem_options(n, Psched{}, {}));
    REQUIRE(p.attrs.count(TCA_NETEM_LATENCY64));
    std::int64_t ns;
    std::memcpy(&ns, p.attrs[TCA_NETEM_LATENCY64].data(), sizeof ns);
    CHECK(ns == 300'000'000'000);
    CHECK(p.attrs.count(TCA_NETEM_JITTER64) == 0);  // 1 s fits 32 bits of ns
    CHECK(decode_netem(netem_options(n, Psched{}, {}), Psched{}).delay == std::chrono::seconds(300));
    // Below 2^32 ns nothing changes: qopt's ticks, as tc.
    CHECK(
        parse(netem_options(netem_of("delay = \"4s\"\nlimit = 1000"), Psched{}, {})).attrs.count(TCA_NETEM_LATENCY64) ==
        0);
}

TEST_CASE("probabilities round as tc rounds them", "[netem][encode]") {
    CHECK(probability(0) == 0u);
    CHECK(probability(1) == UINT32_MAX);
    CHECK(probability(0.01) == 0x028f5c29u);
    CHECK(probability(0.25) == 0x40000000u);
    CHECK(probability(-1) == 0u);
}

TEST_CASE("a missing distribution table names the places searched", "[netem][encode]") {
    try {
        load_distribution("lognormal");
        FAIL("expected an error");
    } catch (const wanlab::InputError& e) {
        std::string what = e.what();
        CHECK(what.starts_with(
            "no delay distribution table \"lognormal\"; looked for:\n  /usr/lib/x86_64-linux-gnu/tc/lognormal.dist"));
        CHECK(what.find("apt-get install iproute2") != std::string::npos);
    }
}

TEST_CASE("a tree with a tbf shaper and a pfifo queue is three create-or-replace requests", "[netem][encode]") {
    auto l = wanlab::testing::load(
        "[link]\ndelay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\nqdisc = \"pfifo\"\nqdisc_limit = 500\n");
    REQUIRE(l.exp);
    auto requests = tree_requests(l.exp->trials[0].link.up, 7, "wl-rs", 1500, Psched{});
    REQUIRE(requests.size() == 3);
    CHECK(requests[0].what == "replace netem 1: on wl-rs");
    CHECK(requests[1].what == "replace tbf 2: on wl-rs");
    CHECK(requests[2].what == "replace pfifo 3: on wl-rs");
    for (const auto& r : requests) {
        nlmsghdr h;
        std::memcpy(&h, r.bytes.data(), sizeof h);
        CHECK(h.nlmsg_type == RTM_NEWQDISC);
        CHECK((h.nlmsg_flags & (NLM_F_CREATE | NLM_F_REPLACE)) == (NLM_F_CREATE | NLM_F_REPLACE));
        CHECK((h.nlmsg_flags & NLM_F_EXCL) == 0);
        tcmsg t;
        std::memcpy(&t, r.bytes.data() + NLMSG_HDRLEN, sizeof t);
        CHECK(t.tcm_ifindex == 7);
    }
    tcmsg netem, tbf, fifo;
    std::memcpy(&netem, requests[0].bytes.data() + NLMSG_HDRLEN, sizeof netem);
    std::memcpy(&tbf, requests[1].bytes.data() + NLMSG_HDRLEN, sizeof tbf);
    std::memcpy(&fifo, requests[2].bytes.data() + NLMSG_HDRLEN, sizeof fifo);
    CHECK(netem.tcm_parent == TC_H_ROOT);
    CHECK(netem.tcm_handle == 0x10000u);
    CHECK(tbf.tcm_parent == 0x10001u);
    CHECK(tbf.tcm_handle == 0x20000u);
    CHECK(fifo.tcm_parent == 0x20001u);
    CHECK(fifo.tcm_handle == 0x30000u);
}

TEST_CASE("a cake queue carries its memlimit as iproute2 sends it, fq_codel its limit", "[netem][encode]") {
    auto requests = tree_requests(
        wanlab::testing::up_of("rate = \"100mbit\"\nshaper = \"tbf\"\nqdisc = \"cake\"\nqdisc_limit = 100\n"), 7,
        "wl-rs", 1500, Psched{});
    REQUIRE(requests.size() == 3);
    TcObject cake = parse_tc_message(requests[2].bytes);
    CHECK(cake.kind == "cake");
    // `tc qdisc add ... cake memlimit 151400` (iproute2 6.1, recorded with strace): TCA_OPTIONS
    // holding TCA_CAKE_MEMORY = 151400 and nothing else (no bandwidth: the shaper above limits).
    CHECK(cake.options == std::vector<std::uint8_t>{0x08, 0x00, 0x0a, 0x00, 0x68, 0x4f, 0x02, 0x00});
    CHECK(decode_queue("cake", cake.options).at("limit") == 151400);

    auto fq = tree_requests(
        wanlab::testing::up_of("rate = \"100mbit\"\nshaper = \"htb\"\nqdisc = \"fq_codel\"\nqdisc_limit = 2048\n"), 7,
        "wl-rs", 1500, Psched{});
    TcObject codel = parse_tc_message(fq.back().bytes);
    CHECK(codel.kind == "fq_codel");
    CHECK(decode_queue("fq_codel", codel.options).at("limit") == 2048);
    // Without a limit, cake is sent with no options at all: the kernel's defaults.
    auto plain = tree_requests(wanlab::testing::up_of("rate = \"100mbit\"\nshaper = \"tbf\"\nqdisc = \"cake\"\n"), 7,
                               "wl-rs", 1500, Psched{});
    CHECK(parse_tc_message(plain.back().bytes).options.empty());
}

TEST_CASE("a cake queue limit whose memlimit would not fit 32 bits is refused at its key", "[netem][encode]") {
    auto l = wanlab::testing::load(
        "[link]\nrate = \"100mbit\"\nshaper = \"tbf\"\nqdisc = \"cake\"\nqdisc_limit = 3000000\n");
    CHECK_FALSE(l.exp);
    CHECK_THAT(l.messages, Catch::Contains("too large for cake") && Catch::Contains("at most 2836834 packets") &&
                               Catch::Contains(":5:"));
}
