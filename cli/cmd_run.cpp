// `wanlab run FILE`: the experiment end to end (run/runner.h), then its report
// (report/report.h) and CI gates. Where the kernel lacks a qdisc the experiment needs
// (sch_netem on many machines), the whole run moves into the micro-VM (vm/) with a one-line
// notice: the VM runs this same binary with --no-vm, writing into the same results database
// through a writable share, and the report is rendered here from that database.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
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
#include "lab/capabilities.h"
#include "lab/session.h"
#include "lab/watchdog.h"
#include "netem/preflight.h"
#include "report/report.h"
#include "results/store.h"
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

int run_here(const RunArgs& a, const lab::Experiment& exp, const std::string& text) {
    sys::SignalEvents signals;  // before any thread exists, so every thread blocks them
    fs::create_directories(a.out);
    results::Store store(fs::path(a.out) / "results.db");
    run::Progress progress(a.quiet ? run::Progress::Mode::quiet : run::Progress::detect(stderr));
    run::RunnerOptions ro;
    ro.run_id = a.run_id.empty() ? lab::new_run_id() : a.run_id;
    ro.restore_stale = a.restore;
    ro.force = a.force;
    if (a.auto_restore_s > 0)
        ro.on_stage = [&](const std::string& stage) {
            if (stage != "journal") return;  // armed once the journal it watches exists
            auto w = lab::run_watchdog(ro.run_id, a.auto_restore_s, ro.journal_dir);
            pid_t pid = lab::arm_watchdog(w);
            progress.line(
                fmt::format("run {}: auto-restore by watchdog pid {}: the run ends and the machine is given "
                            "back after {} s, or at once if wanlab is killed (log: {})",
                            ro.run_id, pid, a.auto_restore_s, w.log.string()));
        };
    ro.where = a.where.empty() ? "host" : a.where;
    ro.shard = a.shard;
    if (!a.html.empty()) ro.on_trial = [&](const results::RunData& so_far) { write_page(a.html, a, exp, so_far); };
    auto outcome = run::run_experiment(exp, text, ro, store, progress, [&signals] { signals.check(); });
    const auto& run = outcome.data.run;
    if (run.status != "complete")
        progress.line(fmt::format("run {} {}: {}; machine restored; {} measurement{} kept in {}", run.id, run.status,
                                  run.error, outcome.data.measurements.size(),
                                  outcome.data.measurements.size() == 1 ? "" : "s", store.path().string()));
    if (a.inner) return outcome.exit_code;
    int status = report_and_gate(a, exp, outcome.data, outcome.exit_code);
    if (run.status == "failed") throw Error(run.error, outcome.exit_code);
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

int run_in_vm(const RunArgs& a, const lab::Experiment& exp) {
    if (a.auto_restore_s > 0)
        std::fputs(
            "wanlab: --auto-restore does not apply to a run in the micro-VM: it changes only the VM, which "
            "goes away with everything in it when the run ends or wanlab is killed\n",
            stderr);
    fs::create_directories(a.out);
    fs::path out = fs::absolute(a.out);
    std::string id = a.run_id.empty() ? lab::new_run_id() : a.run_id;
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
        "--run",
        id,
        "--inner",
        "--where",
        fmt::format("vm ({}, {} cpus)", vm::accel_name(machine.accel().accel), machine.cpus())};
    for (const auto& s : a.sets) argv.insert(argv.end(), {"--set", s});
    if (!a.shard.empty()) argv.insert(argv.end(), {"--shard", a.shard});
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
    if (data.run.status == "running") {  // the VM was killed mid-run: keep what it committed
        data.run.status = r.interrupted ? "interrupted" : "failed";
        data.run.error = r.interrupted ? "interrupted; the micro-VM was stopped"
                                       : fmt::format("the micro-VM ended mid-run (exit {})", r.exit_status);
        data.run.finished = run::utc_now();
        store.finish_run(id, data.run.status, data.run.finished, data.run.error);
    }
    int status = r.exit_status;
    if (r.timed_out || r.out_of_memory) status = status ? status : 1;
    return report_and_gate(a, exp, data, status);
}

int run(const RunArgs& a) {
    if (a.vm && a.no_vm) throw InputError("--vm and --no-vm contradict each other; give one");
    if (!a.shard.empty()) (void)lab::parse_shard(a.shard);  // bad input fails before the file is read
    (void)report::parse_format(a.format);                   // bad input fails before anything runs
    if (!a.html.empty() && !a.inner) {  // a page that cannot be written fails now, not after the first trial
        auto probe = a.html + ".tmp";
        if (!std::ofstream(probe, std::ios::app))
            throw InputError(fmt::format("--html {}: cannot write there", a.html));
        std::error_code ec;
        fs::remove(probe, ec);
    }
    std::string text;
    auto exp = load_or_throw(a.file, a.sets, &text);
    if (!a.shard.empty()) keep_shard(exp, a.file, a.shard);
    if (a.inner) {  // inside the micro-VM
        lab::require_capabilities("wanlab run");
        return run_here(a, exp, text);
    }
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
    if (a.vm) return run_in_vm(a, exp);
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
        return run_in_vm(a, exp);
    }
    return run_here(a, exp, text);
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
    sub.add_flag("--quiet", a->quiet, "No progress on stderr");
    sub.add_flag("--restore", a->restore, "Restore a stale journal left by a killed run first, instead of refusing");
    sub.add_flag("--force", a->force,
                 "Host mode: impair the interface even if it carries an SSH session the target filter does not spare");
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
        "  wanlab results show latest --out wanlab-results");
    return [a] { return run(*a); };
}

}  // namespace wanlab::cli
