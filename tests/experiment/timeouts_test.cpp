#include <catch2/catch.hpp>

#include "experiment/timeouts.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;

TEST_CASE("a response's time on a fresh connection: slow start, the rate, and the Mathis rate under loss",
          "[experiment][timeouts]") {
    // 1 MiB = 725 segments of 1448 bytes: 7 rounds from an initial window of 10 (10 x 127 =
    // 1270 >= 725 > 10 x 63), plus the handshake, at 150 ms.
    auto t = experiment::response_time(1 << 20, 0.150, 0, 0);
    CHECK(t.slow_start == Approx(8 * 0.150));
    CHECK(t.at_rate == 0);
    CHECK(t.at_loss == 0);
    CHECK(t.total() == Approx(1.2));
    // 1% loss: 1448 x 8 / 0.15 x 1.22 / 0.1 = 942 kbit/s, so 8.9 s for the MiB plus a round trip.
    t = experiment::response_time(1 << 20, 0.150, 0, 0.01);
    CHECK(t.loss_rate == Approx(942'165).epsilon(0.001));
    CHECK(t.at_loss == Approx(0.150 + 8.0 * (1 << 20) / 942'165).epsilon(0.001));
    CHECK(t.total() == t.at_loss);
    // 10 Mbit/s: 0.84 s of serialisation, under the slow start's 1.2 s.
    t = experiment::response_time(1 << 20, 0.150, 10e6, 0);
    CHECK(t.at_rate == Approx(0.150 + 0.8388608));
    CHECK(t.total() == t.slow_start);
    // One segment: the handshake and one round.
    CHECK(experiment::response_time(1000, 0.040, 0, 0).total() == Approx(0.080));
}

TEST_CASE("validate warns when an http probe's timeout is shorter than one response on its path",
          "[experiment][timeouts]") {
    const std::string head = R"(
[link]
rtt = "150ms"
loss = "1%"
[[probe]]
name = "api"
kind = "http"
response_size = "1MiB"
)";
    SECTION("the default 2 s against 9 s at the rate loss-based TCP sustains") {
        auto l = testing::load(head);
        REQUIRE(l.exp);
        CHECK_THAT(l.messages, Contains("warning: probe `api`: `timeout` = 2.000 s may be shorter than one 1 MiB "
                                        "response on the path of trial 1 (default)"));
        CHECK_THAT(l.messages, Contains("at 1.00% loss (Mathis)"));
        CHECK_THAT(l.messages, Contains("set `timeout = \"19s\"` or more"));
    }
    SECTION("a timeout that fits: nothing said") {
        auto l = testing::load(head + "timeout = \"20s\"\n");
        REQUIRE(l.exp);
        CHECK_THAT(l.messages, !Contains("timeout"));
    }
    SECTION("the warning names the slowest trial of a sweep") {
        auto l = testing::load(head + "timeout = \"5s\"\n[sweep]\n\"link.rtt\" = [\"20ms\", \"150ms\"]\n");
        REQUIRE(l.exp);
        CHECK_THAT(l.messages, Contains("on the path of trial 2 (default)"));
    }
    SECTION("a small response on a short path: nothing said") {
        auto l = testing::load("[link]\nrtt = \"20ms\"\n[[probe]]\nname = \"api\"\nkind = \"http\"\n");
        REQUIRE(l.exp);
        CHECK(l.messages.empty());
    }
}

TEST_CASE("validate warns when a transfer probe's timeout cannot fit its size on the way it goes",
          "[experiment][timeouts]") {
    // 1% loss on the way up only: a download does not cross it, an upload does.
    const std::string head = R"(
[link]
rtt = "150ms"
up.loss = "1%"
[[probe]]
name = "api"
kind = "transfer"
size = "4MiB"
timeout = "10s"
)";
    SECTION("an upload of 4 MiB at the Mathis rate of 1% loss takes about 36 s") {
        auto l = testing::load(head + "direction = \"upload\"\n");
        REQUIRE(l.exp);
        CHECK_THAT(l.messages, Contains("warning: probe `api`: `timeout` = 10.000 s may be shorter than one 4 MiB "
                                        "transfer on the path of trial 1 (default)"));
        CHECK_THAT(l.messages, Contains("a transfer that times out leaves no sample"));
    }
    SECTION("a download, on the loss-free way down, fits in slow start") {
        auto l = testing::load(head);
        REQUIRE(l.exp);
        CHECK_THAT(l.messages, !Contains("timeout"));
    }
}
