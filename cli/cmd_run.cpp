// `wanlab run FILE`: the experiment end to end (run/runner.h), then its report
// (report/report.h) and CI gates. Where the kernel lacks a qdisc the experiment needs
// (sch_netem on many machines), the whole run moves into the micro-VM (vm/) with a one-line
// notice: the VM runs this same binary with --no-vm, writing into the same results database
// through a writable share, and the report is rendered here from that database.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/text.h"
#include "lab/capabilities.h"
#include "lab/journal.h"
#include "lab/session.h"
#include "lab/watchdog.h"
#include "netem/preflight.h"
#include "report/report.h"
#include "results/store.h"
#include "run/resume.h"
#include "run/runner.h"
#include "vm/vm.h"

namespace wanlab::cli {
namespace {

namespace fs = std::filesystem;

struct RunArgs {
    std::string file;
    std::string out = "wanlab-results";
    std::vector<std::string> sets;
    bool vm = false, no_vm = false;
    std::string format = "table";
    std::string junit;
    std::string html;  ///< --html FILE: the report as a page, refreshed after each trial
    std::string run_id;
    std::string shard;  ///< --shard K/N
    std::string pivot;
    bool quiet = false;
    bool restore = false;
    bool force = false;
    unsigned auto_restore_s = 0;
    bool resuming = false;  ///< --resume [RUN]
    std::string resume;     ///< its RUN ("" = the latest in --out)
    bool detach = false;
    // Set by the outer wanlab for the run inside the micro-VM.
    std::string where;
    bool inner = false;
};

/// Writes the report of `data` as a page to `path`, whole or not at all: a reader who opens
/// it mid-run sees the last complete page (a temporary file renamed over it).
void write_page(const std::string& path, const RunArgs& a, const lab::Experiment& exp, const results::RunData& data) {
    report::ReportOptions ro;
    ro.format = report::Format::html;
    ro.pivot = a.pivot;
    ro.files_root = a.out;
    auto page = report::render(data, exp.asserts, ro);
    auto tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << page;
        if (!f.flush()) throw Error(fmt::format("writing the page {}", tmp));
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw Error(fmt::format("writing the page {}: {}", path, ec.message()));
}

/// Prints the report of `data` and applies the CI gates; returns the exit status.
int report_and_gate(const RunArgs& a, const lab::Experiment& exp, const results::RunData& data, int run_status) {
    report::ReportOptions ro;
    ro.format = report::parse_format(a.format);
    ro.pivot = a.pivot;
    ro.files_root = a.out;
    std::fputs(report::render(data, exp.asserts, ro).c_str(), stdout);
    std::fflush(stdout);
    if (!a.html.empty()) write_page(a.html, a, exp, data);
    auto outcomes = report::evaluate(data, exp.asserts);
    if (!a.junit.empty()) {
        std::ofstream j(a.junit);
        j << report::junit_xml(data, outcomes);
        if (!j) throw Error(fmt::format("writing the JUnit report {}", a.junit));
    }
    if (run_status != 0) return run_status;
    for (const auto& o : outcomes)
        if (!o.passed) return 3;
    return 0;
}

/// The run `--resume` continues, as recorded in --out: one that did not complete, and (outside
/// the micro-VM, where its journal would be) not still running.
results::RunData resumable(const RunArgs& a) {
    auto db = fs::path(a.out) / "results.db";
    std::error_code ec;
    if (!fs::exists(db, ec))
        throw InputError(fmt::format("--resume: there is no results database {}: give the --out of the run to continue",
                                     db.string()));
    auto data = results::Store(db, results::Store::Access::read_only).load_run(a.resume.empty() ? "latest" : a.resume);
    const auto& r = data.run;
    if (r.status == results::RunStatus::complete)
        throw InputError(
            fmt::format("--resume: run {} in {} is complete ({} trials done): nothing to resume; its "
                        "report: wanlab results show {} --out {}",
                        r.id, db.string(), r.planned_trials, r.id, text::shell_quote(a.out)));
    if (r.status == results::RunStatus::running && !a.inner)
        for (const auto& j : lab::find_journals(lab::kRunDir))
            if (j.run == r.id && j.live())
                throw InputError(
                    fmt::format("--resume: run {} is still running (pid {}): wait for it to end, or stop "
                                "it (kill {}; the machine is restored) and resume it then",
                                r.id, j.pid, j.pid));
    return data;
}

/// Refuses to continue `before` with `exp` on a machine described by `now` (run/resume.h);
/// returns what --force let through ("" if nothing).
std::string check_resume(const RunArgs& a, const results::RunData& before, const lab::Experiment& exp,
                         const std::string& file_text, const results::Environment& now) {
    auto p = run::resume_problems(before, exp, file_text, a.sets, a.shard, now);
    const auto& id = before.run.id;
    if (!p.refused.empty()) {
        std::string msg = fmt::format("--resume: {} does not give the trials run {} planned:", a.file, id);
        for (const auto& x : p.refused) msg += "\n  " + x;
        throw InputError(msg + fmt::format("\nresume with the file that started it (its text is kept: wanlab results "
                                           "show {} --export json --out {}), or start a new run",
                                           id, text::shell_quote(a.out)));
    }
    if (p.forceable.empty()) return "";
    std::string list = fmt::format("{}", fmt::join(p.forceable, "; "));
    if (!a.force)
        throw InputError(
            fmt::format("--resume: run {} would mix measurements taken under different conditions: {}; "
                        "give --force to continue anyway (the report names each session's)",
                        id, list));
    return list + " (--force)";
}

int run_here(const RunArgs& a, const lab::Experiment& exp, const std::string& text,
             const results::RunData* before = nullptr) {
    sys::SignalEvents signals;  // before any thread exists, so every thread blocks them
    fs::create_directories(a.out);
    results::Store store(fs::path(a.out) / "results.db");
    run::Progress progress(a.quiet ? run::Progress::Mode::quiet : run::Progress::detect(stderr));
    run::RunnerOptions ro;
    ro.run_id = a.run_id.empty() ? lab::new_run_id() : a.run_id;
    ro.restore_stale = a.restore;
    ro.force = a.force;
    lab::RunWatchdog watchdog;  // retired as the run returns, the machine given back
    if (a.auto_restore_s > 0)
        ro.on_stage = [&](const std::string& stage) {
            if (stage != "journal") return;  // armed once the journal it watches exists
            pid_t pid = watchdog.arm(lab::run_watchdog(ro.run_id, a.auto_restore_s, ro.journal_dir));
            progress.line(
                fmt::format("run {}: auto-restore by watchdog pid {}: the run ends and the machine is given "
                            "back after {} s, or at once if wanlab is killed (log: {})",
                            ro.run_id, pid, a.auto_restore_s, watchdog.options().log.string()));
        };
    ro.where = a.where.empty() ? "host" : a.where;
    ro.shard = a.shard;
    if (before) {
        ro.resume_note = check_resume(a, *before, exp, text, run::environment(exp, ro.where));
        ro.resume = before;
        ro.run_id = before->run.id;
    }
    if (!a.html.empty()) ro.on_trial = [&](const results::RunData& so_far) { write_page(a.html, a, exp, so_far); };
    auto outcome = run::run_experiment(exp, text, ro, store, progress, [&signals] { signals.check(); });
    watchdog.retire();
    auto& run = outcome.data.run;
    if (run.status != results::RunStatus::complete) {
        auto again = run::resume_command(a.file, run.id, a.out);
        progress.line(fmt::format("run {} {}: {}; machine restored; {} measurement{} kept in {}; continue it with: {}",
                                  run.id, run.status, run.error, outcome.data.measurements.size(),
                                  outcome.data.measurements.size() == 1 ? "" : "s", store.path().string(), again));
        // Said where it outlives the terminal (SIGHUP: it went away): `wanlab results list`.
        if (run.status == results::RunStatus::interrupted) {
            run.error += "; continue with: " + again;
            run::end_session(run);
            store.finish_run(run);
        }
    }
    if (a.inner) return outcome.exit_code;
    int status = report_and_gate(a, exp, outcome.data, outcome.exit_code);
    if (run.status == results::RunStatus::failed) throw Error(run.error, outcome.exit_code);
    return status;
}

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
        auto tmp = target_;
        tmp += ".tmp";
        if (fs::copy_file(staged_, tmp, fs::copy_options::overwrite_existing, ec) && !ec) fs::rename(tmp, target_, ec);
        if (!ec) copied_ = when;
    }
    fs::path staged_, target_;
    fs::file_time_type copied_{};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::thread thread_;  // last: started once everything above exists
};

