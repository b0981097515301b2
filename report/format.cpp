// Formatting for the report's printers: human units for people (table, markdown), exact
// base units for machines (json, csv), and the aligned table both text formats share.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "probes/human.h"
#include "report/detail.h"
#include "results/store.h"

namespace wanlab::report::detail {
std::string human_ci(probes::Unit unit, const Summary& s) {
    if (s.n == 0 || std::isnan(s.median)) return "-";
    auto scale = probes::scale_for(unit, s.median);
    std::string text = scale.number(s.median) + scale.suffix;
    if (!std::isnan(s.low)) text += fmt::format(" [{}, {}]", scale.number(s.low), scale.number(s.high));
    return text;
}

std::string human_bytes(double bytes) { return probes::human(probes::Unit::bytes, bytes); }

std::string signed_percent(double fraction) {
    if (!std::isfinite(fraction)) return "-";
    return fmt::format("{:+.1f}%", fraction * 100);
}

std::string unit_of(const probes::MetricSpec* spec) { return spec ? probes::unit_name(spec->unit) : ""; }

std::string csv_field(const std::string& s) { return results::csv_field(s); }

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

std::string escape_markup(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
                    out += '?';
                else
                    out += c;
        }
    }
    return out;
}

std::string TextTable::html() const {
    auto escape = [](const std::string& v) { return escape_markup(v); };
    std::string out = "<table><thead><tr>";
    for (const auto& h : header_) out += "<th>" + escape(h) + "</th>";
    out += "</tr></thead><tbody>\n";
    for (const auto& r : rows_) {
        out += "<tr>";
        for (std::size_t c = 0; c < r.size(); ++c)
            out += (right_[c] ? "<td class=\"num\">" : "<td>") + escape(r[c]) + "</td>";
        out += "</tr>\n";
    }
    return out + "</tbody></table>\n";
}

}  // namespace wanlab::report::detail
