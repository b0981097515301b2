// Process over Boost.Process 1.74, and finding programs. The only file that includes
// Boost.Process (it is heavy to compile).
//
// Boost.Process 1.74 traps avoided here (docs/probes.md, shared notes on dependencies):
// - child::wait_for() can sleep through its whole timeout, and child::terminate() kills with
//   waitpid(WNOHANG), leaving a zombie; so exit is polled with child::running() (a
//   waitpid(WNOHANG) that records the status) and a kill is followed by a blocking waitpid.
// - bp::async_pipe creates its pipe without O_CLOEXEC: a tool another thread starts meanwhile
//   would inherit the write end and keep our read from ever seeing EOF. The pipes here are
//   pipe2(O_CLOEXEC), bound to the child's 1 and 2 with bp::posix::fd (dup2 clears the flag on
//   the copy) and read with Boost.Asio, both at once, so neither can fill up and block the tool.
// - No io_context and no on_exit in the child's arguments: Boost.Process would install a
//   process-wide SIGCHLD handler (sigchld_service) that other code's children would hit.
// - Without an error handler, a child that fails between fork and exec makes Boost throw
//   and forget its pid: a zombie. With bp::error, Boost calls on_error instead, where
//   EnterNamespace reaps it; the child first writes what it attempted to its stderr pipe.
// - executor::set_error() from on_exec_setup writes the error code and the message length in
//   two write()s that the parent reads as one 8-byte record: under load the parent reads
//   half of it and builds a string of garbage length. The namespace is checked in the parent
//   instead, and a child that still fails exits 127 without it.
#include "core/process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/posix.hpp>

#include "core/error.h"
#include "core/tools.h"

namespace wanlab::sys {
namespace {

namespace bp = boost::process;
namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxOutput = 64u << 20;
// After SIGKILL to the group, how long its pipes may stay open (a process that left the
// group) before we stop reading and reap.
constexpr auto kAfterKill = 2s;

/// write(2) of a literal, for the child: async-signal-safe.
template <std::size_t N>
void say(const char (&text)[N]) {
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, text, N - 1);
}

/// Boost.Process initializer: what the child does between fork and exec. Only
/// async-signal-safe calls (another thread of wanlab may hold malloc's lock at the fork).
/// It comes last in the child's arguments, so fd 2 is already the stderr pipe.
class EnterNamespace : public bp::extend::handler {
public:
    explicit EnterNamespace(int netns_fd) : netns_fd_(netns_fd) {}

    template <class Executor>
    void on_exec_setup(Executor&) const {
        // wanlab blocks SIGINT/SIGTERM for its signalfd, and exec keeps the mask: unblock, so
        // stop() can terminate the tool.
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);  // wanlab ignores it; exec would keep that
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (netns_fd_ >= 0 && ::setns(netns_fd_, CLONE_NEWNET) != 0) {
            // Not e.set_error(): in 1.74 it writes the error code and the message length with
            // two write()s that the parent reads as one, so under load the parent can read a
            // garbage length (a length_error). The parent checked the fd is a network
            // namespace, so this is rare (EPERM); the tool's status 127 and this stderr say it.
            say("setns into the network namespace failed");
            ::_exit(127);
        }
    }

    template <class Executor>
    void on_exec_error(Executor&, const std::error_code&) const {
        say("exec");
    }

    /// Parent side, the child failed before exec (or exec failed): reap it, Boost will not.
    template <class Executor>
    void on_error(Executor& e, const std::error_code&) const {
        if (e.pid <= 0) return;  // fork itself failed
        ::kill(e.pid, SIGKILL);
        while (::waitpid(e.pid, nullptr, 0) < 0 && errno == EINTR) {}
    }

private:
    int netns_fd_;
};

/// One output pipe: the write end goes to the child, the read end is read asynchronously.
struct OutputPipe {
    explicit OutputPipe(asio::io_context& io) : read(io) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) fail_errno("creating a pipe for a tool's output");
        read.assign(fds[0]);
        write = Fd(fds[1]);
    }

    asio::posix::stream_descriptor read;
    Fd write;
    std::array<char, 65536> buf{};
    std::string text;
};

