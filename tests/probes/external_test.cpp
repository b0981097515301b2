// The parsers of external tools' output, against output recorded from iperf3 3.12 and
// iputils ping 20221126 on Debian 12 (tests/probes/fixtures).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "probes/external.h"

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
}  // namespace

TEST_CASE("iperf3 parser reads goodput, retransmits, rtt and cwnd of an upload", "[probes][iperf3]") {
    auto r = parse_iperf3_json(fixture("iperf3-upload-2streams.json"));
    CHECK(r.kind == "throughput");
    CHECK(r.tool == "iperf3");
    CHECK(r.metrics.at("throughput") == Approx(11231362820.519857));
    CHECK(r.metrics.at("throughput_upload") == Approx(11231362820.519857));
    CHECK(r.metrics.at("throughput_download") == 0);
    CHECK(r.metrics.at("retransmits") == 69);
    CHECK(r.metrics.at("rtt") == Approx((207 + 161) / 2.0 / 1e6));
    CHECK(r.metrics.at("cwnd") == Approx(916762.0 / 32768));
    CHECK(r.samples.at("throughput").size() == 2);
    REQUIRE(r.connections.size() == 2);
    CHECK(r.connections[0].direction == "upload");
}

TEST_CASE("iperf3 parser counts a reverse test as download", "[probes][iperf3]") {
    auto r = parse_iperf3_json(fixture("iperf3-download.json"));
    CHECK(r.metrics.at("throughput_download") == Approx(8159622690.299521));
    CHECK(r.metrics.at("throughput_upload") == 0);
    CHECK(r.metrics.count("rtt") == 0);  // the client was not the sender
    CHECK(r.connections.at(0).direction == "download");
}

TEST_CASE("iperf3 parser adds both directions of a bidirectional test", "[probes][iperf3]") {
    auto r = parse_iperf3_json(fixture("iperf3-bidir.json"));
    CHECK(r.metrics.at("throughput_upload") == Approx(7030722958.32641));
    CHECK(r.metrics.at("throughput_download") == Approx(6018361440.365612));
    CHECK(r.metrics.at("throughput") == Approx(7030722958.32641 + 6018361440.365612));
    CHECK(r.metrics.at("retransmits") == 123 + 77);
}

TEST_CASE("iperf3 parser reports iperf3's own error message", "[probes][iperf3]") {
    REQUIRE_THROWS_WITH(parse_iperf3_json(fixture("iperf3-refused.json")),
                        "iperf3: unable to connect to server: Connection refused");
    REQUIRE_THROWS_WITH(parse_iperf3_json("Connecting to host"), "iperf3 -J printed something that is not JSON");
}

TEST_CASE("ping parser reads the summary in seconds and the per-reply samples", "[probes][ping]") {
    auto r = parse_ping(fixture("ping-ok.txt"));
    CHECK(r.metrics.at("rtt_min") == Approx(0.051e-3));
    CHECK(r.metrics.at("rtt_avg") == Approx(0.072e-3));
    CHECK(r.metrics.at("rtt_max") == Approx(0.147e-3));
    CHECK(r.metrics.at("rtt_mdev") == Approx(0.037e-3));
    CHECK(r.metrics.at("rtt_p50") == Approx(0.055e-3));
    CHECK(r.metrics.at("loss") == 0);
    CHECK(r.samples.at("rtt").size() == 5);
}

TEST_CASE("ping parser reports total loss without rtt figures", "[probes][ping]") {
    auto r = parse_ping(fixture("ping-all-lost.txt"));
    CHECK(r.metrics.at("loss") == 1);
    CHECK(r.metrics.at("sent") == 3);
    CHECK(r.metrics.count("rtt_min") == 0);
    CHECK(r.samples.at("rtt").empty());
}

TEST_CASE("ping parser rejects output that is not ping's", "[probes][ping]") {
    REQUIRE_THROWS_WITH(parse_ping("ping: connect: Network is unreachable\n"),
                        "ping output has no \"N packets transmitted, M received\" line");
}

TEST_CASE("a missing external tool names its Debian package", "[probes]") {
    REQUIRE_THROWS_WITH(find_tool("wanlab-no-such-tool", "wanlab-pkg"),
                        "wanlab-no-such-tool is not installed (on Debian: apt-get install wanlab-pkg)");
}

TEST_CASE("make_probe names the tools a kind can be measured with", "[probes]") {
    ProbeSpec spec;
    spec.kind = "throughput";
    spec.name = "t";
    spec.options["tool"] = std::string("nope");
    REQUIRE_THROWS_WITH(make_probe(spec),
                        "probe kind `throughput` with tool `nope` cannot be measured yet (available: builtin, iperf3)");
}
