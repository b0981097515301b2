#include "core/config.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <tuple>

#include <fmt/format.h>

#include "core/text.h"
#include "core/units.h"

namespace wanlab::config {

const Node* Node::find(std::string_view key) const {
    for (const auto& [k, v] : members)
        if (k == key) return &v;
    return nullptr;
}

Node* Node::find(std::string_view key) {
    for (auto& [k, v] : members)
        if (k == key) return &v;
    return nullptr;
}

Node& Node::set(std::string key, Node node) {
    if (auto* existing = find(key)) {
        *existing = std::move(node);
        return *existing;
    }
    members.emplace_back(std::move(key), std::move(node));
    return members.back().second;
}

namespace {
// toml++ describes syntax errors in parser terms ("Error while parsing decimal integer:
// expected digit, saw 'm'"). For the two mistakes people make most, say what to write.
void report_syntax_error(const toml::parse_error& e, const SourceSet& sources, Diagnostics& diag) {
    Location at = location_of(e.source());
    std::string desc(e.description());
    std::string line(sources.line(at.file, at.line));
    auto eq = line.find('=');
    auto start = eq == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", eq + 1);
    if (start != std::string::npos) {
        std::string value = line.substr(start);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
        auto col = static_cast<std::uint32_t>(start + 1);
        bool quoted = value.starts_with('"');
        if (quoted && std::count(value.begin(), value.end(), '"') == 1 && desc.find("string") != std::string::npos) {
            diag.error({at.file, at.line, col, static_cast<std::uint32_t>(col + value.size())},
                       "invalid TOML: the string is not closed: add a `\"` before the end of the line");
            return;
        }
        auto digits = value.find_first_not_of("0123456789.");
        if (!quoted && digits != 0 && digits != std::string::npos &&
            std::isalpha(static_cast<unsigned char>(value[digits]))) {
            auto end = value.find_first_of(" \t#,]}");
            std::string word = value.substr(0, end);
            diag.error({at.file, at.line, col, static_cast<std::uint32_t>(col + word.size())},
                       fmt::format("invalid TOML: a value with a unit is a string: write \"{}\", in quotes", word));
            return;
        }
    }
    diag.error(at, fmt::format("invalid TOML: {}", desc));
}
}  // namespace

namespace {
// The nesting scan: a cursor over the text that knows enough TOML to tell keys from values
// and to step over strings and comments.
class NestingScan {
public:
    explicit NestingScan(std::string_view t) : t_(t) {}

    std::optional<std::pair<std::uint32_t, std::uint32_t>> run() {
        frames_.push_back({'t', 0});
        while (i_ < t_.size()) {
            char c = t_[i_];
            if (c == ' ' || c == '\t' || c == '\r') {
                step();
            } else if (c == '#') {
                while (i_ < t_.size() && t_[i_] != '\n') step();
            } else if (c == '\n') {
                step();
                if (frames_.size() == 1) expect_key_ = true, parts_ = 1;
            } else if (frames_.size() == 1 && expect_key_ && c == '[') {
                if (!header()) return at_;
            } else if (c == '"' || c == '\'') {
                skip_string();
            } else if (!step_structure(c)) {
                return at_;
            }
        }
        return std::nullopt;
    }

private:
    struct Frame {
        char kind;  // 't' the top level, '{' an inline table, '[' an array
        int depth;
    };

    void step() {
        if (t_[i_] == '\n') ++line_, col_ = 0;
        ++i_, ++col_;
    }

    bool deeper(int depth) {
        if (depth <= kMaxNesting) return true;
        at_ = std::pair{line_, col_};
        return false;
    }

    // One character of structure; false when it nests too deep.
    bool step_structure(char c) {
        Frame& f = frames_.back();
        if (expect_key_) {
            if (c == '.' && !deeper(f.depth + ++parts_)) return false;
            if (c == '=') expect_key_ = false, value_depth_ = f.depth + parts_;
            if (c == '}' && f.kind == '{') frames_.pop_back(), expect_key_ = false;
            step();
            return true;
        }
        int element = f.kind == '[' ? f.depth + 1 : value_depth_;
        if (c == '{' || c == '[') {
            if (!deeper(element)) return false;
            frames_.push_back({c, element});
            expect_key_ = c == '{';
            parts_ = 1;
        } else if ((c == '}' || c == ']') && frames_.size() > 1) {
            frames_.pop_back();
        } else if (c == ',') {
            expect_key_ = f.kind == '{';
            parts_ = 1;
        }
        step();
        return true;
    }

