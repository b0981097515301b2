// JSON and CSV exports of a run.
#include <catch2/catch.hpp>

#include <sstream>

#include "core/error.h"
#include "results/store.h"
#include "tests/results/sample_run.h"

using namespace wanlab::results;
using nlohmann::json;
using wanlab::results::samples::require_same;
using wanlab::results::samples::sample_measurement;
using wanlab::results::samples::sample_run;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

}  // namespace

TEST_CASE("a run round-trips exactly through its json text", "[results]") {
    RunData d = sample_run();
    d.run.error = "line one\nline \"two\"";
    d.run.shard = "3/5";
    d.run.sessions = {{"a", "b", RunStatus::interrupted, "killed, \"9\"", "h", "k", "host", "", 0, 0, ""},
                      {"c", "", RunStatus::running, "", "h2", "k2", "vm", "n", 0, 0, ""}};
    d.trials[0].session = 2;
    d.trials[1].origin = "run a1 (shard 1/2) of r, \"x\" on lab-1, kernel 6.1.0";
    RunData back = from_json(json::parse(to_json(d).dump()));
    require_same(back, d);
    CHECK(to_json(back) == to_json(d));
}

TEST_CASE("a hosts-mode run keeps each machine's environment, and a run without them reads as before", "[results]") {
    RunData d = sample_run();
    d.run.env.machines["server"] = {
        "root@203.0.113.7", "lab-2", "6.1.0-28-amd64", "x86_64", {{"net.ipv4.tcp_rmem", "4096\t131072\t6291456"}}};
    auto j = to_json(d);
    CHECK(j["run"]["env"]["machines"]["server"]["kernel"] == "6.1.0-28-amd64");
    RunData back = from_json(json::parse(j.dump()));
    REQUIRE(back.run.env.machines.count("server"));
    CHECK(back.run.env.machines["server"].ssh == "root@203.0.113.7");
    CHECK(back.run.env.machines["server"].sysctls_before.at("net.ipv4.tcp_rmem") == "4096\t131072\t6291456");
    CHECK_FALSE(to_json(sample_run())["run"]["env"].contains("machines"));
    CHECK(from_json(to_json(sample_run())).run.env.machines.empty());
}

TEST_CASE("json writes NaN as null and keeps the sweep in plan order", "[results]") {
    json j = to_json(sample_run());
    CHECK(j["trials"][0]["link_loss"].is_null());
    CHECK(j["trials"][0]["check"]["rate_measured"].is_null());
    CHECK(j["trials"][0]["sweep"] == json::parse(R"([["link.delay","20ms"],["link.rate","100mbit"]])"));
    CHECK(j["measurements"][0]["metrics"]["rtt"].is_null());
    CHECK(j["measurements"][0]["samples"]["throughput"][2].is_null());
    CHECK(j["run"]["env"]["sysctls_before"]["net.ipv4.tcp_rmem"] == "4096\t131072\t6291456");
    CHECK(j.dump().find("NaN") == std::string::npos);
}

TEST_CASE("json missing a field is refused naming the field", "[results]") {
    json j = to_json(sample_run());
    j["trials"][1].erase("variant");
    CHECK_THROWS_WITH(from_json(j),
                      Catch::StartsWith("reading a run's results from JSON: ") && Catch::Contains("'variant'"));
}

TEST_CASE("csv has one row per metric with sweep columns and quotes names with commas and quotes", "[results]") {
    RunData d = sample_run();
    d.measurements.resize(1);
    d.measurements.push_back(sample_measurement(2, 1));
    d.measurements.back().metrics["mystery"] = 1.5;
    for (auto& m : d.measurements) m.series.clear();  // series rows: their own test
    auto lines = lines_of(to_csv(d));
    REQUIRE(lines.size() == 8);
    CHECK(lines[0] == "run,trial,trial_id,variant,link.delay,link.rate,probe,kind,tool,repeat,metric,t,value,unit");
    CHECK(lines[1] ==
          "20261130-041209-bulk,1,t1-default,default,20ms,100mbit,bulk,throughput,builtin,1,"
          "retransmits,,12,count");
    CHECK(lines[2] == "20261130-041209-bulk,1,t1-default,default,20ms,100mbit,bulk,throughput,builtin,1,rtt,,,s");
    CHECK(lines[3] ==
          "20261130-041209-bulk,1,t1-default,default,20ms,100mbit,bulk,throughput,builtin,1,"
          "throughput,,94371840.33333333,bit/s");
    CHECK(lines[4] ==
          "20261130-041209-bulk,2,\"t2-big, \"\"buffers\"\"\",\"big, \"\"buffers\"\"\",40ms,100mbit,"
          "bulk,throughput,builtin,1,mystery,,1.5,");
}

TEST_CASE("csv has a row per point of each series, with its time, after the metrics", "[results]") {
    RunData d = sample_run();
    d.measurements.resize(1);
    d.measurements[0].metrics = {{"throughput", 1e8}};
    auto lines = lines_of(to_csv(d));
    REQUIRE(lines.size() == 7);
    const std::string head = "20261130-041209-bulk,1,t1-default,default,20ms,100mbit,bulk,throughput,builtin,1,";
    CHECK(lines[1] == head + "throughput,,100000000,bit/s");
    CHECK(lines[2] == head + "stream1.cwnd,0.1,10,count");
    CHECK(lines[3] == head + "stream1.cwnd,0.2,,count");
    CHECK(lines[4] == head + "stream1.cwnd,0.30000000000000004,40,count");
    CHECK(lines[5] == head + "throughput,1,94000000,bit/s");
    CHECK(lines[6] == head + "throughput,2,95000000,bit/s");
}

