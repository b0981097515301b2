#include "experiment/document.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "sysctl/sysctl_spec.h"

namespace wanlab::experiment {
namespace {

using config::Node;

const Node* member_string(const Node& table, const char* key) {
    const Node* n = table.find(key);
    return n && n->kind == Node::Kind::value && n->value->is_string() ? n : nullptr;
}

std::string name_of(const Node& item, const char* fallback_key) {
    if (const Node* n = member_string(item, "name")) return *n->value->value<std::string>();
    if (fallback_key)
        if (const Node* n = member_string(item, fallback_key)) return *n->value->value<std::string>();
    return {};
}

// `probe.NAME.opt` and `variant.NAME.x` address [[probe]] / [[variant]] items by name (a probe
// without a name is called by its kind).
void merge_named_items(Node& array, const Node& overlay, const char* what, const char* fallback, Diagnostics& diag) {
    for (const auto& member : overlay.members) {
        const std::string& name = member.first;
        const Node& value = member.second;
        auto it = std::find_if(array.items.begin(), array.items.end(),
                               [&](const Node& item) { return name_of(item, fallback) == name; });
        if (it == array.items.end()) {
            std::vector<std::string> names;
            for (const auto& item : array.items) names.push_back(name_of(item, fallback));
            auto guess = did_you_mean(name, names);
            std::string list;
            for (const auto& n : names) list += (list.empty() ? "" : ", ") + fmt::format("`{}`", n);
            diag.error(value.key_at, fmt::format("no [[{}]] named `{}`{}{}", what, name,
                                                 list.empty() ? "" : fmt::format(" (there are: {})", list),
                                                 guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
            continue;
        }
        if (!value.is_table()) {
            diag.error(value.value_at, fmt::format("`{}.{}` must be a table of {} keys", what, name, what));
            continue;
        }
        merge_document(*it, value, diag);
    }
}

// `link.schedule.2.outage` addresses the second [[link.schedule]] entry, numbered as its
// messages number it (#2): a sweep or --set changes one key of one entry.
void merge_numbered_items(Node& array, const Node& overlay, const std::string& what, Diagnostics& diag) {
    for (const auto& [name, value] : overlay.members) {
        std::size_t n = 0;
        bool number = !name.empty() && name.size() < 6 &&
                      std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (number) n = std::stoul(name);
        if (!number || n == 0 || n > array.items.size()) {
            diag.error(value.key_at,
                       fmt::format("`{}.{}` names no [[{}]] entry: they are numbered 1 to {}", what, name, what,
                                   array.items.size()),
                       fmt::format("`{}.2.outage` is the second entry's outage", what));
            continue;
        }
        if (!value.is_table()) {
            diag.error(value.value_at, fmt::format("`{}.{}` must be a table of the entry's keys", what, name));
            continue;
        }
        merge_document(array.items[n - 1], value, diag);
    }
}

// ---- normalizing: dotted sysctl names and sweep paths -------------------------------------

// Table headers and dotted keys nest a path ([sweep.link] rtt = [...]); an inline table is a
// key's named values ("link.rtt" = { near = "20ms", far = "80ms" }) and stays whole.
void flatten_paths(const Node& table, const std::string& prefix, Node& out) {
    for (const auto& [key, value] : table.members) {
        std::string path = prefix.empty() ? key : prefix + "." + key;
        if (value.is_table() && !value.inline_table && !(prefix.empty() && key == "mode"))
            flatten_paths(value, path, out);
        else
            out.set(path, value);
    }
}

}  // namespace

void merge_document(Node& base, const Node& overlay, Diagnostics& diag) {
    for (const auto& [key, value] : overlay.members) {
        Node* existing = base.find(key);
        if (existing && existing->kind == Node::Kind::table_array && value.is_table() &&
            (key == "probe" || key == "variant" || key == "service")) {
            merge_named_items(*existing, value, key.c_str(), key == "probe" ? "kind" : nullptr, diag);
        } else if (existing && existing->kind == Node::Kind::table_array && value.is_table() && key == "schedule") {
            merge_numbered_items(*existing, value, "link.schedule", diag);
        } else if (existing && existing->is_table() && value.is_table()) {
            merge_document(*existing, value, diag);
        } else if (!existing && value.is_table() && (key == "probe" || key == "variant" || key == "service")) {
            diag.error(value.key_at, fmt::format("`{}.{}...` names a [[{}]], but the experiment has none", key,
                                                 value.members.empty() ? "" : value.members.front().first, key));
        } else {
            base.set(key, value);
        }
    }
}

void normalize(Node& doc, Diagnostics& diag) {
    if (Node* s = doc.find("sysctl"); s && s->is_table()) sysctl::normalize_sysctl_table(*s, diag);
    if (Node* sweep = doc.find("sweep"); sweep && sweep->is_table()) {
        Node flat;
        flat.kind = Node::Kind::table;
        flat.key_at = sweep->key_at;
        flat.value_at = sweep->value_at;
        flatten_paths(*sweep, "", flat);
        *sweep = std::move(flat);
    }
    if (Node* variants = doc.find("variant"); variants && variants->kind == Node::Kind::table_array)
        for (auto& v : variants->items)
            if (Node* s = v.find("sysctl"); s && s->is_table()) sysctl::normalize_sysctl_table(*s, diag);
    if (Node* variants = doc.find("variant"); variants && variants->is_table())
        for (auto& [name, v] : variants->members)
            if (Node* s = v.find("sysctl"); s && s->is_table()) sysctl::normalize_sysctl_table(*s, diag);
}

// ---- --set -------------------------------------------------------------------------------

std::optional<Node> parse_set(const std::string& arg, std::size_t n, config::Documents& docs, Diagnostics& diag) {
    std::string name = fmt::format("--set#{}", n);
    auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
        docs.sources().add(name, arg);
        diag.error(Location{name, 1, 1, static_cast<std::uint32_t>(arg.size() + 1)},
                   fmt::format("`--set {}` needs the form KEY=VALUE, e.g. --set link.delay=20ms", arg));
        return std::nullopt;
    }
    // A value that is valid TOML (a number, a quoted string, an array) is taken as it is;
    // anything else is read as a string, so `--set link.delay=20ms` needs no quotes.
    Diagnostics scratch;
    const toml::table* t = docs.parse(name, arg, scratch);
    if (!t) {
        std::string quoted = arg.substr(0, eq + 1) + "\"" + arg.substr(eq + 1) + "\"";
        t = docs.parse(name, quoted, diag);
        if (!t) return std::nullopt;
        docs.sources().add(name, arg);  // show what the user typed, not the added quotes
    }
    Node node = config::from_toml(*t);
    normalize(node, diag);
    return node;
}

// A --set of a key the sweep also sets has no effect: the sweep point is applied last.
void warn_sets_under_sweep(const Node& doc, const std::vector<Node>& overlays, Diagnostics& diag) {
    const Node* sweep = doc.find("sweep");
    if (!sweep || !sweep->is_table()) return;
    for (const auto& overlay : overlays) {
        Node flat;
        flat.kind = Node::Kind::table;
        for (const auto& m : overlay.members)
            if (m.first != "sweep" && m.first != "variant" && m.second.is_table()) {
                Node one;
                one.kind = Node::Kind::table;
                one.members.emplace_back(m.first, m.second);
                flatten_paths(one, "", flat);
            }
        for (const auto& m : flat.members)
            if (sweep->find(m.first))
                diag.warning(m.second.key_at, fmt::format("`{}` is swept in [sweep], so this --set has no effect; "
                                                          "override the sweep instead: --set 'sweep.\"{}\"=[...]'",
                                                          m.first, m.first));
    }
}

}  // namespace wanlab::experiment
