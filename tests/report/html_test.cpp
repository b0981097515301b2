// The HTML report's data: each chart's Vega-Lite specification and the rows it draws, built
// from runs made by hand; and the page's promise to be self-contained. The page drawn in a
// real browser: tests/browser (browser:report-page).
#include <catch2/catch.hpp>

#include <algorithm>

#include "report/html.h"
#include "report/model.h"
#include "tests/report/fixtures.h"

using namespace wanlab;
using namespace wanlab::report;
using Catch::Matchers::Contains;
using nlohmann::ordered_json;

namespace {

const html::Chart& chart(const std::vector<html::Chart>& charts, const std::string& id) {
    auto it = std::find_if(charts.begin(), charts.end(), [&id](const html::Chart& c) { return c.id == id; });
    INFO("chart " << id);
    REQUIRE(it != charts.end());
    return *it;
}

const ordered_json& rows(const html::Chart& c) { return c.spec.at("data").at("values"); }

std::vector<html::Chart> charts_of(const results::RunData& d) {
    auto m = detail::build(d, {}, ReportOptions{});
    return html::run_charts(m);
}

}  // namespace

TEST_CASE("the page's sweep chart is a line per variant over the sweep with CI whiskers in the metric's unit",
          "[report][html]") {
    auto d = fixtures::buffer_sweep();
    auto charts = charts_of(d);
    const auto& c = chart(charts, "pivot-0");
    CHECK(c.spec["data"]["name"] == "pivot");
    const auto& values = rows(c);
    REQUIRE(values.size() == 4);
    // default-buffers @ 20ms: 168, 170, 172 Mbit/s -> median 170 with its order-statistic interval.
    CHECK(values[0]["x"] == "20ms");
    CHECK(values[0]["series"] == "default-buffers");
    CHECK(values[0]["median"].get<double>() == Approx(170));
    CHECK(values[0]["low"].get<double>() == Approx(168));
    CHECK(values[0]["high"].get<double>() == Approx(172));
    CHECK(values[0]["emulation"] == "held");
    // The trial whose emulation did not hold is marked.
    auto held = [](const ordered_json& v) { return v["x"] == "40ms" && v["series"] == "default-buffers"; };
    auto it = std::find_if(values.begin(), values.end(), held);
    REQUIRE(it != values.end());
    CHECK((*it)["emulation"] == "did not hold");
    // Axes say what and in which unit; x keeps the plan's order.
    const auto& layers = c.spec["layer"];
    CHECK(layers[0]["encoding"]["y"]["title"] == "median bulk.throughput (Mbit/s)");
    CHECK(c.spec["encoding"]["x"]["title"] == "link.rtt");
    CHECK(c.spec["encoding"]["x"]["sort"]["field"] == "order");
    // Whiskers: a rule from low to high.
    CHECK(layers[1]["mark"]["type"] == "rule");
    CHECK(layers[1]["encoding"]["y"]["field"] == "low");
    CHECK(layers[1]["encoding"]["y2"]["field"] == "high");
}

TEST_CASE("before/after bars carry each cell's interval and mark the significant differences", "[report][html]") {
    auto charts = charts_of(fixtures::buffer_sweep());
    const auto& c = chart(charts, "bars-bulk-throughput");
    const auto& values = rows(c);
    REQUIRE(values.size() == 4);
    for (const auto& v : values) {
        INFO(v.dump());
        if (v["variant"] == "large-buffers") {
            CHECK(v["significant"] == true);
            CHECK(v["mark"] == "* better");
        } else {
            CHECK(v["delta"] == "baseline");
            CHECK(v["significant"] == false);
        }
    }
    CHECK(c.spec["encoding"]["xOffset"]["field"] == "variant");  // grouped by sweep point
    // The significance mark is drawn from the rows that are significant.
    CHECK(c.spec["layer"][2]["transform"][0]["filter"] == "datum.significant");
    CHECK(c.spec["layer"][0]["encoding"]["y"]["title"] == "median bulk.throughput (Mbit/s)");
}

