// The parsers of external tools' output, against output recorded on Debian 12 from iperf3
// 3.12, iputils ping 20221126, wrk 4.1.0 and hping3 3.0.0-alpha-2 (tests/probes/fixtures;
// wrk and hping3 between two namespaces over a veth, see docs/probes.md), and sys::Process
// with /bin/sh as the tool: no root, no namespaces.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/process.h"
#include "core/tools.h"
#include "probes/external.h"
#include "probes/transfer.h"

using namespace wanlab;
using namespace wanlab::probes;

namespace {
std::string fixture(const std::string& name) {
    std::ifstream in(std::string(WANLAB_PROBE_FIXTURES) + "/" + name);
    REQUIRE(in);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

ProbeSpec spec_of(const std::string& kind, const std::string& options) {
    config::Documents docs;
    Diagnostics diag;
    const auto* table = docs.parse("test", "[[probe]]\nkind = \"" + kind + "\"\n" + options, diag);
    REQUIRE(table);
    auto root = config::from_toml(*table);
    auto spec = parse_probe(root.find("probe")->items.at(0), 0, std::chrono::seconds(2), diag);
    INFO(diag.render(docs.sources()));
    REQUIRE(!diag.has_errors());
    return spec;
}

/// True once `pid` is gone for good: killed and reaped, not a zombie.
bool reaped(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

/// Whether this process has a child that exited and was not reaped.
bool zombie_children() {
    siginfo_t info{};
    return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
}

sys::Process sh(const std::string& script) { return sys::Process("", {"/bin/sh", "-c", script}); }

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
}  // namespace

TEST_CASE("iperf3 parser reads goodput, retransmits, rtt and cwnd of an upload", "[probes][external][iperf3]") {
    auto r = parse_iperf3_json(fixture("iperf3-upload-2streams.json"));
    CHECK(r.kind == "throughput");
    CHECK(r.tool == "iperf3");
    CHECK(r.metrics.at("throughput") == Approx(11231362820.519857));
    CHECK(r.metrics.at("throughput_upload") == Approx(11231362820.519857));
    CHECK(r.metrics.at("throughput_download") == 0);
    CHECK(r.metrics.at("retransmits") == 69);
    CHECK(r.metrics.at("rtt") == Approx((207 + 161) / 2.0 / 1e6));
    CHECK(r.metrics.at("cwnd") == Approx(916762.0 / 32768));
    const auto& tput = r.series.at("throughput");
    REQUIRE(tput.size() == 2);
    CHECK(tput.t[0] == Approx(1.00069));
    CHECK(tput.value[0] == Approx(12645489990.227545));
    // Each sending stream's own view per interval: cwnd in segments of tcp_mss_default.
    CHECK(r.series.at("stream1.cwnd").value[0] == Approx(1047728.0 / 32768));
    CHECK(r.series.at("stream1.srtt").value[0] == Approx(119e-6));
    CHECK(r.series.at("stream2.retransmits").value[0] == 4);
    CHECK(r.series.at("stream2.snd_wnd").value[0] == 33029120);
    CHECK(r.samples.count("throughput") == 0);
    REQUIRE(r.connections.size() == 2);
    CHECK(r.connections[0].direction == "upload");
}

TEST_CASE("iperf3 parser counts a reverse test as download", "[probes][external][iperf3]") {
    auto r = parse_iperf3_json(fixture("iperf3-download.json"));
    CHECK(r.metrics.at("throughput_download") == Approx(8159622690.299521));
    CHECK(r.metrics.at("throughput_upload") == 0);
    CHECK(r.metrics.count("rtt") == 0);  // the client was not the sender
    CHECK(r.connections.at(0).direction == "download");
}

TEST_CASE("iperf3 parser adds both directions of a bidirectional test", "[probes][external][iperf3]") {
    auto r = parse_iperf3_json(fixture("iperf3-bidir.json"));
    CHECK(r.metrics.at("throughput_upload") == Approx(7030722958.32641));
    CHECK(r.metrics.at("throughput_download") == Approx(6018361440.365612));
    CHECK(r.metrics.at("throughput") == Approx(7030722958.32641 + 6018361440.365612));
    CHECK(r.metrics.at("retransmits") == 123 + 77);
}

TEST_CASE("iperf3 parser reports iperf3's own error message", "[probes][external][iperf3]") {
    REQUIRE_THROWS_WITH(parse_iperf3_json(fixture("iperf3-refused.json")),
                        "iperf3: unable to connect to server: Connection refused");
    REQUIRE_THROWS_WITH(parse_iperf3_json("Connecting to host"), "iperf3 -J printed something that is not JSON");
}

TEST_CASE("ping parser reads the summary in seconds and the per-reply samples", "[probes][external][ping]") {
    auto r = parse_ping(fixture("ping-ok.txt"));
    CHECK(r.metrics.at("rtt_min") == Approx(0.051e-3));
    CHECK(r.metrics.at("rtt_avg") == Approx(0.072e-3));
    CHECK(r.metrics.at("rtt_max") == Approx(0.147e-3));
    CHECK(r.metrics.at("rtt_mdev") == Approx(0.037e-3));
    CHECK(r.metrics.at("rtt_p50") == Approx(0.055e-3));
    CHECK(r.metrics.at("loss") == 0);
    CHECK(r.samples.at("rtt").size() == 5);
}

TEST_CASE("ping parser reports total loss without rtt figures", "[probes][external][ping]") {
    auto r = parse_ping(fixture("ping-all-lost.txt"));
    CHECK(r.metrics.at("loss") == 1);
    CHECK(r.metrics.at("sent") == 3);
    CHECK(r.metrics.count("rtt_min") == 0);
    CHECK(r.samples.at("rtt").empty());
}

TEST_CASE("ping parser rejects output that is not ping's", "[probes][external][ping]") {
    REQUIRE_THROWS_WITH(parse_ping("ping: connect: Network is unreachable\n"),
                        "ping output has no \"N packets transmitted, M received\" line");
}

TEST_CASE("a missing external tool names its Debian package", "[probes][external]") {
    REQUIRE_THROWS_WITH(sys::find_tool("wanlab-no-such-tool"),
                        "wanlab-no-such-tool is not installed (on Debian: apt-get install wanlab-no-such-tool)");
    // The package comes from the one table of tools (core/tools.h), not from each caller.
    CHECK(sys::debian_package("ping") == "iputils-ping");
    CHECK(sys::debian_package("qemu-system-x86_64") == "qemu-system-x86");
    CHECK(sys::debian_package("apt-get") == "apt");
}

TEST_CASE("make_probe names the tools a kind can be measured with", "[probes][external]") {
    ProbeSpec spec;
    spec.kind = "throughput";
    spec.name = "t";
    spec.options["tool"] = std::string("nope");
    REQUIRE_THROWS_WITH(make_probe(spec),
                        "probe kind `throughput` with tool `nope` cannot be measured yet (available: builtin, iperf3)");
    spec.kind = "http";
    REQUIRE_THROWS_WITH(make_probe(spec),
                        "probe kind `http` with tool `nope` cannot be measured yet (available: builtin, wrk)");
    spec.kind = "rtt";
    REQUIRE_THROWS_WITH(make_probe(spec),
                        "probe kind `rtt` with tool `nope` cannot be measured yet (available: builtin, ping, hping3)");
}

// --- hping3 -------------------------------------------------------------------------------

TEST_CASE("hping3 parser reads the summary and takes percentiles and mdev from the rtt= lines",
          "[probes][external][hping3]") {
    auto r = parse_hping3(fixture("hping3-ok.txt"));
    CHECK(r.kind == "rtt");
    CHECK(r.tool == "hping3");
    CHECK(r.metrics.at("rtt_min") == Approx(0.2e-3));
    CHECK(r.metrics.at("rtt_avg") == Approx(1.0e-3));
    CHECK(r.metrics.at("rtt_max") == Approx(3.8e-3));
    REQUIRE(r.samples.at("rtt").size() == 10);
    CHECK(r.samples.at("rtt").front() == Approx(1.0e-3));
    CHECK(r.metrics.at("rtt_p50") == Approx(0.7e-3));  // nearest rank: 5th of 10
    CHECK(r.metrics.at("rtt_p99") == Approx(3.8e-3));
    CHECK(r.metrics.at("rtt_mdev") == Approx(0.99116e-3).epsilon(1e-4));
    CHECK(r.metrics.at("loss") == 0);
    CHECK(r.metrics.at("sent") == 10);
}

TEST_CASE("hping3 parser reports total loss without its 0.0/0.0/0.0 figures", "[probes][external][hping3]") {
    auto r = parse_hping3(fixture("hping3-lost.txt"));
    CHECK(r.metrics.at("loss") == 1);
    CHECK(r.metrics.at("sent") == 3);
    CHECK(r.metrics.count("rtt_min") == 0);
    CHECK(r.metrics.count("rtt_mdev") == 0);
    CHECK(r.samples.at("rtt").empty());
}

TEST_CASE("hping3 parser skips duplicates, notes RST answers and rejects other output", "[probes][external][hping3]") {
    auto r = parse_hping3(
        "len=40 ip=198.18.0.2 ttl=64 DF id=0 sport=9 flags=RA seq=0 win=0 rtt=0.3 ms\n"
        "DUP! len=40 ip=198.18.0.2 ttl=64 DF id=0 sport=9 flags=RA seq=0 win=0 rtt=5.1 ms\n"
        "\n--- 198.18.0.2 hping statistic ---\n"
        "1 packets transmitted, 1 packets received, 0% packet loss\n"
        "round-trip min/avg/max = 0.3/0.3/0.3 ms\n");
    CHECK(r.samples.at("rtt").size() == 1);
    CHECK(r.notes.at(1) == "hping3: 1 answers were RST (nothing listening on that port)");
    REQUIRE_THROWS_WITH(parse_hping3("[open_sockraw] socket(): Operation not permitted\n"),
                        "hping3 output has no \"N packets transmitted, M packets received\" line");
}

TEST_CASE("hping3 probes measure the TCP handshake only", "[probes][external][hping3]") {
    auto spec = spec_of("rtt", "tool = \"hping3\"\nmethod = \"icmp\"\n");
    REQUIRE_THROWS_AS(make_probe(spec)->run({}, {}), InputError);
    REQUIRE_THROWS_WITH(make_probe(spec)->run({}, {}),
                        "rtt probe: tool \"hping3\" measures the TCP handshake (hping3 -S) only; set method = \"tcp\"");
}

// --- wrk ----------------------------------------------------------------------------------

TEST_CASE("wrk parser reads a healthy keep-alive run in wrk's mixed units", "[probes][external][wrk]") {
    auto r = parse_wrk(fixture("wrk-keepalive.txt"));
    CHECK(r.metrics.at("requests") == 46775);
    CHECK(r.metrics.at("requests_per_second") == Approx(15163.54));
    CHECK(r.metrics.at("latency_mean") == Approx(5.66e-3));
    CHECK(r.metrics.at("latency_p50") == Approx(670e-6));
    CHECK(r.metrics.at("latency_p90") == Approx(10.17e-3));
    CHECK(r.metrics.at("latency_p99") == Approx(98.24e-3));
    CHECK(r.metrics.at("latency_max") == Approx(152.19e-3));
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("throughput") == Approx(15.65 * 1024 * 1024 * 8));
    const auto* kind = find_kind("http");
    for (const auto& [name, value] : r.metrics) {
        INFO(name);
        CHECK(describe_metric(*kind, name) != nullptr);
    }
}

TEST_CASE("wrk parser reads requests/s, the latency distribution and non-2xx answers", "[probes][external][wrk]") {
    auto r = parse_wrk(fixture("wrk-404.txt"));
    CHECK(r.kind == "http");
    CHECK(r.tool == "wrk");
    CHECK(r.metrics.at("requests") == 1206);
    CHECK(r.metrics.at("requests_per_second") == Approx(600.44));
    CHECK(r.metrics.at("latency_mean") == Approx(13.19e-3));
    CHECK(r.metrics.at("latency_max") == Approx(212.51e-3));
    CHECK(r.metrics.at("latency_p50") == Approx(7.66e-3));
    CHECK(r.metrics.at("latency_p90") == Approx(23.88e-3));
    CHECK(r.metrics.at("latency_p99") == Approx(145.57e-3));
    CHECK(r.metrics.count("latency_p999") == 0);  // wrk does not print it
    CHECK(r.notes.at(0) == "wrk: latency p75 0.015580 s");
    CHECK(r.metrics.at("non_2xx") == 1206);
    CHECK(r.metrics.at("timeouts") == 0);
    CHECK(r.metrics.at("errors") == 1206);
    CHECK(r.metrics.at("throughput") == Approx(304.91 * 1024 * 8));
}

TEST_CASE("wrk parser reads latencies printed in seconds", "[probes][external][wrk]") {
    auto r = parse_wrk(fixture("wrk-slow.txt"));
    CHECK(r.metrics.at("latency_mean") == Approx(1.21));
    CHECK(r.metrics.at("latency_p50") == Approx(1.21));
    CHECK(r.metrics.at("latency_p99") == Approx(1.24));
    CHECK(r.metrics.at("latency_max") == Approx(1.24));
    CHECK(r.metrics.at("requests") == 12);
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("throughput") == Approx(127.32 * 8));
}

