// `wanlab probe KIND [--OPTION VALUE]... [--json]`: one probe, ad hoc. Without --address (or
// an http probe's --url) it builds a bare two-namespace lab (wanlab-probe-PID-a and -b joined
// by a veth pair, 198.18.100.1 <-> 198.18.100.2), journaled as run probe-PID so `wanlab
// restore` removes it after a kill -9, measures across it and removes it; with --address it
// measures between namespaces the user already has, and with --url it loads that server from
// --client-ns or here. Every option of the kind is a flag of the same name spelled with
// dashes and goes through the [[probe]] parser, so values are checked exactly as in an
// experiment file.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cmd_probe.h"
#include "cli/command.h"
#include "cli/load.h"
#include "core/config.h"
#include "core/error.h"
#include "core/json.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/units.h"
#include "diagnosis/capture.h"
#include "diagnosis/counters.h"
#include "experiment/experiment.h"
#include "experiment/plan.h"
#include "experiment/profiles.h"
#include "lab/capabilities.h"
#include "lab/session.h"
#include "netem/attributes.h"
#include "netem/preflight.h"
#include "probes/human.h"
#include "probes/probe.h"
#include "probes/probe_spec.h"
#include "report/report.h"
#include "results/model.h"
#include "run/record.h"
#include "sysctl/proc_sys.h"
#include "vm/vm.h"

