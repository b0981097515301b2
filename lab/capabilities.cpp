#include "lab/capabilities.h"

#include <linux/capability.h>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "netem/preflight.h"

namespace wanlab::lab {

std::vector<std::string> missing_capabilities(std::uint64_t cap_eff) {
    std::vector<std::string> out;
    if (!(cap_eff & (1ULL << CAP_NET_ADMIN))) out.emplace_back("CAP_NET_ADMIN");
    if (!(cap_eff & (1ULL << CAP_SYS_ADMIN))) out.emplace_back("CAP_SYS_ADMIN");
    return out;
}

std::uint64_t effective_capabilities() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("CapEff:")) return std::stoull(line.substr(7), nullptr, 16);
    return 0;
}

void require_capabilities(const std::string& action) {
    auto missing = missing_capabilities(effective_capabilities());
    if (missing.empty()) return;
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : " and ") + m;
    throw Error(fmt::format("`{}` changes the machine's network and needs CAP_NET_ADMIN and CAP_SYS_ADMIN; "
                            "missing {}. Nothing was changed. Run it as root (sudo).",
                            action, list),
                2);  // as docs/run.md and the man page say: nothing was touched, the user must act
}

std::set<std::string> needed_qdiscs(const std::vector<experiment::Trial>& trials) {
    std::set<std::string> kinds;
    for (const auto& t : trials)
        for (const auto* d : {&t.link.up, &t.link.down}) {
            if (!d->impaired()) continue;
            kinds.insert("netem");
            if (d->rate_bps && d->shaper != netem::Shaper::netem) kinds.insert(netem::to_string(d->shaper));
            if (d->queue != netem::Queue::none) kinds.insert(netem::to_string(d->queue));
            if (d->netem.seed_explicit) kinds.insert("netem_seed");
            // Host mode's own tree (and hosts mode's, the same): the htb root with the
            // target's class on the way out, the ingress hook and an ifb on the way in.
            bool filtered =
                t.lab.mode == experiment::LabSpec::Mode::host || t.lab.mode == experiment::LabSpec::Mode::hosts;
            if (filtered && d == &t.link.up) kinds.insert("htb");
            if (filtered && d == &t.link.down) kinds.insert({"ingress", "ifb"});
        }
    return kinds;
}

std::set<std::string> needed_qdiscs(const experiment::Experiment& exp) { return needed_qdiscs(exp.trials); }

std::vector<std::string> missing_features(const std::set<std::string>& needed) {
    std::vector<std::string> missing;
    if (needed.empty()) return missing;
    for (const auto& f : netem::probe_kernel_features())
        if (needed.count(f.name) && !f.available) missing.push_back(f.name);
    return missing;
}

std::vector<std::string> missing_qdiscs(const experiment::Experiment& exp) {
    return missing_features(needed_qdiscs(exp));
}

}  // namespace wanlab::lab
