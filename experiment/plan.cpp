#include "experiment/plan.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/text.h"

#include "core/units.h"
#include "netem/attributes.h"
#include "netem/host.h"
#include "netem/tc_command.h"
#include "probes/probe.h"
#include "services/service.h"

namespace wanlab::experiment {
namespace {

using nlohmann::json;

double seconds(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

json direction_json(const netem::Direction& d) {
    json j = json::object();
    for (const auto& a : netem::attributes())
        if (a.json) a.json(a, d, j);
    return j;
}

json option_json(const probes::OptionValue& v, const probes::OptionSpec* spec) {
    if (auto b = std::get_if<bool>(&v)) return *b;
    if (auto s = std::get_if<std::string>(&v)) return *s;
    if (auto f = std::get_if<double>(&v)) return *f;
    auto i = std::get<std::int64_t>(v);
    if (spec && spec->type == probes::OptionType::duration) return static_cast<double>(i) / 1e9;
    return i;
}

json probe_json(const probes::ProbeSpec& p) {
    const auto* kind = probes::find_kind(p.kind);
    json options = json::object();
    for (const auto& [name, value] : p.options) {
        const probes::OptionSpec* spec = nullptr;
        for (const auto& o : kind->options)
            if (name == o.name) spec = &o;
        options[name] = option_json(value, spec);
    }
    json out{{"name", p.name}, {"kind", p.kind}, {"options", options}};
    if (probes::traits_of(p.kind).user_command) {
        json metrics = json::array();
        for (const auto& m : p.outputs)
            metrics.push_back({{"name", m.name},
                               {"unit", probes::unit_name(m.unit)},
                               {"unit_as_written", m.unit_text},
                               {"better", m.higher_is_better ? "higher" : "lower"},
                               {"regex", m.regex},
                               {"json", m.json_pointer},
                               {"stream", m.stream}});
        out["command"] = p.command;
        out["metrics"] = metrics;
    }
    return out;
}

json sysctl_json(const sysctl::SysctlSpec& s) {
    json j{{"global", json::object()}};
    for (const auto& g : s.global) j["global"][g.key] = g.value;
    for (const auto& [host, list] : s.per_host) {
        j[host] = json::object();
        for (const auto& e : list) j[host][e.key] = e.value;
    }
    return j;
}

// One shell word, so that a value with spaces, quotes or `$(...)` is pasted as data.
std::string sysctl_arg(const sysctl::Setting& s) { return text::shell_quote(fmt::format("{}={}", s.key, s.value)); }

std::string netns_exec(const std::string& ns) { return fmt::format("ip netns exec {} ", text::shell_quote(ns)); }

std::string probe_summary(const probes::ProbeSpec& p) {
    const auto* kind = probes::find_kind(p.kind);
    std::string out = fmt::format("{} ({}", p.name, p.kind);
    for (const auto& o : kind->options) {
        auto it = p.options.find(o.name);
        if (it == p.options.end()) continue;
        auto text = probes::format_option(*kind, o.name, it->second);
        if (text.empty()) continue;
        // Options left at their default are noise in a one-line summary, except duration.
        bool is_default = std::string(o.default_value) == text || std::string(o.default_value) == "\"" + text + "\"";
        if (is_default && std::string(o.name) != "duration") continue;
        out += fmt::format(", {} {}", o.name, text);
    }
    if (!p.command.empty()) out += fmt::format(", command {}", text::shell_join(p.command));
    for (const auto& m : p.outputs) out += fmt::format(", metric {} ({})", m.name, m.unit_text);
    return out + ")";
}

std::string pad(const std::string& s, std::size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

std::vector<std::string> global_keys(const Experiment& exp) {
    std::vector<std::string> keys;
    for (const auto& t : exp.trials)
        for (const auto& g : t.sysctl.global)
            if (std::find(keys.begin(), keys.end(), g.key) == keys.end()) keys.push_back(g.key);
    return keys;
}

std::string human_duration(std::chrono::nanoseconds total) {
    auto s = std::chrono::duration_cast<std::chrono::seconds>(total).count();
    if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
    if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
    return fmt::format("{}s", s);
}

// Host mode's tree toward one target (netem/host.h) as tc commands: the way out below an
// htb class the target's packets enter, the way in redirected to an ifb. Hosts mode's
// machine that takes the link conditions builds the same.
void filtered_commands(const Trial& t, const std::string& dev, const std::string& target, std::uint16_t port,
                       std::vector<std::string>& out) {
    netem::Filter to_target{target, port, false, t.lab.line_rate_bps};
    if (t.link.up.impaired())
        for (auto& c : netem::tc_commands(t.link.up, dev, "", t.lab.mtu, to_target)) out.push_back(std::move(c));
    if (!t.link.down.impaired()) return;
    std::string ifb = text::shell_quote(netem::ifb_name(dev)), qdev = text::shell_quote(dev);
    out.push_back(fmt::format("ip link add {} type ifb && ip link set {} up", ifb, ifb));
    out.push_back(fmt::format("tc qdisc replace dev {} handle ffff: ingress", qdev));
    out.push_back(
        fmt::format("tc filter replace dev {} parent ffff: protocol ip prio 1 u32 match ip src {}{} "
                    "action mirred egress redirect dev {}",
                    qdev, text::shell_quote(target), port ? fmt::format(" match ip sport {} 0xffff", port) : "", ifb));
    for (auto& c : netem::tc_commands(t.link.down, ifb, "", t.lab.mtu)) out.push_back(std::move(c));
}

}  // namespace

std::string direction_summary(const netem::Direction& d) {
    // The conditions without the queue size and netem's own rate (shown below with the shaper).
    std::string out = netem::netem_arguments(d.netem, {"limit", "rate"});
    if (d.rate_bps) {
        out += (out.empty() ? "" : " ") + fmt::format("rate {}", units::format_rate(d.rate_bps));
        if (d.shaper != netem::Shaper::netem) out += fmt::format(" ({})", netem::to_string(d.shaper));
    }
    if (d.queue != netem::Queue::none) out += fmt::format(" queue {}", netem::to_string(d.queue));
    return out.empty() ? "-" : out;
}

std::vector<std::string> trial_commands(const Trial& t, const LabNames& names) {
    std::vector<std::string> out;
    if (t.lab.mode == LabSpec::Mode::hosts) {
        // Each machine changes itself: [sysctl] on every machine, [sysctl.ROLE] on its own.
        for (const auto& m : t.lab.machines) {
            auto where =
                m.ssh == "local" ? "# on this machine (" + m.name + "): " : "ssh " + text::shell_quote(m.ssh) + " ";
            std::vector<const sysctl::Setting*> settings;
            for (const auto& g : t.sysctl.global) settings.push_back(&g);
            if (auto it = t.sysctl.per_host.find(m.name); it != t.sysctl.per_host.end())
                for (const auto& s : it->second) settings.push_back(&s);
            for (const auto* s : settings) out.push_back(where + "sysctl -w " + sysctl_arg(*s));
            // Link conditions: on the machine that takes them, toward the server, as host mode
            // does (wanlab's own ssh connections are exempted by filters not shown).
            if (m.name != t.lab.link_machine() || !(t.link.up.impaired() || t.link.down.impaired())) continue;
            const std::string server = t.lab.machine("server") ? t.lab.machine("server")->address : "";
            std::string dev = m.dev.empty() ? "DEV" : m.dev;
            if (m.dev.empty())
                out.push_back(fmt::format("# DEV: the interface that routes to {} (ip route get {})", server, server));
            std::vector<std::string> tree;
            filtered_commands(t, dev, server, 0, tree);
            for (auto& c : tree) out.push_back(where + c);
        }
        return out;
    }
    if (t.lab.mode == LabSpec::Mode::netns) {
        std::string router = netns_exec(names.ns("router"));
        for (const auto& [dir, dev] :
             {std::pair{&t.link.up, LabNames::kRouterToServer}, std::pair{&t.link.down, LabNames::kRouterToClient}}) {
            if (!dir->impaired()) continue;
            for (auto& c : netem::tc_commands(*dir, dev, router, t.lab.mtu)) out.push_back(std::move(c));
        }
    } else {
        filtered_commands(t, t.lab.dev, t.lab.target, t.lab.port, out);
    }
    for (const auto& g : t.sysctl.global) out.push_back("sysctl -w " + sysctl_arg(g));
    for (const auto& [host, list] : t.sysctl.per_host) {
        std::string prefix = t.lab.mode == LabSpec::Mode::netns ? netns_exec(names.ns(host)) : "";
        for (const auto& s : list) out.push_back(prefix + "sysctl -w " + sysctl_arg(s));
    }
    return out;
}

namespace {
// The trial's value of a global byte-count key, if it sets it.
std::optional<std::uint64_t> maximum(const Trial& t, const char* key) {
    for (const auto& s : t.sysctl.global)
        if (s.key == key && !s.value.empty() && s.value.find_first_not_of("0123456789") == std::string::npos)
            return std::stoull(s.value);
    return std::nullopt;
}
}  // namespace

std::string BufferClamp::text() const {
    if (refused)
        return fmt::format(
            "probe {} runs iperf3 -w {}, which {} = {} cannot grant (the kernel gives twice the ask, up "
            "to {}): iperf3 refuses (\"socket buffer size not set correctly\") and these measurements "
            "fail; raise {} to at least {}, or leave rcvbuf and sndbuf at 0 for autotuning",
            probe, units::format_size(asked), key, units::format_size(max), units::format_size(granted), key,
            units::format_size((asked + 1) / 2));
    return fmt::format(
        "probe {} asks {} = {}; {} = {} grants {} (twice the maximum, not twice the ask): the built-in "
        "probe measures with that",
        probe, option, units::format_size(asked), key, units::format_size(max), units::format_size(granted));
}

std::vector<BufferClamp> buffer_clamps(const Trial& t) {
    std::vector<BufferClamp> out;
    const auto rmem = maximum(t, "net.core.rmem_max"), wmem = maximum(t, "net.core.wmem_max");
    for (const auto& p : t.probes) {
        if (!probes::traits_of(p.kind).bulk_tcp) continue;  // the kind that asks for socket buffers
        auto rcv = static_cast<std::uint64_t>(probes::option_int(p, "rcvbuf")),
             snd = static_cast<std::uint64_t>(probes::option_int(p, "sndbuf"));
        if (probes::option_string(p, "tool") == "iperf3") {
            // One -w for both buffers, on both ends: each maximum must grant it.
            std::uint64_t w = std::max(rcv, snd);
            for (const auto& [key, max] : {std::pair{"net.core.rmem_max", rmem}, std::pair{"net.core.wmem_max", wmem}})
                if (w > 0 && max && 2 * *max < w) out.push_back({p.name, "-w", key, w, *max, 2 * *max, true});
            continue;
        }
        if (rcv > 0 && rmem && rcv > *rmem)
            out.push_back({p.name, "rcvbuf", "net.core.rmem_max", rcv, *rmem, 2 * *rmem, false});
        if (snd > 0 && wmem && snd > *wmem)
            out.push_back({p.name, "sndbuf", "net.core.wmem_max", snd, *wmem, 2 * *wmem, false});
    }
    return out;
}

namespace {

// A service's argv with its vars filled in; wanlab's own placeholders stay as written, since
// their values ({dir}, {run}) exist only once the run does.
std::vector<std::string> service_argv(const services::ServiceSpec& s) {
    std::map<std::string, std::string> values;
    for (const auto& p : services::kPlaceholders) values[p] = "{" + p + "}";
    for (const auto& [k, v] : s.vars) values[k] = v;
    return services::expand_argv(s.command, values, "service " + s.name);
}

std::string vars_text(const services::ServiceSpec& s) {
    std::string out;
    for (const auto& [k, v] : s.vars) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", k, v);
    return out.empty() ? "" : fmt::format("  (vars: {})", out);
}

std::string ready_summary(const services::ReadyCheck& r) {
    using K = services::ReadyCheck::Kind;
    switch (r.kind) {
        case K::port:
            return fmt::format("ready when port {} accepts (up to {})", r.port, units::format_duration(r.timeout));
        case K::command:
            return fmt::format("ready when `{}` exits 0 (up to {})", text::shell_join(r.command),
                               units::format_duration(r.timeout));
        case K::delay: return fmt::format("ready after {}", units::format_duration(r.delay));
        case K::none: return "no ready check";
    }
    return "";
}

std::string service_summary(const services::ServiceSpec& s) {
    // Where each template is read from: a run reads those files (as root) and writes them
    // rendered into the trial's folder, with the same permissions.
    std::string files;
    for (const auto& f : s.files)
        files += fmt::format("{}{{dir}}/{} from {} (mode {:04o})", files.empty() ? "; templates: " : ", ", f.name,
                             text::terminal_safe(f.source), f.mode);
    return fmt::format("{} on {}: {}; {}; per trial, after its sysctls{}", s.name, s.host,
                       text::shell_join(service_argv(s)), ready_summary(s.ready), files);
}

json services_json(const Trial& t) {
    json out = json::array();
    for (const auto& s : t.services) {
        json files = json::object();
        for (const auto& f : s.files) files[f.name] = f.source;
        out.push_back({{"name", s.name},
                       {"host", s.host},
                       {"command", s.command},
                       {"argv", service_argv(s)},
                       {"vars", s.vars},
                       {"files", files},
                       {"ready", ready_summary(s.ready)},
                       {"stop_timeout", seconds(s.stop_timeout)}});
    }
    return out;
}

}  // namespace

std::string render_plan_text(const Experiment& exp) {
    std::string out;
    out += fmt::format("Experiment \"{}\" ({})\n", exp.name, exp.file);
    if (!exp.description.empty()) out += fmt::format("  {}\n", exp.description);
    std::size_t points = exp.trials.size() / std::max<std::size_t>(exp.variants.size(), 1);
    out += fmt::format("  {} trial{} = {} sweep point{} x {} variant{}; baseline: {}\n", exp.trials.size(),
                       exp.trials.size() == 1 ? "" : "s", points, points == 1 ? "" : "s", exp.variants.size(),
                       exp.variants.size() == 1 ? "" : "s", exp.run.baseline);
    const auto& first = exp.trials.front();
    std::chrono::nanoseconds per_repeat{0};
    for (const auto& p : first.probes) {
        out += fmt::format("  probe {}\n", probe_summary(p));
        per_repeat += std::chrono::nanoseconds{std::get<std::int64_t>(p.options.at("duration"))};
    }
    if (first.probes.empty()) out += "  no probes: trials only apply and check the link conditions\n";
    for (const auto& s : first.services) out += fmt::format("  service {}\n", service_summary(s));
    auto total_at = [&](std::uint32_t repeats) {
        return (per_repeat + exp.run.cooldown) * repeats * exp.trials.size() + exp.run.warmup * exp.trials.size();
    };
    if (exp.run.adaptive)
        out += fmt::format(
            "  repeats auto: {} per probe, then until the mean's 95% interval is within +-{:g}% (Stein's two-stage "
            "rule), at most {}; warmup {}, cooldown {}: {} to {} of measurement\n",
            exp.run.min_repeats, exp.run.precision * 100, exp.run.max_repeats, units::format_duration(exp.run.warmup),
            units::format_duration(exp.run.cooldown), human_duration(total_at(exp.run.min_repeats)),
            human_duration(total_at(exp.run.max_repeats)));
    else
        out += fmt::format("  {} repeat{} per probe, warmup {}, cooldown {}: about {} of measurement\n",
                           exp.run.repeats, exp.run.repeats == 1 ? "" : "s", units::format_duration(exp.run.warmup),
                           units::format_duration(exp.run.cooldown), human_duration(total_at(exp.run.repeats)));
    if (first.lab.mode == LabSpec::Mode::netns)
        out += fmt::format(
            "  lab: namespaces wanlab-RUN-{{client,router,server}}, {}, mtu {}, offloads {}; link conditions "
            "on the router\n",
            first.lab.ip == LabSpec::Ip::dual ? "IPv4 and IPv6"
            : first.lab.has_ipv6()            ? "IPv6"
                                              : "IPv4",
            first.lab.mtu, first.lab.offloads ? "on" : "off");
    else if (first.lab.mode == LabSpec::Mode::hosts)
        for (const auto& m : first.lab.machines) {
            out += fmt::format(
                "  machine {}: {}{}; wanlab there: {}; its changes are made and given back by its own "
                "`wanlab agent`{}\n",
                m.name, m.ssh == "local" ? "this machine" : "ssh " + m.ssh,
                m.address.empty() ? "" : " (" + m.address + ")", m.wanlab,
                m.name == first.lab.link_machine() &&
                        std::any_of(exp.trials.begin(), exp.trials.end(),
                                    [](const Trial& t) { return t.link.up.impaired() || t.link.down.impaired(); })
                    ? fmt::format("; link conditions on {} toward the server, both ways (the way in through an "
                                  "ifb), except wanlab's own ssh connections",
                                  m.dev.empty() ? "the interface that routes to the server" : m.dev)
                    : "");
            if (m.name == "client" && m.ssh != "local")
                out += "    it runs the probes, through its agent (wanlab here only drives the run)\n";
            if (m.name != "server") continue;
            std::vector<std::string> served;  // the probes whose own server its agent runs
            for (const auto& p : first.probes) {
                auto sp = p.options.find("server_port");
                bool service = sp != p.options.end() && std::get<std::int64_t>(sp->second) != 0;
                if (!service && probes::far_servable(p)) served.push_back(fmt::format("{} ({})", p.name, p.kind));
            }
            if (!served.empty())
                out += fmt::format("    its agent runs the server of probe{} {} for each measurement, on {}\n",
                                   served.size() == 1 ? "" : "s", fmt::join(served, ", "),
                                   m.probe_port ? fmt::format("port {}", m.probe_port) : std::string("a free port"));
        }
    else
        out += fmt::format("  lab: host interface {} toward {}{}\n", first.lab.dev, first.lab.target,
                           first.lab.port ? fmt::format(" port {}", first.lab.port) : "");
    if (first.lab.mode == LabSpec::Mode::hosts && !first.lab.ssh_config.empty()) {
        const auto& l = first.lab;
        if (!l.ssh_config_read)
            out += fmt::format("  ssh config {}: not readable here; ssh reads it when the run starts\n",
                               text::terminal_safe(l.ssh_config));
        else if (l.ssh_commands.empty())
            out += fmt::format(
                "  ssh config {}: runs no command (no ProxyCommand, LocalCommand, KnownHostsCommand, "
                "Match exec or Include)\n",
                text::terminal_safe(l.ssh_config));
        else
            out += fmt::format("  ssh config {}: ssh runs these as the user running wanlab:\n    {}\n",
                               text::terminal_safe(l.ssh_config), fmt::join(l.ssh_commands, "\n    "));
    }
    auto globals = global_keys(exp);
    if (first.lab.mode == LabSpec::Mode::hosts && !globals.empty()) {
        std::string list;
        for (const auto& k : globals) list += (list.empty() ? "" : ", ") + k;
        out += fmt::format("  [sysctl] keys, set on every machine and given back by each: {}\n", list);
    } else if (!globals.empty()) {
        std::string list;
        for (const auto& k : globals) list += (list.empty() ? "" : ", ") + k;
        out += fmt::format("  host-global sysctls changed (for the whole machine, restored afterwards): {}\n", list);
    }
    if (!exp.asserts.empty())
        out += fmt::format("  {} assert{}\n", exp.asserts.size(), exp.asserts.size() == 1 ? "" : "s");

    // The table: one row per trial.
    std::vector<std::string> header{"#", "trial", "variant"};
    for (const auto& k : exp.sweep_keys) header.push_back(k);
    header.push_back("up (client->server)");
    header.push_back("down (server->client)");
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : exp.trials) {
        std::vector<std::string> row{std::to_string(t.index), t.id, t.variant};
        for (const auto& [path, value] : t.sweep) row.push_back(value);
        row.push_back(direction_summary(t.link.up));
        row.push_back(direction_summary(t.link.down));
        rows.push_back(std::move(row));
    }
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
        width[c] = header[c].size();
        for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
        std::string l = " ";
        for (std::size_t c = 0; c < cells.size(); ++c)
            l += " " + (c + 1 == cells.size() ? cells[c] : pad(cells[c], width[c]));
        return l + "\n";
    };
    out += "\n" + line(header);
    for (const auto& r : rows) out += line(r);

