#include "core/signals.h"

#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <cstring>

#include <fmt/format.h>

#include "core/sys.h"

namespace wanlab::sys {

Interrupted::Interrupted(int signo)
    : Error(fmt::format("interrupted by SIG{}", sigabbrev_np(signo)), 130), signo_(signo) {}

SignalEvents::SignalEvents() {
    sigset_t mask;
    sigemptyset(&mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, s);
    if (int err = pthread_sigmask(SIG_BLOCK, &mask, &old_mask_); err != 0) fail("blocking signals", err);
    fd_ = Fd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!fd_) {
        int err = errno;
        pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
        fail("creating a signalfd", err);
    }
}

SignalEvents::~SignalEvents() {
    fd_.reset();
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::optional<int> SignalEvents::wait(std::chrono::milliseconds timeout) {
    pollfd p{fd_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n <= 0) return std::nullopt;  // EINTR cannot come from our signals: they are blocked
    signalfd_siginfo info{};
    if (::read(fd_.get(), &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return std::nullopt;
    return static_cast<int>(info.ssi_signo);
}

void SignalEvents::check() {
    if (auto s = wait(std::chrono::milliseconds(0))) throw Interrupted(*s);
}

}  // namespace wanlab::sys