int run_in_vm(const RunArgs& a, const lab::Experiment& exp, const results::RunData* before = nullptr) {
    if (a.auto_restore_s > 0)
        std::fputs(
            "wanlab: --auto-restore does not apply to a run in the micro-VM: it changes only the VM, which "
            "goes away with everything in it when the run ends or wanlab is killed\n",
            stderr);
    fs::create_directories(a.out);
    fs::path out = fs::absolute(a.out);
    std::string id = before ? before->run.id : a.run_id.empty() ? lab::new_run_id() : a.run_id;
    vm::VmOptions vo;
    vo.out_dir = out;
    vm::Vm machine(vo);
    std::vector<std::string> argv{
        lab::self_exe(),
        "run",
        fs::absolute(a.file).string(),
        "--no-vm",
        "--out",
        out.string(),
        before ? "--resume" : "--run",
        id,
        "--inner",
        "--where",
        fmt::format("vm ({}, {} cpus)", vm::accel_name(machine.accel().accel), machine.cpus())};
    for (const auto& s : a.sets) argv.insert(argv.end(), {"--set", s});
    if (!a.shard.empty()) argv.insert(argv.end(), {"--shard", a.shard});
    if (a.force) argv.push_back("--force");
    if (a.quiet) argv.push_back("--quiet");
    // The page: the run in the VM refreshes it in the results share (the only place it can
    // write), and a copy follows it to where it was asked for while the run goes on.
    std::optional<PageFollower> follower;
    if (!a.html.empty()) {
        auto staged = out / fmt::format(".page-{}.html", id);
        argv.insert(argv.end(), {"--html", staged.string()});
        follower.emplace(staged, a.html);
    }
    auto r = machine.run(argv);
    follower.reset();
    results::Store store(out / "results.db");
    results::RunData data;
    try {
        data = store.load_run(id);
    } catch (const InputError&) {
        // The VM never got as far as recording the run: its own message said why.
        if (r.interrupted) return r.exit_status;
        throw Error(fmt::format("the run in the micro-VM ended (exit {}) before recording anything", r.exit_status));
    }
    if (data.run.status == results::RunStatus::running) {  // the VM was killed mid-run: keep what it committed
        data.run.status = r.interrupted ? results::RunStatus::interrupted : results::RunStatus::failed;
        data.run.error = r.interrupted ? "interrupted; the micro-VM was stopped"
                                       : fmt::format("the micro-VM ended mid-run (exit {})", r.exit_status);
        data.run.finished = run::utc_now();
        data.run.error += "; continue with: " + run::resume_command(a.file, id, a.out);
        run::end_session(data.run);
        store.finish_run(data.run);
    }
    int status = r.exit_status;
    if (r.timed_out || r.out_of_memory) status = status ? status : 1;
    return report_and_gate(a, exp, data, status);
}

