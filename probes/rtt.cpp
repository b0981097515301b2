// The built-in rtt probe: TCP handshake timing (with our own listener, or a remote target's),
// UDP echo against our own echo server, and ICMP echo (unprivileged ping socket, raw socket as
// fallback). See docs/probes.md.
#include <arpa/inet.h>
#include <netinet/icmp6.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/stats.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

// A probe without an answer within this time counts as lost (ping -W 1, hping3's default).
constexpr auto kAnswerTimeout = 1000ms;

struct Plan {
    std::int64_t count;
    std::chrono::nanoseconds interval, duration;
    std::size_t size;
};

int remaining_ms(Clock::time_point deadline) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<std::int64_t>(left, 0));
}

double seconds_between(const timespec& a, const timespec& b) {
    return static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_nsec - a.tv_nsec) / 1e9;
}

void summarize(ProbeResult& r, std::int64_t sent, std::int64_t count);

/// Sends probe i (0-based) with `once`, which returns the RTT or nullopt (lost), paced at
/// `interval` from the start and bounded by `duration` in total.
ProbeResult pace(const Plan& plan, const Tick& tick, const std::function<std::optional<double>(std::int64_t)>& once) {
    ProbeResult r;
    r.kind = "rtt";
    r.tool = "builtin";
    auto start = Clock::now(), stop = start + plan.duration;
    r.began = start;
    std::int64_t sent = 0;
    for (; sent < plan.count && Clock::now() < stop; ++sent) {
        sleep_until(start + plan.interval * sent, tick);
        double at = seconds(Clock::now() - start);
        if (auto rtt = once(sent)) {
            r.samples["rtt"].push_back(*rtt);
            r.series["rtt"].add(at, *rtt);
        }
    }
    summarize(r, sent, plan.count);
    return r;
}

/// The rtt metrics of r's samples, `sent` of `count` probes sent.
void summarize(ProbeResult& r, std::int64_t sent, std::int64_t count) {
    const auto& x = r.samples["rtt"];
    auto q = stats::percentiles(x, {50, 99});
    r.metrics = {{"rtt_min", stats::min(x)},
                 {"rtt_avg", stats::mean(x)},
                 {"rtt_p50", q[0]},
                 {"rtt_p99", q[1]},
                 {"rtt_max", stats::max(x)},
                 {"rtt_mdev", stats::mdev(x)},
                 {"loss", sent ? 1 - static_cast<double>(x.size()) / static_cast<double>(sent) : 0},
                 {"sent", static_cast<double>(sent)}};
    if (sent < count)
        r.notes.push_back(fmt::format("sent {} of {} probes: `duration` ended the probe first", sent, count));
}

// --- TCP: connect() timing --------------------------------------------------------------

