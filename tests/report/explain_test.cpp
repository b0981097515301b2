#include <catch2/catch.hpp>

#include <algorithm>

#include "report/report.h"
#include "tests/report/fixtures.h"

using namespace wanlab;
using namespace wanlab::report;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> containing(const std::vector<std::string>& lines, const std::string& part) {
    std::vector<std::string> out;
    std::copy_if(lines.begin(), lines.end(), std::back_inserter(out),
                 [&part](const std::string& l) { return l.find(part) != std::string::npos; });
    return out;
}

}  // namespace

TEST_CASE("report explains a receive-window limited stream with its buffer's cap at the trial's RTT", "[report]") {
    auto lines = explain(testing::buffer_sweep());
    auto rwnd = containing(lines, "receive-window limited");
    REQUIRE(rwnd.size() == 2);  // the default buffers at both RTTs; the large ones are not limited
    // Half of 425984 bytes is window: 212992 x 8 / 40 ms = 42.5984 Mbit/s.
    CHECK(rwnd[1] ==
          "bulk, default-buffers @ link.rtt=40ms: receive-window limited 92% of the time: a receive buffer of "
          "416 KiB (about 208 KiB of window) caps one stream near 42.60 Mbit/s at this RTT (40.00 ms); measured "
          "85.00 Mbit/s [! emulation did not hold in this trial]");
    CHECK_THAT(rwnd[0], Contains("link.rtt=20ms") && Contains("80% of the time") && Contains("near 85.20 Mbit/s"));
    CHECK(containing(lines, "send-buffer limited").empty());
}

TEST_CASE("report gives bandwidth-delay advice for 500 Mbit/s x 40 ms with rmem_max 212992", "[report]") {
    auto lines = explain(testing::buffer_sweep());
    auto advice = containing(lines, "default-buffers @ link.rtt=40ms: bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    const auto& a = advice[0];
    // BDP = 500e6 x 0.04 / 8 = 2.5 MB; 2 x BDP = 5 MB; the next power of two is 8 MiB.
    CHECK_THAT(a, Contains("500.00 Mbit/s x 40.00 ms = 2.4 MiB (2500000 bytes)"));
    // The probe asked for SO_RCVBUF (rmem_max caps it, autotuning is off) and left the send
    // buffer to autotuning (tcp_wmem caps it, wmem_max does not): only those two are named.
    CHECK_THAT(a, Contains("below the BDP: net.core.rmem_max = 212992 (208 KiB)"));
    CHECK_THAT(a, !Contains("net.core.wmem_max"));
    CHECK_THAT(a, Contains("below 2 x BDP (the kernel keeps about half of a buffer for overhead): "
                           "net.ipv4.tcp_wmem max = 4194304 (4 MiB)"));
    CHECK_THAT(a, Contains("set net.core.rmem_max=8388608, net.ipv4.tcp_wmem=\"4096 16384 8388608\" (8 MiB"));
    // tcp_rmem's maximum does not cap an explicit SO_RCVBUF: not named.
    CHECK_THAT(a, !Contains("tcp_rmem max"));
    // At 20 ms, 2 x BDP = 2.5 MB: only rmem_max is short, 4 MiB is enough.
    auto at20 = containing(lines, "default-buffers @ link.rtt=20ms: bandwidth-delay product");
    REQUIRE(at20.size() == 1);
    CHECK_THAT(at20[0], Contains("set net.core.rmem_max=4194304 (4 MiB"));
    CHECK(containing(lines, "large-buffers").empty());
}

TEST_CASE("report says nothing the data does not support", "[report]") {
    auto d = testing::buffer_sweep();
    for (auto& t : d.trials) t.link_rate = results::kNaN;  // no rate: no bandwidth-delay product
    for (auto& m : d.measurements) {
        m.metrics["rwnd_limited"] = 0.3;  // limited a minority of the time
        m.connections = nlohmann::json::array();
    }
    CHECK(explain(d).empty());
}

TEST_CASE("report works out the limited share from connections when the metric is absent", "[report]") {
    auto d = testing::buffer_sweep();
    for (auto& m : d.measurements) m.metrics.erase("rwnd_limited");
    auto rwnd = containing(explain(d), "receive-window limited");
    REQUIRE(rwnd.size() == 2);
    CHECK_THAT(rwnd[1], Contains("92% of the time"));
}

TEST_CASE("report names tcp_rmem and never rmem_max for a probe that asked for no buffer", "[report]") {
    auto d = testing::buffer_sweep();
    for (auto& m : d.measurements) m.notes = {probes::kRcvbufAutotuned, probes::kSndbufAutotuned};
    auto advice = containing(explain(d), "default-buffers @ link.rtt=40ms: bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    // 6 MiB is above 2 x BDP (5 MB): tcp_rmem is fine, tcp_wmem's 4 MiB is short; the core
    // maxima cannot change an autotuned buffer, so no advice to raise them.
    CHECK_THAT(advice[0], Contains("net.ipv4.tcp_wmem max = 4194304 (4 MiB)"));
    CHECK_THAT(advice[0], !Contains("net.core.rmem_max") && !Contains("net.core.wmem_max="));
    CHECK_THAT(advice[0], Contains("rmem_max/wmem_max would not change it"));
}

TEST_CASE("report advises on a per-host buffer only where that host receives or sends", "[report]") {
    auto d = testing::buffer_sweep();
    for (auto& m : d.measurements) m.notes = {probes::kRcvbufAutotuned, probes::kSndbufAutotuned};
    d.trials.resize(1);  // default-buffers @ 20ms, upload: the server receives, the client sends
    d.trials[0].sysctls = {{"client:net.ipv4.tcp_rmem", "4096 131072 1048576"},
                           {"server:net.ipv4.tcp_rmem", "4096 131072 1048576"},
                           {"net.core.rmem_max", "8388608"},
                           {"net.core.wmem_max", "8388608"},
                           {"net.ipv4.tcp_wmem", "4096 16384 8388608"}};
    auto advice = containing(explain(d), "bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    CHECK_THAT(advice[0], Contains("net.ipv4.tcp_rmem max on server = 1048576 (1 MiB)"));
    CHECK_THAT(advice[0], Contains("net.ipv4.tcp_rmem=\"4096 131072 4194304\" on server"));
    CHECK_THAT(advice[0], !Contains("on client"));
    CHECK_THAT(advice[0], !Contains("SO_RCVBUF"));  // no core maximum named
}

TEST_CASE("report falls back to the host's sysctls before the run for keys a trial did not set", "[report]") {
    auto d = testing::buffer_sweep();
    d.trials.resize(1);
    d.trials[0].sysctls.clear();
    d.run.env.sysctls_before = {{"net.core.rmem_max", "212992"}, {"net.ipv4.tcp_rmem", "4096\t131072\t6291456"}};
    auto advice = containing(explain(d), "bandwidth-delay product");
    REQUIRE(advice.size() == 1);
    CHECK_THAT(advice[0], Contains("net.core.rmem_max = 212992 (208 KiB) before the run"));
}
