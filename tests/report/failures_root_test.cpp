// Failed requests are part of the result, on the real machine (root), through the binary:
// an http probe whose `timeout` is shorter than one response really times out, and the
// report counts it beside every figure and gives no verdict on it (issue 39).
#include <nlohmann/json.hpp>

#include "tests/support/root_helper.h"

using namespace wanlab::root_testing;

TEST_CASE("requests that time out are counted beside every figure, and the comparison gets no verdict", "[root]") {
    if (skip_unless_root()) return;
    Cleanup cleanup("fr1");
    auto before = capture();
    char t[] = "/tmp/wanlab-failures-XXXXXX";
    std::filesystem::path dir = ::mkdtemp(t);
    // 8 MiB answers: hundreds of microseconds each over a bare veth, so a 1 ms timeout loses
    // part of them and 10 s none.
    std::ofstream(dir / "x.toml") << R"(name = "failures"
[[probe]]
name = "api"
kind = "http"
response_size = "8MiB"
timeout = "1ms"
[[variant]]
name = "short"
[[variant]]
name = "long"
[variant.probe.api]
timeout = "10s"
[run]
repeats = 3
duration = "1s"
warmup = "0s"
cooldown = "0s"
)";
    const auto out_dir = (dir / "out").string();
    int status = 0;
    std::string out = sh(fmt::format("{} run {} --no-vm --run fr1 --out {} --quiet 2>&1", WANLAB_BINARY,
                                     (dir / "x.toml").string(), out_dir),
                         &status);
    INFO(out);
    CHECK(status == 0);
    auto j =
        nlohmann::json::parse(sh(fmt::format("{} results show fr1 --out {} --format json", WANLAB_BINARY, out_dir)));
    double short_failed = -1, short_attempted = -1, long_failed = -1;
    for (const auto& c : j["cells"]) {
        if (c["metric"] != "latency_p50") continue;
        if (c["variant"] == "short") {
            short_failed = c["failed"].get<double>();
            short_attempted = c["attempted"].get<double>();
            CHECK(c["too_many_failures"] == true);
        } else {
            long_failed = c["failed"].get<double>();
            CHECK(c["attempted"].get<double>() > 10);
        }
    }
    CHECK(short_failed > 0.05 * short_attempted);
    CHECK(short_failed <= short_attempted);
    CHECK(long_failed == 0);
    for (const auto& r : j["comparisons"]) {
        CHECK(r["too_many_failures"] == true);
        CHECK(r["significant"] == false);
    }
    CHECK_THAT(out, Catch::Contains("no verdict: failures"));
    CHECK_THAT(out, Catch::Contains(fmt::format("short: probe api: {:.0f} of {:.0f} requests failed (", short_failed,
                                                short_attempted)));
    CHECK_THAT(out, Catch::Contains(" timed out): "));
    CHECK(capture() == before);
    std::filesystem::remove_all(dir);
}