/// A non-blocking TCP socket, bound to `from` if given, that closes with RST so thousands of
/// probes leave no TIME_WAIT sockets behind.
Fd handshake_socket(const SockAddr& to, const SockAddr* from) {
    Fd fd(::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) sys::fail_errno("opening a TCP socket");
    linger lg{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    if (from && ::bind(fd.get(), from->get(), from->len) != 0) sys::fail_errno("binding the client");
    return fd;
}

/// Whether a connect() the socket reported writable succeeded.
bool connected(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

std::optional<double> tcp_handshake(const SockAddr& to, const SockAddr* from) {
    Fd fd = handshake_socket(to, from);
    auto t0 = Clock::now();
    if (::connect(fd.get(), to.get(), to.len) == 0) return seconds(Clock::now() - t0);
    if (errno != EINPROGRESS) return std::nullopt;
    pollfd p{fd.get(), POLLOUT, 0};
    int n = ::poll(&p, 1, static_cast<int>(kAnswerTimeout.count()));
    auto t1 = Clock::now();
    if (n != 1 || !connected(fd.get())) return std::nullopt;
    return seconds(t1 - t0);
}

/// `plan`'s handshakes from `client` to `to`, paced from this thread.
ProbeResult handshakes(const Plan& plan, const SockAddr& to, const Endpoint& client, const Tick& tick) {
    std::optional<SockAddr> from;
    if (!client.address.empty()) from = sock_addr(client.address, 0);
    NetnsScope in(client.netns);
    auto r = pace(plan, tick, [&](std::int64_t) { return tcp_handshake(to, from ? &*from : nullptr); });
    r.notes.push_back("method tcp: time from connect() to the SYN-ACK (one round trip plus connect's own cost)");
    return r;
}

ProbeResult tcp_rtt(const Plan& plan, const Endpoints& where, const Tick& tick) {
    if (where.server.remote) {
        auto r = handshakes(plan, sock_addr(where.server.address, where.server.port), where.client, tick);
        if (where.server.far) {
            where.server.far->stop();
            r.notes.push_back(fmt::format("server: handshakes with wanlab's listener on the server machine ({})",
                                          host_port(where.server.address, where.server.port)));
        } else {
            r.notes.push_back(fmt::format("remote target: handshakes with {}, a listener wanlab did not start",
                                          host_port(where.server.address, where.server.port)));
        }
        return r;
    }
    Fd listener = listen_tcp(where.server.netns, where.server.address, where.server.port);
    auto to = sock_addr(where.server.address, local_port(listener.get()));
    Workers workers;
    workers.watch(listener.get());
    int lfd = listener.get();
    // The handshake completes in the kernel; this thread only keeps the accept queue empty.
    workers.spawn([lfd, &workers] { accept_until_stopped(lfd, workers, [](Fd, std::uint16_t) {}); });
    return handshakes(plan, to, where.client, tick);
}

/// `count` handshakes from where.client to a listener of this probe's own in where.server, one
/// started every `interval` whether or not the earlier ones were answered, all watched from
/// this thread: each timed from connect() to writable, lost after kAnswerTimeout.
ProbeResult overlapping(std::int64_t count, std::chrono::nanoseconds interval, const Endpoints& where,
                        const Tick& tick) {
    Fd listener = listen_tcp(where.server.netns, where.server.address, where.server.port);
    auto to = sock_addr(where.server.address, local_port(listener.get()));
    Workers workers;
    workers.watch(listener.get());
    int lfd = listener.get();
    // The handshake completes in the kernel; this thread only keeps the accept queue empty.
    workers.spawn([lfd, &workers] { accept_until_stopped(lfd, workers, [](Fd, std::uint16_t) {}); });
    std::optional<SockAddr> from;
    if (!where.client.address.empty()) from = sock_addr(where.client.address, 0);
    NetnsScope in(where.client.netns);

    struct InFlight {
        Fd fd;
        Clock::time_point t0;
        double at;  // its start, in seconds from the first: the series' time
    };
    std::vector<InFlight> flying;
    std::vector<std::pair<double, double>> answered;  // (at, rtt)
    ProbeResult r;
    r.kind = "rtt";
    r.tool = "builtin";
    auto start = Clock::now();
    r.began = start;
    std::int64_t sent = 0;
    while (sent < count || !flying.empty()) {
        if (tick) tick();
        auto now = Clock::now();
        if (sent < count && now >= start + interval * sent) {
            InFlight f{handshake_socket(to, from ? &*from : nullptr), Clock::now(), seconds(now - start)};
            ++sent;
            if (::connect(f.fd.get(), to.get(), to.len) == 0)
                answered.emplace_back(f.at, seconds(Clock::now() - f.t0));
            else if (errno == EINPROGRESS)
                flying.push_back(std::move(f));
            continue;
        }
        // Until the next start, the oldest one's timeout, or 100 ms (the tick), whichever first.
        auto until = now + 100ms;
        if (sent < count) until = std::min(until, start + interval * sent);
        std::vector<pollfd> p;
        for (const auto& f : flying) {
            until = std::min(until, f.t0 + kAnswerTimeout);
            p.push_back({f.fd.get(), POLLOUT, 0});
        }
        int wait = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(until - now).count());
        if (::poll(p.data(), p.size(), std::max(wait, 0)) < 0 && errno != EINTR) sys::fail_errno("poll");
        auto t1 = Clock::now();
        std::vector<InFlight> still;
        for (std::size_t i = 0; i < flying.size(); ++i) {
            if (p[i].revents) {
                if (connected(flying[i].fd.get())) answered.emplace_back(flying[i].at, seconds(t1 - flying[i].t0));
            } else if (t1 < flying[i].t0 + kAnswerTimeout) {
                still.push_back(std::move(flying[i]));
            }
        }
        flying = std::move(still);
    }
    std::sort(answered.begin(), answered.end());
    for (auto [at, rtt] : answered) {
        r.samples["rtt"].push_back(rtt);
        r.series["rtt"].add(at, rtt);
    }
    summarize(r, sent, count);
    r.notes.push_back(
        fmt::format("method tcp: {} handshakes, one started every {:g} ms while earlier ones were in flight", count,
                    std::chrono::duration<double, std::milli>(interval).count()));
    return r;
}

// --- UDP echo ---------------------------------------------------------------------------

void udp_echo_server(int fd, const Workers& workers) {
    std::vector<char> buf(65536);
    while (!workers.stopping()) {
        SockAddr peer;
        peer.len = sizeof peer.storage;
        ssize_t n = ::recvfrom(fd, buf.data(), buf.size(), 0, peer.get(), &peer.len);
        if (n > 0) ::sendto(fd, buf.data(), static_cast<std::size_t>(n), 0, peer.get(), peer.len);
    }
}

/// Waits for the answer whose first 8 bytes are `seq`; skips late answers to older probes.
std::optional<double> await_echo(int fd, std::uint64_t seq, std::size_t header, const timespec& sent) {
    auto deadline = Clock::now() + kAnswerTimeout;
    std::vector<char> buf(65536);
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, remaining_ms(deadline)) != 1) return std::nullopt;
        timespec t1;
        ssize_t n = recv_stamped(fd, buf.data(), buf.size(), t1);
        if (n < static_cast<ssize_t>(header + sizeof seq)) continue;
        std::uint64_t got;
        std::memcpy(&got, buf.data() + header, sizeof got);
        if (got == seq) return seconds_between(sent, t1);
    }
}

