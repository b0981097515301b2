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

bool Diagnostics::reported_on_line(const Location& w) const {
    auto it = seen_.lower_bound({Severity::error, w.file, w.line, 0, std::string()});
    return it != seen_.end() && std::get<0>(*it) == Severity::error && std::get<1>(*it) == w.file &&
           std::get<2>(*it) == w.line;
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

namespace {
// A message quoting a 1 MB key is not read whole: it is cut, and says how much was.
constexpr std::size_t kMaxMessage = 1000;
// The source line shown: this many bytes around the column.
constexpr std::size_t kMaxShownLine = 160;

std::string cut(std::string_view s, std::size_t max) {
    if (s.size() <= max) return std::string(s);
    return fmt::format("{}... ({} bytes more)", s.substr(0, max), s.size() - max);
}
}  // namespace

std::string render(const Diagnostic& d, const SourceSet& sources) {
    const char* kind = d.severity == Severity::error ? "error" : "warning";
    std::string out;
    const auto& w = d.where;
    // A file's text and names from it reach the terminal escaped: a hostile file cannot
    // move the cursor or retitle the window through an error message.
    std::string file = text::terminal_safe(cut(w.file, kMaxMessage)),
                message = text::terminal_safe(cut(d.message, kMaxMessage));
    if (w.file.empty())
        out = fmt::format("{}: {}\n", kind, message);
    else if (w.line == 0)
        out = fmt::format("{}: {}: {}\n", file, kind, message);
    else
        out = fmt::format("{}:{}:{}: {}: {}\n", file, w.line, w.column, kind, message);
    auto whole = sources.line(w.file, w.line);
    if (w.line != 0 && !whole.empty()) {
        std::string gutter = fmt::format("{}", w.line);
        std::string pad(gutter.size(), ' ');
        // A long line is shown as the window around the column, marked "..." where cut.
        std::size_t column = w.column > 0 ? w.column - 1 : 0;
        std::size_t from = column > kMaxShownLine / 2 ? column - kMaxShownLine / 2 : 0;
        std::string text(whole.substr(std::min(from, whole.size()), kMaxShownLine));
        std::string lead = from > 0 ? "..." : "";
        std::string tail = from + kMaxShownLine < whole.size() ? "..." : "";
        out += fmt::format(" {} | {}{}{}\n", gutter, lead, text::terminal_safe(text), tail);
        std::string marks(lead.size(), ' ');
        // Tabs in the source line are kept so the caret lines up in a terminal; an escaped
        // control character takes the width of its escape.
        std::string before =
            column > from ? text::terminal_safe(text.substr(0, std::min(column - from, text.size()))) : "";
        for (char c : before) marks += c == '\t' ? '\t' : ' ';
        marks += '^';
        if (w.end_column > w.column + 1)
            marks += std::string(std::min<std::size_t>(w.end_column - w.column - 1, 200), '~');
        out += fmt::format(" {} | {}\n", pad, marks);
    }
    if (!d.note.empty()) out += fmt::format("  = {}\n", text::terminal_safe(cut(d.note, kMaxMessage)));
    return out;
}

namespace {
// Optimal string alignment distance, case-insensitive: an adjacent transposition
// ("dleay" -> "delay") costs one edit, as people make it. Only distances up to `max` matter:
// past it the answer is max + 1, found as soon as a whole row exceeds it, so checking a word
// against a long list costs a narrow band per candidate, not a full table (issue 40: 3,000
// unknown keys made validation quadratic in practice).
std::size_t edit_distance_within(std::string_view a, std::string_view b, std::size_t max) {
    if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > max) return max + 1;
    auto low = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
    std::string x(a.size(), ' '), y(b.size(), ' ');
    std::transform(a.begin(), a.end(), x.begin(), low);
    std::transform(b.begin(), b.end(), y.begin(), low);
    std::vector<std::size_t> before(y.size() + 1), prev(y.size() + 1), row(y.size() + 1);
    for (std::size_t j = 0; j <= y.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= x.size(); ++i) {
        row[0] = i;
        std::size_t least = row[0];
        for (std::size_t j = 1; j <= y.size(); ++j) {
            std::size_t cost = x[i - 1] == y[j - 1] ? 0 : 1;
            row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost});
            if (i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1])
                row[j] = std::min(row[j], before[j - 2] + 1);
            least = std::min(least, row[j]);
        }
        if (least > max) return max + 1;
        std::swap(before, prev);
        std::swap(prev, row);
    }
    return std::min(prev[y.size()], max + 1);
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
        auto d = edit_distance_within(word, c, best_distance - 1);
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

}  // namespace wanlab
