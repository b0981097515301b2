#include "lab/experiment.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/address.h"
#include "core/error.h"
#include "core/units.h"
#include "lab/ssh_guard.h"
#include "lab/trials.h"
#include "probes/http.h"
#include "probes/probe.h"

namespace wanlab::lab {
namespace {

using config::Node;
using config::Reader;

const std::vector<std::string> kSweepRoots{"link", "sysctl", "probe", "lab"};

bool valid_variant_name(const std::string& s) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
}

// ---- merging documents -------------------------------------------------------------------

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

void merge_document(Node& base, const Node& overlay, Diagnostics& diag);

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

void merge_document(Node& base, const Node& overlay, Diagnostics& diag) {
    for (const auto& [key, value] : overlay.members) {
        Node* existing = base.find(key);
        if (existing && existing->kind == Node::Kind::table_array && value.is_table() &&
            (key == "probe" || key == "variant")) {
            merge_named_items(*existing, value, key.c_str(), key == "probe" ? "kind" : nullptr, diag);
        } else if (existing && existing->is_table() && value.is_table()) {
            merge_document(*existing, value, diag);
        } else if (!existing && value.is_table() && (key == "probe" || key == "variant")) {
            diag.error(value.key_at, fmt::format("`{}.{}...` names a [[{}]], but the experiment has none", key,
                                                 value.members.empty() ? "" : value.members.front().first, key));
        } else {
            base.set(key, value);
        }
    }
}

// ---- normalizing: dotted sysctl names and sweep paths -------------------------------------

void flatten_paths(const Node& table, const std::string& prefix, Node& out) {
    for (const auto& [key, value] : table.members) {
        std::string path = prefix.empty() ? key : prefix + "." + key;
        if (value.is_table() && !(prefix.empty() && key == "mode"))
            flatten_paths(value, path, out);
        else
            out.set(path, value);
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

// ---- sections ----------------------------------------------------------------------------

RunSpec parse_run(const Node* table, Diagnostics& diag) {
    RunSpec run;
    if (!table) return run;
    Reader r(*table, "[run]", diag);
    if (auto v = r.integer("repeats", 1, 1000)) run.repeats = static_cast<std::uint32_t>(*v);
    if (auto v = r.duration("warmup")) run.warmup = *v;
    if (auto v = r.duration("cooldown")) run.cooldown = *v;
    if (auto v = r.duration("duration")) {
        if (v->count() == 0)
            diag.error(r.value_at("duration"), "`duration` must be above zero");
        else
            run.duration = *v;
    }
    if (auto v = r.integer("seed", 0, std::numeric_limits<std::int64_t>::max())) run.seed = static_cast<std::uint64_t>(*v);
    if (auto v = r.string("baseline")) run.baseline = *v;
    r.finish();
    return run;
}

LabSpec parse_lab(const Node* table, Diagnostics& diag) {
    LabSpec lab;
    if (!table) return lab;
    Reader r(*table, "[lab]", diag);
    if (auto m = r.choice("mode", {"netns", "host"})) lab.mode = *m == "host" ? LabSpec::Mode::host : LabSpec::Mode::netns;
    if (auto v = r.string("dev")) lab.dev = *v;
    if (auto v = r.string("target")) lab.target = *v;
    if (auto v = r.integer("port", 1, 65535)) lab.port = static_cast<std::uint16_t>(*v);
    if (auto v = r.integer("mtu", 68, 65535)) lab.mtu = static_cast<std::uint32_t>(*v);
    if (auto v = r.boolean("offloads")) lab.offloads = *v;
    if (auto v = r.integer("queue_length", 1, 1'000'000)) lab.queue_length = static_cast<std::uint32_t>(*v);
    if (auto v = r.rate("line_rate")) {
        if (*v == 0)
            diag.error(r.value_at("line_rate"), "`line_rate` must be above zero");
        else
            lab.line_rate_bps = *v;
    }
    if (lab.mode == LabSpec::Mode::host) {
        if (lab.dev.empty())
            diag.error(r.key_at("mode"), "[lab] mode = \"host\" needs `dev`: the interface to impair, e.g. dev = \"eth0\"");
        if (lab.target.empty())
            diag.error(r.key_at("mode"),
                       "[lab] mode = \"host\" needs `target`: the address or prefix whose traffic is impaired, "
                       "so the rest of the machine (and your SSH session) is spared");
    } else {
        for (const char* key : {"dev", "target", "port"})
            if (r.has(key))
                diag.error(r.key_at(key), fmt::format("`{}` applies only to mode = \"host\"; a namespace lab makes its "
                                                      "own devices",
                                                      key));
    }
    if (!lab.target.empty() && !addr::parse_prefix(lab.target))
        diag.error(r.value_at("target"),
                   fmt::format("`target` = \"{}\" must be an IP address or prefix such as \"203.0.113.7\" or "
                               "\"203.0.113.0/24\"",
                               lab.target));
    r.finish();
    return lab;
}

// A profile file: description, source and one section ([link] or [sysctl]).
std::optional<Node> load_profile(const std::string& kind, const Node& name_node, const ProfileLibrary& profiles,
                                 config::Documents& docs, Diagnostics& diag) {
    auto name = name_node.kind == Node::Kind::value ? name_node.value->value_exact<std::string>() : std::nullopt;
    if (!name) {
        diag.error(name_node.value_at, fmt::format("`profile` must be a string naming a {} profile", kind));
        return std::nullopt;
    }
    auto path = profiles.find(kind, *name);
    if (!path) {
        auto names = profiles.names(kind);
        auto guess = did_you_mean(*name, names);
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        diag.error(name_node.value_at,
                   fmt::format("no {} profile named \"{}\"{}", kind, *name,
                               guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)),
                   list.empty() ? fmt::format("no {} profiles found in: {}", kind, fmt::join(profiles.dirs(), ", "))
                                : fmt::format("available: {}", list));
        return std::nullopt;
    }
    const toml::table* t = nullptr;
    std::ifstream in(*path);
    std::stringstream text;
    text << in.rdbuf();
    t = docs.parse(*path, text.str(), diag);
    if (!t) return std::nullopt;
    Node doc = config::from_toml(*t);
    normalize(doc, diag);
    Reader r(doc, fmt::format("{} profile \"{}\"", kind, *name), diag);
    r.string("description");
    r.string("source");
    const char* section = kind == "link" ? "link" : "sysctl";
    const Node* body = r.table(section);
    r.finish();
    if (!body) {
        diag.error(Location{*path, 0, 0, 0}, fmt::format("{} profile \"{}\" has no [{}] table", kind, *name, section));
        return std::nullopt;
    }
    if (body->find("profile"))
        diag.error(body->find("profile")->key_at, "a profile cannot name another profile");
    return *body;
}

// The user's table over the profile it names (the user's keys win).
Node with_profile(const Node& table, const std::string& kind, const ProfileLibrary& profiles,
                  config::Documents& docs, Diagnostics& diag) {
    const Node* name = table.find("profile");
    if (!name) return table;
    auto profile = load_profile(kind, *name, profiles, docs, diag);
    if (!profile) return table;
    Node merged = *profile;
    // The file's `delay` replaces a profile's `rtt` and the other way round: both set the
    // same thing, and the file wins.
    auto drop = [&](const char* key) {
        merged.members.erase(std::remove_if(merged.members.begin(), merged.members.end(),
                                            [&](const config::Member& m) { return m.first == key; }),
                             merged.members.end());
    };
    if (table.find("delay")) drop("rtt");
    if (table.find("rtt")) drop("delay");
    // A key the file sets for both directions also beats the profile's per-direction value
    // of it: the profile's [link.up] rate must not win over the file's [link] rate.
    for (auto& [sub, body] : merged.members) {
        if (sub != "up" && sub != "down") continue;
        std::erase_if(body.members, [&](const config::Member& m) {
            return (table.find(m.first) && !table.find(m.first)->is_table()) ||
                   (m.first == "delay" && table.find("rtt"));
        });
    }
    merged.key_at = table.key_at;
    merged.value_at = table.value_at;
    config::merge(merged, table);
    return merged;
}

}  // namespace

void merge_overlay(Node& base, const Node& overlay, Diagnostics& diag) { merge_document(base, overlay, diag); }

namespace {

// Host mode's probes run here against servers already running on the target, through the
// target filter: each must be one that needs no wanlab server there, and its traffic must be
// what the filter impairs.
void check_host_probes(const Trial& t, Diagnostics& diag) {
    const auto& lab = t.lab;
    auto target = addr::parse_prefix(lab.target);
    if (!target) return;  // reported at the key
    bool single = target->single();
    bool v4 = target->family == AF_INET;
    for (const auto& p : t.probes) {
        if (p.kind.empty()) continue;
        auto where = [&](const std::string& why) {
            diag.error(p.at, fmt::format("probe `{}` in [lab] mode = \"host\": {}", p.name, why));
        };
        if (auto why = probes::remote_unsupported(p, lab.port); !why.empty()) {
            where(why);
            continue;
        }
        auto url = p.options.find("url");
        if (url != p.options.end() && !std::get<std::string>(url->second).empty()) {
            probes::http::Url u;
            try {
                u = probes::http::parse_url(std::get<std::string>(url->second));
            } catch (const InputError&) {
                continue;  // reported where the url is read
            }
            if (spared(u.address, lab.target, lab.port, u.port))
                where(fmt::format("its url ({}:{}) is outside [lab] target = \"{}\"{}: the probe would measure an "
                                  "unimpaired path",
                                  u.address, u.port, lab.target,
                                  lab.port ? fmt::format(", port = {}", lab.port) : std::string()));
            continue;
        }
        if (!v4)
            where("the probes connect over IPv4 only: give an IPv4 [lab] target");
        else if (!single)
            where(fmt::format("the probe connects to the target, so [lab] target must be one address, not the prefix "
                              "\"{}\" (or use an http probe with a url inside it)",
                              lab.target));
    }
}


// Where the run happens is one place for all its trials: the mode, and in host mode the
// interface, target filter and line rate. (A namespace lab's mtu, offloads and queue
// length may vary: the lab is rebuilt for them.)
void check_one_place(const Node& doc, const Experiment& exp, Diagnostics& diag) {
    if (exp.trials.size() < 2) return;
    const auto& first = exp.trials.front().lab;
    for (const auto& t : exp.trials) {
        const auto& l = t.lab;
        std::string key = l.mode != first.mode ? "mode"
                          : first.mode == LabSpec::Mode::netns ? ""
                          : l.dev != first.dev                ? "dev"
                          : l.target != first.target          ? "target"
                          : l.port != first.port              ? "port"
                          : l.line_rate_bps != first.line_rate_bps ? "line_rate"
                                                                   : "";
        if (key.empty()) continue;
        // Point at the sweep key or the variant's [lab] that makes the difference.
        Location at{exp.file};
        if (const Node* sweep = doc.find("sweep"))
            for (const auto& [k, v] : sweep->members)
                if (k == "lab." + key) at = v.key_at;
        if (at.line == 0)
            if (const Node* variants = doc.find("variant"))
                for (const auto& v : variants->items)
                    if (const Node* lab = v.find("lab"); lab && lab->find(key)) at = lab->find(key)->key_at;
        diag.error(at, fmt::format("[lab] {} differs between trials (trial {}, variant {}, against trial 1): a run "
                                   "happens in one place{}; run one experiment per value",
                                   key, t.index, t.variant,
                                   first.mode == LabSpec::Mode::host ? ", and host mode impairs one interface toward one target" : ""));
        return;
    }
}

}  // namespace

std::vector<std::string> LabSpec::hosts() const {
    if (mode == Mode::host) return {"host"};
    return {"client", "router", "server"};
}

// Parses one fully merged document (base + variant + sweep point) into a trial.
Trial parse_trial(const Node& doc, const RunSpec& run, const ProfileLibrary& profiles, config::Documents& docs,
                  Diagnostics& diag) {
    Trial t;
    Reader r(doc, "the experiment", diag);
    // Top-level keys are checked by load_experiment; here only the sections are read.
    const Node* lab = r.table("lab");
    t.lab = parse_lab(lab, diag);
    Node empty;
    const Node* link = r.table("link");
    Node link_table = link ? with_profile(*link, "link", profiles, docs, diag) : empty;
    if (!link) link_table.value_at = doc.value_at;
    t.link = netem::parse_link(link_table, diag);
    netem::validate_link(t.link, diag);
    netem::resolve_limit(t.link.up, t.lab.line_rate_bps, t.lab.mtu, diag);
    netem::resolve_limit(t.link.down, t.lab.line_rate_bps, t.lab.mtu, diag);
    const Node* sys = r.table("sysctl");
    Node sys_table = sys ? with_profile(*sys, "tuning", profiles, docs, diag) : empty;
    t.sysctl = sysctl::parse_sysctls(sys_table, t.lab.hosts(), diag);
    if (const Node* probes = r.table_array("probe")) {
        for (std::size_t i = 0; i < probes->items.size(); ++i) {
            auto p = probes::parse_probe(probes->items[i], i, run.duration, diag);
            auto dup = std::find_if(t.probes.begin(), t.probes.end(), [&](const auto& q) { return q.name == p.name; });
            if (!p.kind.empty() && dup != t.probes.end())
                diag.error(p.at, fmt::format("two probes are named `{}`: give each a distinct `name`", p.name));
            t.probes.push_back(std::move(p));
        }
    }
    if (t.lab.mode == LabSpec::Mode::host) check_host_probes(t, diag);
    return t;
}

namespace {

std::vector<std::string> parse_variants(Node& doc, Diagnostics& diag) {
    std::vector<std::string> names;
    Node* variants = doc.find("variant");
    if (!variants) return names;
    if (variants->kind != Node::Kind::table_array) {
        diag.error(variants->key_at.line ? variants->key_at : variants->value_at,
                   "`variant` must be an array of tables, written [[variant]] with a `name` each");
        return names;
    }
    for (std::size_t i = 0; i < variants->items.size(); ++i) {
        const Node& v = variants->items[i];
        Reader r(v, fmt::format("[[variant]] #{}", i + 1), diag);
        auto name = r.string("name");
        r.string("description");
        r.table("link");
        r.table("sysctl");
        r.table("probe");
        r.finish();
        if (!r.has("name")) {
            diag.error(v.value_at, fmt::format("[[variant]] #{} needs a `name`", i + 1));
            continue;
        }
        if (!name) continue;
        if (!valid_variant_name(*name)) {
            diag.error(r.value_at("name"),
                       fmt::format("variant name \"{}\" must be 1-64 letters, digits, `-` or `_`", *name));
            continue;
        }
        if (std::find(names.begin(), names.end(), *name) != names.end()) {
            diag.error(r.value_at("name"), fmt::format("two variants are named \"{}\": names must be unique", *name));
            continue;
        }
        names.push_back(*name);
    }
    return names;
}

void check_asserts(const Node* table_array, const Experiment& exp, const std::vector<probes::ProbeSpec>& probes,
                   Diagnostics& diag, std::vector<AssertSpec>& out) {
    if (!table_array) return;
    std::vector<std::string> probe_names;
    for (const auto& p : probes) probe_names.push_back(p.name);
    for (std::size_t i = 0; i < table_array->items.size(); ++i) {
        const Node& t = table_array->items[i];
        Reader r(t, fmt::format("[[assert]] #{}", i + 1), diag);
        AssertSpec a;
        a.at = t.value_at;
        auto metric = r.string("metric");
        auto probe = r.string("probe");
        auto variant = r.string("variant");
        const Node* at_least = r.raw("at_least");
        const Node* at_most = r.raw("at_most");
        auto gain = r.percent("min_gain");
        std::size_t errors_before = diag.error_count();
        r.finish();
        // A misspelt key is the real problem; "needs a bound" on top of it would be noise.
        if (diag.error_count() > errors_before) continue;
        if (!r.has("metric")) {
            diag.error(t.value_at, fmt::format("[[assert]] #{} needs `metric`", i + 1));
            continue;
        }
        if (!at_least && !at_most && !r.has("min_gain")) {
            diag.error(t.value_at, fmt::format("[[assert]] #{} needs a bound: `at_least`, `at_most` or `min_gain`", i + 1));
            continue;
        }
        if (!metric) continue;
        a.metric = *metric;
        // Which probe: the one named, or the only probe whose kind has this metric.
        const probes::ProbeSpec* target = nullptr;
        if (probe) {
            for (const auto& p : probes)
                if (p.name == *probe) target = &p;
            if (!target) {
                auto guess = did_you_mean(*probe, probe_names);
                diag.error(r.value_at("probe"), fmt::format("no probe named `{}`{}", *probe,
                                                            guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)));
                continue;
            }
        } else {
            std::vector<const probes::ProbeSpec*> with;
            for (const auto& p : probes)
                if (const auto* k = probes::find_kind(p.kind); k && probes::find_metric(*k, *metric)) with.push_back(&p);
            if (with.size() > 1) {
                diag.error(r.key_at("metric"), fmt::format("several probes report `{}`: say which with `probe`", *metric));
                continue;
            }
            if (!with.empty()) target = with.front();
        }
        std::vector<std::string> metric_names;
        const probes::MetricSpec* m = nullptr;
        if (target) {
            const auto* kind = probes::find_kind(target->kind);
            for (const auto& ms : kind->metrics) metric_names.emplace_back(ms.name);
            m = probes::find_metric(*kind, *metric);
        } else {
            for (const auto& p : probes)
                if (const auto* k = probes::find_kind(p.kind))
                    for (const auto& ms : k->metrics) metric_names.emplace_back(ms.name);
        }
        if (!m) {
            auto guess = did_you_mean(*metric, metric_names);
            std::string list;
            for (const auto& n : metric_names) list += (list.empty() ? "" : ", ") + n;
            diag.error(r.value_at("metric"),
                       fmt::format("unknown metric `{}`{}{}", *metric,
                                   target ? fmt::format(" for probe `{}`", target->name) : "",
                                   guess.empty() ? "" : fmt::format("; did you mean `{}`?", guess)),
                       list.empty() ? "the experiment has no probes" : fmt::format("metrics: {}", list));
            continue;
        }
        a.probe = target->name;
        if (variant) {
            if (std::find(exp.variants.begin(), exp.variants.end(), *variant) == exp.variants.end()) {
                auto guess = did_you_mean(*variant, exp.variants);
                diag.error(r.value_at("variant"), fmt::format("no variant named \"{}\"{}", *variant,
                                                              guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
                continue;
            }
            a.variant = *variant;
            if (gain && *variant == exp.run.baseline)
                diag.error(r.value_at("variant"), fmt::format("`min_gain` compares a variant with the baseline; \"{}\" "
                                                              "is the baseline itself",
                                                              *variant));
        }
        if (gain && exp.variants.size() < 2)
            diag.error(r.key_at("min_gain"), "`min_gain` needs at least two variants: a gain is measured against the baseline");
        a.min_gain = gain;
        auto bound = [&](const Node* n, const char* key) -> std::optional<double> {
            if (!n) return std::nullopt;
            switch (m->unit) {
                case probes::Unit::bits_per_second:
                    if (auto v = config::to_rate(*n, key, diag)) return static_cast<double>(*v);
                    return std::nullopt;
                case probes::Unit::seconds:
                    if (auto v = config::to_duration(*n, key, diag)) return static_cast<double>(v->count()) / 1e9;
                    return std::nullopt;
                case probes::Unit::fraction: return config::to_percent(*n, key, diag);
                case probes::Unit::bytes:
                    if (auto v = config::to_size(*n, key, diag)) return static_cast<double>(*v);
                    return std::nullopt;
                default:
                    if (n->kind == Node::Kind::value && n->value->is_number()) return n->value->value<double>();
                    diag.error(n->value_at, fmt::format("`{}` for `{}` must be a number", key, m->name));
                    return std::nullopt;
            }
        };
        a.at_least = bound(at_least, "at_least");
        a.at_most = bound(at_most, "at_most");
        if (a.at_least && a.at_most && *a.at_least > *a.at_most)
            diag.error(r.key_at("at_most"), "`at_most` is below `at_least`: no measurement can pass");
        out.push_back(a);
    }
}

}  // namespace

std::optional<Experiment> load_experiment(const std::string& file, const std::string& text,
                                          const std::vector<std::string>& sets, const ProfileLibrary& profiles,
                                          config::Documents& docs, Diagnostics& diag) {
    const toml::table* parsed = docs.parse(file, text, diag);
    if (!parsed) return std::nullopt;
    Node doc = config::from_toml(*parsed);
    doc.value_at = Location{file, 0, 0, 0};
    normalize(doc, diag);
    std::vector<Node> overlays;
    for (std::size_t i = 0; i < sets.size(); ++i)
        if (auto overlay = parse_set(sets[i], i + 1, docs, diag)) {
            merge_document(doc, *overlay, diag);
            overlays.push_back(std::move(*overlay));
        }
    warn_sets_under_sweep(doc, overlays, diag);

    Experiment exp;
    exp.file = file;
    exp.sets = sets;
    Reader top(doc, "the experiment", diag);
    auto name = top.string("name");
    auto description = top.string("description");
    exp.run = parse_run(top.table("run"), diag);
    top.table("lab");
    top.table("link");
    top.table("sysctl");
    top.table_array("probe");
    const Node* sweep = top.table("sweep");
    top.raw("variant");
    const Node* asserts = top.table_array("assert");
    top.finish();
    exp.name = name ? *name : std::filesystem::path(file).stem().string();
    exp.description = description.value_or("");

    exp.variants = parse_variants(doc, diag);
    bool implicit_variant = exp.variants.empty();
    if (implicit_variant) exp.variants.push_back("default");
    if (exp.run.baseline.empty()) {
        exp.run.baseline = exp.variants.front();
    } else if (std::find(exp.variants.begin(), exp.variants.end(), exp.run.baseline) == exp.variants.end()) {
        const Node* run = doc.find("run");
        auto guess = did_you_mean(exp.run.baseline, exp.variants);
        diag.error(run && run->find("baseline") ? run->find("baseline")->value_at : Location{file},
                   fmt::format("[run] baseline = \"{}\" names no variant{}", exp.run.baseline,
                               guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess)));
    }

    auto points = sweep_points(sweep, exp, diag);
    // With a broken sweep, still check the rest of the file once, at the first point.
    if (diag.has_errors() && points.size() > 1) points.resize(1);
    if (points.empty()) points.emplace_back();
    exp.trials = expand_trials(doc, exp, points, implicit_variant, profiles, docs, diag);
    check_one_place(doc, exp, diag);
    if (!exp.trials.empty()) check_asserts(asserts, exp, exp.trials.front().probes, diag, exp.asserts);
    if (diag.has_errors()) return std::nullopt;
    return exp;
}

}  // namespace wanlab::lab
