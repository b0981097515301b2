#include "core/units.h"

#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

namespace wanlab::units {
namespace {

struct Unit {
    std::string_view suffix;
    long double factor;  // base units per one of this unit
};

struct Split {
    long double number;
    std::string_view number_text;
    std::string suffix;  // lower-cased
    std::string original_suffix;
};

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Splits "  1.5ms " into 1.5 and "ms". Accepts digits with at most one '.', no sign, no exponent.
std::variant<Split, UnitError> split_number(std::string_view text, std::string_view what) {
    auto trimmed = text;
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.front()))) trimmed.remove_prefix(1);
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) trimmed.remove_suffix(1);
    if (trimmed.empty()) return UnitError{fmt::format("empty {}", what)};
    if (trimmed.front() == '-')
        return UnitError{fmt::format("`{}` is negative: a {} cannot be below zero", text, what)};
    std::size_t i = 0;
    bool dot = false, digit = false;
    for (; i < trimmed.size(); ++i) {
        char c = trimmed[i];
        if (std::isdigit(static_cast<unsigned char>(c))) {
            digit = true;
        } else if (c == '.' && !dot) {
            dot = true;
        } else {
            break;
        }
    }
    if (!digit) return UnitError{fmt::format("`{}` is not a {}: it must start with a number", text, what)};
    Split s;
    s.number_text = trimmed.substr(0, i);
    std::string num(s.number_text);
    s.number = std::strtold(num.c_str(), nullptr);
    auto rest = trimmed.substr(i);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    s.original_suffix = std::string(rest);
    s.suffix = lower(rest);
    return s;
}

template <std::size_t N>
std::optional<long double> find_unit(const std::array<Unit, N>& table, const std::string& suffix) {
    for (const auto& u : table)
        if (u.suffix == suffix) return u.factor;
    return std::nullopt;
}

// Converts number*factor to an integer in base units, rejecting overflow and lost precision
// below one base unit only when the result would be non-zero-but-rounded-to-zero.
std::variant<std::uint64_t, UnitError> to_integer(long double value, std::string_view text, std::string_view what,
                                                  std::uint64_t max) {
    long double rounded = std::round(value);
    if (!std::isfinite(value) || rounded > static_cast<long double>(max))
        return UnitError{fmt::format("`{}` is too large for a {}", text, what)};
    if (value > 0 && rounded == 0)
        return UnitError{fmt::format("`{}` is below the smallest {} wanlab can express", text, what)};
    return static_cast<std::uint64_t>(rounded);
}

constexpr std::array<Unit, 9> kDurationUnits{{{"ns", 1},
                                              {"us", 1e3},
                                              {"usec", 1e3},
                                              {"ms", 1e6},
                                              {"msec", 1e6},
                                              {"s", 1e9},
                                              {"sec", 1e9},
                                              {"secs", 1e9},
                                              {"min", 60e9}}};

// n x 8 as the shortest decimal text: 10 -> "80", 1.5 -> "12".
std::string trim_8x(long double n) {
    std::string s = fmt::format("{:.6f}", static_cast<double>(n * 8));
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

}  // namespace

