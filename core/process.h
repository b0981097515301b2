// Starting processes: the one place wanlab forks or execs.
//
// Contract: every child wanlab starts comes from here. Programs that run beside wanlab and
// are collected (tools, services, ssh, QEMU) start through Boost.Process (Process,
// ChildProcess); a raw fork() lives only where Boost.Process cannot do the job, each saying
// why: fork_detached() (the rest of this very program goes on in the child, no exec).
// Failures throw wanlab::Error naming what was attempted and strerror. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string_view>

namespace wanlab::sys {

/// This process forked into a session of its own (setsid: no controlling terminal, so a
/// closed ssh session sends it no SIGHUP), stdin from /dev/null, stdout and stderr to `log`
/// (created or truncated, 0644). Returns the child's pid in this process and 0 in the child.
/// `what` names the step in errors ("--detach: fork: ..."). A raw fork: the child goes on
/// running this program where it stands, which no spawn API offers.
pid_t fork_detached(const std::filesystem::path& log, std::string_view what);

}  // namespace wanlab::sys