/// --detach: the rest of the run in a child process of its own session (no terminal to lose),
/// its output in OUT/wanlab-RUN.log; this process says where and returns.
bool detach(const RunArgs& a, const std::string& id) {
    fs::create_directories(a.out);
    auto log = fs::absolute(fs::path(a.out) / fmt::format("wanlab-{}.log", id));
    sys::Fd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!out) throw Error(fmt::format("--detach: cannot write its log {}: {}", log.string(), std::strerror(errno)));
    sys::Fd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw Error(fmt::format("--detach: fork: {}", std::strerror(errno)));
    if (pid > 0) {
        std::fputs(
            text::terminal_safe(fmt::format("wanlab: run {} goes on in the background (pid {}), its output in {}\n"
                                            "  follow it:  tail -f {}\n  its report: wanlab results show {} --out {}\n"
                                            "  stop it:    kill {}   (the machine is restored; then {} continues it)\n",
                                            id, pid, log.string(), text::shell_quote(log.string()), id,
                                            text::shell_quote(a.out), pid, run::resume_command(a.file, id, a.out)))
                .c_str(),
            stderr);
        return false;
    }
    ::setsid();  // no controlling terminal: a closed ssh session sends it no SIGHUP
    ::dup2(in.get(), STDIN_FILENO);
    ::dup2(out.get(), STDOUT_FILENO);
    ::dup2(out.get(), STDERR_FILENO);
    return true;
}

