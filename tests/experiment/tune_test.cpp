// [tune] (experiment/tune.h): the goal, constraints and space read and checked against the
// file's probes and sweep, every error located; and the candidates as variants of a load.
#include <catch2/catch.hpp>

#include "experiment/plan.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;

namespace {

const std::string kBase =
    "[link]\nrtt = \"80ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\n"
    "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n"
    "[[probe]]\nname = \"ping\"\nkind = \"rtt\"\n";

std::string errors_of(const std::string& tune) {
    auto l = testing::load(kBase + tune);
    CHECK_FALSE(l.exp);
    return l.messages;
}

}  // namespace

TEST_CASE("[tune]: goal, direction, constraints, budget, tolerance and a space of lists and ranges",
          "[experiment][tune]") {
    auto l = testing::load(kBase + R"([tune]
goal = "bulk.throughput"
constraints = ["ping.p99 <= 60ms", "bulk.throughput >= 10mbit"]
budget = "30min"
tolerance = "3%"
buffer_budget = "32MiB"
[tune.space]
"sysctl.net.core.rmem_max" = { from = "256KiB", to = "64MiB", scale = "x4" }
"probe.bulk.congestion_control" = ["cubic", "bbr"]
"link.qdisc" = ["pfifo", "fq_codel"]
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    REQUIRE(l.exp->tune);
    const auto& t = *l.exp->tune;
    CHECK(t.goal.text() == "bulk.throughput");
    CHECK(t.goal.higher_is_better);
    REQUIRE(t.constraints.size() == 2);
    CHECK(t.constraints[0].metric.text() == "ping.rtt_p99");  // `p99` of an rtt probe is its rtt_p99
    CHECK(t.constraints[0].at_most);
    CHECK(t.constraints[0].bound == Approx(0.060));
    CHECK_FALSE(t.constraints[1].at_most);
    CHECK(t.constraints[1].bound == Approx(10e6));
    CHECK(t.budget == std::chrono::minutes(30));
    CHECK(t.tolerance == Approx(0.03));
    CHECK(*t.buffer_budget == 32u << 20);
    REQUIRE(t.space.size() == 3);
    CHECK(t.space[0].labels == std::vector<std::string>{"256KiB", "1MiB", "4MiB", "16MiB", "64MiB"});
    CHECK(t.space[0].amounts.back() == 64.0 * 1024 * 1024);
    CHECK(t.space[0].socket_buffer);
    CHECK(t.space[1].amounts.empty());  // words: no amounts
    CHECK(t.space[2].labels == std::vector<std::string>{"pfifo", "fq_codel"});
    // The plan says what tune will search.
    auto plan = experiment::render_plan_text(*l.exp);
    CHECK_THAT(plan, Contains("`wanlab tune` (docs/tune.md): goal bulk.throughput (higher is better), within 3% of "
                              "the best, budget 30m") &&
                         Contains("at most 54 candidates") && Contains("constraint: ping.p99 <= 60ms") &&
                         Contains("sysctl.net.core.rmem_max: 256KiB, 1MiB, 4MiB, 16MiB, 64MiB"));
    CHECK(experiment::plan_json(*l.exp)["tune"]["space"][1]["values"][1] == "bbr");
    // A lower-is-better goal, and `direction` to say otherwise.
    auto lower =
        testing::load(kBase + "[tune]\ngoal = \"ping.rtt_p50\"\n[tune.space]\n\"link.qdisc\" = [\"fq_codel\"]\n");
    REQUIRE(lower.exp);
    CHECK_FALSE(lower.exp->tune->goal.higher_is_better);
}

TEST_CASE("[tune] errors are located and say what to write", "[experiment][tune]") {
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.thruput\"\n[tune.space]\n\"link.qdisc\" = [\"pfifo\"]\n"),
               Contains("exp.toml:12:8") && Contains("has no metric `thruput`; did you mean `throughput`?"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"blk.throughput\"\n[tune.space]\n\"link.qdisc\" = [\"pfifo\"]\n"),
               Contains("no probe named `blk`; did you mean `bulk`?"));
    CHECK_THAT(errors_of("[tune]\n[tune.space]\n\"link.qdisc\" = [\"pfifo\"]\n"), Contains("[tune] needs `goal`"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n"), Contains("[tune] needs [tune.space]"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n\"links.qdisc\" = [\"pfifo\"]\n"),
               Contains("[tune.space] key `links.qdisc` must start with link."));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n\"link.qdisc\" = []\n"),
               Contains("has no values"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n"
                         "\"sysctl.net.core.rmem_max\" = { from = \"1MiB\", to = \"4MiB\", scale = \"2x\" }\n"),
               Contains("`scale` must be \"xK\""));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n"
                         "\"sysctl.net.core.rmem_max\" = { from = \"4MiB\", to = \"1MiB\", scale = \"x2\" }\n"),
               Contains("must run upwards"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n"
                         "\"probe.bulk.congestion_control\" = { from = \"cubic\", to = \"bbr\", step = 1 }\n"),
               Contains("runs over sizes"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\nconstraints = [\"ping.rtt_p99 < 60ms\"]\n"
                         "[tune.space]\n\"link.qdisc\" = [\"pfifo\"]\n"),
               Contains("has no `<=` or `>=`"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\nconstraints = [\"ping.rtt_p99 <= 60\"]\n"
                         "[tune.space]\n\"link.qdisc\" = [\"pfifo\"]\n"),
               Contains("the constraint \"ping.rtt_p99 <= 60\""));
    CHECK_THAT(
        errors_of(
            "[tune]\ngoal = \"bulk.throughput\"\ntolerance = \"80%\"\n[tune.space]\n\"link.qdisc\" = [\"pfifo\"]\n"),
        Contains("`tolerance` must be above 0% and at most 50%"));
    // Each value is checked as a trial would take it, where it is written, before anything runs.
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n"
                         "\"sysctl.net.ipv4.tcp_rmem\" = [\"4096 131072 6291456\", \"4096 131072 65536\"]\n"),
               Contains("exp.toml:14:54") && Contains("must be ordered min <= default <= max"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n\"probe.bulk.streams\" = [1, 0]\n"),
               Contains("exp.toml:14:28") && Contains("`streams` = 0 is out of range"));
    // A key both swept and tuned: the sweep's points are the paths.
    CHECK_THAT(errors_of("[sweep]\n\"link.rtt\" = [\"20ms\", \"80ms\"]\n[tune]\ngoal = \"bulk.throughput\"\n"
                         "[tune.space]\n\"link.rtt\" = [\"10ms\"]\n"),
               Contains("is also a [sweep] key"));
    // tune makes its own variants.
    CHECK_THAT(errors_of("[[variant]]\nname = \"a\"\n[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n"
                         "\"link.qdisc\" = [\"pfifo\"]\n"),
               Contains("a file with [tune] declares no [[variant]]"));
    // More than 1,000 candidates.
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\n[tune.space]\n"
                         "\"sysctl.net.core.rmem_max\" = { from = 1, to = 100, step = 1 }\n"
                         "\"sysctl.net.core.wmem_max\" = { from = 1, to = 100, step = 1 }\n"),
               Contains("makes more than 1000 candidates"));
    CHECK_THAT(errors_of("[tune]\ngoal = \"bulk.throughput\"\nbuffer_budget = \"1MiB\"\n[tune.space]\n"
                         "\"sysctl.net.core.rmem_max\" = [\"4MiB\", \"16MiB\"]\n"),
               Contains("every value of `sysctl.net.core.rmem_max` is above buffer_budget"));
}