Parsed<std::chrono::nanoseconds> parse_duration(std::string_view text) {
    auto split = split_number(text, "duration");
    if (auto* e = std::get_if<UnitError>(&split)) return *e;
    const auto& s = std::get<Split>(split);
    if (s.suffix.empty()) {
        if (s.number == 0) return std::chrono::nanoseconds{0};
        return UnitError{fmt::format("`{}` needs a unit: write \"{}ms\", \"{}us\" or \"{}s\"", text, s.number_text,
                                     s.number_text, s.number_text)};
    }
    auto factor = find_unit(kDurationUnits, s.suffix);
    if (!factor)
        return UnitError{
            fmt::format("`{}` has an unknown duration unit `{}`: use us, ms or s", text, s.original_suffix)};
    auto ns = to_integer(s.number * *factor, text, "duration",
                         static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    if (auto* e = std::get_if<UnitError>(&ns)) return *e;
    return std::chrono::nanoseconds{static_cast<std::int64_t>(std::get<std::uint64_t>(ns))};
}

Parsed<std::uint64_t> parse_rate(std::string_view text) {
    static constexpr std::array<Unit, 10> kRateUnits{{{"bit", 1},
                                                      {"kbit", 1e3},
                                                      {"mbit", 1e6},
                                                      {"gbit", 1e9},
                                                      {"tbit", 1e12},
                                                      {"bit/s", 1},
                                                      {"kbit/s", 1e3},
                                                      {"mbit/s", 1e6},
                                                      {"gbit/s", 1e9},
                                                      {"tbit/s", 1e12}}};
    auto split = split_number(text, "rate");
    if (auto* e = std::get_if<UnitError>(&split)) return *e;
    const auto& s = std::get<Split>(split);
    if (s.suffix.empty() && s.number == 0) return std::uint64_t{0};
    if (s.suffix.empty())
        return UnitError{
            fmt::format("`{}` needs a unit: write \"{}mbit\" (bits per second) or "
                        "\"{}kbit\"",
                        text, s.number_text, s.number_text)};
    auto factor = find_unit(kRateUnits, s.suffix);
    if (!factor) {
        static constexpr std::array<std::string_view, 10> kAmbiguous{"bps", "kbps", "mbps", "gbps", "tbps",
                                                                     "b/s", "kb/s", "mb/s", "gb/s", "tb/s"};
        for (auto a : kAmbiguous) {
            if (s.suffix == a) {
                // Every ambiguous spelling ends in "bps" or "b/s": what precedes is the prefix.
                std::string prefix = s.suffix.substr(0, s.suffix.size() - 3);
                // A capital B says bytes: offer the bit rate that means, and the literal reading.
                if (s.original_suffix.find('B') != std::string::npos) {
                    static constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kNames{
                        {{"", ""}, {"k", "kilo"}, {"m", "mega"}, {"g", "giga"}, {"t", "tera"}}};
                    std::string_view word;
                    for (const auto& [p, w] : kNames)
                        if (p == prefix) word = w;
                    return UnitError{
                        fmt::format("`{}` is ambiguous: tc reads `{}` as bytes per second, many people as bits. Write "
                                    "\"{}{}bit\" for {} {}bytes per second, or \"{}{}bit\" for {} {}bits per second",
                                    text, s.original_suffix, trim_8x(s.number), prefix, s.number_text, word,
                                    s.number_text, prefix, s.number_text, word)};
                }
                return UnitError{
                    fmt::format("`{}` is ambiguous: tc reads `{}` as bytes per second, many people as bits. "
                                "Write \"{}{}bit\" for bits per second",
                                text, s.original_suffix, s.number_text, prefix)};
            }
        }
        return UnitError{
            fmt::format("`{}` has an unknown rate unit `{}`: use bit, kbit, mbit or gbit", text, s.original_suffix)};
    }
    return to_integer(s.number * *factor, text, "rate", std::numeric_limits<std::uint64_t>::max() / 2);
}

Parsed<std::uint64_t> parse_size(std::string_view text) {
    static constexpr std::array<Unit, 11> kSizeUnits{{{"", 1},
                                                      {"b", 1},
                                                      {"k", 1024.0L},
                                                      {"m", 1024.0L * 1024},
                                                      {"g", 1024.0L * 1024 * 1024},
                                                      {"kib", 1024.0L},
                                                      {"mib", 1024.0L * 1024},
                                                      {"gib", 1024.0L * 1024 * 1024},
                                                      {"t", 1024.0L * 1024 * 1024 * 1024},
                                                      {"tib", 1024.0L * 1024 * 1024 * 1024},
                                                      {"bytes", 1}}};
    auto split = split_number(text, "size");
    if (auto* e = std::get_if<UnitError>(&split)) return *e;
    const auto& s = std::get<Split>(split);
    auto factor = find_unit(kSizeUnits, s.suffix);
    if (!factor) {
        if (s.suffix == "kb" || s.suffix == "mb" || s.suffix == "gb" || s.suffix == "tb")
            return UnitError{
                fmt::format("`{}` is ambiguous (1000 or 1024? bytes or bits?): write \"{}{}\" or \"{}{}iB\" "
                            "(both 1024-based)",
                            text, s.number_text, std::string(1, static_cast<char>(std::toupper(s.suffix[0]))),
                            s.number_text, std::string(1, static_cast<char>(std::toupper(s.suffix[0]))))};
        return UnitError{
            fmt::format("`{}` has an unknown size unit `{}`: use bytes, K, M, G (1024-based) or KiB, MiB, GiB", text,
                        s.original_suffix)};
    }
    if (s.number != std::floor(s.number) && *factor == 1)
        return UnitError{fmt::format("`{}` is not a whole number of bytes", text)};
    return to_integer(s.number * *factor, text, "size", std::numeric_limits<std::int64_t>::max());
}

std::optional<std::vector<std::uint64_t>> parse_sizes(std::string_view text) {
    std::vector<std::uint64_t> out;
    std::size_t at = 0;
    while (at < text.size()) {
        auto end = text.find_first_of(" \t", at);
        auto part = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
        at = end == std::string_view::npos ? text.size() : end + 1;
        if (part.empty()) continue;
        auto size = parse_size(part);
        if (!ok(size)) return std::nullopt;
        out.push_back(std::get<std::uint64_t>(size));
    }
    if (out.empty()) return std::nullopt;
    return out;
}

namespace {
// "N%" with N at most `max_percent` -> N / 100; `example` shows the form in the message.
Parsed<double> percent_up_to(std::string_view text, long double max_percent, std::string_view example) {
    auto split = split_number(text, "percentage");
    if (auto* e = std::get_if<UnitError>(&split)) return *e;
    const auto& s = std::get<Split>(split);
    if (s.suffix != "%") {
        if (s.suffix.empty()) return UnitError{fmt::format("`{}` needs a `%`: write \"{}%\"", text, s.number_text)};
        return UnitError{fmt::format("`{}` is not a percentage: write a number and `%`, such as {}", text, example)};
    }
    if (s.number > max_percent)
        return UnitError{fmt::format("`{}` is above {}%", text, static_cast<double>(max_percent))};
    return static_cast<double>(s.number / 100.0L);
}
}  // namespace

Parsed<double> parse_percent(std::string_view text) { return percent_up_to(text, 100, "\"1%\""); }

Parsed<double> parse_gain(std::string_view text) {
    return percent_up_to(text, 1'000'000, "\"60%\" (or \"300%\" for four times the baseline)");
}

namespace {
// Prints value/unit with up to 6 significant decimals, trimming zeros: 1.5, 20, 0.125.
std::string trim_number(long double v) {
    std::string s = fmt::format("{:.6f}", static_cast<double>(v));
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}
}  // namespace

std::string format_duration(std::chrono::nanoseconds d) {
    auto ns = d.count();
    if (ns == 0) return "0ms";
    if (ns % 1'000'000'000 == 0) return fmt::format("{}s", ns / 1'000'000'000);
    if (ns >= 1'000'000) return trim_number(ns / 1e6L) + "ms";
    if (ns >= 1'000) return trim_number(ns / 1e3L) + "us";
    return fmt::format("{}ns", ns);
}

std::string format_rate(std::uint64_t bps) {
    if (bps >= 1'000'000'000 && bps % 1'000'000 == 0) return trim_number(bps / 1e9L) + "gbit";
    if (bps >= 1'000'000 && bps % 1'000 == 0) return trim_number(bps / 1e6L) + "mbit";
    if (bps >= 1'000) return trim_number(bps / 1e3L) + "kbit";
    return fmt::format("{}bit", bps);
}

std::string format_size(std::uint64_t bytes) {
    constexpr std::uint64_t K = 1024, M = K * K, G = M * K;
    if (bytes >= G && bytes % (G / 1024) == 0) return trim_number(bytes / static_cast<long double>(G)) + "GiB";
    if (bytes >= M && bytes % (M / 1024) == 0) return trim_number(bytes / static_cast<long double>(M)) + "MiB";
    if (bytes >= K && bytes % K == 0) return fmt::format("{}KiB", bytes / K);
    return fmt::format("{}", bytes);
}

std::string format_percent(double fraction) { return trim_number(fraction * 100.0L) + "%"; }

}  // namespace wanlab::units
