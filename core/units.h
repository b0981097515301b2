// Units of the experiment format: durations, rates, sizes and percentages.
//
// Contract: every parser takes the text as the user wrote it ("20ms", "100mbit",
// "16MiB", "1.5%") and returns the value in base units (nanoseconds, bit/s, bytes,
// fraction 0..1) or a UnitError whose message says what to write instead. Overflow,
// negative values and ambiguous units (`mbps`, which tc reads as megaBYTES per second)
// are errors, never silently clamped. The formatters are the inverse for human output and
// print the shortest exact form tc would accept. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace wanlab::units {

/// Why a unit string was rejected; `message` is a complete sentence fragment such as
/// "`20` needs a unit: write \"20ms\"".
struct UnitError {
    std::string message;
};

template <class T>
using Parsed = std::variant<T, UnitError>;

/// "20ms", "1.5s", "500us", "0" -> nanoseconds. Units: ns us ms s (tc also accepts
/// usec/msec/sec/secs, and so do we).
Parsed<std::chrono::nanoseconds> parse_duration(std::string_view text);

/// "100mbit", "1gbit/s", "64kbit" -> bits per second, SI multipliers (1000) as in tc.
/// Rejects bps/kbps/mbps/gbps and their byte spellings with a message naming the fix.
Parsed<std::uint64_t> parse_rate(std::string_view text);

/// "4096", "16K", "16M", "1G" (1024-based, as tc and sysctl users mean them), "64KiB",
/// "16MiB", "1GiB", "1500b" -> bytes.
Parsed<std::uint64_t> parse_size(std::string_view text);

/// Sizes separated by spaces or tabs, as tcp_rmem is written ("4096 131072 6291456", "16M")
/// -> bytes each; nullopt when a part is not a size, or there is none.
std::optional<std::vector<std::uint64_t>> parse_sizes(std::string_view text);
/// "1%", "0.1%", "100%" -> fraction in [0, 1].
Parsed<double> parse_percent(std::string_view text);
/// A relative change: "60%", "300%" (four times) -> fraction in [0, 10000]; not above 1,000,000%.
Parsed<double> parse_gain(std::string_view text);

/// Human forms, for tables and tc command lines.
std::string format_duration(std::chrono::nanoseconds d);  ///< "20ms", "1.5ms", "250us"
std::string format_rate(std::uint64_t bits_per_second);   ///< "100mbit", "1.5gbit", "800bit"
std::string format_size(std::uint64_t bytes);             ///< "16MiB", "4096", "1.5KiB"
std::string format_percent(double fraction);              ///< "1%", "0.1%", "33.333333%"

template <class T>
bool ok(const Parsed<T>& p) {
    return std::holds_alternative<T>(p);
}

}  // namespace wanlab::units
