// Processes by pid, as /proc shows them: who started when, who is in which process group
// and which network namespace. What a journal needs to find a run's processes again after
// wanlab itself was killed, and to never signal a stranger that reused a pid.
//
// Contract: every function reads /proc afresh and never throws for a process that is gone
// (it is simply not listed). A process group id cannot be reused while any member of the
// group is alive, so kill_group() may signal a group whose leader is gone, but never one
// whose leader pid now belongs to a different process (another start time). Thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace wanlab::sys {

/// The start time of `pid` (field 22 of /proc/PID/stat, clock ticks since boot), 0 if there
/// is no such process.
unsigned long long process_start_time(pid_t pid);

/// Whether `pid` is the process that started at `start_time` and is running (not a zombie).
bool process_running(pid_t pid, unsigned long long start_time);

/// Every live process whose process group is `pgid`.
std::vector<pid_t> group_members(pid_t pgid);

/// Every live process in the network namespace at `netns_path` (/run/netns/NAME), as `ip
/// netns pids` lists them.
std::vector<pid_t> netns_processes(const std::string& netns_path);

/// SIGKILL to process group `pgid` of a leader that started at `start_time`, if that group
/// is still the one it was: the leader is alive with that start time, or gone with members
/// left. Returns how many processes were in it (0: nothing to do).
std::size_t kill_group(pid_t pgid, unsigned long long start_time);

/// Waits up to `ms` for `pids` to be gone; returns those still there.
std::vector<pid_t> wait_gone(std::vector<pid_t> pids, int ms);

}  // namespace wanlab::sys