namespace wanlab::cli {
namespace {

/// What a [[probe]] option's value is, with its unit, for --help.
const char* value_of(probes::OptionType type) {
    switch (type) {
        case probes::OptionType::duration: return "a duration, e.g. 10s or 250ms";
        case probes::OptionType::size: return "bytes, e.g. 1500 or 64KiB";
        case probes::OptionType::rate: return "bit/s, e.g. 100mbit";
        case probes::OptionType::percent: return "a percentage, e.g. 1%";
        case probes::OptionType::boolean: return "true or false";
        case probes::OptionType::integer: return "a count";
        case probes::OptionType::choice:
        case probes::OptionType::string: break;
    }
    return "";
}

}  // namespace

probes::ProbeSpec resolve(const ProbeArgs& o) {
    std::string text = fmt::format("[[probe]]\nkind = {}\n", toml_value(o.kind));
    for (const auto& [k, v] : o.values) text += fmt::format("{} = {}\n", k, toml_value(v));
    config::Documents docs;
    Diagnostics diag;
    const toml::table* table = docs.parse("command line", text, diag);
    probes::ProbeSpec spec;
    if (table) {
        config::Node root = config::from_toml(*table);
        const config::Node* list = root.find("probe");
        if (list && !list->items.empty())
            spec = probes::parse_probe(list->items.front(), 0, std::chrono::seconds(10), diag);
    }
    std::fputs(diag.render(docs.sources()).c_str(), stderr);
    if (diag.has_errors() || spec.kind.empty())
        throw InputError("the probe options have errors (shown above as the [[probe]] table they make)");
    return spec;
}

std::optional<probes::Endpoints> given_endpoints(const ProbeArgs& o, const probes::ProbeSpec& spec) {
    auto url = spec.options.find("url");
    const bool has_url = url != spec.options.end() && !std::get<std::string>(url->second).empty();
    if (o.address.empty() && !has_url) {
        if (!o.server_ns.empty() || !o.client_ns.empty())
            throw InputError("--server-ns and --client-ns need --address (the server's address in --server-ns)");
        return std::nullopt;
    }
    probes::Endpoints where;
    where.server = {o.server_ns, o.address, o.port, has_url};  // a url's server runs already
    where.client = {o.client_ns, o.client_address, 0};
    return where;
}

namespace {

void print_human(const probes::ProbeKind& kind, const probes::ProbeResult& r) {
    std::printf("%s (%s)\n", kind.name, r.tool.c_str());
    // The kind's table first, in its order; then the extra metrics the probe added.
    for (const auto& m : kind.metrics)
        if (auto it = r.metrics.find(m.name); it != r.metrics.end())
            std::printf("  %-24s %s\n", m.name, probes::human(m.unit, it->second).c_str());
    for (const auto& [name, value] : r.metrics)
        if (const auto* m = probes::describe_metric(kind, name); m && !probes::find_metric(kind, name))
            std::printf("  %-24s %s\n", name.c_str(), probes::human(m->unit, value).c_str());
    if (!r.connections.empty()) {
        std::printf("  connections:\n");
        for (const auto& c : r.connections) {
            auto get = [&c](const char* k) {
                auto it = c.values.find(k);
                return it == c.values.end() ? std::nan("") : it->second;
            };
            using U = probes::Unit;
            std::printf(
                "    %-8s %-6s %s, retrans %s, rtt %s, cwnd %s, delivery %s, rwnd-limited %s, sndbuf-limited %s, "
                "rcvbuf %s\n",
                c.direction.c_str(), c.congestion_control.c_str(),
                probes::human(U::bits_per_second, get("throughput")).c_str(),
                probes::human(U::count, get("retransmits")).c_str(), probes::human(U::seconds, get("rtt")).c_str(),
                probes::human(U::count, get("cwnd")).c_str(),
                probes::human(U::bits_per_second, get("delivery_rate")).c_str(),
                probes::human(U::fraction, get("rwnd_limited")).c_str(),
                probes::human(U::fraction, get("sndbuf_limited")).c_str(),
                probes::human(U::bytes, get("rcvbuf_granted")).c_str());
        }
    }
    if (auto s = r.series.find("throughput"); s != r.series.end()) {
        std::printf("  per interval:");
        for (double v : s->second.value) std::printf(" %.2f", v / 1e9);
        std::printf(" Gbit/s\n");
    }
    for (const auto& n : r.notes) std::printf("  note: %s\n", n.c_str());
}

nlohmann::json to_json(const probes::ProbeKind& kind, const probes::ProbeSpec& spec, const probes::ProbeResult& r,
                       bool all_samples) {
    nlohmann::json j{{"kind", r.kind}, {"tool", r.tool}, {"notes", r.notes}};
    for (const auto& [k, v] : spec.options) j["options"][k] = probes::format_option(kind, k, v);
    for (const auto& [k, v] : r.metrics) {
        j["metrics"][k] = std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
        if (const auto* m = probes::describe_metric(kind, k)) j["units"][k] = probes::unit_name(m->unit);
    }
    for (const auto& [k, v] : r.samples)
        if (all_samples || k != "latency") j["samples"][k] = v;
    for (const auto& [k, v] : r.series) j["series"][k] = {{"t", v.t}, {"value", v.value}};
    j["connections"] = nlohmann::json::array();
    for (const auto& c : r.connections)
        j["connections"].push_back(
            {{"direction", c.direction}, {"congestion_control", c.congestion_control}, {"values", c.values}});
    return j;
}

}  // namespace

ProbeArgs sorted_out(ProbeArgs o) {
    const auto* kind = probes::find_kind(o.kind);
    if (!kind) return o;
    for (auto it = o.values.begin(); it != o.values.end();) {
        bool kinds = std::any_of(kind->options.begin(), kind->options.end(),
                                 [&](const probes::OptionSpec& x) { return it->first == x.name; });
        bool links = std::any_of(netem::attributes().begin(), netem::attributes().end(),
                                 [&](const auto& a) { return a.flag && it->first == a.key; });
        if (!kinds && links) {
            o.link.emplace(it->first, it->second);
            it = o.values.erase(it);
        } else {
            ++it;
        }
    }
    return o;
}

namespace {

int run(const ProbeArgs& given_args) {
    const ProbeArgs o = sorted_out(given_args);
    const bool link = !o.link.empty() || !o.profile.empty();
    std::optional<experiment::Experiment> exp;
    if (link) {
        exp = load_link_flags(o.profile, o.link, "", "the link conditions");
        if (!o.address.empty() || !o.server_ns.empty() || !o.client_ns.empty())
            throw InputError(
                "link conditions go on the lab wanlab builds: drop --address, --server-ns and --client-ns, or put "
                "them on your own device with `wanlab link apply --netns NS --dev DEV`");
    }
    auto spec = resolve(o);
    if (link && given_endpoints(o, spec))
        throw InputError("link conditions go on the lab wanlab builds, not on the way to a --url; drop one of them");
    // Without root no lab can be built here, but the micro-VM, its own isolation, needs none.
    if (link && !o.no_vm && !lab::missing_capabilities(lab::effective_capabilities()).empty())
        return rerun_in_vm("no root here, and the micro-VM needs none");
    if (link)
        if (auto missing = lab::missing_qdiscs(*exp); !missing.empty()) {
            if (o.no_vm)
                throw InputError(fmt::format("this kernel lacks {} (needed by the link conditions). {}",
                                             fmt::join(missing, ", "), netem::advice_for(missing.front())));
            return rerun_in_vm(fmt::format("this kernel has no {}", fmt::join(missing, ", ")));
        }
    sys::SignalEvents signals;  // before any thread exists, so every thread blocks them
    const auto* kind = probes::find_kind(spec.kind);
    if (diagnosis::capture_bounds(spec))
        throw InputError(
            "wanlab probe: captures are recorded by `wanlab run` (capture = true on a [[probe]]: one pcap per trial "
            "and lab host); for an ad-hoc probe, capture beside it: ip netns exec NAMESPACE tcpdump -i DEVICE -s 128 "
            "-w FILE");
    auto probe = probes::make_probe(spec);
    std::optional<lab::PairSession> bare;
    std::optional<lab::LabSession> lab_with_link;
    sysctl::RealProcSys proc;
    auto given = given_endpoints(o, spec);
    if (link) {
        lab::require_capabilities("wanlab probe");
        lab::SessionOptions options;
        options.run = fmt::format("probe-{}", ::getpid());
        options.progress = [&signals](const std::string&) { signals.check(); };
        lab_with_link.emplace(exp->trials.front(), options, proc);
        const auto& t = exp->trials.front();
        std::fputs(fmt::format("wanlab: path: up {}; down {}\n", experiment::direction_summary(t.link.up),
                               experiment::direction_summary(t.link.down))
                       .c_str(),
                   stderr);
    } else if (!given) {
        lab::require_capabilities("wanlab probe");
        bare.emplace(fmt::format("probe-{}", ::getpid()));
    }
    // The bare pair has both families; --family chooses (--address decides by itself).
    const int family = probes::probe_family(spec) == AF_INET6 ? AF_INET6 : AF_INET;
    probes::Endpoints where;
    if (lab_with_link) {
        where = lab_with_link->testbed().endpoints(family);
        where.server.port = o.port;
    } else {
        where = given ? *given : bare->pair().endpoints(o.port, family);
    }
    diagnosis::Snapshot counters(diagnosis::counted_hosts(where));
    auto result = probe->run(where, [&signals] { signals.check(); });
    // The same diagnosis a run's report gives, on a one-trial run of this measurement.
    results::RunData data;
    results::Trial trial;
    trial.index = 1;
    trial.variant = "this path";
    trial.status = results::TrialStatus::done;
    data.trials.push_back(trial);
    data.measurements.push_back(run::record_of(spec, result, 1, 1, ""));
    data.measurements.back().counters = counters.delta();
    auto diagnosis = report::explain(data);
    if (o.json) {
        auto j = to_json(*kind, spec, result, o.samples);
        j["server"] = where.server.address;
        j["client"] = where.client.address;
        j["counters"] = data.measurements.back().counters;
        j["diagnosis"] = diagnosis;
        std::puts(json_input::dump(j, 2).c_str());
    } else {
        print_human(*kind, result);
        for (const auto& d : diagnosis) std::printf("  diagnosis: %s\n", d.c_str());
    }
    return 0;
}

}  // namespace

namespace {

// Options that mean something only inside `wanlab run`: probes measured together, a
// [[service]] of the experiment's. `wanlab probe` does not take them.
bool run_only(std::string_view option) { return option == "group" || option == "server_port"; }

// An option's default as `wanlab probe` applies it ("@run.duration" is a run's [run] duration).
std::string probe_default(const probes::OptionSpec& o) {
    std::string_view d = o.default_value;
    if (d == "@run.duration") return "10s";
    if (d.size() >= 2 && d.front() == '"') d = d.substr(1, d.size() - 2);
    return d.empty() ? "none" : std::string(d);
}

std::string option_help(const probes::OptionSpec& opt) {
    std::string value = value_of(opt.type);
    if (opt.type == probes::OptionType::choice) value = fmt::format("one of {}", fmt::join(opt.choices, ", "));
    return fmt::format("{} ({}default {})", opt.help, value.empty() ? "" : value + "; ", probe_default(opt));
}

}  // namespace

std::string probe_kind_help(const std::string& name) {
    const auto* kind = probes::find_kind(name);
    if (!kind) return "";
    std::string out = fmt::format("wanlab probe {}: {}\nUsage: wanlab probe {} [OPTIONS]\n\nOptions of {}:\n",
                                  kind->name, kind->summary, kind->name, kind->name);
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& opt : kind->options) {
        if (run_only(opt.name) || std::string_view(opt.name).starts_with("capture")) continue;
        std::string flag = opt.name;
        std::replace(flag.begin(), flag.end(), '_', '-');
        rows.emplace_back("--" + flag, option_help(opt));
    }
    rows.emplace_back("--address ADDRESS", "measure to this server instead of a bare lab (with --server-ns)");
    rows.emplace_back("--server-ns, --client-ns NAME", "namespaces the server and client run in");
    rows.emplace_back("--client-address ADDRESS", "the address the client binds to");
    rows.emplace_back("--port N", "the server's port (default: a free one)");
    rows.emplace_back("--json", "JSON in base units (seconds, bit/s, bytes, fractions)");
    std::size_t width = 0;
    for (const auto& r : rows) width = std::max(width, r.first.size());
    for (const auto& [flag, help] : rows) out += fmt::format("  {:<{}}  {}\n", flag, width, help);
    const bool own_rate = std::any_of(kind->options.begin(), kind->options.end(),
                                      [](const probes::OptionSpec& x) { return std::string_view(x.name) == "rate"; });
    out += fmt::format(
        "\nLink conditions (a lab with a router between client and server; in the micro-VM where this kernel\n"
        "lacks netem):\n"
        "  --rtt, --delay, --jitter, --loss   e.g. --rtt 150ms --loss 1%\n"
        "  {:<33}  the link's rate, e.g. 20mbit\n"
        "  --profile NAME                     a link profile (wanlab profiles): lte, transatlantic, ...\n"
        "  --link-KEY VALUE                   any [link] key (docs/experiment-format.md), e.g. --link-qdisc fq_codel\n"
        "  --no-vm                            refuse instead of moving into the micro-VM\n",
        own_rate ? "--link-rate (--rate is the probe's)" : "--rate");
    out += fmt::format("\nMetrics of {} (base units with --json):\n", kind->name);
    for (const auto& m : kind->metrics) out += fmt::format("  {:<24} {}\n", m.name, m.help);
    out += fmt::format(
        "\nExamples:\n  wanlab probe {0} --duration 5s\n  wanlab probe {0} --rtt 150ms --loss 1%\nThe same keys go "
        "in a [[probe]] table with kind = \"{0}\" (docs/probes.md).\n",
        kind->name);
    return out;
}

