// Diagnostics: errors and warnings located in an experiment file (or a --set argument).
//
// Contract: a Diagnostic names `file:line:column`; render() prints it the way compilers do,
// with the offending source line and a caret under the key or value:
//
//     exp.toml:4:9: error: `delay` needs a unit: write "20ms", "20us" or "20s"
//         4 | delay = 20
//           |         ^~
//
// Sources are kept in memory (SourceSet) so tests compare whole messages without files.
// Not thread-safe; one Diagnostics per load.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace wanlab {

/// A point (and, on one line, a span) in a named source text. line/column are 1-based;
/// line 0 means "no position" (a whole-file or command-line problem).
struct Location {
    std::string file;
    std::uint32_t line = 0;
    std::uint32_t column = 0;
    std::uint32_t end_column = 0;  ///< exclusive; 0 or <= column means a single caret

    bool operator==(const Location&) const = default;
};

enum class Severity { error, warning };

struct Diagnostic {
    Severity severity = Severity::error;
    Location where;
    std::string message;
    std::string note;  ///< optional second line of advice, printed after the caret
};

/// The texts diagnostics point into, by file name (the name used in Location::file).
class SourceSet {
public:
    void add(std::string name, std::string text);
    /// The 1-based line of a source, without its newline; empty if unknown.
    std::string_view line(const std::string& name, std::uint32_t line) const;

private:
    struct Text {
        std::string text;
        mutable std::vector<std::size_t> starts;  ///< where each line begins, built on first use
    };
    std::map<std::string, Text> texts_;
};

/// Collects diagnostics in the order found; identical repeats (same place, same text) are
/// kept once, so a base-file error seen again in every trial is reported once.
class Diagnostics {
public:
    void error(Location where, std::string message, std::string note = {});
    void warning(Location where, std::string message, std::string note = {});
    bool has_errors() const { return errors_ > 0; }
    /// Whether an error was already reported at exactly this place (so a check repeated for
    /// every trial can skip working out its message again).
    bool reported_at(const Location& where) const;
    /// Whether an error was reported anywhere on the line of `where` (a key's value, say,
    /// when `where` is the key): a check that depends on that key then says nothing more.
    bool reported_on_line(const Location& where) const;
    std::size_t error_count() const { return errors_; }
    const std::vector<Diagnostic>& items() const { return items_; }
    /// The diagnostics rendered with source lines, errors and warnings in order: the first
    /// kMaxShown of them, then a line counting the rest.
    std::string render(const SourceSet& sources) const;
    static constexpr std::size_t kMaxShown = 50;

private:
    using Key = std::tuple<Severity, std::string, std::uint32_t, std::uint32_t, std::string>;
    void add(Diagnostic d);
    std::vector<Diagnostic> items_;
    std::set<Key> seen_;  ///< ordered by place first, so reported_at() is one lookup
    std::size_t errors_ = 0;
};

/// One diagnostic as text: header line, source line with gutter, caret line, note.
std::string render(const Diagnostic& d, const SourceSet& sources);

/// The closest candidate to `word` by edit distance, if it is close enough to be a likely
/// typo ("dleay" -> "delay", "jiter" -> "jitter"); empty string otherwise.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace wanlab
