// The built-in probes on loopback in the test's own namespace: no root, no changes to the
// machine, short runs with loose bounds. They check the plumbing (endpoints with netns "",
// threads, stopping, metric names); the bare-veth bounds are in probe_root_test.cpp. Also
// what a probe can measure against a remote target (host mode): remote_unsupported() and the
// same refusals at run time, and the tcp rtt probe against a listener of the test's own.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include "core/config.h"
#include "core/error.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "tests/support/probe_helper.h"

using namespace wanlab;
using namespace wanlab::probes;

namespace {
const Endpoints kLoopback{{"", "127.0.0.1", 0}, {"", "", 0}};

void check_names(const ProbeResult& r) {
    const auto* kind = find_kind(r.kind);
    REQUIRE(kind);
    for (const auto& [name, value] : r.metrics) {
        INFO(name);
        CHECK(describe_metric(*kind, name) != nullptr);
    }
}
}  // namespace

TEST_CASE("throughput on loopback moves data both ways and reports every connection", "[probes][loopback]") {
    auto r =
        make_probe(testing::probe_of("throughput", "direction = \"both\"\ninterval = \"100ms\"\n"))->run(kLoopback, {});
    CHECK(r.metrics.at("throughput_upload") > 0);
    CHECK(r.metrics.at("throughput_download") > 0);
    CHECK(r.connections.size() == 2);
    CHECK(r.series.at("throughput").size() == 3);
    CHECK(r.series.at("throughput").t.back() == Approx(0.3).margin(0.05));
    // TCP_INFO per stream and interval: the sender's window and RTT, the receiver's space.
    for (const char* name :
         {"stream1.cwnd", "stream1.srtt", "stream2.cwnd", "stream1.busy_time", "stream2.rcv_space"}) {
        INFO(name);
        REQUIRE(r.series.at(name).size() == 3);
        CHECK(r.series.at(name).value.back() > 0);
    }
    check_names(r);
}

