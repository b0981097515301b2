// `wanlab lab up FILE` / `wanlab lab down RUN`: build an experiment's lab (namespaces, veth,
// addresses, routes, the first trial's sysctls) and keep it until Ctrl-C, SIGTERM or
// `wanlab lab down RUN`, for debugging with `ip netns exec`. Everything is given back on the
// way out; after a SIGKILL, `wanlab restore` does it from the journal.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/text.h"
#include "experiment/plan.h"
#include "lab/capabilities.h"
#include "lab/journal.h"
#include "lab/restore.h"
#include "lab/session.h"
#include "lab/watchdog.h"
#include "sysctl/proc_sys.h"

namespace wanlab::cli {
namespace {

struct UpOptions {
    std::string file;
    std::vector<std::string> sets;
    std::string run;
    std::size_t trial = 1;
    bool restore = false;
    bool force = false;
    unsigned auto_restore_s = 0;
    std::string hold_after;
    bool no_vm = false;
};

/// `lab up` where a namespace lab cannot be built (no root, or a kernel without what its
/// link needs): the lab could only live inside the micro-VM, which nothing on this machine
/// can enter. From a terminal it is `wanlab shell` there, with this terminal: a shell in the
/// lab's client namespace, and the lab comes down when it exits. Else the reason and the
/// command that works. Returns the exit status, or nullopt when the lab can be built here.
std::optional<int> up_elsewhere(const UpOptions& o, const experiment::Experiment& exp) {
    const auto& trial = exp.trials[o.trial - 1];
    if (trial.lab.mode != experiment::LabSpec::Mode::netns || o.no_vm) return std::nullopt;
    std::string why;
    if (!lab::missing_capabilities(lab::effective_capabilities()).empty())
        why = "no root here, and the micro-VM needs none";
    else if (auto missing = lab::missing_qdiscs(exp); !missing.empty())
        why = fmt::format("this kernel has no {}", fmt::join(missing, ", "));
    if (why.empty()) return std::nullopt;
    if (!on_terminal())
        throw InputError(fmt::format(
            "{}: the lab can only come up in the micro-VM, where nothing on this machine can enter it; from a "
            "terminal, `lab up` gives you a shell in it there; or run your command in it: wanlab shell {} -- "
            "COMMAND [ARG]...",
            why, text::shell_quote(o.file)));
    std::vector<std::string> argv{lab::self_exe(), "shell", o.file, "--trial", std::to_string(o.trial), "--no-vm"};
    for (const auto& s : o.sets) argv.insert(argv.end(), {"--set", s});
    if (!o.run.empty()) argv.insert(argv.end(), {"--run", o.run});
    std::fputs(
        "wanlab lab up: the lab comes up inside the micro-VM with a shell in its client namespace; exit the "
        "shell to take it down\n",
        stderr);
    return run_in_vm(why, argv, true);
}

void say(const std::string& s) {
    std::fputs((s + "\n").c_str(), stdout);
    std::fflush(stdout);
}

// Blocks until SIGINT, SIGTERM or SIGHUP; returns it.
int wait_for_signal(sys::SignalEvents& signals) {
    for (;;)
        if (auto s = signals.wait(std::chrono::milliseconds(1000))) return *s;
}

int lab_up(UpOptions o) {
    o.file = experiment_path(o.file);
    auto exp = load_or_throw(o.file, o.sets);
    if (o.trial < 1 || o.trial > exp.trials.size())
        throw InputError(fmt::format("--trial {}: the experiment has trials 1 to {}", o.trial, exp.trials.size()));
    const auto& trial = exp.trials[o.trial - 1];
    if (auto status = up_elsewhere(o, exp)) return *status;
    lab::require_capabilities("wanlab lab up");
    // The lab stays for you to enter with `ip netns exec`: in the micro-VM nobody could.
    refuse_missing_qdiscs(exp, o.file,
                          fmt::format("`lab up` keeps the lab on this machine; to work in it where the kernel lacks "
                                      "netem, `wanlab shell {} -- COMMAND` runs your command in it inside the micro-VM",
                                      text::shell_quote(o.file)));
    sys::SignalEvents signals;  // before any thread exists, so every thread blocks them
    sysctl::RealProcSys proc;
    lab::SessionOptions options;
    options.run = o.run.empty() ? lab::new_run_id() : o.run;
    options.restore_stale = o.restore;
    options.force = o.force;
    options.log = [](const std::string& s) { say("  " + s); };
    lab::RunWatchdog watchdog;  // declared before the session: retired once it has come down
    options.progress = [&](const std::string& stage) {
        say(fmt::format("wanlab lab up: stage {} done", stage));
        if (stage == "journal" && o.auto_restore_s > 0) {  // armed once the journal it watches exists
            pid_t pid = watchdog.arm(lab::run_watchdog(options.run, o.auto_restore_s, lab::kRunDir));
            say(
                fmt::format("wanlab lab up: auto-restore by watchdog pid {}: the lab comes down after {} s, or at once "
                            "if wanlab is killed",
                            pid, o.auto_restore_s));
        }
        if (stage == o.hold_after) throw sys::Interrupted(wait_for_signal(signals));
        signals.check();
    };
    lab::LabSession session(trial, options, proc);
    if (auto started = start_services_for(session, trial, "lab", [&] { signals.check(); }); !started.empty())
        say("wanlab lab up: " + started);
    say(
        fmt::format("wanlab lab up: run {} is up (trial {} of {}, journal {})\n{}\n"
                    "  Ctrl-C, or `wanlab lab down {}`, gives everything back.",
                    options.run, o.trial, exp.trials.size(), session.journal().path().string(),
                    session.testbed().describe(trial), options.run));
    int s = wait_for_signal(signals);
    say(fmt::format("wanlab lab up: SIG{}: {}", sigabbrev_np(s), session.testbed().undo_text()));
    return 0;
}

int lab_down(const std::string& run) {
    lab::check_run_id(run);
    auto path = std::filesystem::path(lab::kRunDir) / (run + ".journal");
    if (!std::filesystem::exists(path)) throw Error(fmt::format("no lab {} is up (no journal {})", run, path.string()));
    lab::require_capabilities("wanlab lab down");
    auto journal = lab::read_journal(path);
    if (journal.live()) {
        if (::kill(journal.pid, SIGTERM) != 0) sys::fail(fmt::format("signalling wanlab (pid {})", journal.pid), errno);
        for (int i = 0; i < 300 && std::filesystem::exists(path); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (std::filesystem::exists(path))
            throw Error(fmt::format("run {} (pid {}) did not finish within 30 s", run, journal.pid));
        say(fmt::format("wanlab lab down: run {} is down", run));
        return 0;
    }
    lab::FileLock lock(std::filesystem::path(lab::kRunDir) / "lock", true, "the journal directory");
    sysctl::RealProcSys proc;
    auto failures = lab::restore_journal(journal, lab::machine_undo(proc, [](const std::string& s) { say("  " + s); }));
    for (const auto& f : failures)
        std::fputs(fmt::format("wanlab: error: {}\n", text::terminal_safe(f)).c_str(), stderr);
    if (!failures.empty()) return 1;
    say(fmt::format("wanlab lab down: run {} had stopped; restored from its journal", run));
    return 0;
}

}  // namespace

Runner setup_lab(CLI::App& sub) {
    sub.require_subcommand(1);
    auto up = std::make_shared<UpOptions>();
    CLI::App* up_cmd = sub.add_subcommand("up", "Build an experiment's lab and keep it until Ctrl-C or `lab down`");
    up_cmd->add_option("FILE", up->file, "Experiment file (TOML)")->required();
    up_cmd->add_option("--set", up->sets, "Override a key (repeatable)")->type_name("KEY=VALUE");
    up_cmd->add_option("--run", up->run, "Run id (default: random); namespaces are wanlab-RUN-{client,router,server}");
    up_cmd->add_option("--trial", up->trial,
                       "Which trial's [lab] and sysctls to apply: its 1-based number in `wanlab plan` (default 1)");
    up_cmd->add_flag("--restore", up->restore,
                     "Restore a stale journal left by a killed run first, instead of refusing");
    up_cmd->add_flag(
        "--force", up->force,
        "Host mode: impair the interface even if it carries an SSH session the target filter does not spare");
    up_cmd->add_flag("--no-vm", up->no_vm,
                     "Refuse where the lab cannot be built here (no root, no netem) instead of coming up in the "
                     "micro-VM with a shell in it");
    up_cmd
        ->add_option("--auto-restore", up->auto_restore_s,
                     "Arm a watchdog: the lab comes down after SECONDS, or at once if wanlab is killed")
        ->type_name("SECONDS")
        ->check(CLI::Range(1u, 7u * 86400u));
    up_cmd
        ->add_option("--hold-after", up->hold_after, "Stop after a stage and wait for a signal (fault-injection tests)")
        ->check(CLI::IsMember({"journal", "namespaces", "links", "sysctls"}));
    auto down = std::make_shared<std::string>();
    CLI::App* down_cmd =
        sub.add_subcommand("down", "Tear down a lab started with `lab up` (or restore it if it was killed)");
    down_cmd->add_option("RUN", *down, "Run id")->required();
    return [up, up_cmd, down] {
        if (up_cmd->parsed()) return lab_up(*up);
        return lab_down(*down);
    };
}

}  // namespace wanlab::cli
