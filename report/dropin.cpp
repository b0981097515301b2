// sysctl_dropin() and trial_for(): one measured configuration's sysctls as a sysctl.d file.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "report/detail.h"
#include "report/report.h"

namespace wanlab::report {
namespace {

/// Text a sysctl.d line can carry: every run of whitespace and control characters (the tabs
/// of "4096\t131072\t6291456", a newline a foreign database might hold) one space, trimmed.
std::string one_line(const std::string& s) {
    std::string out;
    bool gap = false;
    for (unsigned char c : s) {
        if (std::isspace(c) || c < 0x20 || c == 0x7f) {
            gap = true;
            continue;
        }
        if (gap && !out.empty()) out += ' ';
        gap = false;
        out += static_cast<char>(c);
    }
    return out;
}

/// "a, b, c" of `items`, each as it is, "(none)" for none.
std::string listed(const std::vector<std::string>& items, const std::string& quote = "") {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : ", ") + quote + (i.empty() ? "(no sweep)" : i) + quote;
    return s.empty() ? "(none)" : s;
}

/// A part of a point's label that is easy to type: its first value ("40ms" of "link.rtt=40ms").
std::string example_part(const std::string& label) {
    auto eq = label.find('=');
    auto end = label.find(',');
    return eq == std::string::npos ? label : label.substr(eq + 1, end == std::string::npos ? end : end - eq - 1);
}

/// "bulk.throughput median 250 Mbit/s": each probe's first headline metric in `trial`.
std::string measured(const results::RunData& data, const results::Trial& trial) {
    std::string s;
    for (const auto& p : detail::probes_of(data)) {
        auto metrics = detail::headline_metrics(p);
        if (metrics.empty()) continue;
        const auto* spec = detail::metric_spec(p, metrics.front());
        auto sum = summarize(detail::values_of(data, trial.index, p.name, metrics.front()));
        if (sum.n == 0 || !spec) continue;
        s += (s.empty() ? "" : "; ") +
             fmt::format("{}.{} median {}", p.name, metrics.front(), probes::human(spec->unit, sum.median));
    }
    return s.empty() ? "nothing measured" : s;
}

/// Where `key`'s value (as Trial::sysctls names it) came from: swept, set alike for every
/// variant at this sweep point (the experiment's own [sysctl] or a profile), or by the variant.
std::string origin(const results::RunData& data, const results::Trial& trial, const std::string& key) {
    auto bare = key.substr(key.find(':') == std::string::npos ? 0 : key.find(':') + 1);
    for (const auto& [path, value] : trial.sweep)
        if (path.size() >= bare.size() && path.compare(path.size() - bare.size(), bare.size(), bare) == 0 &&
            path.starts_with("sysctl."))
            return fmt::format("swept ({}={})", path, value);
    const auto point = detail::point_label(trial);
    const auto& value = trial.sysctls.at(key);
    bool alike = true, others = false;
    for (const auto& t : data.trials) {
        if (t.index == trial.index || detail::point_label(t) != point || t.variant == trial.variant) continue;
        others = true;
        auto it = t.sysctls.find(key);
        alike = alike && it != t.sysctls.end() && it->second == value;
    }
    if (others && alike) return "set alike for every variant (the experiment's [sysctl])";
    return fmt::format("set by variant {}", trial.variant);
}

/// Per-host keys ("server:net.core.rmem_max") by host, without the host: server -> [(key, value)].
using HostKeys = std::map<std::string, std::vector<std::pair<std::string, std::string>>>;

/// The drop-in's header: the run, the trial, when, where and on which kernel it was measured,
/// what it measured, which hosts' keys follow, and a warning for the micro-VM's kernel.
std::string header(const results::RunData& data, const results::Trial& trial, const std::string& host,
                   const HostKeys& hosts) {
    const auto& run = data.run;
    const auto point = detail::point_label(trial);
    std::string s = "# sysctl.d drop-in written by `wanlab results sysctl`: the sysctls of one measured\n";
    s += "# configuration. Install as /etc/sysctl.d/90-wanlab.conf, apply with `sysctl --system`.\n#\n";
    s += fmt::format("# run:        {}{}\n", one_line(run.id),
                     run.experiment.empty() ? "" : " (" + one_line(run.experiment) + ")");
    if (!run.file.empty()) s += fmt::format("# experiment: {}\n", one_line(run.file));
    s += fmt::format("# trial:      {} ({}): variant {}{}\n", trial.index, one_line(trial.id), one_line(trial.variant),
                     point.empty() ? "" : " @ " + one_line(point));
    if (trial.status != results::TrialStatus::done)
        s += fmt::format("#             its status is {}: its measurements are partial or missing\n",
                         to_string(trial.status));
    s += fmt::format("# measured:   {}on {}, kernel {}\n", run.started.empty() ? "" : one_line(run.started) + " ",
                     one_line(run.env.hostname.empty() ? "?" : run.env.hostname),
                     one_line(run.env.kernel.empty() ? "?" : run.env.kernel));
    s += fmt::format("#             where: {}\n", one_line(run.env.where.empty() ? "?" : run.env.where));
    s += fmt::format("# result:     {}\n", one_line(measured(data, trial)));
    if (hosts.empty()) {
        s += "# hosts:      every sysctl is global (the whole machine)\n";
    } else if (host.empty()) {
        std::vector<std::string> names;
        for (const auto& kv : hosts) names.push_back(kv.first);
        s += fmt::format(
            "# hosts:      global sysctls below; those the lab set on one host only ({}) are\n"
            "#             commented out under that host: pick one with --host NAME\n",
            listed(names));
    } else {
        s += fmt::format("# hosts:      for lab host {}: the global sysctls and {}'s own{}\n", one_line(host),
                         one_line(host), hosts.contains(host) ? "" : " (it set none of its own)");
    }
    if (run.env.where.starts_with("vm")) {
        s += "#\n# WARNING: these values were measured in wanlab's micro-VM, on its kernel " +
             one_line(run.env.kernel) + ",\n# not on the machine";
        if (run.env.host)
            s += fmt::format(" that started it ({}, kernel {})", one_line(run.env.host->hostname),
                             one_line(run.env.host->kernel));
        s += ". Another kernel can need other values:\n# measure there (`wanlab run --no-vm`) before relying on "
             "them.\n";
    }
    return s;
}

}  // namespace