void read_more(OutputPipe& p) {
    p.read.async_read_some(asio::buffer(p.buf), [&p](const boost::system::error_code& ec, std::size_t n) {
        if (n > 0 && p.text.size() < kMaxOutput) p.text.append(p.buf.data(), std::min(n, kMaxOutput - p.text.size()));
        if (!ec) return read_more(p);
        boost::system::error_code ignored;  // EOF: every writer is gone
        p.read.close(ignored);
    });
}

/// Everything in a pipe whose writers are all gone.
std::string drain(int fd) {
    std::string text;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) text.append(buf, static_cast<std::size_t>(n));
    return text;
}

}  // namespace

struct Process::Running {
    asio::io_context io;  // first: the descriptors below are registered with it
    OutputPipe out{io}, err{io};
    bp::group group;
    bp::child child;
    bool reaped = false;
    int status = -1;

    bool pipes_open() const { return out.read.is_open() || err.read.is_open(); }

    void close_pipes() {
        boost::system::error_code ignored;
        out.read.close(ignored);
        err.read.close(ignored);
    }

    /// After a reap the pid and the group id may be reused: Boost must never signal them again.
    void forget(int wait_status) {
        status = wait_status;
        reaped = true;
        child.detach();
        group.detach();
    }

    /// Reaps the tool if it has exited; true once it is reaped.
    bool reap_if_exited() {
        if (reaped) return true;
        std::error_code ec;
        if (child.running(ec)) return false;  // waitpid(WNOHANG); records the status when it exited
        int s = child.native_exit_code();
        // ECHILD (someone else reaped it: SIGCHLD ignored) leaves Boost's "still active" marker.
        forget(!ec && (WIFEXITED(s) || WIFSIGNALED(s)) ? s : -1);
        return true;
    }

    /// SIGKILL to the group, then a blocking reap (1.74's terminate() would leave a zombie).
    void kill_and_reap() noexcept {
        if (reaped) return;
        std::error_code ec;
        group.terminate(ec);  // killpg; the leader is not reaped yet, so the group id is still ours
        pid_t pid = child.id();
        ::kill(pid, SIGKILL);
        int wait_status = 0;
        pid_t got;
        while ((got = ::waitpid(pid, &wait_status, 0)) < 0 && errno == EINTR) {}
        forget(got == pid ? wait_status : -1);
    }

    void signal_group(int sig) const {
        if (!reaped) ::killpg(child.id(), sig);  // the child leads its own group
    }
};

std::string search_path(const std::string& tool) {
    auto dirs = boost::this_process::path();
    for (const char* d : {"/usr/local/sbin", "/usr/sbin", "/sbin"}) dirs.emplace_back(d);
    return bp::search_path(tool, dirs).string();
}

std::string find_program(const std::string& program) {
    if (program.find('/') == std::string::npos) return search_path(program);
    return ::access(program.c_str(), X_OK) == 0 ? program : std::string();
}

std::string find_tool(const std::string& tool) {
    auto found = search_path(tool);
    if (found.empty())
        throw Error(fmt::format("{} is not installed (on Debian: apt-get install {})", tool, debian_package(tool)));
    return found;
}

bool exited_ok(const ProcessOutput& o) { return o.status >= 0 && WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0; }

std::string describe_status(int status) {
    if (status < 0) return "ended with an unknown status";
    if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        const char* name = ::sigabbrev_np(WTERMSIG(status));
        return fmt::format("killed by signal {} (SIG{})", WTERMSIG(status), name ? name : "?");
    }
    return fmt::format("ended with wait status {:#x}", status);
}

Process::Process(const std::string& netns, std::vector<std::string> argv) { spawn(netns, std::move(argv), nullptr); }

Process::Process(const std::string& netns, std::vector<std::string> argv, const LogFiles& logs) {
    spawn(netns, std::move(argv), &logs);
}