TEST_CASE("receive_watermark is 1 ms of data, a power of two, at most 128 KiB and an eighth of the buffer",
          "[probes][throughput]") {
    constexpr std::int64_t kBigBuffer = 64 << 20;
    CHECK(receive_watermark(0, kBigBuffer) == 1);              // nothing arriving: the default
    CHECK(receive_watermark(1e6, kBigBuffer) == 512);          // 8 Mbit/s: 1000 bytes in 1 ms
    CHECK(receive_watermark(125e6, kBigBuffer) == 64 * 1024);  // 1 Gbit/s: 125,000 bytes in 1 ms
    CHECK(receive_watermark(4e9, kBigBuffer) == 128 * 1024);   // 32 Gbit/s: the cap
    CHECK(receive_watermark(4e9, 128 * 1024) == 16 * 1024);    // an eighth of 128 KiB
    CHECK(receive_watermark(4e9, 100'000) == 8 * 1024);        // 12,500: down to a power of two
    CHECK(receive_watermark(4e9, 4) == 1);
}

// Why the eighth: tcp_set_rcvlowat() grows a receive buffer that is smaller than about twice
// the watermark, and clamps the window to it. On a connection of our own, the watermark the
// probe would choose leaves the buffer as it was, where half the buffer grows it.
TEST_CASE("the receive watermark leaves the socket's receive buffer as the kernel sized it", "[probes][throughput]") {
    Fd listener = listen_tcp("", "127.0.0.1", 0);
    Fd client = connect_tcp("", "127.0.0.1", local_port(listener.get()), std::chrono::seconds(2));
    Fd server = accept_within(listener.get(), std::chrono::seconds(2));
    int before = get_int(server.get(), SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF");
    int watermark = receive_watermark(1e12, before);
    REQUIRE(watermark > 1);
    set_int(server.get(), SOL_SOCKET, SO_RCVLOWAT, watermark, "SO_RCVLOWAT");
    CHECK(get_int(server.get(), SOL_SOCKET, SO_RCVLOWAT, "SO_RCVLOWAT") == watermark);
    CHECK(get_int(server.get(), SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF") == before);
    // The counter-check: a watermark of the whole buffer makes the kernel grow it.
    int client_before = get_int(client.get(), SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF");
    set_int(client.get(), SOL_SOCKET, SO_RCVLOWAT, client_before, "SO_RCVLOWAT");
    CHECK(get_int(client.get(), SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF") > client_before);
}

TEST_CASE("rtt on loopback answers every tcp and udp probe", "[probes][loopback]") {
    for (const char* method : {"tcp", "udp"}) {
        INFO(method);
        auto r = make_probe(testing::probe_of(
                                "rtt", std::string("method = \"") + method + "\"\ncount = 5\ninterval = \"1ms\"\n"))
                     ->run(kLoopback, {});
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.samples.at("rtt").size() == 5);
        // Each probe at its send time: never before its turn on the 1 ms schedule (a late one
        // is followed by the overdue ones at once, so the gaps may shrink; the order holds).
        const auto& series = r.series.at("rtt");
        REQUIRE(series.size() == 5);
        CHECK(series.value == r.samples.at("rtt"));
        for (std::size_t i = 0; i < 5; ++i) {
            INFO("probe " << i);
            CHECK(series.t[i] >= 0.001 * static_cast<double>(i));
            if (i > 0) CHECK(series.t[i] >= series.t[i - 1]);
        }
        CHECK(r.metrics.at("rtt_p50") > 0);
        check_names(r);
    }
}

TEST_CASE("rr on loopback completes transactions without errors", "[probes][loopback]") {
    auto r = make_probe(testing::probe_of("rr", "connections = 2\nserver_split_write = true\ninterval = \"100ms\"\n"))
                 ->run(kLoopback, {});
    CHECK(r.metrics.at("transactions") > 0);
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("latency_p50") <= r.metrics.at("latency_max"));
    // Per 100 ms interval: the rate, whose intervals add up to every transaction, and the latency.
    const auto& rate = r.series.at("transactions_per_second");
    REQUIRE(rate.size() == 3);
    double sum = 0;
    for (double v : rate.value) sum += v * 0.1;
    CHECK(sum == Approx(r.metrics.at("transactions")).epsilon(0.05));
    CHECK(r.series.at("latency_mean").size() == 3);
    CHECK(r.series.at("latency_max").value[0] <= r.metrics.at("latency_max"));
    check_names(r);
}

TEST_CASE("a probe aborted from its tick stops its threads and rethrows", "[probes][loopback]") {
    auto probe = make_probe(testing::probe_of("throughput", "duration = \"10s\"\n"));
    auto start = std::chrono::steady_clock::now();
    REQUIRE_THROWS_WITH(probe->run(kLoopback, [] { throw Error("interrupted"); }), "interrupted");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
}

// --- against a remote target (host mode) ----------------------------------------------------

namespace {
const std::string kTcpNeedsPort =
    "a TCP rtt probe against a remote target needs a port to connect to: set the [lab] port to one the target "
    "listens on";
const std::string kIcmpHasNoPort =
    "ICMP carries no port: the [lab] port filter would leave it unimpaired; use method = \"tcp\" or drop `port`";
const std::string kUdpNeedsEcho =
    "rtt method \"udp\" needs wanlab's UDP echo server, which does not run on a remote target; use method = "
    "\"tcp\" or \"icmp\"";
const std::string kThroughputNeedsReceiver =
    "the built-in throughput probe needs wanlab's own receiver on the far side, which does not run on a remote "
    "target; use tool = \"iperf3\" with `iperf3 -s` running on the target";
const std::string kRrNeedsServer =
    "the rr probe needs wanlab's own server, which does not run on a remote target; in host mode measure with an "
    "http probe with a `url` or an rtt probe";
const std::string kHttpNeedsUrl = "an http probe against a remote target needs `url`";
const std::string kUrl = "url = \"http://198.18.0.2:8080/\"\n";
}  // namespace

TEST_CASE("remote_unsupported accepts a TCP rtt probe with a port and refuses it without one", "[probes][remote]") {
    for (const char* options : {"", "method = \"tcp\"\n", "tool = \"hping3\"\n"}) {
        INFO(options);
        auto spec = testing::probe_of("rtt", options);
        CHECK(remote_unsupported(spec, 443) == "");
        CHECK(remote_unsupported(spec, 0) == kTcpNeedsPort);
    }
}

TEST_CASE("remote_unsupported accepts an ICMP rtt probe without a port and refuses it with one", "[probes][remote]") {
    for (const char* options : {"method = \"icmp\"\n", "method = \"icmp\"\ntool = \"ping\"\n"}) {
        INFO(options);
        auto spec = testing::probe_of("rtt", options);
        CHECK(remote_unsupported(spec, 0) == "");
        CHECK(remote_unsupported(spec, 443) == kIcmpHasNoPort);
    }
}

TEST_CASE("remote_unsupported refuses the probes that need a server of wanlab's own", "[probes][remote]") {
    for (std::uint16_t port : {0, 443}) {
        INFO("port " << port);
        CHECK(remote_unsupported(testing::probe_of("rtt", "method = \"udp\"\n"), port) == kUdpNeedsEcho);
        CHECK(remote_unsupported(testing::probe_of("throughput", ""), port) == kThroughputNeedsReceiver);
        CHECK(remote_unsupported(testing::probe_of("rr", ""), port) == kRrNeedsServer);
        CHECK(remote_unsupported(testing::probe_of("http", ""), port) == kHttpNeedsUrl);
        CHECK(remote_unsupported(testing::probe_of("http", "tool = \"wrk\"\n"), port) == kHttpNeedsUrl);
    }
}

TEST_CASE("remote_unsupported accepts iperf3 and an http probe with a url, with or without a port",
          "[probes][remote]") {
    for (std::uint16_t port : {0, 5201}) {
        INFO("port " << port);
        CHECK(remote_unsupported(testing::probe_of("throughput", "tool = \"iperf3\"\n"), port) == "");
        CHECK(remote_unsupported(testing::probe_of("http", kUrl), port) == "");
        CHECK(remote_unsupported(testing::probe_of("http", kUrl + "tool = \"wrk\"\n"), port) == "");
    }
}

TEST_CASE("a probe against a remote target refuses at run time with remote_unsupported's reason", "[probes][remote]") {
    // Nothing may be started: the server's namespace does not exist, so entering it would throw
    // a different error.
    Endpoints remote{{"wanlab-absent", "127.0.0.1", 0, true}, {"", "", 0}};
    const std::vector<std::pair<ProbeSpec, std::string>> cases{
        {testing::probe_of("rtt", ""), kTcpNeedsPort},
        {testing::probe_of("rtt", "method = \"udp\"\n"), kUdpNeedsEcho},
        {testing::probe_of("throughput", ""), kThroughputNeedsReceiver},
        {testing::probe_of("rr", ""), kRrNeedsServer},
        {testing::probe_of("http", ""), kHttpNeedsUrl},
    };
    for (const auto& [spec, why] : cases) {
        INFO(spec.kind);
        CHECK_THROWS_MATCHES(make_probe(spec)->run(remote, {}), InputError, Catch::Matchers::Message(why));
    }
}

TEST_CASE("tcp rtt against a remote target on loopback connects to that target's listener", "[probes][remote]") {
    auto spec = testing::probe_of("rtt", "count = 5\ninterval = \"1ms\"\n");
    Fd listener = listen_tcp("", "127.0.0.1", 0);
    Endpoints remote{{"wanlab-absent", "127.0.0.1", local_port(listener.get()), true}, {"", "", 0}};
    auto r = make_probe(spec)->run(remote, {});
    CHECK(r.metrics.at("loss") == 0);
    CHECK(r.metrics.at("sent") == 5);
    CHECK(r.samples.at("rtt").size() == 5);
    // The probe started no listener of its own: with the target's closed, every probe is refused.
    listener.reset();
    auto refused = make_probe(spec)->run(remote, {});
    CHECK(refused.metrics.at("sent") == 5);
    CHECK(refused.metrics.at("loss") == 1);
}
