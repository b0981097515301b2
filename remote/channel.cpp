#include "remote/channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "core/process.h"
#include "core/tools.h"

namespace wanlab::remote {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// How long closing a channel waits for the agent to give its host back and exit: its
// services' stop timeouts (SIGTERM, then SIGKILL after 5 s by default) and the restore.
constexpr auto kLinger = 20s;
// An answer longer than this is not the agent's.
constexpr std::size_t kMaxLine = 64 << 20;
constexpr std::size_t kMaxStderr = 64 << 10;

void nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string where(const Destination& d) { return d.local() ? d.name + " (local)" : d.name + " (" + d.ssh + ")"; }

}  // namespace

Channel::Channel(const Destination& d, const std::filesystem::path& control_dir, const std::string& self,
                 std::chrono::milliseconds connect_timeout)
    : dest_(d) {
    auto argv = agent_argv(d, control_dir, self);
    auto program = sys::find_program(argv[0]);
    if (program.empty())
        throw Error(d.local() ? fmt::format("{}: wanlab = \"{}\" is not an executable program here", where(d), argv[0])
                              : fmt::format("{}: ssh is not installed here (on Debian: apt-get install {})", where(d),
                                            sys::debian_package("ssh")));
    argv[0] = program;
    auto in = sys::make_pipe(), out = sys::make_pipe(), err = sys::make_pipe();
    child_.emplace(argv,
                   std::vector<std::pair<int, int>>{{in.read.get(), 0}, {out.write.get(), 1}, {err.write.get(), 2}},
                   "the agent on " + where(d));
    // The child's ends close here: kept open, this process would hold the agent's stdout and
    // never see it end (a missing program, a refused login) before connect_timeout.
    in.read.reset(), out.write.reset(), err.write.reset();
    to_agent_ = std::move(in.write);
    from_agent_ = std::move(out.read);
    agent_err_ = std::move(err.read);
    nonblocking(from_agent_.get());
    nonblocking(agent_err_.get());
    auto line = read_line(Clock::now() + connect_timeout);
    if (!line) {
        // Give ssh a moment to finish its last words and exit.
        for (int i = 0; i < 20 && alive(); ++i) std::this_thread::sleep_for(50ms);
        drain_stderr();
        auto said = stderr_tail();
        if (said.find("not found") != std::string::npos || said.find("No such file") != std::string::npos)
            throw Error(
                fmt::format("{}: there is no `{}` there ({}); install wanlab on it (the same version as here), or set "
                            "[hosts.{}] wanlab = \"/path/to/wanlab\"",
                            where(d), d.wanlab, said, d.name));
        fail(alive() ? "no answer from the agent" : "the connection ended before the agent answered");
    }
    hello_ = json_input::parse(*line);
    auto agent = hello_.is_object() ? hello_.find("agent") : hello_.end();
    if (agent == hello_.end() || !agent->is_string() || *agent != "wanlab")
        fail(fmt::format("it answered something that is not wanlab's agent: \"{}\"", line->substr(0, 200)));
}

Channel::~Channel() {
    to_agent_.reset();  // EOF: the agent gives its host back and exits
    if (!child_) return;
    for (auto end = Clock::now() + kLinger; Clock::now() < end;) {
        if (child_->try_reap()) return;
        std::this_thread::sleep_for(20ms);
    }
    child_->kill_and_reap();
}

void Channel::fail(const std::string& what) {
    drain_stderr();
    auto said = stderr_tail();
    throw Error(fmt::format("{}: {}{}", where(dest_), what, said.empty() ? "" : "; it said: " + said));
}

bool Channel::alive() { return child_ && !child_->try_reap(); }

void Channel::drain_stderr() {
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(agent_err_.get(), buf, sizeof buf);
        if (n <= 0) return;
        err_.append(buf, static_cast<std::size_t>(n));
        if (err_.size() > kMaxStderr) err_.erase(0, err_.size() - kMaxStderr);
    }
}

