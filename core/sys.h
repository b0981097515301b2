// The one place wanlab's kernel-facing code (sysctl/, lab/) checks system calls, and the one
// helper that runs code inside a named network namespace.
//
// Contract: check_sys() returns `rc` when it is not -1 and otherwise throws wanlab::Error
// "<what>: <strerror(errno)>". in_netns() runs `fn` on a short-lived thread that has entered
// /run/netns/<ns> (the calling thread never changes namespace); an empty `ns` runs `fn` on
// the caller's thread, in the namespace wanlab was started in (the init namespace on a host).
// Exceptions thrown by `fn` reach the caller. Thread-safe.
#pragma once

#include <cerrno>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace wanlab::sys {

/// Throws wanlab::Error "<what>: <strerror(err)>".
[[noreturn]] void fail(std::string_view what, int err);

/// Returns rc unless it is -1; then throws with errno.
inline long check_sys(long rc, std::string_view what) {
    if (rc == -1) fail(what, errno);
    return rc;
}

/// /run/netns/<ns>, where `ip netns` keeps named namespaces.
std::string netns_path(const std::string& ns);

/// Runs fn inside network namespace `ns` ("" = the caller's namespace); see the file comment.
void in_netns(const std::string& ns, const std::function<void()>& fn);

/// in_netns for a function with a result.
template <class F>
auto in_netns_result(const std::string& ns, F&& fn) -> decltype(fn()) {
    std::optional<decltype(fn())> out;
    in_netns(ns, [&] { out.emplace(fn()); });
    return std::move(*out);
}

/// Move-only owner of a file descriptor; closes it on destruction.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd();
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    int release() noexcept {
        int f = fd_;
        fd_ = -1;
        return f;
    }

private:
    int fd_ = -1;
};

}  // namespace wanlab::sys