TEST_CASE("wrk parser counts socket errors and timeouts, and no latency as NaN", "[probes][external][wrk]") {
    auto reset = parse_wrk(fixture("wrk-reset.txt"));
    CHECK(reset.metrics.at("requests") == 0);
    CHECK(reset.metrics.at("errors") == 7666);
    CHECK(reset.metrics.at("timeouts") == 0);
    CHECK(std::isnan(reset.metrics.at("latency_p50")));
    auto late = parse_wrk(fixture("wrk-slow-timeouts.txt"));
    CHECK(late.metrics.at("requests") == 12);  // wrk counts answers that came after --timeout
    CHECK(late.metrics.at("timeouts") == 12);
    CHECK(late.metrics.at("errors") == 12);
    CHECK(std::isnan(late.metrics.at("latency_mean")));
    auto silent = parse_wrk(fixture("wrk-no-answer.txt"));
    CHECK(silent.metrics.at("requests") == 0);
    CHECK(silent.metrics.at("requests_per_second") == 0);
    CHECK(silent.metrics.at("errors") == 0);
    CHECK(std::isnan(silent.metrics.at("latency_max")));
}

TEST_CASE("wrk parser rejects output that is not wrk's", "[probes][external][wrk]") {
    REQUIRE_THROWS_WITH(parse_wrk("unable to connect to 198.18.0.2:8081 Connection refused\n"),
                        "wrk output has no \"N requests in T, S read\" line");
}

