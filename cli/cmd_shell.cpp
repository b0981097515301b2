// `wanlab shell FILE [--trial N|ID] [-- CMD...]`: one trial's lab, and an interactive shell
// (or CMD) in its client namespace, so your own programs run on the emulated path, as
// mahimahi's `mm-delay 50 -- cmd` does. The lab is built, journaled and given back exactly as
// `lab up` does it; the command's exit status is wanlab's.
//
// The command runs in a process group of its own, made the terminal's foreground group as a
// shell does for a job, so Ctrl-C reaches the program and not the lab. A signal that does
// reach wanlab (SIGINT, SIGTERM or SIGHUP: `wanlab lab down RUN`, a closed terminal, a kill)
// is passed on to the whole group (SIGHUP first, which ends an interactive shell, then the
// signal itself; SIGKILL after a grace period). Once the command has exited, whatever is left
// of its group is killed and the terminal is handed back to wanlab, then the lab comes down.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/process.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/text.h"
#include "lab/capabilities.h"
#include "lab/session.h"
#include "sysctl/proc_sys.h"

extern char** environ;

namespace wanlab::cli {
namespace {

struct ShellOptions {
    std::string file;
    std::vector<std::string> sets;
    std::string trial = "1";
    std::string run;
    bool restore = false;
    bool force = false;
    bool no_vm = false;
    std::vector<std::string> command;
};

void note(const std::string& s) {
    std::fputs(fmt::format("wanlab shell: {}\n", text::terminal_safe(s)).c_str(), stderr);
    std::fflush(stderr);
}

/// The trial named by its 1-based number in `wanlab plan` or by its id.
const experiment::Trial& pick_trial(const experiment::Experiment& exp, const std::string& which) {
    for (const auto& t : exp.trials)
        if (t.id == which || std::to_string(t.index) == which) return t;
    throw InputError(fmt::format("--trial {}: the experiment has trials 1 to {} (a number or an id from `wanlab plan`)",
                                 which, exp.trials.size()));
}

/// `word` as a path to exec: itself when it has a `/`, else found on PATH; "" if not found.
std::string executable(const std::string& word) {
    if (word.find('/') != std::string::npos) return ::access(word.c_str(), X_OK) == 0 ? word : "";
    return sys::search_path(word);
}

/// The command to run, resolved before anything changes: o.command, or $SHELL, or /bin/sh.
sys::ForegroundCommand resolve(const ShellOptions& o) {
    sys::ForegroundCommand l;
    l.argv = o.command;
    if (l.argv.empty()) {
        const char* shell = std::getenv("SHELL");
        l.argv = {shell && *shell ? shell : "/bin/sh"};
    }
    l.path = executable(l.argv[0]);
    if (l.path.empty()) throw InputError(fmt::format("{}: command not found", l.argv[0]));
    return l;
}

/// What the command learns about the lab: its environment, and the namespace it enters.
void place(sys::ForegroundCommand& l, const experiment::Trial& trial, const probes::Endpoints& where,
           const std::string& run) {
    for (char** e = environ; *e; ++e) l.env.emplace_back(*e);
    l.env.push_back("WANLAB_RUN=" + run);
    l.env.push_back("WANLAB_TRIAL=" + trial.id);
    l.env.push_back("WANLAB_SERVER=" + where.server.address);
    l.env.push_back("WANLAB_CLIENT=" + where.client.address);
    l.env.push_back("WANLAB_SERVER_NS=" + where.server.netns);
    l.env.push_back("WANLAB_CLIENT_NS=" + where.client.netns);
    if (!where.client.netns.empty()) l.netns = sys::open_netns(where.client.netns);
}

int shell(ShellOptions o) {
    o.file = experiment_path(o.file);
    auto exp = load_or_throw(o.file, o.sets);
    const auto& trial = pick_trial(exp, o.trial);
    const bool netns = trial.lab.mode == experiment::LabSpec::Mode::netns;
    // A namespace lab that cannot be built here is built in the micro-VM, around the same
    // command; an interactive shell goes there with this terminal.
    if (netns && !o.no_vm) {
        std::string why;
        if (!lab::missing_capabilities(lab::effective_capabilities()).empty())
            why = "no root here, and the micro-VM needs none";
        else if (auto missing = lab::missing_qdiscs(exp); !missing.empty())
            why = fmt::format("this kernel has no {}", fmt::join(missing, ", "));
        if (!why.empty()) {
            if (o.command.empty() && !on_terminal())
                throw InputError(fmt::format(
                    "{}: the lab would run in the micro-VM, and an interactive shell there needs this terminal, "
                    "but stdin or stdout is not one; run it from a terminal, or give a command: wanlab shell {} -- "
                    "COMMAND [ARG]...",
                    why, text::shell_quote(o.file)));
            return rerun_in_vm(why, o.command.empty());
        }
    }
    lab::require_capabilities("wanlab shell");
    refuse_missing_qdiscs(exp, o.file,
                          fmt::format("wanlab shell {} -- COMMAND runs a command in this lab inside the micro-VM",
                                      text::shell_quote(o.file)));
    auto launch = resolve(o);
    sys::SignalEvents signals;  // before any thread exists, so every thread blocks them
    sysctl::RealProcSys proc;
    lab::SessionOptions options;
    options.run = o.run.empty() ? lab::new_run_id() : o.run;
    options.restore_stale = o.restore;
    options.force = o.force;
    options.log = [](const std::string& s) { note(s); };
    options.progress = [&](const std::string&) { signals.check(); };
    lab::LabSession session(trial, options, proc);
    // The trial's own servers run while you work; their folder (logs, rendered files) stays.
    if (auto started = start_services_for(session, trial, "shell", [&] { signals.check(); }); !started.empty())
        note(started);
    auto where = session.testbed().endpoints(AF_UNSPEC);
    place(launch, trial, where, options.run);
    note(fmt::format(
        "trial {} of {} ({}) is up as run {}; {} runs {}{}", trial.index, exp.trials.size(), trial.variant, options.run,
        text::shell_join(launch.argv), where.client.netns.empty() ? "on this machine" : "in " + where.client.netns,
        where.server.address.empty() ? "" : fmt::format(", the server is {} ($WANLAB_SERVER)", where.server.address)));
    int status = sys::run_foreground(launch, signals, note);
    note(fmt::format("{} exited with status {}; {}", launch.argv[0], status, session.testbed().undo_text()));
    return status;
}

}  // namespace

Runner setup_shell(CLI::App& sub) {
    auto o = std::make_shared<ShellOptions>();
    sub.add_option("FILE", o->file, "Experiment file (TOML)")->required();
    sub.add_option("--set", o->sets, "Override a key (repeatable)")->type_name("KEY=VALUE");
    sub.add_option("--trial", o->trial, "Which trial's lab: its 1-based number or its id in `wanlab plan` (default 1)")
        ->type_name("N|ID");
    sub.add_option("--run", o->run, "Run id (default: random); namespaces are wanlab-RUN-{client,router,server}");
    sub.add_flag("--restore", o->restore, "Restore a stale journal left by a killed run first, instead of refusing");
    sub.add_flag("--no-vm", o->no_vm,
                 "Refuse instead of running the command in the micro-VM when this kernel lacks netem or there is no "
                 "root");
    sub.add_flag("--force", o->force,
                 "Host mode: impair the interface even if it carries an SSH session the target filter does not spare");
    sub.add_option("command", o->command, "The command and its arguments, after -- (default: $SHELL)");
    return [o] {
        if (const auto& raw = command_after_dashdash(); !raw.empty()) o->command = raw;
        return shell(*o);
    };
}

}  // namespace wanlab::cli
