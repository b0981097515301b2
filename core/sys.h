// The one OS layer every part of wanlab goes through: an owned file descriptor, the checker
// every system call's result passes, and network namespaces by name.
//
// Contract: failures throw wanlab::Error "<what was attempted>: <strerror>". A network
// namespace is always given as its name, as `ip netns` knows it ("wanlab-abc-router"); ""
// means the namespace wanlab was started in (the init namespace on a host), and an absolute
// path ("/proc/PID/ns/net") names a namespace mounted elsewhere. netns_path() is the one
// place a name becomes a path. in_netns() runs code on a short-lived thread inside the
// namespace (the calling thread never changes namespace); NetnsScope moves the calling
// thread for a scope, for code that must open sockets there. Fd is move-only and not
// thread-safe; the functions are thread-safe.
#pragma once

#include <sys/types.h>
#include <cerrno>
#include <functional>
#include <optional>

#include <string>
#include <string_view>

namespace wanlab::sys {

/// Throws wanlab::Error "<what>: <strerror(err)>".
[[noreturn]] void fail(std::string_view what, int err);

/// Throws wanlab::Error "<what>: <strerror(errno)>".
[[noreturn]] inline void fail_errno(std::string_view what) { fail(what, errno); }

/// Returns rc unless it is -1; then throws with errno.
inline long check_sys(long rc, std::string_view what) {
    if (rc == -1) fail(what, errno);
    return rc;
}

/// For APIs that return the error number instead of setting errno (pthread, posix_spawn):
/// throws unless `err` is 0.
inline void check_errno(int err, std::string_view what) {
    if (err != 0) fail(what, err);
}

/// Fd: one open file descriptor. Creates: nothing (takes ownership). Undoes: close().
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const noexcept { return fd_; }
    bool valid() const noexcept { return fd_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }
    /// Gives up ownership: returns the descriptor and forgets it.
    int release() noexcept;
    /// Closes the descriptor now (if any).
    void reset() noexcept;

private:
    int fd_ = -1;
};

/// Where `ip netns` keeps named namespaces.
inline constexpr std::string_view kNetnsDir = "/run/netns";

/// The file behind namespace `name`: /run/netns/NAME, or `name` itself when it is an
/// absolute path. Not for "" (which has no file). Throws wanlab::InputError for a name that
/// is not one `ip netns` could make: empty path components, "/", "." or "..", control
/// characters, more than 255 bytes.
std::string netns_path(const std::string& name);

/// Why `name` cannot name a network namespace ("" when it can): the rules of netns_path().
std::string netns_name_problem(std::string_view name);

/// Why `name` cannot name a network device ("" when it can), by the kernel's own rule
/// (dev_valid_name): 1 to 15 bytes, not "." or "..", no `/`, `:`, whitespace or control
/// characters.
std::string device_name_problem(std::string_view name);

/// The largest experiment, profile or journal file wanlab reads.
inline constexpr std::size_t kMaxInputBytes = 4u << 20;

/// The whole contents of the regular file at `path`, for input wanlab reads whole
/// (experiment files, profiles, journals). Looked at before it is opened, so a device, FIFO
/// or socket is refused without its open() ever running (a driver's open runs as root); opened
/// without following a final symlink when `no_follow`, without blocking, and checked to be the
/// file looked at; refuses anything but a regular file and a file larger than `max_bytes`. Throws wanlab::Error naming
/// `what` and the path: "<what> PATH: is a directory", "... is larger than 4 MiB".
std::string read_file(const std::string& path, std::size_t max_bytes, std::string_view what, bool no_follow = false);

/// Writes `data` to `path` whole or not at all, as a file wanlab creates: a temporary sibling
/// made with O_CREAT | O_EXCL | O_NOFOLLOW (never a file or symlink someone planted), given
/// `mode`, then renamed over `path` (a symlink at `path` is replaced, never followed). Throws
/// wanlab::Error naming `what` and the path.
void write_file_atomic(const std::string& path, std::string_view data, std::string_view what, mode_t mode = 0644);

/// Whether a file can be created in `path`'s folder (the way write_file_atomic() would): a
/// message saying why not, or "".
std::string cannot_create(const std::string& path);

/// The last `max_bytes` of the regular file at `path` (a log that may be large), without
/// following a symlink; "" when it cannot be read.
std::string read_tail(const std::string& path, std::size_t max_bytes);

/// A fresh folder /tmp/PREFIX-XXXXXX made by mkdtemp (so nothing planted beforehand is
/// used), then opened to 0755 so a service's unprivileged workers can read what it holds.
/// Throws wanlab::Error naming `what`.
std::string make_service_dir(std::string_view prefix, std::string_view what);

/// True for "" and for a namespace whose file exists.
bool netns_exists(const std::string& name);

/// Whether `fd` is open on a network namespace (so setns(fd, CLONE_NEWNET) can work).
bool is_netns(int fd);

/// Opens namespace `name` (not "") close-on-exec, checking that it is a network namespace;
/// throws "opening network namespace NAME: ...".
Fd open_netns(const std::string& name);

/// NetnsScope: this thread inside network namespace `name` for the scope's life.
/// Creates: setns() into it (nothing when `name` is ""), remembering the thread's namespace.
/// Undoes: setns() back. If that fails the thread would keep running in the wrong namespace,
/// so the destructor aborts the process with a message rather than carry on.
class NetnsScope {
public:
    explicit NetnsScope(const std::string& name);
    ~NetnsScope();
    NetnsScope(const NetnsScope&) = delete;
    NetnsScope& operator=(const NetnsScope&) = delete;

private:
    Fd saved_;
};

/// Runs fn inside network namespace `name` ("" = the caller's namespace); see the file comment.
/// Exceptions thrown by `fn` reach the caller.
void in_netns(const std::string& name, const std::function<void()>& fn);

/// in_netns for a function with a result.
template <class F>
auto in_netns_result(const std::string& name, F&& fn) -> decltype(fn()) {
    std::optional<decltype(fn())> out;
    in_netns(name, [&] { out.emplace(fn()); });
    return std::move(*out);
}

}  // namespace wanlab::sys