TEST_CASE("tune's candidates load as variants: each trial sets its candidate's keys on every path",
          "[experiment][tune]") {
    auto l = testing::load(kBase +
                           "[sweep]\n\"link.up.loss\" = [\"0%\", \"1%\"]\n[tune]\ngoal = \"bulk.throughput\"\n"
                           "[tune.space]\n\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\"]\n");
    REQUIRE(l.exp);
    const auto& key = l.exp->tune->space.at(0);
    CHECK(key.values == std::vector<std::string>{"\"cubic\"", "\"bbr\""});
    std::vector<experiment::MadeVariant> made{{"baseline", {}},
                                              {"congestion_control-bbr", {{key.path, key.values[1], key.value_at[1]}}}};
    auto with = testing::load(kBase +
                                  "[sweep]\n\"link.up.loss\" = [\"0%\", \"1%\"]\n[tune]\ngoal = \"bulk.throughput\"\n"
                                  "[tune.space]\n\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\"]\n",
                              {}, "exp.toml", &made);
    INFO(with.messages);
    REQUIRE(with.exp);
    REQUIRE(with.exp->trials.size() == 4);  // two paths x two candidates, point by point
    CHECK(with.exp->run.baseline == "baseline");
    CHECK(with.exp->trials[0].variant == "baseline");
    CHECK(with.exp->trials[1].variant == "congestion_control-bbr");
    CHECK(with.exp->trials[3].sweep.at(0).second == "1%");
    auto cc = [](const experiment::Trial& t) {
        auto it = t.probes.at(0).options.find("congestion_control");
        return it == t.probes.at(0).options.end() ? std::string() : std::get<std::string>(it->second);
    };
    CHECK(cc(with.exp->trials[1]) == "bbr");
    CHECK(cc(with.exp->trials[3]) == "bbr");
    CHECK(cc(with.exp->trials[0]) != "bbr");
}