    // A [table] or [[array]] header at the start of a line: its depth is its key's parts.
    bool header() {
        int parts = 1;
        step();
        if (i_ < t_.size() && t_[i_] == '[') ++parts, step();
        while (i_ < t_.size() && t_[i_] != ']' && t_[i_] != '\n') {
            if (t_[i_] == '"' || t_[i_] == '\'') {
                skip_string();
                continue;
            }
            if (t_[i_] == '.' && !deeper(++parts)) return false;
            step();
        }
        frames_.front().depth = parts;
        expect_key_ = false;  // until the line ends
        while (i_ < t_.size() && t_[i_] == ']') step();
        return true;
    }

    // A basic or literal string, one-line or multi-line, from its opening quote.
    void skip_string() {
        const char q = t_[i_];
        const std::string triple(3, q);
        const std::string_view fence = t_.substr(i_, 3) == triple ? std::string_view(triple) : t_.substr(i_, 1);
        for (std::size_t k = 0; k < fence.size(); ++k) step();
        while (i_ < t_.size()) {
            if (q == '"' && t_[i_] == '\\') {
                step();
                if (i_ < t_.size()) step();
                continue;
            }
            if (fence.size() == 1 && t_[i_] == '\n') return;  // unclosed: the parser says so
            if (t_.substr(i_, fence.size()) == fence) {
                for (std::size_t k = 0; k < fence.size(); ++k) step();
                return;
            }
            step();
        }
    }

