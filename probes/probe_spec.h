// What a probe is, as the experiment file sees it: a kind, its options and its metrics.
//
// Contract: each probe kind declares its options (type, default, range) and the metrics it
// reports (unit, which direction is better) in one table (probe_kinds()); parse_probe()
// reads a [[probe]] table strictly against that declaration, so every kind validates its own
// options and an unknown option gets a did-you-mean from that kind's options. Values are
// stored in base units (nanoseconds, bytes, bit/s, fractions). Measuring is not done here.
// Pure; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"

namespace wanlab::probes {

enum class OptionType { duration, integer, size, rate, percent, boolean, choice, string };

/// One option of a probe kind. `default_value` is written as in an experiment file
/// ("10s", "4", "true", "\"upload\""); "@run.duration" takes [run].duration.
struct OptionSpec {
    const char* name;
    OptionType type;
    const char* default_value;
    const char* help;
    std::int64_t min = 0;  ///< integer options; duration options in ns (max 0: kMaxDuration)
    std::int64_t max = 0;
    std::vector<std::string> choices = {};  ///< choice options
};

enum class Unit { bits_per_second, seconds, fraction, count, per_second, bytes };

struct MetricSpec {
    const char* name;
    Unit unit;
    bool higher_is_better;
    const char* help;
};

struct ProbeKind {
    const char* name;
    const char* summary;
    std::vector<OptionSpec> options;
    std::vector<MetricSpec> metrics;
};

const std::vector<ProbeKind>& probe_kinds();
const ProbeKind* find_kind(std::string_view name);
const MetricSpec* find_metric(const ProbeKind& kind, std::string_view metric);

/// A resolved option value in base units.
using OptionValue = std::variant<std::int64_t, double, bool, std::string>;

struct ProbeSpec {
    std::string name;  ///< unique in the experiment; defaults to the kind
    std::string kind;
    /// Every option of the kind, defaults filled in. Durations are int64 nanoseconds, sizes
    /// bytes, rates bit/s (all std::int64_t); percents double fractions.
    std::map<std::string, OptionValue> options;
    Location at;  ///< the [[probe]] header
};

/// Reads one [[probe]] table. `default_duration` fills "@run.duration" defaults.
ProbeSpec parse_probe(const config::Node& table, std::size_t index, std::chrono::nanoseconds default_duration,
                      Diagnostics& diag);

/// The placeholders a probe's `url` may hold: the lab's server and client addresses.
inline const std::vector<std::string> kUrlPlaceholders{"server", "client"};

/// The option as an experiment file would write it ("10s", "16MiB", "true", "upload").
std::string format_option(const ProbeKind& kind, const std::string& option, const OptionValue& v);
const char* unit_name(Unit u);  ///< "bit/s", "s", ...

}  // namespace wanlab::probes
