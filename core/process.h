// The process layer: every child wanlab starts comes from here.
//
//   Process        a program run beside wanlab through Boost.Process, in a network
//                  namespace, its output captured or in log files: external tools, services,
//                  the micro-VM's fetch commands, `wanlab doctor`'s version checks
//   ChildProcess   a program wanlab talks to over descriptors placed at fixed numbers: QEMU,
//                  ssh to a remote agent
//   fork_detached  `wanlab run --detach`: this program goes on in the background
//   fork_daemon    a watcher that outlives wanlab (the --auto-restore watchdog)
//   run_foreground `wanlab shell`: a command in the terminal's foreground, in a namespace
//
// Contract: Process is the default and is built on Boost.Process (process.cpp, the only file
// that includes it). The raw fork()s live in fork.cpp, each for a job Boost.Process 1.74 does
// not do, said beside it. Every child starts in its own process group with an empty signal
// mask (wanlab blocks SIGINT/SIGTERM/SIGHUP for its signalfd, and exec keeps the mask), and
// every owner kills the whole group and reaps the child when it is done with it: no zombie,
// no orphan. Failures throw wanlab::Error "<what was attempted>: <strerror>". Each object is
// used by one thread at a time; different ones may run concurrently.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/sys.h"
#include "core/text.h"

namespace wanlab::sys {

/// Called while waiting (at least every 100 ms); it may throw to abandon the wait (Ctrl-C).
using Tick = std::function<void()>;

// ---- finding programs -------------------------------------------------------------------

/// The full path of `tool` on PATH (or in /usr/local/sbin, /usr/sbin, /sbin: hping3 lives
/// there and a non-root PATH lacks them); "" when it is in none of them.
std::string search_path(const std::string& tool);

/// A program as a user names it in argv[0]: a name is looked up by search_path(), a path
/// (it has a `/`) is itself when it is an executable file; "" when neither finds it.
std::string find_program(const std::string& program);

/// search_path(), or throws "TOOL is not installed (on Debian: apt-get install PACKAGE)",
/// the package from the table of known tools (core/tools.h), else the tool's own name.
std::string find_tool(const std::string& tool);

// ---- Process: Boost.Process ----------------------------------------------------------------

/// What a process left behind once it was reaped.
struct ProcessOutput {
    int status = -1;         ///< waitpid() status; -1 if it could not be read
    std::string out, err;    ///< everything it printed (each capped at 64 MiB)
    bool timed_out = false;  ///< killed because the deadline of wait() passed
};

/// True when the process exited by itself with status 0.
bool exited_ok(const ProcessOutput& o);
/// "exited with status 1" / "killed by signal 9 (Killed)".
std::string describe_status(int status);
using text::tail_lines;  // core/text.h: a program's last lines, for a message

/// Process: one program running in a network namespace with its stdout and stderr captured.
/// Creates: the child, through Boost.Process, in its own process group; in the child before
/// exec: setns() into the namespace (fd opened by the parent before the fork), an empty
/// signal mask, SIGKILL when wanlab's thread dies (PR_SET_PDEATHSIG).
/// Undoes: SIGKILL to its process group and a blocking reap, unless wait() or stop() already
/// reaped it. The destructor never throws.
class Process {
public:
    /// argv[0] is the program's full path (find_tool); `netns` is a namespace name (core/sys.h)
    /// or "" for wanlab's own. Throws if the namespace cannot be opened or the program not started.
    Process(const std::string& netns, std::vector<std::string> argv);
    /// A long-running program (a service): its stdout and stderr go to the files `out` and
    /// `err` (created or truncated, 0644), not to pipes, so nothing has to read them while it
    /// runs; it starts in `cwd`. wait() and stop() then return no output.
    struct LogFiles {
        std::filesystem::path out, err, cwd;
    };
    Process(const std::string& netns, std::vector<std::string> argv, const LogFiles& logs);
    ~Process();
    Process(Process&&) noexcept;
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;
    Process& operator=(Process&&) = delete;

