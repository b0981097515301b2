#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "experiment/plan.h"
#include "tests/support/load_helper.h"

using wanlab::testing::load;
using namespace std::chrono_literals;

TEST_CASE("a minimal experiment has one default trial and the documented defaults", "[experiment]") {
    auto l = load("");
    REQUIRE(l.exp);
    CHECK(l.messages.empty());
    const auto& e = *l.exp;
    CHECK(e.name == "exp");
    CHECK(e.variants == std::vector<std::string>{"default"});
    CHECK(e.run.baseline == "default");
    CHECK(e.run.repeats == 3);
    CHECK(e.run.duration == 10s);
    REQUIRE(e.trials.size() == 1);
    const auto& t = e.trials[0];
    CHECK(t.lab.mode == wanlab::experiment::LabSpec::Mode::netns);
    CHECK(t.lab.mtu == 1500);
    CHECK_FALSE(t.lab.offloads);
    CHECK_FALSE(t.link.up.impaired());
    CHECK(t.probes.empty());
}

TEST_CASE("rtt is split into half the delay each way and [link.up] overrides one direction", "[experiment]") {
    auto l = load(R"(
[link]
rtt = "40ms"
loss = "1%"
[link.up]
delay = "30ms"
rate = "10mbit"
)");
    REQUIRE(l.exp);
    const auto& t = l.exp->trials[0];
    CHECK(t.link.up.netem.delay == 30ms);
    CHECK(t.link.down.netem.delay == 20ms);
    CHECK(t.link.up.rate_bps == 10'000'000u);
    CHECK(t.link.down.rate_bps == 0u);
    CHECK(t.link.up.netem.loss.probability == Approx(0.01));
    CHECK(t.link.down.netem.loss.probability == Approx(0.01));
}

TEST_CASE("an unknown key is located and gets a did-you-mean", "[experiment][messages]") {
    auto l = load("[link]\ndleay = \"20ms\"\n");
    CHECK_FALSE(l.exp);
    CHECK(l.messages ==
          "exp.toml:2:1: error: unknown key `dleay` in [link]; did you mean `delay`?\n"
          " 2 | dleay = \"20ms\"\n"
          "   | ^~~~~\n");
}

TEST_CASE("an unknown top-level key is reported with the sections that exist", "[experiment][messages]") {
    auto l = load("name = \"x\"\n[lnik]\nrtt = \"1ms\"\n");
    CHECK(l.messages ==
          "exp.toml:2:2: error: unknown key `lnik` in the experiment; did you mean `link`?\n"
          " 2 | [lnik]\n"
          "   |  ^~~~\n");
}

TEST_CASE("a TOML syntax error is located", "[experiment][messages]") {
    auto l = load("[link]\ndelay = \"20ms\n");
    CHECK_FALSE(l.exp);
    CHECK(l.messages.starts_with("exp.toml:2:"));
    CHECK(l.messages.find("error: invalid TOML:") != std::string::npos);
}

TEST_CASE("jitter without delay names both keys", "[experiment][messages]") {
    auto l = load("[link]\njitter = \"5ms\"\n");
    CHECK(l.messages ==
          "exp.toml:2:1: error: `jitter` needs `delay`: netem varies the delay around a mean, so set one\n"
          " 2 | jitter = \"5ms\"\n"
          "   | ^~~~~~\n");
}

TEST_CASE("gap without reorder, and reorder without delay, each get their own message", "[experiment][messages]") {
    auto gap = load("[link]\ndelay = \"5ms\"\ngap = 3\n");
    CHECK(gap.messages ==
          "exp.toml:3:1: error: `gap` needs `reorder`: `gap` spaces the reordered packets\n"
          " 3 | gap = 3\n"
          "   | ^~~\n");
    auto reorder = load("[link]\nreorder = \"5%\"\n");
    CHECK(reorder.messages ==
          "exp.toml:2:1: error: `reorder` needs `delay`: netem reorders by sending some packets at once while the "
          "rest wait out the delay\n"
          " 2 | reorder = \"5%\"\n"
          "   | ^~~~~~~\n");
}

TEST_CASE("a correlation without its base and a distribution without jitter are errors", "[experiment][messages]") {
    auto corr = load("[link]\nloss_correlation = \"25%\"\n");
    CHECK(corr.messages.find("`loss_correlation` needs `loss`") != std::string::npos);
    auto dist = load("[link]\ndelay = \"10ms\"\ndistribution = \"normal\"\n");
    CHECK(dist.messages ==
          "exp.toml:3:1: error: `distribution` needs `jitter`: a distribution shapes the jitter\n"
          " 3 | distribution = \"normal\"\n"
          "   | ^~~~~~~~~~~~\n");
}

TEST_CASE("an ambiguous rate unit says what to write", "[experiment][messages]") {
    auto l = load("[link]\nrate = \"100mbps\"\n");
    CHECK(l.messages ==
          "exp.toml:2:8: error: `rate`: `100mbps` is ambiguous: tc reads `mbps` as bytes per second, many people as "
          "bits. Write \"100mbit\" for bits per second\n"
          " 2 | rate = \"100mbps\"\n"
          "   |        ^~~~~~~~~\n");
}

TEST_CASE("a sweep expands to the cross product, first key slowest, variants innermost", "[experiment][sweep]") {
    auto l = load(R"(
[sweep]
"link.rtt" = ["20ms", "40ms"]
"sysctl.net.core.rmem_max" = [212992, "16M", "64M"]
[[variant]]
name = "a"
[[variant]]
name = "b"
[variant.link]
loss = "1%"
)");
    REQUIRE(l.exp);
    const auto& t = l.exp->trials;
    REQUIRE(t.size() == 12);
    CHECK(l.exp->sweep_keys == std::vector<std::string>{"link.rtt", "sysctl.net.core.rmem_max"});
    CHECK(t[0].variant == "a");
    CHECK(t[1].variant == "b");
    CHECK(t[0].sweep == std::vector<std::pair<std::string, std::string>>{{"link.rtt", "20ms"},
                                                                         {"sysctl.net.core.rmem_max", "212992"}});
    CHECK(t[2].sweep[1].second == "16M");
    CHECK(t[6].sweep[0].second == "40ms");
    CHECK(t[6].link.up.netem.delay == 20ms);
    CHECK(t[1].link.up.netem.loss.probability == Approx(0.01));
    CHECK(t[0].link.up.netem.loss.model == wanlab::netem::Loss::Model::none);
    REQUIRE(t[3].sysctl.global.size() == 1);
    CHECK(t[3].sysctl.global[0].value == "16777216");
    for (std::size_t i = 0; i < t.size(); ++i) CHECK(t[i].index == i + 1);
}