TEST_CASE("wrk probes refuse options wrk cannot honour", "[probes][external][wrk]") {
    auto refuse = [](const std::string& options, const std::string& message) {
        INFO(options);
        REQUIRE_THROWS_WITH(make_probe(spec_of("http", "tool = \"wrk\"\n" + options))->run({}, {}), message);
    };
    refuse("rate = 500\n",
           "http probe: tool \"wrk\" has no fixed rate (that is wrk2); set rate = 0 or use tool \"builtin\"");
    refuse("client_nodelay = false\n",
           "http probe: wrk always sets TCP_NODELAY; `client_nodelay = false` needs tool \"builtin\"");
    refuse("client_quickack = true\n",
           "http probe: wrk leaves quick-ack to the kernel; `client_quickack = true` needs tool \"builtin\"");
    refuse("connections = 10\nthreads = 3\n",
           "http probe: wrk opens connections / threads per thread; `connections` (10) must be a multiple of "
           "`threads` (3)");
    refuse("duration = \"1500ms\"\n", "http probe: tool \"wrk\" takes whole seconds; `duration` must be 1s, 2s, ...");
    refuse("timeout = \"500ms\"\n", "http probe: tool \"wrk\" takes whole seconds; `timeout` must be 1s, 2s, ...");
}

// --- sys::Process --------------------------------------------------------------------------

