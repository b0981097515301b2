#include "run/launch.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/process.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/text.h"
#include "lab/capabilities.h"
#include "lab/session.h"
#include "lab/watchdog.h"
#include "netem/preflight.h"
#include "results/store.h"
#include "run/record.h"
#include "run/resume.h"
#include "vm/vm.h"

namespace wanlab::run {
namespace {

namespace fs = std::filesystem;

/// PageFollower: while a run in the micro-VM refreshes its page at `staged`, copies it to
/// `target` whenever it changed (every second). Creates: a thread. Undoes: stops it, copies
/// once more, and removes the staged page.
class PageFollower {
public:
    PageFollower(fs::path staged, fs::path target) : staged_(std::move(staged)), target_(std::move(target)) {
        thread_ = std::thread([this] {
            std::unique_lock lock(mutex_);
            while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) copy();
        });
    }
    ~PageFollower() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
        copy();
        std::error_code ec;
        fs::remove(staged_, ec);
    }
    PageFollower(const PageFollower&) = delete;
    PageFollower& operator=(const PageFollower&) = delete;

private:
    void copy() {
        std::error_code ec;
        auto when = fs::last_write_time(staged_, ec);
        if (ec || when == copied_) return;
        try {  // created beside the target, never through a symlink planted there
            sys::write_file_atomic(target_.string(), sys::read_file(staged_.string(), kMaxPage, "the page", true),
                                   "the page");
            copied_ = when;
        } catch (const Error&) {
            // the next change of the staged page tries again
        }
    }
    static constexpr std::size_t kMaxPage = std::size_t{1} << 30;
    fs::path staged_, target_;
    fs::file_time_type copied_{};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::thread thread_;  // last: started once everything above exists
};

/// The command line of the run inside the micro-VM.
std::vector<std::string> inner_argv(const RunRequest& r, const fs::path& out, const std::string& id, bool resume,
                                    const std::string& where) {
    std::vector<std::string> argv{lab::self_exe(),
                                  "run",
                                  fs::absolute(r.file).string(),
                                  "--no-vm",
                                  "--out",
                                  out.string(),
                                  resume ? "--resume" : "--run",
                                  id,
                                  "--inner",
                                  "--where",
                                  where};
    for (const auto& s : r.sets) argv.insert(argv.end(), {"--set", s});
    if (!r.shard.empty()) argv.insert(argv.end(), {"--shard", r.shard});
    if (r.force) argv.push_back("--force");
    if (r.quiet) argv.push_back("--quiet");
    return argv;
}

/// A run that did not complete: says so and how to continue it; an interrupted one records
/// that command too, where it outlives the terminal (SIGHUP: it went away).
void report_unfinished(const RunRequest& r, Outcome& outcome, results::Store& store, Progress& progress) {
    auto& run = outcome.data.run;
    if (run.status == results::RunStatus::complete) return;
    auto again = resume_command(r.file, run.id, r.out);
    const auto kept = outcome.data.measurements.size();
    progress.line(fmt::format("run {} {}: {}; machine restored; {} measurement{} kept in {}; continue it with: {}",
                              run.id, run.status, run.error, kept, kept == 1 ? "" : "s", store.path().string(), again));
    if (run.status == results::RunStatus::interrupted) {
        run.error += "; continue with: " + again;
        end_session(run);
        store.finish_run(run);
    }
}

}  // namespace

ThisMachine this_machine(const experiment::Experiment& exp) {
    return {[] { lab::require_capabilities("wanlab run"); }, [&exp] { return lab::missing_qdiscs(exp); },
            [] { return lab::missing_capabilities(lab::effective_capabilities()).empty(); }};
}