/// A UDP socket in `at`'s namespace bound to its address and port, for the echo server.
Fd echo_socket(const Endpoint& at) {
    auto a = sock_addr(at.address, at.port);
    Fd server = socket_in(at.netns, a.family(), SOCK_DGRAM);
    if (::bind(server.get(), a.get(), a.len) != 0) sys::fail_errno("binding the UDP echo server to " + at.address);
    set_timeouts(server.get(), 100ms);
    return server;
}

ProbeResult udp_rtt(const Plan& plan, const Endpoints& where, const Tick& tick) {
    const auto& far = where.server.far;  // the echo server on another machine, or this probe's own
    Fd server;
    if (!far) server = echo_socket(where.server);
    auto to = sock_addr(where.server.address, far ? where.server.port : local_port(server.get()));
    Fd client = socket_in(where.client.netns, to.family(), SOCK_DGRAM);
    if (!where.client.address.empty()) bind_to(client.get(), to.family(), where.client.address, 0, "the client");
    if (::connect(client.get(), to.get(), to.len) != 0) sys::fail_errno("connecting the UDP client");
    set_int(client.get(), SOL_SOCKET, SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS");
    Workers workers;
    if (!far) {
        workers.watch(server.get());
        int sfd = server.get();
        workers.spawn([sfd, &workers] { udp_echo_server(sfd, workers); });
    }
    std::vector<char> payload(std::max<std::size_t>(plan.size, 8), 'u');
    auto r = pace(plan, tick, [&](std::int64_t i) -> std::optional<double> {
        auto seq = static_cast<std::uint64_t>(i);
        std::memcpy(payload.data(), &seq, sizeof seq);
        auto t0 = realtime_now();
        if (::send(client.get(), payload.data(), payload.size(), 0) < 0) return std::nullopt;
        return await_echo(client.get(), seq, 0, t0);
    });
    r.notes.push_back(fmt::format("method udp: {}-byte datagrams to wanlab's echo server{}", payload.size(),
                                  far ? " on the server machine" : ""));
    if (far) far->stop();
    return r;
}

/// The far half (serve_far()): a TCP listener whose accept queue a thread keeps empty (the
/// handshake completes in the kernel), or the UDP echo server.
class RttServer final : public FarServer {
public:
    RttServer(const ProbeSpec& spec, const Endpoint& at) {
        auto tool = spec.options.find("tool");
        bool builtin = tool == spec.options.end() || std::get<std::string>(tool->second) == "builtin";
        if (builtin && option_string(spec, "method") == "udp") {  // hping3 always sends TCP
            fd_ = echo_socket(at);
            int fd = fd_.get();
            workers_.watch(fd);
            workers_.spawn([fd, this] { udp_echo_server(fd, workers_); });
        } else {
            fd_ = listen_tcp(at.netns, at.address, at.port);
            int fd = fd_.get();
            workers_.spawn([fd, this] { accept_until_stopped(fd, workers_, [](Fd, std::uint16_t) {}); });
        }
        port_ = local_port(fd_.get());
    }
    std::uint16_t port() const override { return port_; }
    FarReport stop() override {
        workers_.stop();
        workers_.join();
        return {};
    }

private:
    Fd fd_;
    std::uint16_t port_ = 0;
    Workers workers_;  // last: joined before the socket closes
};

// --- ICMP echo --------------------------------------------------------------------------

std::uint16_t checksum(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i + 1 < n; i += 2) sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (n % 2) sum += static_cast<std::uint32_t>(p[n - 1] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return htons(static_cast<std::uint16_t>(~sum));
}

struct IcmpSocket {
    Fd fd;
    bool raw = false;
};

// The ping socket needs net.ipv4.ping_group_range to include our group in that namespace
// (new namespaces start with "1 0", nobody; the range governs ICMPv6 ping sockets too); a raw
// socket needs CAP_NET_RAW. The kernel computes ICMPv6 checksums itself (RFC 3542 3.1).
IcmpSocket open_icmp(const std::string& netns, int family) {
    NetnsScope in(netns);
    const int protocol = family == AF_INET6 ? static_cast<int>(IPPROTO_ICMPV6) : static_cast<int>(IPPROTO_ICMP);
    Fd fd(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, protocol));
    if (fd) return {std::move(fd), false};
    int ping_errno = errno;
    fd = Fd(::socket(family, SOCK_RAW | SOCK_CLOEXEC, protocol));
    if (fd) return {std::move(fd), true};
    throw Error(
        fmt::format("opening an ICMP socket: the ping socket says \"{}\" (net.ipv4.ping_group_range), the raw "
                    "socket \"{}\" (needs CAP_NET_RAW)",
                    std::strerror(ping_errno), std::strerror(errno)));
}

