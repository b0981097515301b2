#include "probes/sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::probes {

Fd socket_in(const std::string& netns, int domain, int type, int protocol) {
    NetnsScope in(netns);
    Fd fd(::socket(domain, type | SOCK_CLOEXEC, protocol));
    if (!fd) sys::fail_errno(fmt::format("opening a socket in {}", netns.empty() ? "this namespace" : netns));
    return fd;
}

std::uint16_t SockAddr::port() const {
    // sin_port and sin6_port sit at the same offset, but each is read through its own type.
    if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
}

SockAddr sock_addr(const std::string& address, std::uint16_t port) {
    SockAddr a;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        a.len = sizeof *v4;
    } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        a.len = sizeof *v6;
    } else {
        throw InputError(fmt::format(
            "\"{}\" is not an IPv4 or IPv6 address (write it as 198.18.0.1 or 2001:2::1; names are not resolved)",
            address));
    }
    return a;
}

int family_of(const std::string& address) { return sock_addr(address, 0).family(); }

SockAddr any_addr(int family, std::uint16_t port) { return sock_addr(family == AF_INET6 ? "::" : "0.0.0.0", port); }

void bind_to(int fd, int family, const std::string& address, std::uint16_t port, const std::string& what) {
    auto a = address.empty() ? any_addr(family, port) : sock_addr(address, port);
    if (::bind(fd, a.get(), a.len) != 0)
        sys::fail_errno(fmt::format("binding {} to {}", what, host_port(address.empty() ? "*" : address, port)));
}

std::string host_port(const std::string& address, std::uint16_t port) {
    return address.find(':') != std::string::npos ? fmt::format("[{}]:{}", address, port)
                                                  : fmt::format("{}:{}", address, port);
}

std::uint16_t local_port(int fd) {
    SockAddr a;
    a.len = sizeof a.storage;
    if (::getsockname(fd, a.get(), &a.len) != 0) sys::fail_errno("getsockname");
    return a.port();
}

void set_int(int fd, int level, int option, int value, const char* what) {
    if (::setsockopt(fd, level, option, &value, sizeof value) != 0)
        sys::fail_errno(fmt::format("setting {} to {}", what, value));
}

int get_int(int fd, int level, int option, const char* what) {
    int v = 0;
    socklen_t len = sizeof v;
    if (::getsockopt(fd, level, option, &v, &len) != 0) sys::fail_errno(fmt::format("reading {}", what));
    return v;
}

void set_timeouts(int fd, std::chrono::milliseconds timeout) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        sys::fail_errno("setting socket timeouts");
}

Fd listen_tcp(const std::string& netns, const std::string& address, std::uint16_t port,
              const std::function<void(int)>& before_listen) {
    auto a = sock_addr(address, port);
    Fd fd = socket_in(netns, a.family(), SOCK_STREAM);
    set_int(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
    if (before_listen) before_listen(fd.get());
    if (::bind(fd.get(), a.get(), a.len) != 0)
        sys::fail_errno(fmt::format("binding a TCP server to {}", host_port(address, port)));
    if (::listen(fd.get(), 4096) != 0) sys::fail_errno("listen");
    return fd;
}

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

void tune(int fd, const Tuning& t) {
    auto as_int = [](std::int64_t bytes) { return static_cast<int>(std::min<std::int64_t>(bytes, INT_MAX / 2)); };
    if (t.sndbuf > 0) set_int(fd, SOL_SOCKET, SO_SNDBUF, as_int(t.sndbuf), "SO_SNDBUF");
    if (t.rcvbuf > 0) set_int(fd, SOL_SOCKET, SO_RCVBUF, as_int(t.rcvbuf), "SO_RCVBUF");
    if (!t.congestion_control.empty()) set_congestion_control(fd, t.congestion_control);
}

void set_nonblocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) sys::fail_errno("setting O_NONBLOCK");
}

void set_congestion_control(int fd, const std::string& name) {
    if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return;
    int e = errno;
    std::string available = read_first_line("/proc/sys/net/ipv4/tcp_available_congestion_control");
    std::string allowed = read_first_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
    throw Error(fmt::format("setting TCP_CONGESTION to \"{}\": {} (available: {}; allowed in namespaces: {})", name,
                            std::strerror(e), available, allowed));
}

std::string congestion_control_of(int fd) {
    char name[16] = {};  // TCP_CA_NAME_MAX (kernel-internal)
    socklen_t len = sizeof name;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
    return std::string(name, strnlen(name, len));
}

