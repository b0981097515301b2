// Channel: one conversation with `wanlab agent` on a host, in line-delimited JSON over the
// agent's stdin and stdout (through ssh for a remote host, a pipe for a local one).
//
// Creates: the child (remote/ssh.h agent_argv(): ssh, or the agent itself), in its own
// process group, killed with SIGKILL if wanlab dies (PR_SET_PDEATHSIG): ssh's connection
// then closes, and the agent at the other end gives its host back. Undoes: closes the
// agent's stdin (its cue to give its host back and exit), waits up to `linger` for the child
// to exit, then kills its process group. A request is one JSON object on a line with an
// "id"; its answer carries the same id and "ok", with "error" when false. The agent's stderr
// is kept (its last lines name what went wrong when it exits). Thread-safe: call() holds a
// mutex, so a keep-alive thread and the run's thread may share a channel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/process.h"
#include "remote/ssh.h"

namespace wanlab::remote {

/// The agent said no: its error message, which the controller shows as it is, and what kind
/// of failure it was ("service": a service of the trial, which fails the trial; "error").
class AgentError : public Error {
public:
    AgentError(const std::string& what, std::string failure) : Error(what), failure_(std::move(failure)) {}
    const std::string& failure() const noexcept { return failure_; }

private:
    std::string failure_;
};

class Channel {
public:
    /// Starts the agent on `d` and reads its hello (within `connect_timeout`: ssh's own
    /// connection set-up included). Throws wanlab::Error saying why it could not: ssh's last
    /// words, the program missing there, a hello that is not the agent's.
    Channel(const Destination& d, const std::filesystem::path& control_dir, const std::string& self,
            std::chrono::milliseconds connect_timeout);
    ~Channel();
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;

    /// The agent's hello: {"agent": "wanlab", "version": ..., "protocol": ...}.
    const nlohmann::json& hello() const { return hello_; }

    /// Sends {"id": N, "op": op, ...args} and waits up to `timeout` for its answer. Throws
    /// AgentError with the agent's message when it answers "ok": false, wanlab::Error when
    /// the channel is gone or the time passes (the agent, and the channel, are then useless).
    nlohmann::json call(const std::string& op, nlohmann::json args, std::chrono::milliseconds timeout);

    /// What the controller answers when the agent asks something while it serves a request
    /// (the client machine's agent, mid-probe, asking for the far server's report): the
    /// question -> the answer; throwing sends the agent the error.
    using Asked = std::function<nlohmann::json(const nlohmann::json&)>;
    /// call(), answering the agent's questions meanwhile with `asked`, and calling `tick` at
    /// least every 100 ms while it waits (it may throw, to abandon the request: its answer,
    /// when it comes, is skipped).
    nlohmann::json call(const std::string& op, nlohmann::json args, std::chrono::milliseconds timeout,
                        const Asked& asked, const std::function<void()>& tick);

    /// A `ping` unless a request is under way (the agent is then busy serving it, and hears
    /// from the controller as it answers): false when it was.
    bool ping_unless_busy(std::chrono::milliseconds timeout);

    /// Whether the agent process (or ssh) still runs.
    bool alive();
    /// What the agent (or ssh) wrote on stderr, its last `lines` lines.
    std::string stderr_tail(std::size_t lines = 8);

    const Destination& destination() const { return dest_; }
    /// The child's process id: ssh (the master of its connection), or the local agent.
    pid_t pid() const { return child_ ? child_->pid() : -1; }

private:
    std::optional<std::string> read_line(std::chrono::steady_clock::time_point deadline,
                                         const std::function<void()>& tick = {});
    void write_line(const nlohmann::json& j, const std::string& what);
    nlohmann::json call_locked(const std::string& op, nlohmann::json args, std::chrono::milliseconds timeout,
                               const Asked& asked, const std::function<void()>& tick);
    void drain_stderr();
    [[noreturn]] void fail(const std::string& what);

    Destination dest_;
    std::mutex mutex_;
    sys::Fd to_agent_, from_agent_, agent_err_;
    std::optional<sys::ChildProcess> child_;
    std::string in_, err_;
    std::uint64_t next_id_ = 1;
    nlohmann::json hello_;
};

}  // namespace wanlab::remote
