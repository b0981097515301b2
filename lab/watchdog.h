// The --auto-restore watchdog: a detached process that gives the machine back even when
// wanlab, or the SSH session that started it, is gone.
//
// Contract: arm_watchdog() forks a child in its own session (so Ctrl-C in the terminal and
// a hang-up of the session do not reach it), with stdio on /dev/null or a log file, which
// waits and then runs `argv` (a `wanlab` command that restores) with the wanlab image that
// armed it: the executable is opened at arm time and exec'd from that descriptor
// (fexecve), so a rebuild or removal of the binary during a long run does not break it. Without a watched process
// it fires when `seconds` have passed (`wanlab link apply --auto-restore`, whose change
// outlives wanlab on purpose). With one (this process, for `wanlab run` and `lab up`), it
// also fires as soon as that process dies while its journal is still there (a SIGKILL: the
// journal is then stale and `wanlab restore` replays it), at the deadline first ends the
// process (SIGTERM, by which it restores itself; SIGKILL 10 s later if it has not), and it
// stands down without doing anything once the journal, present when it was armed or seen
// later, is gone (the run gave the machine back, or failed and undid its change). The child makes only
// async-signal-safe calls before exec, so it may be armed after threads exist. Thread-safe.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace wanlab::lab {

struct WatchdogOptions {
    unsigned seconds = 0;           ///< the deadline, from arming
    std::vector<std::string> argv;  ///< wanlab's arguments that restore; argv[0] is only a name
    bool watch_parent = false;      ///< watch the calling process (see above)
    std::filesystem::path journal;  ///< with watch_parent: the run's journal
    std::filesystem::path log;      ///< where argv's output goes ("" = /dev/null)
};

/// The watchdog of run `run` (`wanlab run`, `lab up`): watches this process and the run's
/// journal in `dir`, restores with `wanlab restore RUN`, logs to <dir>/<run>.watchdog.log.
WatchdogOptions run_watchdog(const std::string& run, unsigned seconds, const std::filesystem::path& dir);

/// Starts the watchdog; returns its pid. Throws wanlab::Error if it cannot be started.
pid_t arm_watchdog(const WatchdogOptions& options);

/// Ends watchdog `pid`, armed by this process with `options` (watch_parent), once its run has
/// given the machine back: at once, instead of at its next look at the journal (every 100 ms),
/// so that nothing of the run outlives it. Its log goes too unless something was written to it
/// (the deadline's note). Returns false and leaves it be while the journal is there (an undo
/// failed and kept it): it then restores when this process ends.
bool retire_watchdog(pid_t pid, const WatchdogOptions& options);

/// The watchdog of this process's run (run_watchdog()), retired when the run has given the
/// machine back: by retire(), or at the latest when this goes out of scope.
class RunWatchdog {
public:
    RunWatchdog() = default;
    RunWatchdog(const RunWatchdog&) = delete;
    RunWatchdog& operator=(const RunWatchdog&) = delete;
    ~RunWatchdog() { retire(); }
    /// Arms it (arm_watchdog()); returns its pid.
    pid_t arm(WatchdogOptions options);
    /// retire_watchdog() if armed and not yet retired.
    void retire() noexcept;
    const WatchdogOptions& options() const { return options_; }

private:
    pid_t pid_ = 0;
    WatchdogOptions options_;
};

/// The path the running wanlab binary was started from (/proc/self/exe), for argv[0].
std::string self_exe();

}  // namespace wanlab::lab
