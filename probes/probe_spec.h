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
#include <set>
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

/// The distribution a kind records per answered probe or per exchange (ProbeResult::samples),
/// and what a chart of it calls one value and many.
struct SampleTraits {
    const char* name;      ///< the samples' key: "rtt", "latency"
    const char* singular;  ///< "round-trip time", "latency"
    const char* plural;    ///< "round-trip times", "latencies"
};

/// How a probe of a kind measures against a remote target (host mode: a machine wanlab does
/// not run on, where only the target's own servers listen). remote_unsupported() says why not.
enum class RemoteTarget {
    own,            ///< it goes where it goes (the user's command; a group): nothing to refuse
    external_tool,  ///< with an external tool (iperf3 -s on the target), not the built-in receiver
    never,          ///< needs wanlab's own server there
    url,            ///< with a `url` to load
    protocol,       ///< by what it sends: ICMP, or TCP to a port the target listens on; not UDP echo
};

/// What the rest of wanlab asks of a probe kind, answered once in the kind's row beside its
/// options and metrics, so that no code outside probes/ compares kind names and a new kind
/// is one row. Defaults answer "no" (and `remote` own: nothing to refuse); traits_of() gives
/// an unknown kind all defaults.
struct ProbeTraits {
    /// The metric a probe is judged by first: the report's first column for it, the one
    /// adaptive repeats settle. One of the kind's metrics.
    const char* main_metric = nullptr;
    /// The report's default rows for a probe of the kind (the before/after table, compare), in
    /// order; each one of the kind's metrics.
    std::vector<const char*> headline = {};
    /// The time series the HTML report charts per repeat, in order.
    std::vector<const char*> charted_series = {};
    /// Charts every series its records carry instead (a group: its members' and the queues').
    bool charts_recorded_series = false;
    /// The series a probe group's record carries of a member of this kind, on the group's clock.
    std::vector<const char*> group_series = {};
    /// The latency distribution it records, charted per trial; nullptr: none.
    const SampleTraits* samples = nullptr;
    /// Has a far side wanlab may start (a server, receiver, listener or echo server, as its
    /// options choose), which a lab mode must be able to place; false: the user's command.
    bool has_server_half = false;
    /// How it measures against a remote target (host mode); remote_unsupported() words it.
    RemoteTarget remote = RemoteTarget::own;
    /// Runs on the machine wanlab runs on, never on a client machine of its own (hosts mode).
    bool runs_here_only = false;
    /// Measures the user's own argv: the program it runs is `command`'s first word, not a
    /// `tool`, and its own metrics are read from the output (ProbeSpec::outputs, noted as
    /// kOutputMetricNote in the record).
    bool user_command = false;
    /// Carries state a warm-up settles before it measures (a congestion window; rtt and udp
    /// carry none, and a command's warm-up is the user's, with no duration to shorten).
    bool warms_up = false;
    /// A bulk TCP transfer: it loads the path (what else in its group measures "under load"),
    /// its goodput is bound by socket buffers, the link's rate and loss, and it asks for
    /// socket buffers (`sndbuf`, `rcvbuf`, iperf3 -w).
    bool bulk_tcp = false;
    /// Measures the round-trip time with small probes of its own, so beside a group's bulk
    /// transfers it measures the loaded RTT.
    bool measures_rtt = false;
    /// A repeat is `count` probes at `interval`; in a group, the count stretches to the group's
    /// duration unless the file gives it.
    bool counted = false;
    /// A request/response kind: what one exchange is called ("transaction", "request") and
    /// the metric that counts them ("transactions", "requests"); nullptr: not one.
    const char* exchange = nullptr;
    const char* exchanges_metric = nullptr;
};

struct ProbeKind {
    const char* name;
    const char* summary;
    std::vector<OptionSpec> options;
    std::vector<MetricSpec> metrics;
    ProbeTraits traits;
};

