// The built-in probes (and iperf3/ping when installed) over a bare veth between two
// namespaces, as root: on the host, and inside the micro-VM (`wanlab vm run -- BINARY`).
// Bare veth = no qdisc impairment, so the bounds below are what any machine of this class
// must reach; see docs/probes.md for the numbers measured.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "lab/link.h"
#include "lab/netns.h"
#include "probes/external.h"
#include "probes/http.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "tests/support/cpu_watch.h"

using namespace wanlab;
using namespace wanlab::probes;

namespace {

bool skip_unless_root() {
    if (::geteuid() == 0) return false;
    WARN("SKIPPED: needs root (creates namespaces and a veth pair)");
    return true;
}

/// Two namespaces joined by a veth pair, removed at scope exit (also when a check fails).
struct BareLab {
    lab::NetNamespace a, b;
    std::optional<lab::VethPair> veth;
    Endpoints where;

    BareLab()
        : a(fmt::format("wanlab-ptest-{}-a", ::getpid()), nullptr),
          b(fmt::format("wanlab-ptest-{}-b", ::getpid()), nullptr) {
        veth.emplace(a.name(), "wlt-a", b.name(), "wlt-b", lab::LinkOptions{1500, 1000, true}, nullptr);
        lab::RouteSocket sa(a.name()), sb(b.name());
        lab::set_up(sa, "lo");
        lab::set_up(sb, "lo");
        lab::add_address(sa, "wlt-a", "198.18.200.1/30");
        lab::add_address(sb, "wlt-b", "198.18.200.2/30");
        lab::add_address(sa, "wlt-a", "2001:2::200:1/126");
        lab::add_address(sb, "wlt-b", "2001:2::200:2/126");
        where.client = {a.name(), "198.18.200.1", 0};
        where.server = {b.name(), "198.18.200.2", 0};
        where6.client = {a.name(), "2001:2::200:1", 0};
        where6.server = {b.name(), "2001:2::200:2", 0};
    }
    Endpoints where6;  ///< the same pair over IPv6
};

/// A counter of /proc/net/snmp6 ("Ip6InReceives") in namespace `ns`: what IPv6 carried.
long long snmp6(const std::string& ns, const std::string& counter) {
    FILE* p = ::popen(fmt::format("ip netns exec {} cat /proc/net/snmp6", ns).c_str(), "r");
    REQUIRE(p);
    std::array<char, 256> line{};
    long long value = -1;
    while (std::fgets(line.data(), line.size(), p)) {
        std::string l(line.data());
        if (l.starts_with(counter + " ") || l.starts_with(counter + "\t"))
            value = std::stoll(l.substr(l.find_first_of(" \t")));
    }
    ::pclose(p);
    return value;
}

/// A [[probe]] of `kind` with these options, through the experiment parser.
ProbeSpec spec_of(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& options) {
    std::string text = fmt::format("[[probe]]\nkind = \"{}\"\n", kind);
    for (const auto& [k, v] : options) text += k + " = " + v + "\n";
    config::Documents docs;
    Diagnostics diag;
    const auto* table = docs.parse("test", text, diag);
    REQUIRE(table);
    auto root = config::from_toml(*table);
    auto spec = parse_probe(root.find("probe")->items.at(0), 0, std::chrono::seconds(2), diag);
    INFO(diag.render(docs.sources()));
    REQUIRE(!diag.has_errors());
    return spec;
}

ProbeResult measure(const Endpoints& where, const ProbeSpec& spec) {
    auto result = make_probe(spec)->run(where, {});
    for (const auto& n : result.notes) UNSCOPED_INFO("note: " << n);
    for (const auto& [k, v] : result.metrics) UNSCOPED_INFO(k << " = " << v);
    return result;
}

ProbeResult measure(const BareLab& lab, const ProbeSpec& spec) { return measure(lab.where, spec); }

long long read_number(const std::string& path) {
    std::ifstream in(path);
    long long v = -1;
    in >> v;
    return v;
}

std::string run_wanlab(const std::string& args, int& status) {
    std::string out;
    FILE* p = ::popen((std::string(WANLAB_BINARY) + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(p);
    std::array<char, 4096> buf{};
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    int st = ::pclose(p);
    status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return out;
}

/// True under QEMU's software emulation (the micro-VM without KVM). Bulk throughput and rtt
/// still meet the bare-veth bounds there, but every thread wake-up can cost a few ms, so rr
/// latency bounds are relaxed to what was measured there (p50 7-8 ms unstalled, 780 tx/s).
bool software_cpu() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.find("QEMU Virtual CPU") != std::string::npos) {
            WARN("software-emulated CPU (QEMU TCG): rr latency bounds relaxed");
            return true;
        }
    return false;
}

bool probe_namespaces_left() {
    for (const auto& e : std::filesystem::directory_iterator(std::string(wanlab::sys::kNetnsDir)))
        if (e.path().filename().string().starts_with("wanlab-probe-")) return true;
    return false;
}

}  // namespace

TEST_CASE("throughput over a bare veth exceeds 1 Gbit/s with one and with four streams", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    for (const char* streams : {"1", "4"}) {
        auto r = measure(
            lab, spec_of("throughput", {{"streams", streams}, {"duration", "\"2s\""}, {"interval", "\"500ms\""}}));
        INFO("streams " << streams);
        CHECK(r.metrics.at("throughput") > 1e9);
        CHECK(r.connections.size() == static_cast<std::size_t>(std::stoi(streams)));
        CHECK(r.series.at("throughput").size() == 4);
        CHECK(r.series.at("stream" + std::string(streams) + ".cwnd").size() == 4);  // each stream's TCP_INFO too
    }
}

// The receiver asks the kernel to wake it once per batch of bytes (receive_watermark()); at a
// low rate the batch must stay small enough that every interval counts what arrived in it.
// Measured through this tbf: each 100 ms interval within -6%..+10% of the rate; with a
// watermark blind to the rate (only an eighth of the buffer, 32-40 KiB here), -30%..+23%.
TEST_CASE("throughput through a tbf at 8 Mbit/s counts each 100 ms interval as the data arrives",
          "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    // The client's egress (upload). tbf counts whole frames, Ethernet header included. Its
    // queue (300 ms, 300 KB) holds all a 128 KiB send buffer can put in flight: no loss, so no
    // recovery stalls in the series.
    REQUIRE(std::system(
                fmt::format("tc -n {} qdisc add dev wlt-a root tbf rate 8mbit burst 16kb latency 300ms", lab.a.name())
                    .c_str()) == 0);
    testing::CpuWatch cpu;
    auto r = measure(
        lab, spec_of("throughput", {{"duration", "\"3s\""}, {"interval", "\"100ms\""}, {"sndbuf", "\"64KiB\""}}));
    INFO(cpu.describe());
    double goodput = 8e6 * 1448 / 1514;  // 1448 bytes of data in each 1514-byte frame (timestamps on)
    CHECK(r.metrics.at("retransmits") == 0);
    CHECK(r.metrics.at("throughput") == Approx(goodput).epsilon(0.05));
    const auto& samples = r.series.at("throughput").value;
    REQUIRE(samples.size() == 30);
    std::string all;
    for (double v : samples) all += fmt::format(" {:.2f}", v / 1e6);
    INFO("intervals (Mbit/s):" << all);
    for (std::size_t i = 1; i < samples.size(); ++i) {  // the first holds the tbf's burst
        INFO("interval " << i + 1 << " of " << samples.size());
        CHECK(samples[i] == Approx(goodput).epsilon(0.15));
    }
}

