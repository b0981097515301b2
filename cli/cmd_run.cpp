// `wanlab run FILE`: parses the flags, asks run/ where and how the run happens
// (run/launch.h: here, in the micro-VM, detached; run/resume.h: whether it may resume), then
// prints the report (report/report.h) and applies the CI gates.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/sys.h"
#include "experiment/shard.h"
#include "lab/capabilities.h"
#include "lab/journal.h"
#include "remote/hosts.h"
#include "report/report.h"
#include "results/store.h"
#include "run/launch.h"
#include "run/resume.h"
#include "run/shard.h"

namespace wanlab::cli {
namespace {

namespace fs = std::filesystem;

struct RunArgs {
    run::RunRequest request;
    std::string format = "table";
    std::string junit;
    std::string pivot;
    bool resuming = false;  ///< --resume [RUN]
    std::string resume;     ///< its RUN ("" = the latest in --out)
    bool detach = false;
};

/// Writes the report of `data` as a page to `path`, whole or not at all: a reader who opens
/// it mid-run sees the last complete page (a temporary file renamed over it).
void write_page(const std::string& path, const RunArgs& a, const experiment::Experiment& exp,
                const results::RunData& data) {
    report::ReportOptions ro;
    ro.format = report::Format::html;
    ro.pivot = a.pivot;
    ro.files_root = a.request.out;
    sys::write_file_atomic(path, report::render(data, exp.asserts, ro), "the page");
}

/// Prints the report of `data` and applies the CI gates; returns the exit status.
int report_and_gate(const RunArgs& a, const experiment::Experiment& exp, const results::RunData& data, int run_status) {
    report::ReportOptions ro;
    ro.format = report::parse_format(a.format);
    ro.pivot = a.pivot;
    ro.files_root = a.request.out;
    std::fputs(report::render(data, exp.asserts, ro).c_str(), stdout);
    std::fflush(stdout);
    if (!a.request.html.empty()) write_page(a.request.html, a, exp, data);
    auto outcomes = report::evaluate(data, exp.asserts);
    if (!a.junit.empty()) sys::write_file_atomic(a.junit, report::junit_xml(data, outcomes), "the JUnit report");
    return report::gate_status(outcomes, run_status);
}

int run_here(const RunArgs& a, const experiment::Experiment& exp, const std::string& text,
             const results::RunData* before) {
    std::function<void(const results::RunData&)> on_trial;
    if (!a.request.html.empty())
        on_trial = [&](const results::RunData& so_far) { write_page(a.request.html, a, exp, so_far); };
    auto outcome = run::measure_here(a.request, exp, text, before, on_trial);
    if (a.request.inner) return outcome.exit_code;
    int status = report_and_gate(a, exp, outcome.data, outcome.exit_code);
    if (outcome.data.run.status == results::RunStatus::failed) throw Error(outcome.data.run.error, outcome.exit_code);
    return status;
}

int run_in_vm(const RunArgs& a, const experiment::Experiment& exp, const results::RunData* before) {
    auto outcome = run::measure_in_vm(a.request, before);
    if (!outcome.recorded) return outcome.exit_code;
    return report_and_gate(a, exp, outcome.data, outcome.exit_code);
}

/// The flags that contradict each other or are malformed, before the file is read.
void check_flags(const RunArgs& a) {
    const auto& r = a.request;
    if (r.vm && r.no_vm) throw InputError("--vm and --no-vm contradict each other; give one");
    if (a.detach && r.inner) throw InputError("--detach is for the run on this machine, not the one in the VM");
    if (!r.shard.empty()) (void)experiment::parse_shard(r.shard);  // bad input fails before the file is read
    (void)report::parse_format(a.format);                          // bad input fails before anything runs
    // A page or report that cannot be written fails now, not after the first trial.
    for (const auto& [flag, path] : {std::pair{"--html", r.html}, std::pair{"--junit", a.junit}})
        if (!path.empty() && !r.inner)
            if (auto why = sys::cannot_create(path); !why.empty())
                throw InputError(fmt::format("{} {}: cannot write there: {}", flag, path, why));
}

int run(RunArgs a) {
    auto& r = a.request;
    check_flags(a);
    r.file = experiment_path(r.file);
    std::optional<results::RunData> before;
    if (a.resuming) {
        if (!r.run_id.empty()) throw InputError("--resume continues a run under its own id: drop --run");
        before = run::resumable(r.out, a.resume, r.inner);
        if (r.sets.empty()) r.sets = before->run.sets;     // as it was started, unless said otherwise
        if (r.shard.empty()) r.shard = before->run.shard;  // (admit_resume refuses a different one)
    }
    std::string text;
    auto exp = load_or_throw(r.file, r.sets, &text);
    if (!r.shard.empty()) run::keep_shard(exp, r.file, r.shard);
    const results::RunData* resumed = before ? &*before : nullptr;
    if (r.inner) {  // inside the micro-VM
        lab::require_capabilities("wanlab run");
        return run_here(a, exp, text, resumed);
    }
    if (resumed) {  // the plan now; the machine's conditions where it runs (measure_here)
        auto then = run::sessions_of(resumed->run).back();
        results::Environment same;
        same.hostname = then.hostname;
        same.kernel = then.kernel;
        same.where = then.where;
        (void)run::admit_resume(*resumed, exp, {r.file, text, r.sets, r.shard, r.out, r.force}, same);
    }
    if (exp.trials.front().lab.mode == experiment::LabSpec::Mode::hosts)
        remote::refuse_ssh_commands(exp.trials.front().lab, r.allow_ssh_commands);  // before anything starts
    if (a.detach && r.run_id.empty()) r.run_id = resumed ? resumed->run.id : lab::new_run_id();
    auto place = run::choose_place(exp, r, run::this_machine(exp));
    std::fputs(place.notice.c_str(), stderr);
    if (a.detach && run::detach(r, r.run_id) != 0) return 0;
    return place.place == run::Place::micro_vm ? run_in_vm(a, exp, resumed) : run_here(a, exp, text, resumed);
}

}  // namespace

Runner setup_run(CLI::App& sub) {
    auto a = std::make_shared<RunArgs>();
    sub.add_option("FILE", a->request.file, "Experiment file (TOML)")->required();
    sub.add_option("--out", a->request.out, "Folder for results.db (default: ./wanlab-results)");
    sub.add_option("--set", a->request.sets, "Override a key (repeatable)")->type_name("KEY=VALUE");
    sub.add_flag("--vm", a->request.vm, "Run inside the micro-VM even if this kernel has everything");
    sub.add_flag("--no-vm", a->request.no_vm, "Never fall back to the micro-VM: refuse if this kernel lacks a qdisc");
    sub.add_option("--format", a->format, "Report format: table, csv, json, markdown, html")
        ->check(CLI::IsMember({"table", "csv", "json", "markdown", "html"}));
    sub.add_option("--html", a->request.html,
                   "Also write the report as one self-contained page with charts, refreshed after each trial")
        ->type_name("FILE");
    sub.add_option("--junit", a->junit, "Also write the [[assert]] outcomes as JUnit XML");
    sub.add_option("--pivot", a->pivot, "Metric of the sweep pivot (probe.metric)");
    sub.add_option("--run", a->request.run_id, "Run id (default: random); namespaces are wanlab-RUN-*");
    sub.add_option("--shard", a->request.shard,
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
    sub.add_flag("--quiet", a->request.quiet, "No progress on stderr");
    sub.add_flag("--allow-ssh-commands", a->request.allow_ssh_commands,
                 "Hosts mode: use a [hosts] ssh_config that makes ssh run commands (ProxyCommand, LocalCommand, "
                 "Match exec, ...): `wanlab plan` lists them; without this flag such a config is refused");
    sub.add_flag("--restore", a->request.restore,
                 "Restore a stale journal left by a killed run first, instead of refusing");
    sub.add_flag("--force", a->request.force,
                 "Host mode: impair the interface even if it carries an SSH session the target filter does not "
                 "spare; --resume: continue under another kernel, machine, file text or --set");
    sub.add_option(
           "--auto-restore", a->request.auto_restore_s,
           "Arm a watchdog: the run ends and the machine is given back after SECONDS, or at once if wanlab is killed")
        ->type_name("SECONDS")
        ->check(CLI::Range(1u, 7u * 86400u));
    sub.add_option("--where", a->request.where, "Environment note (set by wanlab itself for runs in the VM)")
        ->group("");
    sub.add_option("--host-env", a->request.host_env,
                   "The machine that started a run in the VM, as JSON (set by wanlab itself)")
        ->group("");
    sub.add_flag("--inner", a->request.inner, "Measure and record only (the run inside the micro-VM)")->group("");
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
