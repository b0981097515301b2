// A link that follows a recorded trace: mahimahi's delivery-opportunity files and CSV series
// of rate, delay, jitter and loss, read into rows of conditions over time.
//
// Contract: parse_trace() reads a trace's text; read_trace() a file of at most
// kMaxTraceBytes. The format is told by the content: a file of whole numbers, one a line, is
// mahimahi's (each line a 1500-byte delivery opportunity at that millisecond; the trace wraps
// at its last one), counted into rates over `window`; anything with a header row is CSV
// (`time` first, then any of `rate`, `delay`, `jitter`, `loss`, each value with its unit or
// in the unit its header names: `time_s`, `rate_mbit`, `delay_ms`, `loss_pct`). Every error is
// located at the file's line and column. Pure apart from reading the file; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostic.h"

namespace wanlab::netem {

/// The largest trace file read: a 13-minute mahimahi trace of a 60 Mbit/s link is about 35 MiB.
inline constexpr std::uint64_t kMaxTraceBytes = 64ull << 20;
/// What one mahimahi delivery opportunity carries: one 1500-byte packet (its README), here a
/// 1514-byte frame, as wanlab's rates count Ethernet frames as tc's do. A trace's rates are in
/// those frames: a window of N opportunities is N x 1514 bytes.
inline constexpr std::uint64_t kMahimahiFrameBytes = 1514;

/// The conditions from `at` on; a column the row leaves empty keeps the row before's value.
struct TraceRow {
    std::chrono::nanoseconds at{0};
    std::optional<std::uint64_t> rate_bps;
    std::optional<std::chrono::nanoseconds> delay, jitter;
    std::optional<double> loss;  ///< a fraction

    bool operator==(const TraceRow&) const = default;
};

/// One column over the whole trace, weighted by how long each value holds, in base units
/// (bit/s, seconds, a fraction).
struct TraceColumn {
    std::string name;  ///< rate, delay, jitter, loss
    double mean = 0, min = 0, max = 0;

    bool operator==(const TraceColumn&) const = default;
};

struct Trace {
    enum class Format { mahimahi, csv };
    Format format = Format::mahimahi;
    std::string file;                    ///< as the experiment names it
    std::chrono::nanoseconds period{0};  ///< its length: it starts over here
    std::chrono::nanoseconds window{0};  ///< mahimahi: the window opportunities are counted over
    std::vector<TraceRow> rows;          ///< in time order, each changing something
    std::size_t entries = 0;             ///< opportunities (mahimahi) or data rows (CSV)
    std::size_t raised = 0;              ///< mahimahi windows without an opportunity (see below)
    std::vector<TraceColumn> columns;    ///< of the rows as read (before the floor below)

    bool operator==(const Trace&) const = default;
};

/// A shaper cannot pass nothing at a rate (tbf and htb take no rate of 0): a mahimahi window
/// with no delivery opportunity gets one packet's worth instead, the trace's own granularity.
/// Trace::raised counts them; the plan says so.
std::uint64_t floor_rate(std::chrono::nanoseconds window);

/// Reads a trace's text. `name` is the file as messages name it. nullopt after an error.
std::optional<Trace> parse_trace(std::string_view text, const std::string& name, std::chrono::nanoseconds window,
                                 Diagnostics& diag);

/// Reads `path` (at most kMaxTraceBytes); `at` locates the key that named it, for errors about
/// the file as a whole (missing, unreadable, too large). Lines are located in the file itself.
std::optional<Trace> read_trace(const std::string& path, const std::string& name, std::chrono::nanoseconds window,
                                const Location& at, Diagnostics& diag);

/// The traces one load of an experiment has read, by file and window: every trial that names
/// the same trace shares one reading (a sweep of 300 points reads its trace once), and a trace
/// that cannot be used is reported once, where the first trial names it. One per load; not
/// thread-safe.
class TraceCache {
public:
    /// read_trace() the first time a path and window are asked for, the same answer after;
    /// nullptr when the trace cannot be used (reported the first time).
    const Trace* read(const std::string& path, const std::string& name, std::chrono::nanoseconds window,
                      const Location& at, Diagnostics& diag);

private:
    std::map<std::pair<std::string, std::chrono::nanoseconds::rep>, std::optional<Trace>> read_;
};

/// "mahimahi, 475s (starts over), 4750 windows of 100ms: rate mean 12.8mbit, min 0, max 59.5mbit"
/// and the like, for the plan.
std::string describe(const Trace& t);

}  // namespace wanlab::netem