TEST_CASE("throughput reports sane TCP_INFO for every connection", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    auto r = measure(lab, spec_of("throughput", {{"streams", "2"}, {"direction", "\"both\""}, {"duration", "\"1s\""}}));
    REQUIRE(r.connections.size() == 4);
    for (const auto& c : r.connections) {
        CHECK(c.values.at("rtt") > 0);
        CHECK(c.values.at("rtt") < 0.1);
        CHECK(c.values.at("retransmits") >= 0);
        CHECK(c.values.at("cwnd") > 0);
        CHECK(c.values.at("delivery_rate") > 0);
        CHECK(c.values.at("rwnd_limited") >= 0);
        CHECK(c.values.at("rwnd_limited") <= 1);
        CHECK(c.values.at("sndbuf_limited") >= 0);
        CHECK(c.values.at("sndbuf_limited") <= 1);
        CHECK(!c.congestion_control.empty());
    }
    CHECK(r.metrics.at("throughput_upload") > 1e8);
    CHECK(r.metrics.at("throughput_download") > 1e8);
}

TEST_CASE("throughput reports the receive buffer the kernel granted, clamped by rmem_max", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    long long rmem_max = read_number("/proc/sys/net/core/rmem_max");
    REQUIRE(rmem_max > 0);
    // What getsockopt says for the same request on a socket of our own.
    auto granted_for = [](long long asked) {
        Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
        set_int(fd.get(), SOL_SOCKET, SO_RCVBUF, static_cast<int>(asked), "SO_RCVBUF");
        return get_int(fd.get(), SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF");
    };
    BareLab lab;
    SECTION("a request above rmem_max gets twice rmem_max") {
        long long asked = 4 * rmem_max;
        auto r = measure(lab, spec_of("throughput", {{"rcvbuf", std::to_string(asked)}, {"duration", "\"1s\""}}));
        CHECK(r.metrics.at("rcvbuf_granted") == 2 * rmem_max);
        CHECK(r.metrics.at("rcvbuf_granted") == granted_for(asked));
        CHECK(r.notes.at(0).find("CLAMPED") != std::string::npos);
    }
    SECTION("a small request gets twice itself") {
        auto r = measure(lab, spec_of("throughput", {{"rcvbuf", "\"32KiB\""}, {"duration", "\"1s\""}}));
        CHECK(r.metrics.at("rcvbuf_granted") == 64 * 1024);
        CHECK(r.metrics.at("rcvbuf_granted") == granted_for(32 * 1024));
        // On a bare veth (RTT ~10 us) a 64 KiB window is not a limit in principle; how often
        // the sender still finds it full depends on scheduling (measured 10-79%), so it is
        // not asserted here. The micro-VM test with 20 ms of netem asserts it.
        UNSCOPED_INFO("rwnd_limited " << r.metrics.at("rwnd_limited"));
    }
}

TEST_CASE("rtt over a bare veth is below 1 ms without loss for tcp, udp and icmp", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    for (const char* method : {"\"tcp\"", "\"udp\"", "\"icmp\""}) {
        INFO("method " << method);
        testing::CpuWatch cpu;
        auto r = measure(lab, spec_of("rtt", {{"method", method}, {"count", "50"}, {"interval", "\"2ms\""}}));
        INFO("rtt min " << r.metrics.at("rtt_min") << " s, p99 " << r.metrics.at("rtt_p99") << " s; "
                        << cpu.describe());
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.samples.at("rtt").size() == 50);
        CHECK(r.metrics.at("rtt_p50") > 0);
        CHECK(r.metrics.at("rtt_p50") < 1e-3);
        CHECK(r.metrics.at("rtt_min") <= r.metrics.at("rtt_p50"));
        CHECK(r.metrics.at("rtt_p50") <= r.metrics.at("rtt_p99"));
    }
}

TEST_CASE("rtt counts probes to an address nobody answers as lost", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    auto where = lab.where;
    where.server.address = "198.18.200.3";  // in the /30, not assigned: ARP fails
    auto spec = spec_of("rtt", {{"method", "\"icmp\""}, {"count", "2"}, {"interval", "\"10ms\""}});
    auto r = make_probe(spec)->run(where, {});
    CHECK(r.metrics.at("loss") == 1);
}

TEST_CASE("rr over a bare veth completes more than 1000 transactions per second", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    double least = software_cpu() ? 100 : 1000;
    auto r = measure(lab, spec_of("rr", {{"duration", "\"1s\""}}));
    CHECK(r.metrics.at("transactions_per_second") > least);
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("latency_p50") < 1e-3);
    auto four = measure(lab, spec_of("rr", {{"duration", "\"1s\""}, {"connections", "4"}}));
    CHECK(four.metrics.at("transactions_per_second") > least);
}

// Measured on the host's bare veth (no netem): p50 44 ms with Nagle on and the client
// leaving quick-ack to the kernel; 20-25 us otherwise (7-8 ms in the TCG micro-VM). The kernel's delayed-ACK timer
// (40 ms minimum) holds the ACK of the response's first part, and Nagle holds the second part
// until that ACK: no added delay is needed to reproduce it.
TEST_CASE("rr split writes with Nagle on stall for the delayed ACK unless the client quick-acks",
          "[.root][root][probes]") {
    if (skip_unless_root()) return;
    double unstalled = software_cpu() ? 0.020 : 0.005;
    BareLab lab;
    auto stalled = measure(lab, spec_of("rr", {{"duration", "\"2s\""},
                                               {"server_split_write", "true"},
                                               {"server_nodelay", "false"},
                                               {"client_quickack", "false"}}));
    CHECK(stalled.metrics.at("latency_p50") >= 0.035);
    CHECK(stalled.metrics.at("latency_p50") < 0.25);
    auto nodelay = measure(
        lab, spec_of("rr", {{"duration", "\"1s\""}, {"server_split_write", "true"}, {"server_nodelay", "true"}}));
    CHECK(nodelay.metrics.at("latency_p50") < unstalled);
    auto quickack = measure(lab, spec_of("rr", {{"duration", "\"1s\""},
                                                {"server_split_write", "true"},
                                                {"server_nodelay", "false"},
                                                {"client_quickack", "true"}}));
    CHECK(quickack.metrics.at("latency_p50") < unstalled);
}

