#include "lab/session.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "core/error.h"

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
        for (const auto& s : settings) out.push_back({names.ns(host), s.key, s.value, s.scope});
    return out;
}

LabSession::LabSession(const Trial& trial, const SessionOptions& options, sysctl::ProcSys& proc) {
    check_run_id(options.run);
    if (trial.lab.mode != LabSpec::Mode::netns)
        throw InputError("this lab builds namespace labs only; [lab] mode = \"host\" is not supported here yet");
    LabNames names{options.run};
    auto changes = sysctl_changes(trial, names);
    auto step = [&](const std::string& stage) {
        if (options.progress) options.progress(stage);
    };
    sysctl::validate_or_throw(proc, changes);  // before anything changes
    {
        FileLock start(options.dir / "lock", true, "the journal directory");
        settle_stale_journals(options.dir, options.restore_stale, proc, options.log);
        for (const auto& c : changes)
            if (c.ns.empty())
                locks_.emplace_back(options.dir / fmt::format("sysctl-{}.lock", c.key), false, c.key);
        journal_.emplace(options.dir, options.run);
    }
    step("journal");
    topology_.emplace(trial.lab, options.run, &*journal_, proc, options.progress);
    sysctl::validate_or_throw(proc, changes);  // now inside the real namespaces
    Journal* journal = &*journal_;
    sysctls_.emplace(
        proc,
        [journal](const std::string& ns, const std::string& key, const std::string& old) {
            journal->record(sysctl_entry(ns, key, old));
        },
        [journal] { journal->keep(); });
    for (const auto& c : changes) sysctls_->set(c.ns, c.key, c.value);
    step("sysctls");
}

}  // namespace wanlab::lab