    std::string_view t_;
    std::size_t i_ = 0;
    std::uint32_t line_ = 1, col_ = 1;
    std::vector<Frame> frames_;
    bool expect_key_ = true;
    int parts_ = 1, value_depth_ = 0;
    std::pair<std::uint32_t, std::uint32_t> at_;
};
}  // namespace

std::optional<std::pair<std::uint32_t, std::uint32_t>> too_deep(std::string_view text) {
    return NestingScan(text).run();
}

namespace {
// Every key and string in a parsed table is one line of printable text: names become device
// and file names, urls go into HTTP requests, everything is printed to a terminal.
bool check_printable(const toml::node& node, const toml::key* key, Diagnostics& diag) {
    bool ok = true;
    auto check = [&](std::string_view s, const toml::source_region& at, const char* what) {
        if (auto c = text::control_character(s)) {
            diag.error(location_of(at),
                       fmt::format("{} contains {}: wanlab's keys, names, urls and values are one line "
                                   "of printable text",
                                   what, text::describe_control(s, *c)));
            ok = false;
        }
    };
    if (key) check(key->str(), key->source(), "this key");
    if (const auto* s = node.as_string()) check(s->get(), node.source(), "this string");
    if (const auto* t = node.as_table())
        for (const auto& [k, v] : *t) ok = check_printable(v, &k, diag) && ok;
    if (const auto* a = node.as_array())
        for (const auto& v : *a) ok = check_printable(v, nullptr, diag) && ok;
    return ok;
}
}  // namespace

const toml::table* Documents::parse(std::string name, std::string text, Diagnostics& diag) {
    sources_.add(name, text);
    if (auto at = too_deep(text)) {
        diag.error(Location{name, at->first, at->second, 0},
                   fmt::format("nested more than {} levels deep (tables, dotted keys, inline tables and arrays "
                               "together); an experiment file needs at most 5",
                               kMaxNesting));
        return nullptr;
    }
    try {
        tables_.push_back(toml::parse(text, name));
        // Recursion is safe here: too_deep() bounded the depth before parsing.
        if (!check_printable(tables_.back(), nullptr, diag)) return nullptr;
        return &tables_.back();
    } catch (const toml::parse_error& e) {
        report_syntax_error(e, sources_, diag);
        return nullptr;
    }
}

Location location_of(const toml::source_region& r) {
    Location l;
    if (r.path) l.file = *r.path;
    l.line = r.begin.line;
    l.column = r.begin.column;
    if (r.end.line == r.begin.line && r.end.column > r.begin.column) l.end_column = r.end.column;
    return l;
}

namespace {
bool all_tables(const toml::array& a) {
    return !a.empty() && std::all_of(a.begin(), a.end(), [](const toml::node& n) { return n.is_table(); });
}

Node table_node(const toml::table& t);

Node node_of(const toml::node& v) {
    if (const auto* t = v.as_table()) return table_node(*t);
    Node n;
    n.value_at = location_of(v.source());
    if (const auto* a = v.as_array(); a && all_tables(*a)) {
        n.kind = Node::Kind::table_array;
        for (const auto& el : *a) n.items.push_back(table_node(*el.as_table()));
        return n;
    }
    n.kind = Node::Kind::value;
    n.value = &v;
    return n;
}

Node table_node(const toml::table& t) {
    Node n;
    n.kind = Node::Kind::table;
    n.value_at = location_of(t.source());
    n.inline_table = t.is_inline();
    for (const auto& [k, v] : t) {
        Node child = node_of(v);
        child.key_at = location_of(k.source());
        n.members.emplace_back(std::string(k.str()), std::move(child));
    }
    // toml++ iterates keys sorted by name; the file's order matters (sweep keys nest in the
    // order written, messages come in reading order), so restore it.
    std::stable_sort(n.members.begin(), n.members.end(), [](const auto& a, const auto& b) {
        return std::tie(a.second.key_at.line, a.second.key_at.column) <
               std::tie(b.second.key_at.line, b.second.key_at.column);
    });
    return n;
}
}  // namespace

Node from_toml(const toml::table& table) { return table_node(table); }

void merge(Node& base, const Node& overlay) {
    for (const auto& [key, value] : overlay.members) {
        Node* existing = base.find(key);
        if (existing && existing->is_table() && value.is_table())
            merge(*existing, value);
        else
            base.set(key, value);
    }
}

std::string describe(const toml::node& n) {
    switch (n.type()) {
        case toml::node_type::string: return "a string";
        case toml::node_type::integer: return "an integer";
        case toml::node_type::floating_point: return "a number with a fraction";
        case toml::node_type::boolean: return "a boolean";
        case toml::node_type::array: return "an array";
        case toml::node_type::table: return "a table";
        case toml::node_type::date:
        case toml::node_type::time:
        case toml::node_type::date_time: return "a date or time";
        default: return "nothing";
    }
}

std::string describe(const Node& n) {
    if (n.kind == Node::Kind::table) return "a table";
    if (n.kind == Node::Kind::table_array) return "an array of tables";
    return describe(*n.value);
}

namespace {
// A leaf's text for the unit parsers: strings as written, integers as digits (so `0` works
// for every unit and `20` gets "needs a unit").
std::optional<std::string> unit_text(const Node& n, std::string_view what, std::string_view example, Diagnostics& d) {
    if (n.kind == Node::Kind::value) {
        if (auto s = n.value->value<std::string>()) return *s;
        if (auto i = n.value->as_integer()) return fmt::format("{}", i->get());
        if (auto f = n.value->as_floating_point()) return fmt::format("{}", f->get());
    }
    d.error(n.value_at, fmt::format("`{}` must be a string such as {}, not {}", what, example, describe(n)));
    return std::nullopt;
}

template <class T>
std::optional<T> unit_value(const Node& n, std::string_view what, std::string_view example,
                            units::Parsed<T> (*parse)(std::string_view), Diagnostics& d) {
    auto text = unit_text(n, what, example, d);
    if (!text) return std::nullopt;
    auto parsed = parse(*text);
    if (auto* e = std::get_if<units::UnitError>(&parsed)) {
        d.error(n.value_at, fmt::format("`{}`: {}", what, e->message));
        return std::nullopt;
    }
    return std::get<T>(parsed);
}
}  // namespace

std::optional<std::chrono::nanoseconds> to_duration(const Node& n, std::string_view what, Diagnostics& d) {
    return unit_value<std::chrono::nanoseconds>(n, what, "\"20ms\"", &units::parse_duration, d);
}

std::optional<std::uint64_t> to_rate(const Node& n, std::string_view what, Diagnostics& d) {
    return unit_value<std::uint64_t>(n, what, "\"100mbit\"", &units::parse_rate, d);
}

std::optional<std::uint64_t> to_size(const Node& n, std::string_view what, Diagnostics& d) {
    return unit_value<std::uint64_t>(n, what, "\"16MiB\"", &units::parse_size, d);
}

std::optional<double> to_percent(const Node& n, std::string_view what, Diagnostics& d) {
    if (n.kind == Node::Kind::value && n.value->is_number() && !n.value->is_integer()) {
        d.error(n.value_at, fmt::format("`{}` must be a percentage string such as \"1%\", not a bare "
                                        "number (is {} a fraction or a percent?)",
                                        what, n.value->value<double>().value_or(0)));
        return std::nullopt;
    }
    return unit_value<double>(n, what, "\"1%\"", &units::parse_percent, d);
}

std::optional<double> to_gain(const Node& n, std::string_view what, Diagnostics& d) {
    if (n.kind == Node::Kind::value && n.value->is_number()) {
        d.error(n.value_at, fmt::format("`{}` must be a percentage string such as \"60%\", not a bare number", what));
        return std::nullopt;
    }
    return unit_value<double>(n, what, "\"60%\"", &units::parse_gain, d);
}

std::optional<std::int64_t> to_integer(const Node& n, std::string_view what, std::int64_t min, std::int64_t max,
                                       Diagnostics& d) {
    const toml::value<std::int64_t>* i = n.kind == Node::Kind::value ? n.value->as_integer() : nullptr;
    if (!i) {
        d.error(n.value_at, fmt::format("`{}` must be an integer, not {}", what, describe(n)));
        return std::nullopt;
    }
    if (i->get() < min || i->get() > max) {
        d.error(n.value_at, fmt::format("`{}` = {} is out of range: expected {} to {}", what, i->get(), min, max));
        return std::nullopt;
    }
    return i->get();
}

Node element(const Node& array_leaf, std::size_t i) {
    const auto& arr = *array_leaf.value->as_array();
    const toml::node& el = *arr.get(i);
    Node n;
    if (const auto* t = el.as_table()) {
        n = from_toml(*t);
    } else {
        n.kind = Node::Kind::value;
        n.value = &el;
        n.value_at = location_of(el.source());
    }
    n.key_at = array_leaf.key_at;
    return n;
}

// --- Reader -----------------------------------------------------------------------------

Reader::Reader(const Node& table, std::string section, Diagnostics& diag)
    : table_(table), section_(std::move(section)), diag_(diag) {}

const Node* Reader::raw(std::string_view key) {
    if (std::find(asked_.begin(), asked_.end(), key) == asked_.end()) asked_.emplace_back(key);
    return table_.find(key);
}

const Node* Reader::leaf(std::string_view key) {
    const Node* n = raw(key);
    if (n && n->kind != Node::Kind::value) {
        bool per_direction = n->is_table() && (n->find("up") || n->find("down"));
        diag_.error(n->key_at.line ? n->key_at : n->value_at,
                    fmt::format("`{}` in {} must be a single value, not {}{}", key, section_, describe(*n),
                                per_direction ? fmt::format("; for a different value each way, set `{}` in "
                                                            "[link.up] and [link.down]",
                                                            key)
                                              : ""));
        return nullptr;
    }
    return n;
}

std::optional<std::chrono::nanoseconds> Reader::duration(std::string_view key, std::chrono::nanoseconds min,
                                                         std::chrono::nanoseconds max) {
    const Node* n = leaf(key);
    auto d = n ? to_duration(*n, key, diag_) : std::nullopt;
    if (!d || (*d >= min && *d <= max)) return d;
    diag_.error(n->value_at,
                fmt::format("`{}` = {} is out of range: {}", key, units::format_duration(*d),
                            *d < min ? fmt::format("at least {}", units::format_duration(min))
                                     : fmt::format("at most {}{}", units::format_duration(max),
                                                   max == kMaxDuration ? " (a day), the longest wanlab accepts" : "")));
    return std::nullopt;
}

std::optional<std::uint64_t> Reader::rate(std::string_view key) {
    const Node* n = leaf(key);
    return n ? to_rate(*n, key, diag_) : std::nullopt;
}

std::optional<std::uint64_t> Reader::size(std::string_view key) {
    const Node* n = leaf(key);
    return n ? to_size(*n, key, diag_) : std::nullopt;
}

std::optional<double> Reader::gain(std::string_view key) {
    const Node* n = leaf(key);
    return n ? to_gain(*n, key, diag_) : std::nullopt;
}

std::optional<double> Reader::percent(std::string_view key) {
    const Node* n = leaf(key);
    return n ? to_percent(*n, key, diag_) : std::nullopt;
}

std::optional<std::int64_t> Reader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
    const Node* n = leaf(key);
    return n ? to_integer(*n, key, min, max, diag_) : std::nullopt;
}