TEST_CASE("http over a bare veth completes requests without errors", "[.root][root][probes][http]") {
    if (skip_unless_root()) return;
    BareLab lab;
    double least = software_cpu() ? 100 : 1000;
    auto r = measure(lab, spec_of("http", {{"duration", "\"1s\""}, {"connections", "10"}}));
    CHECK(r.metrics.at("requests_per_second") > least);
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("latency_p50") < (software_cpu() ? 0.050 : 0.005));
    auto paced = measure(lab, spec_of("http", {{"duration", "\"1s\""}, {"connections", "10"}, {"rate", "500"}}));
    CHECK(paced.metrics.at("requests_per_second") == Approx(500).epsilon(0.05));
    CHECK(paced.metrics.at("errors") == 0);
}

// The same stall as rr's above, through HTTP keep-alive: the server writes the headers, then
// the body; Nagle holds the body until the headers are acknowledged, and the client (in
// delayed-ACK mode) acknowledges them only when its 40 ms timer fires. Measured on the host:
// p50 44 ms stalled, tens of microseconds cured (see docs/probes.md).
TEST_CASE("http split writes with Nagle on stall for the delayed ACK, and TCP_NODELAY or quick-ack cures it",
          "[.root][root][probes][http]") {
    if (skip_unless_root()) return;
    double unstalled = software_cpu() ? 0.020 : 0.010;
    BareLab lab;
    auto stalled = measure(lab, spec_of("http", {{"duration", "\"3s\""},
                                                 {"connections", "10"},
                                                 {"server_split_write", "true"},
                                                 {"server_nodelay", "false"},
                                                 {"client_quickack", "false"}}));
    CHECK(stalled.metrics.at("latency_p50") >= 0.030);
    CHECK(stalled.metrics.at("latency_p50") < 0.25);
    CHECK(stalled.metrics.at("errors") == 0);
    // 10 connections, one request each per ~44 ms
    CHECK(stalled.metrics.at("requests_per_second") < 10 / 0.030);
    auto nodelay = measure(lab, spec_of("http", {{"duration", "\"3s\""},
                                                 {"connections", "10"},
                                                 {"server_split_write", "true"},
                                                 {"server_nodelay", "true"},
                                                 {"client_quickack", "false"}}));
    CHECK(nodelay.metrics.at("latency_p50") < unstalled);
    CHECK(nodelay.metrics.at("errors") == 0);
    auto quickack = measure(lab, spec_of("http", {{"duration", "\"1s\""},
                                                  {"connections", "10"},
                                                  {"server_split_write", "true"},
                                                  {"server_nodelay", "false"},
                                                  {"client_quickack", "true"}}));
    CHECK(quickack.metrics.at("latency_p50") < unstalled);
}

// The known result the brief names: under 100 connections the stall took the average
// latency to 44 ms and the rate to 2,300 requests/s (from 9 ms and 12,300/s). The stall is
// the kernel's 40 ms delayed-ACK timer, so its numbers hold on any machine; the cure's rate
// is the CPU's, at least the source's 5x on a real one.
TEST_CASE("100 connections against a split-write Nagle server reproduce the known 44 ms and 2300 requests/s",
          "[.root][root][probes][http]") {
    if (skip_unless_root()) return;
    BareLab lab;
    auto stalled = measure(lab, spec_of("http", {{"duration", "\"3s\""},
                                                 {"connections", "100"},
                                                 {"server_split_write", "true"},
                                                 {"server_nodelay", "false"},
                                                 {"client_quickack", "false"}}));
    CHECK(stalled.metrics.at("errors") == 0);
    CHECK(stalled.metrics.at("latency_mean") >= 0.040);
    CHECK(stalled.metrics.at("latency_mean") <= 0.050);
    CHECK(stalled.metrics.at("requests_per_second") >= 100 / 0.050);
    CHECK(stalled.metrics.at("requests_per_second") <= 100 / 0.040);
    auto nodelay = measure(lab, spec_of("http", {{"duration", "\"3s\""},
                                                 {"connections", "100"},
                                                 {"server_split_write", "true"},
                                                 {"server_nodelay", "true"},
                                                 {"client_quickack", "false"}}));
    CHECK(nodelay.metrics.at("errors") == 0);
    CHECK(nodelay.metrics.at("latency_mean") < 0.020);
    CHECK(nodelay.metrics.at("requests_per_second") >= 5 * stalled.metrics.at("requests_per_second"));
}

TEST_CASE("http with a url loads a server in the server namespace from the client namespace",
          "[.root][root][probes][http]") {
    if (skip_unless_root()) return;
    BareLab lab;
    http::HttpServer server(lab.where.server, http::ServerOptions{});
    auto url = fmt::format("\"http://{}:{}/\"", lab.where.server.address, server.port());
    auto r = measure(lab, spec_of("http", {{"duration", "\"1s\""}, {"url", url}}));
    server.stop_and_join();
    CHECK(r.metrics.at("requests") > 0);
    CHECK(r.metrics.at("errors") == 0);
    CHECK(server.requests() >= r.metrics.at("requests"));
}

TEST_CASE("iperf3 and ping run inside the namespaces and report sane numbers", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    try {
        sys::find_tool("iperf3");
        sys::find_tool("ping");
    } catch (const Error& e) {
        WARN("SKIPPED: " << e.what());
        return;
    }
    BareLab lab;
    auto iperf = measure(lab, spec_of("throughput", {{"tool", "\"iperf3\""}, {"duration", "\"2s\""}}));
    CHECK(iperf.metrics.at("throughput") > 1e9);
    auto ping = measure(
        lab, spec_of("rtt", {{"tool", "\"ping\""}, {"method", "\"icmp\""}, {"count", "20"}, {"interval", "\"5ms\""}}));
    CHECK(ping.metrics.at("loss") == 0);
    CHECK(ping.metrics.at("rtt_p50") < 1e-3);
}

