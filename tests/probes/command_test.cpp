// kind = "command": the file's view (argv, metrics and their mistakes) and a run of a real
// command in wanlab's own namespace (no root): wall time, a regex's named group, a JSON
// pointer, and each way a measurement fails.
#include <catch2/catch.hpp>

#include "probes/output_match.h"
#include "probes/probe.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;

namespace {

probes::ProbeSpec command_probe(const std::string& body) {
    auto l = testing::load("[[probe]]\nname = \"c\"\nkind = \"command\"\n" + body);
    INFO(l.messages);
    REQUIRE(l.exp);
    return l.exp->trials.at(0).probes.at(0);
}

}  // namespace

TEST_CASE("a command probe reads its argv and metrics with units and directions", "[probes]") {
    auto p = command_probe(R"toml(command = ["curl", "-s", "http://{server}:8080/"]
timeout = "30s"
metrics = [
  { name = "ttfb", regex = "ttfb=(?<value>[0-9.]+)", unit = "ms", better = "lower" },
  { name = "rate", json = "/end/sum/bits_per_second", unit = "Mbit/s", better = "higher" },
  { name = "loss", regex = "(?<pct>[0-9.]+)% packet loss", stream = "stderr", unit = "%", better = "lower" },
]
)toml");
    CHECK(p.command == std::vector<std::string>{"curl", "-s", "http://{server}:8080/"});
    REQUIRE(p.outputs.size() == 3);
    CHECK(p.outputs[0].group == "value");
    CHECK(p.outputs[0].unit == probes::Unit::seconds);
    CHECK(p.outputs[0].scale == Approx(1e-3));
    CHECK_FALSE(p.outputs[0].higher_is_better);
    CHECK(p.outputs[1].json_pointer == "/end/sum/bits_per_second");
    CHECK(p.outputs[1].scale == Approx(1e6));
    CHECK(p.outputs[1].higher_is_better);
    CHECK(p.outputs[2].group == "pct");  // the only named group
    CHECK(p.outputs[2].stream == "stderr");
    CHECK(p.outputs[2].unit == probes::Unit::fraction);
    CHECK(std::get<std::int64_t>(p.options.at("timeout")) == 30'000'000'000);
}

TEST_CASE("a command probe's mistakes are located", "[probes]") {
    auto l = testing::load(R"toml([[probe]]
name = "c"
kind = "command"
command = ["{server}", "--at", "{sevrer}"]
metrics = [
  { name = "a", regex = "x=([0-9]+)", unit = "s", better = "lower" },
  { name = "b", regex = "x=(?<v>[0-9]+", unit = "s", better = "lower" },
  { name = "c", json = "no-slash", unit = "s", better = "lower" },
  { name = "d", regex = "(?<value>1)", unit = "furlongs", better = "lower" },
  { name = "wall_time", regex = "(?<value>1)", unit = "s", better = "lower" },
  { name = "e", regex = "(?<value>1)", json = "/x", unit = "s" },
]
)toml");
    REQUIRE_FALSE(l.exp);
    const auto& m = l.messages;
    INFO(m);
    CHECK_THAT(m, Contains("exp.toml:4:12: error: the program of `command` is a name or a path, without placeholders"));
    CHECK_THAT(m, Contains("exp.toml:4:32: error: `command` element 3: unknown placeholder {sevrer}; did you mean "
                           "{server}?"));
    CHECK_THAT(m, Contains("the regex needs a named group for the number"));
    CHECK_THAT(m, Contains("regex \"x=(?<v>[0-9]+\" at offset 13: missing closing parenthesis"));
    CHECK_THAT(m, Contains("`json` = \"no-slash\" is not a JSON pointer"));
    CHECK_THAT(m, Contains("`unit` = \"furlongs\" is not one of s, ms"));
    CHECK_THAT(m, Contains("not wall_time (wanlab's own)"));
    CHECK_THAT(m, Contains("exactly one of `regex` (with a named group) or `json`"));
    CHECK_THAT(m, Contains("a metric needs `better` = \"higher\" or \"lower\""));
    auto none = testing::load("[[probe]]\nkind = \"command\"\n");
    CHECK_THAT(none.messages, Contains("probe `command` of kind \"command\" needs `command`"));
    auto shell = testing::load("[[probe]]\nkind = \"command\"\ncommand = \"curl -s x\"\n");
    CHECK_THAT(shell.messages, Contains("`command` must be a non-empty array of strings"));
}

TEST_CASE("a command probe times the command and reads its metrics from stdout and stderr", "[probes]") {
    auto p = command_probe(
        R"toml(command = ["sh", "-c", "sleep 0.2; echo 'first x=1 ms'; echo 'x=42.5 ms'; echo '{\"end\": {\"bps\": 9e6}}'; echo '3% lost' >&2"]
metrics = [
  { name = "x", regex = "x=(?<value>[0-9.]+) ms", unit = "ms", better = "lower" },
  { name = "bps", json = "/end/bps", unit = "bit/s", better = "higher" },
  { name = "lost", regex = "(?<value>[0-9]+)% lost", stream = "stderr", unit = "%", better = "lower" },
]
)toml");
    auto r = probes::run_command(p, {}, {});
    CHECK(r.metrics.at("wall_time") >= 0.2);
    CHECK(r.metrics.at("wall_time") < 5);
    CHECK(r.metrics.at("x") == Approx(0.0425));  // the last match, in seconds
    CHECK(r.metrics.at("bps") == Approx(9e6));   // the last line parsed as JSON
    CHECK(r.metrics.at("lost") == Approx(0.03));
    // The notes carry each metric's unit and direction for the report.
    auto noted = probes::parse_output_note(r.notes.at(0));
    REQUIRE(noted);
    CHECK(noted->name == "x");
    CHECK(noted->unit == probes::Unit::seconds);
    CHECK_FALSE(noted->higher_is_better);
    CHECK(probes::parse_output_note(r.notes.at(1))->higher_is_better);
}

TEST_CASE("a command probe's failures are that measurement's errors with the command's words", "[probes]") {
    auto failing = command_probe("command = [\"sh\", \"-c\", \"echo 'connection refused' >&2; exit 7\"]\n");
    CHECK_THROWS_MATCHES(probes::run_command(failing, {}, {}), probes::MeasurementError,
                         Catch::Message("`sh -c 'echo '\\''connection refused'\\'' >&2; exit 7'` exited with status "
                                        "7: connection refused"));
    auto slow = command_probe("command = [\"sleep\", \"5\"]\ntimeout = \"200ms\"\n");
    CHECK_THROWS_WITH(probes::run_command(slow, {}, {}), "`sleep 5` was still running after 0.2 s: killed");
    auto silent = command_probe(
        "command = [\"echo\", \"nothing here\"]\nmetrics = [{ name = \"t\", regex = \"t=(?<value>[0-9]+)\", unit = "
        "\"s\", better = \"lower\" }]\n");
    CHECK_THROWS_WITH(probes::run_command(silent, {}, {}),
                      "metric `t`: the regex \"t=(?<value>[0-9]+)\" matched nothing in its stdout; its last lines: "
                      "nothing here");
    auto missing = command_probe("command = [\"wanlab-no-such-tool\"]\n");
    CHECK_THROWS_WITH(probes::run_command(missing, {}, {}), Contains("`wanlab-no-such-tool` is not installed"));
}

TEST_CASE("a regex cannot make a measurement spin: PCRE2's match limit stops it", "[probes]") {
    // Exponential backtracking: each `a` may be either branch, and `$` fails at the `!`.
    probes::Pattern p("(?<value>(a|a)+)$");
    std::string subject = std::string(40, 'a') + "!";
    CHECK_THROWS_WITH(p.last_group(subject, "value"), Contains("regex: "));
}

TEST_CASE("a regex that matches at every position of a large output is stopped by the extraction's budget",
          "[probes][security]") {
    // Each match is cheap and within PCRE2's limits; there are millions of them. One such
    // probe once spun for 13 minutes and ignored SIGTERM.
    probes::Pattern p("(?<value>[0-9]?)");
    std::string subject(8u << 20, 'x');
    CHECK_THROWS_WITH(p.last_group(subject, "value", std::chrono::milliseconds(5)),
                      Contains("regex: still matching after 5 ms") && Contains("bytes of output"));
    // Within the budget, the last match is found as before.
    probes::Pattern digits("(?<value>[0-9]+)");
    CHECK(digits.last_group("1 2 35", "value") == std::optional<std::string>("35"));
}
