#include "core/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::sys {

namespace {

// In the forked child: only async-signal-safe calls from here to execv().
[[noreturn]] void exec_child(char* const* argv, const std::vector<std::pair<int, int>>& fds, int report_fd) {
    auto fail = [report_fd]() {
        int err = errno;
        ssize_t ignored = ::write(report_fd, &err, sizeof err);
        (void)ignored;
        ::_exit(127);
    };
    ::setpgid(0, 0);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) == -1) fail();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    report_fd = ::fcntl(report_fd, F_DUPFD_CLOEXEC, 64);
    if (report_fd == -1) ::_exit(127);
    // Lift every source above the targets first, so no dup2 clobbers a later source.
    int lifted[16];
    std::size_t n = fds.size() < 16 ? fds.size() : 16;
    for (std::size_t i = 0; i < n; ++i)
        if ((lifted[i] = ::fcntl(fds[i].first, F_DUPFD_CLOEXEC, 32)) == -1) fail();
    for (std::size_t i = 0; i < n; ++i)
        if (::dup2(lifted[i], fds[i].second) == -1) fail();
    ::execv(argv[0], argv);
    fail();
    ::_exit(127);
}

}  // namespace

Pipe make_pipe() {
    int fds[2];
    check_sys(::pipe2(fds, O_CLOEXEC), "creating a pipe");
    return Pipe{Fd(fds[0]), Fd(fds[1])};
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::vector<std::pair<int, int>>& fds,
                           const std::string& what) {
    if (fds.size() > 16) throw Error("ChildProcess: too many descriptors");
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    Pipe report = make_pipe();

    pid_ = static_cast<pid_t>(check_sys(::fork(), "starting " + what + " (fork)"));
    if (pid_ == 0) exec_child(cargv.data(), fds, report.write.get());
    ::setpgid(pid_, pid_);  // also in the parent, so kill(-pid) works at once
    report.write.reset();
    int child_errno = 0;
    ssize_t got;
    do {
        got = ::read(report.read.get(), &child_errno, sizeof child_errno);
    } while (got == -1 && errno == EINTR);
    if (got == static_cast<ssize_t>(sizeof child_errno)) {
        kill_and_reap();
        sys::fail("starting " + what + " (" + argv.at(0) + ")", child_errno);
    }
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd >= 0) pidfd_ = Fd(pidfd);
}

ChildProcess::~ChildProcess() {
    if (!status_) kill_and_reap();
}

std::optional<int> ChildProcess::try_reap() {
    if (status_) return status_;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) status_ = status;
    return status_;
}

int ChildProcess::kill_and_reap() noexcept {
    if (status_) return *status_;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) == -1 && errno == EINTR) {}
    status_ = status;
    return status;
}

}  // namespace wanlab::sys
