// QemuProcess: the one running QEMU of a micro-VM, as an RAII object.
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

#include "vm/sys.h"

namespace wanlab::vm {

class QemuProcess {
public:
    /// fds: (descriptor in this process, number it gets in the child).
    QemuProcess(const std::vector<std::string>& argv, const std::vector<std::pair<int, int>>& fds);
    QemuProcess(const QemuProcess&) = delete;
    QemuProcess& operator=(const QemuProcess&) = delete;
    ~QemuProcess();

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

}  // namespace wanlab::vm
