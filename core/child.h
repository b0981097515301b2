// ChildProcess: a program wanlab starts and owns for as long as it talks to it (QEMU for the
// micro-VM, ssh or `wanlab agent` for a remote host), as an RAII object.
//
// Contract: the constructor forks and execs argv[0] in a new process group, with the given
// descriptors placed at fixed numbers (all others close on exec), every signal unblocked and
// PR_SET_PDEATHSIG=SIGKILL so it cannot outlive wanlab; it throws wanlab::Error if the exec
// fails. The destructor kills the whole process group with SIGKILL and reaps the child if it
// is still there; it never throws. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/sys.h"

namespace wanlab::sys {

/// A pipe: read end and write end, both close-on-exec.
struct Pipe {
    Fd read;
    Fd write;
};
Pipe make_pipe();

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

}  // namespace wanlab::sys
