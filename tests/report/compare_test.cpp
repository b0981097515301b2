#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "report/report.h"
#include "tests/report/fixtures.h"

using namespace wanlab;
using namespace wanlab::report;
using Catch::Matchers::Contains;

namespace {

// The same experiment on another kernel, planned differently: a 10ms sweep point added in
// front (so every index moved), the large-buffers @ 20ms trial missing, throughput 10% up.
results::RunData rerun() {
    auto b = fixtures::buffer_sweep();
    b.run.id = "20261201T090000-cd34";
    b.run.env.kernel = "6.8.0-1-amd64";
    b.run.env.sysctls_before = {{"net.core.rmem_max", "4194304"}};
    for (auto& t : b.trials) t.index += 1;
    for (auto& m : b.measurements) {
        m.trial += 1;
        m.metrics["throughput"] *= 1.1;
    }
    std::erase_if(b.measurements, [](const results::Measurement& m) { return m.trial == 3; });  // aaaa0002
    b.trials.erase(b.trials.begin() + 1);
    auto extra = fixtures::trial(1, "bbbb0001", "default-buffers", "10ms");
    b.trials.insert(b.trials.begin(), extra);
    for (unsigned r = 1; r <= 3; ++r) b.measurements.push_back(fixtures::bulk(1, r, 400e6, 0.1, 425984));
    return b;
}

}  // namespace

TEST_CASE("report comparison matches trials by id, not by position", "[report]") {
    auto a = fixtures::buffer_sweep();
    auto b = rerun();
    auto j = nlohmann::json::parse(render_comparison(a, b, Format::json));
    auto row = [&j](const std::string& id, const std::string& metric) {
        for (const auto& r : j["rows"])
            if (r["trial_id"] == id && r["metric"] == metric) return r;
        return nlohmann::json();
    };
    auto r3 = row("aaaa0003", "throughput");
    REQUIRE(r3.is_object());
    CHECK(r3["presence"] == "both");
    CHECK(r3["a"]["median"] == 85e6);
    CHECK(r3["b"]["median"].get<double>() == Approx(93.5e6));
    CHECK(r3["b"]["trial"] == 4);
    CHECK(r3["delta"].get<double>() == Approx(0.1));
    CHECK(r3["significant"] == true);
    CHECK(r3["better"] == true);
    CHECK(row("aaaa0003", "retransmits")["delta"].get<double>() == Approx(0));
    CHECK(row("aaaa0002", "throughput")["presence"] == "only in A");
    CHECK(row("aaaa0002", "throughput")["b"].is_null());
    CHECK(row("bbbb0001", "throughput")["presence"] == "only in B");
    CHECK(j["differences"] ==
          nlohmann::json({"kernel 6.1.0-18-amd64 -> 6.8.0-1-amd64", "net.core.rmem_max ? -> 4194304"}));
}

TEST_CASE("report comparison table lists rows present in one run only", "[report]") {
    auto text = render_comparison(fixtures::buffer_sweep(), rerun(), Format::table);
    INFO(text);
    CHECK_THAT(text,
               Contains("A: run 20261130T041209-ab12 of buffer-sweep, complete, host, kernel 6.1.0-18-amd64 on lab1"));
    CHECK_THAT(text, Contains("differs: kernel 6.1.0-18-amd64 -> 6.8.0-1-amd64"));
    CHECK_THAT(text,
               Contains("aaaa0003  default-buffers  link.rtt=40ms  bulk.throughput     85.00 Mbit/s [84.00, 86.00] !"
                        "   93.50 Mbit/s [92.40, 94.60] !  +10.0% *  better"));
    CHECK_THAT(text, Contains("only in A"));
    CHECK_THAT(text, Contains("only in B"));
}

TEST_CASE("report comparison csv has one row per matched cell", "[report]") {
    auto text = render_comparison(fixtures::buffer_sweep(), rerun(), Format::csv);
    CHECK_THAT(text, Contains("trial_id,variant,point,probe,metric,unit,presence,a_n,"));
    CHECK_THAT(text, Contains("aaaa0002,large-buffers,link.rtt=20ms,bulk,throughput,bit/s,only in A,3,300000000,"));
    CHECK_THAT(text,
               Contains("bbbb0001,default-buffers,link.rtt=10ms,bulk,throughput,bit/s,only in B,,,,,,3,400000000,"));
}

TEST_CASE("report comparison as a page draws A against B per metric with the differences listed", "[report][html]") {
    auto page = render_comparison(fixtures::buffer_sweep(), rerun(), Format::html);
    CHECK_THAT(page, Contains("<figure class=\"chart\" id=\"compare-bulk-throughput\""));
    CHECK_THAT(page, Contains("kernel 6.1.0-18-amd64 -&gt; 6.8.0-1-amd64"));
    auto data = page.substr(page.find("id=\"wanlab-charts\">"));
    data = data.substr(data.find('>') + 1, data.find("</script>") - data.find('>') - 1);
    auto charts = nlohmann::json::parse(data);
    const auto& spec = charts.at(0).at("spec");
    CHECK(charts.at(0)["id"] == "compare-bulk-throughput");
    // B's 10% gain on a matched trial is significant and marked; a trial of one run only has one bar.
    bool marked = false;
    for (const auto& v : spec["data"]["values"]) marked = marked || (v["run"] == "B" && v["significant"] == true);
    CHECK(marked);
    CHECK(spec["layer"][0]["encoding"]["y"]["title"] == "bulk.throughput (Mbit/s)");
}

TEST_CASE("report comparison counts failed requests on each side and gives no verdict where too many failed",
          "[report]") {
    auto a = fixtures::api_run({1, 2, 1}, {0, 0, 0}, 2);  // cubic lost 4 of 6 requests
    auto b = fixtures::api_run({0, 0, 0}, {0, 0, 0}, 2);
    auto text = render_comparison(a, b, Format::table);
    INFO(text);
    CHECK_THAT(text, Contains("(4 of 6 failed: no verdict)"));
    CHECK_THAT(text, Contains("no verdict: failures"));
    auto j = nlohmann::json::parse(render_comparison(a, b, Format::json));
    bool seen = false;
    for (const auto& r : j["rows"])
        if (r["variant"] == "cubic" && r["metric"] == "latency_p50") {
            seen = true;
            CHECK(r["a"]["failed"] == 4);
            CHECK(r["a"]["attempted"] == 6);
            CHECK(r["a"]["too_many_failures"] == true);
            CHECK(r["b"]["failed"] == 0);
            CHECK(r["significant"] == false);
        }
    CHECK(seen);
}
