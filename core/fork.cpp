#include "core/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <poll.h>
#include <sched.h>
#include <termios.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/signals.h"

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

pid_t fork_detached(const std::filesystem::path& log, std::string_view what) {
    Fd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!out) fail_errno(std::string(what) + ": cannot write its log " + log.string());
    Fd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    Pipe detached = make_pipe();
    std::fflush(nullptr);
    pid_t pid = static_cast<pid_t>(check_sys(::fork(), std::string(what) + ": fork"));
    if (pid > 0) {
        // Returns once the child is in its own session, so whoever is told its pid next never
        // sees it still in this terminal's.
        detached.write.reset();
        char done = 0;
        while (::read(detached.read.get(), &done, 1) < 0 && errno == EINTR) {}
        return pid;
    }
    ::setsid();
    ::dup2(in.get(), STDIN_FILENO);
    ::dup2(out.get(), STDOUT_FILENO);
    ::dup2(out.get(), STDERR_FILENO);
    detached.write.reset();  // the parent's read ends here
    detached.read.reset();
    return 0;
}

pid_t fork_daemon(const std::string& log, int keep, void (*body)(int kept, const void* arg), const void* arg,
                  std::string_view what) {
    const std::string to = log.empty() ? "/dev/null" : log;
    pid_t pid = static_cast<pid_t>(check_sys(::fork(), std::string(what) + ": fork"));
    if (pid > 0) return pid;
    // From here on only async-signal-safe calls: the parent may have threads.
    ::setsid();
    // Above stdio, whatever number it had; close-on-exec, so a program the body execs does
    // not inherit it (fexecve of an ELF binary reads it before closing it).
    const int kept = keep >= 0 ? ::fcntl(keep, F_DUPFD_CLOEXEC, 3) : -1;
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
        ::dup2(out, 1);
        ::dup2(out, 2);
    }
    // No lock, socket or pipe of wanlab's stays open in the daemon: only what it keeps.
    if (kept < 0) {
        if (::close_range(3, ~0U, 0) != 0)
            for (int fd = 3; fd < 65536; ++fd) ::close(fd);
    } else {
        const unsigned k = static_cast<unsigned>(kept);
        if ((k > 3 && ::close_range(3, k - 1, 0) != 0) || ::close_range(k + 1, ~0U, 0) != 0)
            for (int fd = 3; fd < 65536; ++fd)
                if (fd != kept) ::close(fd);
    }
    body(kept, arg);
    ::_exit(127);
}

void give_terminal(int tty, pid_t group) {
    if (tty < 0) return;
    sigset_t ttou, old;
    ::sigemptyset(&ttou);
    ::sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, &old);
    (void)::tcsetpgrp(tty, group);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

namespace {

// In the forked child: only async-signal-safe calls from here to execve().
[[noreturn]] void exec_foreground(const ForegroundCommand& c, int tty, const std::vector<char*>& argv,
                                  const std::vector<char*>& envp) {
    ::setpgid(0, 0);
    give_terminal(tty, ::getpid());
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // wanlab blocks SIGINT/SIGTERM/SIGHUP for its signalfd
    if (c.netns && ::setns(c.netns.get(), CLONE_NEWNET) != 0) {
        static const char failed[] = "wanlab shell: cannot enter the client's namespace\n";
        (void)!::write(2, failed, sizeof failed - 1);
        ::_exit(126);
    }
    ::execve(c.path.c_str(), argv.data(), envp.data());
    static const char failed[] = "wanlab shell: cannot start the command\n";
    (void)!::write(2, failed, sizeof failed - 1);
    ::_exit(127);
}

}  // namespace

int run_foreground(ForegroundCommand& c, SignalEvents& signals, const std::function<void(const std::string&)>& note) {
    std::vector<char*> argv, envp;
    for (auto& a : c.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : c.env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int tty = ::isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
    pid_t child = ::fork();
    if (child < 0) fail_errno("starting " + c.argv[0]);
    if (child == 0) exec_foreground(c, tty, argv, envp);
    ::setpgid(child, child);  // as the child does: whichever runs first
    c.netns.reset();
    constexpr int kGraceMs = 5000;
    int waited_ms = -1;  // since the group was told to stop; -1: not told
    int status = 0;
    for (;;) {
        // Seen exited but not reaped yet, so its group id cannot be reused before the kill below.
        siginfo_t info{};
        int r = ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && info.si_pid == child) break;
        if (r < 0 && errno != EINTR) fail_errno("waiting for " + c.argv[0]);
        pollfd p{signals.fd(), POLLIN, 0};
        ::poll(&p, 1, 100);
        if (waited_ms >= 0 && (waited_ms += 100) >= kGraceMs) ::kill(-child, SIGKILL);
        auto s = signals.wait(std::chrono::milliseconds(0));
        if (!s) continue;
        note(fmt::format("SIG{}: stopping {} (pid {}), then giving the lab back", sigabbrev_np(*s), c.argv[0], child));
        ::kill(-child, SIGHUP);  // an interactive shell leaves on SIGHUP, not on SIGTERM
        if (*s != SIGHUP) ::kill(-child, *s);
        if (waited_ms < 0) waited_ms = 0;
    }
    ::kill(-child, SIGKILL);  // what the command left running in its group goes with it
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    give_terminal(tty, ::getpgrp());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace wanlab::sys
