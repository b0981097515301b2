#include <catch2/catch.hpp>

#include "report/report.h"
#include "tests/report/fixtures.h"

using namespace wanlab;
using namespace wanlab::report;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

experiment::AssertSpec gain(const std::string& variant, double min_gain) {
    experiment::AssertSpec a;
    a.probe = "bulk";
    a.metric = "throughput";
    a.variant = variant;
    a.min_gain = min_gain;
    return a;
}

}  // namespace

TEST_CASE("report min_gain is judged per sweep point on medians", "[report]") {
    // large-buffers over default-buffers: 300/170 = +76.5% at 20 ms, 250/85 = +194.1% at 40 ms.
    auto out = evaluate(fixtures::buffer_sweep(), {gain("large-buffers", 1.0)});
    REQUIRE(out.size() == 2);
    CHECK_FALSE(out[0].passed);
    CHECK(out[0].point == "link.rtt=20ms");
    CHECK(out[0].measured == Approx(300.0 / 170 - 1));
    CHECK(out[0].bound == 1.0);
    CHECK(out[0].message ==
          "FAIL bulk.throughput large-buffers @ link.rtt=20ms: gain +76.5% (required >= +100.0%); "
          "default-buffers 170.00 Mbit/s -> 300.00 Mbit/s");
    CHECK(out[1].passed);
    CHECK(out[1].message ==
          "PASS bulk.throughput large-buffers @ link.rtt=40ms: gain +194.1% (>= +100.0%); "
          "default-buffers 85.00 Mbit/s -> 250.00 Mbit/s [! emulation did not hold in trial 3]");
    CHECK(check_name(out[1]) == "min_gain");
    CHECK(outcome_subject(out[1]) == "bulk.throughput large-buffers @ link.rtt=40ms");
}

TEST_CASE("report min_gain without a variant applies to every variant but the baseline", "[report]") {
    auto out = evaluate(fixtures::buffer_sweep(), {gain("", 0.2)});
    REQUIRE(out.size() == 2);
    for (const auto& o : out) {
        CHECK(o.variant == "large-buffers");
        CHECK(o.passed);
    }
}

TEST_CASE("report min_gain of a lower-is-better metric counts a fall as a gain", "[report]") {
    auto d = fixtures::buffer_sweep();
    experiment::AssertSpec a;
    a.probe = "bulk";
    a.metric = "rwnd_limited";
    a.variant = "large-buffers";
    a.min_gain = 0.5;
    auto out = evaluate(d, {a});
    REQUIRE(out.size() == 2);
    CHECK(out[0].measured == Approx((0.80 - 0.05) / 0.80));  // 20 ms: 80% -> 5% limited
    CHECK(out[0].passed);
    CHECK_THAT(out[0].message, StartsWith("PASS bulk.rwnd_limited large-buffers @ link.rtt=20ms: gain +93.") &&
                                   Contains("(>= +50.0%)"));
}

TEST_CASE("report bounds apply to every variant at every sweep point, in human units", "[report]") {
    experiment::AssertSpec a;
    a.metric = "throughput";  // the only probe reporting it
    a.at_least = 100e6;
    a.at_most = 1e9;
    auto out = evaluate(fixtures::buffer_sweep(), {a});
    REQUIRE(out.size() == 8);  // 2 variants x 2 points x 2 bounds
    CHECK(out[0].message ==
          "PASS bulk.throughput default-buffers @ link.rtt=20ms: median 170.00 Mbit/s (>= 100.00 Mbit/s)");
    CHECK(check_name(out[0]) == "at_least");
    CHECK(check_name(out[1]) == "at_most");
    CHECK(out[1].message ==
          "PASS bulk.throughput default-buffers @ link.rtt=20ms: median 170.00 Mbit/s (<= 1.00 Gbit/s)");
    CHECK_FALSE(out[2].passed);
    CHECK(out[2].message ==
          "FAIL bulk.throughput default-buffers @ link.rtt=40ms: median 85.00 Mbit/s (required >= 100.00 Mbit/s) "
          "[! emulation did not hold in trial 3]");
    CHECK(out[2].measured == 85e6);
    CHECK(out[2].bound == 100e6);
    for (std::size_t i = 3; i < out.size(); ++i) CHECK(out[i].passed);
}

TEST_CASE("report assert on a metric nobody measured fails as not measured", "[report]") {
    auto d = fixtures::buffer_sweep();
    experiment::AssertSpec a;
    a.probe = "ping";
    a.metric = "rtt_avg";
    a.at_most = 0.05;
    auto out = evaluate(d, {a});
    REQUIRE(out.size() == 4);
    CHECK_FALSE(out[0].passed);
    CHECK(out[0].message ==
          "FAIL ping.rtt_avg default-buffers @ link.rtt=20ms: not measured (probe ping has no "
          "measurement in this run)");
}

