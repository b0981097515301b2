#include "core/diagnostic.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include <fmt/format.h>

#include "core/text.h"

namespace wanlab {

void SourceSet::add(std::string name, std::string text) { texts_[std::move(name)] = Text{std::move(text), {}}; }

std::string_view SourceSet::line(const std::string& name, std::uint32_t line) const {
    auto it = texts_.find(name);
    if (it == texts_.end() || line == 0) return {};
    const Text& t = it->second;
    if (t.starts.empty()) {
        t.starts.push_back(0);
        for (std::size_t i = 0; i < t.text.size(); ++i)
            if (t.text[i] == '\n') t.starts.push_back(i + 1);
    }
    if (line > t.starts.size()) return {};
    std::string_view text = std::string_view(t.text).substr(t.starts[line - 1]);
    auto nl = text.find('\n');
    auto out = text.substr(0, nl);
    if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
    return out;
}

void Diagnostics::error(Location where, std::string message, std::string note) {
    add({Severity::error, std::move(where), std::move(message), std::move(note)});
}

void Diagnostics::warning(Location where, std::string message, std::string note) {
    add({Severity::warning, std::move(where), std::move(message), std::move(note)});
}

bool Diagnostics::reported_at(const Location& w) const {
    // The first key at this place sorts before every message; any error there is at or after it.
    auto it = seen_.lower_bound({Severity::error, w.file, w.line, w.column, std::string()});
    return it != seen_.end() && std::get<0>(*it) == Severity::error && std::get<1>(*it) == w.file &&
           std::get<2>(*it) == w.line && std::get<3>(*it) == w.column;
}

void Diagnostics::add(Diagnostic d) {
    if (!seen_.insert({d.severity, d.where.file, d.where.line, d.where.column, d.message}).second) return;
    if (d.severity == Severity::error) ++errors_;
    items_.push_back(std::move(d));
}

std::string Diagnostics::render(const SourceSet& sources) const {
    // In source order, file by file, as a reader goes through the file.
    std::vector<const Diagnostic*> sorted;
    for (const auto& d : items_) sorted.push_back(&d);
    std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic* a, const Diagnostic* b) {
        return std::tie(a->where.file, a->where.line, a->where.column) <
               std::tie(b->where.file, b->where.line, b->where.column);
    });
    std::string out;
    for (std::size_t i = 0; i < sorted.size() && i < kMaxShown; ++i) out += wanlab::render(*sorted[i], sources);
    if (sorted.size() > kMaxShown)
        out +=
            fmt::format("note: {} more diagnostics not shown; fix the ones above first\n", sorted.size() - kMaxShown);
    return out;
}

std::string render(const Diagnostic& d, const SourceSet& sources) {
    const char* kind = d.severity == Severity::error ? "error" : "warning";
    std::string out;
    const auto& w = d.where;
    // A file's text and names from it reach the terminal escaped: a hostile file cannot
    // move the cursor or retitle the window through an error message.
    std::string file = text::terminal_safe(w.file), message = text::terminal_safe(d.message);
    if (w.file.empty())
        out = fmt::format("{}: {}\n", kind, message);
    else if (w.line == 0)
        out = fmt::format("{}: {}: {}\n", file, kind, message);
    else
        out = fmt::format("{}:{}:{}: {}: {}\n", file, w.line, w.column, kind, message);
    auto text = sources.line(w.file, w.line);
    if (w.line != 0 && !text.empty()) {
        std::string gutter = fmt::format("{}", w.line);
        std::string pad(gutter.size(), ' ');
        out += fmt::format(" {} | {}\n", gutter, text::terminal_safe(text));
        std::string marks;
        // Tabs in the source line are kept so the caret lines up in a terminal; an escaped
        // control character takes the width of its escape.
        std::string before =
            w.column > 1 ? text::terminal_safe(text.substr(0, std::min<std::size_t>(w.column - 1, text.size()))) : "";
        for (char c : before) marks += c == '\t' ? '\t' : ' ';
        marks += '^';
        if (w.end_column > w.column + 1)
            marks += std::string(std::min<std::size_t>(w.end_column - w.column - 1, 200), '~');
        out += fmt::format(" {} | {}\n", pad, marks);
    }
    if (!d.note.empty()) out += fmt::format("  = {}\n", text::terminal_safe(d.note));
    return out;
}

namespace {
// Optimal string alignment distance, case-insensitive: an adjacent transposition
// ("dleay" -> "delay") costs one edit, as people make it.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    auto low = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t cost = low(a[i - 1]) == low(b[j - 1]) ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && low(a[i - 1]) == low(b[j - 2]) && low(a[i - 2]) == low(b[j - 1]))
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[a.size()][b.size()];
}
}  // namespace

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
    std::string best;
    // Short words tolerate fewer edits, or every 4-letter key would "mean" every other.
    std::size_t best_distance = (word.size() <= 4 ? 1 : word.size() <= 6 ? 2 : 3) + 1;
    // "h" for "1-h": a word that is the tail of a dashed candidate is a likely slip.
    for (const auto& c : candidates)
        if (c.size() > word.size() + 1 && c.ends_with("-" + std::string(word))) return c;
    for (const auto& c : candidates) {
        auto d = edit_distance(word, c);
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

}  // namespace wanlab
