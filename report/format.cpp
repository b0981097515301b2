// Formatting for the report's printers: human units for people (table, markdown), exact
// base units for machines (json, csv), and the aligned table both text formats share.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "report/detail.h"

namespace wanlab::report::detail {
namespace {

// How a value and its interval are written: divided by `divisor`, `decimals` places, then
// `suffix`. Chosen from the median, so the interval's bounds read in the same scale.
struct Scale {
    double divisor = 1;
    int decimals = 0;
    const char* suffix = "";
};

bool integral(double v) { return std::fabs(v - std::round(v)) < 1e-9 * std::max(1.0, std::fabs(v)); }

Scale bytes_scale(double v) {
    double a = std::fabs(v);
    Scale s;
    if (a >= 1024.0 * 1024 * 1024)
        s = {1024.0 * 1024 * 1024, 1, " GiB"};
    else if (a >= 1024.0 * 1024)
        s = {1024.0 * 1024, 1, " MiB"};
    else if (a >= 1024)
        s = {1024, 1, " KiB"};
    else
        s = {1, 0, " B"};
    if (integral(v / s.divisor)) s.decimals = 0;  // "208 KiB", as sysctl users think of 212992
    return s;
}

Scale scale_for(probes::Unit unit, double v) {
    double a = std::fabs(v);
    switch (unit) {
        case probes::Unit::bits_per_second:
            if (a >= 1e9) return {1e9, 2, " Gbit/s"};
            if (a >= 1e6) return {1e6, 2, " Mbit/s"};
            if (a >= 1e3) return {1e3, 1, " kbit/s"};
            return {1, 0, " bit/s"};
        case probes::Unit::seconds:
            if (a >= 1) return {1, 3, " s"};
            if (a >= 1e-3) return {1e-3, 2, " ms"};
            return {1e-6, 1, " us"};
        // Loss and limited-time shares span 0.01% to 100%: keep two significant places.
        case probes::Unit::fraction: return {0.01, a >= 0.1 || a == 0 ? 1 : a >= 0.001 ? 2 : 3, "%"};
        case probes::Unit::count: return {1, integral(v) ? 0 : 1, ""};
        case probes::Unit::per_second: return {1, a >= 100 ? 0 : 2, "/s"};
        case probes::Unit::bytes: return bytes_scale(v);
    }
    return {};
}

std::string number_in(const Scale& s, double v) { return fmt::format("{:.{}f}", v / s.divisor, s.decimals); }

}  // namespace

std::string human(probes::Unit unit, double v) {
    if (std::isnan(v)) return "-";
    auto s = scale_for(unit, v);
    return number_in(s, v) + s.suffix;
}

std::string human_ci(probes::Unit unit, const Summary& s) {
    if (s.n == 0 || std::isnan(s.median)) return "-";
    auto scale = scale_for(unit, s.median);
    std::string text = number_in(scale, s.median) + scale.suffix;
    if (!std::isnan(s.low)) text += fmt::format(" [{}, {}]", number_in(scale, s.low), number_in(scale, s.high));
    return text;
}

std::string human_bytes(double bytes) { return human(probes::Unit::bytes, bytes); }

std::string signed_percent(double fraction) {
    if (!std::isfinite(fraction)) return "-";
    return fmt::format("{:+.1f}%", fraction * 100);
}

std::string unit_of(const probes::MetricSpec* spec) { return spec ? probes::unit_name(spec->unit) : ""; }

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
        if (c == '"') q += '"';
        q += c;
    }
    return q + "\"";
}

std::string csv_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : ""; }

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {
    right_.resize(header_.size(), false);
}

void TextTable::add(std::vector<std::string> row) {
    row.resize(header_.size());
    rows_.push_back(std::move(row));
}

std::string TextTable::text(const std::string& indent) const {
    std::vector<std::size_t> width(header_.size());
    for (std::size_t c = 0; c < header_.size(); ++c) {
        width[c] = header_[c].size();
        for (const auto& r : rows_) width[c] = std::max(width[c], r[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
        std::string out = indent;
        for (std::size_t c = 0; c < cells.size(); ++c) {
            if (c) out += "  ";
            out += right_[c] ? fmt::format("{:>{}}", cells[c], width[c]) : fmt::format("{:<{}}", cells[c], width[c]);
        }
        while (!out.empty() && out.back() == ' ') out.pop_back();
        return out + "\n";
    };
    std::string out = line(header_);
    for (const auto& r : rows_) out += line(r);
    return out;
}

std::string markdown_text(const std::string& s) {
    std::string e;
    for (char c : s) {
        if (c == '|' || c == '*') e += '\\';  // a pipe ends a table cell, a star starts emphasis
        e += c;
    }
    return e;
}

std::string TextTable::markdown() const {
    std::string out = "|", rule = "|";
    for (std::size_t c = 0; c < header_.size(); ++c) {
        out += " " + markdown_text(header_[c]) + " |";
        rule += right_[c] ? " ---: |" : " --- |";
    }
    out += "\n" + rule + "\n";
    for (const auto& r : rows_) {
        out += "|";
        for (const auto& v : r) out += " " + markdown_text(v) + " |";
        out += "\n";
    }
    return out;
}

}  // namespace wanlab::report::detail