TEST_CASE("report assert on an interrupted trial fails as not measured at that point only", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.trials[3].status = results::TrialStatus::interrupted;
    std::erase_if(d.measurements, [](const results::Measurement& m) { return m.trial == 4; });
    auto out = evaluate(d, {gain("large-buffers", 0.2)});
    REQUIRE(out.size() == 2);
    CHECK(out[0].passed);
    CHECK_FALSE(out[1].passed);
    CHECK(out[1].message ==
          "FAIL bulk.throughput large-buffers @ link.rtt=40ms: not measured (trial 4 is interrupted)");
}

TEST_CASE("report junit has one testcase per outcome and escapes what it quotes", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.run.experiment = "a<b & \"c\"";
    AssertOutcome pass, fail;
    pass.spec.probe = fail.spec.probe = "bulk";
    pass.spec.metric = fail.spec.metric = "throughput";
    pass.spec.at_least = fail.spec.at_least = 1;
    pass.passed = true;
    pass.message = "PASS fine";
    fail.variant = "v<1>";
    fail.message = "FAIL bulk.throughput v<1>: median 5 & \"low\"";
    auto xml = junit_xml(d, {pass, fail});
    CHECK_THAT(xml, StartsWith("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
    CHECK_THAT(xml, Contains("<testsuite name=\"a&lt;b &amp; &quot;c&quot;\" tests=\"2\" failures=\"1\" errors=\"0\""));
    CHECK_THAT(xml,
               Contains("<testcase classname=\"a&lt;b &amp; &quot;c&quot;\" name=\"bulk.throughput (at_least)\">"));
    CHECK_THAT(xml, Contains("name=\"bulk.throughput v&lt;1&gt; (at_least)\""));
    CHECK_THAT(xml,
               Contains("<failure message=\"FAIL bulk.throughput v&lt;1&gt;: median 5 &amp; &quot;low&quot;\" "
                        "type=\"at_least\">FAIL bulk.throughput v&lt;1&gt;: median 5 &amp; &quot;low&quot;</failure>"));
    CHECK_THAT(xml, !Contains("v<1>"));
    CHECK_THAT(xml, Contains("<property name=\"run\" value=\"20261130T041209-ab12\"/>"));
    CHECK_THAT(xml, Contains("</testsuite>\n</testsuites>\n"));
}

TEST_CASE("report junit of an interrupted run carries an error, so CI does not pass on partial data", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.run.status = results::RunStatus::interrupted;
    d.run.error = "SIGINT";
    auto out = evaluate(d, {gain("large-buffers", 0.2)});
    auto xml = junit_xml(d, out);
    CHECK_THAT(xml, Contains("tests=\"3\" failures=\"0\" errors=\"1\""));
    CHECK_THAT(xml, Contains("<error message=\"run 20261130T041209-ab12 is interrupted: partial results: SIGINT\""));
}

TEST_CASE("report shows a command probe's own metrics with the unit and direction its notes declare", "[report]") {
    // Two variants of a command probe whose `ttfb` metric (seconds, lower is better) came
    // from its output: the notes say so, and that is all the report knows of it.
    results::RunData d = fixtures::buffer_sweep();
    d.trials.resize(2);
    d.trials[0].sweep.clear();
    d.trials[1].sweep.clear();
    d.measurements.clear();
    for (std::size_t t = 1; t <= 2; ++t)
        for (unsigned r = 1; r <= 3; ++r) {
            results::Measurement m;
            m.trial = t;
            m.probe = "fetch";
            m.kind = "command";
            m.tool = "command";
            m.repeat = r;
            m.metrics = {{"wall_time", t == 1 ? 0.9 : 0.3}, {"ttfb", (t == 1 ? 0.080 : 0.020) + 0.001 * r}};
            m.notes = {"metric: ttfb: s, lower is better; from stdout regex \"ttfb=(?<value>[0-9.]+)\" (ms)",
                       "command: /usr/bin/curl -s http://198.18.0.6/"};
            d.measurements.push_back(m);
        }
    experiment::AssertSpec a;
    a.probe = "fetch";
    a.metric = "ttfb";
    a.variant = "large-buffers";
    a.min_gain = 0.7;  // at most 30% of the baseline's
    auto out = evaluate(d, {a});
    REQUIRE(out.size() == 1);
    INFO(out[0].message);
    CHECK(out[0].passed);
    CHECK(out[0].measured == Approx(1 - 0.022 / 0.082));
    CHECK_THAT(out[0].message, Contains("default-buffers 82.00 ms -> 22.00 ms"));
    ReportOptions ro;
    auto text = render(d, {a}, ro);
    INFO(text);
    CHECK_THAT(text, Contains("fetch.wall_time") && Contains("fetch.ttfb") && Contains("82.00 ms"));
}
