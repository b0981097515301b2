// The lab on the real machine (root): namespaces, veth, addresses, routes, offloads,
// sysctls and the journal, built in-process through LabSession and checked from outside
// with ip(8), ping(8) and /proc/sys.
#include "tests/support/root_helper.h"

#include <regex>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "lab/link.h"
#include "lab/restore.h"
#include "lab/session.h"
#include "netem/device.h"
#include "netem/kernel.h"
#include "sysctl/proc_sys.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;
using namespace wanlab::root_testing;

namespace {

experiment::Trial trial_of(const ExperimentFile& f, const std::vector<std::string>& sets = {}) {
    std::ifstream in(f.path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto loaded = testing::load(text, sets);
    INFO(loaded.messages);
    REQUIRE(loaded.exp);
    return loaded.exp->trials.at(0);
}

struct TempRunDir {
    std::filesystem::path path;
    TempRunDir() {
        std::string t = "/tmp/wanlab-run-XXXXXX";
        path = ::mkdtemp(t.data());
    }
    ~TempRunDir() { std::filesystem::remove_all(path); }
};

// "rtt min/avg/max/mdev = 0.051/0.063/0.080/0.011 ms" and "0% packet loss" from ping.
struct PingResult {
    double avg_ms = -1;
    double loss_percent = -1;
};

PingResult ping(const std::string& ns, const std::string& address) {
    std::string out = sh(fmt::format("ip netns exec {} ping -c 10 -i 0.05 -W 1 {} 2>&1", ns, address));
    INFO(out);
    PingResult r;
    std::smatch m;
    if (std::regex_search(out, m, std::regex(R"(([\d.]+)% packet loss)"))) r.loss_percent = std::stod(m[1]);
    if (std::regex_search(out, m, std::regex(R"(= [\d.]+/([\d.]+)/)"))) r.avg_ms = std::stod(m[1]);
    return r;
}

nlohmann::json link_in(const std::string& ns, const std::string& dev) {
    auto j = nlohmann::json::parse(sh(fmt::format("ip -n {} -j link show dev {}", ns, dev)), nullptr, false);
    return j.is_array() && !j.empty() ? j[0] : nlohmann::json{};
}

}  // namespace

TEST_CASE("a lab routes pings from client to server across the router and gives everything back", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    TempRunDir dir;
    Cleanup cleanup("rt1");
    auto before = capture();
    auto trial = trial_of(file);
    sysctl::RealProcSys proc;
    std::filesystem::path journal;
    {
        lab::SessionOptions options;
        options.run = "rt1";
        options.dir = dir.path;
        lab::LabSession session(trial, options, proc);
        journal = session.journal().path();
        CHECK(std::filesystem::exists(journal));

        std::string netns = sh("ip netns list");
        for (const char* h : {"client", "router", "server"})
            CHECK(netns.find("wanlab-rt1-" + std::string(h)) != std::string::npos);

        auto r = ping("wanlab-rt1-client", "198.18.0.6");
        CHECK(r.loss_percent == 0);
        CHECK(r.avg_ms >= 0);
        CHECK(r.avg_ms < 5);
        WARN(fmt::format("client -> server across the router: avg RTT {} ms, {}% loss", r.avg_ms, r.loss_percent));
        CHECK(ping("wanlab-rt1-server", "198.18.0.1").loss_percent == 0);

        for (auto [ns, dev] : {std::pair{"client", "wl-c"}, std::pair{"router", "wl-rc"}, std::pair{"router", "wl-rs"},
                               std::pair{"server", "wl-s"}}) {
            std::string name = fmt::format("wanlab-rt1-{}", ns);
            auto l = link_in(name, dev);
            CHECK(l.value("mtu", 0) == 1400);
            CHECK(l.value("txqlen", 0) == 500);
            CHECK(l.value("operstate", "") == "UP");
            CHECK(lab::get_offloads(name, dev) == lab::Offloads{false, false, false});
        }
        CHECK(sh("ip -n wanlab-rt1-client -j route").find("198.18.0.2") != std::string::npos);
        CHECK(*proc.read("wanlab-rt1-router", "net.ipv4.ip_forward") == "1");
        CHECK(read_sysctl("net.core.rmem_max") == file.rmem_max);
        CHECK(read_sysctl("net.core.wmem_max") == file.wmem_max);
        CHECK(*proc.read("wanlab-rt1-client", "net.ipv4.tcp_rmem") == "4096\t65536\t4194304");
        CHECK(*proc.read("wanlab-rt1-server", "net.ipv4.tcp_rmem") == "4096\t65536\t4194304");
        CHECK(*proc.read("wanlab-rt1-client", "net.ipv4.tcp_congestion_control") == "reno");

        auto entries = lab::read_journal(journal).entries;
        CHECK(entries.size() == 13);  // 3 netns, 2 links, ip_forward, 2 global + 3 per-host sysctls, 2 qdisc trees
        CHECK(entries.back().value("op", "") == "qdisc");
    }
    CHECK_FALSE(std::filesystem::exists(journal));
    CHECK(capture() == before);
}

TEST_CASE("a dual-stack lab routes IPv4 and IPv6 across the router, forwarding both, and gives everything back",
          "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file("ip = \"dual\"");
    TempRunDir dir;
    Cleanup cleanup("rt6");
    auto before = capture();
    auto trial = trial_of(file);
    sysctl::RealProcSys proc;
    auto forwarding6_before = read_sysctl("net.ipv6.conf.all.forwarding");
    {
        lab::SessionOptions options;
        options.run = "rt6";
        options.dir = dir.path;
        lab::LabSession session(trial, options, proc);
        auto v6 = ping("wanlab-rt6-client", lab::Addressing::kServerIp6);
        CHECK(v6.loss_percent == 0);
        CHECK(v6.avg_ms >= 0);
        CHECK(ping("wanlab-rt6-server", lab::Addressing::kClientIp6).loss_percent == 0);
        CHECK(ping("wanlab-rt6-client", lab::Addressing::kServerIp).loss_percent == 0);
        CHECK(*proc.read("wanlab-rt6-router", "net.ipv6.conf.all.forwarding") == "1");
        CHECK(*proc.read("wanlab-rt6-router", "net.ipv4.ip_forward") == "1");
        auto routes = sh("ip -n wanlab-rt6-client -6 -j route show default");
        CHECK(routes.find(lab::Addressing::kClientGateway6) != std::string::npos);
        // No duplicate-address detection holds the addresses back: none is tentative.
        CHECK(sh("ip -n wanlab-rt6-client -6 addr show tentative").empty());
        // No ARP or neighbour discovery crosses the emulated path: each end's neighbour is
        // permanent, with the peer's own link-layer address.
        for (const char* family : {"-4", "-6"}) {
            auto router = sh(fmt::format("ip -n wanlab-rt6-router {} neigh show nud permanent", family));
            CHECK_THAT(router, Contains(std::string(family) == "-4" ? lab::Addressing::kClientIp
                                                                    : lab::Addressing::kClientIp6));
            CHECK_THAT(router, Contains(std::string(family) == "-4" ? lab::Addressing::kServerIp
                                                                    : lab::Addressing::kServerIp6));
            CHECK_THAT(sh(fmt::format("ip -n wanlab-rt6-client {} neigh show nud permanent", family)),
                       Contains(std::string(family) == "-4" ? lab::Addressing::kClientGateway
                                                            : lab::Addressing::kClientGateway6));
        }
        auto router_side = nlohmann::json::parse(
            sh(std::string("ip -n wanlab-rt6-router -j link show ") + experiment::LabNames::kRouterToClient));
        auto client_neigh = nlohmann::json::parse(sh("ip -n wanlab-rt6-client -4 -j neigh show nud permanent"));
        REQUIRE(client_neigh.size() == 1);
        CHECK(client_neigh[0]["lladdr"] == router_side[0]["address"]);
        auto tcp6 = session.testbed().endpoints(AF_INET6);
        CHECK(tcp6.server.address == lab::Addressing::kServerIp6);
        CHECK(tcp6.client.address == lab::Addressing::kClientIp6);
        CHECK(session.testbed().endpoints(AF_INET).server.address == lab::Addressing::kServerIp);
    }
    CHECK(read_sysctl("net.ipv6.conf.all.forwarding") == forwarding6_before);
    CHECK(capture() == before);
}