int run(RunArgs a) {
    if (a.vm && a.no_vm) throw InputError("--vm and --no-vm contradict each other; give one");
    if (a.detach && a.inner) throw InputError("--detach is for the run on this machine, not the one in the VM");
    if (!a.shard.empty()) (void)lab::parse_shard(a.shard);  // bad input fails before the file is read
    (void)report::parse_format(a.format);                   // bad input fails before anything runs
    if (!a.html.empty() && !a.inner) {  // a page that cannot be written fails now, not after the first trial
        auto probe = a.html + ".tmp";
        if (!std::ofstream(probe, std::ios::app))
            throw InputError(fmt::format("--html {}: cannot write there", a.html));
        std::error_code ec;
        fs::remove(probe, ec);
    }
    a.file = experiment_path(a.file);
    std::optional<results::RunData> before;
    if (a.resuming) {
        if (!a.run_id.empty()) throw InputError("--resume continues a run under its own id: drop --run");
        before = resumable(a);
        if (a.sets.empty()) a.sets = before->run.sets;     // as it was started, unless said otherwise
        if (a.shard.empty()) a.shard = before->run.shard;  // (check_resume refuses a different one)
    }
    std::string text;
    auto exp = load_or_throw(a.file, a.sets, &text);
    if (!a.shard.empty()) keep_shard(exp, a.file, a.shard);
    const results::RunData* resumed = before ? &*before : nullptr;
    if (a.inner) {  // inside the micro-VM
        lab::require_capabilities("wanlab run");
        return run_here(a, exp, text, resumed);
    }
    if (resumed) {  // the plan now; the machine's conditions where it runs (run_here)
        auto then = run::sessions_of(resumed->run).back();
        results::Environment same;
        same.hostname = then.hostname;
        same.kernel = then.kernel;
        same.where = then.where;
        (void)check_resume(a, *resumed, exp, text, same);
    }
    if (a.detach && a.run_id.empty()) a.run_id = resumed ? resumed->run.id : lab::new_run_id();
    auto start = [&](bool vm) {
        if (a.detach && !detach(a, a.run_id)) return 0;
        return vm ? run_in_vm(a, exp, resumed) : run_here(a, exp, text, resumed);
    };
    // Host mode impairs this machine's own interface: the micro-VM has none of it.
    const bool host = exp.trials.front().lab.mode == lab::LabSpec::Mode::host;
    if (host && a.vm)
        throw InputError(
            fmt::format("{}: [lab] mode = \"host\" impairs this machine's interface {}; it cannot run in "
                        "the micro-VM (drop --vm)",
                        a.file, exp.trials.front().lab.dev));
    if (exp.trials.front().lab.mode == lab::LabSpec::Mode::hosts && a.vm)
        throw InputError(
            fmt::format("{}: [lab] mode = \"hosts\" runs across real machines; it cannot run in the "
                        "micro-VM (drop --vm)",
                        a.file));
    if (a.vm) return start(true);
    lab::require_capabilities("wanlab run");
    // Hosts mode: the kernel of the machine with the link conditions needs them, this one only
    // when it is that machine (the client, run here); another's agent checks its own.
    const auto& lab = exp.trials.front().lab;
    const bool hosts = lab.mode == lab::LabSpec::Mode::hosts;
    const bool elsewhere = hosts && lab.machine(lab.link_machine())->ssh != "local";
    auto missing = elsewhere ? std::vector<std::string>{} : lab::missing_qdiscs(exp);
    if (!missing.empty()) {
        if (host || hosts)
            throw Error(
                fmt::format("this kernel lacks {} (needed by {}); {} mode impairs this machine's own interface, "
                            "so it needs them here. {}",
                            fmt::join(missing, ", "), a.file, host ? "host" : "hosts",
                            netem::advice_for(missing.front())),
                2);
        if (a.no_vm)
            throw Error(fmt::format("this kernel lacks {} (needed by {}); drop --no-vm to run in the micro-VM. {}",
                                    fmt::join(missing, ", "), a.file, netem::advice_for(missing.front())),
                        2);
        std::fputs(fmt::format("wanlab: this kernel has no {}: running the experiment in the micro-VM "
                               "(--no-vm refuses instead)\n",
                               fmt::join(missing, ", "))
                       .c_str(),
                   stderr);
        return start(true);
    }
    return start(false);
}

}  // namespace