void Process::spawn(const std::string& netns, std::vector<std::string> argv, const LogFiles* logs) {
    if (argv.empty()) throw Error("starting a tool: no command");
    Fd ns;
    if (!netns.empty()) {
        ns = Fd(::open(netns_path(netns).c_str(), O_RDONLY | O_CLOEXEC));
        if (!ns) fail_errno("opening network namespace " + netns + " for " + argv[0]);
        // Checked here rather than failing in the child: a file that is not a network
        // namespace gets an ordinary error before anything is spawned.
        if (!is_netns(ns.get()))
            fail(fmt::format("starting {} in {}: setns into the network namespace", argv[0], netns), EINVAL);
    }
    // A service writes into files: opened here (never following a symlink planted in the
    // trial's folder), bound to its 1 and 2 like the pipes would be.
    Fd out_file, err_file;
    if (logs) {
        auto open_log = [](const std::filesystem::path& p) {
            Fd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
            if (!fd) fail_errno("creating " + p.string());
            return fd;
        };
        out_file = open_log(logs->out);
        err_file = open_log(logs->err);
    }
    run_ = std::make_unique<Running>();
    Running& r = *run_;
    int out_fd = logs ? out_file.get() : r.out.write.get();
    int err_fd = logs ? err_file.get() : r.err.write.get();
    std::vector<std::string> args(argv.begin() + 1, argv.end());
    std::error_code failed;
    auto cwd = logs && !logs->cwd.empty() ? logs->cwd : std::filesystem::current_path();
    r.child = bp::child(bp::exe = argv[0], bp::args = args, bp::std_in < bp::null, bp::start_dir = cwd.string(),
                        bp::posix::fd.bind(STDOUT_FILENO, out_fd), bp::posix::fd.bind(STDERR_FILENO, err_fd), r.group,
                        bp::error = failed, EnterNamespace(ns.get()));
    if (failed) {  // the child, if there was one, is reaped; its stderr says what it attempted
        std::string attempted;
        if (logs) {
            err_file.reset();
            attempted = tail_lines(read_tail(logs->err.string(), 4096), 1);
        } else {
            r.err.write.reset();
            attempted = drain(r.err.read.native_handle());
        }
        throw Error(fmt::format("starting {}{}: {}: {}", argv[0], netns.empty() ? "" : " in " + netns,
                                attempted.empty() ? "spawning" : attempted, failed.message()));
    }
    r.out.write.reset();  // the child has its copies; EOF comes when it (and its children) exit
    r.err.write.reset();
    if (logs) {
        r.close_pipes();  // nothing writes them: the exit status alone says it has ended
        return;
    }
    read_more(r.out);
    read_more(r.err);
}

Process::Process(Process&&) noexcept = default;

Process::~Process() {
    if (run_) run_->kill_and_reap();
}

pid_t Process::pid() const { return run_ ? run_->child.id() : -1; }

bool Process::exited(int& status) {
    if (!run_ || !run_->reap_if_exited()) return false;
    status = run_->status;
    return true;
}

ProcessOutput Process::collect(std::chrono::milliseconds timeout, const Tick& tick, bool terminate_first) {
    Running& r = *run_;
    ProcessOutput o;
    if (terminate_first) r.signal_group(SIGTERM);
    auto deadline = Clock::now() + timeout;
    bool killed = false;
    while (r.pipes_open() || !r.reap_if_exited()) {
        auto now = Clock::now();
        if (now >= deadline && killed) {  // something outside the group still holds a pipe
            r.close_pipes();
            r.kill_and_reap();
            break;
        }
        if (now >= deadline) {
            o.timed_out = !terminate_first;
            r.signal_group(SIGKILL);
            killed = true;
            deadline = now + kAfterKill;
        }
        auto slice = std::min<Clock::duration>(deadline - now, r.pipes_open() ? Clock::duration(100ms) : 5ms);
        if (r.pipes_open()) {
            r.io.restart();
            r.io.run_for(slice);  // returns early once both pipes are at EOF
        } else {
            std::this_thread::sleep_for(slice);  // output closed, exit status not there yet
        }
        if (tick) tick();
    }
    o.status = r.status;
    o.out = std::move(r.out.text);
    o.err = std::move(r.err.text);
    return o;
}

ProcessOutput Process::wait(std::chrono::milliseconds timeout, const Tick& tick) {
    return collect(timeout, tick, false);
}

ProcessOutput Process::stop(std::chrono::milliseconds grace) { return collect(grace, {}, true); }

}  // namespace wanlab::sys