TEST_CASE("an IPv6-only lab has no IPv4 address, leaves ip_forward alone, and names the missing family", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file("ip = \"ipv6\"");
    TempRunDir dir;
    Cleanup cleanup("rt7");
    auto before = capture();
    auto trial = trial_of(file);
    sysctl::RealProcSys proc;
    {
        lab::SessionOptions options;
        options.run = "rt7";
        options.dir = dir.path;
        lab::LabSession session(trial, options, proc);
        CHECK(ping("wanlab-rt7-client", lab::Addressing::kServerIp6).loss_percent == 0);
        CHECK(sh("ip -n wanlab-rt7-client -4 -j addr show dev wl-c").find("198.18.") == std::string::npos);
        CHECK(*proc.read("wanlab-rt7-router", "net.ipv4.ip_forward") == "0");
        CHECK(session.testbed().endpoints(AF_UNSPEC).server.address == lab::Addressing::kServerIp6);
        CHECK_THROWS_WITH(session.testbed().endpoints(AF_INET), Catch::Contains("IPv4") && Catch::Contains("ipv6"));
    }
    CHECK(capture() == before);
}

TEST_CASE("offloads asked for are switched on at both ends of each veth pair", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file("offloads = true");
    TempRunDir dir;
    Cleanup cleanup("rt2");
    sysctl::RealProcSys proc;
    lab::SessionOptions options;
    options.run = "rt2";
    options.dir = dir.path;
    lab::LabSession session(trial_of(file), options, proc);
    CHECK(lab::get_offloads("wanlab-rt2-client", "wl-c") == lab::Offloads{true, true, true});
    CHECK(lab::get_offloads("wanlab-rt2-router", "wl-rs") == lab::Offloads{true, true, true});
}