TEST_CASE("wanlab probe prints JSON in base units and removes its namespaces", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    int status = -1;
    auto out = run_wanlab("probe rtt --method udp --count 5 --interval 2ms --json", status);
    INFO(out);
    REQUIRE(status == 0);
    auto j = nlohmann::json::parse(out);
    CHECK(j["kind"] == "rtt");
    CHECK(j["units"]["rtt_p50"] == "s");
    CHECK(j["metrics"]["rtt_p50"].get<double>() < 1e-3);
    CHECK(j["samples"]["rtt"].size() == 5);
    CHECK(!probe_namespaces_left());
}

TEST_CASE("wanlab probe checks options like an experiment file", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    int status = -1;
    auto out = run_wanlab("probe rtt --streams 4", status);
    INFO(out);
    CHECK(status == 2);
    CHECK(out.find("streams") != std::string::npos);
    CHECK(!probe_namespaces_left());
}

TEST_CASE("wanlab probe interrupted by SIGINT exits 130 and removes its namespaces", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
        ::execl(WANLAB_BINARY, WANLAB_BINARY, "probe", "throughput", "--duration", "30s", nullptr);
        ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ::kill(pid, SIGINT);
    auto start = std::chrono::steady_clock::now();
    int st = 0;
    ::waitpid(pid, &st, 0);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 130);
    CHECK(!probe_namespaces_left());
}

// --- external tools through Boost.Process ([external]) --------------------------------------

namespace {
/// WARNs "SKIPPED: ..." and returns false when `tool` is not installed.
bool have_tool(const char* tool) {
    try {
        sys::find_tool(tool);
        return true;
    } catch (const Error& e) {
        WARN("SKIPPED: " << e.what());
        return false;
    }
}

void check_metric_names(const ProbeResult& r) {
    const auto* kind = find_kind(r.kind);
    REQUIRE(kind);
    for (const auto& [name, value] : r.metrics) {
        INFO(name);
        CHECK(describe_metric(*kind, name) != nullptr);
    }
}
}  // namespace

TEST_CASE("a tool process runs inside the endpoint's namespace", "[.root][root][probes][external]") {
    if (skip_unless_root()) return;
    BareLab lab;
    sys::Process server_side(lab.where.server.netns, {"/bin/cat", "/proc/self/net/dev"});
    auto o = server_side.wait(std::chrono::seconds(5), {});
    INFO(o.out);
    CHECK(sys::exited_ok(o));
    CHECK(o.out.find("wlt-b:") != std::string::npos);
    CHECK(o.out.find("wlt-a:") == std::string::npos);
}

TEST_CASE("wrk loads the built-in server over a bare veth without errors, like the built-in http probe",
          "[.root][root][probes][external]") {
    if (skip_unless_root() || !have_tool("wrk")) return;
    BareLab lab;
    double least = software_cpu() ? 100 : 1000;
    auto wrk = measure(lab, spec_of("http", {{"tool", "\"wrk\""}, {"duration", "\"2s\""}, {"connections", "10"}}));
    check_metric_names(wrk);
    CHECK(wrk.tool == "wrk");
    CHECK(wrk.metrics.at("requests_per_second") > least);
    CHECK(wrk.metrics.at("errors") == 0);
    CHECK(wrk.metrics.at("non_2xx") == 0);
    CHECK(wrk.metrics.at("latency_p50") > 0);
    CHECK(wrk.metrics.at("latency_p50") < (software_cpu() ? 0.050 : 0.005));
    CHECK(wrk.metrics.at("latency_p50") <= wrk.metrics.at("latency_p90"));
    CHECK(wrk.metrics.at("latency_p90") <= wrk.metrics.at("latency_p99"));
    CHECK(wrk.metrics.at("latency_p99") <= wrk.metrics.at("latency_max"));
    // 1024-byte bodies plus about 100 bytes of headers per answer
    CHECK(wrk.metrics.at("throughput") / 8 / wrk.metrics.at("requests_per_second") == Approx(1130).epsilon(0.1));
    auto builtin = measure(lab, spec_of("http", {{"duration", "\"2s\""}, {"connections", "10"}}));
    UNSCOPED_INFO("requests/s wrk " << wrk.metrics.at("requests_per_second") << ", built-in "
                                    << builtin.metrics.at("requests_per_second"));
    CHECK(builtin.metrics.at("requests_per_second") > least);
}

TEST_CASE("wrk against a port nobody listens on fails with wrk's own message", "[.root][root][probes][external]") {
    if (skip_unless_root() || !have_tool("wrk")) return;
    BareLab lab;
    auto url = fmt::format("\"http://{}:9/\"", lab.where.server.address);
    auto spec = spec_of("http", {{"tool", "\"wrk\""}, {"duration", "\"1s\""}, {"url", url}});
    REQUIRE_THROWS_WITH(make_probe(spec)->run(lab.where, {}),
                        fmt::format("wrk exited with status 1: unable to connect to {}:9 Connection refused",
                                    lab.where.server.address));
}

TEST_CASE("hping3 times the handshake with the built-in server's socket over a bare veth",
          "[.root][root][probes][external]") {
    if (skip_unless_root() || !have_tool("hping3")) return;
    BareLab lab;
    auto hping = measure(lab, spec_of("rtt", {{"tool", "\"hping3\""}, {"count", "50"}, {"interval", "\"10ms\""}}));
    check_metric_names(hping);
    CHECK(hping.tool == "hping3");
    CHECK(hping.metrics.at("loss") == 0);
    CHECK(hping.metrics.at("sent") == 50);
    CHECK(hping.samples.at("rtt").size() == 50);
    CHECK(hping.metrics.at("rtt_min") >= 0);
    // hping3 prints 0.1 ms steps and takes replies through libpcap in user space: measured p50
    // 0.6 ms where the built-in tcp probe reads 0.09-0.11 ms (docs/probes.md)
    CHECK(hping.metrics.at("rtt_p50") < (software_cpu() ? 0.020 : 0.002));
    CHECK(hping.metrics.at("rtt_min") <= hping.metrics.at("rtt_p50"));
    CHECK(hping.metrics.at("rtt_p50") <= hping.metrics.at("rtt_max"));
    auto builtin = measure(lab, spec_of("rtt", {{"count", "50"}, {"interval", "\"10ms\""}}));
    UNSCOPED_INFO("rtt p50 hping3 " << hping.metrics.at("rtt_p50") << ", built-in tcp "
                                    << builtin.metrics.at("rtt_p50"));
    CHECK(builtin.metrics.at("rtt_p50") < 1e-3);
}

// --- against a remote target (host mode) ([remote]) -----------------------------------------
// The "target" is a server the test starts in namespace b; the probe gets where.server.remote
// and a server namespace that does not exist, so anything it tried to start there would throw.

