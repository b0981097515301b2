#include <catch2/catch.hpp>

#include <chrono>
#include <variant>

#include "core/units.h"

using namespace wanlab::units;
using namespace std::chrono_literals;

namespace {
template <class T>
T value(const Parsed<T>& p) {
    if (auto* e = std::get_if<UnitError>(&p)) FAIL("unexpected error: " << e->message);
    return std::get<T>(p);
}
template <class T>
std::string error(const Parsed<T>& p) {
    if (auto* e = std::get_if<UnitError>(&p)) return e->message;
    FAIL("expected an error");
    return {};
}
}  // namespace

TEST_CASE("durations accept us ms s and tc's long spellings", "[units]") {
    CHECK(value(parse_duration("20ms")) == 20ms);
    CHECK(value(parse_duration("1.5ms")) == 1500us);
    CHECK(value(parse_duration("250us")) == 250us);
    CHECK(value(parse_duration("2s")) == 2s);
    CHECK(value(parse_duration("100usec")) == 100us);
    CHECK(value(parse_duration("3msec")) == 3ms);
    CHECK(value(parse_duration("1sec")) == 1s);
    CHECK(value(parse_duration("7ns")) == 7ns);
    CHECK(value(parse_duration(" 20ms ")) == 20ms);
    CHECK(value(parse_duration("0")) == 0ns);
    CHECK(value(parse_duration("0.000001ms")) == 1ns);
    CHECK(value(parse_duration("2min")) == 120s);
}

TEST_CASE("durations reject a missing unit, unknown units, negatives and overflow", "[units]") {
    CHECK(error(parse_duration("20")) == "`20` needs a unit: write \"20ms\", \"20us\" or \"20s\"");
    CHECK(error(parse_duration("20 parsecs")) ==
          "`20 parsecs` has an unknown duration unit `parsecs`: use us, ms or s");
    CHECK(error(parse_duration("-5ms")) == "`-5ms` is negative: a duration cannot be below zero");
    CHECK(error(parse_duration("ms")) == "`ms` is not a duration: it must start with a number");
    CHECK(error(parse_duration("")) == "empty duration");
    CHECK(error(parse_duration("99999999999999s")) == "`99999999999999s` is too large for a duration");
    CHECK(error(parse_duration("0.1ns")) == "`0.1ns` is below the smallest duration wanlab can express");
    CHECK(error(parse_duration("1.2.3ms")) == "`1.2.3ms` has an unknown duration unit `.3ms`: use us, ms or s");
}