TEST_CASE("time series: each repeat's throughput, cwnd and srtt, one facet each with its unit, a trial at a time",
          "[report][html]") {
    auto d = fixtures::buffer_sweep();
    for (auto& m : d.measurements) {
        m.series["throughput"] = {{1, 2, 3}, {100e6, 160e6, 170e6}};
        m.series["stream1.cwnd"] = {{1, 2, 3}, {10, 200, 230}};
        m.series["stream1.srtt"] = {{1, 2, 3}, {0.0205, 0.0251, 0.0249}};
        m.series["stream1.pacing_rate"] = {{1, 2, 3}, {1e9, 1e9, 1e9}};  // not drawn
    }
    auto charts = charts_of(d);
    const auto& c = chart(charts, "series-bulk");
    const auto& values = rows(c);
    CHECK(values.size() == 12 * 3 * 3);
    std::set<std::string> series;
    for (const auto& v : values) series.insert(v["series"].get<std::string>());
    CHECK(series == std::set<std::string>{"throughput (Mbit/s)", "cwnd, stream 1 (count)", "srtt, stream 1 (ms)"});
    CHECK(values[0]["trial"] == "default-buffers @ link.rtt=20ms");
    CHECK(values[0]["repeat"] == "repeat 1");
    CHECK(values[0]["value"].get<double>() == Approx(100));   // Mbit/s
    CHECK(values[6]["value"].get<double>() == Approx(20.5));  // ms
    // One trial at a time, chosen from every trial's label.
    CHECK(c.spec["params"][0]["bind"]["options"].size() == 4);
    CHECK(c.spec["transform"][0]["filter"] == "datum.trial == trial");
    CHECK(c.spec["resolve"]["scale"]["y"] == "independent");
}

TEST_CASE("under a schedule, the configured rate and RTT are a band behind throughput and srtt, once a trial",
          "[report][html][schedule]") {
    auto d = fixtures::buffer_sweep();
    for (auto& m : d.measurements) {
        m.series["throughput"] = {{1, 2, 3}, {19e6, 5e6, 4.9e6}};
        m.series["stream1.srtt"] = {{1, 2, 3}, {0.0205, 0.0251, 0.0249}};
        m.series["link.up.rate"] = {{0, 1.5, 3}, {20e6, 5e6, 5e6}};
        m.series["link.up.delay"] = {{0, 1.5, 3}, {0.010, 0.010, 0.010}};
        m.series["link.down.delay"] = {{0, 2, 3}, {0.010, 0.030, 0.030}};
    }
    auto charts = charts_of(d);
    const auto& c = chart(charts, "series-bulk");
    std::vector<nlohmann::json> band;
    for (const auto& v : rows(c))
        if (v["band"] == true) band.push_back(v);
    // 4 trials, one repeat's band each: 3 rate points, and the RTT at 0, 1.5, 2 and 3 s.
    REQUIRE(band.size() == 4 * (3 + 4));
    CHECK(band[0]["series"] == "throughput (Mbit/s)");
    CHECK(band[1]["value"].get<double>() == Approx(5));  // Mbit/s from 1.5 s
    CHECK(band[3]["series"] == "srtt, stream 1 (ms)");
    CHECK(band[3]["value"].get<double>() == Approx(20));
    CHECK(band[5]["t"].get<double>() == Approx(2));
    CHECK(band[5]["value"].get<double>() == Approx(40));  // 10 + 30 ms
    // A layer of its own, behind the measured lines.
    const auto& layers = c.spec["spec"]["layer"];
    REQUIRE(layers.size() == 2);
    CHECK(layers[0]["mark"]["type"] == "area");
    CHECK(layers[0]["transform"][0]["filter"] == "datum.band");
    CHECK(layers[1]["transform"][0]["filter"] == "!datum.band");
    // Without link.* series: one plain line layer, no band.
    auto plain = charts_of(fixtures::buffer_sweep());
    for (const auto& ch : plain) CHECK_FALSE((ch.spec.contains("spec") && ch.spec["spec"].contains("layer")));
}