namespace {
/// lab.where with the server remote at `port`.
Endpoints remote_at(const BareLab& lab, std::uint16_t port) {
    Endpoints where = lab.where;
    where.server.netns = "wanlab-ptest-absent";
    where.server.port = port;
    where.server.remote = true;
    return where;
}

/// The `tool` option's values to try: "builtin", and `tool` when it is installed.
std::vector<std::string> builtin_and(const char* tool) {
    std::vector<std::string> tools{"\"builtin\""};
    if (have_tool(tool)) tools.push_back(fmt::format("\"{}\"", tool));
    return tools;
}

/// A TCP port nobody listens on in the lab's server namespace.
std::uint16_t closed_port(const BareLab& lab) {
    Fd probe = listen_tcp(lab.where.server.netns, lab.where.server.address, 0);
    return local_port(probe.get());  // closed when `probe` goes
}
}  // namespace

TEST_CASE("tcp rtt against a remote target times the handshake with the target's own listener",
          "[.root][root][probes][remote]") {
    if (skip_unless_root()) return;
    BareLab lab;
    Fd target = listen_tcp(lab.where.server.netns, lab.where.server.address, 0);
    auto r =
        measure(remote_at(lab, local_port(target.get())), spec_of("rtt", {{"count", "50"}, {"interval", "\"2ms\""}}));
    CHECK(r.metrics.at("sent") == 50);
    CHECK(r.metrics.at("loss") == 0);
    CHECK(r.samples.at("rtt").size() == 50);
    CHECK(r.metrics.at("rtt_p50") > 0);
    CHECK(r.metrics.at("rtt_p50") < 1e-3);
}

TEST_CASE("tcp rtt against a remote target with nothing listening loses every probe: it started no listener",
          "[.root][root][probes][remote]") {
    if (skip_unless_root()) return;
    BareLab lab;
    auto r = measure(remote_at(lab, closed_port(lab)), spec_of("rtt", {{"count", "10"}, {"interval", "\"2ms\""}}));
    CHECK(r.metrics.at("sent") == 10);
    CHECK(r.metrics.at("loss") == 1);
}

TEST_CASE("icmp rtt, built in and with ping, measures a remote target without starting anything there",
          "[.root][root][probes][remote]") {
    if (skip_unless_root()) return;
    BareLab lab;
    for (const auto& tool : builtin_and("ping")) {
        INFO("tool " << tool);
        auto r =
            measure(remote_at(lab, 0),
                    spec_of("rtt", {{"tool", tool}, {"method", "\"icmp\""}, {"count", "20"}, {"interval", "\"5ms\""}}));
        CHECK(r.metrics.at("sent") == 20);
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.metrics.at("rtt_p50") < 1e-3);
    }
}

TEST_CASE("hping3 against a remote target times the handshake with the target's listener and starts none",
          "[.root][root][probes][remote][external]") {
    if (skip_unless_root() || !have_tool("hping3")) return;
    BareLab lab;
    auto spec = spec_of("rtt", {{"tool", "\"hping3\""}, {"count", "20"}, {"interval", "\"10ms\""}});
    {
        Fd target = listen_tcp(lab.where.server.netns, lab.where.server.address, 0);
        auto r = measure(remote_at(lab, local_port(target.get())), spec);
        CHECK(r.metrics.at("sent") == 20);
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.metrics.at("rtt_p50") < (software_cpu() ? 0.020 : 0.002));
        for (const auto& n : r.notes) CHECK(n.find("RST") == std::string::npos);
    }
    // Nothing listening: the target's kernel answers every SYN with RST.
    auto refused = measure(remote_at(lab, closed_port(lab)), spec);
    bool resets = false;
    for (const auto& n : refused.notes) resets |= n.find("20 answers were RST") != std::string::npos;
    CHECK(resets);
}

TEST_CASE("iperf3 against a remote target loads the target's own iperf3 -s on the given port",
          "[.root][root][probes][remote][external]") {
    if (skip_unless_root() || !have_tool("iperf3")) return;
    BareLab lab;
    auto spec = spec_of("throughput", {{"tool", "\"iperf3\""}, {"duration", "\"1s\""}});
    SECTION("with iperf3 -s on the target") {
        sys::Process target(lab.where.server.netns,
                            {sys::find_tool("iperf3"), "-s", "-B", lab.where.server.address, "-p", "5202"});
        REQUIRE(await_tcp_listening(lab.where.server.netns, 5202, std::chrono::seconds(5)));
        auto r = measure(remote_at(lab, 5202), spec);
        CHECK(r.metrics.at("throughput") > 1e8);
    }
    SECTION("without: iperf3 -c finds nothing to connect to") {
        REQUIRE_THROWS_WITH(measure(remote_at(lab, 5202), spec), Catch::Contains("unable to connect"));
    }
}

TEST_CASE("http with a url against a remote target loads the target's server and starts none",
          "[.root][root][probes][remote][http]") {
    if (skip_unless_root()) return;
    BareLab lab;
    for (const auto& tool : builtin_and("wrk")) {
        INFO("tool " << tool);
        http::HttpServer target(lab.where.server, http::ServerOptions{});
        auto url = fmt::format("\"http://{}:{}/\"", lab.where.server.address, target.port());
        auto r = measure(remote_at(lab, target.port()),
                         spec_of("http", {{"tool", tool}, {"duration", "\"1s\""}, {"url", url}}));
        target.stop_and_join();
        CHECK(r.metrics.at("requests") > 0);
        CHECK(r.metrics.at("errors") == 0);
        CHECK(target.requests() >= r.metrics.at("requests"));
    }
}

// Issue 18: the diagnosis names the delayed-ACK stall from the client's kernel counters and
// the timing alone, and says nothing of it where TCP_NODELAY removed the stall.
TEST_CASE("wanlab probe names the delayed-ACK stall of a split-write Nagle server and not of a nodelay one",
          "[.root][root][probes]") {
    if (skip_unless_root()) return;
    for (const char* kind : {"rr", "http"}) {
        int status = -1;
        auto stalled = run_wanlab(fmt::format("probe {} --server-split-write true --server-nodelay false "
                                              "--client-quickack false --duration 2s --json",
                                              kind),
                                  status);
        INFO(stalled);
        REQUIRE(status == 0);
        auto j = nlohmann::json::parse(stalled);
        // The evidence: one timer-fired delayed ACK per transaction on the client.
        double acks = j["counters"]["client"].value("TcpExt.DelayedACKs", 0.0);
        double done = j["metrics"][std::string(kind) == "http" ? "requests" : "transactions"].get<double>();
        CHECK(acks >= 0.8 * done);
        REQUIRE(j["diagnosis"].size() >= 1);
        CHECK_THAT(j["diagnosis"][0].get<std::string>(),
                   Catch::Contains("delayed-ACK stall") && Catch::Contains("TCP_NODELAY on the server"));

        auto cured = run_wanlab(fmt::format("probe {} --server-split-write true --server-nodelay true "
                                            "--client-quickack false --duration 2s --json",
                                            kind),
                                status);
        INFO(cured);
        REQUIRE(status == 0);
        auto c = nlohmann::json::parse(cured);
        CHECK(c["metrics"]["latency_mean"].get<double>() < 0.030);
        for (const auto& d : c["diagnosis"]) CHECK_THAT(d.get<std::string>(), !Catch::Contains("delayed-ACK"));
    }
    CHECK(!probe_namespaces_left());
}