std::string Channel::stderr_tail(std::size_t lines) {
    std::string s = err_;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    // The start of the last `lines` lines: after the newline before them, or the beginning.
    std::size_t start = s.size();
    for (std::size_t n = 0; n < lines && start > 0; ++n) {
        auto nl = s.rfind('\n', start - 1);
        start = nl == std::string::npos ? 0 : nl;
    }
    std::string tail = s.substr(start < s.size() && s[start] == '\n' ? start + 1 : start);
    for (auto& c : tail)
        if (c == '\n') c = ' ';
    return tail;
}

std::optional<std::string> Channel::read_line(Clock::time_point deadline, const std::function<void()>& tick) {
    for (;;) {
        if (auto nl = in_.find('\n'); nl != std::string::npos) {
            auto line = in_.substr(0, nl);
            in_.erase(0, nl + 1);
            return line;
        }
        if (in_.size() > kMaxLine) return std::nullopt;
        if (tick) tick();
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return std::nullopt;
        pollfd p[2] = {{from_agent_.get(), POLLIN, 0}, {agent_err_.get(), POLLIN, 0}};
        int n = ::poll(p, 2, static_cast<int>(std::min<long long>(left, tick ? 100 : 1000)));
        if (n < 0 && errno != EINTR) return std::nullopt;
        if (p[1].revents) drain_stderr();
        if (p[0].revents) {
            char buf[65536];
            ssize_t got = ::read(from_agent_.get(), buf, sizeof buf);
            if (got > 0)
                in_.append(buf, static_cast<std::size_t>(got));
            else if (got == 0 || (errno != EAGAIN && errno != EINTR))
                return std::nullopt;  // the agent's stdout closed: it, or ssh, is gone
        }
    }
}

void Channel::write_line(const nlohmann::json& j, const std::string& what) {
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    for (std::size_t off = 0; off < line.size();) {
        ssize_t n = ::write(to_agent_.get(), line.data() + off, line.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(fmt::format("sending {}: the agent is gone", what));
        off += static_cast<std::size_t>(n);
    }
}

nlohmann::json Channel::call(const std::string& op, nlohmann::json args, std::chrono::milliseconds timeout) {
    return call(op, std::move(args), timeout, {}, {});
}

bool Channel::ping_unless_busy(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    call_locked("ping", nlohmann::json::object(), timeout, {}, {});
    return true;
}

nlohmann::json Channel::call(const std::string& op, nlohmann::json args, std::chrono::milliseconds timeout,
                             const Asked& asked, const std::function<void()>& tick) {
    std::lock_guard lock(mutex_);
    return call_locked(op, std::move(args), timeout, asked, tick);
}

nlohmann::json Channel::call_locked(const std::string& op, nlohmann::json args, std::chrono::milliseconds timeout,
                                    const Asked& asked, const std::function<void()>& tick) {
    if (!to_agent_) fail("the channel is closed");
    auto id = next_id_++;
    nlohmann::json request = args.is_object() ? std::move(args) : nlohmann::json::object();
    request["id"] = id;
    request["op"] = op;
    write_line(request, fmt::format("`{}`", op));
    auto deadline = Clock::now() + timeout;
    for (;;) {
        auto answer = read_line(deadline, tick);
        if (!answer) fail(fmt::format("no answer to `{}` within {} s", op, timeout.count() / 1000.0));
        auto j = json_input::parse(*answer);
        if (j.is_object() && j.contains("ask")) {  // the agent needs something to go on
            nlohmann::json reply;
            try {
                if (!asked) throw Error("nothing to answer with");
                reply = {{"answer", asked(j["ask"])}};
            } catch (const std::exception& e) {
                reply = {{"answer", nullptr}, {"error", e.what()}};
            }
            write_line(reply, "an answer");
            continue;
        }
        if (!j.is_object() || !j.contains("id"))
            fail(fmt::format("a line that is not an answer: \"{}\"", answer->substr(0, 200)));
        if (j["id"] != id) continue;  // an answer to an earlier request given up on
        if (!j.value("ok", false))
            throw AgentError(fmt::format("{}: {}", where(dest_), j.value("error", "failed")),
                             j.value("failure", "error"));
        return j;
    }
}

}  // namespace wanlab::remote