TEST_CASE("json keeps each series as times and values and refuses one of unequal lengths", "[results]") {
    json j = to_json(sample_run());
    CHECK(j["measurements"][0]["series"]["throughput"] ==
          json::parse(R"({"t":[1,2],"value":[94000000.0,95000000.0]})"));
    CHECK(j["measurements"][0]["series"]["stream1.cwnd"]["value"][1].is_null());
    CHECK(j["trials"][0]["captures"][0]["path"] == "r1/trial-1-t1/capture-bulk-client.pcap");
    j["measurements"][0]["series"]["throughput"]["t"].push_back(3);
    CHECK_THROWS_WITH(from_json(j), Catch::Contains("series throughput: t and value differ in length"));
}

TEST_CASE("csv values read back as the same doubles", "[results]") {
    RunData d = sample_run();
    d.measurements.resize(1);
    d.measurements[0].metrics = {{"a", 0.1}, {"b", 1.0 / 3.0}, {"c", 1e-300}, {"d", 123456789.123456789}};
    for (auto& m : d.measurements) m.series.clear();  // series rows: their own test
    auto lines = lines_of(to_csv(d));
    REQUIRE(lines.size() == 5);
    auto it = d.measurements[0].metrics.begin();
    for (std::size_t i = 1; i < lines.size(); ++i, ++it) {
        std::string line = lines[i];
        std::string value = line.substr(0, line.rfind(','));
        value = value.substr(value.rfind(',') + 1);
        INFO(line);
        CHECK(std::stod(value) == it->second);
    }
}

TEST_CASE("csv fills sweep columns a trial lacks with empty fields", "[results]") {
    RunData d = sample_run();
    d.trials[1].sweep = {{"link.rate", "10mbit"}, {"probe.bulk.streams", "4"}};
    d.measurements = {sample_measurement(2, 1)};
    d.measurements[0].metrics = {{"throughput", 1e7}};
    for (auto& m : d.measurements) m.series.clear();  // series rows: their own test
    auto lines = lines_of(to_csv(d));
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] ==
          "run,trial,trial_id,variant,link.delay,link.rate,probe.bulk.streams,probe,kind,tool,repeat,"
          "metric,t,value,unit");
    CHECK(lines[1] ==
          "20261130-041209-bulk,2,\"t2-big, \"\"buffers\"\"\",\"big, \"\"buffers\"\"\",,10mbit,4,"
          "bulk,throughput,builtin,1,throughput,,10000000,bit/s");
}

TEST_CASE("csv gives a command probe's own metric the unit its note declares", "[results]") {
    RunData d = sample_run();
    d.measurements.resize(1);
    auto& m = d.measurements.front();
    m.kind = "command";
    m.metrics = {{"ttfb", 0.02}, {"wall_time", 0.5}};
    m.notes = {"metric: ttfb: s, lower is better; from stdout regex \"ttfb=(?<value>[0-9.]+)\" (ms)"};
    for (auto& m : d.measurements) m.series.clear();  // series rows: their own test
    auto lines = lines_of(to_csv(d));
    REQUIRE(lines.size() == 3);
    CHECK_THAT(lines[1], Catch::EndsWith(",ttfb,,0.02,s"));
    CHECK_THAT(lines[2], Catch::EndsWith(",wall_time,,0.5,s"));
}

TEST_CASE("a run in the micro-VM keeps the machine that started it, and a run without one reads as before",
          "[results]") {
    RunData d = sample_run();
    d.run.env.host =
        MachineEnvironment{"local", "devbox", "6.18.44", "x86_64", {{"net.ipv4.tcp_congestion_control", "bbr"}}};
    auto j = to_json(d);
    CHECK(j["run"]["env"]["host"]["kernel"] == "6.18.44");
    RunData back = from_json(json::parse(j.dump()));
    REQUIRE(back.run.env.host);
    CHECK(back.run.env.host->hostname == "devbox");
    CHECK(back.run.env.host->sysctls_before.at("net.ipv4.tcp_congestion_control") == "bbr");
    CHECK_FALSE(to_json(sample_run())["run"]["env"].contains("host"));
    CHECK_FALSE(from_json(to_json(sample_run())).run.env.host);
}

TEST_CASE("a CSV cell a spreadsheet would run as a formula starts with ', and numbers stay numbers",
          "[results][security]") {
    for (const char* formula : {"=HYPERLINK(\"http://x\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1"}) {
        INFO(formula);
        auto field = csv_field(formula);
        CHECK((field.starts_with("'") || field.starts_with("\"'")));
    }
    CHECK(csv_field("-0.5") == "-0.5");
    CHECK(csv_field("+3") == "+3");
    CHECK(csv_field("1e-3") == "1e-3");
    CHECK(csv_field("a,b") == "\"a,b\"");
    CHECK(csv_field("=a,b") == "\"'=a,b\"");
    // In an export: a variant's description or a note that starts with = is neutralised.
    RunData d = sample_run();
    d.trials.at(0).variant = "=1+1";
    CHECK_THAT(to_csv(d), Catch::Contains(",'=1+1,") && !Catch::Contains(",=1+1,"));
}
