#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "report/model.h"
#include "report/report.h"
#include "tests/report/fixtures.h"

using namespace wanlab;
using namespace wanlab::report;
using Catch::Matchers::Contains;

namespace {

std::vector<experiment::AssertSpec> one_gain() {
    experiment::AssertSpec a;
    a.probe = "bulk";
    a.metric = "throughput";
    a.variant = "large-buffers";
    a.min_gain = 0.2;
    return {a};
}

std::string render_as(const results::RunData& d, Format f, std::vector<std::string> metrics = {}) {
    ReportOptions o;
    o.format = f;
    o.metrics = std::move(metrics);
    return render(d, one_gain(), o);
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

bool has_line(const std::string& text, const std::string& line) {
    auto ls = lines_of(text);
    return std::find(ls.begin(), ls.end(), line) != ls.end();
}

}  // namespace

TEST_CASE("report format names parse, and a wrong one lists the choices", "[report]") {
    CHECK(parse_format("table") == Format::table);
    CHECK(parse_format("markdown") == Format::markdown);
    CHECK(parse_format("csv") == Format::csv);
    CHECK(parse_format("json") == Format::json);
    CHECK_THROWS_WITH(parse_format("xml"), "unknown report format `xml`: choose table, markdown, csv, json or html");
    CHECK_THROWS_AS(parse_format("xml"), InputError);
}

TEST_CASE("report table has the header, the flagged trial, before/after rows, pivot, explanations and asserts",
          "[report]") {
    auto text = render_as(fixtures::buffer_sweep(), Format::table);
    INFO(text);
    CHECK(has_line(text, "Experiment buffer-sweep"));
    CHECK(has_line(text, "  status: complete"));
    CHECK(has_line(text, "  where: host, kernel 6.1.0-18-amd64 x86_64 on lab1, wanlab 0.1.0"));
    CHECK(has_line(text, "  trials: 4 of 4 done"));
    CHECK(has_line(text,
                   "  ! trial 3 (aaaa0003) default-buffers @ link.rtt=40ms: emulation did not hold: "
                   "rtt 52.1 ms for 40 ms configured"));
    CHECK_THAT(text, Contains("coverage 75.0% at 3 repeats"));
    // The before/after rows: baseline, variant, delta with its significance mark, verdict.
    CHECK(has_line(text,
                   "  link.rtt=20ms  bulk.throughput    170.00 Mbit/s [168.00, 172.00]  large-buffers  "
                   "300.00 Mbit/s [298.00, 305.00]   +76.5% *  better"));
    CHECK(has_line(text,
                   "                 bulk.retransmits                      11 [10, 12]  large-buffers  "
                   "                   40 [38, 42]  +263.6% *  worse"));
    CHECK(has_line(text,
                   "  link.rtt=40ms  bulk.throughput     85.00 Mbit/s [84.00, 86.00] !  large-buffers  "
                   "250.00 Mbit/s [245.00, 255.00]  +194.1% *  better"));
    CHECK_THAT(text, Contains("bulk.retransmits"));
    CHECK_THAT(text, Contains("bulk.rwnd_limited"));
    CHECK_THAT(text, !Contains("bulk.cwnd"));  // not a headline metric
    CHECK_THAT(text, Contains("Pivot: bulk.throughput, median"));
    CHECK_THAT(text, Contains("link.rtt \\ variant  default-buffers  large-buffers"));
    CHECK_THAT(text, Contains("receive-window limited 92% of the time"));
    CHECK_THAT(text, Contains("Asserts: 2 checks, 2 passed, 0 failed"));
    CHECK_THAT(text, Contains("  PASS bulk.throughput large-buffers @ link.rtt=40ms: gain +194.1% (>= +20.0%)"));
}

TEST_CASE("report header says when results are partial", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.run.status = results::RunStatus::interrupted;
    d.run.planned_trials = 6;
    d.trials[3].status = results::TrialStatus::interrupted;
    d.trials[3].error = "SIGINT during repeat 2";
    auto text = render_as(d, Format::table);
    CHECK(has_line(text, "  status: interrupted: partial results"));
    CHECK(has_line(text, "  trials: 3 of 6 done"));
    CHECK(has_line(text, "  x trial 4 (aaaa0004) large-buffers @ link.rtt=40ms: interrupted: SIGINT during repeat 2"));
    // The run's own words name the status once, not "interrupted: partial results: interrupted by SIGINT".
    d.run.error = "interrupted by SIGINT";
    CHECK(has_line(render_as(d, Format::table), "  status: interrupted by SIGINT: partial results"));
    d.run.error = "SIGTERM from the watchdog";
    CHECK(has_line(render_as(d, Format::table), "  status: interrupted: partial results: SIGTERM from the watchdog"));
}

TEST_CASE("report shows the metrics asked for, by probe.metric or metric", "[report]") {
    auto text = render_as(fixtures::buffer_sweep(), Format::table, {"bulk.cwnd", "retransmits", "nonsense"});
    CHECK_THAT(text, !Contains("bulk.throughput  "));
    CHECK_THAT(text, Contains("bulk.retransmits"));
    CHECK_THAT(text, Contains("metric nonsense: no probe in this run reports it"));
    // cwnd is declared but this run did not measure it: no row of dashes.
    CHECK_THAT(text, !Contains("bulk.cwnd"));
}

TEST_CASE("report markdown is pipe tables under headings", "[report]") {
    auto text = render_as(fixtures::buffer_sweep(), Format::markdown);
    INFO(text);
    CHECK_THAT(text, Contains("# buffer-sweep\n"));
    CHECK_THAT(text, Contains("## Before/after\n"));
    CHECK_THAT(text,
               Contains("| point | metric | default-buffers (baseline) | variant | median [CI] | delta | verdict |\n"
                        "| --- | --- | ---: | --- | ---: | ---: | --- |\n"));
    CHECK_THAT(text, Contains("| link.rtt=20ms | bulk.throughput | 170.00 Mbit/s [168.00, 172.00] | large-buffers | "
                              "300.00 Mbit/s [298.00, 305.00] | +76.5% \\* | better |"));
}

TEST_CASE("report json parses and carries base units", "[report]") {
    auto j = nlohmann::json::parse(render_as(fixtures::buffer_sweep(), Format::json));
    CHECK(j["run"]["id"] == "20261130T041209-ab12");
    CHECK(j["run"]["partial"] == false);
    CHECK(j["run"]["trials_flagged"].size() == 1);
    CHECK(j["run"]["trials_flagged"][0]["trial"] == 3);
    CHECK(j["environment"]["kernel"] == "6.1.0-18-amd64");
    // 2 points x 3 headline metrics x 2 variants.
    REQUIRE(j["cells"].size() == 12);
    const auto& c = j["cells"][0];
    CHECK(c["variant"] == "default-buffers");
    CHECK(c["metric"] == "throughput");
    CHECK(c["unit"] == "bit/s");
    CHECK(c["median"] == 170e6);
    CHECK(c["low"] == 168e6);
    CHECK(c["confidence"].get<double>() == Approx(0.75));
    CHECK(c["sweep"]["link.rtt"] == "20ms");
    REQUIRE(j["comparisons"].size() == 6);
    CHECK(j["comparisons"][0]["delta"].get<double>() == Approx(300.0 / 170 - 1));
    CHECK(j["comparisons"][0]["significant"] == true);
    CHECK(j["pivot"]["rows"] == "link.rtt");
    CHECK(j["pivot"]["columns"] == "variant");
    CHECK(j["pivot"]["groups"][0]["columns"] == nlohmann::json({"default-buffers", "large-buffers"}));
    CHECK(j["pivot"]["groups"][0]["median"][1][0] == 85e6);
    CHECK(j["explanations"].size() == 5);  // + the emulation check that did not hold
    // The same lines with what each is: the probe's binding verdict, the trial's own, advice.
    REQUIRE(j["explanation_details"].size() == 5);
    CHECK(j["explanation_details"][0]["text"] == j["explanations"][0]);
    CHECK(j["explanation_details"][0]["trial"] == 1);
    CHECK(j["explanation_details"][0]["probe"] == "bulk");
    CHECK(j["explanation_details"][0]["rule"] == "receive-window-limited");
    CHECK(j["explanation_details"][0]["role"] == "binding");
    CHECK(j["explanation_details"][1]["role"] == "advice");
    CHECK(j["explanation_details"][1]["probe"].is_null());
    CHECK(j["explanation_details"][2]["rule"] == "emulation-not-held");
    CHECK(j["explanation_details"][2]["role"] == "trial");
    REQUIRE(j["asserts"].size() == 2);
    CHECK(j["asserts"][1]["check"] == "min_gain");
    CHECK(j["asserts"][1]["passed"] == true);
}

TEST_CASE("report json writes unmeasured values as null", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.measurements.resize(1);  // one repeat of trial 1: no interval, nothing to compare
    auto j = nlohmann::json::parse(render_as(d, Format::json));
    REQUIRE(j["cells"].size() >= 2);
    CHECK(j["cells"][0]["low"].is_null());
    CHECK(j["comparisons"][0]["p_value"].is_null());
    CHECK(j["comparisons"][0]["median"].is_null());
}

TEST_CASE("report csv has one row per comparison in base units", "[report]") {
    auto text = render_as(fixtures::buffer_sweep(), Format::csv);
    auto lines = lines_of(text);
    REQUIRE(lines.size() == 7);
    CHECK(lines[0] ==
          "run,point,link.rtt,probe,metric,unit,baseline,base_trial_id,base_n,base_median,base_low,base_high,"
          "base_confidence,base_emulation_held,variant,trial_id,n,median,low,high,confidence,emulation_held,delta,"
          "p_value,significant,better");
    CHECK_THAT(lines[1], Contains("20261130T041209-ab12,link.rtt=20ms,20ms,bulk,throughput,bit/s,default-buffers,"
                                  "aaaa0001,3,170000000,168000000,172000000,0.75,true,large-buffers,aaaa0002,3,"
                                  "300000000,298000000,305000000,0.75,true,0.76470588"));
    CHECK_THAT(lines[4], Contains(",aaaa0003,3,85000000,84000000,86000000,0.75,false,large-buffers,"));
}

TEST_CASE("the pivot and the page's sweep chart show what the asserts name, else the first probe's main metric",
          "[report]") {
    auto d = fixtures::buffer_sweep();
    // A ping probe measured first: its first metric is not the question the assert asks.
    std::vector<results::Measurement> pings;
    for (const auto& t : d.trials) {
        results::Measurement m;
        m.trial = t.index;
        m.probe = "ping";
        m.kind = "rtt";
        m.tool = "builtin";
        m.repeat = 1;
        m.metrics = {{"rtt_min", 0.039}, {"rtt_avg", 0.041}, {"rtt_p50", 0.040}};
        pings.push_back(m);
    }
    d.measurements.insert(d.measurements.begin(), pings.begin(), pings.end());
    ReportOptions o;
    o.format = Format::table;
    CHECK_THAT(render(d, one_gain(), o), Contains("Pivot: bulk.throughput, median"));
    CHECK_THAT(render(d, {}, o), Contains("Pivot: ping.rtt_avg, median"));  // rtt's main metric, not rtt_min
    o.format = Format::html;
    CHECK_THAT(render(d, one_gain(), o), Contains("Sweep: bulk.throughput"));
}

TEST_CASE("report of a run without sweep or second variant has no pivot and no delta columns", "[report]") {
    auto d = fixtures::buffer_sweep();
    d.trials.resize(1);
    d.trials[0].sweep.clear();
    d.trials[0].check = {};
    std::erase_if(d.measurements, [](const results::Measurement& m) { return m.trial != 1; });
    auto text = render(d, {}, ReportOptions{});
    INFO(text);
    CHECK(has_line(text, "  metric                            default-buffers"));
    CHECK(has_line(text, "  bulk.throughput    170.00 Mbit/s [168.00, 172.00]"));
    CHECK_THAT(text, !Contains("Pivot"));
    CHECK_THAT(text, !Contains("Asserts"));
    CHECK_THAT(text, !Contains("delta"));
}

TEST_CASE("report pivots two swept paths with one table per variant", "[report]") {
    auto d = fixtures::buffer_sweep();
    // Sweep link.rtt x link.loss: add a loss value to every trial and a 1% copy of each.
    std::size_t n = d.trials.size();
    for (std::size_t i = 0; i < n; ++i) {
        auto copy = d.trials[i];
        d.trials[i].sweep.emplace_back("link.loss", "0%");
        copy.sweep.emplace_back("link.loss", "1%");
        copy.index += n;
        copy.id = "cccc000" + std::to_string(copy.index);
        d.trials.push_back(copy);
    }
    for (std::size_t i = 0, m = d.measurements.size(); i < m; ++i) {
        auto copy = d.measurements[i];
        copy.trial += n;
        copy.metrics["throughput"] /= 2;
        d.measurements.push_back(copy);
    }
    ReportOptions o;
    o.format = Format::json;
    auto j = nlohmann::json::parse(render(d, {}, o));
    CHECK(j["pivot"]["rows"] == "link.rtt");
    CHECK(j["pivot"]["columns"] == "link.loss");
    REQUIRE(j["pivot"]["groups"].size() == 2);
    CHECK(j["pivot"]["groups"][1]["group"] == "large-buffers");
    CHECK(j["pivot"]["groups"][1]["columns"] == nlohmann::json({"0%", "1%"}));
    CHECK(j["pivot"]["groups"][1]["median"][1][1] == 125e6);  // 40 ms, 1% loss
    o.format = Format::table;
    auto text = render(d, {}, o);
    INFO(text);
    CHECK(has_line(text, "  large-buffers"));
    CHECK(has_line(text, "  link.rtt \\ link.loss             0%             1%"));
}

TEST_CASE("report of adaptive repeats shows each cell's repeats and marks the ones that stopped at the maximum",
          "[report][repeats]") {
    auto d = fixtures::buffer_sweep();
    d.run.repeats = {true, 3, 5, 0.05};
    const double M = 1e6, small = 425984, large = 33554432;
    // Trial 4 (large-buffers @ 40ms) was noisy in its first three repeats: Stein's rule asked
    // for more than 5, so it ran 5 and stopped wider than +-5%.
    d.measurements.erase(std::remove_if(d.measurements.begin(), d.measurements.end(),
                                        [](const results::Measurement& m) { return m.trial == 4; }),
                         d.measurements.end());
    for (auto [r, v] : std::vector<std::pair<unsigned, double>>{{1, 180}, {2, 300}, {3, 250}, {4, 260}, {5, 240}})
        d.measurements.push_back(fixtures::bulk(4, r, v * M, 0.05, large, 30));
    (void)small;
    auto table = render_as(d, Format::table, {"throughput"});
    INFO(table);
    CHECK_THAT(table, Contains("repeats: auto, 3 first, then until the mean's 95% interval is within +-5% of the "
                               "median (Stein's two-stage rule), at most 5; n: repeats; mean +-: that interval's "
                               "half-width, the one the rule settles (the brackets are the median's); max: stopped at "
                               "5 still wider (1 of 4 cells)"));
    // The interval the rule settled, beside the median's: t(0.975, 2) x 2 / sqrt(3) = 4.97 of
    // the first stage's median 170, 2.9%; and the noisy cell's 4.30 x 60.3 / sqrt(5) of 250.
    CHECK_THAT(table, Contains("170.00 Mbit/s [168.00, 172.00] n=3, mean +-2.9%"));
    CHECK_THAT(table, Contains("n=5 max, mean +-46.4%"));
    CHECK_THAT(table, Contains("Welch's t-test with each side's first-stage variance"));
    auto j = nlohmann::json::parse(render_as(d, Format::json, {"throughput"}));
    CHECK(j["run"]["repeats"]["rule"] == "auto");
    CHECK(j["run"]["repeats"]["max"] == 5);
    int unsettled = 0, settled = 0;
    for (const auto& c : j["cells"]) {
        (c["settled"] == true ? settled : unsettled) += 1;
        // A cell the rule calls settled at 5% shows an interval within 5%.
        if (c["settled"] == true) CHECK(c["mean_half_width"].get<double>() <= 0.05);
    }
    CHECK(unsettled == 1);
    CHECK(settled == 3);

    auto fixed = render_as(fixtures::buffer_sweep(), Format::table, {"throughput"});
    CHECK_THAT(fixed, !Contains("n=3"));
    CHECK_THAT(fixed, !Contains("repeats: auto"));
}

TEST_CASE("report counts failed requests beside every figure, and gives no verdict where too many failed", "[report]") {
    ReportOptions o;
    o.metrics = {"api.latency_p50"};
    SECTION("4 of 6 failed under cubic: the cells say so and the comparison has no verdict") {
        auto d = fixtures::api_run({1, 2, 1}, {0, 0, 0}, 2);
        auto text = render(d, {}, o);
        INFO(text);
        CHECK_THAT(text, Contains("(4 of 6 failed: no verdict)"));
        // The header says it too, where a reader starts.
        CHECK_THAT(text, Contains("x trial 1 (bbbb0001) cubic: probe api: 4 of 6 requests failed (4 timed out): its "
                                  "latency figures rest on the other 2; over 5% failed, so no verdict on it"));
        CHECK_THAT(text, !Contains("x trial 2"));
        CHECK_THAT(text, Contains("no verdict: failures"));
        CHECK_THAT(text, !Contains("better"));
        o.format = Format::json;
        auto j = nlohmann::json::parse(render(d, {}, o));
        REQUIRE(j["cells"].size() == 2);
        for (const auto& c : j["cells"]) {
            CHECK(c["attempted"] == 6);
            CHECK(c["failed"] == (c["variant"] == "cubic" ? 4 : 0));
            CHECK(c["too_many_failures"] == (c["variant"] == "cubic"));
        }
        REQUIRE(j["comparisons"].size() == 1);
        CHECK(j["comparisons"][0]["too_many_failures"] == true);
        CHECK(j["comparisons"][0]["significant"] == false);
    }
    SECTION("1 of 600 failed: counted beside the figure, and the verdict stands") {
        auto d = fixtures::api_run({1, 0, 0}, {0, 0, 0}, 200);
        auto text = render(d, {}, o);
        INFO(text);
        CHECK_THAT(text, Contains("(1 of 600 failed)"));
        CHECK_THAT(text, Contains("probe api: 1 of 600 requests failed (1 timed out): its latency figures rest on the "
                                  "other 599\n"));
        CHECK_THAT(text, !Contains("no verdict"));
        CHECK_THAT(text, Contains("better"));
    }
    SECTION("none failed: nothing is added") {
        auto text = render(fixtures::api_run({0, 0, 0}, {0, 0, 0}, 200), {}, o);
        INFO(text);
        CHECK_THAT(text, !Contains("failed"));
    }
}

TEST_CASE("report gives no verdict below 3 repeats and does not call their range a confidence interval", "[report]") {
    auto d = fixtures::buffer_sweep();
    std::erase_if(d.measurements, [](const results::Measurement& m) { return m.repeat == 3; });
    auto text = render_as(d, Format::table);
    INFO(text);
    CHECK_THAT(text, Contains("at 2 repeats the range of the values, not a confidence interval"));
    CHECK_THAT(text, !Contains("50.0% at 2 repeats"));
    CHECK_THAT(text, Contains("too few repeats"));
    CHECK_THAT(text, !Contains("better"));
    CHECK_THAT(text, !Contains(" *  "));
    auto j = nlohmann::json::parse(render_as(d, Format::json));
    for (const auto& c : j["comparisons"]) CHECK(c["significant"] == false);
}

TEST_CASE("report says how many repeats would settle a comparison that is not significant", "[report]") {
    auto d = fixtures::buffer_sweep();
    // large-buffers at 20 ms: 174, 176, 172 against 170, 172, 168 Mbit/s: +2.4%, Welch's p about
    // 0.07 at 3 repeats a side. Both variances 4 (Mbit/s)^2, difference 4: the least n with
    // n >= 2 (t(0.975, 2n-2) + t(0.80, 2n-2))^2 x 4 / 16 is 6 (at 5: 2 x 3.19^2 / 4 = 5.1 > 5;
    // at 6: 2 x 3.11^2 / 4 = 4.8). The normal quantiles' 2 x 2.80^2 / 4 = 3.9 said 4.
    const double M = 1e6;
    for (auto& m : d.measurements)
        if (m.trial == 2) m.metrics["throughput"] = (m.repeat == 1 ? 174 : m.repeat == 2 ? 176 : 172) * M;
    // at 40 ms: the same values on both sides but one: a difference within the noise.
    for (auto& m : d.measurements)
        if (m.trial == 4) m.metrics["throughput"] = (m.repeat == 1 ? 85.2 : m.repeat == 2 ? 84 : 86) * M;
    auto text = render_as(d, Format::table);
    INFO(text);
    CHECK_THAT(text, Contains("What more repeats would settle"));
    CHECK_THAT(text, Contains("bulk.throughput, large-buffers @ link.rtt=20ms: +2.4% at 3 and 3 repeats: about 6 "
                              "repeats a side would tell a difference this size (a test at 5% with 80% power)"));
    CHECK_THAT(text, Contains("bulk.throughput, large-buffers @ link.rtt=40ms: +0.2% at 3 and 3 repeats: more than "
                              "50 repeats a side would be needed to tell a difference this size: within the noise"));
    CHECK_THAT(text, Contains("or [run] repeats = \"auto\""));
    auto j = nlohmann::json::parse(render_as(d, Format::json));
    CHECK(j["more_repeats"].size() == 3);
    // The significant comparisons of the fixture as it is: nothing to settle.
    CHECK_THAT(render_as(fixtures::buffer_sweep(), Format::table), !Contains("What more repeats"));
}

TEST_CASE("report says at the top when the micro-VM's kernel measured, with the defaults it did not share",
          "[report]") {
    auto d = fixtures::buffer_sweep();
    d.run.env.where = "vm (tcg, 2 cpus)";
    d.run.env.kernel = "6.1.0-57-amd64";
    d.run.env.sysctls_before = {{"net.core.rmem_max", "212992"},
                                {"net.ipv4.tcp_rmem", "4096\t131072\t6291456"},
                                {"net.ipv4.tcp_congestion_control", "cubic"},
                                {"net.core.default_qdisc", "pfifo_fast"},
                                {"net.ipv4.tcp_adv_win_scale", "1"}};
    d.run.env.host = results::MachineEnvironment{"local",
                                                 "devbox",
                                                 "6.18.44",
                                                 "x86_64",
                                                 {{"net.core.rmem_max", "4194304"},
                                                  {"net.ipv4.tcp_rmem", "4096\t131072\t33554432"},
                                                  {"net.ipv4.tcp_congestion_control", "bbr"},
                                                  {"net.core.default_qdisc", "fq_codel"},
                                                  {"net.ipv4.tcp_adv_win_scale", "1"}}};
    auto text = render_as(d, Format::table);
    INFO(text);
    // Every trial sets the buffers itself: only the defaults that reached the numbers are named.
    CHECK_THAT(text, Contains("! measured in the micro-VM's kernel 6.1.0-57-amd64 (vm (tcg, 2 cpus)), not this "
                              "machine's 6.18.44 (devbox), whose defaults differ: net.core.default_qdisc pfifo_fast "
                              "(here fq_codel), net.ipv4.tcp_congestion_control cubic (here bbr); the numbers describe "
                              "that kernel with its defaults: set what you compare in the experiment"));
    CHECK_THAT(text, !Contains("rmem_max 212992"));
    // It is among the first lines a reader sees, before the tables.
    CHECK(text.find("! measured in the micro-VM") < text.find("Before/after"));
    auto j = nlohmann::json::parse(render_as(d, Format::json));
    CHECK(j["environment"]["host"]["kernel"] == "6.18.44");
    CHECK(j["environment"]["host"]["sysctls_before"]["net.ipv4.tcp_congestion_control"] == "bbr");
    // A run on this machine says nothing of the kind.
    CHECK_THAT(render_as(fixtures::buffer_sweep(), Format::table), !Contains("! measured in"));
}

TEST_CASE("report gives each factor's effect across the others and names the best measured configuration",
          "[report][effects]") {
    auto d = fixtures::buffer_sweep();
    auto text = render_as(d, Format::table);
    INFO(text);
    // Large buffers: +76.5% at 20 ms (300/170) and +194% at 40 ms (250/85); pooled, +135.6%, and
    // the interval is wide because the effect differs between the RTTs.
    CHECK_THAT(text, Contains("Factor effects: bulk.throughput, each factor across the others"));
    CHECK_THAT(text, Contains("variant large-buffers against default-buffers: +135.6% [+68.2%, +203.0%] "
                              "(significant, better), over 2 combinations of the other factors"));
    CHECK_THAT(text, Contains("link.rtt 40ms against 20ms: -33.5% [-52.5%, -14.4%] (significant, worse), over 2 "
                              "combinations of the other factors"));
    CHECK_THAT(text, Contains("best measured bulk.throughput: trial 2 (aaaa0002) large-buffers @ link.rtt=20ms "
                              "(300.00 Mbit/s median); significantly ahead of the next, trial 4 (aaaa0004) "
                              "large-buffers @ link.rtt=40ms; its settings: variant large-buffers, link.rtt = 20ms, "
                              "net.core.rmem_max = 67108864"));
    auto j = nlohmann::json::parse(render_as(d, Format::json));
    REQUIRE(j["effects"].size() == 2);
    CHECK(j["effects"][0]["factor"] == "variant");
    CHECK(j["effects"][0]["metric"] == "throughput");
    CHECK(j["effects"][0]["delta"].get<double>() == Approx(1.356).epsilon(0.001));
    CHECK(j["effects"][0]["significant"] == true);
    CHECK(j["effects"][1]["factor"] == "link.rtt");
    CHECK(j["effects"][1]["interval"][1].get<double>() < 0);
    CHECK(j["best"]["trial_id"] == "aaaa0002");
    CHECK(j["best"]["sweep"]["link.rtt"] == "20ms");
    CHECK(j["best"]["sysctls"]["net.core.rmem_max"] == "67108864");

    SECTION("below 3 repeats a trial: effects are given but never called significant") {
        std::erase_if(d.measurements, [](const results::Measurement& m) { return m.repeat >= 2; });
        auto one = render_as(d, Format::table);
        INFO(one);
        CHECK_THAT(one, Contains("variant large-buffers against default-buffers: +135."));
        CHECK_THAT(one, Contains("(too few repeats)"));
        CHECK_THAT(one, !Contains("significant, better"));
    }
    SECTION("keys that moved together over every trial (a zip sweep) are one factor") {
        for (auto& t : d.trials) t.sweep.push_back({"link.loss", t.sweep.front().second == "20ms" ? "1%" : "2%"});
        auto zipped = render_as(d, Format::table);
        INFO(zipped);
        CHECK_THAT(zipped, Contains("link.rtt + link.loss 40ms, 2% against 20ms, 1%: -33.5% [-52.5%, -14.4%]"));
        CHECK_THAT(zipped, !Contains("  link.rtt 40ms against"));
        auto swept = report::detail::sweep_factors(d, {"link.rtt", "link.loss"});
        CHECK(swept == std::vector<std::string>{"link.rtt + link.loss"});
        // Crossed, each key is a factor of its own.
        d.trials[1].sweep.back().second = "2%";
        CHECK(report::detail::sweep_factors(d, {"link.rtt", "link.loss"}).size() == 2);
    }
    SECTION("no sweep: no factor effects, the before/after table says it all") {
        d.trials.resize(2);
        for (auto& t : d.trials) t.sweep.clear();
        std::erase_if(d.measurements, [](const results::Measurement& m) { return m.trial > 2; });
        CHECK_THAT(render_as(d, Format::table), !Contains("Factor effects"));
    }
}

TEST_CASE("a measurement under a schedule gets its phases in the text and the JSON, medians over the repeats",
          "[report][schedule]") {
    auto d = fixtures::buffer_sweep();
    // Trial 1's three repeats: [link] until about 3 s, then entry 1.
    for (auto& m : d.measurements) {
        if (m.trial != 1) continue;
        const double change = 3.0 + m.repeat * 0.002;
        nlohmann::json first{{"entry", 0}, {"from", 0.0}, {"to", change}};
        first["medians"]["throughput"] = 1e7 * m.repeat;
        nlohmann::json second{{"entry", 1}, {"from", change}, {"to", 6.0}};
        second["medians"]["throughput"] = 5e6;
        first["link"] = {{"rate", 2.2e7}, {"outage", 0.0}, {"rtt", 0.02}, {"loss", 0.0}};
        second["link"] = {{"rate", 5e6 * 2 / 3}, {"outage", 1.0}, {"rtt", 0.02}, {"loss", 0.01}};
        m.counters["schedule"]["phases"] = nlohmann::json::array({first, second});
    }
    auto text = render_as(d, Format::table);
    CHECK_THAT(text, Contains("Phases of the link's schedule") &&
                         Contains("bulk, default-buffers @ link.rtt=20ms (median of 3 repeats): [link] 0.00-3.00 s "
                                  "(22.00 Mbit/s, RTT 20.00 ms in force): throughput 20.00 Mbit/s; #1 3.00-6.00 s "
                                  "(5.00 Mbit/s, RTT 20.00 ms, loss 1.00%, outage 1.000 s in force): throughput "
                                  "5.00 Mbit/s"));
    auto j = nlohmann::json::parse(render_as(d, Format::json));
    REQUIRE(j["phases"].size() == 1);
    CHECK(j["phases"][0]["trial"] == 1);
    CHECK(j["phases"][0]["phases"][0]["medians"]["throughput"].get<double>() == 2e7);
    CHECK(j["phases"][0]["phases"][1]["entry"] == 1);
    CHECK(j["phases"][0]["phases"][1]["link"]["outage"].get<double>() == 1.0);
    // The page lists them in a section of its own.
    CHECK_THAT(render_as(d, Format::html), Contains("<section id=\"phases\"><h2>Phases of the link&#39;s schedule") &&
                                               Contains("outage 1.000 s in force"));
    // Without a schedule: no section.
    CHECK_THAT(render_as(fixtures::buffer_sweep(), Format::table), !Contains("Phases"));
}