namespace {

/// `lab`'s endpoints with `spec`'s server run as a far server (as an agent runs it on
/// another machine) in the server namespace, the probe itself starting none.
Endpoints with_far_server(const BareLab& lab, const ProbeSpec& spec) {
    Endpoints w = lab.where;
    std::shared_ptr<FarServer> far = serve_far(spec, {lab.b.name(), "198.18.200.2", 0});
    w.server.port = far->port();
    w.server.remote = true;
    w.server.far = far;
    return w;
}

}  // namespace

TEST_CASE("throughput against its far server: the server's socket takes the options and reports its side",
          "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    SECTION("upload: goodput from what the server acknowledged, its receive buffer granted there") {
        auto spec = spec_of("throughput", {{"rcvbuf", "\"32KiB\""}, {"duration", "\"1s\""}});
        auto where = with_far_server(lab, spec);
        auto r = measure(where, spec);
        CHECK(r.metrics.at("rcvbuf_granted") == 64 * 1024);  // the far socket's, as asked
        CHECK(r.metrics.at("throughput") > 1e8);
        auto report = where.server.far->stop();  // the first stop's report, kept
        REQUIRE(report.connections.size() == 1);
        const auto& theirs = report.connections.begin()->second.values;
        double client_bytes = r.connections.at(0).values.at("bytes");
        // The server read what it acknowledged, less what still sat in its 64 KiB buffer.
        CHECK(theirs.at("bytes") + 64 * 1024 >= client_bytes);
        CHECK(theirs.at("bytes") <= client_bytes * 1.1 + 64 * 1024);
        CHECK(report.connections.begin()->second.direction == "upload");
    }
    SECTION("download: the sender's TCP_INFO and its series come from the server") {
        auto spec = spec_of("throughput", {{"direction", "\"download\""},
                                           {"duration", "\"1s\""},
                                           {"congestion_control", "\"reno\""},
                                           {"interval", "\"100ms\""}});
        auto where = with_far_server(lab, spec);
        auto r = measure(where, spec);
        CHECK(r.metrics.at("throughput") > 1e8);
        REQUIRE(r.connections.size() == 1);
        CHECK(r.connections[0].congestion_control == "reno");  // set on the server's socket
        CHECK(r.connections[0].values.at("cwnd") > 0);
        CHECK(r.connections[0].values.at("sndbuf_granted") > 0);
        REQUIRE(r.series.count("stream1.cwnd"));
        CHECK(r.series.at("stream1.cwnd").size() >= 5);  // every 100 ms of a 1 s measurement, there
        CHECK(r.series.at("stream1.cwnd").t.front() >= 0);
        CHECK(r.series.count("stream1.rcv_space"));  // the receiver, here
    }
}

TEST_CASE("rr, http and rtt against their far servers measure as against their own", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    double least = software_cpu() ? 100 : 1000;
    {
        auto spec = spec_of("rr", {{"duration", "\"1s\""}, {"connections", "2"}});
        auto r = measure(with_far_server(lab, spec), spec);
        CHECK(r.metrics.at("transactions_per_second") > least);
        CHECK(r.metrics.at("errors") == 0);
    }
    {  // the server's options reach the far server: its split writes with Nagle stall
        auto spec = spec_of("rr", {{"duration", "\"1s\""},
                                   {"server_split_write", "true"},
                                   {"server_nodelay", "false"},
                                   {"client_quickack", "false"}});
        auto r = measure(with_far_server(lab, spec), spec);
        CHECK(r.metrics.at("latency_p50") >= 0.035);
        CHECK(r.metrics.at("latency_p50") < 0.25);
    }
    {
        auto spec = spec_of("http", {{"duration", "\"1s\""}, {"connections", "4"}});
        auto where = with_far_server(lab, spec);
        auto r = measure(where, spec);
        CHECK(r.metrics.at("requests_per_second") > least);
        CHECK(r.metrics.at("errors") == 0);
        CHECK(where.server.far->stop().requests >= r.metrics.at("requests"));
    }
    for (const char* method : {"\"tcp\"", "\"udp\""}) {
        INFO("method " << method);
        auto spec = spec_of("rtt", {{"method", method}, {"count", "20"}, {"interval", "\"2ms\""}});
        auto r = measure(with_far_server(lab, spec), spec);
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.metrics.at("rtt_p50") < 1e-3);
    }
}

TEST_CASE("udp over a bare veth delivers its rate with no loss and a one-way delay under 5 ms, built in and iperf3",
          "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    for (const char* direction : {"\"upload\"", "\"download\""}) {
        INFO(direction);
        auto r = measure(lab.where, spec_of("udp", {{"rate", "\"20mbit\""},
                                                    {"size", "1200"},
                                                    {"direction", direction},
                                                    {"duration", "\"1s\""},
                                                    {"interval", "\"250ms\""}}));
        // 20 Mbit/s of 1200-byte datagrams: 2083 a second; the pace holds within a datagram.
        CHECK(r.metrics.at("sent") == Approx(2083).margin(3));
        CHECK(r.metrics.at("received") == r.metrics.at("sent"));
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.metrics.at("loss_low") == 0);
        CHECK(r.metrics.at("loss_high") < 0.005);  // 0 of 2083 at 99%: under 0.32%
        CHECK(r.metrics.at("throughput") == Approx(20e6).epsilon(0.02));
        CHECK(r.metrics.at("delay_p50") < 0.005);
        CHECK(r.metrics.at("delay_min") > 0);
        CHECK(r.metrics.at("reordered") == 0);
        CHECK(r.metrics.at("duplicates") == 0);
        CHECK(r.series.at("throughput").size() == 4);
    }
    if (sys::search_path("iperf3").empty()) {
        WARN("SKIPPED: iperf3 is not installed");
        return;
    }
    auto i = measure(
        lab.where,
        spec_of("udp", {{"rate", "\"20mbit\""}, {"size", "1200"}, {"tool", "\"iperf3\""}, {"duration", "\"1s\""}}));
    CHECK(i.tool == "iperf3");
    CHECK(i.metrics.at("loss") == 0);
    CHECK(i.metrics.at("throughput") == Approx(20e6).epsilon(0.05));
    CHECK(i.metrics.at("jitter") < 0.005);
    CHECK_FALSE(i.metrics.count("delay_p50"));  // iperf3 reports no one-way delay
}

