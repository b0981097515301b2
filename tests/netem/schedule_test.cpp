// [[link.schedule]]: the states a schedule expands to, its refusals, and the player that
// changes the tree in place (against the recording fake kernel; the real kernel's timing is
// tests/vm/schedule_test.sh's and bench/'s).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <thread>

#include <linux/rtnetlink.h>

#include "netem/device.h"
#include "netem/player.h"
#include "netem/readback.h"
#include "netem/schedule.h"
#include "tests/support/load_helper.h"
#include "tests/support/recording_kernel.h"

using namespace wanlab;
using namespace wanlab::netem;
using namespace std::chrono_literals;

namespace {

const experiment::Trial& trial_of(const testing::Loaded& l) {
    INFO(l.messages);
    REQUIRE(l.exp);
    return l.exp->trials.at(0);
}

std::string errors_of(const std::string& text) {
    auto l = testing::load(text);
    CHECK_FALSE(l.exp);
    return l.messages;
}

const char* kLink = "[link]\ndelay = \"10ms\"\nrate = \"20mbit\"\n[[probe]]\nkind = \"rtt\"\n";

}  // namespace

TEST_CASE("a schedule's entries change only what they name, per direction or both", "[netem][schedule]") {
    auto l = testing::load(std::string(kLink) + R"(
[[link.schedule]]
at = "2s"
rate = "5mbit"
[[link.schedule]]
at = "4s"
up.delay = "40ms"
down.loss = "2%"
[[link.schedule]]
at = "6s"
delay = "25ms"
)");
    const auto& t = trial_of(l);
    const auto& s = t.schedule;
    REQUIRE(s.steps.size() == 4);
    CHECK(s.steps[0].up.rate_bps == 20'000'000);
    CHECK(s.steps[1].at == 2s);
    CHECK(s.steps[1].up.rate_bps == 5'000'000);
    CHECK(s.steps[1].down.rate_bps == 5'000'000);
    CHECK(s.steps[1].up.netem.delay == 10ms);  // not named: as before
    CHECK(s.steps[2].up.netem.delay == 40ms);
    CHECK(s.steps[2].down.netem.delay == 10ms);
    CHECK(s.steps[2].down.netem.loss.probability == Approx(0.02));
    CHECK(s.steps[2].up.netem.loss.model == Loss::Model::none);
    CHECK(s.steps[2].up.rate_bps == 5'000'000);  // from entry 1
    // A key for both directions replaces what an entry set for one of them.
    CHECK(s.steps[3].up.netem.delay == 25ms);
    CHECK(s.steps[3].down.netem.delay == 25ms);
    CHECK(s.steps[3].down.netem.loss.probability == Approx(0.02));
    CHECK(t.link.up.scheduled);
    CHECK(t.link.down.scheduled);
    CHECK(s.period == 0ns);
    CHECK(&s.at(100s) == &s.steps[3]);  // the last state holds
    CHECK(&s.at(3s) == &s.steps[1]);
}

TEST_CASE("outages, handovers and a flapping link expand into states", "[netem][schedule]") {
    // No rate: nothing queues behind one, so nothing drains after an outage.
    auto l = testing::load(R"([link]
delay = "10ms"
[[probe]]
kind = "rtt"
[[link.schedule]]
at = "1s"
outage = "2s"
[[link.schedule]]
at = "4s"
handover = "200ms"
delay = "40ms"
[[link.schedule]]
at = "5s"
outage = "100ms"
every = "1s"
for = "3s"
[[link.schedule]]
at = "10s"
repeat = true
)");
    const auto& s = trial_of(l).schedule;
    // [link]; the outage and its end; the handover's outage and its end; three flaps.
    REQUIRE(s.steps.size() == 1 + 2 + 2 + 6);
    CHECK(s.steps[1].outage);
    CHECK(s.steps[1].up.netem.loss.probability == 1.0);
    CHECK(s.steps[1].down.netem.loss.probability == 1.0);
    CHECK(s.steps[1].up.netem.delay == 10ms);
    REQUIRE(s.steps[1].up.netem.slot);  // what netem holds stays held
    CHECK(s.steps[1].up.netem.slot->min_delay == 2s + kOutageHoldMargin);
    CHECK(s.steps[1].up.netem.slot->packets == 1);
    CHECK(s.steps[2].at == 3s);
    CHECK_FALSE(s.steps[2].up.netem.slot);
    CHECK_FALSE(s.steps[2].outage);
    CHECK(s.steps[2].up.netem.loss.model == Loss::Model::none);  // back as it was
    CHECK(s.steps[3].outage);
    CHECK(s.steps[4].at == 4200ms);
    CHECK(s.steps[4].up.netem.delay == 40ms);  // the handover's new path
    for (int k = 0; k < 3; ++k) {
        CHECK(s.steps[5 + 2 * k].at == 5s + k * 1s);
        CHECK(s.steps[5 + 2 * k].outage);
        CHECK(s.steps[6 + 2 * k].at == 5100ms + k * 1s);
        CHECK(s.steps[6 + 2 * k].up.netem.delay == 40ms);
    }
    CHECK(s.period == 10s);
    CHECK(&s.at(10500ms) == &s.steps[0]);  // starts over from [link]
    CHECK(&s.at(11500ms) == &s.steps[1]);
    auto lines = describe(s);
    REQUIRE(lines.size() == s.steps.size());
    CHECK(lines[0] == "at 1s (#1): outage: nothing passes");
    CHECK(lines[1] == "at 3s (#1): link back");
    CHECK(lines[3] == "at 4200ms (#2): link back, delay 40ms");
    CHECK(lines.back() == "at 10s: starts over from [link], every 10s");
}

