// Experiments across machines without a network: [lab] mode = "hosts" as the loader reads it,
// ssh's command line and its quoting, the hello's version check, a service on the wire, and
// the sysctls each machine gets. The machines themselves: tests/remote/hosts_root_test.cpp.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <catch2/catch.hpp>

#include "core/address.h"
#include "core/version.h"
#include "experiment/plan.h"
#include "lab/ssh_guard.h"
#include "netem/attributes.h"
#include "netem/tc_command.h"
#include "remote/channel.h"
#include "remote/flows.h"
#include "remote/hosts.h"
#include "remote/protocol.h"
#include "remote/ssh.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;
using wanlab::testing::load;

namespace {

const std::string kHosts = R"([lab]
mode = "hosts"
[hosts]
ssh_config = "/home/me/.ssh/lab_config"
[hosts.client]
ssh = "local"
[hosts.server]
ssh = "root@203.0.113.7"
wanlab = "/opt/wanlab/bin/wanlab"
)";

}  // namespace

TEST_CASE("hosts mode reads each machine with its ssh, address and wanlab", "[remote]") {
    auto l = load(kHosts +
                  "[sysctl.server]\n\"net.ipv4.tcp_rmem\" = [4096, 131072, \"64M\"]\n[[probe]]\nkind = \"rtt\"\nmethod "
                  "= \"icmp\"\n");
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& lab = l.exp->trials[0].lab;
    CHECK(lab.mode == experiment::LabSpec::Mode::hosts);
    CHECK(lab.ssh_config == "/home/me/.ssh/lab_config");
    REQUIRE(lab.machines.size() == 2);
    CHECK(lab.machines[0].name == "client");
    CHECK(lab.machines[0].ssh == "local");
    CHECK(lab.machines[1].ssh == "root@203.0.113.7");
    CHECK(lab.machines[1].address == "203.0.113.7");  // from the ssh host, as probes need it
    CHECK(lab.machines[1].wanlab == "/opt/wanlab/bin/wanlab");
    CHECK(lab.hosts() == std::vector<std::string>{"client", "server"});
    // Each machine's own sysctls: [sysctl] on both, [sysctl.ROLE] on its own.
    auto server = remote::machine_sysctls(l.exp->trials[0], "server");
    REQUIRE(server.size() == 1);
    CHECK(server[0].first == "net.ipv4.tcp_rmem");
    CHECK(remote::machine_sysctls(l.exp->trials[0], "client").empty());
}

