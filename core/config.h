// The configuration tree that experiment files, profiles, variants, sweeps and --set all
// become, and the strict reader every section is parsed with.
//
// Contract:
// - Node mirrors a TOML document but can be copied and merged while keeping the source
//   position of every key and value (toml++ drops positions on copy). Leaves point into
//   toml documents that the caller keeps alive (see Documents).
// - Reader wraps one table: each typed getter marks the key as known, converts the value to
//   base units and reports a located error when it cannot; finish() reports every key that
//   no getter asked for, with a did-you-mean drawn from the keys that were asked for. So a
//   section's parser *is* its schema, and unknown keys can never slip through.
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "core/diagnostic.h"

namespace wanlab::config {

struct Member;

/// A TOML table, an array of tables ([[probe]]), or a leaf (a scalar or an array of scalars).
struct Node {
    enum class Kind { table, table_array, value };
    Kind kind = Kind::table;
    const toml::node* value = nullptr;  ///< leaf value (kind == value)
    Location key_at;                    ///< where the key naming this node was written
    Location value_at;                  ///< where the value (or table header) was written
    std::vector<Member> members;        ///< kind == table, in file order
    std::vector<Node> items;            ///< kind == table_array
    bool inline_table = false;          ///< kind == table written inline, `{ a = 1, b = 2 }`

    const Node* find(std::string_view key) const;
    Node* find(std::string_view key);
    /// Replaces the member `key` or appends it.
    Node& set(std::string key, Node node);
    bool is_table() const { return kind == Kind::table; }
};

/// A table member. (A named struct rather than std::pair: Node is incomplete inside its own
/// definition, and std::pair of an incomplete type is not allowed.)
struct Member {
    Member(std::string k, Node v) : first(std::move(k)), second(std::move(v)) {}
    std::string first;
    Node second;
};

/// The deepest nesting an experiment file may have, counting every table header component,
/// dotted-key component, inline table and array (wanlab's own format needs at most 5). Deeper
/// input is refused before it is parsed, so no recursion, in toml++ or here, can run out of
/// stack on a hostile file.
inline constexpr int kMaxNesting = 32;

/// Where `text` first nests deeper than kMaxNesting, as a 1-based line and column; nullopt
/// if it does not. A lexical scan (strings, comments, keys, brackets), linear in the text;
/// syntax errors are left for the parser.
std::optional<std::pair<std::uint32_t, std::uint32_t>> too_deep(std::string_view text);

/// The longest duration an experiment may give anything: a day.
inline constexpr std::chrono::nanoseconds kMaxDuration = std::chrono::hours{24};

/// Owns parsed TOML documents so that Node leaves stay valid; also records their text for
/// diagnostics.
class Documents {
public:
    /// Parses `text` named `name`. On a syntax error, or nesting deeper than kMaxNesting,
    /// reports it (located) and returns nullptr.
    const toml::table* parse(std::string name, std::string text, Diagnostics& diag);
    SourceSet& sources() { return sources_; }
    const SourceSet& sources() const { return sources_; }

private:
    std::deque<toml::table> tables_;
    SourceSet sources_;
};

Location location_of(const toml::source_region& r);

/// Builds a Node tree from a parsed table. Arrays whose elements are all tables become
/// table arrays; everything else is a leaf.
Node from_toml(const toml::table& table);

/// Deep merge: tables merge member by member, anything else in `overlay` replaces.
void merge(Node& base, const Node& overlay);

/// "a string", "an integer", "a table", ... for messages.
std::string describe(const Node& n);
std::string describe(const toml::node& n);

/// Strict, typed reader of one table. `section` names it in messages: "[link]",
/// "[[probe]] \"bulk\"".
class Reader {
public:
    Reader(const Node& table, std::string section, Diagnostics& diag);

    /// The raw member, marking the key as known; nullptr if absent.
    const Node* raw(std::string_view key);
    bool has(std::string_view key) const { return table_.find(key) != nullptr; }

    /// A duration in [min, max]; every duration an experiment names (a probe's, a warmup,
    /// a timeout, an interval) is at most kMaxDuration, so deadlines computed from it cannot
    /// overflow.
    std::optional<std::chrono::nanoseconds> duration(std::string_view key,
                                                     std::chrono::nanoseconds min = std::chrono::nanoseconds{0},
                                                     std::chrono::nanoseconds max = kMaxDuration);
    std::optional<std::uint64_t> rate(std::string_view key);  ///< bit/s
    std::optional<std::uint64_t> size(std::string_view key);  ///< bytes
    std::optional<double> percent(std::string_view key);      ///< fraction 0..1
    std::optional<double> gain(std::string_view key);         ///< relative change: "300%" -> 3
    std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max);
    std::optional<bool> boolean(std::string_view key);
    std::optional<std::string> string(std::string_view key);
    /// A string that must be one of `choices`; a near miss gets a did-you-mean.
    std::optional<std::string> choice(std::string_view key, const std::vector<std::string>& choices);
    /// A sub-table; an error if the key holds anything else.
    const Node* table(std::string_view key);
    /// An array of tables ([[x]]); an error if the key holds anything else.
    const Node* table_array(std::string_view key);

    /// Reports every member no getter asked for. Call once, after all getters.
    void finish();

    /// Locations for cross-field messages (the key if present, else the table).
    Location key_at(std::string_view key) const;
    Location value_at(std::string_view key) const;
    const std::string& section() const { return section_; }
    const Node& node() const { return table_; }
    Diagnostics& diag() { return diag_; }

private:
    const Node* leaf(std::string_view key);
    const Node& table_;
    std::string section_;
    Diagnostics& diag_;
    std::vector<std::string> asked_;
};

// Typed conversions of one leaf, shared by Reader, sweeps and --set. `what` names the key in
// messages. Each reports a located error and returns nullopt on failure.
std::optional<std::chrono::nanoseconds> to_duration(const Node& n, std::string_view what, Diagnostics& d);
std::optional<std::uint64_t> to_rate(const Node& n, std::string_view what, Diagnostics& d);
std::optional<std::uint64_t> to_size(const Node& n, std::string_view what, Diagnostics& d);
std::optional<double> to_percent(const Node& n, std::string_view what, Diagnostics& d);
std::optional<double> to_gain(const Node& n, std::string_view what, Diagnostics& d);
std::optional<std::int64_t> to_integer(const Node& n, std::string_view what, std::int64_t min, std::int64_t max,
                                       Diagnostics& d);

/// The leaf Node for element `i` of an array leaf (sweep lists), positioned at the element.
Node element(const Node& array_leaf, std::size_t i);

}  // namespace wanlab::config