PlaceChoice choose_place(const experiment::Experiment& exp, const RunRequest& r, const ThisMachine& machine) {
    const auto& lab = exp.trials.front().lab;
    const bool host = lab.mode == experiment::LabSpec::Mode::host;
    const bool hosts = lab.mode == experiment::LabSpec::Mode::hosts;
    // Host mode impairs this machine's own interface: the micro-VM has none of it.
    if (host && r.vm)
        throw InputError(
            fmt::format("{}: [lab] mode = \"host\" impairs this machine's interface {}; it cannot run in "
                        "the micro-VM (drop --vm)",
                        r.file, lab.dev));
    if (hosts && r.vm)
        throw InputError(
            fmt::format("{}: [lab] mode = \"hosts\" runs across real machines; it cannot run in the "
                        "micro-VM (drop --vm)",
                        r.file));
    if (r.vm) return {Place::micro_vm, ""};
    if (!host && !hosts && !r.no_vm && machine.has_root && !machine.has_root())
        return {Place::micro_vm,
                "wanlab: no root here, and the micro-VM needs none: running the experiment there (--no-vm refuses "
                "instead)\n"};
    machine.require_capabilities();
    // Hosts mode: the kernel of the machine with the link conditions needs them, this one only
    // when it is that machine (the client, run here); another's agent checks its own.
    const bool elsewhere = hosts && lab.machine(lab.link_machine())->ssh != "local";
    auto missing = elsewhere ? std::vector<std::string>{} : machine.missing_qdiscs();
    if (missing.empty()) return {Place::here, ""};
    if (host || hosts)
        throw Error(
            fmt::format("this kernel lacks {} (needed by {}); {} mode impairs this machine's own interface, "
                        "so it needs them here. {}",
                        fmt::join(missing, ", "), r.file, host ? "host" : "hosts", netem::advice_for(missing.front())),
            2);
    if (r.no_vm)
        throw Error(fmt::format("this kernel lacks {} (needed by {}); drop --no-vm to run in the micro-VM. {}",
                                fmt::join(missing, ", "), r.file, netem::advice_for(missing.front())),
                    2);
    return {Place::micro_vm, fmt::format("wanlab: this kernel has no {}: running the experiment in the micro-VM "
                                         "(--no-vm refuses instead)\n",
                                         fmt::join(missing, ", "))};
}

Outcome measure_here(const RunRequest& r, const experiment::Experiment& exp, const std::string& text,
                     const results::RunData* before, const std::function<void(const results::RunData&)>& on_trial) {
    sys::SignalEvents signals;  // before any thread exists, so every thread blocks them
    fs::create_directories(r.out);
    results::Store store(fs::path(r.out) / "results.db");
    Progress progress(r.quiet ? Progress::Mode::quiet : Progress::detect(stderr));
    RunnerOptions ro;
    ro.run_id = r.run_id.empty() ? lab::new_run_id() : r.run_id;
    ro.restore_stale = r.restore;
    ro.force = r.force;
    ro.allow_ssh_commands = r.allow_ssh_commands;
    lab::RunWatchdog watchdog;  // retired as the run returns, the machine given back
    if (r.auto_restore_s > 0)
        ro.on_stage = [&](const std::string& stage) {
            if (stage != "journal") return;  // armed once the journal it watches exists
            pid_t pid = watchdog.arm(lab::run_watchdog(ro.run_id, r.auto_restore_s, ro.journal_dir));
            progress.line(
                fmt::format("run {}: auto-restore by watchdog pid {}: the run ends and the machine is given "
                            "back after {} s, or at once if wanlab is killed (log: {})",
                            ro.run_id, pid, r.auto_restore_s, watchdog.options().log.string()));
        };
    ro.where = r.where.empty() ? "host" : r.where;
    ro.host_env = r.host_env;
    ro.shard = r.shard;
    if (before) {
        ro.resume_note =
            admit_resume(*before, exp, {r.file, text, r.sets, r.shard, r.out, r.force}, environment(exp, ro.where));
        ro.resume = before;
        ro.run_id = before->run.id;
    }
    ro.on_trial = on_trial;
    auto outcome = run_experiment(exp, text, ro, store, progress, [&signals] { signals.check(); });
    watchdog.retire();
    report_unfinished(r, outcome, store, progress);
    return outcome;
}