TEST_CASE("hosts mode refuses what it cannot do, where it is written", "[remote][messages]") {
    // An ssh destination that would be an option; a server without an IPv4 address to probe.
    auto l = load(R"([lab]
mode = "hosts"
[hosts.client]
ssh = "local"
[hosts.server]
ssh = "-oProxyCommand=touch /tmp/x"
)");
    CHECK_FALSE(l.exp);
    CHECK_THAT(l.messages, Contains("exp.toml:6:7: error: `ssh` = \"-oProxyCommand=touch /tmp/x\": it starts with '-', "
                                    "which ssh would read as an option"));
    l = load("[lab]\nmode = \"hosts\"\n[hosts.client]\nssh = \"local\"\n[hosts.server]\nssh = \"lab-server\"\n");
    CHECK_THAT(l.messages, Contains("[hosts.server] needs `address`"));
    // A client machine other than this one runs the built-in probes through its agent, not a
    // command of this machine's.
    const std::string remote_client =
        "[lab]\nmode = \"hosts\"\n[hosts.client]\nssh = \"me@198.51.100.1\"\n[hosts.server]\nssh = "
        "\"root@198.51.100.2\"\n";
    l = load(remote_client + "[[probe]]\nkind = \"throughput\"\n");
    INFO(l.messages);
    CHECK(l.exp);
    l = load(remote_client + "[[probe]]\nkind = \"command\"\ncommand = [\"true\"]\n");
    CHECK_THAT(l.messages, Contains("a command probe runs on the machine wanlab runs on, and [hosts.client] is "
                                    "another one"));
    // The built-in probe against a service (its own server it would have); an interface only
    // the client's.
    l = load(kHosts + "[link]\nrtt = \"40ms\"\n[[probe]]\nkind = \"throughput\"\nserver_port = 5201\n");
    CHECK_THAT(l.messages, Contains("probe `throughput` in [lab] mode = \"hosts\" measures against the server "
                                    "machine: the built-in throughput probe needs wanlab's own receiver"));
    CHECK_THAT(l.messages, !Contains("[link]"));
    l = load(kHosts + "dev = \"eth0\"\n");
    CHECK_THAT(l.messages, Contains("unknown key") && Contains("dev"));
    l = load(std::string(R"([lab]
mode = "hosts"
[hosts.client]
ssh = "local"
dev = "eth0; reboot"
[hosts.server]
ssh = "root@203.0.113.7"
)"));
    CHECK_THAT(l.messages, Contains("exp.toml:5:7: error: `dev` = \"eth0; reboot\""));
    // [hosts] outside hosts mode, and hosts mode without machines.
    l = load("[hosts.client]\nssh = \"local\"\n");
    CHECK_THAT(l.messages, Contains("[hosts] applies only to [lab] mode = \"hosts\""));
    l = load("[lab]\nmode = \"hosts\"\n");
    CHECK_THAT(l.messages, Contains("needs [hosts.client] and [hosts.server]"));
}

TEST_CASE("ssh gets the remote command as one string of quoted words, after its options and --", "[remote]") {
    remote::Destination d{"server", "root@203.0.113.7", "/home/me/cfg", "/opt/my wanlab/wanlab'; rm -rf /; $(x)"};
    auto argv = remote::agent_argv(d, "/tmp/ctl", "/usr/bin/wanlab");
    REQUIRE(argv.size() >= 4);
    CHECK(argv[0] == "ssh");
    CHECK(argv[1] == "-F");
    CHECK(argv[2] == "/home/me/cfg");
    auto has = [&](const std::string& o) { return std::find(argv.begin(), argv.end(), o) != argv.end(); };
    CHECK(has("BatchMode=yes"));
    CHECK(has("ControlMaster=auto"));
    CHECK(has("ControlPath=/tmp/ctl/%C"));
    CHECK(argv[argv.size() - 3] == "--");
    CHECK(argv[argv.size() - 2] == "root@203.0.113.7");
    CHECK(argv.back() == "'/opt/my wanlab/wanlab'\\''; rm -rf /; $(x)' agent");  // plain words stay plain
    // A local machine runs the agent itself, this wanlab unless the file names another.
    remote::Destination local{"client", "local", "", "wanlab"};
    CHECK(remote::agent_argv(local, "/tmp/ctl", "/usr/bin/wanlab") ==
          std::vector<std::string>{"/usr/bin/wanlab", "agent"});
    // A destination ssh would read as an option never reaches it.
    remote::Destination bad{"server", "-oProxyCommand=x", "", "wanlab"};
    CHECK_THROWS_WITH(remote::agent_argv(bad, "/tmp/ctl", "w"), Contains("starts with '-'"));
    CHECK(addr::ssh_destination_problem("me@host name") == "it holds whitespace or a control character");
    CHECK(addr::ssh_destination_problem("lab-alias").empty());
}

TEST_CASE("the controller refuses an agent of another version with what to do", "[remote]") {
    auto same = remote::hello("lab-2", "6.1.0-28-amd64", "x86_64");
    CHECK(same["agent"] == "wanlab");
    CHECK(remote::hello_problem(same, "server", "wanlab").empty());
    auto older = same;
    older["version"] = "0.0.1";
    CHECK_THAT(remote::hello_problem(older, "server", "/opt/wanlab"),
               Contains("server: `/opt/wanlab` there is wanlab 0.0.1") &&
                   Contains(std::string("this is wanlab ") + kVersion) &&
                   Contains("install the same version on both machines"));
}

TEST_CASE("a service crosses the wire whole, and a template name that is a path does not", "[remote]") {
    services::ServiceSpec s;
    s.name = "web";
    s.host = "server";
    s.command = {"nginx", "-c", "{dir}/nginx.conf"};
    s.ready.kind = services::ReadyCheck::Kind::port;
    s.ready.port = 8080;
    s.ready.timeout = std::chrono::seconds(7);
    s.stop_timeout = std::chrono::seconds(3);
    s.files.push_back({"nginx.conf", "nginx/nginx.conf", "listen {server}:8080;", {}});
    s.vars = {{"nodelay", "off"}};
    auto back = remote::service_of(remote::service_json(s));
    CHECK(back.name == "web");
    CHECK(back.command == s.command);
    CHECK(back.ready.kind == services::ReadyCheck::Kind::port);
    CHECK(back.ready.port == 8080);
    CHECK(back.ready.timeout == std::chrono::seconds(7));
    CHECK(back.stop_timeout == std::chrono::seconds(3));
    REQUIRE(back.files.size() == 1);
    CHECK(back.files[0].text == "listen {server}:8080;");
    CHECK(back.vars == s.vars);
    auto j = remote::service_json(s);
    j["files"][0]["name"] = "../../etc/cron.d/x";
    CHECK_THROWS_WITH(remote::service_of(j), Contains("is not a plain name"));
}

TEST_CASE("link conditions across machines go on the client's interface toward the server, in the plan too",
          "[remote]") {
    auto l = load(R"([lab]
mode = "hosts"
[hosts.client]
ssh = "local"
dev = "eth1"
[hosts.server]
ssh = "root@203.0.113.7"
[link]
rtt = "40ms"
[[probe]]
kind = "rtt"
method = "icmp"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    CHECK(l.exp->trials[0].lab.machines[0].dev == "eth1");
    auto cmds = experiment::trial_commands(l.exp->trials[0]);
    auto joined = fmt::format("{}", fmt::join(cmds, "\n"));
    CHECK_THAT(joined, Contains("tc qdisc replace dev eth1 root handle 1: htb default 1") &&
                           Contains("match ip dst 203.0.113.7") && Contains("delay 20ms") &&
                           Contains("ip link add wlifb-eth1 type ifb") && Contains("match ip src 203.0.113.7"));
}

TEST_CASE("link conditions and a connection cross the wire exactly", "[remote]") {
    auto l = load(kHosts +
                  "[link]\nrtt = \"40ms\"\njitter = \"2ms\"\nloss = \"1%\"\nrate = \"20mbit\"\n"
                  "shaper = \"htb\"\nqdisc = \"fq_codel\"\n[link.down]\ndelay = \"7ms\"\n"
                  "slot = { min_delay = \"1ms\", max_delay = \"3ms\", packets = 32 }\n");
    INFO(l.messages);
    REQUIRE(l.exp);
    for (const auto* d : {&l.exp->trials[0].link.up, &l.exp->trials[0].link.down}) {
        auto j = remote::direction_json(*d);
        auto back = remote::direction_of(nlohmann::json::parse(j.dump()));
        CHECK(remote::direction_json(back) == j);
        CHECK(netem::tc_commands(back, "eth0", "", 1500) == netem::tc_commands(*d, "eth0", "", 1500));
    }
    auto j = remote::direction_json(l.exp->trials[0].link.up);
    j["queue"] = 99;
    CHECK_THROWS_WITH(remote::direction_of(j), Contains("unknown shaper or queue"));
    j.erase("netem");
    CHECK_THROWS_WITH(remote::direction_of(j), Contains("link conditions as the controller sent them"));
    netem::Flow f{"198.18.9.1", 40022, "198.18.9.2", 22};
    auto g = remote::flow_of(remote::flow_json(f));
    CHECK(g.local == f.local);
    CHECK(g.local_port == 40022);
    CHECK(g.peer == f.peer);
    CHECK(g.peer_port == 22);
    CHECK_THROWS_WITH(remote::flow_of(nlohmann::json{{"local", 1}}), Contains("a connection as the controller"));
}

namespace {

// For each row of netem's attribute table, a [link] that sets its key (after any keys it
// needs, which the loader's cross-field rules ask for): {row key, {needed keys, its line}}.
// A row added without a sample here fails the test below, as does one the wire drops.
const std::map<std::string, std::pair<std::string, std::string>> kRowSamples = {
    {"delay", {"", "delay = \"300s\"\n"}},
    {"jitter", {"delay = \"10ms\"\n", "jitter = \"2ms\"\n"}},
    {"correlation", {"delay = \"10ms\"\njitter = \"2ms\"\n", "correlation = \"25%\"\n"}},
    {"distribution", {"delay = \"10ms\"\njitter = \"2ms\"\n", "distribution = \"pareto\"\n"}},
    {"limit", {"", "limit = 5000\n"}},
    {"loss",
     {"", "loss = { model = \"state\", p13 = \"1%\", p31 = \"90%\", p32 = \"5%\", p23 = \"8%\", p14 = \"0.1%\" }\n"}},
    {"loss_correlation", {"loss = \"1%\"\n", "loss_correlation = \"10%\"\n"}},
    {"duplicate", {"", "duplicate = \"2%\"\n"}},
    {"duplicate_correlation", {"duplicate = \"2%\"\n", "duplicate_correlation = \"5%\"\n"}},
    {"reorder", {"delay = \"10ms\"\n", "reorder = \"25%\"\n"}},
    {"reorder_correlation", {"delay = \"10ms\"\nreorder = \"25%\"\n", "reorder_correlation = \"50%\"\n"}},
    {"gap", {"delay = \"10ms\"\nreorder = \"25%\"\n", "gap = 5\n"}},
    {"corrupt", {"", "corrupt = \"0.1%\"\n"}},
    {"corrupt_correlation", {"corrupt = \"0.1%\"\n", "corrupt_correlation = \"3%\"\n"}},
    {"rate", {"", "rate = \"5gbit\"\n"}},
    {"packet_overhead", {"rate = \"5gbit\"\n", "packet_overhead = -4\n"}},
    {"cell_size", {"rate = \"5gbit\"\n", "cell_size = 48\n"}},
    {"cell_overhead", {"rate = \"5gbit\"\ncell_size = 48\n", "cell_overhead = 5\n"}},
    {"shaper", {"rate = \"20mbit\"\n", "shaper = \"htb\"\n"}},
    {"qdisc", {"rate = \"20mbit\"\nshaper = \"htb\"\n", "qdisc = { kind = \"pie\", target = \"20ms\", ecn = true }\n"}},
    {"qdisc_limit", {"rate = \"20mbit\"\nshaper = \"htb\"\nqdisc = \"pfifo\"\n", "qdisc_limit = 50\n"}},
    {"ecn", {"loss = \"1%\"\n", "ecn = true\n"}},
    {"slot", {"", "slot = { min_delay = \"1ms\", max_delay = \"4ms\", packets = 32, bytes = 65536 }\n"}},
    {"seed", {"", "seed = 42\n"}},
};

// What protocol 1 sent for the direction of the test below, as the hand-written encoder
// before the attribute rows wrote it (issue 38 item 3).
const std::string kWireGolden =
    R"({"netem":{"cell_overhead":5,"cell_size":48,"corrupt":0.001,"corrupt_correlation":0.03,"delay":10000000,"delay_correlation":0.25,"distribution":"pareto","duplicate":0.02,"duplicate_correlation":0.05,"ecn":true,"gap":5,"jitter":2000000,"limit":5000,"limit_packets":5000,"loss":{"correlation":0.0,"model":2,"one_minus_h":0.8,"one_minus_k":0.005,"p14":0.0,"probability":0.01,"r":0.3},"packet_overhead":-4,"rate_bps":20000000,"reorder":0.25,"reorder_correlation":0.5,"seed":42,"seed_explicit":true,"slot":{"bytes":65536,"dist_delay":3000000,"dist_jitter":1000000,"distribution":"normal","max_delay":0,"min_delay":0,"packets":32}},"queue":0,"queue_limit":0,"queue_params":{},"rate_bps":20000000,"shaper":0})"
    "\n"
    R"({"netem":{"cell_overhead":0,"cell_size":0,"corrupt":0.0,"corrupt_correlation":0.0,"delay":0,"delay_correlation":0.0,"distribution":"","duplicate":0.0,"duplicate_correlation":0.0,"ecn":false,"gap":0,"jitter":0,"limit":null,"limit_packets":1000,"loss":{"correlation":0.0,"model":0,"one_minus_h":0.0,"one_minus_k":0.0,"p14":0.0,"probability":0.0,"r":0.0},"packet_overhead":0,"rate_bps":0,"reorder":0.0,"reorder_correlation":0.0,"seed":3586874952491180848,"seed_explicit":false,"slot":null},"queue":6,"queue_limit":50,"queue_params":{"ecn":1.0,"target":20000000.0},"rate_bps":20000000,"shaper":2})";

// A direction as the wire carries it: everything but where its keys were written.
netem::Direction without_locations(netem::Direction d) {
    d.at.clear();
    return d;
}

}  // namespace

TEST_CASE("every netem attribute row crosses the wire to the agent", "[remote]") {
    for (const auto& row : netem::attributes()) {
        INFO("attribute row `" << row.key << "`");
        auto sample = kRowSamples.find(row.key);
        REQUIRE(sample != kRowSamples.end());
        const auto& [needed, line] = sample->second;
        auto d = without_locations(testing::up_of(needed + line));
        CHECK_FALSE(d == without_locations(testing::up_of(needed)));  // the line sets something
        auto back = remote::direction_of(nlohmann::json::parse(remote::direction_json(d).dump()));
        CHECK(back == d);
    }
}

TEST_CASE("a direction crosses the wire as agent protocol 1 spells it", "[remote]") {
    auto d = testing::up_of(
        "delay = \"10ms\"\njitter = \"2ms\"\ncorrelation = \"25%\"\ndistribution = \"pareto\"\nlimit = 5000\n"
        "loss = { model = \"gemodel\", p = \"1%\", r = \"30%\", \"1-h\" = \"80%\", \"1-k\" = \"0.5%\" }\n"
        "duplicate = \"2%\"\nduplicate_correlation = \"5%\"\nreorder = \"25%\"\nreorder_correlation = \"50%\"\n"
        "gap = 5\ncorrupt = \"0.1%\"\ncorrupt_correlation = \"3%\"\nrate = \"20mbit\"\npacket_overhead = -4\n"
        "cell_size = 48\ncell_overhead = 5\necn = true\nseed = 42\n"
        "slot = { distribution = \"normal\", delay = \"3ms\", jitter = \"1ms\", packets = 32, bytes = 65536 }\n");
    auto shaped = testing::up_of(
        "rate = \"20mbit\"\nshaper = \"htb\"\nqdisc = { kind = \"pie\", target = \"20ms\", ecn = true, limit = 50 }\n");
    CHECK(remote::direction_json(d).dump() + "\n" + remote::direction_json(shaped).dump() == kWireGolden);
}

TEST_CASE("the established connections of /proc/net/tcp and tcp6, with their inodes", "[remote][ssh]") {
    // As the kernel prints them: each address word as it lies in memory, ports in host order.
    const std::string tcp =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   116        0 21906 1 0\n"
        "   1: 010912C6:9C56 020912C6:0016 01 00000000:00000000 02:00000A4E 00000000     0        0 73311 2 0\n"
        "   2: garbage\n";
    auto v4 = lab::parse_established(tcp);
    REQUIRE(v4.size() == 1);  // the listener (0A) and the garbage are not connections
    CHECK(v4[0].first == 73311);
    CHECK(v4[0].second.local == "198.18.9.1");
    CHECK(v4[0].second.local_port == 40022);
    CHECK(v4[0].second.peer == "198.18.9.2");
    CHECK(v4[0].second.peer_port == 22);
    const std::string tcp6 =
        "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
        "tm->when retrnsmt   uid  timeout inode\n"
        "   0: 02000120000000000000000001000000:A000 02000120000000000000000002000000:0016 01 00000000:00000000 "
        "00:00000000 00000000     0        0 5150 1 0\n"
        "   1: 0000000000000000FFFF0000010912C6:A001 0000000000000000FFFF0000020912C6:0016 01 00000000:00000000 "
        "00:00000000 00000000     0        0 5151 1 0\n";
    auto v6 = lab::parse_established(tcp6);
    REQUIRE(v6.size() == 2);
    CHECK(v6[0].second.local == "2001:2::1");
    CHECK(v6[0].second.peer == "2001:2::2");
    CHECK(v6[0].second.local_port == 0xA000);
    CHECK(v6[1].second.local == "198.18.9.1");  // IPv4 on an IPv6 socket: IPv4 on the wire
    CHECK(v6[1].second.peer == "198.18.9.2");
}

TEST_CASE("with a router, the link conditions are the router's, on its interface toward the server", "[remote]") {
    auto l = load(kHosts + R"([hosts.router]
ssh = "root@198.51.100.9"
dev = "eth2"
[link]
rtt = "40ms"
[[probe]]
kind = "rtt"
method = "icmp"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& lab = l.exp->trials[0].lab;
    CHECK(lab.hosts() == std::vector<std::string>{"client", "server", "router"});
    auto joined = fmt::format("{}", fmt::join(experiment::trial_commands(l.exp->trials[0]), "\n"));
    CHECK_THAT(joined, Contains("ssh root@198.51.100.9 tc qdisc replace dev eth2 root handle 1: htb default 1") &&
                           Contains("match ip dst 203.0.113.7"));
    CHECK_THAT(joined, !Contains("on this machine (client): tc"));
    auto plan = experiment::render_plan_text(*l.exp);
    CHECK_THAT(plan, Contains("machine router: ssh root@198.51.100.9 (198.51.100.9)") &&
                         Contains("link conditions on eth2 toward the server"));
    // The middle box is another machine.
    l = load(kHosts + "[hosts.router]\nssh = \"local\"\n");
    CHECK_THAT(l.messages, Contains("[hosts.router] is the middle box between this machine (the client) and the "
                                    "server: another machine"));
}

TEST_CASE("built-in probes across machines need no service: the server's agent runs their servers", "[remote]") {
    auto l = load(kHosts + "probe_port = 5301\n" + R"(
[[probe]]
kind = "throughput"
[[probe]]
kind = "rr"
[[probe]]
kind = "http"
[[probe]]
name = "udp"
kind = "rtt"
method = "udp"
)");
    INFO(l.messages);
    REQUIRE(l.exp);
    CHECK(l.exp->trials[0].lab.machine("server")->probe_port == 5301);
    for (const auto& p : l.exp->trials[0].probes) CHECK(probes::far_servable(p));
    l = load(kHosts + "probe_port = 0\n[[probe]]\nkind = \"rr\"\n");
    CHECK_THAT(l.messages, Contains("probe_port"));
}

TEST_CASE("a probe and its far server's report cross the wire exactly", "[remote]") {
    auto l = load(kHosts + "[[probe]]\nkind = \"throughput\"\nrcvbuf = \"32KiB\"\ndirection = \"both\"\n");
    REQUIRE(l.exp);
    const auto& spec = l.exp->trials[0].probes.at(0);
    auto back = remote::probe_of(nlohmann::json::parse(remote::probe_json(spec).dump()));
    CHECK(back.name == spec.name);
    CHECK(back.kind == spec.kind);
    CHECK(back.options == spec.options);  // each option keeps its type: integer, float, boolean, string
    probes::FarReport r;
    r.connections[40123] = {"download", "bbr", {{"cwnd", 10}, {"rtt", 0.0405}, {"rcvbuf_granted", 65536}}};
    r.series["stream40123.cwnd"] = {{0.1, 0.2}, {10, 20}};
    r.sysctls["net.core.rmem_max"] = "212992";
    r.requests = 7;
    auto got = remote::far_report_of(nlohmann::json::parse(remote::far_report_json(r).dump()));
    REQUIRE(got.connections.count(40123));
    CHECK(got.connections[40123].direction == "download");
    CHECK(got.connections[40123].congestion_control == "bbr");
    CHECK(got.connections[40123].values == r.connections[40123].values);
    CHECK(got.series.at("stream40123.cwnd").value == std::vector<double>{10, 20});
    CHECK(got.sysctls == r.sysctls);
    CHECK(got.requests == 7);
    CHECK_THROWS_WITH(remote::far_report_of(nlohmann::json::parse(R"({"connections": 3})")),
                      Contains("a malformed probe server report"));
}

TEST_CASE("a probe's result crosses the wire whole, NaN as null, its samples thinned past the bound", "[remote]") {
    probes::ProbeResult r;
    r.kind = "rr";
    r.tool = "builtin";
    r.metrics = {{"latency_p50", 0.0441}, {"errors", 0}, {"rcvbuf_granted", std::nan("")}};
    r.samples["latency"] = {0.04, 0.05, 0.06};
    r.series["stream1.cwnd"] = {{0.1, 0.2}, {10, std::nan("")}};
    r.connections.push_back({"upload", "cubic", {{"cwnd", 10}}});
    r.notes = {"client: TCP_QUICKACK after each read"};
    auto back = remote::probe_result_of(nlohmann::json::parse(remote::probe_result_json(r, 2).dump()));
    CHECK(back.kind == "rr");
    CHECK(back.tool == "builtin");
    CHECK(back.metrics.at("latency_p50") == 0.0441);
    CHECK(std::isnan(back.metrics.at("rcvbuf_granted")));
    CHECK(back.samples.at("latency") == std::vector<double>{0.04, 0.05});
    CHECK(std::isnan(back.series.at("stream1.cwnd").value.at(1)));
    CHECK(back.connections.at(0).congestion_control == "cubic");
    CHECK(back.connections.at(0).values.at("cwnd") == 10);
    REQUIRE(back.notes.size() == 2);
    CHECK(back.notes[1] == "samples.latency holds the first 2 of 3 (the client machine's agent sent no more)");
    CHECK_THROWS_WITH(remote::probe_result_of(nlohmann::json::parse(R"({"kind": "rr"})")),
                      Contains("a malformed probe result"));
}

TEST_CASE("the agent's own ssh connection, from SSH_CONNECTION, as this machine sees it", "[remote][ssh]") {
    auto f = remote::ssh_connection_flow("198.51.100.1 50022 203.0.113.7 22");
    REQUIRE(f);
    CHECK(f->local == "203.0.113.7");
    CHECK(f->local_port == 22);
    CHECK(f->peer == "198.51.100.1");
    CHECK(f->peer_port == 50022);
    CHECK_FALSE(remote::ssh_connection_flow(nullptr));
    auto six = remote::ssh_connection_flow("2001:db8::1 50022 2001:db8::2 22");  // an IPv6 server's filters
    REQUIRE(six);
    CHECK(six->local == "2001:db8::2");
    CHECK(six->peer == "2001:db8::1");
    CHECK_FALSE(remote::ssh_connection_flow("2001:db8::1 50022 203.0.113.7 22"));  // one family or none
    CHECK_FALSE(remote::ssh_connection_flow("198.51.100.1 70000 203.0.113.7 22"));
    CHECK_FALSE(remote::ssh_connection_flow("garbage"));
}

TEST_CASE(
    "an ssh_config that makes ssh run commands is named by validate, listed by plan and refused by a run unless "
    "allowed",
    "[remote][security]") {
    char name[] = "/tmp/wanlab-ssh-config-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    std::string config =
        "Host lab\n  HostName 203.0.113.7\n  ProxyCommand nc -X connect -x proxy:3128 %h %p\n"
        "# LocalCommand in a comment runs nothing\n  PermitLocalCommand yes\n  LocalCommand=touch /tmp/pwned\n"
        "Match exec \"test -f /etc/lab\"\n  User root\nInclude ~/.ssh/more\n";
    REQUIRE(::write(fd, config.data(), config.size()) == static_cast<ssize_t>(config.size()));
    ::close(fd);
    std::string text = kHosts + "[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\n";
    text.replace(text.find("/home/me/.ssh/lab_config"), std::string("/home/me/.ssh/lab_config").size(), name);
    auto l = load(text);
    INFO(l.messages);
    REQUIRE(l.exp);
    // A run refuses it unless allowed, reading the file again when it starts: emptied since the
    // load, it is used; given commands again, refused.
    const auto& lab = l.exp->trials.front().lab;
    CHECK_THROWS_WITH(remote::refuse_ssh_commands(lab, false),
                      Contains("line 3: ProxyCommand") && Contains("run again with --allow-ssh-commands"));
    CHECK_NOTHROW(remote::refuse_ssh_commands(lab, true));
    std::ofstream(name, std::ios::trunc) << "Host lab\n  HostName 203.0.113.7\n";
    CHECK_NOTHROW(remote::refuse_ssh_commands(lab, false));
    std::ofstream(name, std::ios::trunc) << "Host lab\n\tlocalcommand id\n";
    CHECK_THROWS_WITH(remote::refuse_ssh_commands(lab, false), Contains("line 2: localcommand id"));
    ::unlink(name);
    CHECK_THAT(l.messages,
               Contains("makes ssh run commands, as the user running wanlab (root for a run): line 3: "
                        "ProxyCommand nc -X connect -x proxy:3128 %h %p; line 6: LocalCommand=touch "
                        "/tmp/pwned; line 7: Match exec \"test -f /etc/lab\"; line 9: Include ~/.ssh/more"));
    CHECK_THAT(l.messages, !Contains("line 4"));  // the comment
    auto plan = experiment::render_plan_text(*l.exp);
    CHECK_THAT(plan, Contains(std::string("ssh config ") + name +
                              ": ssh runs these as the user running wanlab:\n"
                              "    line 3: ProxyCommand"));
    // A config that is not there: plan says so instead of guessing.
    auto missing = load(kHosts + "[[probe]]\nkind = \"rtt\"\nmethod = \"icmp\"\n");
    REQUIRE(missing.exp);
    CHECK_THAT(experiment::render_plan_text(*missing.exp),
               Contains("ssh config /home/me/.ssh/lab_config: not readable here"));
}

TEST_CASE("an agent that ends before its hello is reported when it ends, not at the connect timeout", "[remote]") {
    // /bin/false stands for a wanlab that is not there (or an ssh that was refused): it exits
    // at once. The channel must see its output end, which it cannot while it holds the pipe's
    // write end itself; then it would wait the whole connect timeout (30 s by default).
    remote::Destination d{"server", "local", "", "/bin/false"};
    auto result = std::async(std::launch::async, [&] {
        try {
            remote::Channel c(d, "/tmp", "/bin/false", std::chrono::seconds(90));
            return std::string("it answered");
        } catch (const Error& e) {
            return std::string(e.what());
        }
    });
    INFO("a channel still waiting after 60 s waits for its connect timeout, 90 s");
    REQUIRE(result.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    CHECK_THAT(result.get(), Contains("server (local): the connection ended before the agent answered"));
}
