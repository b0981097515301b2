// Each probe kind's traits (probes/probe_spec.h): every row complete and consistent with the
// kind's own options and metrics, and with what its built-in probe reports when it runs on
// loopback in the test's own namespace (no root, short runs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/config.h"
#include "probes/probe.h"
#include "tests/support/probe_helper.h"

using namespace wanlab;
using namespace wanlab::probes;

namespace {

std::vector<const ProbeKind*> every_traits_kind() {
    std::vector<const ProbeKind*> out;
    for (const auto& k : probe_kinds()) out.push_back(&k);
    out.push_back(&group_kind());
    return out;
}

bool kind_has_option(const ProbeKind& kind, const char* name) {
    return std::any_of(kind.options.begin(), kind.options.end(),
                       [name](const OptionSpec& o) { return std::string(o.name) == name; });
}

}  // namespace

TEST_CASE("every probe kind has a complete traits row", "[probes][traits]") {
    for (const auto* kind : every_traits_kind()) {
        INFO(kind->name);
        const auto& t = kind->traits;
        CHECK(&traits_of(kind->name) == &t);
        REQUIRE(t.main_metric);
        CHECK(find_metric(*kind, t.main_metric));
        CHECK(std::string(main_metric(kind->name)) == t.main_metric);
        REQUIRE(!t.headline.empty());
        CHECK(std::string(t.headline.front()) == t.main_metric);  // the report's first row is the main metric
        for (const char* m : t.headline) {
            INFO(m);
            CHECK(find_metric(*kind, m));
        }
        // A kind with a far side says how it measures against a remote target; one without
        // runs where wanlab runs and measures the user's own command.
        if (t.has_server_half) {
            CHECK(t.remote != RemoteTarget::own);
            CHECK(!t.group_series.empty());
            CHECK(!t.charted_series.empty());
        } else {
            CHECK(t.remote == RemoteTarget::own);
        }
        if (t.user_command) CHECK(kind_has_option(*kind, "timeout"));  // a repeat of the user's program is bounded
        // The options a trait stands for are the kind's.
        if (t.bulk_tcp) CHECK((kind_has_option(*kind, "sndbuf") && kind_has_option(*kind, "rcvbuf")));
        if (t.counted) CHECK((kind_has_option(*kind, "count") && kind_has_option(*kind, "interval")));
        CHECK(bool(t.exchange) == bool(t.exchanges_metric));
        if (t.exchanges_metric) CHECK(find_metric(*kind, t.exchanges_metric));
        if (t.samples) CHECK((t.samples->name && t.samples->singular && t.samples->plural));
    }
}

TEST_CASE("traits_of a kind no row names answers no to every question", "[probes][traits]") {
    for (const char* name : {"", "ping", "THROUGHPUT"}) {
        INFO(name);
        const auto& t = traits_of(name);
        CHECK(t.main_metric == nullptr);
        CHECK(main_metric(name) == nullptr);
        CHECK(t.headline.empty());
        CHECK(t.charted_series.empty());
        CHECK(t.samples == nullptr);
        CHECK_FALSE((t.has_server_half || t.runs_here_only || t.user_command || t.warms_up || t.bulk_tcp ||
                     t.measures_rtt || t.counted || t.charts_recorded_series));
        CHECK(t.exchange == nullptr);
    }
}

TEST_CASE("each kind's built-in probe reports the metrics, series and samples its traits name", "[probes][traits]") {
    const Endpoints loopback{{"", "127.0.0.1", 0}, {"", "", 0}};
    const std::vector<std::pair<std::string, std::string>> runs{
        {"throughput", "direction = \"both\"\ninterval = \"100ms\"\n"},
        {"udp", "interval = \"100ms\"\n"},
        {"rtt", "count = 5\ninterval = \"1ms\"\n"},
        {"rr", "interval = \"100ms\"\n"},
        {"http", "connections = 2\ninterval = \"100ms\"\n"},
        {"transfer", "size = \"64KiB\"\ncount = 5\nparallel = 2\n"},
        {"command", "command = [\"true\"]\n"},
    };
    for (const auto& kind : probe_kinds())
        CHECK(std::any_of(runs.begin(), runs.end(), [&](const auto& r) { return r.first == kind.name; }));
    for (const auto& [kind, options] : runs) {
        INFO(kind);
        const auto& t = traits_of(kind);
        auto r = make_probe(testing::probe_of(kind, options))->run(loopback, {});
        CHECK(r.metrics.count(t.main_metric) == 1);
        if (t.exchanges_metric) CHECK(r.metrics.count(t.exchanges_metric) == 1);
        for (const char* s : t.group_series) {
            INFO(s);
            CHECK(r.series.count(s) == 1);
        }
        for (const char* s : t.charted_series) {
            INFO(s);
            CHECK(r.series.count(s) == 1);
        }
        if (t.samples) CHECK(r.samples.count(t.samples->name) == 1);
    }
}

TEST_CASE("a kind's remote-target trait is what remote_unsupported says of its defaults", "[probes][traits]") {
    for (const auto& kind : probe_kinds()) {
        INFO(kind.name);
        auto why = remote_unsupported(
            testing::probe_of(kind.name, kind.traits.user_command ? "command = [\"true\"]\n" : ""), 80);
        // Only a kind that goes where it goes, or one whose default (TCP rtt to the port) can,
        // measures against a remote target with its defaults.
        bool refused = kind.traits.remote != RemoteTarget::own && kind.traits.remote != RemoteTarget::protocol;
        CHECK(why.empty() == !refused);
    }
}