TEST_CASE("after an outage, what netem held leaves paced at the rate", "[netem][schedule]") {
    auto l = testing::load(std::string(kLink) + R"(
[[link.schedule]]
at = "1s"
outage = "2s"
[[link.schedule]]
at = "3200ms"
rate = "10mbit"
)");
    const auto& s = trial_of(l).schedule;
    REQUIRE(s.steps.size() == 4);  // [link], outage, back and draining, the next entry (overtakes the drain)
    CHECK(s.steps[2].draining);
    REQUIRE(s.steps[2].up.netem.slot);
    // A slot every 5 ms of 105% of 20 Mbit/s: 13,125 bytes.
    CHECK(s.steps[2].up.netem.slot->min_delay == 5ms);
    CHECK(s.steps[2].up.netem.slot->bytes == 13'125);
    CHECK(s.steps[3].at == 3200ms);
    CHECK_FALSE(s.steps[3].up.netem.slot);

    auto alone = testing::load(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\noutage = \"2s\"\n");
    const auto& a = trial_of(alone).schedule;
    REQUIRE(a.steps.size() == 4);
    // 1000 packets of 1514 bytes leaving by the pace's 5% surplus over 20 Mbit/s: 12.112 s.
    CHECK(a.steps[3].drained);
    CHECK(a.steps[3].at == 15112ms);  // rounded up to the millisecond
    CHECK_FALSE(a.steps[3].up.netem.slot);
    CHECK(describe(a)[2] == "at 15112ms (#1): the held queue has left: netem's rate alone paces again");
}

TEST_CASE("an outage drops even what ECN would have marked", "[netem][schedule]") {
    auto l = testing::load(
        "[link]\ndelay = \"10ms\"\nloss = \"1%\"\necn = true\n[[probe]]\nkind = \"rtt\"\n"
        "[[link.schedule]]\nat = \"1s\"\noutage = \"1s\"\n");
    const auto& s = trial_of(l).schedule;
    REQUIRE(s.steps.size() == 3);
    CHECK_FALSE(s.steps[1].up.netem.ecn);
    CHECK(s.steps[2].up.netem.ecn);
}

TEST_CASE("a direction [link] leaves clean gets a tree when the schedule changes it", "[netem][schedule]") {
    auto l = testing::load(
        "[link.up]\ndelay = \"10ms\"\n[[link.schedule]]\nat = \"1s\"\ndown.delay = \"30ms\"\n"
        "[[probe]]\nkind = \"rtt\"\n");
    const auto& t = trial_of(l);
    CHECK(t.link.down.scheduled);
    CHECK(t.link.down.impaired());
    CHECK_FALSE(t.link.up.scheduled);
}

TEST_CASE("a variant replaces the schedule", "[netem][schedule]") {
    auto l = testing::load(std::string(kLink) + R"(
[[link.schedule]]
at = "1s"
outage = "1s"
[[variant]]
name = "steady"
[[variant]]
name = "stepped"
[[variant.link.schedule]]
at = "2s"
rate = "1mbit"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    REQUIRE(l.exp->trials.size() == 2);
    CHECK(l.exp->trials[0].schedule.steps.size() == 4);  // with the drain after the outage
    REQUIRE(l.exp->trials[1].schedule.steps.size() == 2);
    CHECK(l.exp->trials[1].schedule.steps[1].up.rate_bps == 1'000'000);
}

TEST_CASE("a schedule refuses what it cannot do in place, each with its place", "[netem][schedule][messages]") {
    auto m = errors_of(std::string(kLink) + "[[link.schedule]]\nrate = \"5mbit\"\n");
    CHECK_THAT(m, Catch::Contains("[[link.schedule]] #1 needs `at`"));
    m = errors_of(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\nqdisc = \"fq_codel\"\n");
    CHECK_THAT(m, Catch::Contains("`qdisc` cannot change during a measurement"));
    CHECK_THAT(m, Catch::Contains("exp.toml:8:1"));
    m = errors_of(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\nup.shaper = \"tbf\"\n");
    CHECK_THAT(m, Catch::Contains("`shaper` cannot change during a measurement"));
    m = errors_of(std::string(kLink) +
                  "[[link.schedule]]\nat = \"3s\"\nrate = \"1mbit\"\n[[link.schedule]]\nat = "
                  "\"2s\"\nrate = \"2mbit\"\n");
    CHECK_THAT(m, Catch::Contains("`at` = 2s is not after the entry before (3s)"));
    m = errors_of(std::string(kLink) +
                  "[[link.schedule]]\nat = \"1s\"\noutage = \"2s\"\n[[link.schedule]]\nat = "
                  "\"2s\"\nrate = \"2mbit\"\n");
    CHECK_THAT(m, Catch::Contains("comes before entry #1 has ended (at 3s)"));
    m = errors_of(std::string(kLink) +
                  "[[link.schedule]]\nat = \"1s\"\nrepeat = true\n[[link.schedule]]\nat = "
                  "\"2s\"\nrate = \"2mbit\"\n");
    CHECK_THAT(m, Catch::Contains("comes after the entry with `repeat = true`"));
    m = errors_of(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\noutage = \"100ms\"\nevery = \"1s\"\n");
    CHECK_THAT(m, Catch::Contains("`every` needs `for`"));
    m = errors_of(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\nhandover = \"100ms\"\n");
    CHECK_THAT(m, Catch::Contains("a handover changes the path, but no key changes"));
    m = errors_of(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\noutage = \"100ms\"\nrate = \"1mbit\"\n");
    CHECK_THAT(m, Catch::Contains("write `handover` instead of `outage`"));
    m = errors_of(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\nratee = \"1mbit\"\n");
    CHECK_THAT(m, Catch::Contains("unknown key `ratee` in [[link.schedule]] #1; did you mean `rate`?"));
    m = errors_of(std::string(kLink) + "[[link.schedule]]\nat = \"1s\"\njitter = \"5ms\"\ndelay = \"0ms\"\n");
    CHECK_THAT(m, Catch::Contains("`jitter` needs `delay`"));
    CHECK_THAT(m, Catch::Contains("as [[link.schedule]] #1 leaves the link"));
    m = errors_of(
        "[link]\ndelay = \"1ms\"\nrate = \"10mbit\"\nshaper = \"tbf\"\n[[probe]]\nkind = \"rtt\"\n"
        "[[link.schedule]]\nat = \"1s\"\nrate = \"0bit\"\n");
    CHECK_THAT(m, Catch::Contains("leaves the up direction without a rate, but its shaper = \"tbf\" stays"));
    // A flapping link cannot expand without bound.
    m = errors_of(std::string(kLink) +
                  "[[link.schedule]]\nat = \"1s\"\noutage = \"1ms\"\nevery = \"2ms\"\nfor = "
                  "\"72000s\"\n");
    CHECK_THAT(m, Catch::Contains("the schedule expands to more than 10000 changes"));
    m = errors_of(std::string(kLink) + "[link.schedule]\nat = \"1s\"\n");
    CHECK_THAT(m, Catch::Contains("`schedule` must be an array of tables"));
}

TEST_CASE("the player changes the tree in place at its instants and puts [link] back", "[netem][schedule]") {
    auto l = testing::load(std::string(kLink) + R"(
[[link.schedule]]
at = "20ms"
delay = "40ms"
[[link.schedule]]
at = "40ms"
rate = "5mbit"
)");
    const auto& t = trial_of(l);
    auto up = std::make_unique<RecordingKernel>();
    auto down = std::make_unique<RecordingKernel>();
    auto build = [](RecordingKernel& kern, const char* dev, const Direction& dir) {
        DeviceQdiscs d(kern, dev);
        d.apply(dir, 1500, Psched{});
        d.release();
        kern.sent.clear();
    };
    build(*up, "wl-rs", t.link.up);
    build(*down, "wl-rc", t.link.down);
    {
        // The down direction's site is missing: the player refuses to start half a schedule.
        auto lone = std::make_unique<RecordingKernel>();
        build(*lone, "wl-rs", t.link.up);
        std::vector<PlayerSite> sites;
        sites.push_back({"up", std::move(lone), "wl-rs", {}});
        CHECK_THROWS_WITH(SchedulePlayer(t.schedule, std::move(sites), 1500, Psched{}),
                          Catch::Contains("changes the down direction, which has no qdisc here"));
    }
    auto* ku = up.get();
    std::vector<PlayerSite> both;
    both.push_back({"up", std::move(up), "wl-rs", {}});
    both.push_back({"down", std::move(down), "wl-rc", {}});
    SchedulePlayer player(t.schedule, std::move(both), 1500, Psched{});
    player.start();
    std::this_thread::sleep_for(150ms);
    auto log = player.finish();
    CHECK(log.error.empty());
    REQUIRE(log.changes.size() == 2);
    CHECK(log.changes[0].scheduled == Approx(0.020));
    CHECK(log.changes[0].direction == "both");
    CHECK(log.changes[0].applied >= log.changes[0].scheduled);
    CHECK(log.changes[1].step == 2);
    // Netem carries the rate itself here (shaper = "netem"): one netem request per change,
    // then [link] back; never a delete, never an exclusive create.
    std::vector<std::chrono::nanoseconds> delays;
    std::vector<std::uint64_t> rates;
    for (const auto& r : ku->sent) {
        nlmsghdr h;
        std::memcpy(&h, r.bytes.data(), sizeof h);
        CHECK(h.nlmsg_type == RTM_NEWQDISC);
        CHECK((h.nlmsg_flags & NLM_F_EXCL) == 0);
        auto o = parse_tc_message(r.bytes);
        REQUIRE(o.kind == "netem");
        auto n = decode_netem(o.options, Psched{});
        delays.push_back(n.delay);
        rates.push_back(n.rate_bps);
    }
    CHECK(delays == std::vector<std::chrono::nanoseconds>{40ms, 40ms, 10ms});
    CHECK(rates == std::vector<std::uint64_t>{20'000'000, 5'000'000, 20'000'000});
    auto late = lateness_of(log);
    CHECK(late.changes == 2);
    CHECK(late.max >= late.median);
}

TEST_CASE("a schedule across machines is refused for now, naming where it runs", "[netem][schedule][messages]") {
    auto m = errors_of(R"([lab]
mode = "hosts"
[hosts.client]
ssh = "local"
[hosts.server]
ssh = "server.example"
address = "198.18.0.2"
[link]
delay = "10ms"
[[link.schedule]]
at = "1s"
delay = "20ms"
[[probe]]
kind = "rtt"
)");
    CHECK_THAT(m, Catch::Contains("runs in the namespace lab and in host mode, not yet across machines"));
}

TEST_CASE("an entry after every measurement has ended is said never to take effect", "[netem][schedule][messages]") {
    auto l = testing::load(R"([link]
delay = "10ms"
[[link.schedule]]
at = "2s"
delay = "20ms"
[[link.schedule]]
at = "12s"
delay = "30ms"
[[probe]]
kind = "rtt"
duration = "10s"
)");
    INFO(l.messages);
    REQUIRE(l.exp);  // a warning
    CHECK_THAT(l.messages, Catch::Contains("[[link.schedule]] #2 starts at 12s, after the longest measurement of the "
                                           "trial (10 s) has ended: it never takes effect"));
    CHECK_THAT(l.messages, !Catch::Contains("#1 starts"));
}

TEST_CASE("a sweep or --set changes one key of one schedule entry by its number", "[netem][schedule][sweep]") {
    auto l = testing::load(std::string(kLink) + R"(
[[link.schedule]]
at = "1s"
rate = "5mbit"
[[link.schedule]]
at = "3s"
outage = "1s"
[sweep]
"link.schedule.2.outage" = ["500ms", "2s"]
)",
                           {"link.schedule.1.rate=8mbit"});
    INFO(l.messages);
    REQUIRE(l.exp);
    REQUIRE(l.exp->trials.size() == 2);
    for (const auto& t : l.exp->trials) CHECK(t.schedule.steps[1].up.rate_bps == 8'000'000);
    // The outage's end, then the drain of what it held.
    CHECK(l.exp->trials[0].schedule.steps[3].at == 3500ms);
    CHECK(l.exp->trials[1].schedule.steps[3].at == 5s);
    auto bad = testing::load(std::string(kLink) +
                             "[[link.schedule]]\nat = \"1s\"\noutage = \"1s\"\n[sweep]\n"
                             "\"link.schedule.3.outage\" = [\"1s\", \"2s\"]\n");
    CHECK_FALSE(bad.exp);
    CHECK_THAT(bad.messages, Catch::Contains("`link.schedule.3` names no [[link.schedule]] entry: they are numbered 1 "
                                             "to 1"));
}
