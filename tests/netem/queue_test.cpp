// The bottleneck queues (netem/queue.h): `qdisc` as a name or a table, each kind's options
// against the bytes iproute2 6.1's tc sends for the same words (tests/netem/fixtures/
// iproute2-queues.txt, recorded by capture.py), read-back, and the errors.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <map>

#include <linux/pkt_sched.h>

#include "netem/attributes.h"
#include "netem/encode.h"
#include "netem/kernel.h"
#include "netem/queue.h"
#include "netem/readback.h"
#include "netem/tc_command.h"
#include "tests/support/load_helper.h"
#include "tests/support/tc_fixtures.h"

using namespace wanlab::netem;
using wanlab::testing::load;
using wanlab::testing::up_of;

namespace {

std::map<std::string, std::vector<std::uint8_t>> queue_fixtures() {
    return wanlab::testing::tc_fixtures("iproute2-queues.txt");
}

// Attributes by type (flags masked), so that the order tc writes them in does not matter.
std::map<int, std::vector<std::uint8_t>> attrs_of(const std::vector<std::uint8_t>& b) {
    std::map<int, std::vector<std::uint8_t>> out;
    std::size_t off = 0;
    while (off + 4 <= b.size()) {
        std::uint16_t len, type;
        std::memcpy(&len, b.data() + off, 2);
        std::memcpy(&type, b.data() + off + 2, 2);
        REQUIRE(len >= 4);
        out[type & 0x3fff].assign(b.begin() + off + 4, b.begin() + off + len);
        off += (len + 3u) & ~3u;
    }
    return out;
}

struct Case {
    const char* tc;    // the fixture's key: KIND ARGS as given to tc
    const char* link;  // the same queue as wanlab's `qdisc` table (below a 20mbit htb)
    bool nested;       // options are attributes (else a struct)
};

const Case kCases[] = {
    {"codel limit 500 target 10ms interval 50ms ecn",
     "{ kind = \"codel\", limit = 500, target = \"10ms\", interval = \"50ms\", ecn = true }", true},
    {"codel ce_threshold 2ms", "{ kind = \"codel\", ce_threshold = \"2ms\" }", true},
    {"fq_codel limit 2048 flows 256 target 4ms interval 80ms quantum 1000 noecn",
     "{ kind = \"fq_codel\", limit = 2048, flows = 256, target = \"4ms\", interval = \"80ms\", quantum = 1000, "
     "ecn = false }",
     true},
    {"pie limit 300 target 20ms tupdate 40ms alpha 4 beta 20 ecn bytemode",
     "{ kind = \"pie\", limit = 300, target = \"20ms\", tupdate = \"40ms\", alpha = 4, beta = 20, ecn = true, "
     "bytemode = true }",
     true},
    {"pie dq_rate_estimator", "{ kind = \"pie\", dq_rate_estimator = true }", true},
    {"fq_pie limit 2000 flows 512 target 10ms tupdate 20ms alpha 3 beta 25 quantum 1400 memory_limit 4194304 "
     "ecn_prob 20 ecn",
     "{ kind = \"fq_pie\", limit = 2000, flows = 512, target = \"10ms\", tupdate = \"20ms\", alpha = 3, beta = 25, "
     "quantum = 1400, memory_limit = 4194304, ecn_prob = \"20%\", ecn = true }",
     true},
    {"sfq limit 100 perturb 10 quantum 1514 divisor 512 flows 64",
     "{ kind = \"sfq\", limit = 100, perturb = \"10s\", quantum = 1514, divisor = 512, flows = 64 }", false},
    {"red limit 400000 min 30000 max 90000 avpkt 1000 burst 50 probability 0.05 bandwidth 20mbit ecn",
     "{ kind = \"red\", limit = 400000, min = 30000, max = 90000, avpkt = 1000, burst = 50, probability = \"5%\", "
     "ecn = true }",
     true},
    {"red limit 1514000 min 126166 max 378500 avpkt 1000 burst 253 probability 0.02 bandwidth 10mbit harddrop",
     "{ kind = \"red\", burst = 253, bandwidth = \"10mbit\", harddrop = true }", true},
    {"fq limit 5000 flow_limit 50 quantum 3028 initial_quantum 15140 maxrate 50mbit buckets 2048 nopacing",
     "{ kind = \"fq\", limit = 5000, flow_limit = 50, quantum = 3028, initial_quantum = 15140, maxrate = \"50mbit\", "
     "buckets = 2048, pacing = false }",
     true},
};

Direction queue_of(const std::string& table) {
    return up_of("delay = \"5ms\"\nrate = \"20mbit\"\nshaper = \"htb\"\nqdisc = " + table + "\n");
}

}  // namespace

