// Experiments across machines without a network: [lab] mode = "hosts" as the loader reads it,
// ssh's command line and its quoting, the hello's version check, a service on the wire, and
// the sysctls each machine gets. The machines themselves: tests/root/hosts_root_test.cpp.
#include <catch2/catch.hpp>

#include "core/address.h"
#include "core/version.h"
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
    CHECK(lab.mode == lab::LabSpec::Mode::hosts);
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
    // The probes run here: a remote client is not this version's.
    l = load(
        "[lab]\nmode = \"hosts\"\n[hosts.client]\nssh = \"me@198.51.100.1\"\n[hosts.server]\nssh = \"local\"\n"
        "address = \"127.0.0.1\"\n");
    CHECK_THAT(l.messages, Contains("[hosts.client] runs the probes"));
    // Link conditions, and a probe that needs a server of wanlab's own there.
    l = load(kHosts + "[link]\nrtt = \"40ms\"\n[[probe]]\nkind = \"throughput\"\n");
    CHECK_THAT(l.messages, Contains("[link] conditions across real machines are not supported yet") &&
                               Contains("probe `throughput` in [lab] mode = \"hosts\" measures against the server "
                                        "machine") &&
                               Contains("run its server there as a [[service]] and give `server_port`"));
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
    auto same = remote::hello("lab-2");
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
