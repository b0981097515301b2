#include "experiment/sections.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/address.h"
#include "core/error.h"
#include "core/placeholders.h"
#include "core/sys.h"
#include "core/text.h"
#include "core/units.h"
#include "experiment/document.h"
#include "probes/group.h"
#include "probes/http.h"
#include "probes/probe.h"

namespace wanlab::experiment {

std::vector<std::string> ssh_command_lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    for (std::size_t n = 1; std::getline(in, line); ++n) {
        std::string lower;
        for (char c : line) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto start = lower.find_first_not_of(" \t");
        if (start == std::string::npos || lower[start] == '#') continue;
        auto end = lower.find_first_of(" \t=", start);
        auto keyword = lower.substr(start, end == std::string::npos ? std::string::npos : end - start);
        bool runs = keyword == "proxycommand" || keyword == "localcommand" || keyword == "knownhostscommand" ||
                    keyword == "include" || (keyword == "match" && lower.find("exec", start) != std::string::npos);
        if (runs) out.push_back(fmt::format("line {}: {}", n, text::terminal_safe(line.substr(start, 200))));
    }
    return out;
}

namespace {

using config::Node;
using config::Reader;

// The ssh host of a destination ("user@host" -> "host"), as an address probes can connect
// to, or "" when it is a name (an alias of the user's ssh config, a DNS name).
std::string address_of(const std::string& ssh) {
    auto host = ssh.substr(ssh.find('@') == std::string::npos ? 0 : ssh.find('@') + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    auto p = addr::parse_prefix(host);
    return p && p->single() ? host : "";
}

// [hosts] and its [hosts.NAME] tables (hosts mode): the machines, each a role.
void parse_machines(const Node* table, LabSpec& lab, const Location& mode_at, Diagnostics& diag) {
    if (lab.mode != LabSpec::Mode::hosts) {
        if (table)
            diag.error(table->key_at,
                       "[hosts] applies only to [lab] mode = \"hosts\" (experiments across real machines)");
        return;
    }
    if (!table) {
        diag.error(mode_at, "[lab] mode = \"hosts\" needs [hosts.client] and [hosts.server], each with `ssh`",
                   "e.g. [hosts.client] ssh = \"local\" and [hosts.server] ssh = \"root@203.0.113.7\"");
        return;
    }
    Reader r(*table, "[hosts]", diag);
    if (auto v = r.string("ssh_config")) {
        lab.ssh_config = *v;
        try {
            lab.ssh_commands = ssh_command_lines(sys::read_file(*v, sys::kMaxInputBytes, "[hosts] ssh_config"));
            lab.ssh_config_read = true;
        } catch (const Error&) {
            // ssh reads it when the run starts; plan says it could not be read here
        }
        if (!lab.ssh_commands.empty())
            diag.warning(r.value_at("ssh_config"),
                         fmt::format("[hosts] ssh_config {} makes ssh run commands, as the user running wanlab (root "
                                     "for a run): {}",
                                     text::terminal_safe(*v), fmt::join(lab.ssh_commands, "; ")),
                         "read them: a run refuses the file unless it is given --allow-ssh-commands; `wanlab plan` "
                         "lists them too");
    }
    for (const char* role : {"client", "server", "router"}) {
        const Node* t = r.table(role);
        if (!t) {
            if (std::string(role) != "router")
                diag.error(table->key_at, fmt::format("[lab] mode = \"hosts\" needs [hosts.{}] with `ssh`", role));
            continue;
        }
        Machine m;
        m.name = role;
        m.at = t->key_at;
        Reader h(*t, fmt::format("[hosts.{}]", role), diag);
        if (auto v = h.string("ssh")) {
            if (*v != "local") {
                if (auto why = addr::ssh_destination_problem(*v); !why.empty())
                    diag.error(h.value_at("ssh"), fmt::format("`ssh` = \"{}\": {}", *v, why));
            }
            m.ssh = *v;
        } else {
            diag.error(t->key_at, fmt::format("[hosts.{}] needs `ssh`: \"local\", or user@host as ssh takes it", role));
        }
        if (auto v = h.string("address")) {
            auto p = addr::parse_prefix(*v);
            if (!p || !p->single())
                diag.error(h.value_at("address"),
                           fmt::format("`address` = \"{}\" must be one IPv4 or IPv6 address", *v));
            m.address = *v;
        } else if (m.ssh != "local") {
            m.address = address_of(m.ssh);
        }
        if (auto v = h.string("wanlab")) m.wanlab = *v;
        if (std::string(role) == "server") {
            if (auto v = h.integer("probe_port", 1, 65535)) m.probe_port = static_cast<std::uint16_t>(*v);
        } else {
            if (auto v = h.string("dev")) {
                if (auto why = sys::device_name_problem(*v); !why.empty())
                    diag.error(h.value_at("dev"), fmt::format("`dev` = \"{}\": {}", *v, why));
                else
                    m.dev = *v;
            }
        }
        h.finish();
        if (std::string(role) == "router" && m.ssh == "local")
            diag.error(h.value_at("ssh"),
                       "[hosts.router] is the middle box between this machine (the client) and the server: another "
                       "machine, reached over ssh",
                       "without a middle box, leave [hosts.router] out: [link] then goes on this machine's interface "
                       "toward the server");
        else if (std::string(role) == "server" && m.address.empty() && !m.ssh.empty())
            diag.error(t->key_at,
                       fmt::format("[hosts.server] needs `address` (the address probes connect to): `ssh` = \"{}\" "
                                   "names no IP address",
                                   m.ssh));
        lab.machines.push_back(std::move(m));
    }
    r.finish();
}

LabSpec parse_lab(const Node* table, Diagnostics& diag) {
    LabSpec lab;
    if (!table) return lab;
    Reader r(*table, "[lab]", diag);
    if (auto m = r.choice("mode", {"netns", "host", "hosts"}))
        lab.mode = *m == "host" ? LabSpec::Mode::host : *m == "hosts" ? LabSpec::Mode::hosts : LabSpec::Mode::netns;
    if (auto v = r.string("dev")) {
        if (auto why = sys::device_name_problem(*v); !why.empty())
            diag.error(r.value_at("dev"), fmt::format("`dev` = \"{}\": {}", *v, why));
        else
            lab.dev = *v;
    }
    if (auto v = r.string("target")) lab.target = *v;
    if (auto v = r.integer("port", 1, 65535)) lab.port = static_cast<std::uint16_t>(*v);
    if (auto v = r.integer("mtu", 68, 65535)) lab.mtu = static_cast<std::uint32_t>(*v);
    if (auto v = r.boolean("offloads")) lab.offloads = *v;
    if (auto v = r.integer("queue_length", 1, 1'000'000)) lab.queue_length = static_cast<std::uint32_t>(*v);
    if (auto v = r.choice("ip", {"ipv4", "ipv6", "dual"}))
        lab.ip = *v == "ipv6" ? LabSpec::Ip::v6 : *v == "dual" ? LabSpec::Ip::dual : LabSpec::Ip::v4;
    if (auto v = r.rate("line_rate")) {
        if (*v == 0)
            diag.error(r.value_at("line_rate"), "`line_rate` must be above zero");
        else
            lab.line_rate_bps = *v;
    }
    if (lab.mode != LabSpec::Mode::netns && r.has("ip"))
        diag.error(r.key_at("ip"),
                   fmt::format("`ip` chooses the namespace lab's addresses; in mode = \"{}\" the family is that of "
                               "the {}",
                               lab.mode == LabSpec::Mode::host ? "host" : "hosts",
                               lab.mode == LabSpec::Mode::host ? "`target`" : "machines' `address`"),
                   "remove `ip`");
    if (lab.mode == LabSpec::Mode::host) {
        if (lab.dev.empty() && !r.has("dev"))  // an invalid one is reported where it is
            diag.error(r.key_at("mode"),
                       "[lab] mode = \"host\" needs `dev`: the interface to impair, e.g. dev = \"eth0\"");
        if (lab.target.empty())
            diag.error(r.key_at("mode"),
                       "[lab] mode = \"host\" needs `target`: the address or prefix whose traffic is impaired, "
                       "so the rest of the machine (and your SSH session) is spared");
    } else if (lab.mode == LabSpec::Mode::netns) {
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
    std::string text;
    try {
        text = sys::read_file(*path, sys::kMaxInputBytes, fmt::format("{} profile", kind));
    } catch (const Error& e) {
        diag.error(name_node.value_at, e.what());
        return std::nullopt;
    }
    const toml::table* t = docs.parse(*path, text, diag);
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
    if (body->find("profile")) diag.error(body->find("profile")->key_at, "a profile cannot name another profile");
    return *body;
}

// The user's table over the profile it names (the user's keys win).
Node with_profile(const Node& table, const std::string& kind, const ProfileLibrary& profiles, config::Documents& docs,
                  Diagnostics& diag) {
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

// Host mode's probes run here against servers already running on the target, through the
// target filter: each must be one that needs no wanlab server there, and its traffic must be
// what the filter impairs.
void check_host_probes(const Trial& t, Diagnostics& diag) {
    const auto& lab = t.lab;
    auto target = addr::parse_prefix(lab.target);
    if (!target) return;  // reported at the key
    bool single = target->single();
    for (const auto& p : t.probes) {
        if (p.kind.empty()) continue;
        auto where = [&](const std::string& why) {
            diag.error(p.at, fmt::format("probe `{}` in [lab] mode = \"host\": {}", p.name, why));
        };
        if (auto sp = p.options.find("server_port"); sp != p.options.end() && std::get<std::int64_t>(sp->second)) {
            where("`server_port` is for a [[service]] in the namespace lab; toward a target, set [lab] port");
            continue;
        }
        if (!probes::traits_of(p.kind).has_server_half) continue;  // the user's own command goes where it goes
        if (auto why = probes::remote_unsupported(p, lab.port); !why.empty()) {
            where(why);
            continue;
        }
        auto url = p.options.find("url");
        if (url != p.options.end() && !std::get<std::string>(url->second).empty()) {
            probes::http::Url u;
            try {
                auto address = lab.target.substr(0, lab.target.find('/'));
                u = probes::http::parse_url(
                    text::expand(std::get<std::string>(url->second), {{"server", address}, {"client", ""}}, "url"));
            } catch (const InputError&) {
                continue;  // reported where the url is read
            }
            if (addr::spared(u.address, lab.target, lab.port, u.port))
                where(fmt::format(
                    "its url ({}:{}) is outside [lab] target = \"{}\"{}: the probe would measure an "
                    "unimpaired path",
                    u.address, u.port, lab.target, lab.port ? fmt::format(", port = {}", lab.port) : std::string()));
            continue;
        }
        if (!single)
            where(
                fmt::format("the probe connects to the target, so [lab] target must be one address, not the prefix "
                            "\"{}\" (or use an http probe with a url inside it)",
                            lab.target));
    }
}

// The families probes may connect over: the namespace lab's `ip`, the family of host mode's
// target, or of hosts mode's server address. Empty when the address is reported elsewhere.
std::vector<int> lab_families(const Trial& t) {
    auto of = [](const std::string& address) -> std::vector<int> {
        auto p = addr::parse_prefix(address);
        return p ? std::vector<int>{p->family} : std::vector<int>{};
    };
    switch (t.lab.mode) {
        case LabSpec::Mode::netns: {
            std::vector<int> f;
            if (t.lab.has_ipv4()) f.push_back(AF_INET);
            if (t.lab.has_ipv6()) f.push_back(AF_INET6);
            return f;
        }
        case LabSpec::Mode::host: return of(t.lab.target);
        case LabSpec::Mode::hosts:
            for (const auto& m : t.lab.machines)
                if (m.name == "server") return of(m.address);
            return {};
    }
    return {};
}

// A probe's `family` must be one the lab has, and what it runs must speak it: hping3 is
// IPv4 only.
void check_probe_families(const Trial& t, Diagnostics& diag) {
    auto families = lab_families(t);
    if (families.empty()) return;
    auto name = [](int f) { return f == AF_INET6 ? "ipv6" : "ipv4"; };
    for (const auto& p : t.probes) {
        if (p.kind.empty()) continue;
        int f = probes::probe_family(p);
        if (f != AF_UNSPEC && std::find(families.begin(), families.end(), f) == families.end()) {
            std::string lab = t.lab.mode == LabSpec::Mode::netns  ? fmt::format("[lab] ip = \"{}\"", t.lab.ip_name())
                              : t.lab.mode == LabSpec::Mode::host ? fmt::format("[lab] target = \"{}\"", t.lab.target)
                                                                  : std::string("[hosts.server] address");
            diag.error(p.at,
                       fmt::format("probe `{}` has family = \"{}\", but {} gives no {} address", p.name, name(f), lab,
                                   f == AF_INET6 ? "IPv6" : "IPv4"),
                       t.lab.mode == LabSpec::Mode::netns ? std::string("set [lab] ip = \"dual\" to measure over both")
                                                          : std::string("remove `family` to use the target's"));
            continue;
        }
        if (f == AF_UNSPEC) f = families.front();
        auto tool = p.options.find("tool");
        if (f == AF_INET6 && tool != p.options.end() && std::get<std::string>(tool->second) == "hping3")
            diag.error(p.at,
                       fmt::format("probe `{}`: hping3 speaks IPv4 only, and this probe measures over IPv6", p.name),
                       "use tool = \"builtin\" with method = \"tcp\" (it times the same handshake)");
    }
}

// A probe with `server_port` measures against a service on the lab's server host: only a
// probe that can measure against a server it did not start may.
void check_service_probes(const Trial& t, Diagnostics& diag) {
    for (const auto& p : t.probes) {
        auto sp = p.options.find("server_port");
        if (sp == p.options.end() || std::get<std::int64_t>(sp->second) == 0) continue;
        auto port = static_cast<std::uint16_t>(std::get<std::int64_t>(sp->second));
        if (auto why = probes::remote_unsupported(p, port); !why.empty())
            diag.error(p.at, fmt::format("probe `{}` with `server_port`: {}", p.name, why));
        else if (t.services.empty())
            diag.error(p.at, fmt::format("probe `{}` has `server_port` = {} but the experiment has no [[service]] to "
                                         "listen there",
                                         p.name, port));
    }
}

// Probes that share a `group` run at the same time for one duration (probes/group.h): a
// group has two probes or more, a name no probe has, and one `duration` (a member that gives
// none takes the group's); an rtt member that gives no `count` probes for the whole duration.
void check_groups(Trial& t, Diagnostics& diag) {
    for (const auto& g : probes::probe_groups(t.probes)) {
        if (g.name.empty()) continue;
        const auto& first = *g.members.front();
        if (g.members.size() < 2) {
            diag.error(first.at,
                       fmt::format("probe `{}` is the only probe of group `{}`: a group runs probes at the same time",
                                   first.name, g.name),
                       "give another probe the same `group`, or remove `group`");
            continue;
        }
        if (std::any_of(t.probes.begin(), t.probes.end(), [&](const auto& p) { return p.name == g.name; }))
            diag.error(first.at,
                       fmt::format("group `{}` has the name of a probe: asserts and reports name both, so they must "
                                   "differ",
                                   g.name));
        if (t.lab.mode == LabSpec::Mode::hosts)
            diag.error(first.at,
                       fmt::format("group `{}`: probe groups run in [lab] mode \"namespaces\" and \"host\"; in mode "
                                   "\"hosts\" each probe runs alone",
                                   g.name),
                       "remove `group`, or measure the group in a namespace lab");
        // One duration: the one its members give (they must agree), else [run] duration.
        const probes::ProbeSpec* timed = nullptr;
        for (const auto* p : g.members) {
            if (!p->written.count("duration")) continue;
            if (!timed) {
                timed = p;
            } else if (p->options.at("duration") != timed->options.at("duration")) {
                diag.error(p->at,
                           fmt::format("probes `{}` and `{}` of group `{}` give different `duration`s ({} and {}): a "
                                       "group runs for one duration",
                                       timed->name, p->name, g.name,
                                       units::format_duration(std::chrono::nanoseconds(
                                           std::get<std::int64_t>(timed->options.at("duration")))),
                                       units::format_duration(std::chrono::nanoseconds(
                                           std::get<std::int64_t>(p->options.at("duration"))))),
                           "give `duration` on one of them only, or the same on each");
            }
        }
        auto duration = timed ? std::get<std::int64_t>(timed->options.at("duration"))
                              : std::get<std::int64_t>(first.options.at("duration"));
        for (auto& p : t.probes) {
            if (probes::group_of(p) != g.name) continue;
            p.options["duration"] = duration;
            if (probes::traits_of(p.kind).counted && !p.written.count("count")) {
                auto interval = std::max<std::int64_t>(1, std::get<std::int64_t>(p.options.at("interval")));
                p.options["count"] = std::clamp<std::int64_t>((duration + interval - 1) / interval, 1, 10'000'000);
            }
        }
    }
}

// A probe in hosts mode measures against the server machine: against a [[service]] there
// (`server_port`), or against its own server, which that machine's agent starts for each
// measurement (probes::serve_far()); a probe with neither is refused where it is written.
void check_machines_trial(const Trial& t, const Node*, Diagnostics& diag) {
    const auto* client = t.lab.machine("client");
    const bool remote_client = client && !client->ssh.empty() && client->ssh != "local";
    for (const auto& p : t.probes) {
        if (probes::traits_of(p.kind).runs_here_only && remote_client)
            diag.error(p.at,
                       fmt::format("probe `{}`: a command probe runs on the machine wanlab runs on, and [hosts.client] "
                                   "is another one",
                                   p.name),
                       "run wanlab on the client machine (ssh = \"local\"), or measure with a built-in probe there");
        if (!probes::traits_of(p.kind).has_server_half) continue;  // nothing of its own on the server machine
        auto sp = p.options.find("server_port");
        std::uint16_t port = sp != p.options.end() ? static_cast<std::uint16_t>(std::get<std::int64_t>(sp->second)) : 0;
        if (port == 0 && probes::far_servable(p)) continue;
        if (auto why = probes::remote_unsupported(p, port); !why.empty())
            diag.error(
                p.at,
                fmt::format("probe `{}` in [lab] mode = \"hosts\" measures against the server machine: {}{}", p.name,
                            why, port ? "" : "; run its server there as a [[service]] and give `server_port`"));
    }
}

}  // namespace

RunSpec parse_run(const Node* table, Diagnostics& diag) {
    RunSpec run;
    if (!table) return run;
    Reader r(*table, "[run]", diag);
    if (const Node* n = r.has("repeats") ? r.raw("repeats") : nullptr;
        n && n->kind == Node::Kind::value && n->value->is_string()) {
        if (auto v = r.string("repeats"); v && *v == "auto")
            run.adaptive = true;
        else if (v && !v->empty() && v->find_first_not_of("0123456789") == std::string::npos)
            diag.error(r.value_at("repeats"),
                       fmt::format("`repeats` must be a count or \"auto\", not the string \"{}\"", *v),
                       fmt::format("write repeats = {}, without quotes", *v));
        else if (v)
            diag.error(r.value_at("repeats"), fmt::format("`repeats` must be a count or \"auto\", not \"{}\"", *v),
                       "repeats = 3 measures each probe 3 times; repeats = \"auto\" until the result is settled "
                       "(max_repeats, precision)");
    } else if (auto v = r.integer("repeats", 1, 1000)) {
        run.repeats = static_cast<std::uint32_t>(*v);
    }
    // The adaptive rule's own keys: an error without repeats = "auto", where nothing reads them.
    for (const char* key : {"min_repeats", "max_repeats", "precision"})
        if (r.has(key) && !run.adaptive && !r.has("repeats"))
            diag.error(r.key_at(key), fmt::format("`{}` sets the adaptive repeats: it needs `repeats = \"auto\"`", key),
                       "add repeats = \"auto\" to [run], or remove it");
        else if (r.has(key) && !run.adaptive)
            diag.error(r.key_at(key),
                       fmt::format("`{}` sets the adaptive repeats, and `repeats` is a fixed count here", key),
                       "write repeats = \"auto\", or remove it");
    // At least 2 first repeats: one has no spread to plan from.
    if (auto v = r.integer("min_repeats", 2, 1000)) run.min_repeats = static_cast<std::uint32_t>(*v);
    if (auto v = r.integer("max_repeats", 2, 1000)) run.max_repeats = static_cast<std::uint32_t>(*v);
    if (auto v = r.percent("precision")) {
        if (*v <= 0 || *v > 1)
            diag.error(r.value_at("precision"), "`precision` must be above 0% and at most 100%",
                       "the interval's half-width as a share of the median: \"5%\"");
        else
            run.precision = *v;
    }
    if (run.adaptive && r.has("min_repeats") && run.min_repeats > run.max_repeats)
        diag.error(r.value_at("min_repeats"),
                   fmt::format("`min_repeats` ({}) is above `max_repeats` ({})", run.min_repeats, run.max_repeats),
                   "lower min_repeats or raise max_repeats");
    else if (run.adaptive && run.min_repeats > run.max_repeats)
        diag.error(r.value_at("max_repeats"),
                   fmt::format("`max_repeats` ({}) is below `min_repeats` ({}, the default when not given)",
                               run.max_repeats, run.min_repeats),
                   "raise max_repeats, or lower min_repeats");
    if (auto v = r.duration("warmup")) run.warmup = *v;
    if (auto v = r.duration("cooldown")) run.cooldown = *v;
    if (auto v = r.duration("duration")) {
        if (v->count() == 0)
            diag.error(r.value_at("duration"), "`duration` must be above zero");
        else
            run.duration = *v;
    }
    if (auto v = r.integer("seed", 0, std::numeric_limits<std::int64_t>::max()))
        run.seed = static_cast<std::uint64_t>(*v);
    if (auto v = r.string("baseline")) run.baseline = *v;
    r.finish();
    return run;
}

std::vector<std::string> LabSpec::hosts() const {
    if (mode == Mode::host) return {"host"};
    if (mode == Mode::hosts) {
        std::vector<std::string> names;
        for (const auto& m : machines) names.push_back(m.name);
        return names;
    }
    return {"client", "router", "server"};
}

const Machine* LabSpec::machine(const std::string& role) const {
    for (const auto& m : machines)
        if (m.name == role) return &m;
    return nullptr;
}

namespace {
// A schedule entry that starts after every measurement of the trial has ended never takes
// effect (its clock starts with each measurement): said once per entry, at its `at`.
void check_schedule_reach(const Trial& t, const Node& link, Diagnostics& diag) {
    const Node* entries = link.find("schedule");
    if (t.schedule.empty() || t.probes.empty() || !entries || entries->kind != Node::Kind::table_array) return;
    // A measurement lasts at most its `duration` (a count of probes may end it sooner, a slow
    // path make it last longer than the count times the interval: only the duration bounds it).
    double longest = 0;
    for (const auto& p : t.probes) {
        auto d = p.options.find("duration");
        if (d == p.options.end()) return;  // a command runs as long as it runs
        longest = std::max(longest, static_cast<double>(std::get<std::int64_t>(d->second)) / 1e9);
    }
    std::set<std::size_t> told;
    for (const auto& step : t.schedule.steps) {
        double at = static_cast<double>(step.at.count()) / 1e9;
        // A drain's end is no change of the file's (and a long drain may outlast the measurement).
        if (step.entry == 0 || step.drained || at < longest || told.count(step.entry) ||
            step.entry > entries->items.size())
            continue;
        told.insert(step.entry);
        const Node& entry = entries->items[step.entry - 1];
        const Node* at_node = entry.find("at");
        diag.warning(at_node ? at_node->value_at : entry.value_at,
                     fmt::format("[[link.schedule]] #{} starts at {}, after the longest measurement of the trial "
                                 "({:.3g} s) has ended: it never takes effect",
                                 step.entry, units::format_duration(step.at), longest),
                     "the schedule's clock starts with each measurement (each repeat): lengthen the probe's "
                     "`duration`, or move the entry earlier");
    }
}
}  // namespace

Trial parse_trial(const Node& doc, const RunSpec& run, const std::string& file, const ProfileLibrary& profiles,
                  config::Documents& docs, Diagnostics& diag, const sysctl::SysctlSpec* known_sysctl,
                  netem::TraceCache* traces) {
    Trial t;
    Reader r(doc, "the experiment", diag);
    // Top-level keys are checked by load_experiment; here only the sections are read.
    const Node* lab = r.table("lab");
    t.lab = parse_lab(lab, diag);
    parse_machines(r.table("hosts"), t.lab, lab ? lab->key_at : Location{file}, diag);
    Node empty;
    const Node* link = r.table("link");
    Node link_table = link ? with_profile(*link, "link", profiles, docs, diag) : empty;
    if (!link) link_table.value_at = doc.value_at;
    t.link = netem::parse_link(link_table, diag);
    netem::validate_link(t.link, diag);
    netem::resolve_limit(t.link.up, t.lab.line_rate_bps, t.lab.mtu, diag);
    netem::resolve_limit(t.link.down, t.lab.line_rate_bps, t.lab.mtu, diag);
    t.schedule = netem::parse_schedule(link_table, t.link, t.lab.line_rate_bps, t.lab.mtu, diag, traces);
    if (!t.schedule.empty() && t.lab.mode == LabSpec::Mode::hosts) {
        const Node* key = link_table.find("schedule");
        if (!key) key = link_table.find("trace");
        diag.error(key ? key->key_at : link_table.value_at,
                   "a [[link.schedule]] or a trace runs in the namespace lab and in host mode, not yet across "
                   "machines ([lab] mode = \"hosts\")",
                   "measure the changing link in the namespace lab (the micro-VM has netem), or drop the schedule");
    }
    if (known_sysctl) {
        t.sysctl = *known_sysctl;
    } else {
        const Node* sys = r.table("sysctl");
        Node sys_table = sys ? with_profile(*sys, "tuning", profiles, docs, diag) : empty;
        t.sysctl = sysctl::parse_sysctls(sys_table, t.lab.hosts(), diag);
    }
    if (const Node* probes = r.table_array("probe")) {
        for (std::size_t i = 0; i < probes->items.size(); ++i) {
            auto p = probes::parse_probe(probes->items[i], i, run.duration, diag);
            auto dup = std::find_if(t.probes.begin(), t.probes.end(), [&](const auto& q) { return q.name == p.name; });
            if (!p.kind.empty() && dup != t.probes.end())
                diag.error(p.at, fmt::format("two probes are named `{}`: give each a distinct `name`", p.name));
            t.probes.push_back(std::move(p));
        }
    }
    if (const Node* services = r.table_array("service")) {
        auto base = std::filesystem::path(file).parent_path();
        for (std::size_t i = 0; i < services->items.size(); ++i) {
            auto s = services::parse_service(services->items[i], i, t.lab.hosts(), base, &docs, diag);
            auto dup =
                std::find_if(t.services.begin(), t.services.end(), [&](const auto& q) { return q.name == s.name; });
            if (!s.name.empty() && dup != t.services.end())
                diag.error(s.at, fmt::format("two services are named `{}`: give each a distinct `name`", s.name));
            t.services.push_back(std::move(s));
        }
    }
    check_schedule_reach(t, link_table, diag);
    if (t.lab.mode == LabSpec::Mode::host)
        check_host_probes(t, diag);
    else
        check_service_probes(t, diag);
    if (t.lab.mode == LabSpec::Mode::hosts) check_machines_trial(t, lab, diag);
    check_probe_families(t, diag);
    check_groups(t, diag);
    return t;
}

}  // namespace wanlab::experiment