TEST_CASE("each queue's options are what iproute2's tc sends for the same words", "[netem][queue]") {
    auto fixtures = queue_fixtures();
    REQUIRE(fixtures.size() == std::size(kCases));
    for (const auto& c : kCases) {
        INFO(c.tc);
        REQUIRE(fixtures.count(c.tc));
        Direction d = queue_of(c.link);
        // The request wanlab sends: TCA_KIND and TCA_OPTIONS below the shaper.
        auto requests = tree_requests(d, 7, "wl-rs", 1500, Psched{});
        TcObject q = parse_tc_message(requests.back().bytes);
        CHECK(q.kind == to_string(d.queue));
        CHECK(q.parent == 0x20001u);
        const auto& tc = fixtures[c.tc];
        if (d.queue == Queue::red) {
            // The same, except where the flags travel: wanlab puts them in the qopt (where the
            // kernel arms Adaptive RED's timer), tc 6.1 in TCA_RED_FLAGS {value, selector}.
            auto ours = attrs_of(q.options), theirs = attrs_of(tc);
            REQUIRE(theirs.count(TCA_RED_FLAGS));
            std::uint32_t tc_flags;
            std::memcpy(&tc_flags, theirs[TCA_RED_FLAGS].data(), 4);
            theirs.erase(TCA_RED_FLAGS);
            CHECK(ours.count(TCA_RED_FLAGS) == 0);
            REQUIRE(ours[TCA_RED_PARMS].size() == sizeof(tc_red_qopt));
            CHECK(ours[TCA_RED_PARMS][sizeof(tc_red_qopt) - 1] == tc_flags);
            ours[TCA_RED_PARMS][sizeof(tc_red_qopt) - 1] = 0;
            CHECK(ours == theirs);
        } else if (c.nested) {
            CHECK(attrs_of(q.options) == attrs_of(tc));
        } else
            CHECK(q.options == tc);
        // What a dump of those options holds is what was asked.
        auto mm = compare_queue(d, decode_queue(q.kind, q.options));
        CHECK(describe(mm) == "");
    }
}

TEST_CASE("tc's words for each queue are the ones its fixture was recorded with", "[netem][queue]") {
    for (const auto& c : kCases) {
        Direction d = queue_of(c.link);
        INFO(c.tc);
        std::string words = std::string(to_string(d.queue)) + queue_tc_arguments(d);
        // red prints every derived value; the others print what was set, in the kind's order.
        if (d.queue == Queue::red) {
            CHECK(words.find("min") != std::string::npos);
            continue;
        }
        // Same words, perhaps in another order.
        auto split = [](const std::string& s) {
            std::multiset<std::string> out;
            std::size_t at = 0;
            while (at < s.size()) {
                auto sp = s.find(' ', at);
                out.insert(s.substr(at, sp == std::string::npos ? std::string::npos : sp - at));
                if (sp == std::string::npos) break;
                at = sp + 1;
            }
            return out;
        };
        CHECK(split(words) == split(c.tc));
    }
}