TEST_CASE("a sweep of lab.mtu builds the lab again with each trial's MTU, sysctls and all", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    TempRunDir dir;
    Cleanup cleanup("rt9");
    std::ifstream in(file.path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto loaded = testing::load(text + "\n[sweep]\n\"lab.mtu\" = [1400, 9000]\n");
    INFO(loaded.messages);
    REQUIRE(loaded.exp);
    REQUIRE(loaded.exp->trials.size() == 2);
    sysctl::RealProcSys proc;
    lab::SessionOptions options;
    options.run = "rt9";
    options.dir = dir.path;
    lab::LabSession session(loaded.exp->trials, options, proc);
    auto cc = [&] { return proc.read("wanlab-rt9-client", "net.ipv4.tcp_congestion_control").value_or("?"); };
    session.apply_trial(loaded.exp->trials[0]);
    CHECK(link_in("wanlab-rt9-client", "wl-c")["mtu"] == 1400);
    session.apply_trial(loaded.exp->trials[1]);
    CHECK(link_in("wanlab-rt9-client", "wl-c")["mtu"] == 9000);
    CHECK(link_in("wanlab-rt9-router", "wl-rs")["mtu"] == 9000);
    CHECK(cc() == "reno");  // the trial's per-namespace sysctl, in the new namespace
    CHECK(ping("wanlab-rt9-client", lab::Addressing::kServerIp).loss_percent == 0);
}

TEST_CASE("a sysctl the kernel refuses stops the run before anything is changed", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file("", "nosuchcc");
    TempRunDir dir;
    Cleanup cleanup("rt3");
    auto before = capture();
    sysctl::RealProcSys proc;
    lab::SessionOptions options;
    options.run = "rt3";
    options.dir = dir.path;
    auto trial = trial_of(file);
    CHECK_THROWS_WITH(lab::LabSession(trial, options, proc),
                      Catch::Contains("nosuchcc") && Catch::Contains("nothing was changed"));
    CHECK(capture() == before);
    CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("an error half-way through a run undoes what was done and removes the journal", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    TempRunDir dir;
    Cleanup cleanup("rt4");
    auto before = capture();
    sysctl::RealProcSys proc;
    lab::SessionOptions options;
    options.run = "rt4";
    options.dir = dir.path;
    options.progress = [](const std::string& stage) {
        if (stage == "links") throw wanlab::Error("injected failure after links");
    };
    CHECK_THROWS_WITH(lab::LabSession(trial_of(file), options, proc), "injected failure after links");
    CHECK(capture() == before);
    CHECK_FALSE(std::filesystem::exists(dir.path / "rt4.journal"));
}

TEST_CASE("a journaled qdisc tree is put back exactly by restore, and skipped once its device is gone", "[root]") {
    if (skip_unless_root()) return;
    Cleanup cleanup("rq1");
    const std::string ns = "wanlab-rq1-router";
    sh(fmt::format("ip netns add {} && ip -n {} link add wl-rs type veth peer name wl-rc && ip -n {} link set wl-rs up",
                   ns, ns, ns));
    // A tree of the user's own that wanlab must give back: tbf with a bfifo below it.
    sh(fmt::format("tc -n {} qdisc add dev wl-rs root handle 5: tbf rate 10mbit burst 32kb latency 50ms", ns));
    sh(fmt::format("tc -n {} qdisc add dev wl-rs parent 5:1 handle 6: bfifo limit 30000", ns));
    auto before = sh(fmt::format("tc -n {} -j qdisc show dev wl-rs", ns));
    std::string snapshot;
    {
        netem::NetlinkKernel kernel(ns);
        netem::DeviceQdiscs device(kernel, "wl-rs");
        snapshot = device.serialize();
        device.release();
    }
    // What a killed run leaves: another tree in its place.
    sh(fmt::format("tc -n {} qdisc replace dev wl-rs root handle 1: htb default 1", ns));
    REQUIRE(sh(fmt::format("tc -n {} -j qdisc show dev wl-rs", ns)) != before);
    sysctl::RealProcSys proc;
    std::vector<std::string> said;
    auto undo = lab::machine_undo(proc, [&said](const std::string& s) { said.push_back(s); });
    undo.qdisc(ns, "wl-rs", snapshot);
    CHECK(sh(fmt::format("tc -n {} -j qdisc show dev wl-rs", ns)) == before);
    REQUIRE(said.size() == 1);
    CHECK(said[0] == "restored the qdiscs of wl-rs in namespace " + ns);
    // Idempotent, and a device or namespace that went away is nothing to undo.
    undo.qdisc(ns, "wl-rs", snapshot);
    CHECK(sh(fmt::format("tc -n {} -j qdisc show dev wl-rs", ns)) == before);
    sh(fmt::format("ip -n {} link del wl-rs", ns));
    CHECK_NOTHROW(undo.qdisc(ns, "wl-rs", snapshot));
    sh(fmt::format("ip netns del {}", ns));
    CHECK_NOTHROW(undo.qdisc(ns, "wl-rs", snapshot));
    CHECK(said.size() == 2);
}

TEST_CASE("a refused netlink request names the errno and the kernel's own message, not libnl's text", "[root]") {
    if (skip_unless_root()) return;
    Cleanup cleanup("rq2");
    const std::string ns = "wanlab-rq2-router";
    sh(fmt::format("ip netns add {} && ip -n {} link add wl-x type veth peer name wl-y && ip -n {} link set wl-x up",
                   ns, ns, ns));
    lab::RouteSocket sock(ns);
    lab::add_address(sock, "wl-x", "198.18.7.1/30");
    // The same address again: the kernel answers EEXIST (libnl would say "Object exists").
    // Kernels with extended ACKs add their reason: "File exists (ipv4: Address already assigned)".
    CHECK_THROWS_WITH(lab::add_address(sock, "wl-x", "198.18.7.1/30"),
                      Catch::StartsWith("adding address 198.18.7.1/30 to wl-x in namespace wanlab-rq2-router: "
                                        "File exists") &&
                          !Catch::Contains("Object exists"));
    // A route through a gateway no device reaches: ENETUNREACH with the kernel's extack text.
    CHECK_THROWS_WITH(lab::add_default_route(sock, "203.0.113.1"),
                      Catch::StartsWith("adding a default route via 203.0.113.1 in namespace wanlab-rq2-router: "
                                        "Network is unreachable"));
    sh(fmt::format("ip netns del {}", ns));
}