TEST_CASE("rates are bits per second with SI multipliers, as tc reads them", "[units]") {
    CHECK(value(parse_rate("100mbit")) == 100'000'000u);
    CHECK(value(parse_rate("1gbit")) == 1'000'000'000u);
    CHECK(value(parse_rate("1.5Gbit")) == 1'500'000'000u);
    CHECK(value(parse_rate("64kbit")) == 64'000u);
    CHECK(value(parse_rate("800bit")) == 800u);
    CHECK(value(parse_rate("10mbit/s")) == 10'000'000u);
    CHECK(value(parse_rate("2tbit")) == 2'000'000'000'000u);
    CHECK(value(parse_rate("0")) == 0u);
}

TEST_CASE("rates reject the ambiguous bps spellings and say what to write", "[units]") {
    CHECK(error(parse_rate("10mbps")) ==
          "`10mbps` is ambiguous: tc reads `mbps` as bytes per second, many people as bits. Write \"10mbit\" for "
          "bits per second");
    CHECK(error(parse_rate("10MBps")) ==
          "`10MBps` is ambiguous: tc reads `MBps` as bytes per second, many people as bits. Write \"80mbit\" for 10 "
          "megabytes per second, or \"10mbit\" for 10 megabits per second");
    CHECK(error(parse_rate("1.5GBps")).find("Write \"12gbit\" for 1.5 gigabytes per second") != std::string::npos);
    CHECK(error(parse_rate("5kbps")).find("Write \"5kbit\"") != std::string::npos);
    CHECK(error(parse_rate("5gb/s")).find("Write \"5gbit\"") != std::string::npos);
    CHECK(error(parse_rate("100")) == "`100` needs a unit: write \"100mbit\" (bits per second) or \"100kbit\"");
    CHECK(error(parse_rate("3 furlongs")) ==
          "`3 furlongs` has an unknown rate unit `furlongs`: use bit, kbit, mbit or gbit");
    CHECK(error(parse_rate("-1mbit")) == "`-1mbit` is negative: a rate cannot be below zero");
    CHECK(error(parse_rate("99999999999tbit")) == "`99999999999tbit` is too large for a rate");
}

TEST_CASE("sizes are bytes with 1024-based K M G and KiB MiB GiB", "[units]") {
    CHECK(value(parse_size("4096")) == 4096u);
    CHECK(value(parse_size("16K")) == 16u * 1024);
    CHECK(value(parse_size("16M")) == 16u * 1024 * 1024);
    CHECK(value(parse_size("1G")) == 1024u * 1024 * 1024);
    CHECK(value(parse_size("64KiB")) == 64u * 1024);
    CHECK(value(parse_size("16MiB")) == 16u * 1024 * 1024);
    CHECK(value(parse_size("2GiB")) == 2ull * 1024 * 1024 * 1024);
    CHECK(value(parse_size("1500b")) == 1500u);
    CHECK(value(parse_size("1.5K")) == 1536u);
    CHECK(value(parse_size("0")) == 0u);
}

TEST_CASE("sizes reject ambiguous MB, fractions of a byte, unknown units and overflow", "[units]") {
    CHECK(error(parse_size("16MB")) ==
          "`16MB` is ambiguous (1000 or 1024? bytes or bits?): write \"16M\" or \"16MiB\" "
          "(both 1024-based)");
    CHECK(error(parse_size("1.5")) == "`1.5` is not a whole number of bytes");
    CHECK(error(parse_size("3 pages")) ==
          "`3 pages` has an unknown size unit `pages`: use bytes, K, M, G (1024-based) or KiB, MiB, GiB");
    CHECK(error(parse_size("99999999999G")) == "`99999999999G` is too large for a size");
    CHECK(error(parse_size("-1K")) == "`-1K` is negative: a size cannot be below zero");
}

TEST_CASE("percentages become fractions and stay within 0-100%", "[units]") {
    CHECK(value(parse_percent("1%")) == Approx(0.01));
    CHECK(value(parse_percent("0.1%")) == Approx(0.001));
    CHECK(value(parse_percent("100%")) == Approx(1.0));
    CHECK(value(parse_percent("0%")) == 0.0);
    CHECK(error(parse_percent("5")) == "`5` needs a `%`: write \"5%\"");
    CHECK(error(parse_percent("101%")) == "`101%` is above 100%");
    // A gain may exceed 100%: "300%" is four times the baseline.
    CHECK(std::get<double>(parse_gain("300%")) == Approx(3.0));
    CHECK(std::get<double>(parse_gain("60%")) == Approx(0.6));
    CHECK(error(parse_gain("3")) == "`3` needs a `%`: write \"3%\"");
    CHECK(error(parse_gain("2000000%")) == "`2000000%` is above 1000000%");
    CHECK(error(parse_percent("-1%")) == "`-1%` is negative: a percentage cannot be below zero");
    CHECK(error(parse_percent("5 percent")) ==
          "`5 percent` is not a percentage: write a number and `%`, such as \"1%\"");
}

TEST_CASE("formatters print the shortest form tc accepts", "[units]") {
    CHECK(format_duration(20ms) == "20ms");
    CHECK(format_duration(1500us) == "1.5ms");
    CHECK(format_duration(250us) == "250us");
    CHECK(format_duration(2s) == "2s");
    CHECK(format_duration(0ns) == "0ms");
    CHECK(format_rate(100'000'000) == "100mbit");
    CHECK(format_rate(1'500'000'000) == "1.5gbit");
    CHECK(format_rate(64'000) == "64kbit");
    CHECK(format_rate(800) == "800bit");
    CHECK(format_size(16u * 1024 * 1024) == "16MiB");
    CHECK(format_size(4096) == "4KiB");
    CHECK(format_size(1500) == "1500");
    CHECK(format_percent(0.01) == "1%");
    CHECK(format_percent(0.001) == "0.1%");
}

TEST_CASE("formatted values parse back to the same value", "[units]") {
    for (std::chrono::nanoseconds d : {1ns, 999ns, 1000ns, 1500000ns, 20000000ns, 2000000000ns, 123456789ns})
        CHECK(value(parse_duration(format_duration(d))) == d);
    for (std::uint64_t r : {1ull, 999ull, 64'000ull, 100'000'000ull, 1'500'000'000ull, 40'000'000'000ull})
        CHECK(value(parse_rate(format_rate(r))) == r);
    for (std::uint64_t s : {0ull, 1ull, 1500ull, 4096ull, 16ull << 20, 3ull << 30})
        CHECK(value(parse_size(format_size(s))) == s);
}

TEST_CASE("a list of sizes as tcp_rmem is written: spaces or tabs between, each a size or nothing", "[units]") {
    CHECK(*parse_sizes("4096 131072 6291456") == std::vector<std::uint64_t>{4096, 131072, 6291456});
    CHECK(*parse_sizes("4096\t131072\t16M") == std::vector<std::uint64_t>{4096, 131072, 16u << 20});
    CHECK(*parse_sizes("4MiB") == std::vector<std::uint64_t>{4u << 20});
    CHECK_FALSE(parse_sizes("cubic"));
    CHECK_FALSE(parse_sizes("4096 bbr"));
    CHECK_FALSE(parse_sizes("  "));
}
