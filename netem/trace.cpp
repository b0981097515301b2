#include "netem/trace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "core/units.h"

namespace wanlab::netem {
namespace {

using std::chrono::nanoseconds;

// The most windows (mahimahi) or rows (CSV) a trace may hold: each becomes a change of the
// link (netem/schedule.h's kMaxScheduleSteps).
constexpr std::size_t kMaxTraceRows = 10'000;

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// Lines with their numbers, without the line end (\n or \r\n).
class Lines {
public:
    explicit Lines(std::string_view text) : text_(text) {}
    bool next(std::string_view& line) {
        if (pos_ >= text_.size()) return false;
        auto end = text_.find('\n', pos_);
        if (end == std::string_view::npos) end = text_.size();
        line = text_.substr(pos_, end - pos_);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        pos_ = end + 1;
        ++number_;
        return true;
    }
    std::uint32_t number() const { return number_; }
    // The 1-based column of `part`, a view into the current line.
    std::uint32_t column(std::string_view line, std::string_view part) const {
        return static_cast<std::uint32_t>(part.data() - line.data()) + 1;
    }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
    std::uint32_t number_ = 0;
};

Location where(const std::string& name, std::uint32_t line, std::uint32_t column, std::size_t width = 0) {
    Location l;
    l.file = name;
    l.line = line;
    l.column = column;
    if (width > 1) l.end_column = column + static_cast<std::uint32_t>(width);
    return l;
}

bool is_comment_or_blank(std::string_view line) {
    auto t = trim(line);
    return t.empty() || t.front() == '#';
}

double seconds_of(nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

// --- mahimahi ------------------------------------------------------------------------------

std::optional<Trace> parse_mahimahi(std::string_view text, const std::string& name, nanoseconds window,
                                    Diagnostics& diag) {
    Trace t;
    t.format = Trace::Format::mahimahi;
    t.file = name;
    t.window = window;
    std::vector<std::uint64_t> counts;  // opportunities per window
    Lines lines(text);
    std::string_view line;
    std::uint64_t last = 0;
    const auto w = static_cast<std::uint64_t>(window.count());
    while (lines.next(line)) {
        auto v = trim(line);
        if (v.empty()) continue;
        std::uint64_t ms = 0;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
        if (ec != std::errc{} || end != v.data() + v.size() || ms > 100'000'000'000ull) {
            auto bad = ec == std::errc{} && end != v.data() + v.size() ? v.substr(end - v.data()) : v;
            diag.error(where(name, lines.number(), lines.column(line, bad), bad.size()),
                       fmt::format("`{}` is not a millisecond timestamp", v),
                       "a mahimahi trace holds one whole number a line: the millisecond of a 1500-byte delivery "
                       "opportunity (a CSV trace starts with a header row: time,rate,...)");
            return std::nullopt;
        }
        if (ms < last) {
            diag.error(
                where(name, lines.number(), lines.column(line, v), v.size()),
                fmt::format("the timestamp {} comes after {}: a mahimahi trace's timestamps never go back", ms, last));
            return std::nullopt;
        }
        last = ms;
        // Opportunity at millisecond `ms` counts in the window (k w, (k+1) w]; 0 in the first.
        std::uint64_t k = ms == 0 ? 0 : (ms * 1'000'000 - 1) / w;
        if (k >= kMaxTraceRows) {
            diag.error(
                where(name, lines.number(), lines.column(line, v), v.size()),
                fmt::format("the trace runs past {} windows of {} ({})", kMaxTraceRows, units::format_duration(window),
                            units::format_duration(window * static_cast<std::int64_t>(kMaxTraceRows))),
                "widen `trace_window`, or cut the trace");
            return std::nullopt;
        }
        if (counts.size() <= k) counts.resize(k + 1, 0);
        ++counts[k];
        ++t.entries;
    }
    if (t.entries == 0 || last == 0) {
        diag.error(where(name, 1, 1),
                   t.entries == 0 ? "the trace holds no delivery opportunity"
                                  : "the trace's last timestamp is 0: a mahimahi trace lasts until its last one",
                   "a mahimahi trace holds one millisecond timestamp a line, in order; a file holding `1` alone is a "
                   "constant 12 Mbit/s");
        return std::nullopt;
    }
    t.period = std::chrono::milliseconds(last);
    const std::uint64_t period = static_cast<std::uint64_t>(t.period.count());
    const std::uint64_t n = (period + w - 1) / w;
    counts.resize(n, 0);
    TraceColumn rate{"rate", 0, 0, 0};
    rate.min = 1e300;
    for (std::uint64_t k = 0; k < n; ++k) {
        const std::uint64_t len = std::min(period, (k + 1) * w) - k * w;
        const double bps = static_cast<double>(counts[k] * kMahimahiFrameBytes * 8) / (static_cast<double>(len) / 1e9);
        rate.min = std::min(rate.min, bps);
        rate.max = std::max(rate.max, bps);
        std::uint64_t r = static_cast<std::uint64_t>(std::llround(bps));
        if (counts[k] == 0) {
            ++t.raised;
            r = floor_rate(window);
        }
        if (!t.rows.empty() && t.rows.back().rate_bps == r) continue;
        TraceRow row;
        row.at = nanoseconds(static_cast<std::int64_t>(k * w));
        row.rate_bps = r;
        t.rows.push_back(row);
    }
    rate.mean = static_cast<double>(t.entries * kMahimahiFrameBytes * 8) / seconds_of(t.period);
    t.columns.push_back(rate);
    return t;
}

// --- CSV -----------------------------------------------------------------------------------

enum class Column { time, rate, delay, jitter, loss };

struct Header {
    Column column;
    std::string name;  // as written
    double scale = 0;  // a bare number times this is the base unit; 0: the cell needs a unit
};

std::optional<Header> read_header(std::string_view cell, Location at, Diagnostics& diag) {
    static const std::map<std::string, Column, std::less<>> kNames{{"time", Column::time},
                                                                   {"rate", Column::rate},
                                                                   {"delay", Column::delay},
                                                                   {"jitter", Column::jitter},
                                                                   {"loss", Column::loss}};
    static const std::map<std::string, double, std::less<>> kTimeUnits{
        {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
    static const std::map<std::string, double, std::less<>> kRateUnits{
        {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}};
    std::string lower(cell);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string base = lower, unit;
    if (auto us = lower.find('_'); us != std::string::npos) {
        base = lower.substr(0, us);
        unit = lower.substr(us + 1);
    }
    auto it = kNames.find(base);
    if (it == kNames.end()) {
        std::vector<std::string> names;
        for (const auto& [k, v] : kNames) names.push_back(k);
        auto near = did_you_mean(base, names);
        diag.error(at, fmt::format("unknown column `{}` in the trace's header", cell),
                   near.empty() ? "the columns are time (first), then any of rate, delay, jitter, loss"
                                : fmt::format("did you mean `{}`?", near));
        return std::nullopt;
    }
    Header h{it->second, std::string(cell), 0};
    if (unit.empty()) return h;
    bool ok = false;
    switch (h.column) {
        case Column::time:
        case Column::delay:
        case Column::jitter:
            if (auto u = kTimeUnits.find(unit); u != kTimeUnits.end()) h.scale = u->second * 1e9, ok = true;
            break;
        case Column::rate:
            if (auto u = kRateUnits.find(unit); u != kRateUnits.end()) h.scale = u->second, ok = true;
            break;
        case Column::loss:
            if (unit == "pct") h.scale = 0.01, ok = true;
            break;
    }
    if (!ok) {
        const char* units = h.column == Column::rate   ? "bit, kbit, mbit, gbit (per second)"
                            : h.column == Column::loss ? "pct"
                                                       : "ns, us, ms, s";
        diag.error(at, fmt::format("unknown unit `{}` in the column `{}`", unit, cell),
                   fmt::format("{}'s units: {}", base, units));
        return std::nullopt;
    }
    return h;
}

// One cell: with its unit ("20mbit", "40ms", "1%") or a bare number in the header's unit.
// Returns false after an error.
bool read_cell(std::string_view cell, const Header& h, Location at, TraceRow& row, Diagnostics& diag) {
    const bool bare = !cell.empty() && std::all_of(cell.begin(), cell.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
    }) && cell.find_first_of("0123456789") != std::string_view::npos;
    std::string text(cell);
    auto fail = [&](const std::string& why, const std::string& fix = "") {
        diag.error(at, fmt::format("{}: {}", h.name, why), fix);
        return false;
    };
    if (bare) {
        double v = 0;
        auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
        if (ec != std::errc{} || end != cell.data() + cell.size() || !std::isfinite(v))
            return fail(fmt::format("`{}` is not a number", cell));
        if (h.scale == 0 && v != 0) {
            const char* example = h.column == Column::rate   ? "20mbit, or name the unit in the header: rate_mbit"
                                  : h.column == Column::loss ? "1%, or name the unit in the header: loss_pct"
                                  : h.column == Column::time ? "1.5s, or name the unit in the header: time_s"
                                                             : "40ms, or name the unit in the header: delay_ms";
            return fail(fmt::format("`{}` needs a unit", cell), fmt::format("write {}", example));
        }
        if (v < 0) return fail(fmt::format("`{}` is negative", cell));
        double base = h.scale == 0 ? 0 : v * h.scale;
        switch (h.column) {
            case Column::rate:
                if (base > 1e13) return fail(fmt::format("`{}` is above 10 Tbit/s", cell));
                row.rate_bps = static_cast<std::uint64_t>(std::llround(base));
                break;
            case Column::loss:
                if (base > 1) return fail(fmt::format("`{}` is above 100%", cell));
                row.loss = base;
                break;
            default:
                if (base > 1e9 * 86400) return fail(fmt::format("`{}` is longer than a day", cell));
                (h.column == Column::time    ? row.at
                 : h.column == Column::delay ? row.delay.emplace()
                                             : row.jitter.emplace()) =
                    nanoseconds(static_cast<std::int64_t>(std::llround(base)));
        }
        return true;
    }
    switch (h.column) {
        case Column::rate: {
            auto p = units::parse_rate(text);
            if (!units::ok(p)) return fail(std::get<units::UnitError>(p).message);
            row.rate_bps = std::get<std::uint64_t>(p);
            return true;
        }
        case Column::loss: {
            auto p = units::parse_percent(text);
            if (!units::ok(p)) return fail(std::get<units::UnitError>(p).message);
            row.loss = std::get<double>(p);
            return true;
        }
        default: {
            auto p = units::parse_duration(text);
            if (!units::ok(p)) return fail(std::get<units::UnitError>(p).message);
            auto d = std::get<nanoseconds>(p);
            if (d > std::chrono::hours(24)) return fail(fmt::format("`{}` is longer than a day", cell));
            (h.column == Column::time    ? row.at
             : h.column == Column::delay ? row.delay.emplace()
                                         : row.jitter.emplace()) = d;
            return true;
        }
    }
}

std::vector<std::string_view> split(std::string_view line) {
    std::vector<std::string_view> cells;
    std::size_t pos = 0;
    while (true) {
        auto comma = line.find(',', pos);
        cells.push_back(line.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return cells;
}

// Time-weighted mean, minimum and maximum of one column: each value holds until the next row.
template <class Get>
std::optional<TraceColumn> summarize(const std::vector<TraceRow>& rows, nanoseconds period, const char* name, Get get) {
    TraceColumn c{name, 0, 1e300, -1e300};
    double weighted = 0, span = 0;
    std::optional<double> current;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (auto v = get(rows[i])) current = *v;
        if (!current) continue;
        nanoseconds until = i + 1 < rows.size() ? rows[i + 1].at : std::max(period, rows[i].at);
        double s = seconds_of(until - rows[i].at);
        weighted += *current * s;
        span += s;
        c.min = std::min(c.min, *current);
        c.max = std::max(c.max, *current);
    }
    if (!current) return std::nullopt;
    c.mean = span > 0 ? weighted / span : c.max;
    return c;
}

std::optional<Trace> parse_csv(std::string_view text, const std::string& name, Diagnostics& diag) {
    Trace t;
    t.format = Trace::Format::csv;
    t.file = name;
    Lines lines(text);
    std::string_view line;
    std::vector<Header> headers;
    bool seen[5] = {};
    while (lines.next(line)) {
        if (is_comment_or_blank(line)) continue;
        for (auto cell : split(line)) {
            auto c = trim(cell);
            auto h = read_header(c, where(name, lines.number(), lines.column(line, c), c.size()), diag);
            if (!h) return std::nullopt;
            if (headers.empty() && h->column != Column::time) {
                diag.error(where(name, lines.number(), lines.column(line, c), c.size()),
                           "a CSV trace's first column is `time`",
                           "write the header as time,rate,delay,jitter,loss (any of the four after time)");
                return std::nullopt;
            }
            if (seen[static_cast<int>(h->column)]) {
                diag.error(where(name, lines.number(), lines.column(line, c), c.size()),
                           fmt::format("the column `{}` comes twice", c));
                return std::nullopt;
            }
            seen[static_cast<int>(h->column)] = true;
            headers.push_back(*h);
        }
        break;
    }
    if (headers.size() < 2) {
        diag.error(where(name, std::max<std::uint32_t>(lines.number(), 1), 1),
                   headers.empty() ? "the trace is empty" : "the trace has a time column and nothing else",
                   "a CSV trace's header names time, then any of rate, delay, jitter, loss");
        return std::nullopt;
    }
    while (lines.next(line)) {
        if (is_comment_or_blank(line)) continue;
        auto cells = split(line);
        if (cells.size() != headers.size()) {
            diag.error(where(name, lines.number(), 1, line.size()),
                       fmt::format("this row has {} cells, the header {}", cells.size(), headers.size()),
                       "leave a cell empty (a,,c) to keep the value of the row before");
            return std::nullopt;
        }
        TraceRow row;
        for (std::size_t i = 0; i < cells.size(); ++i) {
            auto c = trim(cells[i]);
            auto at = where(name, lines.number(), lines.column(line, c.empty() ? cells[i] : c), c.size());
            if (c.empty()) {
                if (i == 0) {
                    diag.error(at, "the row has no time", "every row starts with its time: 1.5s or 1500ms");
                    return std::nullopt;
                }
                continue;
            }
            if (!read_cell(c, headers[i], at, row, diag)) return std::nullopt;
            if (headers[i].column == Column::rate && row.rate_bps == 0u) {
                diag.error(at, "a rate of 0: a shaper cannot carry it",
                           "for a link that passes nothing, give `loss` 100% in that row and a rate above zero");
                return std::nullopt;
            }
        }
        if (!t.rows.empty() && row.at <= t.rows.back().at) {
            auto c = trim(cells[0]);
            diag.error(where(name, lines.number(), lines.column(line, c), c.size()),
                       fmt::format("the time {} is not after the row before ({}): rows are in time order",
                                   units::format_duration(row.at), units::format_duration(t.rows.back().at)));
            return std::nullopt;
        }
        if (t.rows.size() >= kMaxTraceRows) {
            diag.error(where(name, lines.number(), 1), fmt::format("the trace has more than {} rows", kMaxTraceRows),
                       "average it over longer rows, or cut it");
            return std::nullopt;
        }
        t.rows.push_back(row);
    }
    t.entries = t.rows.size();
    if (t.rows.empty()) {
        diag.error(where(name, lines.number(), 1), "the trace has a header and no rows");
        return std::nullopt;
    }
    // Its length: the last row lasts as long as the interval before it (evenly spaced rows, as a
    // recorder writes them, make that the recording's length). One row: it holds.
    if (t.rows.size() >= 2) {
        const auto& a = t.rows[t.rows.size() - 2];
        const auto& b = t.rows.back();
        t.period = b.at + (b.at - a.at);
    }
    if (auto c = summarize(t.rows, t.period, "rate", [](const TraceRow& r) {
            return r.rate_bps ? std::optional<double>(static_cast<double>(*r.rate_bps)) : std::nullopt;
        }))
        t.columns.push_back(*c);
    auto secs = [](const std::optional<nanoseconds>& d) {
        return d ? std::optional<double>(seconds_of(*d)) : std::nullopt;
    };
    if (auto c = summarize(t.rows, t.period, "delay", [&](const TraceRow& r) { return secs(r.delay); }))
        t.columns.push_back(*c);
    if (auto c = summarize(t.rows, t.period, "jitter", [&](const TraceRow& r) { return secs(r.jitter); }))
        t.columns.push_back(*c);
    if (auto c = summarize(t.rows, t.period, "loss", [](const TraceRow& r) { return r.loss; })) t.columns.push_back(*c);
    return t;
}

std::string figure(const TraceColumn& c, double v) {
    if (v == 0) return "0";
    if (c.name == "rate")
        return v >= 1e6 ? fmt::format("{:.1f} Mbit/s", v / 1e6) : fmt::format("{:.0f} kbit/s", v / 1e3);
    if (c.name == "loss") return fmt::format("{:.2f}%", v * 100);
    return fmt::format("{:.1f} ms", v * 1e3);
}

}  // namespace

std::uint64_t floor_rate(nanoseconds window) {
    return static_cast<std::uint64_t>(
        std::llround(static_cast<double>(kMahimahiFrameBytes * 8) / seconds_of(std::max(window, nanoseconds{1}))));
}

std::optional<Trace> parse_trace(std::string_view text, const std::string& name, nanoseconds window,
                                 Diagnostics& diag) {
    // mahimahi's files hold digits alone; anything else is a CSV with its header.
    Lines lines(text);
    std::string_view line;
    while (lines.next(line)) {
        if (is_comment_or_blank(line)) continue;
        auto v = trim(line);
        bool digits =
            std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
        return digits ? parse_mahimahi(text, name, window, diag) : parse_csv(text, name, diag);
    }
    diag.error(
        where(name, 1, 1), "the trace is empty",
        "a mahimahi trace holds one millisecond timestamp a line; a CSV trace a header (time,rate,...) and rows");
    return std::nullopt;
}

std::optional<Trace> read_trace(const std::string& path, const std::string& name, nanoseconds window,
                                const Location& at, Diagnostics& diag) {
    std::error_code ec;
    auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) {
        diag.error(at, fmt::format("the trace `{}` does not exist ({})", name, path),
                   "a relative path is taken from the folder of the file that names it");
        return std::nullopt;
    }
    if (!std::filesystem::is_regular_file(status)) {
        diag.error(at, fmt::format("the trace `{}` is not a regular file", name));
        return std::nullopt;
    }
    auto size = std::filesystem::file_size(path, ec);
    if (ec || size > kMaxTraceBytes) {
        diag.error(
            at,
            fmt::format("the trace `{}` is larger than {} ({} bytes)", name, units::format_size(kMaxTraceBytes), size),
            "cut it, or average a CSV over longer rows");
        return std::nullopt;
    }
    // At most one byte past the limit, whatever the size said (a file under /proc says 0).
    std::ifstream in(path, std::ios::binary);
    std::string text;
    std::vector<char> chunk(1 << 16);
    while (in && text.size() <= kMaxTraceBytes) {
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) {
        diag.error(at, fmt::format("cannot read the trace `{}` ({})", name, path));
        return std::nullopt;
    }
    if (text.size() > kMaxTraceBytes) {
        diag.error(at, fmt::format("the trace `{}` is larger than {}", name, units::format_size(kMaxTraceBytes)),
                   "cut it, or average a CSV over longer rows");
        return std::nullopt;
    }
    // Lines are located in the file as it can be opened; the plan names it as written.
    auto t = parse_trace(text, path, window, diag);
    if (t) t->file = name;
    return t;
}

const Trace* TraceCache::read(const std::string& path, const std::string& name, nanoseconds window, const Location& at,
                              Diagnostics& diag) {
    auto key = std::pair{path, window.count()};
    auto it = read_.find(key);
    if (it == read_.end()) it = read_.emplace(key, read_trace(path, name, window, at, diag)).first;
    return it->second ? &*it->second : nullptr;
}

std::string describe(const Trace& t) {
    std::string out;
    if (t.format == Trace::Format::mahimahi) {
        out = fmt::format("{}: mahimahi, {} delivery opportunities over {}, counted in windows of {}", t.file,
                          t.entries, units::format_duration(t.period), units::format_duration(t.window));
    } else {
        out = fmt::format("{}: CSV, {} rows over {}", t.file, t.entries,
                          t.period.count() ? units::format_duration(t.period) : std::string("0 (one row: it holds)"));
    }
    for (const auto& c : t.columns)
        out +=
            fmt::format("; {} mean {}, min {}, max {}", c.name, figure(c, c.mean), figure(c, c.min), figure(c, c.max));
    if (t.raised)
        out += fmt::format("; {} windows without an opportunity carry one packet ({}: a shaper takes no rate of 0)",
                           t.raised, figure(TraceColumn{"rate"}, static_cast<double>(floor_rate(t.window))));
    if (t.period.count()) out += "; starts over at its end";
    return out;
}

}  // namespace wanlab::netem