TEST_CASE("a tool process captures stdout, stderr and the exit status", "[probes][external][process]") {
    auto p = sh("echo to-out; echo to-err >&2; exit 3");
    auto o = p.wait(5000ms, {});
    CHECK(o.out == "to-out\n");
    CHECK(o.err == "to-err\n");
    CHECK_FALSE(o.timed_out);
    CHECK_FALSE(sys::exited_ok(o));
    CHECK(sys::describe_status(o.status) == "exited with status 3");
    CHECK(reaped(p.pid()));
}

TEST_CASE("a tool process reads both pipes at once, so a full stderr cannot block it", "[probes][external][process]") {
    auto start = SteadyClock::now();
    auto p = sh("head -c 3000000 /dev/zero >&2; head -c 3000000 /dev/zero; echo done >&2");
    auto o = p.wait(10000ms, {});
    CHECK(sys::exited_ok(o));
    CHECK(o.out.size() == 3000000);
    CHECK(o.err.size() == 3000005);
    CHECK(SteadyClock::now() - start < 5s);
}

TEST_CASE("a tool process past its timeout is killed and reaped", "[probes][external][process]") {
    auto start = SteadyClock::now();
    auto p = sh("echo started; exec sleep 30");
    auto o = p.wait(300ms, {});
    CHECK(o.timed_out);
    CHECK(o.out == "started\n");
    CHECK(sys::describe_status(o.status) == "killed by signal 9 (SIGKILL)");
    CHECK(SteadyClock::now() - start < 3s);
    CHECK(reaped(p.pid()));
}

TEST_CASE("a tool process stops on SIGTERM even when wanlab blocks SIGTERM", "[probes][external][process]") {
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &term, &old);  // as wanlab does for its signalfd
    auto p = sh("exec sleep 30");
    auto o = p.stop(2000ms);
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    CHECK_FALSE(o.timed_out);
    CHECK(sys::describe_status(o.status) == "killed by signal 15 (SIGTERM)");
}