TEST_CASE("under a schedule, the bandwidth-delay product is a band behind cwnd, and loss behind netem's drops",
          "[report][html][schedule]") {
    auto d = fixtures::buffer_sweep();
    for (auto& m : d.measurements) {
        m.series["throughput"] = {{1, 2, 3}, {19e6, 0, 4.9e6}};
        m.series["stream1.cwnd"] = {{1, 2, 3}, {30, 2, 12}};
        m.series["link.up.rate"] = {{0, 1.5, 3}, {20e6, 5e6, 5e6}};
        m.series["link.up.delay"] = {{0, 3}, {0.020, 0.020}};
        m.series["link.down.delay"] = {{0, 3}, {0.020, 0.020}};
        // An outage from 1.5 to 2.5 s: netem dropped everything that arrived.
        m.series["link.up.loss"] = {{0, 1.5, 2.5, 3}, {0.0, 1.0, 0.0, 0.0}};
        m.series["qdisc.up.netem.loss"] = {{1, 2, 3}, {0.0, 1.0, 0.01}};
    }
    auto charts = charts_of(d);
    const auto& c = chart(charts, "series-bulk");
    std::map<std::string, std::vector<nlohmann::json>> band, measured;
    for (const auto& v : rows(c)) (v["band"] == true ? band : measured)[v["series"].get<std::string>()].push_back(v);
    // cwnd: 20 Mbit/s x 40 ms / 8 / 1448 bytes = 69.1 segments, then 17.3 at 5 Mbit/s.
    REQUIRE(band.count("cwnd, stream 1 (count)"));
    const auto& bdp = band["cwnd, stream 1 (count)"];
    CHECK(bdp[0]["value"].get<double>() == Approx(20e6 * 0.040 / 8 / 1448));
    CHECK(bdp[1]["t"].get<double>() == Approx(1.5));
    CHECK(bdp[1]["value"].get<double>() == Approx(5e6 * 0.040 / 8 / 1448));
    // The loss row appears because the schedule set a loss; the band is the outage's 100%.
    std::string loss_row;
    for (const auto& [name, rows] : band)
        if (name.starts_with("loss")) loss_row = name;
    REQUIRE_FALSE(loss_row.empty());
    CHECK(measured.count(loss_row));
    CHECK(band[loss_row][1]["t"].get<double>() == Approx(1.5));
    CHECK(band[loss_row][1]["value"].get<double>() == Approx(100));  // percent
    // A schedule that never sets a loss draws no loss row.
    for (auto& m : d.measurements) m.series["link.up.loss"] = {{0, 3}, {0.0, 0.0}};
    const auto lossless = charts_of(d);  // held: rows() refers into it
    for (const auto& v : rows(chart(lossless, "series-bulk")))
        CHECK_FALSE(v["series"].get<std::string>().starts_with("loss"));
}

TEST_CASE("a plain run draws no band", "[report][html]") {
    auto plain = charts_of(fixtures::buffer_sweep());
    for (const auto& ch : plain) CHECK_FALSE((ch.spec.contains("spec") && ch.spec["spec"].contains("layer")));
}