Fd connect_tcp(const std::string& netns, const std::string& address, std::uint16_t port,
               std::chrono::milliseconds timeout, const std::function<void(int)>& before_connect) {
    auto a = sock_addr(address, port);
    Fd fd = socket_in(netns, a.family(), SOCK_STREAM);
    if (before_connect) before_connect(fd.get());
    set_timeouts(fd.get(), timeout);  // bounds a blocking connect() too
    if (::connect(fd.get(), a.get(), a.len) != 0)
        sys::fail_errno(fmt::format("connecting to {}", host_port(address, port)));
    return fd;
}

Fd accept_within(int listener, std::chrono::milliseconds timeout) {
    pollfd p{listener, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n < 0) sys::fail_errno("waiting for a connection");
    if (n == 0) throw Error(fmt::format("no connection arrived within {} ms", timeout.count()));
    Fd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd) sys::fail_errno("accept");
    return fd;
}

namespace {
// Whether TCP port `port` is in LISTEN state in the calling thread's namespace, over IPv4 or
// IPv6 (a listener on "::" shows in tcp6 only).
bool listening(std::uint16_t port) {
    std::string want = fmt::format(":{:04X}", port);
    for (const char* table : {"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"}) {
        std::ifstream in(table);
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream f(line);
            std::string slot, local, remote, state;
            f >> slot >> local >> remote >> state;
            if (state == "0A" && local.size() > want.size() && local.ends_with(want)) return true;
        }
    }
    return false;
}
}  // namespace

bool await_tcp_listening(const std::string& netns, std::uint16_t port, std::chrono::milliseconds within) {
    auto ready_by = Clock::now() + within;
    for (;;) {
        {
            NetnsScope in(netns);
            if (listening(port)) return true;
        }
        if (Clock::now() > ready_by) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

bool send_all(int fd, const char* data, std::size_t n) {
    while (n > 0) {
        ssize_t k = ::send(fd, data, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        data += k;
        n -= static_cast<std::size_t>(k);
    }
    return true;
}

bool recv_all(int fd, char* data, std::size_t n, bool quickack) {
    while (n > 0) {
        ssize_t k = ::recv(fd, data, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        // TCP_QUICKACK is not sticky: the kernel may leave quick-ack mode after any segment,
        // so it has to be set again after every read (as netperf and nginx do).
        if (quickack) {
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
        }
        data += k;
        n -= static_cast<std::size_t>(k);
    }
    return true;
}

Workers::~Workers() {
    stop();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
}

void Workers::spawn(std::function<void()> fn) {
    threads_.emplace_back([this, fn = std::move(fn)] {
        try {
            fn();
        } catch (...) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (!error_) error_ = std::current_exception();
            }
            stop();  // one failed worker ends the whole probe
        }
    });
}

void Workers::watch(int fd) {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_.push_back(fd);
}

void Workers::stop() noexcept {
    stop_.store(true);
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : watched_) ::shutdown(fd, SHUT_RDWR);
}

void Workers::join() {
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
}

void accept_until_stopped(int listener, const Workers& running, const std::function<void(Fd, std::uint16_t)>& take) {
    while (!running.stopping()) {
        pollfd p{listener, POLLIN, 0};
        if (::poll(&p, 1, 50) != 1) continue;
        SockAddr peer;
        peer.len = sizeof peer.storage;
        Fd fd(::accept4(listener, peer.get(), &peer.len, SOCK_CLOEXEC));
        if (fd) take(std::move(fd), peer.port());
    }
}

timespec realtime_now() {
    timespec t{};
    ::clock_gettime(CLOCK_REALTIME, &t);
    return t;
}

ssize_t recv_stamped(int fd, void* buf, std::size_t n, timespec& when) {
    iovec iov{buf, n};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t got = ::recvmsg(fd, &msg, 0);
    when = realtime_now();
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); got >= 0 && c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS)
            std::memcpy(&when, CMSG_DATA(c), sizeof when);
    return got;
}

void sleep_until(Clock::time_point until, const std::function<void()>& tick) {
    for (;;) {
        auto now = Clock::now();
        if (now >= until) return;
        std::this_thread::sleep_for(std::min<Clock::duration>(until - now, std::chrono::milliseconds(100)));
        if (tick) tick();
    }
}

}  // namespace wanlab::probes
