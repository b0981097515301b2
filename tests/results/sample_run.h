// A run that exercises every field of the results model (NaN, odd text, sweeps, samples,
// connections), a field-by-field comparison that treats NaN as equal to NaN, and a temporary
// directory; shared by the store and export tests.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "results/model.h"

namespace wanlab::results::samples {

/// mkdtemp under /tmp; removed with everything in it on destruction.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string t = (std::filesystem::temp_directory_path() / "wanlab-results-XXXXXX").string();
        path = ::mkdtemp(t.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

inline Run sample_run_header(const std::string& id = "20261130-041209-bulk",
                             const std::string& started = "2026-11-30T04:12:09Z") {
    Run r;
    r.id = id;
    r.experiment = "bulk, \"buffers\"";
    r.file = "examples/bulk.toml";
    r.text = "[run]\nduration = \"10s\"\n# ünïcode, 'quotes' and \"double\" quotes\n";
    r.sets = {"link.delay=40ms", "variant.big.sysctl.net.ipv4.tcp_rmem=4096 131072 67108864"};
    r.baseline = "default";
    r.started = started;
    r.planned_trials = 2;
    r.env.hostname = "lab-1";
    r.env.kernel = "6.1.0-27-amd64";
    r.env.machine = "x86_64";
    r.env.wanlab_version = "0.1.0";
    r.env.where = "vm (tcg, 2 cpus)";
    r.env.sysctls_before = {{"net.ipv4.tcp_rmem", "4096\t131072\t6291456"}, {"net.core.rmem_max", "212992"}};
    return r;
}

inline Trial sample_trial(std::size_t index, const std::string& variant, const std::string& delay) {
    Trial t;
    t.index = index;
    t.id = "t" + std::to_string(index) + "-" + variant;
    t.variant = variant;
    t.sweep = {{"link.delay", delay}, {"link.rate", "100mbit"}};
    t.link_rtt = 0.08;
    t.link_rate = 1e8;
    t.link_loss = kNaN;
    t.link_loss_down = 0.01;
    t.sysctls = {{"client:net.ipv4.tcp_rmem", "4096 131072 67108864"}, {"net.core.rmem_max", "67108864"}};
    t.check.checked = true;
    t.check.held = false;
    t.check.rtt_configured = 0.08;
    t.check.rtt_measured = 0.0803;
    t.check.rate_configured = 1e8;
    t.check.rate_measured = kNaN;
    t.check.note = "rate not measured";
    t.status = results::TrialStatus::done;
    if (index == 1)
        t.captures = {{"bulk", "client", "wl-c", "r1/trial-1-t1/capture-bulk-client.pcap", 1200, 180024, 3,
                       "capture_packets = 1200 reached (17 packets not written)"}};
    return t;
}

inline Measurement sample_measurement(std::size_t trial, unsigned repeat) {
    Measurement m;
    m.trial = trial;
    m.probe = "bulk";
    m.kind = "throughput";
    m.tool = "builtin";
    m.repeat = repeat;
    m.started = "2026-11-30T04:12:" + std::to_string(10 + repeat) + "Z";
    m.metrics = {{"throughput", 94371840.0 + repeat / 3.0}, {"retransmits", 12}, {"rtt", kNaN}};
    m.samples = {{"throughput", {0.1, 1.0 / 3.0, kNaN, 9.5e7}}, {"cwnd", {10, 20, 40}}};
    m.series["stream1.cwnd"] = {{0.1, 0.2, 0.30000000000000004}, {10, kNaN, 40}};
    m.series["throughput"] = {{1, 2}, {9.4e7, 9.5e7}};
    m.notes = {"rcvbuf: asked 64MiB, granted 416KiB, clamped by net.core.rmem_max"};
    m.connections = nlohmann::json::array({{{"id", 1}, {"bytes", 117964800}, {"cc", "cubic"}}});
    return m;
}

/// A complete run: two trials, three measurements.
inline RunData sample_run() {
    RunData d;
    d.run = sample_run_header();
    d.run.status = results::RunStatus::complete;
    d.run.finished = "2026-11-30T04:13:00Z";
    d.trials = {sample_trial(1, "default", "20ms"), sample_trial(2, "big, \"buffers\"", "40ms")};
    d.measurements = {sample_measurement(1, 1), sample_measurement(1, 2), sample_measurement(2, 1)};
    return d;
}

inline bool same_number(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

inline bool same_numbers(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!same_number(a[i], b[i])) return false;
    return true;
}

inline void require_same(const Run& a, const Run& b) {
    CHECK(a.id == b.id);
    CHECK(a.experiment == b.experiment);
    CHECK(a.file == b.file);
    CHECK(a.text == b.text);
    CHECK(a.sets == b.sets);
    CHECK(a.baseline == b.baseline);
    CHECK(a.started == b.started);
    CHECK(a.finished == b.finished);
    CHECK(a.status == b.status);
    CHECK(a.error == b.error);
    CHECK(a.planned_trials == b.planned_trials);
    CHECK(a.shard == b.shard);
    REQUIRE(a.sessions.size() == b.sessions.size());
    for (std::size_t i = 0; i < a.sessions.size(); ++i) {
        CHECK(a.sessions[i].started == b.sessions[i].started);
        CHECK(a.sessions[i].finished == b.sessions[i].finished);
        CHECK(a.sessions[i].status == b.sessions[i].status);
        CHECK(a.sessions[i].error == b.sessions[i].error);
        CHECK(a.sessions[i].hostname == b.sessions[i].hostname);
        CHECK(a.sessions[i].kernel == b.sessions[i].kernel);
        CHECK(a.sessions[i].where == b.sessions[i].where);
        CHECK(a.sessions[i].note == b.sessions[i].note);
    }
    CHECK(a.env.hostname == b.env.hostname);
    CHECK(a.env.kernel == b.env.kernel);
    CHECK(a.env.machine == b.env.machine);
    CHECK(a.env.wanlab_version == b.env.wanlab_version);
    CHECK(a.env.where == b.env.where);
    CHECK(a.env.sysctls_before == b.env.sysctls_before);
}

inline void require_same(const Trial& a, const Trial& b) {
    CHECK(a.index == b.index);
    CHECK(a.id == b.id);
    CHECK(a.variant == b.variant);
    CHECK(a.sweep == b.sweep);
    CHECK(same_number(a.link_rtt, b.link_rtt));
    CHECK(same_number(a.link_rate, b.link_rate));
    CHECK(same_number(a.link_loss, b.link_loss));
    CHECK(same_number(a.link_loss_down, b.link_loss_down));
    REQUIRE(a.captures.size() == b.captures.size());
    for (std::size_t i = 0; i < a.captures.size(); ++i) {
        CHECK(a.captures[i].probe == b.captures[i].probe);
        CHECK(a.captures[i].host == b.captures[i].host);
        CHECK(a.captures[i].dev == b.captures[i].dev);
        CHECK(a.captures[i].path == b.captures[i].path);
        CHECK(a.captures[i].packets == b.captures[i].packets);
        CHECK(a.captures[i].bytes == b.captures[i].bytes);
        CHECK(a.captures[i].dropped == b.captures[i].dropped);
        CHECK(a.captures[i].stopped == b.captures[i].stopped);
    }
    CHECK(a.sysctls == b.sysctls);
    CHECK(a.check.checked == b.check.checked);
    CHECK(a.check.held == b.check.held);
    CHECK(same_number(a.check.rtt_configured, b.check.rtt_configured));
    CHECK(same_number(a.check.rtt_measured, b.check.rtt_measured));
    CHECK(same_number(a.check.rate_configured, b.check.rate_configured));
    CHECK(same_number(a.check.rate_measured, b.check.rate_measured));
    CHECK(a.check.note == b.check.note);
    CHECK(a.status == b.status);
    CHECK(a.error == b.error);
    CHECK(a.origin == b.origin);
    CHECK(a.session == b.session);
}

inline void require_same(const Measurement& a, const Measurement& b) {
    CHECK(a.trial == b.trial);
    CHECK(a.probe == b.probe);
    CHECK(a.kind == b.kind);
    CHECK(a.tool == b.tool);
    CHECK(a.repeat == b.repeat);
    CHECK(a.started == b.started);
    REQUIRE(a.metrics.size() == b.metrics.size());
    for (const auto& [name, value] : a.metrics) {
        INFO("metric " << name);
        REQUIRE(b.metrics.count(name) == 1);
        CHECK(same_number(value, b.metrics.at(name)));
    }
    REQUIRE(a.samples.size() == b.samples.size());
    for (const auto& [name, values] : a.samples) {
        INFO("samples " << name);
        REQUIRE(b.samples.count(name) == 1);
        CHECK(same_numbers(values, b.samples.at(name)));
    }
    REQUIRE(a.series.size() == b.series.size());
    for (const auto& [name, series] : a.series) {
        INFO("series " << name);
        REQUIRE(b.series.count(name) == 1);
        CHECK(same_numbers(series.t, b.series.at(name).t));
        CHECK(same_numbers(series.value, b.series.at(name).value));
    }
    CHECK(a.notes == b.notes);
    CHECK(a.connections == b.connections);
}

inline void require_same(const RunData& a, const RunData& b) {
    require_same(a.run, b.run);
    REQUIRE(a.trials.size() == b.trials.size());
    for (std::size_t i = 0; i < a.trials.size(); ++i) require_same(a.trials[i], b.trials[i]);
    REQUIRE(a.measurements.size() == b.measurements.size());
    for (std::size_t i = 0; i < a.measurements.size(); ++i) require_same(a.measurements[i], b.measurements[i]);
}

}  // namespace wanlab::results::samples