std::optional<bool> Reader::boolean(std::string_view key) {
    const Node* n = leaf(key);
    if (!n) return std::nullopt;
    if (auto b = n->value->value_exact<bool>()) return *b;
    diag_.error(n->value_at, fmt::format("`{}` must be true or false, not {}", key, describe(*n)));
    return std::nullopt;
}

std::optional<std::string> Reader::string(std::string_view key) {
    const Node* n = leaf(key);
    if (!n) return std::nullopt;
    if (auto s = n->value->value_exact<std::string>()) return *s;
    diag_.error(n->value_at, fmt::format("`{}` must be a string, not {}", key, describe(*n)));
    return std::nullopt;
}

std::optional<std::string> Reader::choice(std::string_view key, const std::vector<std::string>& choices) {
    auto s = string(key);
    if (!s) return std::nullopt;
    if (std::find(choices.begin(), choices.end(), *s) != choices.end()) return s;
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + fmt::format("\"{}\"", c);
    auto guess = did_you_mean(*s, choices);
    diag_.error(value_at(key), fmt::format("`{}` = \"{}\" is not one of {}{}", key, *s, list,
                                           guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
    return std::nullopt;
}

const Node* Reader::table(std::string_view key) {
    const Node* n = raw(key);
    if (n && n->kind != Node::Kind::table) {
        diag_.error(n->value_at, fmt::format("`{}` in {} must be a table, not {}", key, section_, describe(*n)));
        return nullptr;
    }
    return n;
}

const Node* Reader::table_array(std::string_view key) {
    const Node* n = raw(key);
    if (n && n->kind != Node::Kind::table_array) {
        diag_.error(n->value_at,
                    fmt::format("`{}` must be an array of tables, written [[{}]], not {}", key, key, describe(*n)));
        return nullptr;
    }
    return n;
}

void Reader::finish() {
    for (const auto& [key, value] : table_.members) {
        if (std::find(asked_.begin(), asked_.end(), key) != asked_.end()) continue;
        const Location& at = value.key_at.line ? value.key_at : value.value_at;
        // Every trial reads the same base table: its unknown keys are reported once, and the
        // guess is not worked out again for each trial.
        if (diag_.reported_at(at)) continue;
        auto guess = did_you_mean(key, asked_);
        diag_.error(at, fmt::format("unknown key `{}` in {}{}", key, section_,
                                    guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
    }
}

Location Reader::key_at(std::string_view key) const {
    if (const Node* n = table_.find(key)) return n->key_at.line ? n->key_at : n->value_at;
    return table_.value_at;
}

Location Reader::value_at(std::string_view key) const {
    if (const Node* n = table_.find(key)) return n->value_at.line ? n->value_at : n->key_at;
    return table_.value_at;
}

}  // namespace wanlab::config
