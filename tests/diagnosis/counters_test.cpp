// Counter parsing and deltas on text recorded from a 6.1 kernel's /proc/net/netstat and snmp.
#include <catch2/catch.hpp>

#include <cmath>

#include "diagnosis/counters.h"

using namespace wanlab::diagnosis;

namespace {
const char* kNetstat =
    "TcpExt: SyncookiesSent SyncookiesRecv DelayedACKs DelayedACKLocked ListenOverflows TCPLossProbes\n"
    "TcpExt: 0 0 1234 7 0 12\n"
    "IpExt: InNoRoutes InTruncatedPkts\n"
    "IpExt: 0 0\n";
const char* kSnmp =
    "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens CurrEstab RetransSegs\n"
    "Tcp: 1 200 120000 -1 10 3 4 55\n";
}  // namespace

TEST_CASE("parse_counters reads the header and value lines of netstat and snmp", "[diagnosis]") {
    auto c = parse_counters(kNetstat);
    CHECK(c.at("TcpExt.DelayedACKs") == 1234);
    CHECK(c.at("TcpExt.DelayedACKLocked") == 7);
    CHECK(c.at("TcpExt.TCPLossProbes") == 12);
    CHECK(c.at("IpExt.InNoRoutes") == 0);
    auto s = parse_counters(kSnmp);
    CHECK(s.at("Tcp.MaxConn") == -1);
    CHECK(s.at("Tcp.RetransSegs") == 55);
    // A pair whose lengths or groups differ is skipped, never misaligned.
    CHECK(parse_counters("TcpExt: A B\nTcpExt: 1\n").empty());
    CHECK(parse_counters("TcpExt: A\nIpExt: 1\n").empty());
    CHECK(parse_counters("").empty());
}

TEST_CASE("parse_snmp6 reads the name-value lines of /proc/net/snmp6 into groups", "[diagnosis]") {
    auto c = parse_snmp6(
        "Ip6InReceives                   \t31\n"
        "Ip6OutRequests                  \t29\n"
        "Icmp6InMsgs                     \t7\n"
        "Udp6InDatagrams                 \t3\n"
        "UdpLite6InDatagrams             \t2\n"
        "Icmp6InType135                  \t4\n"
        "Ip6InOctets                     \tx\n"
        "Ip6                             \t5\n"
        "Tcp6Stray 1 2\n");
    CHECK(c.at("Ip6.InReceives") == 31);
    CHECK(c.at("Ip6.OutRequests") == 29);
    CHECK(c.at("Icmp6.InMsgs") == 7);
    CHECK(c.at("Icmp6.InType135") == 4);
    CHECK(c.at("Udp6.InDatagrams") == 3);
    CHECK(c.at("UdpLite6.InDatagrams") == 2);
    CHECK(c.size() == 6);  // no number, no name after the group, or no group: skipped
}

TEST_CASE("counter_delta keeps what moved and never a gauge", "[diagnosis]") {
    auto before = parse_counters(kSnmp);
    auto after = parse_counters(
        "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens CurrEstab RetransSegs\n"
        "Tcp: 1 200 120000 -1 12 3 9 60\n");
    auto d = counter_delta(before, after);
    CHECK(d.size() == 2);
    CHECK(d.at("Tcp.ActiveOpens") == 2);
    CHECK(d.at("Tcp.RetransSegs") == 5);
    CHECK(d.count("Tcp.CurrEstab") == 0);  // a level: 4 -> 9 open connections is not 5 events
}

TEST_CASE("busiest_cpu is the largest busy share of one CPU between two readings", "[diagnosis]") {
    auto before = parse_cpu_times("cpu  10 0 10 80 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0\n");
    // cpu0: 90 of 100 jiffies busy; cpu1: 10 of 100 (iowait counts as idle).
    auto after = parse_cpu_times("cpu  110 0 10 180 0 0 0 0\ncpu0 95 0 5 50 0 0 0 0\ncpu1 10 0 10 120 10 0 0 0\n");
    REQUIRE(before.size() == 2);
    CHECK(busiest_cpu(before, after) == Approx(0.9));
    CHECK(std::isnan(busiest_cpu({}, after)));
}

TEST_CASE("read_counters reads this namespace's TCP counters from the kernel", "[diagnosis]") {
    auto c = read_counters("");
    CHECK(c.count("TcpExt.DelayedACKs") == 1);
    CHECK(c.count("Tcp.ActiveOpens") == 1);
    CHECK(read_cpu_times().size() >= 1);
}