void add_probe_options(CLI::App& sub, ProbeArgs& o) {
    std::string kinds;
    for (const auto& k : probes::probe_kinds()) kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", k.name);
    sub.add_option("kind", o.kind, "Probe kind: " + kinds + " (each one's options: wanlab help probe KIND)")
        ->required();
    std::set<std::string> seen;
    for (const auto& k : probes::probe_kinds())
        for (const auto& opt : k.options) {
            if (run_only(opt.name) || !seen.insert(opt.name).second) continue;
            std::string name = opt.name;
            // Listed per kind (`wanlab help probe KIND`), not all kinds' at once.
            add_key_option(sub, name, option_help(opt), [&o, name](const std::string& v) {
                o.values[name] = v;
            })->group("");
        }
    // Link conditions for the lab it builds: every one-value [link] key as --link-KEY, and
    // the usual ones short where no probe option has the name (--rate and --gap are also
    // the udp and transfer kinds' own: for those kinds, --link-rate and --link-gap).
    const std::string group = "Link conditions (a lab with a router; in the micro-VM where this kernel lacks netem)";
    sub.add_option_function<std::string>(
           "--rtt", [&o](const std::string& v) { o.link["rtt"] = v; },
           "The round-trip time, split half each way (e.g. 150ms)")
        ->group(group);
    for (const auto& attr : netem::attributes()) {
        if (!attr.flag) continue;
        const std::string key = attr.key;
        std::string dashed = key;
        std::replace(dashed.begin(), dashed.end(), '_', '-');
        auto* long_flag = sub.add_option_function<std::string>(
            "--link-" + dashed, [&o, key](const std::string& v) { o.link[key] = v; },
            fmt::format("[link] {} (docs/experiment-format.md)", key));
        long_flag->group("");
        if (seen.count(key)) continue;  // a probe option's name: --link-KEY only
        // The usual ones listed; the others accepted as the short spelling of --link-KEY.
        const bool usual = key == "delay" || key == "jitter" || key == "loss";
        sub.add_option_function<std::string>(
               "--" + dashed, [&o, key](const std::string& v) { o.link[key] = v; },
               fmt::format("[link] {}{} (docs/experiment-format.md)", key, usual ? " each way" : ""))
            ->group(usual ? group : "");
    }
    sub.add_option("--profile", o.profile, "A link profile to start from (wanlab profiles: lte, transatlantic, ...)")
        ->group(group);
    sub.add_flag("--no-vm", o.no_vm, "Refuse instead of moving into the micro-VM when this kernel lacks netem");
    auto netns_name = CLI::Validator([](std::string& v) { return sys::netns_name_problem(v); }, "NAME");
    sub.add_option("--server-ns", o.server_ns, "Namespace (as `ip netns` names it) the server runs in; needs --address")
        ->check(netns_name);
    sub.add_option("--client-ns", o.client_ns, "Namespace the client runs in")->check(netns_name);
    sub.add_option("--address", o.address,
                   "Server address (IPv4 or IPv6) to measure to, instead of a bare lab (http: --url names the server)");
    sub.add_option("--client-address", o.client_address, "Address (IPv4 or IPv6) the client binds to");
    sub.add_option("--port", o.port, "Server TCP/UDP port number (default: any free one; iperf3: 5201)");
    sub.add_flag("--json", o.json, "JSON in base units (seconds, bit/s, bytes, fractions)");
    sub.add_flag("--samples", o.samples, "With --json: every latency sample (seconds) of an rr probe too");
}

Runner setup_probe(CLI::App& sub) {
    auto o = std::make_shared<ProbeArgs>();
    add_probe_options(sub, *o);
    sub.footer(
        "Each kind's own options and metrics: wanlab help probe KIND (or wanlab probe KIND --help).\n"
        "Examples:\n"
        "  wanlab probe throughput --streams 4 --duration 5s\n"
        "  wanlab probe http --rtt 150ms --loss 1% --rate 20mbit      (in the micro-VM where the kernel lacks netem)\n"
        "  wanlab probe transfer --size 1MiB --profile lte\n"
        "  wanlab probe rtt --method icmp --count 20 --json\n"
        "  wanlab probe rr --server-split-write true --server-nodelay false\n"
        "  wanlab probe http --url http://192.0.2.10:8080/ --duration 5s\n"
        "  wanlab probe throughput --tool iperf3 --address 198.18.0.6 --server-ns wanlab-RUN-server "
        "--client-ns wanlab-RUN-client");
    return [o] { return run(*o); };
}

}  // namespace wanlab::cli
