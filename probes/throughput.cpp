// The built-in throughput probe: N TCP bulk streams, goodput and each stream's TCP_INFO per
// interval, and each connection's TCP_INFO at the end of the measurement. See docs/probes.md.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/units.h"
#include "probes/probe.h"
#include "probes/sys.h"
#include "probes/tcp_info.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

// Big enough that one send()/recv() moves many segments; iperf3 uses 128 KiB.
constexpr std::size_t kBufferBytes = 256 * 1024;
constexpr auto kSetupTimeout = 5000ms;
constexpr auto kIoTimeout = 500ms;

struct alignas(64) Counter {
    std::atomic<std::uint64_t> bytes{0};
};

struct Tuning {
    std::int64_t sndbuf = 0, rcvbuf = 0;
    std::string congestion_control;
};

struct Stream {
    std::string direction;  // "upload": the client sends
    Fd client, server;
    Counter received;
    int sender() const { return direction == "upload" ? client.get() : server.get(); }
    int receiver() const { return direction == "upload" ? server.get() : client.get(); }
};

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

int as_int(std::int64_t bytes) { return static_cast<int>(std::min<std::int64_t>(bytes, INT_MAX / 2)); }

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

void tune(int fd, const Tuning& t) {
    if (t.sndbuf > 0) set_int(fd, SOL_SOCKET, SO_SNDBUF, as_int(t.sndbuf), "SO_SNDBUF");
    if (t.rcvbuf > 0) set_int(fd, SOL_SOCKET, SO_RCVBUF, as_int(t.rcvbuf), "SO_RCVBUF");
    if (!t.congestion_control.empty()) set_congestion_control(fd, t.congestion_control);
}

// Accepts until the connection from `client_port` arrives (a stray connection is closed).
Fd accept_peer(int listener, std::uint16_t client_port) {
    for (int tries = 0; tries < 64; ++tries) {
        Fd fd = accept_within(listener, kSetupTimeout);
        sockaddr_in peer{};
        socklen_t len = sizeof peer;
        if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
            ntohs(peer.sin_port) == client_port)
            return fd;
    }
    throw Error("the throughput server kept accepting connections that were not the probe's");
}

void send_loop(int fd, const std::atomic<bool>& done) {
    std::vector<char> buf(kBufferBytes, 'w');
    while (!done.load(std::memory_order_relaxed)) {
        ssize_t n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;  // EAGAIN: SO_SNDTIMEO, look at `done`
        if (n <= 0) break;  // the connection is gone (or the probe is being aborted)
    }
    ::shutdown(fd, SHUT_WR);
}

// After the measuring window the receiver reads on to the sender's end of stream, but for at
// most this long: what is still queued (up to the buffers plus netem's queue, 64 MiB and more
// through a slow path) counts for nothing, and draining it took minutes in the micro-VM.
// Closing with unread data resets the connection, which is all that is left to do.
constexpr auto kDrainAfterDone = std::chrono::seconds(1);

void receive_loop(int fd, Counter& counter, const std::atomic<bool>& done) {
    std::vector<char> buf(kBufferBytes);
    int idle_after_done = 0;
    std::optional<Clock::time_point> stop_by;
    for (;;) {
        if (done.load(std::memory_order_relaxed)) {
            if (!stop_by)
                stop_by = Clock::now() + kDrainAfterDone;
            else if (Clock::now() >= *stop_by)
                return;
        }
        ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n > 0) {
            counter.bytes.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
            continue;
        }
        if (n == 0) return;
        if (errno == EINTR) continue;
        if (errno == EAGAIN && (!done.load() || ++idle_after_done < 4)) continue;
        return;
    }
}

std::string buffer_note(const char* option, std::int64_t asked, int granted, const char* max_sysctl) {
    std::string max_text = read_first_line(std::string("/proc/sys/net/core/") + max_sysctl);
    std::string note = fmt::format("{}: asked {}, granted {} (the kernel doubles the request for its bookkeeping",
                                   option, units::format_size(static_cast<std::uint64_t>(asked)),
                                   units::format_size(static_cast<std::uint64_t>(granted)));
    if (!max_text.empty()) {
        auto cap = 2 * std::stoll(max_text);
        note += fmt::format(" and caps it at 2 x net.core.{} = {}", max_sysctl,
                            units::format_size(static_cast<std::uint64_t>(cap)));
        if (granted >= cap && asked * 2 > cap) note += "; CLAMPED";
    }
    return note + ")";
}

std::vector<std::unique_ptr<Stream>> open_streams(const ProbeSpec& spec, const Endpoints& where, int listener,
                                                  std::uint16_t port, const Tuning& tuning) {
    auto n = option_int(spec, "streams");
    auto direction = option_string(spec, "direction");
    std::vector<std::string> directions;
    for (const char* d : {"upload", "download"})
        if (direction == d || direction == "both")
            for (std::int64_t i = 0; i < n; ++i) directions.emplace_back(d);
    std::vector<std::unique_ptr<Stream>> streams;
    for (const auto& d : directions) {
        auto s = std::make_unique<Stream>();
        s->direction = d;
        s->client = connect_tcp(where.client.netns, where.server.address, port, kSetupTimeout, [&](int fd) {
            tune(fd, tuning);
            if (!where.client.address.empty()) {
                auto a = ipv4(where.client.address, 0);
                if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
                    sys::fail_errno("binding the client to " + where.client.address);
            }
        });
        s->server = accept_peer(listener, local_port(s->client.get()));
        if (!tuning.congestion_control.empty()) set_congestion_control(s->server.get(), tuning.congestion_control);
        set_timeouts(s->client.get(), kIoTimeout);
        set_timeouts(s->server.get(), kIoTimeout);
        streams.push_back(std::move(s));
    }
    return streams;
}