const std::vector<ProbeKind>& probe_kinds();
/// A probe kind by name, or the group's pseudo-kind for "group" (group_kind()); nullptr else.
const ProbeKind* find_kind(std::string_view name);
/// What a probe group's own record reports (probes/group.h): a kind no [[probe]] can name,
/// with metrics and no options.
const ProbeKind& group_kind();
const MetricSpec* find_metric(const ProbeKind& kind, std::string_view metric);
/// The traits of `kind` (a [[probe]] kind, or "group"); for any other name (a record of a
/// kind this wanlab does not know) a row of defaults, which answers "no" to every question.
const ProbeTraits& traits_of(std::string_view kind);
/// The metric a probe of `kind` is judged by first (the report's first column for it, the
/// one adaptive repeats settle): "throughput", "rtt_avg", "transactions_per_second",
/// "requests_per_second", "wall_time", "fairness" for a group; nullptr for an unknown kind.
const char* main_metric(std::string_view kind);

/// A resolved option value in base units.
using OptionValue = std::variant<std::int64_t, double, bool, std::string>;

/// A metric a command probe reads from what its command printed: the named group of a
/// regex, or a JSON pointer into its stdout, times `scale` into base units.
struct OutputMetric {
    std::string name;
    std::string regex;              ///< PCRE2; the group named `value`, or its only named group
    std::string group;              ///< that group's name
    std::string json_pointer;       ///< or this, into stdout parsed as JSON ("/end/sum/bits_per_second")
    std::string stream = "stdout";  ///< stdout or stderr (a regex only)
    Unit unit = Unit::count;
    double scale = 1;  ///< "ms" -> 1e-3 (to seconds), "Mbit/s" -> 1e6, "%" -> 0.01
    bool higher_is_better = false;
    std::string unit_text;  ///< as written ("ms"), for messages
};

struct ProbeSpec {
    std::string name;  ///< unique in the experiment; defaults to the kind
    std::string kind;
    /// Every option of the kind, defaults filled in. Durations are int64 nanoseconds, sizes
    /// bytes, rates bit/s (all std::int64_t); percents double fractions.
    std::map<std::string, OptionValue> options;
    std::vector<std::string> command;   ///< kind "command": its argv ({server}, {client} filled at run time)
    std::vector<OutputMetric> outputs;  ///< kind "command": metrics read from its output
    Location at;                        ///< the [[probe]] header
    std::set<std::string> written;      ///< the options the file gave (the others are defaults)
};

/// The unit words a command probe's metric may give: "s", "ms", "us", "ns", "bit/s",
/// "kbit/s", "Mbit/s", "Gbit/s", "bytes", "KiB", "MiB", "GiB", "1/s", "count", "fraction", "%".
/// Sets the unit and the scale to base units; false for a word it does not know.
bool output_unit(std::string_view word, Unit& unit, double& scale);
/// unit_name()'s inverse; false for a name it did not make.
bool unit_of_name(std::string_view name, Unit& unit);

/// Reads one [[probe]] table. `default_duration` fills "@run.duration" defaults.
ProbeSpec parse_probe(const config::Node& table, std::size_t index, std::chrono::nanoseconds default_duration,
                      Diagnostics& diag);

/// Why `spec`, as it came from elsewhere (an agent's request), is not one parse_probe() could
/// have made: an unknown kind, an option the kind lacks or misses, of another type or outside
/// the range the file allows; "" when it is. The message names the option.
std::string spec_problem(const ProbeSpec& spec);

/// The placeholders a probe's `url` may hold: the lab's server and client addresses.
inline const std::vector<std::string> kUrlPlaceholders{"server", "client"};

/// The option as an experiment file would write it ("10s", "16MiB", "true", "upload").
std::string format_option(const ProbeKind& kind, const std::string& option, const OptionValue& v);
const char* unit_name(Unit u);  ///< "bit/s", "s", ...

/// The seconds a measurement of `spec` is planned to take: its `duration`, or `count` probes
/// at their `interval` when that is shorter.
double planned_seconds(const ProbeSpec& spec);

}  // namespace wanlab::probes