/// Waits for the echo reply carrying `seq`. A raw socket also delivers other programs' replies
/// and (on loopback) our own requests, so it checks type and identifier; an IPv4 raw socket
/// also delivers the IP header (an IPv6 one does not).
std::optional<double> await_icmp_reply(int fd, int family, bool raw, std::uint16_t id, std::uint64_t seq,
                                       const timespec& sent) {
    const bool v6 = family == AF_INET6;
    const std::uint8_t reply = v6 ? ICMP6_ECHO_REPLY : ICMP_ECHOREPLY;
    auto deadline = Clock::now() + kAnswerTimeout;
    std::vector<std::uint8_t> buf(65536);
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, remaining_ms(deadline)) != 1) return std::nullopt;
        timespec t1;
        ssize_t n = recv_stamped(fd, buf.data(), buf.size(), t1);
        std::size_t at = raw && !v6 && n > 0 ? (buf[0] & 0x0fu) * 4u : 0;
        if (n < static_cast<ssize_t>(at + sizeof(icmphdr) + sizeof seq)) continue;
        icmphdr h;  // type, code, checksum, identifier, sequence: ICMPv6's echo has the same layout
        std::memcpy(&h, buf.data() + at, sizeof h);
        if (h.type != reply || (raw && ntohs(h.un.echo.id) != id)) continue;
        std::uint64_t got;
        std::memcpy(&got, buf.data() + at + sizeof h, sizeof got);
        if (got == seq) return seconds_between(sent, t1);
    }
}