    out += "\nEquivalent commands (wanlab applies these through netlink and /proc/sys, not by running them):\n";
    for (const auto& t : exp.trials) {
        std::string sweep;
        for (const auto& [path, value] : t.sweep) sweep += fmt::format(", {}={}", path, value);
        out += fmt::format("\n  trial {} ({}): variant {}{}\n", t.index, t.id, t.variant, sweep);
        auto commands = trial_commands(t);
        if (commands.empty() && t.services.empty()) out += "    (nothing to change)\n";
        for (const auto& c : commands) out += "    " + c + "\n";
        for (const auto& c : buffer_clamps(t)) out += "    note: " + c.text() + "\n";
        if (!t.schedule.empty()) {
            out += "    during each measurement, the link changes in place (netlink, no qdisc re-created):\n";
            for (const auto& line : netem::describe(t.schedule)) out += "      " + line + "\n";
        }
        for (const auto& s : t.services)
            out += fmt::format("    start on {}: {}{}\n", s.host, text::shell_join(service_argv(s)), vars_text(s));
    }
    if (exp.tune) {
        const auto& tn = *exp.tune;
        std::size_t candidates = 1;
        for (const auto& k : tn.space) candidates *= k.values.size() + 1;  // each key as written too
        out += fmt::format(
            "\n`wanlab tune` (docs/tune.md): goal {} ({} is better), within {:g}% of the best, budget {}; "
            "at most {} candidate{} (each key as written or at one of its values, less those over the "
            "buffer budget) on each of the {} trial{} above\n",
            tn.goal.text(), tn.goal.higher_is_better ? "higher" : "lower", tn.tolerance * 100,
            human_duration(tn.budget), candidates, candidates == 1 ? "" : "s", exp.trials.size(),
            exp.trials.size() == 1 ? "" : "s");
        for (const auto& c : tn.constraints) out += fmt::format("  constraint: {}\n", c.text);
        if (tn.buffer_budget)
            out += fmt::format("  no socket buffer above {}\n", units::format_size(*tn.buffer_budget));
        for (const auto& k : tn.space) out += fmt::format("  {}: {}\n", k.path, fmt::join(k.labels, ", "));
    }
    return out;
}

// [tune], or null.
json tune_json(const Experiment& exp) {
    if (!exp.tune) return nullptr;
    const auto& tn = *exp.tune;
    json space = json::array();
    for (const auto& k : tn.space) space.push_back({{"key", k.path}, {"values", k.labels}});
    json constraints = json::array();
    for (const auto& c : tn.constraints)
        constraints.push_back({{"metric", c.metric.text()}, {"at_most", c.at_most}, {"bound", c.bound}});
    return {{"goal", tn.goal.text()},
            {"higher_is_better", tn.goal.higher_is_better},
            {"constraints", constraints},
            {"budget", seconds(tn.budget)},
            {"tolerance", tn.tolerance},
            {"buffer_budget", tn.buffer_budget ? json(*tn.buffer_budget) : json(nullptr)},
            {"space", space}};
}

json plan_json(const Experiment& exp) {
    json trials = json::array();
    for (const auto& t : exp.trials) {
        json sweep = json::object();
        for (const auto& [path, value] : t.sweep) sweep[path] = value;
        json probes = json::array();
        for (const auto& p : t.probes) probes.push_back(probe_json(p));
        json lab{{"mode", t.lab.mode == LabSpec::Mode::host    ? "host"
                          : t.lab.mode == LabSpec::Mode::hosts ? "hosts"
                                                               : "netns"},
                 {"mtu", t.lab.mtu},
                 {"ip", t.lab.ip_name()},
                 {"offloads", t.lab.offloads},
                 {"queue_length", t.lab.queue_length},
                 {"line_rate", t.lab.line_rate_bps}};
        if (t.lab.mode == LabSpec::Mode::host)
            lab.update({{"dev", t.lab.dev}, {"target", t.lab.target}, {"port", t.lab.port}});
        json link{{"up", direction_json(t.link.up)}, {"down", direction_json(t.link.down)}};
        if (!t.schedule.empty()) {
            json steps = json::array();
            json traces = json::array();
            for (const auto& st : t.schedule.traces) {
                json columns = json::object();
                for (const auto& c : st.trace.columns)
                    columns[c.name] = {{"mean", c.mean}, {"min", c.min}, {"max", c.max}};
                traces.push_back(
                    {{"directions", st.directions},
                     {"file", st.trace.file},
                     {"format", st.trace.format == netem::Trace::Format::mahimahi ? "mahimahi" : "csv"},
                     {"duration", seconds(st.trace.period)},
                     {"window", st.trace.format == netem::Trace::Format::mahimahi ? json(seconds(st.trace.window))
                                                                                  : json(nullptr)},
                     {"entries", st.trace.entries},
                     {"raised_windows", st.trace.raised},
                     {"columns", columns}});
            }
            // A trace's steps are its rows: the trace stands for them.
            for (std::size_t i = 1; t.schedule.traces.empty() && i < t.schedule.steps.size(); ++i) {
                const auto& step = t.schedule.steps[i];
                steps.push_back({{"at", seconds(step.at)},
                                 {"entry", step.entry},
                                 {"outage", step.outage},
                                 {"up", direction_json(step.up)},
                                 {"down", direction_json(step.down)}});
            }
            link["schedule"] = {
                {"steps", steps},
                {"changes", t.schedule.steps.size() - 1},
                {"traces", traces},
                {"repeat_every", t.schedule.period.count() ? json(seconds(t.schedule.period)) : json(nullptr)}};
        }
        trials.push_back({{"index", t.index},
                          {"id", t.id},
                          {"variant", t.variant},
                          {"sweep", sweep},
                          {"lab", lab},
                          {"link", link},
                          {"sysctl", sysctl_json(t.sysctl)},
                          {"probes", probes},
                          {"services", services_json(t)},
                          {"commands", trial_commands(t)}});
    }
    json asserts = json::array();
    for (const auto& a : exp.asserts) {
        json j{
            {"probe", a.probe}, {"metric", a.metric}, {"variant", a.variant.empty() ? json(nullptr) : json(a.variant)}};
        j["at_least"] = a.at_least ? json(*a.at_least) : json(nullptr);
        j["at_most"] = a.at_most ? json(*a.at_most) : json(nullptr);
        j["min_gain"] = a.min_gain ? json(*a.min_gain) : json(nullptr);
        asserts.push_back(j);
    }
    return {{"experiment", exp.name},
            {"file", exp.file},
            {"description", exp.description},
            {"sets", exp.sets},
            {"variants", exp.variants},
            {"baseline", exp.run.baseline},
            {"sweep", {{"mode", sweep_mode_name(exp.sweep_mode)}, {"keys", exp.sweep_keys}}},
            {"run",
             {{"repeats", exp.run.adaptive ? nlohmann::json("auto") : nlohmann::json(exp.run.repeats)},
              {"min_repeats", exp.run.adaptive ? nlohmann::json(exp.run.min_repeats) : nlohmann::json()},
              {"max_repeats", exp.run.adaptive ? nlohmann::json(exp.run.max_repeats) : nlohmann::json()},
              {"precision", exp.run.adaptive ? nlohmann::json(exp.run.precision) : nlohmann::json()},
              {"warmup", seconds(exp.run.warmup)},
              {"cooldown", seconds(exp.run.cooldown)},
              {"duration", seconds(exp.run.duration)},
              {"seed", exp.run.seed}}},
            {"asserts", asserts},
            {"tune", tune_json(exp)},
            {"trials", trials}};
}

}  // namespace wanlab::experiment
