#include "lab/session.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "lab/ssh_guard.h"
#include "netem/preflight.h"

namespace wanlab::lab {

std::string new_run_id() {
    std::random_device rd;
    return fmt::format("{:08x}", rd());
}

void check_run_id(const std::string& run) {
    bool ok = !run.empty() && run.size() <= 24 && std::all_of(run.begin(), run.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
    if (!ok) throw InputError(fmt::format("run id `{}`: use 1 to 24 of a-z, 0-9 and -", run));
}

std::vector<sysctl::Change> sysctl_changes(const Trial& trial, const LabNames& names) {
    std::vector<sysctl::Change> out;
    for (const auto& s : trial.sysctl.global) out.push_back({"", s.key, s.value, sysctl::Scope::global});
    for (const auto& [host, settings] : trial.sysctl.per_host)
        for (const auto& s : settings) out.push_back({host == "host" ? "" : names.ns(host), s.key, s.value, s.scope});
    return out;
}

namespace {

// Every distinct (ns, key, value) of all trials, in layers where each (ns, key) appears at
// most once, since a change list validates as one consistent configuration: each value is
// checked once however many trials use it.
std::vector<std::vector<sysctl::Change>> change_layers(const std::vector<Trial>& trials, const LabNames& names) {
    std::vector<std::vector<sysctl::Change>> layers;
    for (const auto& t : trials)
        for (auto& c : sysctl_changes(t, names)) {
            auto same_key = [&c](const sysctl::Change& o) { return o.ns == c.ns && o.key == c.key; };
            bool seen = false, placed = false;
            for (const auto& layer : layers)
                for (const auto& o : layer) seen = seen || (same_key(o) && o.value == c.value);
            if (seen) continue;
            for (auto& layer : layers)
                if (std::none_of(layer.begin(), layer.end(), same_key)) {
                    layer.push_back(c);
                    placed = true;
                    break;
                }
            if (!placed) layers.push_back({c});
        }
    return layers;
}

void validate_layers(sysctl::ProcSys& proc, const std::vector<std::vector<sysctl::Change>>& layers) {
    for (const auto& layer : layers) sysctl::validate_or_throw(proc, layer);
}

}  // namespace

LabSession::LabSession(const std::vector<Trial>& trials, const SessionOptions& options, sysctl::ProcSys& proc)
    : options_(options), proc_(&proc) {
    check_run_id(options.run);
    if (trials.empty()) throw InputError("the experiment has no trials");
    const auto& lab = trials.front().lab;
    const bool host = lab.mode == LabSpec::Mode::host;
    bool impairs_up = false, impairs_down = false;
    LabNames names{options.run};
    auto layers = change_layers(trials, names);
    auto step = [&](const std::string& stage) {
        if (options.progress) options.progress(stage);
    };
    validate_layers(proc, layers);  // before anything changes
    if (host) {
        host_kernel_.emplace("");
        try {
            (void)host_kernel_->ifindex(lab.dev);
        } catch (const Error& e) {
            throw InputError(
                fmt::format("[lab] dev = \"{}\": {}; `ip link` lists this machine's interfaces", lab.dev, e.what()));
        }
        refuse_if_ssh("", lab.dev, lab.target, lab.port, options.force);
        impairs_up = std::any_of(trials.begin(), trials.end(), [](const Trial& t) { return t.link.up.impaired(); });
        impairs_down = std::any_of(trials.begin(), trials.end(), [](const Trial& t) { return t.link.down.impaired(); });
        if (impairs_down) {
            if (auto why = netem::ifb_autoload_problem(); !why.empty())
                throw InputError(
                    fmt::format("[link.down] in host mode redirects the target's packets through an ifb "
                                "device: {}",
                                why));
        }
    }
    {
        FileLock start(options.dir / "lock", true, "the journal directory");
        settle_stale_journals(options.dir, options.restore_stale, proc, options.log);
        // Keys of wanlab's own namespace are the machine's: one run at a time changes each.
        for (const auto& c : layers.empty() ? std::vector<sysctl::Change>{} : layers.front())
            if (c.ns.empty()) locks_.emplace_back(options.dir / fmt::format("sysctl-{}.lock", c.key), false, c.key);
        if (host) locks_.emplace_back(options.dir / fmt::format("dev-{}.lock", lab.dev), false, "device " + lab.dev);
        journal_.emplace(options.dir, options.run);
    }
    step("journal");
    built_ = lab;
    if (!host) {
        topology_.emplace(lab, options.run, &*journal_, proc, options.progress);
        validate_layers(proc, layers);  // now inside the real namespaces
    }
    Journal* journal = &*journal_;
    sysctls_.emplace(
        proc,
        [journal](const std::string& ns, const std::string& key, const std::string& old) {
            journal->record(sysctl_entry(ns, key, old));
        },
        [journal] { journal->keep(); });
    if (host) {
        netem::Filter target{lab.target, lab.port, false, lab.line_rate_bps};
        host_.emplace(*host_kernel_, lab.dev, target, lab.line_rate_bps);
        host_->check(impairs_up, impairs_down);
        journal_->record(host_entry("", host_->undo_plan()));  // before its first change
    }
}

LabSession::~LabSession() {
    if (!host_) return;
    try {
        host_->restore();
    } catch (const std::exception& e) {
        if (options_.log)
            options_.log(
                fmt::format("could not restore {}: {}; `wanlab restore` retries", host_->undo_plan().dev, e.what()));
        journal_->keep();
    }
}

const Topology& LabSession::topology() const {
    if (!topology_) throw Error("host mode builds no namespace lab");
    return *topology_;
}

LabSession::LabSession(const Trial& trial, const SessionOptions& options, sysctl::ProcSys& proc)
    : LabSession(std::vector<Trial>{trial}, options, proc) {
    apply_trial(trial);
}

void LabSession::apply_trial(const Trial& trial) {
    if (topology_ && (trial.lab.mtu != built_.mtu || trial.lab.offloads != built_.offloads ||
                      trial.lab.queue_length != built_.queue_length)) {
        // A [lab] key the links are made with (a sweep of lab.mtu): the lab is built again,
        // under the same names, with the trial's; its sysctls and qdiscs follow below.
        up_.reset();
        down_.reset();
        router_.reset();
        topology_.reset();
        topology_.emplace(trial.lab, options_.run, &*journal_, *proc_, options_.progress);
        built_ = trial.lab;
    }
    auto changes = sysctl_changes(trial, LabNames{options_.run});
    // Keys an earlier trial changed that this one leaves alone go back to the run's start.
    for (const auto& saved : sysctls_->saved()) {
        auto same = [&saved](const sysctl::Change& c) { return c.ns == saved.ns && c.key == saved.key; };
        if (std::none_of(changes.begin(), changes.end(), same)) sysctls_->set(saved.ns, saved.key, saved.old);
    }
    for (const auto& c : changes) sysctls_->set(c.ns, c.key, c.value);
    if (options_.progress) options_.progress("sysctls");

    if (host_) {
        host_->apply(trial.link.up, trial.link.down, trial.lab.mtu, netem::Psched::from_proc());
        if (options_.progress) options_.progress("qdiscs");
        return;
    }
    if (!router_) {
        const std::string ns = topology_->ns("router");
        router_.emplace(ns);
        up_.emplace(*router_, "wl-rs");
        down_.emplace(*router_, "wl-rc");
        // Written before the first qdisc change, so `wanlab restore` can put the trees back
        // even if the namespace outlives a killed run.
        journal_->record(qdisc_entry(ns, "wl-rs", up_->serialize()));
        journal_->record(qdisc_entry(ns, "wl-rc", down_->serialize()));
    }
    auto psched = netem::Psched::from_proc();
    auto put = [&](netem::DeviceQdiscs& dev, const netem::Direction& d) {
        if (d.impaired())
            dev.apply(d, trial.lab.mtu, psched);
        else
            dev.restore();
    };
    put(*up_, trial.link.up);
    put(*down_, trial.link.down);
    if (options_.progress) options_.progress("qdiscs");
}

}  // namespace wanlab::lab
