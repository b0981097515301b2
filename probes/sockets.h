// The socket helpers the probes share: sockets opened inside a namespace, addresses,
// timeouts, and worker threads that stop when asked (the fd owner and namespace scope are
// core/sys.h).
//
// Contract: failures throw wanlab::Error naming what was attempted and strerror. A socket is
// bound to the namespace of the thread that created it, for its whole life, so probes open
// each socket inside its endpoint's namespace (NetnsScope) and may then use it from any
// thread. Namespaces are given by name (core/sys.h); "" means "the namespace this thread is
// in". Workers is safe to stop from its owner while the workers run.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/sys.h"

namespace wanlab::probes {

using Clock = std::chrono::steady_clock;

// The fd owner and the namespace scope are core's (core/sys.h); probes name them unqualified.
using sys::Fd;
using sys::NetnsScope;

/// socket() inside namespace `netns`. Close-on-exec.
Fd socket_in(const std::string& netns, int domain, int type, int protocol = 0);

/// An IPv4 or IPv6 socket address and its length, for bind(), connect() and sendto().
struct SockAddr {
    sockaddr_storage storage{};
    socklen_t len = 0;

    int family() const { return storage.ss_family; }
    sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
    std::uint16_t port() const;
};

/// "198.18.0.1" or "2001:2::1" + port -> SockAddr; throws InputError for anything but one
/// IPv4 or IPv6 address (names are not resolved).
SockAddr sock_addr(const std::string& address, std::uint16_t port);
/// The address family of `address` (AF_INET or AF_INET6); throws InputError as sock_addr().
int family_of(const std::string& address);
/// The wildcard address of `family` ("0.0.0.0" or "::") + port.
SockAddr any_addr(int family, std::uint16_t port);
/// bind() `fd` to address:port ("" = the wildcard of `family`); throws naming `what`.
void bind_to(int fd, int family, const std::string& address, std::uint16_t port, const std::string& what);
/// address:port as people write it: "198.18.0.6:5201", "[2001:2::6]:5201".
std::string host_port(const std::string& address, std::uint16_t port);
/// The local port a socket is bound to.
std::uint16_t local_port(int fd);

void set_int(int fd, int level, int option, int value, const char* what);
int get_int(int fd, int level, int option, const char* what);
/// What a bulk probe asks of its sockets: SO_SNDBUF, SO_RCVBUF (0: autotuned) and
/// TCP_CONGESTION ("": the sysctl's).
struct Tuning {
    std::int64_t sndbuf = 0, rcvbuf = 0;
    std::string congestion_control;
};
/// Applies `t` to `fd` (before listen() or connect(), so the window scale matches); a size is
/// capped at INT_MAX / 2, as setsockopt() takes an int the kernel doubles.
void tune(int fd, const Tuning& t);

/// Puts `fd` in non-blocking mode.
void set_nonblocking(int fd);

/// TCP_CONGESTION on `fd`; throws naming the algorithms this kernel has and allows in
/// namespaces when it refuses.
void set_congestion_control(int fd, const std::string& name);
/// The algorithm `fd` uses ("" if it cannot be read).
std::string congestion_control_of(int fd);
/// The first line of a file ("" if it cannot be read): a /proc/sys value, read in the calling
/// thread's network namespace.
std::string read_first_line(const std::string& path);

/// SO_RCVTIMEO and SO_SNDTIMEO, so no blocking call waits longer than `timeout`.
void set_timeouts(int fd, std::chrono::milliseconds timeout);

/// A TCP socket in `netns`, bound to address:port (port 0 = any free one), listening.
/// `before_listen` runs on the socket before listen() (buffer sizes must be set there so the
/// window scale matches).
Fd listen_tcp(const std::string& netns, const std::string& address, std::uint16_t port,
              const std::function<void(int)>& before_listen = {});
/// A TCP connection from `netns` to address:port; `before_connect` runs on the socket first.
/// Gives up after `timeout`.
Fd connect_tcp(const std::string& netns, const std::string& address, std::uint16_t port,
               std::chrono::milliseconds timeout, const std::function<void(int)>& before_connect = {});
/// accept() with a timeout; throws when nothing arrives in time.
Fd accept_within(int listener, std::chrono::milliseconds timeout);
/// Waits until some socket in `netns` listens on TCP port `port` (any address), looking every
/// 20 ms without connecting (a tool's one-shot server would take a connection as its client);
/// false if none does within `within`.
bool await_tcp_listening(const std::string& netns, std::uint16_t port, std::chrono::milliseconds within);

/// send()/recv() all of `n` bytes (MSG_NOSIGNAL). False on EOF, error or timeout.
bool send_all(int fd, const char* data, std::size_t n);
bool recv_all(int fd, char* data, std::size_t n, bool quickack);

/// Workers: threads that run until they return or stop() is called.
/// Creates: the threads. Undoes: stop() (sets the flag, shuts down every registered socket
/// so blocked calls return) and joins them all. Exceptions in a worker are kept and
/// rethrown by join(). The destructor never throws.
class Workers {
public:
    Workers() = default;
    ~Workers();
    Workers(const Workers&) = delete;
    Workers& operator=(const Workers&) = delete;

    void spawn(std::function<void()> fn);
    /// shutdown(SHUT_RDWR) this socket on stop(), to wake a worker blocked on it.
    void watch(int fd);
    void stop() noexcept;
    bool stopping() const { return stop_.load(std::memory_order_relaxed); }
    const std::atomic<bool>& flag() const { return stop_; }
    /// Joins every thread; rethrows the first exception a worker threw.
    void join();

private:
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::vector<int> watched_;
    std::vector<std::thread> threads_;
    std::exception_ptr error_;
};

/// A server's accept thread: accepts on `listener` until `running` stops (looking every
/// 50 ms), handing each connection and its peer's port to `take`, which keeps or drops it.
void accept_until_stopped(int listener, const Workers& running, const std::function<void(Fd, std::uint16_t)>& take);

/// CLOCK_REALTIME now: the clock SO_TIMESTAMPNS stamps received packets with.
timespec realtime_now();
/// recvmsg() of one datagram into buf[0, n) that also returns when the kernel received it
/// (SO_TIMESTAMPNS, which the socket must have on), so a delay excludes this thread's
/// wake-up latency, as ping's does; "now" when the kernel gives no stamp.
ssize_t recv_stamped(int fd, void* buf, std::size_t n, timespec& when);

/// Sleeps until `until`, waking every 100 ms to call `tick` (which may throw to abort).
void sleep_until(Clock::time_point until, const std::function<void()>& tick);

/// Seconds as a double.
inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace wanlab::probes