Outcome measure_in_vm(const RunRequest& r, const results::RunData* before) {
    if (r.auto_restore_s > 0)
        std::fputs(
            "wanlab: --auto-restore does not apply to a run in the micro-VM: it changes only the VM, which "
            "goes away with everything in it when the run ends or wanlab is killed\n",
            stderr);
    fs::create_directories(r.out);
    fs::path out = fs::absolute(r.out);
    std::string id = before ? before->run.id : r.run_id.empty() ? lab::new_run_id() : r.run_id;
    vm::VmOptions vo;
    vo.out_dir = out;
    vm::Vm machine(vo);
    auto argv = inner_argv(r, out, id, before != nullptr,
                           fmt::format("vm ({}, {} cpus)", vm::accel_name(machine.accel().accel), machine.cpus()));
    // This machine, for the report to say which of its defaults the VM's kernel did not share.
    const auto host_file = out / fmt::format(".host-{}.json", id);
    sys::write_file_atomic(host_file.string(), nlohmann::json(this_machine_environment()).dump(),
                           "this machine's environment");
    argv.insert(argv.end(), {"--host-env", host_file.string()});
    // The page: the run in the VM refreshes it in the results share (the only place it can
    // write), and a copy follows it to where it was asked for while the run goes on.
    std::optional<PageFollower> follower;
    if (!r.html.empty()) {
        auto staged = out / fmt::format(".page-{}.html", id);
        argv.insert(argv.end(), {"--html", staged.string()});
        follower.emplace(staged, r.html);
    }
    auto ran = machine.run(argv);
    follower.reset();
    std::error_code ec;
    fs::remove(host_file, ec);
    results::Store store(out / "results.db");
    Outcome outcome;
    auto& data = outcome.data;
    try {
        data = store.load_run(id);
    } catch (const InputError&) {
        // The VM never got as far as recording the run: its own message said why.
        if (ran.interrupted) {
            outcome.recorded = false;
            outcome.exit_code = ran.exit_status;
            return outcome;
        }
        throw Error(fmt::format("the run in the micro-VM ended (exit {}) before recording anything", ran.exit_status));
    }
    if (data.run.status == results::RunStatus::running) {  // the VM was killed mid-run: keep what it committed
        data.run.status = ran.interrupted ? results::RunStatus::interrupted : results::RunStatus::failed;
        data.run.error = ran.interrupted ? "interrupted; the micro-VM was stopped"
                                         : fmt::format("the micro-VM ended mid-run (exit {})", ran.exit_status);
        data.run.finished = utc_now();
        data.run.error += "; continue with: " + resume_command(r.file, id, r.out);
        end_session(data.run);
        store.finish_run(data.run);
    }
    outcome.exit_code = ran.exit_status;
    if (ran.timed_out || ran.out_of_memory) outcome.exit_code = outcome.exit_code ? outcome.exit_code : 1;
    return outcome;
}

pid_t detach(const RunRequest& r, const std::string& id) {
    fs::create_directories(r.out);
    auto log = fs::absolute(fs::path(r.out) / fmt::format("wanlab-{}.log", id));
    pid_t pid = sys::fork_detached(log, "--detach");
    if (pid == 0) return 0;
    std::fputs(
        text::terminal_safe(fmt::format("wanlab: run {} goes on in the background (pid {}), its output in {}\n"
                                        "  follow it:  tail -f {}\n  its report: wanlab results show {} --out {}\n"
                                        "  stop it:    kill {}   (the machine is restored; then {} continues it)\n",
                                        id, pid, log.string(), text::shell_quote(log.string()), id,
                                        text::shell_quote(r.out), pid, resume_command(r.file, id, r.out)))
            .c_str(),
        stderr);
    return pid;
}

}  // namespace wanlab::run
