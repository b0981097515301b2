// Traces (`trace` in [link]): mahimahi files and CSV series read into rates, delays and
// losses over time, their located errors, and the schedule they become. The real link's
// following of a trace is tests/vm/schedule_checks.sh's.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>

#include "netem/schedule.h"
#include "netem/trace.h"
#include "tests/support/load_helper.h"
#include "tests/support/temp_folder.h"

using namespace wanlab;
using namespace wanlab::netem;
using namespace std::chrono_literals;

namespace {

std::optional<Trace> parse(const std::string& text, std::string& messages, std::chrono::nanoseconds window = 100ms) {
    Diagnostics diag;
    auto t = parse_trace(text, "t.trace", window, diag);
    messages = diag.render({});
    return t;
}

// A folder of its own for trace files, removed at the end of the test.
struct Folder : testing::TempFolder {
    Folder() : TempFolder("wanlab-trace-test") {}
};

}  // namespace

TEST_CASE("a mahimahi trace is counted into a rate per window, and starts over at its last timestamp",
          "[netem][trace]") {
    // 0-100 ms: 10 opportunities (10 x 1514 bytes: 1.2112 Mbit/s); 100-200 ms: none; 200-250 ms:
    // 25 (6.056 Mbit/s).
    std::string text;
    for (int ms = 10; ms <= 100; ms += 10) text += std::to_string(ms) + "\n";
    for (int i = 0; i < 25; ++i) text += std::to_string(226 + i) + "\n";
    std::string messages;
    auto t = parse(text, messages);
    INFO(messages);
    REQUIRE(t);
    CHECK(t->format == Trace::Format::mahimahi);
    CHECK(t->period == 250ms);
    CHECK(t->entries == 35);
    REQUIRE(t->rows.size() == 3);
    CHECK(t->rows[0].at == 0ms);
    CHECK(*t->rows[0].rate_bps == 1'211'200);
    // The window without an opportunity carries one packet: a shaper takes no rate of 0.
    CHECK(t->rows[1].at == 100ms);
    CHECK(*t->rows[1].rate_bps == floor_rate(100ms));
    CHECK(floor_rate(100ms) == 121'120);
    CHECK(t->raised == 1);
    // The last window is 50 ms long: 25 x 1514 bytes in 50 ms.
    CHECK(t->rows[2].at == 200ms);
    CHECK(*t->rows[2].rate_bps == 6'056'000);
    REQUIRE(t->columns.size() == 1);
    CHECK(t->columns[0].mean == Approx(35 * 1514 * 8 / 0.25));
    CHECK(t->columns[0].min == 0);
    CHECK(t->columns[0].max == Approx(6.056e6));
    CHECK_THAT(describe(*t), Catch::Contains("1 windows without an opportunity carry one packet"));
}

TEST_CASE("mahimahi's one-line trace is a constant 12 Mbit/s of packets, whatever the window", "[netem][trace]") {
    std::string messages;
    auto t = parse("1\n", messages, 100ms);
    INFO(messages);
    REQUIRE(t);
    CHECK(t->period == 1ms);
    REQUIRE(t->rows.size() == 1);
    CHECK(*t->rows[0].rate_bps == 12'112'000);  // 1514-byte frames
}

TEST_CASE("a bad mahimahi trace is refused at its line and column", "[netem][trace]") {
    std::string messages;
    CHECK_FALSE(parse("5\n10\n12x\n", messages));
    CHECK_THAT(messages, Catch::Contains("t.trace:3:3") && Catch::Contains("`12x` is not a millisecond timestamp"));
    CHECK_FALSE(parse("5\n10\n7\n", messages));
    CHECK_THAT(messages, Catch::Contains("t.trace:3:1") && Catch::Contains("the timestamp 7 comes after 10"));
    CHECK_FALSE(parse("0\n0\n", messages));
    CHECK_THAT(messages, Catch::Contains("last timestamp is 0"));
    CHECK_FALSE(parse("\n\n", messages));
    CHECK_THAT(messages, Catch::Contains("the trace is empty"));
    // More windows than a schedule may change: the fix is a wider window.
    CHECK_FALSE(parse("1\n2000000\n", messages, 100ms));
    CHECK_THAT(messages, Catch::Contains("t.trace:2:1") && Catch::Contains("past 10000 windows") &&
                             Catch::Contains("widen `trace_window`"));
}

TEST_CASE("a CSV trace takes units in its cells or its header, and empty cells keep the row before", "[netem][trace]") {
    std::string messages;
    auto t = parse(R"(# recorded 2026-12-07
time_s,rate_mbit,delay,loss
0,20,10ms,0%
1.5,5,,1%
3,10,30ms,
)",
                   messages);
    INFO(messages);
    REQUIRE(t);
    CHECK(t->format == Trace::Format::csv);
    REQUIRE(t->rows.size() == 3);
    CHECK(t->rows[1].at == 1500ms);
    CHECK(*t->rows[1].rate_bps == 5'000'000);
    CHECK_FALSE(t->rows[1].delay);
    CHECK(*t->rows[1].loss == Approx(0.01));
    CHECK(*t->rows[2].delay == 30ms);
    // The last row lasts as long as the interval before it.
    CHECK(t->period == 4500ms);
    // Means weighted by time: rate 20, 5, 10 Mbit/s for 1.5 s each.
    REQUIRE(t->columns.size() == 3);
    CHECK(t->columns[0].name == "rate");
    CHECK(t->columns[0].mean == Approx(35e6 / 3));
    CHECK(t->columns[1].name == "delay");
    CHECK(t->columns[1].mean == Approx((0.010 * 3 + 0.030 * 1.5) / 4.5));
    CHECK(t->columns[2].name == "loss");
    CHECK(t->columns[2].max == Approx(0.01));
}