TEST_CASE("latency distributions are drawn from quantiles of every repeat's samples", "[report][html]") {
    auto d = fixtures::buffer_sweep();
    d.measurements.clear();
    for (std::size_t t : {1, 4})  // default-buffers @ 20ms, large-buffers @ 40ms
        for (unsigned r = 1; r <= 2; ++r) {
            results::Measurement m;
            m.trial = t;
            m.probe = "reqs";
            m.kind = "rr";
            m.tool = "builtin";
            m.repeat = r;
            m.metrics = {{"latency_mean", 0.02}};
            // 1..100 ms (trial 1) or 41..140 ms (trial 4), half in each repeat.
            for (int i = 1; i <= 50; ++i) m.samples["latency"].push_back((i * 2 - (r == 1) + (t == 4 ? 40 : 0)) / 1e3);
            d.measurements.push_back(m);
        }
    auto charts = charts_of(d);
    const auto& c = chart(charts, "latency-reqs");
    const auto& values = rows(c);
    REQUIRE(values.size() == 2 * 201);
    // Nearest rank, as the report's percentiles: the median of 1..100 ms is 50 ms, the top 100.
    CHECK(values[0]["fraction"] == 0.0);
    CHECK(values[0]["latency"].get<double>() == Approx(1));
    CHECK(values[100]["fraction"].get<double>() == Approx(0.5));
    CHECK(values[100]["latency"].get<double>() == Approx(50));
    CHECK(values[200]["latency"].get<double>() == Approx(100));
    CHECK(values[201]["variant"] == "large-buffers");
    CHECK(values[201 + 100]["latency"].get<double>() == Approx(90));
    CHECK(c.spec["encoding"]["x"]["title"] == "latency (ms)");
    CHECK(c.spec["encoding"]["x"]["scale"]["type"] == "log");  // 1 to 140 ms spans more than 20x
    CHECK(c.spec["params"][0]["name"] == "point");             // one sweep point at a time
}

TEST_CASE("the emulation check is plotted configured against measured, with the trials that did not hold marked",
          "[report][html]") {
    auto d = fixtures::buffer_sweep();
    for (auto& t : d.trials) {
        t.check.checked = true;
        t.check.rtt_configured = t.link_rtt;
        t.check.rtt_measured = t.link_rtt + 0.0008;
        t.check.rate_configured = 500e6;
        t.check.rate_measured = 470e6;
    }
    d.trials[2].check.rtt_measured = 0.0521;
    auto charts = charts_of(d);
    const auto& c = chart(charts, "emulation");
    const auto& rtt = c.spec["hconcat"][0]["layer"][1]["data"];
    CHECK(rtt["name"] == "rtt");
    REQUIRE(rtt["values"].size() == 4);
    CHECK(rtt["values"][2]["configured"].get<double>() == Approx(40));
    CHECK(rtt["values"][2]["measured"].get<double>() == Approx(52.1));
    CHECK(rtt["values"][2]["emulation"] == "did not hold");
    CHECK(c.spec["hconcat"][0]["layer"][1]["encoding"]["x"]["title"] == "configured RTT (ms)");
    CHECK(c.spec["hconcat"][1]["layer"][1]["encoding"]["y"]["title"] == "measured rate (Mbit/s)");
}

TEST_CASE("the page carries its scripts and data inline and may make no request", "[report][html]") {
    auto d = fixtures::buffer_sweep();
    d.run.experiment = "<script>alert(1)</script>";
    d.trials[0].variant = "</script><script>alert(2)</script>";
    ReportOptions o;
    o.format = parse_format("html");
    auto page = render(d, {}, o);
    CHECK_THAT(page, Contains("Content-Security-Policy") && Contains("default-src 'none'"));
    CHECK_THAT(page, Contains("<title>wanlab: &lt;script&gt;alert(1)&lt;/script&gt;"));
    // Outside the data (a JSON string, where only "</script" could end the element), no markup
    // of the names survives.
    auto open = page.find("id=\"wanlab-charts\">"), close = page.find("</script>", open);
    CHECK_THAT(page.substr(0, open) + page.substr(close), !Contains("<script>alert"));
    // No file of its own to fetch: no script src, no stylesheet link, no font.
    CHECK_THAT(page, !Contains("<script src") && !Contains("<link") && !Contains("@import") && !Contains("@font-face"));
    CHECK_THAT(page, Contains("/* vega ") && Contains("/* vega-lite "));
    CHECK(page.find("<figure class=\"chart\" id=\"pivot-0\"") != std::string::npos);
    // The chart data's one script element ends where it should.
    auto data = page.substr(page.find("id=\"wanlab-charts\">"));
    data = data.substr(0, data.find("</script>"));
    CHECK_THAT(data, Contains("\\u003c/script>\\u003cscript>alert(2)\\u003c/script>"));
    auto parsed = ordered_json::parse(data.substr(data.find('>') + 1));
    CHECK(parsed.size() == html::run_charts(detail::build(d, {}, o)).size());
}

