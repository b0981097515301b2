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
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/load.h"
#include "core/error.h"
#include "core/signals.h"
#include "core/sys.h"
#include "core/text.h"
#include "lab/capabilities.h"
#include "lab/session.h"
#include "probes/tool_process.h"
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
    std::vector<std::string> command;
};

void note(const std::string& s) {
    std::fputs(fmt::format("wanlab shell: {}\n", s).c_str(), stderr);
    std::fflush(stderr);
}

/// The trial named by its 1-based number in `wanlab plan` or by its id.
const lab::Trial& pick_trial(const lab::Experiment& exp, const std::string& which) {
    for (const auto& t : exp.trials)
        if (t.id == which || std::to_string(t.index) == which) return t;
    throw InputError(fmt::format("--trial {}: the experiment has trials 1 to {} (a number or an id from `wanlab plan`)",
                                 which, exp.trials.size()));
}

/// `word` as a path to exec: itself when it has a `/`, else found on PATH; "" if not found.
std::string executable(const std::string& word) {
    if (word.find('/') != std::string::npos) return ::access(word.c_str(), X_OK) == 0 ? word : "";
    return probes::search_path(word);
}

/// Everything the child needs, made before fork (after it only async-signal-safe calls).
struct Launch {
    std::string path;
    std::vector<std::string> argv, env;
    sys::Fd netns;  ///< the client's namespace; invalid: stay where wanlab is (host mode)
};

/// The command to run, resolved before anything changes: o.command, or $SHELL, or /bin/sh.
Launch resolve(const ShellOptions& o) {
    Launch l;
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
void place(Launch& l, const lab::Trial& trial, const probes::Endpoints& where, const std::string& run) {
    for (char** e = environ; *e; ++e) l.env.emplace_back(*e);
    l.env.push_back("WANLAB_RUN=" + run);
    l.env.push_back("WANLAB_TRIAL=" + trial.id);
    l.env.push_back("WANLAB_SERVER=" + where.server.address);
    l.env.push_back("WANLAB_CLIENT=" + where.client.address);
    l.env.push_back("WANLAB_SERVER_NS=" + where.server.netns);
    l.env.push_back("WANLAB_CLIENT_NS=" + where.client.netns);
    if (!where.client.netns.empty()) l.netns = sys::open_netns(where.client.netns);
}

// Gives the terminal `tty` to process group `group` (tcsetpgrp from a background group
// needs SIGTTOU blocked). Async-signal-safe.
void give_terminal(int tty, pid_t group) {
    if (tty < 0) return;
    sigset_t ttou, old;
    ::sigemptyset(&ttou);
    ::sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, &old);
    (void)::tcsetpgrp(tty, group);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

[[noreturn]] void exec_child(const Launch& l, int tty, const std::vector<char*>& argv, const std::vector<char*>& envp) {
    ::setpgid(0, 0);
    give_terminal(tty, ::getpid());
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // wanlab blocks SIGINT/SIGTERM/SIGHUP for its signalfd
    if (l.netns && ::setns(l.netns.get(), CLONE_NEWNET) != 0) {
        static const char failed[] = "wanlab shell: cannot enter the client's namespace\n";
        (void)!::write(2, failed, sizeof failed - 1);
        ::_exit(126);
    }
    ::execve(l.path.c_str(), argv.data(), envp.data());
    static const char failed[] = "wanlab shell: cannot start the command\n";
    (void)!::write(2, failed, sizeof failed - 1);
    ::_exit(127);
}

/// Runs the command and waits for it, passing signals on; returns its exit status (128 +
/// signal when a signal ended it).
int run_child(Launch& l, sys::SignalEvents& signals) {
    std::vector<char*> argv, envp;
    for (auto& a : l.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : l.env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int tty = ::isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
    pid_t child = ::fork();
    if (child < 0) sys::fail_errno("starting " + l.argv[0]);
    if (child == 0) exec_child(l, tty, argv, envp);
    ::setpgid(child, child);  // as the child does: whichever runs first
    l.netns.reset();
    constexpr int kGraceMs = 5000;
    int waited_ms = -1;  // since the group was told to stop; -1: not told
    int status = 0;
    for (;;) {
        // Seen exited but not reaped yet, so its group id cannot be reused before the kill below.
        siginfo_t info{};
        int r = ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && info.si_pid == child) break;
        if (r < 0 && errno != EINTR) sys::fail_errno("waiting for " + l.argv[0]);
        pollfd p{signals.fd(), POLLIN, 0};
        ::poll(&p, 1, 100);
        if (waited_ms >= 0 && (waited_ms += 100) >= kGraceMs) ::kill(-child, SIGKILL);
        auto s = signals.wait(std::chrono::milliseconds(0));
        if (!s) continue;
        note(fmt::format("SIG{}: stopping {} (pid {}), then giving the lab back", sigabbrev_np(*s), l.argv[0], child));
        ::kill(-child, SIGHUP);  // an interactive shell leaves on SIGHUP, not on SIGTERM
        if (*s != SIGHUP) ::kill(-child, *s);
        if (waited_ms < 0) waited_ms = 0;
    }
    ::kill(-child, SIGKILL);  // what the command left running in its group goes with the lab
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    give_terminal(tty, ::getpgrp());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int shell(ShellOptions o) {
    o.file = experiment_path(o.file);
    auto exp = load_or_throw(o.file, o.sets);
    const auto& trial = pick_trial(exp, o.trial);
    lab::require_capabilities("wanlab shell");
    refuse_missing_qdiscs(exp, o.file, "shell");
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
    int status = run_child(launch, signals);
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
    sub.add_flag("--force", o->force,
                 "Host mode: impair the interface even if it carries an SSH session the target filter does not spare");
    sub.add_option("command", o->command, "The command and its arguments, after -- (default: $SHELL)");
    return [o] {
        if (const auto& raw = command_after_dashdash(); !raw.empty()) o->command = raw;
        return shell(*o);
    };
}

}  // namespace wanlab::cli
