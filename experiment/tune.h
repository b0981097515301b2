// [tune]: what `wanlab tune` searches for (a goal, its constraints, a budget) and where (a
// space of keys, each with its candidate values).
//
// Contract: parse_tune() reads the [tune] table of a loaded experiment and checks it against
// the experiment's probes and sweep: the goal and each constraint name a probe of the file and
// a metric of its kind; each key of the space is a key in the dotted form `--set` and
// [sweep] take (`sysctl.net.core.rmem_max`, `probe.bulk.congestion_control`, `link.qdisc`)
// that no [sweep] key also varies; its values are a list, or a range of sizes or numbers
// (`{ from = "256KiB", to = "64MiB", scale = "x2" }`), expanded here. Every error is located.
// The values are kept as TOML text, so a TuneSpec outlives the documents it was read from.
// Pure; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "probes/probe_spec.h"

namespace wanlab::experiment {

struct Experiment;

/// One metric of one probe, as `PROBE.METRIC` names it ("bulk.throughput").
struct MetricRef {
    std::string probe, metric;
    probes::Unit unit = probes::Unit::count;
    bool higher_is_better = true;
    std::string text() const { return probe + "." + metric; }
};

/// "rtt.rtt_p99 <= 60ms": a bound a recommendation must keep, in the metric's base units.
struct TuneConstraint {
    MetricRef metric;
    bool at_most = true;  ///< <= (else >=)
    double bound = 0;
    std::string text;  ///< as written
    Location at;
};

/// One key of [tune.space] and its candidates, in the order written (a range: ascending).
struct TuneKey {
    std::string path;                 ///< the dotted key, as `--set` takes it
    std::vector<std::string> values;  ///< each value as TOML text ("\"bbr\"", "4194304")
    std::vector<Location> value_at;   ///< where the file wrote each (a range's values: the range)
    std::vector<std::string> labels;  ///< each value as the output shows it ("4MiB", "bbr")
    /// Each value as a number where all of them are one (a size in bytes, a plain number):
    /// the cheaper candidate is the smaller. Empty for words (congestion controls, qdiscs).
    std::vector<double> amounts;
    bool socket_buffer = false;  ///< a socket buffer's maximum or triple (rmem, wmem): counts against `buffer_budget`
    Location at;
};

struct TuneSpec {
    MetricRef goal;
    std::vector<TuneConstraint> constraints;
    std::vector<TuneKey> space;
    std::chrono::nanoseconds budget = std::chrono::minutes(20);  ///< measuring time, all stages
    double tolerance = 0.05;                                     ///< as good as the best: within this share of it
    /// The largest socket buffer a candidate may set, bytes (nullopt: no limit).
    std::optional<std::uint64_t> buffer_budget;
    Location at;  ///< the [tune] header
};

/// The most candidates a space may make (the product of its keys' value counts).
inline constexpr std::size_t kMaxTuneCandidates = 1'000;

/// Reads `tune` against `exp` (loaded: its trials' probes, its sweep keys). nullopt after an
/// error.
std::optional<TuneSpec> parse_tune(const config::Node& tune, const Experiment& exp, Diagnostics& diag);

/// `PROBE.METRIC` against the probes: the probe by name, the metric of its kind, also without
/// the kind's prefix (`rtt.p99` for `rtt.rtt_p99`). nullopt after an error at `at`.
std::optional<MetricRef> metric_ref(const std::string& text, const std::vector<probes::ProbeSpec>& probes,
                                    const Location& at, Diagnostics& diag);

}  // namespace wanlab::experiment
