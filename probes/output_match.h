// Numbers out of a program's output, for the command probe's metrics: a regular expression
// with a named group (PCRE2), or a JSON pointer into the output parsed as JSON.
//
// Contract: Pattern compiles once (a located-ready error for a bad pattern) and matches with
// bounded work (PCRE2's match and depth limits), so a pattern from an experiment file cannot
// make a run spin or overflow the stack on a large output, as std::regex's recursion can.
// PCRE2 rather than std::regex: named groups (`(?<value>...)`) are what users write, and
// std::regex has none. Thread-safe after construction.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wanlab::probes {

class Pattern {
public:
    /// Throws InputError("... at offset N: why") for a pattern PCRE2 refuses.
    explicit Pattern(const std::string& pattern);
    ~Pattern();
    Pattern(Pattern&&) noexcept;
    Pattern& operator=(Pattern&&) noexcept;
    Pattern(const Pattern&) = delete;
    Pattern& operator=(const Pattern&) = delete;

    /// Its named groups, in the order they appear.
    std::vector<std::string> group_names() const;
    /// Group `group` of the last match in `subject`; nullopt when nothing matches (or the
    /// group took no part). Throws Error when the match limit is hit, or when finding every
    /// match takes longer than `budget` (a pattern that matches at each of millions of
    /// positions).
    std::optional<std::string> last_group(std::string_view subject, const std::string& group,
                                          std::chrono::milliseconds budget = std::chrono::seconds(2)) const;

private:
    struct Compiled;
    std::unique_ptr<Compiled> c_;
};

/// The number at JSON pointer `pointer` in `text` (the whole text as JSON, or else its last
/// non-empty line); nullopt with `why` set when there is none.
std::optional<double> json_number(const std::string& text, const std::string& pointer, std::string& why);

/// Whether `pointer` is a JSON pointer ("" or "/a/b/0"); `why` says what is wrong if not.
bool valid_json_pointer(const std::string& pointer, std::string& why);

}  // namespace wanlab::probes
