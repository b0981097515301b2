// External tools as child processes: finding them, starting them inside a network namespace
// through Boost.Process, and collecting what they print.
//
// Contract: find_tool() names the Debian package when a tool is missing. A ToolProcess
// starts the tool with its stdout and stderr on close-on-exec pipes, reads both at once
// (a tool that fills one pipe while the other is read never blocks), bounds the run by a
// deadline, and always leaves its process killed and reaped, never a zombie. Only this
// header's .cpp includes Boost.Process. Errors throw wanlab::Error naming the tool and what
// was attempted. A ToolProcess is used by one thread at a time; different ones may run
// concurrently.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/text.h"
#include "probes/probe.h"

namespace wanlab::probes {

/// The full path of `tool` on PATH (or in /usr/local/sbin, /usr/sbin, /sbin: hping3 lives
/// there and a non-root PATH lacks them); "" when it is in none of them.
std::string search_path(const std::string& tool);

/// A program as a user names it in argv[0]: a name is looked up by search_path(), a path
/// (it has a `/`) is itself when it is an executable file; "" when neither finds it.
std::string find_program(const std::string& program);

/// search_path(), or throws "TOOL is not installed (on Debian: apt-get install PACKAGE)".
std::string find_tool(const std::string& tool, const std::string& debian_package);

/// What a tool left behind once it was reaped.
struct ToolOutput {
    int status = -1;         ///< waitpid() status; -1 if it could not be read
    std::string out, err;    ///< everything it printed (each capped at 64 MiB)
    bool timed_out = false;  ///< killed because the deadline of wait() passed
};

/// True when the tool exited by itself with status 0.
bool exited_ok(const ToolOutput& o);
/// "exited with status 1" / "killed by signal 9 (Killed)".
std::string describe_status(int status);
using text::tail_lines;  // core/text.h: a tool's last lines, for a message

/// ToolProcess: a spawned probe process, one external tool running in a network namespace
/// with its stdout and stderr captured.
/// Creates: the child, through Boost.Process, in its own process group; in the child before
/// exec: setns() into the namespace (fd opened by the parent before the fork), an empty
/// signal mask, SIGKILL when wanlab's thread dies (PR_SET_PDEATHSIG).
/// Undoes: SIGKILL to its process group and a blocking reap, unless wait() or stop() already
/// reaped it. The destructor never throws.
class ToolProcess {
public:
    /// argv[0] is the tool's full path (find_tool); `netns` is a namespace name (core/sys.h) or "" for
    /// wanlab's own namespace. Throws if the namespace cannot be opened or the tool not started.
    ToolProcess(const std::string& netns, std::vector<std::string> argv);
    /// A long-running program (a service): its stdout and stderr go to the files `out` and
    /// `err` (created or truncated, 0644), not to pipes, so nothing has to read them while it
    /// runs; it starts in `cwd`. wait() and stop() then return no output.
    struct LogFiles {
        std::filesystem::path out, err, cwd;
    };
    ToolProcess(const std::string& netns, std::vector<std::string> argv, const LogFiles& logs);
    ~ToolProcess();
    ToolProcess(ToolProcess&&) noexcept;
    ToolProcess(const ToolProcess&) = delete;
    ToolProcess& operator=(const ToolProcess&) = delete;
    ToolProcess& operator=(ToolProcess&&) = delete;

    /// Reads its output until it exits, calling `tick` at least every 100 ms (it may throw;
    /// the destructor then kills and reaps). Past `timeout` it is killed (timed_out = true).
    ToolOutput wait(std::chrono::milliseconds timeout, const Tick& tick);
    /// SIGTERM to its group now, SIGKILL after `grace`; returns what it printed.
    ToolOutput stop(std::chrono::milliseconds grace);
    pid_t pid() const;
    /// Reaps it if it has exited (never blocks); true once it has. `status` then holds the
    /// waitpid() status (-1 if unknown).
    bool exited(int& status);

private:
    struct Running;  // tool_process.cpp: the Boost.Process child, its group and pipes
    void spawn(const std::string& netns, std::vector<std::string> argv, const LogFiles* logs);
    ToolOutput collect(std::chrono::milliseconds timeout, const Tick& tick, bool terminate_first);
    std::unique_ptr<Running> run_;
};

}  // namespace wanlab::probes
