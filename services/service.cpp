#include "services/service.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/placeholders.h"
#include "core/proc.h"
#include "core/sys.h"
#include "core/text.h"
#include "probes/sockets.h"

namespace wanlab::services {
namespace {

using namespace std::chrono_literals;
using probes::Clock;

constexpr auto kPoll = 50ms;
constexpr std::size_t kTailBytes = 16 * 1024;
constexpr std::size_t kTailLines = 5;

// One TCP connect to address:port from the calling thread's namespace, up to 200 ms.
bool accepts(const std::string& address, std::uint16_t port) {
    probes::SockAddr sa;
    try {
        sa = probes::sock_addr(address, port);
    } catch (const InputError&) {
        return false;
    }
    sys::Fd fd(::socket(sa.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return false;
    if (::connect(fd.get(), sa.get(), sa.len) == 0) return true;
    if (errno != EINPROGRESS) return false;
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, 200) != 1) return false;
    int err = 0;
    socklen_t len = sizeof err;
    return ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

// Whether `pid` (our child) has exited, without reaping it. Once reaped (the trial's check for
// a service that died reaps it) it is no longer our child: ECHILD, and it has exited.
bool has_exited(pid_t pid) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
    return info.si_pid == pid;
}

// The group is empty but for the unreaped leader.
bool group_done(pid_t pgid) {
    if (!has_exited(pgid)) return false;
    return sys::group_members(pgid).empty();
}

}  // namespace

std::vector<std::string> expand_argv(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& values, const std::string& what) {
    std::vector<std::string> out;
    out.reserve(argv.size());
    for (const auto& a : argv) out.push_back(text::expand(a, values, what));
    return out;
}

Service::Service(const ServiceSpec& spec, const Placement& where, std::map<std::string, std::string> values,
                 const std::filesystem::path& dir, const std::function<void(pid_t pgid)>& started)
    : spec_(spec), where_(where), values_(std::move(values)) {
    for (const auto& [k, v] : spec_.vars) values_[k] = v;
    std::string what = fmt::format("service `{}`", spec_.name);
    try {
        for (const auto& f : spec_.files)
            sys::write_file_atomic((dir / f.name).string(),
                                   text::expand(f.text, values_, fmt::format("{} template {}", what, f.source)),
                                   "the rendered template", f.mode);
        auto argv = expand_argv(spec_.command, values_, what);
        auto exe = sys::find_program(argv[0]);
        if (exe.empty())
            throw ServiceFailure(
                fmt::format("{}: `{}` is not installed (not on PATH, nor in /usr/sbin or /sbin); "
                            "install it or give its full path in `command`",
                            what, argv[0]));
        argv[0] = exe;
        out_ = dir / (spec_.name + ".stdout");
        err_ = dir / (spec_.name + ".stderr");
        process_ = std::make_unique<sys::Process>(where_.netns, argv, sys::Process::LogFiles{out_, err_, dir});
        pid_ = process_->pid();
    } catch (const ServiceFailure&) {
        throw;
    } catch (const Error& e) {
        throw ServiceFailure(fmt::format("{} could not start: {}", what, e.what()));
    }
    started(pid_);
}

Service::~Service() {
    try {
        stop();
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: warning: stopping service {}: {}\n", spec_.name, text::terminal_safe(e.what()))
                       .c_str(),
                   stderr);
    }
}

std::string Service::failure(const std::string& what) const {
    auto tail = sys::tail_lines(sys::read_tail(err_.string(), kTailBytes), kTailLines);
    if (tail.empty()) tail = sys::tail_lines(sys::read_tail(out_.string(), kTailBytes), kTailLines);
    return fmt::format("service `{}` {}{}; its output: {}", spec_.name, what,
                       tail.empty() ? " (it printed nothing)" : fmt::format(": {}", tail), err_.parent_path().string());
}

void Service::check_running() {
    int status = -1;
    if (!stopped_ && process_ && process_->exited(status)) {
        stopped_ = true;
        throw ServiceFailure(
            failure(fmt::format("{} while its trial ran (a service must stay in the foreground: "
                                "for nginx, -g 'daemon off;')",
                                sys::describe_status(status))));
    }
}

void Service::wait_ready(const probes::Tick& tick) {
    const auto& r = spec_.ready;
    auto start = Clock::now();
    auto deadline = start + (r.kind == ReadyCheck::Kind::delay ? r.delay : r.timeout);
    std::string address = r.address.empty() ? where_.address : text::expand(r.address, values_, "ready.address");
    std::vector<std::string> command;
    if (r.kind == ReadyCheck::Kind::command) {
        command = expand_argv(r.command, values_, fmt::format("service `{}` ready.command", spec_.name));
        auto exe = sys::find_program(command[0]);
        if (exe.empty())
            throw ServiceFailure(
                fmt::format("service `{}`: the ready command `{}` is not installed", spec_.name, command[0]));
        command[0] = exe;
    }
    for (;;) {
        check_running();
        if (r.kind == ReadyCheck::Kind::none) return;
        bool ready = false;
        if (r.kind == ReadyCheck::Kind::port) {
            ready = sys::in_netns_result(where_.netns, [&] { return accepts(address, r.port); });
        } else if (r.kind == ReadyCheck::Kind::command) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            sys::Process check(where_.netns, command);
            ready = sys::exited_ok(check.wait(std::max(left, std::chrono::milliseconds(100)), tick));
        }
        if (ready) return;
        auto now = Clock::now();
        if (now >= deadline) {
            if (r.kind == ReadyCheck::Kind::delay) return;
            auto waited = std::chrono::duration<double>(now - start).count();
            std::string check = r.kind == ReadyCheck::Kind::port
                                    ? fmt::format("nothing accepted on {}:{}", address, r.port)
                                    : fmt::format("`{}` did not exit 0", r.command[0]);
            throw ServiceFailure(failure(fmt::format("was not ready after {:.1f} s: {}", waited, check)));
        }
        probes::sleep_until(std::min<Clock::time_point>(now + kPoll, deadline), tick);
    }
}

std::string Service::stop() {
    if (!process_) return {};
    std::string how;
    if (pid_ > 0 && (!has_exited(pid_) || !sys::group_members(pid_).empty())) {
        ::killpg(pid_, SIGTERM);
        auto deadline = Clock::now() + spec_.stop_timeout;
        while (!group_done(pid_) && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
        if (!group_done(pid_)) {
            ::killpg(pid_, SIGKILL);  // the leader is not reaped yet: the group id is still ours
            how = fmt::format("killed (SIGKILL) after {} s of SIGTERM",
                              std::chrono::duration<double>(spec_.stop_timeout).count());
            auto hard = Clock::now() + 2s;
            while (!group_done(pid_) && Clock::now() < hard) std::this_thread::sleep_for(10ms);
        }
    }
    int status = -1;
    process_->exited(status);
    if (how.empty()) how = sys::describe_status(status);
    process_.reset();  // reaps, if it had not
    stopped_ = true;
    return how;
}

}  // namespace wanlab::services