double sum_bytes(const std::vector<std::unique_ptr<Stream>>& streams, const char* direction) {
    double sum = 0;
    for (const auto& s : streams)
        if (!direction || s->direction == direction) sum += static_cast<double>(s->received.bytes.load());
    return sum;
}

/// The probe's metrics from its connections' values and the byte counts.
void summarize(ProbeResult& r, const Tuning& tuning, double total, double up, double down, double elapsed) {
    auto& m = r.metrics;
    m["throughput"] = total * 8 / elapsed;
    m["throughput_upload"] = up * 8 / elapsed;
    m["throughput_download"] = down * 8 / elapsed;
    double busy = 0, rwnd = 0, sndbuf = 0, n = static_cast<double>(r.connections.size());
    m["rcvbuf_granted"] = m["sndbuf_granted"] = static_cast<double>(INT_MAX);
    for (const auto& c : r.connections) {
        const auto& v = c.values;
        m["retransmits"] += v.at("retransmits");
        m["rtt"] += v.at("rtt") / n;
        m["cwnd"] += v.at("cwnd") / n;
        if (v.count("delivery_rate")) m["delivery_rate"] += v.at("delivery_rate");
        if (v.count("busy_time")) {
            busy += v.at("busy_time"), rwnd += v.at("rwnd_limited_time"), sndbuf += v.at("sndbuf_limited_time");
        }
        m["rcvbuf_granted"] = std::min(m["rcvbuf_granted"], v.at("rcvbuf_granted"));
        m["sndbuf_granted"] = std::min(m["sndbuf_granted"], v.at("sndbuf_granted"));
    }
    m["rwnd_limited"] = busy > 0 ? rwnd / busy : 0;
    m["sndbuf_limited"] = busy > 0 ? sndbuf / busy : 0;
    if (tuning.rcvbuf > 0)
        r.notes.push_back(buffer_note("rcvbuf", tuning.rcvbuf, static_cast<int>(m["rcvbuf_granted"]), "rmem_max"));
    if (tuning.sndbuf > 0)
        r.notes.push_back(buffer_note("sndbuf", tuning.sndbuf, static_cast<int>(m["sndbuf_granted"]), "wmem_max"));
    if (tuning.rcvbuf == 0)
        r.notes.push_back(std::string(kRcvbufAutotuned) + "; rcvbuf_granted is its size at the end");
    if (tuning.sndbuf == 0)
        r.notes.push_back(std::string(kSndbufAutotuned) + "; sndbuf_granted is its size at the end");
}

}  // namespace

ProbeResult run_throughput(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    Tuning tuning{option_int(spec, "sndbuf"), option_int(spec, "rcvbuf"), option_string(spec, "congestion_control")};
    auto duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    auto interval = std::chrono::nanoseconds(std::max<std::int64_t>(option_int(spec, "interval"), 10'000'000));
    bool both = option_string(spec, "direction") == "both";
    check_remote(spec, where.server);

    Fd listener =
        listen_tcp(where.server.netns, where.server.address, where.server.port, [&](int fd) { tune(fd, tuning); });
    auto streams = open_streams(spec, where, listener.get(), local_port(listener.get()), tuning);

    ProbeResult r;
    r.kind = "throughput";
    r.tool = "builtin";
    std::atomic<bool> done{false};
    Workers workers;  // after the streams: joined before their sockets close
    for (auto& s : streams) {
        workers.watch(s->client.get());
        workers.watch(s->server.get());
        Stream* st = s.get();
        workers.spawn([st, &done] { send_loop(st->sender(), done); });
        workers.spawn([st, &done] { receive_loop(st->receiver(), st->received, done); });
    }
    auto check = [&] {
        if (tick) tick();
        if (workers.stopping()) {
            workers.join();  // rethrows a worker's failure
            throw Error("the throughput probe's threads stopped early");
        }
    };
    auto start = Clock::now(), end = start + duration, last = start;
    double last_total = 0, last_up = 0, last_down = 0;
    TcpSampler tcp;
    while (last < end) {
        sleep_until(std::min(last + interval, end), check);
        auto now = Clock::now();
        double total = sum_bytes(streams, nullptr), up = sum_bytes(streams, "upload"),
               down = sum_bytes(streams, "download");
        double dt = seconds(now - last), at = seconds(now - start);
        r.series["throughput"].add(at, (total - last_total) * 8 / dt);
        if (both) {
            r.series["throughput_upload"].add(at, (up - last_up) * 8 / dt);
            r.series["throughput_download"].add(at, (down - last_down) * 8 / dt);
        }
        for (std::size_t i = 0; i < streams.size(); ++i)
            tcp.sample(at, static_cast<int>(i + 1), streams[i]->sender(), streams[i]->receiver(), r.series);
        last_total = total, last_up = up, last_down = down, last = now;
    }
    double elapsed = seconds(last - start);
    for (const auto& s : streams) {
        ConnectionStats c;
        c.direction = s->direction;
        c.values = tcp_info(s->sender());
        c.congestion_control = congestion_control_of(s->sender());
        c.values["sndbuf_granted"] = get_int(s->sender(), SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF");
        c.values["rcvbuf_granted"] = get_int(s->receiver(), SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF");
        c.values["bytes"] = static_cast<double>(s->received.bytes.load());
        c.values["throughput"] = c.values["bytes"] * 8 / elapsed;
        r.connections.push_back(std::move(c));
    }
    done.store(true);
    workers.join();

    summarize(r, tuning, last_total, last_up, last_down, elapsed);
    return r;
}

}  // namespace wanlab::probes