TEST_CASE("sweep points can be named: the names label the trials, the values configure them", "[experiment][sweep]") {
    auto l = load(R"(
[sweep]
"sysctl.net.core.rmem_max" = { small = "212992", large = "32M" }
"link.rtt" = ["20ms", "40ms"]
)");
    REQUIRE(l.exp);
    INFO(l.messages);
    const auto& t = l.exp->trials;
    REQUIRE(t.size() == 4);
    CHECK(t[0].sweep == std::vector<std::pair<std::string, std::string>>{{"sysctl.net.core.rmem_max", "small"},
                                                                         {"link.rtt", "20ms"}});
    CHECK(t[2].sweep[0].second == "large");
    REQUIRE(t[2].sysctl.global.size() == 1);
    CHECK(t[2].sysctl.global[0].value == "33554432");
    CHECK(t[0].sysctl.global[0].value == "212992");
    // A table header still nests a path: [sweep.link] rtt = [...] is "link.rtt".
    auto nested = load("[sweep.link]\nrtt = [\"20ms\", \"40ms\"]\n");
    REQUIRE(nested.exp);
    CHECK(nested.exp->sweep_keys == std::vector<std::string>{"link.rtt"});
    // Named values through --set too, and the same key as a value of another kind is refused.
    auto set = load("[[probe]]\nname = \"p\"\nkind = \"rtt\"\n", {"sweep.\"link.rtt\"={near=\"20ms\", far=\"80ms\"}"});
    REQUIRE(set.exp);
    CHECK(set.exp->trials[1].sweep[0].second == "far");
    CHECK(set.exp->trials[1].link.up.netem.delay == 40ms);
    auto bad = load("[sweep]\n\"link.rtt\" = { near = \"fast\" }\n");
    CHECK_FALSE(bad.exp);
}