TEST_CASE("a bad CSV trace is refused at its line and column, with what to write", "[netem][trace]") {
    struct Case {
        const char* text;
        const char* where;
        const char* says;
    };
    const Case cases[] = {
        {"time,rate\n0,20\n", "t.trace:2:3", "`20` needs a unit"},
        {"time,rate\n0s,20mbps\n", "t.trace:2:4", "mbps"},
        {"time,rat\n", "t.trace:1:6", "did you mean `rate`?"},
        {"rate,time\n", "t.trace:1:1", "first column is `time`"},
        {"time,rate,rate\n", "t.trace:1:11", "comes twice"},
        {"time,rate_mbps\n", "t.trace:1:6", "unknown unit `mbps`"},
        {"time,rate\n0s,20mbit\n1s\n", "t.trace:3:1", "this row has 1 cells, the header 2"},
        {"time,rate\n1s,20mbit\n1s,5mbit\n", "t.trace:3:1", "is not after the row before"},
        {"time,rate\n0s,0mbit\n", "t.trace:2:4", "a rate of 0"},
        {"time,loss_pct\n0s,120\n", "t.trace:2:4", "above 100%"},
        {"time,delay\n,5ms\n", "t.trace:2:1", "the row has no time"},
        {"time,delay\n", "t.trace:1:1", "a header and no rows"},
    };
    for (const auto& c : cases) {
        std::string messages;
        INFO(c.text);
        CHECK_FALSE(parse(c.text, messages));
        CHECK_THAT(messages, Catch::Contains(c.where) && Catch::Contains(c.says));
    }
}

TEST_CASE("a link follows a trace: its rows become the schedule's steps, its rate goes to htb", "[netem][trace]") {
    Folder f;
    auto csv = f.write("path.csv", "time,rate,delay\n0s,20mbit,10ms\n1s,5mbit,10ms\n2s,10mbit,40ms\n");
    auto l = testing::load(fmt::format(R"([link]
trace = "{}"
[[probe]]
kind = "rtt"
)",
                                       csv));
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& t = l.exp->trials.at(0);
    const auto& s = t.schedule;
    // [link] is the first row; the trace starts over at 3 s.
    CHECK(t.link.up.shaper == Shaper::htb);  // kTraceShaper: keeps its tokens across a change
    CHECK(t.link.up.rate_bps == 20'000'000);
    CHECK(t.link.up.netem.rate_bps == 0);
    CHECK(t.link.down.rate_bps == 20'000'000);
    REQUIRE(s.steps.size() == 3);
    CHECK(s.period == 3s);
    CHECK(s.steps[1].at == 1s);
    CHECK(s.steps[1].from_trace);
    CHECK(s.steps[1].up.rate_bps == 5'000'000);
    CHECK(s.steps[1].down.rate_bps == 5'000'000);
    CHECK(s.steps[2].up.netem.delay == 40ms);
    CHECK(s.at(4s).up.rate_bps == 5'000'000);  // 1 s into its second period
    // netem's queue is sized for the trace's worst, not for [link]'s first row.
    CHECK(t.link.up.netem.limit_packets >= auto_limit(20'000'000, 40ms, 0ms, t.lab.mtu));
    REQUIRE(s.traces.size() == 1);
    CHECK(s.traces[0].directions == "both");
    auto lines = describe(s);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("each direction follows") && Catch::Contains("CSV, 3 rows over 3s"));
}

TEST_CASE("each direction may follow a trace of its own, on one clock", "[netem][trace]") {
    Folder f;
    f.write("up.csv", "time,rate\n0s,2mbit\n1s,1mbit\n");        // 2 s long
    f.write("down.csv", "time,rate\n0s,20mbit\n1.5s,10mbit\n");  // 3 s long
    auto l = testing::load(R"([link]
shaper = "htb"
up.trace = "up.csv"
down.trace = "down.csv"
[[probe]]
kind = "rtt"
)",
                           {}, (f.dir / "exp.toml").string());
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& s = l.exp->trials.at(0).schedule;
    CHECK(l.exp->trials.at(0).link.up.shaper == Shaper::htb);  // as written
    CHECK(s.period == 3s);
    // up starts over at 2 s, inside down's 3 s.
    REQUIRE(s.steps.size() == 4);
    CHECK(s.steps[1].at == 1s);
    CHECK(s.steps[1].up.rate_bps == 1'000'000);
    CHECK(s.steps[2].at == 1500ms);
    CHECK(s.steps[2].down.rate_bps == 10'000'000);
    CHECK(s.steps[3].at == 2s);
    CHECK(s.steps[3].up.rate_bps == 2'000'000);
    CHECK(s.steps[3].down.rate_bps == 10'000'000);
}

