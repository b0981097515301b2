// The built-in probes on loopback in the test's own namespace: no root, no changes to the
// machine, short runs with loose bounds. They check the plumbing (endpoints with netns "",
// threads, stopping, metric names); the bare-veth bounds are in probe_root_test.cpp.
#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/error.h"
#include "probes/probe.h"

using namespace wanlab;
using namespace wanlab::probes;

namespace {
ProbeSpec loopback_spec(const std::string& kind, const std::string& options) {
    config::Documents docs;
    Diagnostics diag;
    const auto* table = docs.parse("test", "[[probe]]\nkind = \"" + kind + "\"\n" + options, diag);
    REQUIRE(table);
    auto root = config::from_toml(*table);
    auto spec = parse_probe(root.find("probe")->items.at(0), 0, std::chrono::milliseconds(300), diag);
    INFO(diag.render(docs.sources()));
    REQUIRE(!diag.has_errors());
    return spec;
}

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
    auto r = make_probe(loopback_spec("throughput", "direction = \"both\"\ninterval = \"100ms\"\n"))->run(kLoopback, {});
    CHECK(r.metrics.at("throughput_upload") > 0);
    CHECK(r.metrics.at("throughput_download") > 0);
    CHECK(r.connections.size() == 2);
    CHECK(r.samples.at("throughput").size() == 3);
    check_names(r);
}

TEST_CASE("rtt on loopback answers every tcp and udp probe", "[probes][loopback]") {
    for (const char* method : {"tcp", "udp"}) {
        INFO(method);
        auto r = make_probe(loopback_spec("rtt", std::string("method = \"") + method + "\"\ncount = 5\ninterval = \"1ms\"\n"))
                     ->run(kLoopback, {});
        CHECK(r.metrics.at("loss") == 0);
        CHECK(r.samples.at("rtt").size() == 5);
        CHECK(r.metrics.at("rtt_p50") > 0);
        check_names(r);
    }
}

TEST_CASE("rr on loopback completes transactions without errors", "[probes][loopback]") {
    auto r = make_probe(loopback_spec("rr", "connections = 2\nserver_split_write = true\n"))->run(kLoopback, {});
    CHECK(r.metrics.at("transactions") > 0);
    CHECK(r.metrics.at("errors") == 0);
    CHECK(r.metrics.at("latency_p50") <= r.metrics.at("latency_max"));
    check_names(r);
}

TEST_CASE("a probe aborted from its tick stops its threads and rethrows", "[probes][loopback]") {
    auto probe = make_probe(loopback_spec("throughput", "duration = \"10s\"\n"));
    auto start = std::chrono::steady_clock::now();
    REQUIRE_THROWS_WITH(probe->run(kLoopback, [] { throw Error("interrupted"); }), "interrupted");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
}