TEST_CASE("zip pairs sweep lists element by element and needs equal lengths", "[experiment][sweep]") {
    auto ok = load(R"(
[sweep]
mode = "zip"
"link.rtt" = ["20ms", "80ms"]
"link.rate" = ["100mbit", "1gbit"]
)");
    REQUIRE(ok.exp);
    REQUIRE(ok.exp->trials.size() == 2);
    CHECK(ok.exp->trials[1].link.up.netem.delay == 40ms);
    CHECK(ok.exp->trials[1].link.up.rate_bps == 1'000'000'000u);
    auto bad = load("[sweep]\nmode = \"zip\"\n\"link.rtt\" = [\"1ms\", \"2ms\"]\n\"link.loss\" = [\"1%\"]\n");
    CHECK(bad.messages ==
          "exp.toml:4:15: error: [sweep] mode = \"zip\" needs lists of one length: `link.loss` has 1 values, "
          "`link.rtt` has 2\n"
          " 4 | \"link.loss\" = [\"1%\"]\n"
          "   |               ^~~~~~\n");
}

TEST_CASE("a sweep naming a key that does not exist points at the sweep entry", "[experiment][sweep][messages]") {
    auto l = load("[sweep]\n\"link.jiter\" = [\"1ms\"]\n");
    CHECK(l.messages ==
          "exp.toml:2:1: error: unknown key `jiter` in [link]; did you mean `jitter`?\n"
          " 2 | \"link.jiter\" = [\"1ms\"]\n"
          "   | ^~~~~~~~~~~~\n");
    auto root = load("[sweep]\n\"links.rtt\" = [\"1ms\"]\n");
    CHECK(root.messages.find(
              "[sweep] key `links.rtt` must start with link., sysctl., probe., service. or lab.; did you mean "
              "`link.rtt`?") != std::string::npos);
}

TEST_CASE("a sweep value is checked like the key it sets", "[experiment][sweep][messages]") {
    auto l = load("[sweep]\n\"link.rtt\" = [\"20ms\", \"40\"]\n");
    CHECK(l.messages ==
          "exp.toml:2:23: error: `rtt`: `40` needs a unit: write \"40ms\", \"40us\" or \"40s\"\n"
          " 2 | \"link.rtt\" = [\"20ms\", \"40\"]\n"
          "   |                       ^~~~\n");
}

TEST_CASE("more than 10,000 trials is refused, and so is an empty sweep", "[experiment][sweep]") {
    auto big = load(R"(
[sweep]
"link.delay" = ["1ms","2ms","3ms","4ms","5ms","6ms","7ms","8ms","9ms","10ms"]
"link.loss" = ["1%","2%","3%","4%","5%","6%","7%","8%","9%","10%"]
"link.rate" = ["1mbit","2mbit","3mbit","4mbit","5mbit","6mbit","7mbit","8mbit","9mbit","10mbit"]
"link.jitter" = ["1ms","2ms","3ms","4ms","5ms","6ms","7ms","8ms","9ms","10ms"]
"link.duplicate" = ["1%", "2%"]
)");
    CHECK_FALSE(big.exp);
    CHECK(big.messages.find("the sweep makes more than 10000 trials (over 10000 sweep points x 1 variants)") !=
          std::string::npos);
    auto empty = load("[sweep]\n\"link.rtt\" = []\n");
    CHECK(empty.messages.find("[sweep] `link.rtt` is an empty list: the sweep would have no trials") !=
          std::string::npos);
}

TEST_CASE("exactly 10,000 trials is accepted", "[experiment][sweep]") {
    std::string list;
    for (int i = 1; i <= 100; ++i) list += (i > 1 ? ", " : "") + std::string("\"") + std::to_string(i) + "ms\"";
    auto l = load("[sweep]\n\"link.delay\" = [" + list + "]\n\"link.jitter\" = [" + list + "]\n");
    REQUIRE(l.exp);
    CHECK(l.exp->trials.size() == 10000);
    std::set<std::string> ids;
    for (const auto& t : l.exp->trials) ids.insert(t.id);
    CHECK(ids.size() == 10000);
}

TEST_CASE("trial ids depend only on variant and sweep values", "[experiment][sweep]") {
    auto a = load("[sweep]\n\"link.rtt\" = [\"20ms\", \"40ms\"]\n");
    auto b = load("[sweep]\n\"link.rtt\" = [\"10ms\", \"40ms\", \"20ms\"]\n[run]\nrepeats = 5\n");
    REQUIRE(a.exp);
    REQUIRE(b.exp);
    CHECK(a.exp->trials[0].id == b.exp->trials[2].id);
    CHECK(a.exp->trials[1].id == b.exp->trials[1].id);
    CHECK(a.exp->trials[0].id != a.exp->trials[1].id);
    CHECK(a.exp->trials[0].id.size() == 8);
}

TEST_CASE("variants need unique names and may only override link, sysctl and probe",
          "[experiment][variant][messages]") {
    auto dup = load("[[variant]]\nname = \"x\"\n[[variant]]\nname = \"x\"\n");
    CHECK(dup.messages ==
          "exp.toml:4:8: error: two variants are named \"x\": names must be unique\n"
          " 4 | name = \"x\"\n"
          "   |        ^~~\n");
    auto key = load("[[variant]]\nname = \"x\"\n[variant.run]\nrepeats = 1\n");
    CHECK(key.messages.find("unknown key `run` in [[variant]] #1") != std::string::npos);
    auto unknown = load("[[variant]]\nname = \"x\"\n[variant.link]\ndleay = \"1ms\"\n");
    CHECK(unknown.messages.find("exp.toml:4:1: error: unknown key `dleay` in [link]; did you mean `delay`?") !=
          std::string::npos);
}

TEST_CASE("the baseline is the first variant unless [run] names another", "[experiment][variant]") {
    auto first = load("[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n");
    REQUIRE(first.exp);
    CHECK(first.exp->run.baseline == "a");
    auto named = load("[run]\nbaseline = \"b\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n");
    REQUIRE(named.exp);
    CHECK(named.exp->run.baseline == "b");
    auto wrong = load("[run]\nbaseline = \"bb\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n");
    CHECK(wrong.messages ==
          "exp.toml:2:12: error: [run] baseline = \"bb\" names no variant; did you mean \"b\"?\n"
          " 2 | baseline = \"bb\"\n"
          "   |            ^~~~\n");
}

TEST_CASE("a --set override gets the same checks as the file, located in the argument", "[experiment][set]") {
    auto ok = load("[link]\nrtt = \"40ms\"\n[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n",
                   {"link.rtt=100ms", "probe.bulk.streams=4", "run.repeats=1", "sysctl.net.core.rmem_max=16M"});
    REQUIRE(ok.exp);
    const auto& t = ok.exp->trials[0];
    CHECK(t.link.up.netem.delay == 50ms);
    CHECK(std::get<std::int64_t>(t.probes[0].options.at("streams")) == 4);
    CHECK(ok.exp->run.repeats == 1u);
    CHECK(t.sysctl.global[0].value == "16777216");

    auto bad = load("[link]\nrtt = \"40ms\"\n", {"link.rtt=40"});
    CHECK(bad.messages ==
          "--set#1:1:10: error: `rtt`: `40` needs a unit: write \"40ms\", \"40us\" or \"40s\"\n"
          " 1 | link.rtt=40\n"
          "   |          ^~\n");
    auto unknown = load("", {"link.dleay=1ms"});
    CHECK(unknown.messages.find("--set#1:1:6: error: unknown key `dleay` in [link]; did you mean `delay`?") !=
          std::string::npos);
    auto form = load("", {"link.delay"});
    CHECK(form.messages.find("`--set link.delay` needs the form KEY=VALUE") != std::string::npos);
    auto probe = load("[[probe]]\nkind = \"rtt\"\n", {"probe.bulk.count=5"});
    CHECK(probe.messages.find("no [[probe]] named `bulk` (there are: `rtt`)") != std::string::npos);
}

TEST_CASE("a link profile supplies defaults that the file's own keys override", "[experiment][profile]") {
    auto l = load("[link]\nprofile = \"transatlantic\"\nloss = \"1%\"\n");
    REQUIRE(l.exp);
    const auto& t = l.exp->trials[0];
    CHECK(t.link.up.netem.delay == 36ms);
    CHECK(t.link.up.netem.loss.probability == Approx(0.01));
    CHECK(t.link.up.rate_bps == 1'000'000'000u);
    auto missing = load("[link]\nprofile = \"transatlantc\"\n");
    CHECK(missing.messages.find("error: no link profile named \"transatlantc\"; did you mean \"transatlantic\"?") !=
          std::string::npos);
}

TEST_CASE("a key the file sets in [link] beats the profile's per-direction value of it", "[experiment][profile]") {
    // lte sets [link.down] rate = 30mbit and [link.up] rate = 10mbit.
    auto l = load("[link]\nprofile = \"lte\"\nrate = \"50mbit\"\n");
    INFO(l.messages);
    REQUIRE(l.exp);
    CHECK(l.exp->trials[0].link.up.rate_bps == 50'000'000u);
    CHECK(l.exp->trials[0].link.down.rate_bps == 50'000'000u);
    // The file's own [link.up] is more specific still.
    auto up = load("[link]\nprofile = \"lte\"\nrate = \"50mbit\"\n[link.up]\nrate = \"5mbit\"\n");
    REQUIRE(up.exp);
    CHECK(up.exp->trials[0].link.up.rate_bps == 5'000'000u);
    CHECK(up.exp->trials[0].link.down.rate_bps == 50'000'000u);
    // Untouched keys keep the profile's per-direction values.
    auto plain = load("[link]\nprofile = \"lte\"\nloss = \"1%\"\n");
    REQUIRE(plain.exp);
    CHECK(plain.exp->trials[0].link.up.rate_bps == 10'000'000u);
    CHECK(plain.exp->trials[0].link.down.rate_bps == 30'000'000u);
}

TEST_CASE("a tuning profile fills [sysctl]", "[experiment][profile]") {
    auto l = load("[sysctl]\nprofile = \"high-bdp\"\n\"net.ipv4.tcp_congestion_control\" = \"bbr\"\n");
    REQUIRE(l.exp);
    const auto& s = l.exp->trials[0].sysctl;
    REQUIRE(s.global.size() == 2);
    CHECK(s.global[0].key == "net.core.rmem_max");
    CHECK(s.global[0].value == "268435456");
    const auto& client = s.per_host.at("client");
    auto cc = std::find_if(client.begin(), client.end(),
                           [](const auto& x) { return x.key == "net.ipv4.tcp_congestion_control"; });
    REQUIRE(cc != client.end());
    CHECK(cc->value == "bbr");
}

TEST_CASE("sysctls apply to the endpoints, host tables override, and global keys are one value",
          "[experiment][sysctl]") {
    auto l = load(R"(
[sysctl]
"net.ipv4.tcp_congestion_control" = "cubic"
net.core.wmem_max = "8M"
[sysctl.server]
"net.ipv4.tcp_congestion_control" = "bbr"
[sysctl.router]
"net.ipv4.ip_forward" = true
)");
    REQUIRE(l.exp);
    const auto& s = l.exp->trials[0].sysctl;
    CHECK(s.per_host.at("client")[0].value == "cubic");
    CHECK(s.per_host.at("server")[0].value == "bbr");
    CHECK(s.per_host.at("router")[0].key == "net.ipv4.ip_forward");
    CHECK(s.per_host.at("router")[0].value == "1");
    REQUIRE(s.global.size() == 1);
    CHECK(s.global[0].value == "8388608");
    auto clash = load("[sysctl.client]\n\"net.core.rmem_max\" = 1000\n[sysctl.server]\n\"net.core.rmem_max\" = 2000\n");
    CHECK(clash.messages.find("`net.core.rmem_max` is global (one value for the whole machine, even in a namespace "
                              "lab): it cannot be 2000 here and 1000 at line 2") != std::string::npos);
}

TEST_CASE("limit auto holds rate x (delay + jitter) with headroom, and a small explicit limit warns",
          "[experiment][limit]") {
    auto l = load("[link]\ndelay = \"100ms\"\nrate = \"1gbit\"\n");
    REQUIRE(l.exp);
    // 1 Gbit/s x 100 ms = 12.5 MB = 8334 packets of 1500 bytes; x1.5 = 12500.
    CHECK(l.exp->trials[0].link.up.netem.limit_packets == 12500u);
    auto small = load("[link]\ndelay = \"100ms\"\nrate = \"1gbit\"\nlimit = 1000\n");
    REQUIRE(small.exp);
    CHECK(small.exp->trials[0].link.up.netem.limit_packets == 1000u);
    CHECK(small.messages ==
          "exp.toml:4:1: warning: `limit` = 1000 packets is below the bandwidth-delay product of 8334 packets (1gbit "
          "x 100ms): netem will drop packets and cap throughput near 120mbit\n"
          " 4 | limit = 1000\n"
          "   | ^~~~~\n"
          "  = leave `limit` at \"auto\" unless the drops are what you want to study\n");
}

TEST_CASE("asserts must name a known metric, probe and variant", "[experiment][assert][messages]") {
    std::string base =
        "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n";
    auto ok = load(
        base + "[[assert]]\nmetric = \"throughput\"\nvariant = \"b\"\nmin_gain = \"20%\"\nat_least = \"100mbit\"\n");
    REQUIRE(ok.exp);
    REQUIRE(ok.exp->asserts.size() == 1);
    CHECK(ok.exp->asserts[0].probe == "bulk");
    CHECK(*ok.exp->asserts[0].at_least == Approx(1e8));
    CHECK(*ok.exp->asserts[0].min_gain == Approx(0.2));
    auto metric = load(base + "[[assert]]\nmetric = \"thruput\"\nat_least = \"1mbit\"\n");
    CHECK(metric.messages ==
          "exp.toml:9:10: error: unknown metric `thruput`; did you mean `throughput`?\n"
          " 9 | metric = \"thruput\"\n"
          "   |          ^~~~~~~~~\n"
          "  = metrics: throughput, retransmits, rtt, cwnd, rwnd_limited, sndbuf_limited, rcvbuf_granted, "
          "throughput_upload, throughput_download, delivery_rate, sndbuf_granted, fairness\n");
    auto variant = load(base + "[[assert]]\nmetric = \"rtt\"\nvariant = \"c\"\nat_most = \"50ms\"\n");
    CHECK(variant.messages.find("error: no variant named \"c\"") != std::string::npos);
    auto bound = load(base + "[[assert]]\nmetric = \"rtt\"\n");
    CHECK(bound.messages.find("[[assert]] #1 needs a bound: `at_least`, `at_most` or `min_gain`") != std::string::npos);
}

TEST_CASE("probe options are checked against the probe kind", "[experiment][probe][messages]") {
    auto l = load("[[probe]]\nkind = \"throughput\"\nstreems = 4\n");
    CHECK(l.messages ==
          "exp.toml:3:1: error: unknown key `streems` in [[probe]] \"throughput\" (kind throughput); did you mean "
          "`streams`?\n"
          " 3 | streems = 4\n"
          "   | ^~~~~~~\n");
    auto range = load("[[probe]]\nkind = \"throughput\"\nstreams = 0\n");
    CHECK(range.messages.find("`streams` = 0 is out of range: expected 1 to 128") != std::string::npos);
    auto defaults = load("[run]\nduration = \"3s\"\n[[probe]]\nkind = \"rr\"\n");
    REQUIRE(defaults.exp);
    const auto& p = defaults.exp->trials[0].probes[0];
    CHECK(std::get<std::int64_t>(p.options.at("duration")) == 3'000'000'000);
    CHECK(std::get<bool>(p.options.at("client_quickack")) == false);
    CHECK(std::get<std::int64_t>(p.options.at("request_size")) == 100);
}

TEST_CASE("host mode needs dev and target and refuses router sysctls", "[experiment][lab]") {
    auto l = load("[lab]\nmode = \"host\"\n");
    CHECK(l.messages.find("[lab] mode = \"host\" needs `dev`") != std::string::npos);
    CHECK(l.messages.find("[lab] mode = \"host\" needs `target`") != std::string::npos);
    auto ok = load("[lab]\nmode = \"host\"\ndev = \"eth0\"\ntarget = \"203.0.113.7\"\n[link]\ndelay = \"10ms\"\n");
    REQUIRE(ok.exp);
    auto cmds = wanlab::experiment::trial_commands(ok.exp->trials[0]);
    REQUIRE(cmds.size() >= 3);
    CHECK(cmds[0] == "tc qdisc replace dev eth0 root handle 1: htb default 1");
    CHECK(cmds[3] == "tc filter replace dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 203.0.113.7 flowid 1:2");
    CHECK(cmds[4] == "tc qdisc replace dev eth0 parent 1:2 handle 10: netem limit 12500 delay 10ms");
    auto router = load(
        "[lab]\nmode = \"host\"\ndev = \"eth0\"\ntarget = \"203.0.113.7\"\n[sysctl.router]\n\"net.ipv4.ip_forward\" = "
        "1\n");
    CHECK(router.messages.find("[sysctl.router] does not exist in this lab: its hosts take [sysctl.host]") !=
          std::string::npos);
}

TEST_CASE("host mode takes only probes that measure a remote target through the filter", "[experiment][lab][host]") {
    const std::string lab = "[lab]\nmode = \"host\"\ndev = \"eth0\"\n";
    auto ok = load(lab +
                   "target = \"203.0.113.7\"\n[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\n"
                   "[[probe]]\nname = \"b\"\nkind = \"throughput\"\ntool = \"iperf3\"\n"
                   "[[probe]]\nname = \"w\"\nkind = \"http\"\nurl = \"http://203.0.113.7:8080/\"\n");
    INFO(ok.messages);
    CHECK(ok.exp);
    auto builtin = load(lab + "target = \"203.0.113.7\"\n[[probe]]\nkind = \"throughput\"\n");
    CHECK(builtin.messages.find("probe `throughput` in [lab] mode = \"host\": the built-in throughput probe needs "
                                "wanlab's own receiver") != std::string::npos);
    auto icmp_port = load(lab + "target = \"203.0.113.7\"\nport = 80\n[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\n");
    CHECK(icmp_port.messages.find("ICMP carries no port") != std::string::npos);
    auto outside = load(lab + "target = \"203.0.113.7\"\n[[probe]]\nkind = \"http\"\nurl = \"http://198.51.100.1/\"\n");
    CHECK(outside.messages.find(
              "is outside [lab] target = \"203.0.113.7\": the probe would measure an unimpaired path") !=
          std::string::npos);
    auto other_port =
        load(lab + "target = \"203.0.113.7\"\nport = 443\n[[probe]]\nkind = \"http\"\nurl = \"http://203.0.113.7/\"\n");
    CHECK(other_port.messages.find("is outside") != std::string::npos);
    auto prefix = load(lab + "target = \"203.0.113.0/24\"\n[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\n");
    CHECK(prefix.messages.find("must be one address, not the prefix \"203.0.113.0/24\"") != std::string::npos);
    auto in_prefix =
        load(lab + "target = \"203.0.113.0/24\"\n[[probe]]\nkind = \"http\"\nurl = \"http://203.0.113.9/\"\n");
    INFO(in_prefix.messages);
    CHECK(in_prefix.exp);
}

TEST_CASE("a run happens in one place: host mode's interface and target do not vary between trials",
          "[experiment][lab][host]") {
    auto swept = load(
        "[lab]\nmode = \"host\"\ndev = \"eth0\"\ntarget = \"203.0.113.7\"\n[link]\ndelay = \"10ms\"\n"
        "[sweep]\n\"lab.target\" = [\"203.0.113.7\", \"203.0.113.8\"]\n");
    CHECK(swept.messages.find("[lab] target differs between trials (trial 2, variant default, against trial 1)") !=
          std::string::npos);
    CHECK(swept.messages.find(":8:1:") != std::string::npos);  // at the sweep key
    auto mtu = load("[sweep]\n\"lab.mtu\" = [1500, 9000]\n");
    INFO(mtu.messages);
    CHECK(mtu.exp);  // a namespace lab is rebuilt for it
}

TEST_CASE("the plan's JSON holds every trial in base units", "[experiment][plan]") {
    auto l = load(R"(
[link]
rtt = "40ms"
rate = "100mbit"
loss = "1%"
[sweep]
"sysctl.net.ipv4.tcp_rmem" = [[4096, 131072, 6291456], [4096, 131072, "64M"]]
[[probe]]
kind = "throughput"
)");
    REQUIRE(l.exp);
    auto j = wanlab::experiment::plan_json(*l.exp);
    REQUIRE(j["trials"].size() == 2);
    const auto& t = j["trials"][1];
    CHECK(t["link"]["up"]["delay"].get<double>() == Approx(0.02));
    CHECK(t["link"]["up"]["rate"].get<std::uint64_t>() == 100'000'000u);
    CHECK(t["link"]["up"]["loss"]["p"].get<double>() == Approx(0.01));
    CHECK(t["sysctl"]["client"]["net.ipv4.tcp_rmem"] == "4096 131072 67108864");
    CHECK(t["probes"][0]["options"]["duration"].get<double>() == Approx(10.0));
    CHECK(t["sweep"]["sysctl.net.ipv4.tcp_rmem"] == "[4096, 131072, 64M]");
    CHECK(t["commands"][0] ==
          "ip netns exec wanlab-RUN-router tc qdisc replace dev wl-rs root handle 1: netem limit 1000 delay 20ms loss "
          "random 1% rate 100mbit");
}

TEST_CASE("every shipped profile loads cleanly and names its description and source", "[experiment][profile]") {
    wanlab::experiment::ProfileLibrary lib({WANLAB_TEST_PROFILES});
    const std::map<std::string, std::set<std::string>> promised = {
        {"link",
         {"lan", "datacenter", "metro", "transcontinental", "transatlantic", "transpacific", "satellite-geo",
          "satellite-leo", "lte", "5g", "3g", "dsl", "cable", "lossy-wifi", "satellite-leo-handovers", "lte-handover"}},
        {"tuning", {"linux-default", "high-bdp", "low-latency"}}};
    for (const auto& [kind, names] : promised) {
        std::set<std::string> found;
        for (const auto& e : lib.list(kind)) {
            INFO(kind << " profile " << e.name << " (" << e.path << ")");
            found.insert(e.name);
            CHECK(e.summary.error.empty());
            CHECK_FALSE(e.summary.description.empty());
            CHECK_FALSE(e.summary.source.empty());
            auto l = load("[" + std::string(kind == "link" ? "link" : "sysctl") + "]\nprofile = \"" + e.name + "\"\n");
            CHECK(l.exp);
            CHECK(l.messages == "");
        }
        for (const auto& name : names) CHECK(found.count(name) == 1);
    }
}

TEST_CASE("a profile in the user's folder hides the shipped one and may describe itself in a comment",
          "[experiment][profile]") {
    auto dir = std::filesystem::temp_directory_path() / "wanlab-profiles-test";
    std::filesystem::create_directories(dir / "link");
    std::ofstream(dir / "link" / "transatlantic.toml") << "# My own transatlantic\n\n[link]\nrtt = \"80ms\"\n";
    wanlab::experiment::ProfileLibrary lib({dir.string(), WANLAB_TEST_PROFILES});
    auto entries = lib.list("link");
    auto it = std::find_if(entries.begin(), entries.end(), [](const auto& e) { return e.name == "transatlantic"; });
    REQUIRE(it != entries.end());
    CHECK(it->path == (dir / "link" / "transatlantic.toml").string());
    CHECK(it->shadowed == std::vector<std::string>{std::string(WANLAB_TEST_PROFILES) + "/link/transatlantic.toml"});
    CHECK(it->summary.description == "My own transatlantic");
    CHECK(it->summary.source.empty());
    wanlab::config::Documents docs;
    wanlab::Diagnostics diag;
    auto exp =
        wanlab::experiment::load_experiment("exp.toml", "[link]\nprofile = \"transatlantic\"\n", {}, lib, docs, diag);
    REQUIRE(exp);
    CHECK(exp->trials[0].link.up.netem.delay == 40ms);
    std::filesystem::remove_all(dir);
    CHECK(wanlab::experiment::summarize_profile("description = [").error.find("invalid TOML at line 1") == 0);
}

TEST_CASE("the plan predicts what the kernel makes of a probe's buffer ask, per trial and tool", "[experiment][plan]") {
    auto l = load(R"(name = "clamps"
[[variant]]
name = "small"
[variant.sysctl]
"net.core.rmem_max" = 212992
"net.core.wmem_max" = 212992
[[variant]]
name = "large"
[variant.sysctl]
"net.core.rmem_max" = "64M"
"net.core.wmem_max" = "64M"
[[probe]]
name = "builtin"
kind = "throughput"
rcvbuf = "32M"
[[probe]]
name = "iperf"
kind = "throughput"
tool = "iperf3"
rcvbuf = "16M"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    REQUIRE(l.exp->trials.size() == 2);
    auto small = wanlab::experiment::buffer_clamps(l.exp->trials[0]);
    REQUIRE(small.size() == 3);
    CHECK(small[0].text() ==
          "probe builtin asks rcvbuf = 32MiB; net.core.rmem_max = 208KiB grants 416KiB (twice the maximum, not twice "
          "the ask): the built-in probe measures with that");
    CHECK_FALSE(small[0].refused);
    CHECK(small[1].refused);  // iperf3 -w: refused by both maxima
    CHECK(small[1].key == "net.core.rmem_max");
    CHECK(small[2].key == "net.core.wmem_max");
    CHECK(small[1].text() ==
          "probe iperf runs iperf3 -w 16MiB, which net.core.rmem_max = 208KiB cannot grant (the kernel gives twice the "
          "ask, up to 416KiB): iperf3 refuses (\"socket buffer size not set correctly\") and these measurements fail; "
          "raise net.core.rmem_max to at least 8MiB, or leave rcvbuf and sndbuf at 0 for autotuning");
    CHECK(wanlab::experiment::buffer_clamps(l.exp->trials[1]).empty());  // 64M grants both
    auto text = wanlab::experiment::render_plan_text(*l.exp);
    CHECK(text.find("    note: probe iperf runs iperf3 -w 16MiB") != std::string::npos);
}

TEST_CASE("a group's probes share one duration, and an rtt member without `count` probes throughout", "[experiment]") {
    auto l = load(R"(
[[probe]]
name = "up"
kind = "throughput"
group = "load"
duration = "20s"
[[probe]]
name = "ping"
kind = "rtt"
interval = "50ms"
group = "load"
[[probe]]
name = "counted"
kind = "rtt"
count = 10
group = "load"
[[probe]]
name = "idle"
kind = "rtt"
[[assert]]
probe = "load"
metric = "fairness"
at_least = "90%"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& p = l.exp->trials[0].probes;
    auto opt = [&](std::size_t i, const char* o) { return std::get<std::int64_t>(p[i].options.at(o)); };
    CHECK(opt(1, "duration") == 20'000'000'000);  // taken from `up`
    CHECK(opt(1, "count") == 400);                // 20 s at 50 ms
    CHECK(opt(2, "count") == 10);                 // written: kept
    CHECK(opt(3, "duration") == 10'000'000'000);  // alone: [run] duration
    CHECK(opt(3, "count") == 100);
    REQUIRE(l.exp->asserts.size() == 1);
    CHECK(l.exp->asserts[0].probe == "load");
}

TEST_CASE("a group of one, a group named like a probe and disagreeing durations are located errors",
          "[experiment][messages]") {
    auto l = load(R"([[probe]]
name = "up"
kind = "throughput"
group = "up"
)");
    CHECK_FALSE(l.exp);
    CHECK(l.messages ==
          "exp.toml:1:1: error: probe `up` is the only probe of group `up`: a group runs probes at the "
          "same time\n"
          " 1 | [[probe]]\n"
          "   | ^~~~~~~~~\n"
          "  = give another probe the same `group`, or remove `group`\n");
    l = load(R"([[probe]]
name = "up"
kind = "throughput"
group = "rtt"
duration = "5s"
[[probe]]
kind = "rtt"
group = "rtt"
duration = "6s"
)");
    CHECK_FALSE(l.exp);
    CHECK_THAT(l.messages,
               Catch::Contains("error: group `rtt` has the name of a probe") &&
                   Catch::Contains("exp.toml:6:1: error: probes `up` and `rtt` of group `rtt` give different "
                                   "`duration`s (5s and 6s): a group runs for one duration"));
    l = load("[[probe]]\nkind = \"rtt\"\ngroup = \"two words\"\n");
    CHECK_THAT(l.messages, Catch::Contains("group name \"two words\" must be 1-64 letters"));
}

TEST_CASE("a group's metrics are what an assert on it may name", "[experiment][messages]") {
    auto l = load(R"([[probe]]
kind = "throughput"
group = "load"
[[probe]]
kind = "rtt"
group = "load"
[[assert]]
probe = "load"
metric = "rtt_p50"
at_most = "50ms"
)");
    CHECK_FALSE(l.exp);
    CHECK_THAT(l.messages, Catch::Contains("metrics: fairness, throughput, flows, members"));
}

TEST_CASE("a udp probe without `rate` sends at its default 1 Mbit/s, in bit/s like a written one", "[experiment]") {
    // The fuzzer found the default stored as the text "1mbit": option_int() then threw.
    auto l = load("[[probe]]\nkind = \"udp\"\n");
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& p = l.exp->trials[0].probes[0];
    CHECK(std::get<std::int64_t>(p.options.at("rate")) == 1'000'000);
    CHECK(std::get<std::int64_t>(p.options.at("size")) == 1460);
    auto bad = load("[[probe]]\nkind = \"udp\"\nrate = 0\nsize = 10\n");
    CHECK_THAT(bad.messages, Catch::Contains("`rate` must be above zero") &&
                                 Catch::Contains("`size` = 10 is outside 24-65507 bytes"));
}

TEST_CASE("[lab] ip chooses the lab's families, and a probe's family must be one the lab has", "[experiment][ipv6]") {
    auto v4 = load("[[probe]]\nkind = \"rtt\"\n");
    REQUIRE(v4.exp);
    CHECK(v4.exp->trials[0].lab.ip == wanlab::experiment::LabSpec::Ip::v4);
    auto dual = load(
        "[lab]\nip = \"dual\"\n[[probe]]\nkind = \"rtt\"\nfamily = \"ipv6\"\n"
        "[[probe]]\nname = \"four\"\nkind = \"rtt\"\nfamily = \"ipv4\"\n");
    INFO(dual.messages);
    REQUIRE(dual.exp);
    CHECK(dual.exp->trials[0].lab.has_ipv4());
    CHECK(dual.exp->trials[0].lab.has_ipv6());
    CHECK(wanlab::experiment::plan_json(*dual.exp)["trials"][0]["lab"]["ip"] == "dual");

    auto missing = load("[[probe]]\nkind = \"rtt\"\nfamily = \"ipv6\"\n");
    CHECK_THAT(missing.messages, Catch::Contains("probe `rtt` has family = \"ipv6\", but [lab] ip = \"ipv4\" gives no "
                                                 "IPv6 address") &&
                                     Catch::Contains("set [lab] ip = \"dual\""));
    auto only6 = load("[lab]\nip = \"ipv6\"\n[[probe]]\nkind = \"rtt\"\nfamily = \"ipv4\"\n");
    CHECK_THAT(only6.messages, Catch::Contains("gives no IPv4 address"));
    auto bad = load("[lab]\nip = \"ipv5\"\n");
    CHECK_THAT(bad.messages, Catch::Contains("ipv5"));
    auto host = load("[lab]\nmode = \"host\"\ndev = \"eth0\"\ntarget = \"203.0.113.7\"\nip = \"dual\"\n");
    CHECK_THAT(host.messages, Catch::Contains("`ip` chooses the namespace lab's addresses"));
}

TEST_CASE("hping3 is refused where a probe measures over IPv6, by family or by the lab's", "[experiment][ipv6]") {
    const std::string probe = "[[probe]]\nkind = \"rtt\"\ntool = \"hping3\"\nmethod = \"tcp\"\n";
    auto by_family = load("[lab]\nip = \"dual\"\n" + probe + "family = \"ipv6\"\n");
    CHECK_THAT(by_family.messages, Catch::Contains("hping3 speaks IPv4 only, and this probe measures over IPv6"));
    auto by_lab = load("[lab]\nip = \"ipv6\"\n" + probe);
    CHECK_THAT(by_lab.messages, Catch::Contains("hping3 speaks IPv4 only"));
    auto dual_auto = load("[lab]\nip = \"dual\"\n" + probe);  // auto = IPv4 in a dual lab
    INFO(dual_auto.messages);
    CHECK(dual_auto.exp);
}

TEST_CASE("host mode measures an IPv6 target, and a family other than the target's is refused",
          "[experiment][ipv6][host]") {
    const std::string lab = "[lab]\nmode = \"host\"\ndev = \"eth0\"\n";
    auto ok = load(lab + "target = \"2001:db8::7\"\n[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\n");
    INFO(ok.messages);
    CHECK(ok.exp);
    auto other =
        load(lab + "target = \"2001:db8::7\"\n[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\nfamily = \"ipv4\"\n");
    CHECK_THAT(other.messages, Catch::Contains("but [lab] target = \"2001:db8::7\" gives no IPv4 address") &&
                                   Catch::Contains("remove `family`"));
}

TEST_CASE("hosts mode takes an IPv6 server address, written or in the ssh destination", "[experiment][ipv6][hosts]") {
    const std::string head = "[lab]\nmode = \"hosts\"\n[hosts.client]\nssh = \"local\"\n[hosts.server]\n";
    auto written = load(head + "ssh = \"lab-server\"\naddress = \"2001:db8::9\"\n");
    INFO(written.messages);
    REQUIRE(written.exp);
    CHECK(written.exp->trials[0].lab.machine("server")->address == "2001:db8::9");
    auto from_ssh = load(head + "ssh = \"root@2001:db8::9\"\n");
    INFO(from_ssh.messages);
    REQUIRE(from_ssh.exp);
    CHECK(from_ssh.exp->trials[0].lab.machine("server")->address == "2001:db8::9");
    auto bad = load(head + "ssh = \"lab-server\"\naddress = \"2001:db8::/64\"\n");
    CHECK_THAT(bad.messages, Catch::Contains("must be one IPv4 or IPv6 address"));
}

TEST_CASE("repeats = \"auto\" takes min_repeats, max_repeats and precision, and the plan gives the range",
          "[experiment][repeats]") {
    auto l = load(
        "[[probe]]\nname = \"p\"\nkind = \"rtt\"\ncount = 5\n[run]\nrepeats = \"auto\"\nmax_repeats = 12\n"
        "precision = \"2%\"\n");
    REQUIRE(l.exp);
    CHECK(l.messages.empty());
    const auto& run = l.exp->run;
    CHECK(run.adaptive);
    CHECK(run.min_repeats == 3u);
    CHECK(run.max_repeats == 12u);
    CHECK(run.precision == Approx(0.02));
    CHECK(run.first_repeats() == 3u);
    auto text = wanlab::experiment::render_plan_text(*l.exp);
    CHECK_THAT(text, Catch::Contains("repeats auto: 3 per probe, then until the mean's 95% interval is within +-2% "
                                     "(Stein's two-stage rule), at most 12"));
    auto json = wanlab::experiment::plan_json(*l.exp);
    CHECK(json["run"]["repeats"] == "auto");
    CHECK(json["run"]["max_repeats"] == 12);

    auto fixed = load("[run]\nrepeats = 4\n");
    REQUIRE(fixed.exp);
    CHECK_FALSE(fixed.exp->run.adaptive);
    CHECK(fixed.exp->run.first_repeats() == 4u);
}

TEST_CASE("the adaptive keys are refused without repeats = \"auto\", and out of range",
          "[experiment][repeats][messages]") {
    auto word = load("[run]\nrepeats = \"many\"\n");
    CHECK_FALSE(word.exp);
    CHECK_THAT(word.messages,
               Catch::StartsWith("exp.toml:2:11: error: `repeats` must be a count or \"auto\", not \"many\""));

    auto alone = load("[run]\nmax_repeats = 5\n");
    CHECK_FALSE(alone.exp);
    CHECK_THAT(alone.messages,
               Catch::StartsWith("exp.toml:2:1: error: `max_repeats` sets the adaptive repeats: it needs "
                                 "`repeats = \"auto\"`"));

    auto fixed = load("[run]\nrepeats = 3\nprecision = \"5%\"\n");
    CHECK_FALSE(fixed.exp);
    CHECK_THAT(fixed.messages,
               Catch::Contains("`precision` sets the adaptive repeats, and `repeats` is a fixed count"));

    auto crossed = load("[run]\nrepeats = \"auto\"\nmin_repeats = 6\nmax_repeats = 4\n");
    CHECK_FALSE(crossed.exp);
    CHECK_THAT(crossed.messages, Catch::Contains("error: `min_repeats` (6) is above `max_repeats` (4)"));

    auto below_default = load("[run]\nrepeats = \"auto\"\nmax_repeats = 2\n");
    CHECK_FALSE(below_default.exp);
    CHECK_THAT(below_default.messages,
               Catch::Contains("`max_repeats` (2) is below `min_repeats` (3, the default when not given)"));

    auto one = load("[run]\nrepeats = \"auto\"\nmin_repeats = 1\n");
    CHECK_FALSE(one.exp);
    CHECK_THAT(one.messages, Catch::Contains("min_repeats"));

    auto zero = load("[run]\nrepeats = \"auto\"\nprecision = \"0%\"\n");
    CHECK_FALSE(zero.exp);
    CHECK_THAT(zero.messages, Catch::Contains("`precision` must be above 0% and at most 100%"));

    auto bare = load("[run]\nrepeats = \"auto\"\nprecision = 0.05\n");
    CHECK_FALSE(bare.exp);
    CHECK_THAT(bare.messages, Catch::Contains("`precision` must be a percentage string"));
}

TEST_CASE("variants alone are held to the 10000-trial cap, as a sweep is", "[experiment][security]") {
    std::string text = "[[probe]]\nkind = \"rtt\"\n";
    for (int i = 0; i < 10'001; ++i) text += "[[variant]]\nname = \"v" + std::to_string(i) + "\"\n";
    auto l = load(text);
    CHECK_FALSE(l.exp);
    CHECK_THAT(l.messages, Catch::Contains("more than 10000 variants (10001): an experiment has at most 10000 trials"));
}