std::string sysctl_dropin(const results::RunData& data, const results::Trial& trial, const std::string& host) {
    const auto& run = data.run;
    const std::string source = run.file.empty() ? "" : " (" + one_line(run.file) + ")";
    const std::string measured_in = fmt::format("measured in run {} trial {} ({}): {}", one_line(run.id), trial.index,
                                                one_line(trial.id), one_line(measured(data, trial)));
    std::vector<std::pair<std::string, std::string>> global;
    HostKeys hosts;
    for (const auto& [key, value] : trial.sysctls) {
        auto colon = key.find(':');
        if (colon == std::string::npos)
            global.emplace_back(key, value);
        else
            hosts[key.substr(0, colon)].emplace_back(key.substr(colon + 1), value);
    }
    std::string s = header(data, trial, host, hosts);
    if (trial.sysctls.empty()) {
        s += "#\n# This configuration sets no sysctl: it measured the kernel's values as they were.\n";
        return s;
    }
    auto line = [&](const std::string& key, const std::string& value, const std::string& key_as_recorded,
                    const std::string& prefix, const std::string& note) {
        return fmt::format("\n# {}{}{}\n# {}\n{}{} = {}\n", one_line(origin(data, trial, key_as_recorded)), note,
                           source, measured_in, prefix, one_line(key), one_line(value));
    };
    const auto* chosen = host.empty() || !hosts.contains(host) ? nullptr : &hosts.at(host);
    auto global_value = [&global](const std::string& key) -> const std::string* {
        for (const auto& kv : global)
            if (kv.first == key) return &kv.second;
        return nullptr;
    };
    for (const auto& [key, value] : global) {
        const std::string& name = key;  // clang before 16 cannot capture a structured binding
        bool overridden =
            chosen && std::any_of(chosen->begin(), chosen->end(), [&name](const auto& kv) { return kv.first == name; });
        if (!overridden) s += line(key, value, key, "", "");
    }
    if (chosen)
        for (const auto& [key, value] : *chosen) {
            const auto* replaced = global_value(key);
            s += line(key, value, host + ":" + key, "",
                      " on host " + one_line(host) +
                          (replaced ? " (in place of the global " + one_line(*replaced) + ")" : ""));
        }
    if (!host.empty()) return s;
    for (const auto& [name, keys] : hosts) {
        s +=
            fmt::format("\n# --- set on lab host {} only: uncomment on the machine in that role ---\n", one_line(name));
        for (const auto& [key, value] : keys)
            s += line(key, value, name + ":" + key, "# ", " on host " + one_line(name));
    }
    return s;
}

TrialChoice trial_for(const results::RunData& data, const std::string& variant, const std::string& point,
                      const std::string& host) {
    auto variants = detail::variants_of(data);
    if (std::find(variants.begin(), variants.end(), variant) == variants.end())
        throw InputError(fmt::format("run {} has no variant \"{}\"; its variants: {} (give one with --variant)",
                                     data.run.id, variant, listed(variants)));
    auto points = detail::points_of(data);
    TrialChoice choice;
    if (point.empty()) {
        if (points.size() > 1)
            throw InputError(
                fmt::format("run {} measured {} sweep points: {}; pick one with --point (the label or a "
                            "unique part of it, e.g. --point {})",
                            data.run.id, points.size(), listed(points, "\""), example_part(points.front())));
        choice.point = points.front();
    } else if (std::find(points.begin(), points.end(), point) != points.end()) {
        choice.point = point;
    } else {
        std::vector<std::string> matches;
        for (const auto& p : points)
            if (p.find(point) != std::string::npos) matches.push_back(p);
        if (matches.size() != 1)
            throw InputError(
                fmt::format("--point \"{}\" matches {} of run {}'s sweep points; its points: {} (give "
                            "the label or a part of it only one contains)",
                            point, matches.empty() ? "none" : "several", data.run.id, listed(points, "\"")));
        choice.point = matches.front();
        choice.note = fmt::format("--point \"{}\" matched sweep point \"{}\"", point, choice.point);
    }
    choice.trial = detail::trial_at(data, choice.point, variant);
    if (!choice.trial)
        throw InputError(fmt::format("run {} has no trial of variant {} at {} (not planned, or not reached)",
                                     data.run.id, variant,
                                     choice.point.empty() ? "its only point" : "\"" + choice.point + "\""));
    if (!host.empty()) {
        std::set<std::string> hosts{"client", "router", "server", "host"};
        for (const auto& t : data.trials)
            for (const auto& kv : t.sysctls)
                if (auto colon = kv.first.find(':'); colon != std::string::npos)
                    hosts.insert(kv.first.substr(0, colon));
        if (!hosts.contains(host))
            throw InputError(fmt::format("--host \"{}\" is no lab host of run {}; its hosts: {}", host, data.run.id,
                                         listed({hosts.begin(), hosts.end()})));
    }
    return choice;
}

}  // namespace wanlab::report
