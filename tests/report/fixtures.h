// Runs built by hand for the report tests: no database, no kernel.
//
// buffer_sweep(): examples/buffer-sweep.toml measured: default-buffers and large-buffers at
// link.rtt 20ms and 40ms on a 500 Mbit/s path, 3 repeats of probe "bulk" (throughput),
// trial 3 (default-buffers @ 40ms) with an emulation check that did not hold.
// api_run(): an http probe under cubic and bbr whose requests partly failed.
#pragma once

#include <string>
#include <vector>

#include "probes/probe.h"
#include "results/model.h"

namespace wanlab::report::fixtures {

inline results::Trial trial(std::size_t index, const std::string& id, const std::string& variant,
                            const std::string& rtt) {
    results::Trial t;
    t.index = index;
    t.id = id;
    t.variant = variant;
    t.status = results::TrialStatus::done;
    if (!rtt.empty()) t.sweep = {{"link.rtt", rtt}};
    t.link_rtt = rtt == "20ms" ? 0.020 : rtt == "40ms" ? 0.040 : results::kNaN;
    t.link_rate = 500e6;
    return t;
}

/// One repeat of the bulk throughput probe, with one upload connection as the probe reports it.
inline results::Measurement bulk(std::size_t trial, unsigned repeat, double throughput, double rwnd_limited,
                                 double rcvbuf_granted, double retransmits = 10) {
    // TCP's smoothed RTT: the trial's path plus half a millisecond of queue.
    const double srtt = trial <= 2 ? 0.0205 : 0.0405;
    results::Measurement m;
    m.trial = trial;
    m.probe = "bulk";
    m.kind = "throughput";
    m.tool = "builtin";
    m.repeat = repeat;
    m.metrics = {{"throughput", throughput},
                 {"retransmits", retransmits},
                 {"rwnd_limited", rwnd_limited},
                 {"sndbuf_limited", 0.01},
                 {"rcvbuf_granted", rcvbuf_granted},
                 {"sndbuf_granted", 2626560},
                 {"rtt", 0.0405}};
    // As examples/buffer-sweep.toml measures: SO_RCVBUF asked (rcvbuf = "32M"), the send
    // buffer autotuned.
    m.notes = {
        "rcvbuf: asked 32MiB, granted 416KiB (the kernel doubles the request for its bookkeeping and caps it "
        "at 2 x net.core.rmem_max = 416KiB)",
        std::string(probes::kSndbufAutotuned) + "; sndbuf_granted is its size at the end"};
    m.connections = nlohmann::json::array();
    m.connections.push_back({{"direction", "upload"},
                             {"congestion_control", "cubic"},
                             {"values",
                              {{"throughput", throughput},
                               {"rtt", srtt},
                               {"min_rtt", srtt - 0.0005},
                               {"busy_time", 10.0},
                               {"rwnd_limited_time", 10.0 * rwnd_limited},
                               {"sndbuf_limited_time", 0.1},
                               {"rwnd_limited", rwnd_limited},
                               {"sndbuf_limited", 0.01},
                               {"rcvbuf_granted", rcvbuf_granted},
                               {"sndbuf_granted", 2626560}}}});
    return m;
}

inline void default_buffers(results::Trial& t) {
    t.sysctls = {{"net.core.rmem_max", "212992"},
                 {"net.core.wmem_max", "212992"},
                 {"net.ipv4.tcp_rmem", "4096\t131072\t6291456"},
                 {"net.ipv4.tcp_wmem", "4096\t16384\t4194304"}};
}

inline void large_buffers(results::Trial& t) {
    t.sysctls = {{"net.core.rmem_max", "67108864"},
                 {"net.core.wmem_max", "67108864"},
                 {"net.ipv4.tcp_rmem", "4096\t131072\t67108864"},
                 {"net.ipv4.tcp_wmem", "4096\t16384\t67108864"}};
}

inline results::RunData buffer_sweep() {
    results::RunData d;
    d.run.id = "20261130T041209-ab12";
    d.run.experiment = "buffer-sweep";
    d.run.file = "examples/buffer-sweep.toml";
    d.run.baseline = "default-buffers";
    d.run.status = results::RunStatus::complete;
    d.run.started = "2026-11-30T04:12:09Z";
    d.run.finished = "2026-11-30T04:16:02Z";
    d.run.planned_trials = 4;
    d.run.env = {"lab1", "6.1.0-18-amd64", "x86_64", "0.1.0", "host", {}};
    d.trials = {trial(1, "aaaa0001", "default-buffers", "20ms"), trial(2, "aaaa0002", "large-buffers", "20ms"),
                trial(3, "aaaa0003", "default-buffers", "40ms"), trial(4, "aaaa0004", "large-buffers", "40ms")};
    default_buffers(d.trials[0]);
    large_buffers(d.trials[1]);
    default_buffers(d.trials[2]);
    large_buffers(d.trials[3]);
    d.trials[2].check.checked = true;
    d.trials[2].check.held = false;
    d.trials[2].check.note = "rtt 52.1 ms for 40 ms configured";
    const double M = 1e6;
    const double small = 425984, large = 33554432;  // 2 x rmem_max, as the kernel grants
    std::vector<results::Measurement> ms{
        bulk(1, 1, 170 * M, 0.80, small, 12), bulk(1, 2, 172 * M, 0.81, small, 10),
        bulk(1, 3, 168 * M, 0.79, small, 11), bulk(2, 1, 300 * M, 0.05, large, 40),
        bulk(2, 2, 305 * M, 0.04, large, 42), bulk(2, 3, 298 * M, 0.06, large, 38),
        bulk(3, 1, 85 * M, 0.92, small, 5),   bulk(3, 2, 84 * M, 0.93, small, 6),
        bulk(3, 3, 86 * M, 0.91, small, 4),   bulk(4, 1, 250 * M, 0.05, large, 30),
        bulk(4, 2, 255 * M, 0.05, large, 31), bulk(4, 3, 245 * M, 0.05, large, 29),
    };
    d.measurements = ms;
    return d;
}

/// The mobile-API question of issue 39: an http probe "api" under cubic (the baseline) and
/// bbr, 3 repeats each. `failed` of `attempted` requests per repeat did not complete; the
/// latency percentiles rest on the others.
inline results::RunData api_run(const std::vector<double>& cubic_failed, const std::vector<double>& bbr_failed,
                                double attempted) {
    results::RunData d;
    d.run.id = "20261207T050000-cc01";
    d.run.experiment = "mobile-api";
    d.run.file = "mobile-api.toml";
    d.run.baseline = "cubic";
    d.run.status = results::RunStatus::complete;
    d.run.planned_trials = 2;
    d.run.env = {"lab1", "6.1.0-18-amd64", "x86_64", "0.1.0", "host", {}};
    d.trials = {trial(1, "bbbb0001", "cubic", ""), trial(2, "bbbb0002", "bbr", "")};
    const double p50[2][3] = {{1.276, 1.301, 1.250}, {0.820, 0.815, 0.830}};
    for (std::size_t t = 0; t < 2; ++t)
        for (unsigned r = 1; r <= 3; ++r) {
            results::Measurement m;
            m.trial = t + 1;
            m.probe = "api";
            m.kind = "http";
            m.tool = "builtin";
            m.repeat = r;
            double failed = (t == 0 ? cubic_failed : bbr_failed).at(r - 1);
            m.metrics = {{"latency_p50", p50[t][r - 1]},
                         {"requests", attempted - failed},
                         {"errors", failed},
                         {"timeouts", failed},
                         {"attempted", attempted},
                         {"failed", failed},
                         {"failure_rate", failed / attempted}};
            d.measurements.push_back(m);
        }
    return d;
}

}  // namespace wanlab::report::fixtures