TEST_CASE("iperf3 -u whose opening datagram the path lost is run again, and the result says so",
          "[.root][root][probes]") {
    if (skip_unless_root()) return;
    if (sys::search_path("iperf3").empty()) {
        WARN("SKIPPED: iperf3 is not installed");
        return;
    }
    BareLab lab;
    // The server's namespace discards UDP to iperf3's port (a policy rule ahead of the local
    // table's), so the cookie datagram that opens the test is lost and iperf3, which never
    // sends it again, hangs (esnet/iperf#351); the rule goes after 2 s, before the first run
    // is killed.
    auto ip_rule = [&](const char* verb) {
        return std::system(
            fmt::format("ip -n {} rule {} pref 10 ipproto udp dport 5201 blackhole", lab.b.name(), verb).c_str());
    };
    REQUIRE(
        std::system(fmt::format("ip -n {0} rule add pref 100 lookup local && ip -n {0} rule del pref 0", lab.b.name())
                        .c_str()) == 0);
    REQUIRE(ip_rule("add") == 0);
    std::thread lift([&] {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        ip_rule("del");
    });
    ProbeResult r;
    try {
        r = measure(lab.where,
                    spec_of("udp", {{"rate", "\"10mbit\""}, {"tool", "\"iperf3\""}, {"duration", "\"1s\""}}));
    } catch (...) {
        lift.join();
        throw;
    }
    lift.join();
    INFO(fmt::format("{}", fmt::join(r.notes, "\n")));
    CHECK(r.metrics.at("loss") == 0);
    CHECK(r.metrics.at("throughput") == Approx(10e6).epsilon(0.05));
    CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
        return n.find("the first run hung") != std::string::npos && n.find("esnet/iperf#351") != std::string::npos;
    }));
}

TEST_CASE("every built-in probe measures over IPv6 as over IPv4, and the packets are IPv6", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    BareLab lab;
    const std::string server_ns = lab.b.name();
    auto received = [&] { return snmp6(server_ns, "Ip6InReceives"); };
    for (const char* method : {"\"tcp\"", "\"udp\"", "\"icmp\""}) {
        INFO("method " << method);
        auto before = received();
        testing::CpuWatch cpu;
        auto r = measure(lab.where6, spec_of("rtt", {{"method", method}, {"count", "50"}, {"interval", "\"2ms\""}}));
        INFO("rtt min " << r.metrics.at("rtt_min") << " s, p99 " << r.metrics.at("rtt_p99") << " s; "
                        << cpu.describe());
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.samples.at("rtt").size() == 50);
        CHECK(r.metrics.at("rtt_p50") > 0);
        CHECK(r.metrics.at("rtt_p50") < 1e-3);
        CHECK(received() - before >= 50);  // each probe reached the server as an IPv6 packet
    }
    auto before = received();
    auto bulk = measure(lab.where6, spec_of("throughput", {{"duration", "\"1s\""}}));
    CHECK(bulk.metrics.at("throughput") > 1e9);
    // 1 Gbit/s for a second in at most 64 KiB segments (GRO): thousands of IPv6 packets.
    CHECK(received() - before > 2000);
    auto rr = measure(lab.where6, spec_of("rr", {{"duration", "\"1s\""}}));
    CHECK(rr.metrics.at("errors") == 0);
    CHECK(rr.metrics.at("transactions_per_second") > (software_cpu() ? 100 : 1000));
    auto http = measure(lab.where6, spec_of("http", {{"duration", "\"1s\""}, {"connections", "4"}}));
    CHECK(http.metrics.at("errors") == 0);
    CHECK(http.metrics.at("requests") > 100);
    auto udp = measure(lab.where6, spec_of("udp", {{"rate", "\"20mbit\""}, {"size", "1200"}, {"duration", "\"1s\""}}));
    CHECK(udp.metrics.at("sent") == Approx(2083).margin(3));
    CHECK(udp.metrics.at("loss") == 0);
    CHECK(udp.metrics.at("throughput") == Approx(20e6).epsilon(0.02));
}

TEST_CASE("iperf3 and ping measure over IPv6 inside the namespaces", "[.root][root][probes][external]") {
    if (skip_unless_root()) return;
    try {
        sys::find_tool("iperf3");
        sys::find_tool("ping");
    } catch (const Error& e) {
        WARN("SKIPPED: " << e.what());
        return;
    }
    BareLab lab;
    auto before = snmp6(lab.b.name(), "Ip6InReceives");
    auto iperf = measure(lab.where6, spec_of("throughput", {{"tool", "\"iperf3\""}, {"duration", "\"2s\""}}));
    CHECK(iperf.metrics.at("throughput") > 1e9);
    CHECK(snmp6(lab.b.name(), "Ip6InReceives") - before > 2000);
    auto ping = measure(
        lab.where6,
        spec_of("rtt", {{"tool", "\"ping\""}, {"method", "\"icmp\""}, {"count", "20"}, {"interval", "\"5ms\""}}));
    CHECK(ping.metrics.at("loss") == 0);
    CHECK(ping.metrics.at("rtt_p50") < 1e-3);
    CHECK_THROWS_WITH(measure(lab.where6, spec_of("rtt", {{"tool", "\"hping3\""}, {"method", "\"tcp\""}})),
                      Catch::Contains("hping3 speaks IPv4 only"));
}

TEST_CASE("wanlab probe --family ipv6 measures its bare pair over IPv6", "[.root][root][probes]") {
    if (skip_unless_root()) return;
    int status = -1;
    auto out = run_wanlab("probe rtt --method tcp --count 5 --interval 2ms --family ipv6 --json", status);
    INFO(out);
    REQUIRE(status == 0);
    auto j = nlohmann::json::parse(out);
    CHECK(j["metrics"]["loss"].get<double>() == 0);
    CHECK(j["samples"]["rtt"].size() == 5);
    CHECK(j["server"].get<std::string>().find("2001:2::") != std::string::npos);
    CHECK(!probe_namespaces_left());
}

// ---- transfer: N bytes per request; times set by a tbf's rate, counts exact.