TEST_CASE("a trace that cannot be used is refused where the experiment names it", "[netem][trace]") {
    Folder f;
    auto ok = f.write("ok.csv", "time,rate\n0s,2mbit\n1s,1mbit\n");
    auto late = f.write("late.csv", "time,rate\n1s,2mbit\n2s,1mbit\n");
    auto errors = [](const std::string& text) {
        auto l = testing::load(text + "[[probe]]\nkind = \"rtt\"\n");
        CHECK_FALSE(l.exp);
        return l.messages;
    };
    CHECK_THAT(errors("[link]\ntrace = \"/nonexistent/x.trace\"\n"),
               Catch::Contains("exp.toml:2:9") && Catch::Contains("does not exist"));
    CHECK_THAT(errors(fmt::format("[link]\ntrace = \"{}\"\n[[link.schedule]]\nat = \"1s\"\nrate = \"1mbit\"\n", ok)),
               Catch::Contains("a trace or a [[link.schedule]], not both"));
    CHECK_THAT(errors(fmt::format("[link]\ntrace = \"{}\"\n", late)),
               Catch::Contains("sets its first rate at 1s") && Catch::Contains("give [link] a `rate`"));
    CHECK_THAT(errors(fmt::format("[link]\ntrace = \"{}\"\ntrace_window = \"0s\"\n", ok)),
               Catch::Contains("trace_window"));
    CHECK_THAT(errors("[link]\ndelay = \"5ms\"\n[[link.schedule]]\nat = \"1s\"\ntrace = \"x\"\n"),
               Catch::Contains("`trace` cannot be set in a schedule entry"));
    auto big = f.write("big.trace", "1\n");
    std::filesystem::resize_file(big, kMaxTraceBytes + 1);
    CHECK_THAT(errors(fmt::format("[link]\ntrace = \"{}\"\n", big)), Catch::Contains("is larger than 64MiB"));
}

TEST_CASE("a trace_window with no trace to count is a warning where it is written", "[netem][trace]") {
    auto l = testing::load("[link]\ndelay = \"5ms\"\ntrace_window = \"50ms\"\n[[probe]]\nkind = \"rtt\"\n");
    REQUIRE(l.exp);
    CHECK_THAT(l.messages, Catch::Contains("exp.toml:3:1: warning: `trace_window` has no effect here: no trace is "
                                           "named for [link]"));
    auto dir = testing::load("[link]\ndelay = \"5ms\"\nup.trace_window = \"50ms\"\n[[probe]]\nkind = \"rtt\"\n");
    REQUIRE(dir.exp);
    CHECK_THAT(dir.messages, Catch::Contains("no trace is named for [link.up]"));
    // With a trace of the other direction, [link]'s window is that trace's: no warning.
    Folder f;
    auto ok = f.write("ok.csv", "time,rate\n0s,2mbit\n1s,1mbit\n");
    auto used = testing::load(fmt::format(
        "[link]\ndelay = \"5ms\"\ntrace_window = \"50ms\"\ndown.trace = \"{}\"\n[[probe]]\nkind = \"rtt\"\n", ok));
    REQUIRE(used.exp);
    CHECK_THAT(used.messages, !Catch::Contains("trace_window"));
}

TEST_CASE("every trial of a sweep shares one reading of its trace, and a bad one is reported once", "[netem][trace]") {
    Folder f;
    auto ok = f.write("ok.csv", "time,rate\n0s,2mbit\n1s,1mbit\n");
    auto l = testing::load(fmt::format(
        "[link]\ntrace = \"{}\"\n[sweep]\n\"link.delay\" = [\"10ms\", \"20ms\", \"40ms\"]\n[[probe]]\nkind = \"rtt\"\n",
        ok));
    INFO(l.messages);
    REQUIRE(l.exp);
    REQUIRE(l.exp->trials.size() == 3);
    for (const auto& t : l.exp->trials) {
        REQUIRE(t.schedule.traces.size() == 1);
        CHECK(t.schedule.traces[0].trace.entries == 2);
    }
    auto bad = f.write("bad.csv", "time,rate\n0s,2mbit\nlater,1mbit\n");
    auto b = testing::load(fmt::format(
        "[link]\ntrace = \"{}\"\n[sweep]\n\"link.delay\" = [\"10ms\", \"20ms\", \"40ms\"]\n[[probe]]\nkind = \"rtt\"\n",
        bad));
    CHECK_FALSE(b.exp);
    const auto& m = b.messages;
    auto first = m.find("bad.csv:3:1");
    REQUIRE(first != std::string::npos);
    CHECK(m.find("bad.csv:3:1", first + 1) == std::string::npos);
}