TEST_CASE("no stored string can end or comment out the page's chart data", "[report][html][security]") {
    // "<!--<script" in a script element makes the browser read on as script data until a
    // matching end: no chart would draw and nothing would say why. U+2028 ended a line in older
    // JavaScript. Neither may reach the element's text as it is.
    auto d = fixtures::buffer_sweep();
    d.trials[0].variant = "<!--<script>";
    d.trials[1].variant = "a\u2028b\u2029c";
    ReportOptions o;
    o.format = parse_format("html");
    auto page = render(d, {}, o);
    auto start = page.find("id=\"wanlab-charts\">");
    REQUIRE(start != std::string::npos);
    auto data = page.substr(start, page.find("</script>", start) - start);
    CHECK_THAT(data, !Contains("<!--") && !Contains("<script") && !Contains("\u2028") && !Contains("\u2029"));
    CHECK_THAT(data, Contains("\\u003c!--\\u003cscript>") && Contains("a\\u2028b\\u2029c"));
    // It is still the same data.
    auto parsed = ordered_json::parse(data.substr(data.find('>') + 1));
    CHECK(parsed.dump().find("<!--<script>") != std::string::npos);
}

TEST_CASE("html escapes markup, quotes and ampersands", "[report][html]") {
    CHECK(html::escape("a<b>&\"c\"'d'") == "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
    CHECK(html::axis_unit(probes::Unit::bits_per_second, 3.4e7).label == "Mbit/s");
    CHECK(html::axis_unit(probes::Unit::seconds, 0.04).divisor == Approx(1e-3));
    CHECK(html::axis_unit(probes::Unit::fraction, 0.5).label == "%");
    CHECK(html::axis_unit(probes::Unit::count, 12).label == "count");
}

TEST_CASE("the page sets what was also observed back under a probe's binding verdict", "[report][html]") {
    auto d = fixtures::buffer_sweep();
    d.trials[3].link_rate = 260e6;  // large-buffers @ 40ms carried 250 Mbit/s: the link, full
    for (auto& m : d.measurements)
        if (m.trial == 4) m.counters["cpu_busiest"] = 0.95;
    ReportOptions o;
    o.format = parse_format("html");
    auto page = render(d, {}, o);
    CHECK_THAT(page, Contains("<li>bulk, large-buffers @ link.rtt=40ms: rate-bound: 250.00 Mbit/s"));
    CHECK_THAT(page, Contains("<li class=\"observed\">bulk, large-buffers @ link.rtt=40ms, also observed: a busy "
                              "CPU: one CPU was busy 95% of the measurement"));
    CHECK(page.find("rate-bound: 250.00") < page.find("also observed: a busy CPU"));
}

TEST_CASE("the page's axis labels are whole, its pivot tables titled, and it gives the factor effects",
          "[report][html]") {
    auto d = fixtures::buffer_sweep();
    // Sweep values as long as a user's: Vega-Lite cut both to the same first 180 px before.
    for (auto& t : d.trials)
        for (auto& [k, v] : t.sweep) v = "[4096, 16384, " + std::string(v == "20ms" ? "4194304" : "33554432") + "]";
    auto charts = charts_of(d);
    CHECK(chart(charts, "pivot-0").spec["encoding"]["x"]["axis"]["labelLimit"] == 0);
    for (const auto& c : charts)
        if (c.spec.contains("encoding") && c.spec["encoding"].contains("x") &&
            c.spec["encoding"]["x"].contains("axis") && c.spec["encoding"]["x"]["axis"].contains("labelAngle"))
            CHECK(c.spec["encoding"]["x"]["axis"]["labelLimit"] == 0);
    ReportOptions o;
    o.format = Format::html;
    auto page = render(d, {}, o);
    CHECK_THAT(page, Contains("Median bulk.throughput: rows link.rtt, columns variant"));
    CHECK_THAT(page, Contains("Factor effects: bulk.throughput, each factor across the others"));
    CHECK_THAT(page, Contains("variant large-buffers against default-buffers: +135.6%"));
}