TEST_CASE("a tool process is killed and reaped by its destructor, also when tick throws",
          "[probes][external][process]") {
    pid_t pid = -1;
    {
        auto p = sh("exec sleep 30");
        pid = p.pid();
        REQUIRE(::kill(pid, 0) == 0);
    }
    CHECK(reaped(pid));
    {
        auto p = sh("exec sleep 30");
        pid = p.pid();
        int ticks = 0;
        auto interrupt = [&ticks] {
            if (++ticks == 3) throw Error("interrupted");
        };
        REQUIRE_THROWS_WITH(p.wait(10000ms, interrupt), "interrupted");
    }
    CHECK(reaped(pid));
}

TEST_CASE("a tool that cannot start names what failed and leaves no zombie", "[probes][external][process]") {
    REQUIRE_FALSE(zombie_children());
    REQUIRE_THROWS_WITH(sys::Process("", {"/nonexistent/wanlab-tool"}),
                        "starting /nonexistent/wanlab-tool: exec: No such file or directory");
    CHECK_FALSE(zombie_children());  // Boost forgets a child that failed before exec; we reap it
    REQUIRE_THROWS_WITH(sys::Process("/nonexistent/netns", {"/bin/true"}),
                        "opening network namespace /nonexistent/netns for /bin/true: No such file or directory");
    // A file that is not a namespace: open() works in the parent, setns() fails in the child.
    REQUIRE_THROWS_WITH(sys::Process("/etc/hostname", {"/bin/true"}),
                        Catch::StartsWith("starting /bin/true in /etc/hostname: setns into the network namespace: "));
    CHECK_FALSE(zombie_children());
}

TEST_CASE("a failed tool's message keeps the tail of its stderr", "[probes][external][process]") {
    CHECK(sys::tail_lines("a\nb\n\nc\nd\ne\nf\n", 3) == "d; e; f");
    CHECK(sys::tail_lines("unable to connect to 198.18.0.2:8081 Connection refused\n") ==
          "unable to connect to 198.18.0.2:8081 Connection refused");
    CHECK(sys::tail_lines("") == "");
    CHECK(sys::describe_status(-1) == "ended with an unknown status");
}

// curl 7.88.1's -w lines (kCurlFormat), recorded against python3 -m http.server: two
// downloads, a 404, a refused connection and a --max-time 0.3 timeout.
TEST_CASE("curl's transfer lines give status, exit code, times, sizes and connections", "[probes][external][curl]") {
    auto ok = parse_curl_line("wanlab-transfer 200 0 0.000147 0.006448 0.006525 100000 0 1 ");
    REQUIRE(ok);
    CHECK(ok->status == 200);
    CHECK(ok->exit_code == 0);
    CHECK(ok->connect == Approx(0.000147));
    CHECK(ok->first_byte == Approx(0.006448));
    CHECK(ok->total == Approx(0.006525));
    CHECK(ok->downloaded == 100000);
    CHECK(ok->uploaded == 0);
    CHECK(ok->new_connections == 1);
    CHECK(ok->error.empty());
    auto missing = parse_curl_line("wanlab-transfer 404 0 0.000074 0.000582 0.000623 335 0 1 ");
    REQUIRE(missing);
    CHECK(missing->status == 404);
    auto refused = parse_curl_line(
        "wanlab-transfer 000 7 0.000000 0.000000 0.000122 0 0 0 Failed to connect to 127.0.0.1 port 8932 after 0 ms: "
        "Couldn't connect to server");
    REQUIRE(refused);
    CHECK(refused->status == 0);
    CHECK(refused->exit_code == 7);
    CHECK(refused->new_connections == 0);
    CHECK(refused->error == "Failed to connect to 127.0.0.1 port 8932 after 0 ms: Couldn't connect to server");
    auto late = parse_curl_line(
        "wanlab-transfer 000 28 0.000138 0.000000 0.300744 0 0 1 Operation timed out after 301 milliseconds with 0 "
        "bytes "
        "received");
    REQUIRE(late);
    CHECK(late->exit_code == 28);
    CHECK(late->total == Approx(0.300744));
    // Anything else curl or a server prints is not a transfer line.
    CHECK_FALSE(parse_curl_line("curl: (7) Failed to connect"));
    CHECK_FALSE(parse_curl_line("wanlab-transfer 200 0 0.1"));
    CHECK_FALSE(parse_curl_line("wanlab-transfer 200 x 0.1 0.2 0.3 1 0 1 "));
    CHECK_FALSE(parse_curl_line(""));
}
