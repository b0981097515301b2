// SignalEvents: SIGINT, SIGTERM and SIGHUP as events a loop waits for, instead of handlers.
//
// Creates: a blocked signal mask for those signals in the calling thread (inherited by every
// thread started afterwards, so construct it first, in main's thread) and a signalfd.
// Undoes: restores the previous mask and closes the fd. A Ctrl-C therefore never interrupts
// wanlab mid-change: it is noticed at the next check(), which throws Interrupted so the
// stack unwinds and every destructor gives the machine back. Not thread-safe.
#pragma once

#include <chrono>
#include <csignal>
#include <optional>

#include "core/error.h"
#include "core/sys.h"

namespace wanlab::sys {

/// Thrown when a signal asks wanlab to stop; exit status 130.
class Interrupted : public Error {
public:
    explicit Interrupted(int signo);
    int signal() const noexcept { return signo_; }

private:
    int signo_;
};

class SignalEvents {
public:
    SignalEvents();
    ~SignalEvents();
    SignalEvents(const SignalEvents&) = delete;
    SignalEvents& operator=(const SignalEvents&) = delete;

    /// The next pending signal, waiting at most `timeout` (0 = just look); nullopt if none.
    std::optional<int> wait(std::chrono::milliseconds timeout);
    /// Throws Interrupted if a signal is pending.
    void check();
    /// The signalfd, readable while a signal is pending, for a loop that polls other
    /// descriptors too; it then takes the signal with wait(0ms).
    int fd() const noexcept { return fd_.get(); }

private:
    sigset_t old_mask_{};
    Fd fd_;
};

}  // namespace wanlab::sys
