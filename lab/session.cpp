#include "lab/session.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "core/process.h"

namespace wanlab::lab {

std::string new_run_id() {
    std::random_device rd;
    return fmt::format("{:08x}", rd());
}

void check_run_id(const std::string& run) {
    if (!valid_run_id(run)) throw InputError(fmt::format("run id `{}`: use 1 to 24 of a-z, 0-9 and -", run));
}

std::vector<sysctl::Change> sysctl_changes(const experiment::Trial& trial, const experiment::LabNames& names) {
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
std::vector<std::vector<sysctl::Change>> change_layers(const std::vector<experiment::Trial>& trials,
                                                       const experiment::LabNames& names) {
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

// Every program a service or its ready check runs is there, before anything changes.
void check_programs(const std::vector<experiment::Trial>& trials) {
    for (const auto& t : trials)
        for (const auto& s : t.services)
            for (const auto* argv : {&s.command, &s.ready.command}) {
                if (argv->empty()) continue;
                const std::string& program = argv->front();
                if (sys::find_program(program).empty())
                    throw InputError(fmt::format(
                        "service `{}`: `{}` is not installed (not {}); install it or give its full path in `{}`; "
                        "nothing was changed",
                        s.name, program,
                        program.find('/') != std::string::npos ? "an executable file"
                                                               : "on PATH, nor in /usr/sbin or /sbin",
                        argv == &s.command ? "command" : "ready.command"));
            }
}

void validate_layers(sysctl::ProcSys& proc, const std::vector<std::vector<sysctl::Change>>& layers) {
    for (const auto& layer : layers) sysctl::validate_or_throw(proc, layer);
}

}  // namespace

LabSession::LabSession(const std::vector<experiment::Trial>& trials, const SessionOptions& options,
                       sysctl::ProcSys& proc)
    : options_(options) {
    check_run_id(options.run);
    if (trials.empty()) throw InputError("the experiment has no trials");
    const auto& lab = trials.front().lab;
    if (lab.mode == experiment::LabSpec::Mode::hosts)
        throw InputError(
            "[lab] mode = \"hosts\" runs across machines with `wanlab run` only; `lab up` and `shell` build a lab "
            "on this machine (use mode = \"netns\" or \"host\" for them)");
    experiment::LabNames names{options.run};
    auto layers = change_layers(trials, names);
    validate_layers(proc, layers);  // before anything changes
    std::vector<sysctl::Change> all;
    for (const auto& layer : layers) all.insert(all.end(), layer.begin(), layer.end());
    check_testbed(trials, all, proc, options.force);
    check_programs(trials);
    {
        FileLock start(options.dir / "lock", true, "the journal directory");
        settle_stale_journals(options.dir, options.restore_stale, proc, options.log,
                              options.resume ? options.run : std::string());
        // Keys of wanlab's own namespace are the machine's: one run at a time changes each.
        for (const auto& c : layers.empty() ? std::vector<sysctl::Change>{} : layers.front())
            if (c.ns.empty()) locks_.emplace_back(options.dir / fmt::format("sysctl-{}.lock", c.key), false, c.key);
        for (const auto& l : testbed_locks(lab)) locks_.emplace_back(options.dir / l.file, false, l.what);
        journal_.emplace(options.dir, options.run);
    }
    if (options.progress) options.progress("journal");
    testbed_ = make_testbed(trials, options.run, *journal_, proc, options.progress, options.log);
    validate_layers(proc, layers);  // now inside the real namespaces, if any
    Journal* journal = &*journal_;
    sysctls_.emplace(
        proc,
        [journal](const std::string& ns, const std::string& key, const std::string* old, const std::string& value) {
            journal->record(old ? sysctl_entry(ns, key, *old, value) : sysctl_write_entry(ns, key, value));
        },
        [journal] { journal->keep(); });
}

LabSession::~LabSession() { stop_services(); }

LabSession::LabSession(const experiment::Trial& trial, const SessionOptions& options, sysctl::ProcSys& proc)
    : LabSession(std::vector<experiment::Trial>{trial}, options, proc) {
    apply_trial(trial);
}

void LabSession::apply_trial(const experiment::Trial& trial) {
    stop_services();  // a trial's services are its own: the next one starts them afresh
    testbed_->prepare(trial.lab);
    auto changes = sysctl_changes(trial, experiment::LabNames{options_.run});
    // Keys an earlier trial changed that this one leaves alone go back to the run's start.
    for (const auto& saved : sysctls_->saved()) {
        auto same = [&saved](const sysctl::Change& c) { return c.ns == saved.ns && c.key == saved.key; };
        if (std::none_of(changes.begin(), changes.end(), same)) sysctls_->set(saved.ns, saved.key, saved.old);
    }
    for (const auto& c : changes) sysctls_->set(c.ns, c.key, c.value);
    if (options_.progress) options_.progress("sysctls");
    testbed_->apply_link(trial);
    if (options_.progress) options_.progress("qdiscs");
}

std::map<std::string, std::string> LabSession::placeholders(const experiment::Trial& trial,
                                                            const std::filesystem::path& dir) const {
    auto where = testbed_->endpoints(AF_UNSPEC);
    return {{"server", where.server.address},
            {"client", where.client.address},
            {"trial", trial.id},
            {"run", options_.run},
            {"dir", dir.string()}};
}

void LabSession::start_services(const experiment::Trial& trial, const std::filesystem::path& dir,
                                const probes::Tick& tick) {
    stop_services();
    if (trial.services.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(fmt::format("creating the trial folder {}: {}", dir.string(), ec.message()));
    auto values = placeholders(trial, dir);
    Journal* journal = &*journal_;
    for (const auto& spec : trial.services) {
        auto where = testbed_->placement(spec.host);
        auto started = [&](pid_t pid) {
            // The process is SIGKILLed if wanlab's thread dies before this entry is durable.
            journal->record(process_entry(where.netns, spec.name, pid, process_start_time(pid)));
        };
        services_.push_back(std::make_unique<services::Service>(spec, where, values, dir, started));
        services_.back()->wait_ready(tick);
    }
    if (options_.progress) options_.progress("services");
}

void LabSession::check_services() {
    for (auto& s : services_) s->check_running();
}

void LabSession::stop_services() noexcept {
    while (!services_.empty()) services_.pop_back();  // each destructor stops its own
}

PairSession::PairSession(const std::string& run, const std::filesystem::path& dir) {
    check_run_id(run);
    {
        FileLock start(dir / "lock", true, "the journal directory");
        sysctl::RealProcSys proc;  // only read: stale journals are refused, never replayed here
        settle_stale_journals(dir, false, proc);
        journal_.emplace(dir, run);
    }
    pair_.emplace("wanlab-" + run, &*journal_);  // wanlab-RUN-a, wanlab-RUN-b
}

}  // namespace wanlab::lab