    /// Reads its output until it exits, calling `tick` at least every 100 ms (it may throw;
    /// the destructor then kills and reaps). Past `timeout` it is killed (timed_out = true).
    ProcessOutput wait(std::chrono::milliseconds timeout, const Tick& tick);
    /// SIGTERM to its group now, SIGKILL after `grace`; returns what it printed.
    ProcessOutput stop(std::chrono::milliseconds grace);
    pid_t pid() const;
    /// Reaps it if it has exited (never blocks); true once it has. `status` then holds the
    /// waitpid() status (-1 if unknown).
    bool exited(int& status);

private:
    struct Running;  // process.cpp: the Boost.Process child, its group and pipes
    void spawn(const std::string& netns, std::vector<std::string> argv, const LogFiles* logs);
    ProcessOutput collect(std::chrono::milliseconds timeout, const Tick& tick, bool terminate_first);
    std::unique_ptr<Running> run_;
};

// ---- the raw forks (fork.cpp), each for what Boost.Process 1.74 cannot do -------------------

/// A pipe: read end and write end, both close-on-exec.
struct Pipe {
    Fd read;
    Fd write;
};
Pipe make_pipe();

/// ChildProcess: a program wanlab starts and owns for as long as it talks to it (QEMU for
/// the micro-VM, ssh or `wanlab agent` for a remote host).
/// Creates: the child, forked and exec'd in a new process group, with the given descriptors
/// placed at fixed numbers (all others close on exec), every signal unblocked and
/// PR_SET_PDEATHSIG=SIGKILL so it cannot outlive wanlab; throws wanlab::Error with the
/// exec's own errno if it fails. Undoes: SIGKILL to the process group and a reap, unless it
/// was reaped already; never throws.
/// Why not Boost.Process: its fd.bind() dup2()s in argument order, so a source descriptor
/// numbered like an earlier target is clobbered; here every source is lifted above the
/// targets first. And its exec-error report is two write()s a loaded parent may read as one.
class ChildProcess {
public:
    /// fds: (descriptor in this process, number it gets in the child). `what` names the
    /// program in errors ("starting QEMU: ...").
    ChildProcess(const std::vector<std::string>& argv, const std::vector<std::pair<int, int>>& fds,
                 const std::string& what);
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;
    ~ChildProcess();

    pid_t pid() const noexcept { return pid_; }
    /// A pidfd that polls readable when the process exits, or -1 (kernel without pidfd_open).
    int exit_fd() const noexcept { return pidfd_.get(); }
    /// The wait status once the process has exited (reaps it), else nullopt. Never blocks.
    std::optional<int> try_reap();
    /// SIGKILL to the process group, then a blocking reap. Returns the wait status.
    int kill_and_reap() noexcept;

private:
    pid_t pid_ = -1;
    Fd pidfd_;
    std::optional<int> status_;
};

/// This process forked into a session of its own (setsid: no controlling terminal, so a
/// closed ssh session sends it no SIGHUP), stdin from /dev/null, stdout and stderr to `log`
/// (created or truncated, 0644). Returns the child's pid in this process, once the child is
/// in its own session, and 0 in the child.
/// `what` names the step in errors ("--detach: fork: ..."). Why a raw fork: the child goes on
/// running this program where it stands; a spawn API starts another program.
pid_t fork_detached(const std::filesystem::path& log, std::string_view what);

/// A daemon: forked into a session of its own with an empty signal mask, stdin from
/// /dev/null, stdout and stderr appended to `log` (created 0600; "" = /dev/null), and every
/// descriptor closed but `keep` (moved above stdio, close-on-exec; -1 = none), which it gets
/// as its argument; then `body` runs in it and must end in exec or _exit. Returns the
/// daemon's pid (this process's child: reap it). Why a raw fork: the daemon runs wanlab's
/// own code before it execs (the watchdog watches, then restores), which a spawn API cannot.
/// `body` must use only async-signal-safe calls: the parent may have threads.
pid_t fork_daemon(const std::string& log, int keep, void (*body)(int kept, const void* arg), const void* arg,
                  std::string_view what);

/// A command run in the terminal's foreground.
struct ForegroundCommand {
    std::string path;               ///< the program to exec
    std::vector<std::string> argv;  ///< argv[0] names it in messages
    std::vector<std::string> env;   ///< its whole environment, "NAME=value"
    Fd netns;                       ///< the namespace it enters; invalid: wanlab's own
};

/// Runs `c` in a process group of its own that gets the terminal (if stdin is one), waits for
/// it, and passes SIGINT/SIGTERM/SIGHUP from `signals` on to its group (SIGHUP first: an
/// interactive shell leaves on it), SIGKILL 5 s later; `note` says so. When it exits, what it
/// left running in its group is killed and the terminal comes back. Returns its exit status
/// (128 + N when signal N ended it). Why a raw fork: the child must take the terminal's
/// foreground before exec, and the group must stay unreaped until its stragglers are killed,
/// which Boost.Process 1.74 cannot express.
class SignalEvents;
int run_foreground(ForegroundCommand& c, SignalEvents& signals, const std::function<void(const std::string&)>& note);

/// Makes process group `group` the foreground of terminal `tty` (nothing if tty < 0); from a
/// background group too (SIGTTOU is blocked meanwhile). Async-signal-safe.
void give_terminal(int tty, pid_t group);

}  // namespace wanlab::sys