ProbeResult icmp_rtt(const Plan& plan, const Endpoints& where, const Tick& tick) {
    auto to = sock_addr(where.server.address, 0);
    const bool v6 = to.family() == AF_INET6;
    auto sock = open_icmp(where.client.netns, to.family());
    int fd = sock.fd.get();
    set_int(fd, SOL_SOCKET, SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS");
    if (!where.client.address.empty()) bind_to(fd, to.family(), where.client.address, 0, "the ICMP socket");
    // The ping socket replaces the identifier with its own port; a raw socket sees every
    // echo reply in the namespace, so it needs one of its own.
    auto id = static_cast<std::uint16_t>(::getpid() ^ reinterpret_cast<std::uintptr_t>(&sock));
    std::vector<char> packet(sizeof(icmphdr) + std::max<std::size_t>(plan.size, 8), 'i');
    auto r = pace(plan, tick, [&](std::int64_t i) -> std::optional<double> {
        icmphdr h{};
        h.type = v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO;
        h.un.echo.id = htons(id);
        h.un.echo.sequence = htons(static_cast<std::uint16_t>(i));
        auto seq = static_cast<std::uint64_t>(i);
        std::memcpy(packet.data(), &h, sizeof h);
        std::memcpy(packet.data() + sizeof h, &seq, sizeof seq);
        if (!v6) {  // the kernel sums ICMPv6 over its pseudo-header itself
            h.checksum = checksum(packet.data(), packet.size());
            std::memcpy(packet.data(), &h, sizeof h);
        }
        auto t0 = realtime_now();
        if (::sendto(fd, packet.data(), packet.size(), 0, to.get(), to.len) < 0) return std::nullopt;
        return await_icmp_reply(fd, to.family(), sock.raw, id, seq, t0);
    });
    r.notes.push_back(sock.raw ? "method icmp: raw socket (ping socket not permitted by net.ipv4.ping_group_range)"
                               : "method icmp: unprivileged ping socket");
    return r;
}

}  // namespace

ProbeResult overlapping_handshakes(std::int64_t count, std::chrono::nanoseconds interval, const Endpoints& where,
                                   const Tick& tick) {
    if (where.server.remote) throw Error("overlapping handshakes need a lab host to listen on, not a remote server");
    return overlapping(count, interval, where, tick);
}

std::unique_ptr<FarServer> serve_rtt(const ProbeSpec& spec, const Endpoint& at) {
    return std::make_unique<RttServer>(spec, at);
}

ProbeResult run_rtt(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    Plan plan{option_int(spec, "count"), std::chrono::nanoseconds(option_int(spec, "interval")),
              std::chrono::nanoseconds(option_int(spec, "duration")),
              static_cast<std::size_t>(option_int(spec, "size"))};
    auto method = option_string(spec, "method");
    check_remote(spec, where.server);
    if (plan.size > 65000) throw InputError("rtt probe: `size` must be at most 65000 bytes");
    if (method == "tcp") return tcp_rtt(plan, where, tick);
    if (method == "udp") return udp_rtt(plan, where, tick);
    return icmp_rtt(plan, where, tick);
}

}  // namespace wanlab::probes