namespace {
/// A tbf at 8 Mbit/s on the server's egress: what a download crosses. Its queue (300 ms,
/// 300 KB) holds a whole 256 KiB transfer, so nothing is lost and slow start never ends.
void shape_downloads(const BareLab& lab) {
    REQUIRE(std::system(
                fmt::format("tc -n {} qdisc add dev wlt-b root tbf rate 8mbit burst 16kb latency 300ms", lab.b.name())
                    .c_str()) == 0);
}
// 256 KiB at 8 Mbit/s of 1514-byte frames carrying 1448 bytes each; a transfer may start with
// up to the tbf's 16 KiB burst in hand.
constexpr double kShapedSeconds = 262144.0 * 8 / 8e6 * 1514 / 1448;
constexpr double kBurstSeconds = 16384.0 * 8 / 8e6;
}  // namespace

TEST_CASE("transfer: 256 KiB through a tbf at 8 Mbit/s takes its bytes over the rate, built in and with curl",
          "[.root][root][probes][transfer]") {
    if (skip_unless_root()) return;
    BareLab lab;
    shape_downloads(lab);
    for (const char* tool : {"\"builtin\"", "\"curl\""}) {
        for (const char* reuse : {"false", "true"}) {
            INFO("tool " << tool << ", reuse " << reuse);
            testing::CpuWatch cpu;
            std::vector<std::pair<std::string, std::string>> options{
                {"size", "\"256KiB\""}, {"tool", tool}, {"reuse", reuse}, {"count", "4"}, {"duration", "\"5s\""}};
            // Reno: no HyStart, so only a loss would end its slow start (the tbf's queue
            // grows the RTT, which cubic's HyStart takes as the end).
            if (std::string(tool) == "\"builtin\"") options.emplace_back("congestion_control", "\"reno\"");
            auto r = measure(lab, spec_of("transfer", options));
            INFO(cpu.describe());
            CHECK(r.metrics.at("transfers") == 4);  // count bounds it; duration does not
            CHECK(r.metrics.at("attempted") == 4);
            CHECK(r.metrics.at("failed") == 0);
            CHECK(r.metrics.at("completion_p50") >= kShapedSeconds - kBurstSeconds);
            CHECK(r.metrics.at("completion_p50") <= kShapedSeconds * 1.1);
            CHECK(r.metrics.at("completion_max") <= kShapedSeconds * 1.2);
            CHECK(r.metrics.at("goodput") == Approx(8e6 * 1448 / 1514).epsilon(0.1));
            CHECK(r.metrics.at("ttfb_p50") < r.metrics.at("completion_p50"));
            CHECK(r.samples.at("completion").size() == 4);
            CHECK(r.series.at("completion_time").size() == 4);
            CHECK(r.metrics.count("connect_p50") == (std::string(reuse) == "false" ? 1u : 0u));
            if (std::string(tool) == "\"builtin\"") {
                CHECK(r.metrics.at("slow_start_share") == 1);  // nothing lost: slow start never ended
                CHECK(r.metrics.at("retransmits") == 0);
            } else {
                CHECK(r.metrics.count("slow_start_share") == 0);  // curl cannot see the sender's socket
            }
        }
    }
    // BBR leaves STARTUP once its rate stops growing: the tbf's 8 Mbit/s is found within the
    // first 256 KiB.
    auto bbr = measure(
        lab,
        spec_of("transfer",
                {{"size", "\"256KiB\""}, {"count", "3"}, {"duration", "\"5s\""}, {"congestion_control", "\"bbr\""}}));
    CHECK(bbr.metrics.at("transfers") == 3);
    CHECK(bbr.metrics.at("slow_start_share") == 0);
}

TEST_CASE("transfer: a timeout shorter than the transfer counts every one as timed out, none as a sample",
          "[.root][root][probes][transfer]") {
    if (skip_unless_root()) return;
    BareLab lab;
    shape_downloads(lab);
    for (const char* tool : {"\"builtin\"", "\"curl\""}) {
        INFO("tool " << tool);
        auto r = measure(lab, spec_of("transfer", {{"size", "\"256KiB\""},
                                                   {"tool", tool},
                                                   {"timeout", "\"100ms\""},
                                                   {"count", "3"},
                                                   {"duration", "\"5s\""}}));
        CHECK(r.metrics.at("attempted") == 3);
        CHECK(r.metrics.at("completed") == 0);
        CHECK(r.metrics.at("timed_out") == 3);
        CHECK(r.metrics.at("failure_rate") == 1);
        CHECK(std::isnan(r.metrics.at("completion_p50")));  // no figure from no sample
        CHECK(r.samples.at("completion").empty());
        bool noted = false;
        for (const auto& n : r.notes) noted = noted || n.find("3 of 3 transfers failed (3 timed out)") == 0;
        CHECK(noted);
    }
}

TEST_CASE("transfer over a bare veth: parallel lanes, uploads, a far server, and IPv6 count every transfer",
          "[.root][root][probes][transfer]") {
    if (skip_unless_root()) return;
    BareLab lab;
    SECTION("two lanes of five fresh downloads each: ten handshakes") {
        auto r = measure(lab, spec_of("transfer", {{"size", "\"64KiB\""}, {"parallel", "2"}, {"count", "5"}}));
        CHECK(r.metrics.at("transfers") == 10);
        CHECK(r.metrics.at("connect_p50") > 0);
        CHECK(r.metrics.at("connect_p50") < r.metrics.at("completion_p50"));
        CHECK(r.metrics.at("throughput") > 0);
    }
    SECTION("uploads over one reused connection: no handshake and no first byte to time") {
        auto r = measure(lab, spec_of("transfer", {{"size", "\"1MiB\""},
                                                   {"direction", "\"upload\""},
                                                   {"reuse", "true"},
                                                   {"count", "6"},
                                                   {"congestion_control", "\"reno\""}}));
        CHECK(r.metrics.at("transfers") == 6);
        CHECK(r.metrics.count("connect_p50") == 0);
        CHECK(r.metrics.count("ttfb_p50") == 0);
        CHECK(r.metrics.at("goodput") > 1e8);
    }
    SECTION("against its far server, as against its own") {
        auto spec = spec_of("transfer", {{"size", "\"128KiB\""}, {"count", "5"}});
        auto r = measure(with_far_server(lab, spec), spec);
        CHECK(r.metrics.at("transfers") == 5);
        CHECK(r.metrics.at("failed") == 0);
        CHECK(r.metrics.at("slow_start_share") >= 0);
    }
    SECTION("over IPv6") {
        auto r = measure(lab.where6, spec_of("transfer", {{"size", "\"64KiB\""}, {"count", "5"}}));
        CHECK(r.metrics.at("transfers") == 5);
        CHECK(r.metrics.at("failed") == 0);
    }
}