Runner setup_run(CLI::App& sub) {
    auto a = std::make_shared<RunArgs>();
    sub.add_option("FILE", a->file, "Experiment file (TOML)")->required();
    sub.add_option("--out", a->out, "Folder for results.db (default: ./wanlab-results)");
    sub.add_option("--set", a->sets, "Override a key (repeatable)")->type_name("KEY=VALUE");
    sub.add_flag("--vm", a->vm, "Run inside the micro-VM even if this kernel has everything");
    sub.add_flag("--no-vm", a->no_vm, "Never fall back to the micro-VM: refuse if this kernel lacks a qdisc");
    sub.add_option("--format", a->format, "Report format: table, csv, json, markdown, html")
        ->check(CLI::IsMember({"table", "csv", "json", "markdown", "html"}));
    sub.add_option("--html", a->html,
                   "Also write the report as one self-contained page with charts, refreshed after each trial")
        ->type_name("FILE");
    sub.add_option("--junit", a->junit, "Also write the [[assert]] outcomes as JUnit XML");
    sub.add_option("--pivot", a->pivot, "Metric of the sweep pivot (probe.metric)");
    sub.add_option("--run", a->run_id, "Run id (default: random); namespaces are wanlab-RUN-*");
    sub.add_option("--shard", a->shard,
                   "Measure only shard K of N: a deterministic part of the trials, balanced by planned time, "
                   "for spreading one sweep over N machines")
        ->type_name("K/N");
    CLI::Option* resume =
        sub.add_option(
               "--resume", a->resume,
               "Continue a run that was interrupted, failed or killed (the latest in --out, or RUN): its finished "
               "trials are kept, the others measured")
            ->expected(0, 1)
            ->type_name("[RUN]");
    sub.add_flag("--detach", a->detach,
                 "Go on in the background, out of this terminal's session, with the output in OUT/wanlab-RUN.log");
    sub.add_flag("--quiet", a->quiet, "No progress on stderr");
    sub.add_flag("--restore", a->restore, "Restore a stale journal left by a killed run first, instead of refusing");
    sub.add_flag("--force", a->force,
                 "Host mode: impair the interface even if it carries an SSH session the target filter does not "
                 "spare; --resume: continue under another kernel, machine, file text or --set");
    sub.add_option(
           "--auto-restore", a->auto_restore_s,
           "Arm a watchdog: the run ends and the machine is given back after SECONDS, or at once if wanlab is killed")
        ->type_name("SECONDS")
        ->check(CLI::Range(1u, 7u * 86400u));
    sub.add_option("--where", a->where, "Environment note (set by wanlab itself for runs in the VM)")->group("");
    sub.add_flag("--inner", a->inner, "Measure and record only (the run inside the micro-VM)")->group("");
    sub.footer(
        "Exit status: 0 complete and every [[assert]] passed, 1 failure, 2 bad input, 3 an assert failed,\n"
        "130 interrupted (the machine is restored and the partial results kept).\n"
        "Examples:\n"
        "  wanlab run examples/buffer-sweep.toml\n"
        "  wanlab run examples/buffer-sweep.toml --set run.duration=3s --set run.repeats=2 --junit report.xml\n"
        "  wanlab run examples/buffer-sweep.toml --html report.html\n"
        "  wanlab run examples/buffer-sweep.toml --shard 2/3 --out shard-2\n"
        "  wanlab run examples/buffer-sweep.toml --resume            (the latest run in ./wanlab-results)\n"
        "  wanlab run examples/buffer-sweep.toml --detach --quiet\n"
        "  wanlab results show latest --out wanlab-results");
    return [a, resume] {
        a->resuming = resume->count() > 0;
        return run(*a);
    };
}

}  // namespace wanlab::cli