TEST_CASE("red's derived values are tc's: Wlog, Plog, Scell_log, max_P, the idle table", "[netem][queue]") {
    Direction d = queue_of(kCases[7].link);
    RedWire w = red_wire(d, Psched{});
    CHECK(w.wlog == 5);
    CHECK(w.plog == 21);
    CHECK(w.scell_log == 14);
    CHECK(w.max_p == 0x0ccccccc);
    CHECK(w.stab.size() == 256);
    CHECK(w.stab[12] == 0);
    CHECK(w.stab[13] == 1);
    CHECK(w.stab[255] == 31);
    // Without thresholds: max a quarter of the limit (1000 frames), min a third of that, as tc.
    Direction plain = queue_of("\"red\"");
    RedWire p = red_wire(plain, Psched{});
    CHECK(p.limit == 1'514'000u);
    CHECK(p.qth_max == 378'500u);
    CHECK(p.qth_min == 126'166u);
    // The bandwidth defaults to the shaper's rate, not tc's 10mbit.
    CHECK(queue_tc_arguments(plain).find("bandwidth 20mbit") != std::string::npos);
}

TEST_CASE("a queue's read-back names a parameter the kernel holds otherwise", "[netem][queue]") {
    Direction d = queue_of("{ kind = \"pie\", target = \"20ms\", tupdate = \"15ms\", ecn = true }");
    QueueParams kernel{{"target", 20e6}, {"tupdate", 16e6}, {"ecn", 1}};
    // tupdate is kept in jiffies: 15 ms at HZ = 250 dumps as 16 ms, the same setting.
    CHECK(compare_queue(d, kernel).empty());
    kernel["target"] = 15e6;
    kernel.erase("ecn");
    auto mm = compare_queue(d, kernel);
    REQUIRE(mm.size() == 2);
    CHECK(mm[0].field == "target");
    CHECK(mm[0].asked == "20ms");
    CHECK(mm[0].kernel == "15ms");
    CHECK(mm[1].field == "ecn");
    CHECK(mm[1].kernel ==
          "none");  // red's thresholds are checked once, with their defaults resolved: a written min that the
    // kernel holds otherwise is one mismatch, not one per place that knows it.
    Direction red = queue_of("{ kind = \"red\", limit = 400000, min = 30000, max = 90000, burst = 50 }");
    auto reds = compare_queue(red, QueueParams{{"limit", 400000}, {"min", 20000}, {"max", 90000}});
    REQUIRE(reds.size() == 1);
    CHECK(reds[0].field == "red min");
}

TEST_CASE("`qdisc` tables are checked: kind, parameters of that kind, ranges, cross-field rules", "[netem][queue]") {
    auto errors = [](const std::string& qdisc) {
        auto l = load("[link]\ndelay = \"5ms\"\nrate = \"20mbit\"\nshaper = \"htb\"\nqdisc = " + qdisc + "\n");
        CHECK_FALSE(l.exp);
        return l.messages;
    };
    CHECK_THAT(errors("{ target = \"5ms\" }"), Catch::Contains("`qdisc` as a table needs `kind`"));
    CHECK_THAT(errors("{ kind = \"codl\" }"), Catch::Contains("did you mean \"codel\""));
    CHECK_THAT(errors("\"fq_pei\""), Catch::Contains("did you mean \"fq_pie\""));
    CHECK_THAT(errors("{ kind = \"codel\", tupdate = \"10ms\" }"),
               Catch::Contains("codel takes no `tupdate`; its parameters: limit, target, interval, ecn, ce_threshold"));
    CHECK_THAT(errors("{ kind = \"pie\", alpha = 40 }"), Catch::Contains("alpha"));
    CHECK_THAT(errors("{ kind = \"sfq\", divisor = 1000 }"), Catch::Contains("power of two"));
    CHECK_THAT(errors("{ kind = \"sfq\", limit = 20000 }"), Catch::Contains("raise `flows`"));
    CHECK_THAT(errors("{ kind = \"red\", min = 90000, max = 30000 }"), Catch::Contains("must be below `max`"));
    CHECK_THAT(errors("{ kind = \"red\", limit = 100000, max = 200000 }"), Catch::Contains("above its limit"));
    CHECK_THAT(errors("{ kind = \"fq\", buckets = 1000 }"), Catch::Contains("power of two"));
    CHECK_THAT(errors("{ kind = \"red\", limit = \"8G\" }"), Catch::Contains("32-bit field"));
    CHECK_THAT(errors("{ kind = \"fq_codel\", target = 5 }"), Catch::Contains("target"));
    auto both = load(
        "[link]\ndelay = \"5ms\"\nrate = \"20mbit\"\nshaper = \"htb\"\nqdisc = { kind = \"codel\" }\nqdisc_limit = "
        "5\n");
    CHECK_FALSE(both.exp);
    CHECK_THAT(both.messages, Catch::Contains("give `limit` in the table"));
}

TEST_CASE("the queue and its parameters appear in the plan's JSON and cross the wire to an agent", "[netem][queue]") {
    Direction d = queue_of("{ kind = \"fq_codel\", limit = 4096, target = \"2ms\", ecn = true }");
    nlohmann::json j;
    for (const auto& a : attributes())
        if (a.json) a.json(a, d, j);
    CHECK(j["qdisc"] == "fq_codel");
    CHECK(j["qdisc_limit"] == 4096);
    CHECK(j["qdisc_params"]["target"] == 2e6);
    CHECK(j["qdisc_params"]["ecn"] == 1);
    CHECK(d.queue_limit == 4096u);
}
