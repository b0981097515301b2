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
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/units.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/tcp_info.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

// Big enough that one send()/recv() moves many segments; iperf3 uses 128 KiB.
constexpr std::size_t kBufferBytes = 256 * 1024;
// The receiver's watermark (receive_watermark()): at most this many bytes, and at most this
// long's worth of data at the rate arriving.
constexpr int kMaxWatermark = 128 * 1024;
constexpr auto kWatermarkLag = 1ms;
constexpr auto kSetupTimeout = 5000ms;
constexpr auto kIoTimeout = 500ms;

struct alignas(64) Counter {
    std::atomic<std::uint64_t> bytes{0};
};

// A stream's first byte, from the client, tells a far server which way it runs; a download
// stream's second byte, sent once every stream is open, starts the server's sending (as the
// probe's own sender starts then).
constexpr char kUploadByte = 'U', kDownloadByte = 'D', kGoByte = 'G';

struct Stream {
    std::string direction;  // "upload": the client sends
    Fd client, server;      // no server when it runs on another machine (FarServer)
    Counter received;
    int sender() const { return direction == "upload" ? client.get() : server.get(); }
    int receiver() const { return direction == "upload" ? server.get() : client.get(); }
    /// The bytes the receiver has: counted as it reads them, or, when it is on another
    /// machine, what the client's TCP_INFO says the far end acknowledged (less the
    /// direction byte).
    double bytes() const {
        if (receiver() >= 0) return static_cast<double>(received.bytes.load());
        try {
            auto acked = tcp_info(client.get());
            auto it = acked.find("bytes_acked");
            return it != acked.end() ? std::max(0.0, it->second - 1) : 0;
        } catch (const Error&) {
            return 0;
        }
    }
};

// Accepts until the connection from `client_port` arrives (a stray connection is closed).
Fd accept_peer(int listener, std::uint16_t client_port) {
    for (int tries = 0; tries < 64; ++tries) {
        Fd fd = accept_within(listener, kSetupTimeout);
        SockAddr peer;
        peer.len = sizeof peer.storage;
        if (::getpeername(fd.get(), peer.get(), &peer.len) == 0 && peer.port() == client_port) return fd;
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
// Closing with unread data resets the connection, which is all that is left to do. (It was
// 1 s: every repeat ended that much later for bytes that count for nothing.)
constexpr auto kDrainAfterDone = std::chrono::milliseconds(200);

// How often the receiver re-estimates the arrival rate that sets its watermark.
constexpr auto kRateWindow = 10ms;

/// The receiving socket's SO_RCVLOWAT, following the arrival rate (see receive_watermark()).
class Watermark {
public:
    explicit Watermark(int fd) : fd_(fd), since_(Clock::now()) {}

    void received(std::size_t n) {
        bytes_ += n;
        auto now = Clock::now();
        if (now - since_ < kRateWindow) return;
        int rcvbuf = 0;
        socklen_t len = sizeof rcvbuf;
        if (::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) == 0)
            set(receive_watermark(static_cast<double>(bytes_) / seconds(now - since_), rcvbuf));
        bytes_ = 0;
        since_ = now;
    }
    /// Back to the kernel's default, one byte: the drain after the window reads what comes.
    void reset() { set(1); }

private:
    // A kernel that refuses (before Linux 4.18 TCP had no SO_RCVLOWAT) keeps waking on every
    // segment, which costs speed, not correctness: nothing to report.
    void set(int bytes) {
        if (bytes != current_ && ::setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes) == 0)
            current_ = bytes;
    }

    int fd_;
    int current_ = 1;
    std::uint64_t bytes_ = 0;
    Clock::time_point since_;
};

void receive_loop(int fd, Counter& counter, const std::atomic<bool>& done) {
    std::vector<char> buf(kBufferBytes);
    Watermark watermark(fd);
    int idle_after_done = 0;
    std::optional<Clock::time_point> stop_by;
    for (;;) {
        if (done.load(std::memory_order_relaxed)) {
            if (!stop_by) {
                stop_by = Clock::now() + kDrainAfterDone;
                watermark.reset();
            } else if (Clock::now() >= *stop_by) {
                return;
            }
        }
        ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n > 0) {
            counter.bytes.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
            if (!stop_by) watermark.received(static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0) return;
        if (errno == EINTR) continue;
        if (errno == EAGAIN && (!done.load() || ++idle_after_done < 4)) continue;
        return;
    }
}

// `max_text`: the value of net.core.MAX_SYSCTL where the socket is ("" if unknown).
std::string buffer_note(const char* option, std::int64_t asked, int granted, const char* max_sysctl,
                        const std::string& max_text) {
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

// `listener`: this probe's own server, or -1 when a far server listens at the port.
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
            if (!where.client.address.empty())
                bind_to(fd, family_of(where.server.address), where.client.address, 0, "the client");
        });
        if (listener >= 0) {
            s->server = accept_peer(listener, local_port(s->client.get()));
            if (!tuning.congestion_control.empty()) set_congestion_control(s->server.get(), tuning.congestion_control);
            set_timeouts(s->server.get(), kIoTimeout);
        } else {
            char way = d == "upload" ? kUploadByte : kDownloadByte;
            if (!send_all(s->client.get(), &way, 1))
                throw Error(
                    fmt::format("the probe server at {} closed the stream", host_port(where.server.address, port)));
        }
        set_timeouts(s->client.get(), kIoTimeout);
        streams.push_back(std::move(s));
    }
    return streams;
}

double sum_bytes(const std::vector<std::unique_ptr<Stream>>& streams, const char* direction) {
    double sum = 0;
    for (const auto& s : streams)
        if (!direction || s->direction == direction) sum += s->bytes();
    return sum;
}

/// The caps on the sockets' buffers, net.core.rmem_max and wmem_max, as "" when unknown.
struct BufferCaps {
    std::string rmem_max, wmem_max;
};

/// The probe's metrics from its connections' values and the byte counts.
void summarize(ProbeResult& r, const Tuning& tuning, const BufferCaps& caps, double total, double up, double down,
               double elapsed) {
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
        r.notes.push_back(
            buffer_note("rcvbuf", tuning.rcvbuf, static_cast<int>(m["rcvbuf_granted"]), "rmem_max", caps.rmem_max));
    if (tuning.sndbuf > 0)
        r.notes.push_back(
            buffer_note("sndbuf", tuning.sndbuf, static_cast<int>(m["sndbuf_granted"]), "wmem_max", caps.wmem_max));
    if (tuning.rcvbuf == 0)
        r.notes.push_back(std::string(kRcvbufAutotuned) + "; rcvbuf_granted is its size at the end");
    if (tuning.sndbuf == 0)
        r.notes.push_back(std::string(kSndbufAutotuned) + "; sndbuf_granted is its size at the end");
}

/// The caps where `fd`'s buffers are: this machine's.
BufferCaps local_caps() {
    return {read_first_line("/proc/sys/net/core/rmem_max"), read_first_line("/proc/sys/net/core/wmem_max")};
}

/// The smaller of two caps ("" counts as unknown).
std::string smaller(const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) return a.empty() ? b : a;
    try {
        return std::stoll(a) <= std::stoll(b) ? a : b;
    } catch (const std::exception&) {
        return a;
    }
}

/// The server half on another machine (serve_far()): accepts the client's streams, each
/// learning its direction from its first byte, and sinks or sources them until stopped;
/// samples its sending sockets' TCP_INFO (and its receiving ones' rcv_space) every interval.
class ThroughputServer final : public FarServer {
public:
    ThroughputServer(const ProbeSpec& spec, const Endpoint& at)
        : tuning_{option_int(spec, "sndbuf"), option_int(spec, "rcvbuf"), option_string(spec, "congestion_control")},
          interval_(std::max<std::int64_t>(option_int(spec, "interval"), 10'000'000)) {
        listener_ = listen_tcp(at.netns, at.address, at.port, [&](int fd) { tune(fd, tuning_); });
        port_ = local_port(listener_.get());
        acceptor_.spawn([this] { accept_loop(); });
        acceptor_.spawn([this] { sample_loop(); });
    }
    ~ThroughputServer() override {
        try {
            stop();
        } catch (...) {
            // the destructor of a server whose owner did not ask what it saw
        }
    }
    std::uint16_t port() const override { return port_; }

    FarReport stop() override {
        if (report_) return *report_;
        FarReport r;
        acceptor_.stop();
        acceptor_.join();  // no more streams, no more samples
        for (const auto& c : conns_) {
            if (!c->way.load()) continue;  // never said which way: not a stream of the probe's
            int fd = c->fd.get();
            ConnectionStats s;
            s.direction = c->way == kDownloadByte ? "download" : "upload";
            try {
                s.values = tcp_info(fd);
            } catch (const Error&) {
                continue;  // gone: the client finds it missing
            }
            s.congestion_control = congestion_control_of(fd);
            s.values["sndbuf_granted"] = get_int(fd, SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF");
            s.values["rcvbuf_granted"] = get_int(fd, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF");
            s.values["bytes"] = static_cast<double>(c->received.bytes.load());
            r.connections[c->peer_port] = std::move(s);
        }
        auto caps = local_caps();
        r.sysctls = {{"net.core.rmem_max", caps.rmem_max}, {"net.core.wmem_max", caps.wmem_max}};
        // Times from the last accept, the moment the client starts its clock.
        double zero = seconds(last_accept_.load().time_since_epoch());
        for (auto& [name, series] : series_) {
            Series shifted;
            for (std::size_t i = 0; i < series.size(); ++i)
                if (series.t[i] >= zero) shifted.add(series.t[i] - zero, series.value[i]);
            if (shifted.size()) r.series[name] = std::move(shifted);
        }
        done_.store(true);
        serving_.stop();
        serving_.join();
        report_ = std::move(r);
        return *report_;
    }

private:
    struct Conn {
        Fd fd;
        std::uint16_t peer_port = 0;
        std::atomic<char> way{0};
        Counter received;
    };

    void accept_loop() {
        accept_until_stopped(listener_.get(), acceptor_, [this](Fd fd, std::uint16_t peer_port) {
            if (!tuning_.congestion_control.empty()) set_congestion_control(fd.get(), tuning_.congestion_control);
            set_timeouts(fd.get(), kIoTimeout);
            auto c = std::make_unique<Conn>();
            c->fd = std::move(fd);
            c->peer_port = peer_port;
            Conn* conn = c.get();
            {
                std::lock_guard<std::mutex> lock(mutex_);
                conns_.push_back(std::move(c));
            }
            last_accept_ = Clock::now();
            serving_.watch(conn->fd.get());
            serving_.spawn([this, conn] { serve(*conn); });
        });
    }

    /// One byte from the client, waiting as long as the server runs; 0 when none comes.
    char read_byte(int fd) {
        char b = 0;
        for (;;) {
            ssize_t n = ::recv(fd, &b, 1, 0);
            if (n == 1) return b;
            if (n < 0 && (errno == EINTR || errno == EAGAIN) && !done_.load()) continue;
            return 0;
        }
    }

    void serve(Conn& c) {
        char way = read_byte(c.fd.get());
        if (way == kUploadByte) {
            c.way.store(way);
            receive_loop(c.fd.get(), c.received, done_);
        } else if (way == kDownloadByte && read_byte(c.fd.get()) == kGoByte) {
            c.way.store(way);
            send_loop(c.fd.get(), done_);
        }
    }

    void sample_loop() {
        TcpSampler tcp;
        while (!acceptor_.stopping()) {
            for (auto next = Clock::now() + interval_; Clock::now() < next && !acceptor_.stopping();)
                std::this_thread::sleep_for(std::min<Clock::duration>(next - Clock::now(), 10ms));
            if (acceptor_.stopping()) return;
            std::lock_guard<std::mutex> lock(mutex_);
            double at = seconds(Clock::now().time_since_epoch());
            for (const auto& c : conns_) {
                char way = c->way.load();
                if (!way) continue;
                int fd = c->fd.get();
                tcp.sample(at, c->peer_port, way == kDownloadByte ? fd : -1, way == kUploadByte ? fd : -1, series_);
            }
        }
    }

    Tuning tuning_;
    std::chrono::nanoseconds interval_;
    Fd listener_;
    std::uint16_t port_ = 0;
    std::mutex mutex_;  // conns_ (the acceptor adds, the sampler reads)
    std::vector<std::unique_ptr<Conn>> conns_;
    SeriesMap series_;  // the sampler's, times since the clock's epoch
    std::atomic<Clock::time_point> last_accept_{Clock::time_point{}};
    std::atomic<bool> done_{false};
    std::optional<FarReport> report_;
    Workers serving_;   // a thread per stream, spawned by the acceptor: joined before conns_ close
    Workers acceptor_;  // last: the acceptor and the sampler, joined first
};

}  // namespace

int receive_watermark(double bytes_per_second, std::int64_t rcvbuf) {
    double cap = std::min<double>({static_cast<double>(kMaxWatermark), static_cast<double>(rcvbuf) / 8,
                                   bytes_per_second * std::chrono::duration<double>(kWatermarkLag).count()});
    int bytes = 1;
    while (bytes <= cap / 2) bytes *= 2;  // the power of two at or below the cap: no setsockopt per jitter
    return bytes;
}

std::unique_ptr<FarServer> serve_throughput(const ProbeSpec& spec, const Endpoint& at) {
    return std::make_unique<ThroughputServer>(spec, at);
}

ProbeResult run_throughput(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    Tuning tuning{option_int(spec, "sndbuf"), option_int(spec, "rcvbuf"), option_string(spec, "congestion_control")};
    auto duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    auto interval = std::chrono::nanoseconds(std::max<std::int64_t>(option_int(spec, "interval"), 10'000'000));
    auto direction = option_string(spec, "direction");
    bool both = direction == "both";
    check_remote(spec, where.server);
    const auto& far = where.server.far;

    Fd listener;  // none when the server is a far one
    std::uint16_t port = where.server.port;
    if (!far) {
        listener =
            listen_tcp(where.server.netns, where.server.address, where.server.port, [&](int fd) { tune(fd, tuning); });
        port = local_port(listener.get());
    }
    auto streams = open_streams(spec, where, listener.get(), port, tuning);
    if (far)
        for (const auto& s : streams)
            if (s->direction == "download" && !send_all(s->client.get(), &kGoByte, 1))
                throw Error(
                    fmt::format("the probe server at {} closed a stream", host_port(where.server.address, port)));

    ProbeResult r;
    r.kind = "throughput";
    r.tool = "builtin";
    std::atomic<bool> done{false};
    Workers workers;  // after the streams: joined before their sockets close
    for (auto& s : streams) {
        workers.watch(s->client.get());
        if (s->server) workers.watch(s->server.get());
        Stream* st = s.get();
        if (st->sender() >= 0) workers.spawn([st, &done] { send_loop(st->sender(), done); });
        if (st->receiver() >= 0) workers.spawn([st, &done] { receive_loop(st->receiver(), st->received, done); });
    }
    auto check = [&] {
        if (tick) tick();
        if (workers.stopping()) {
            workers.join();  // rethrows a worker's failure
            throw Error("the throughput probe's threads stopped early");
        }
    };
    auto start = Clock::now(), end = start + duration, last = start;
    r.began = start;
    double last_total = 0, last_up = 0, last_down = 0;
    TcpSampler tcp;
    while (last < end) {
        // A last window shorter than half an interval joins the one before: a few bytes over
        // a millisecond would read as a rate the link never had.
        auto next = last + interval;
        if (end - next < interval / 2) next = end;
        sleep_until(std::min(next, end), check);
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
    // This machine's sockets first, then what the far server saw of its own at that moment.
    for (const auto& s : streams) {
        ConnectionStats c;
        c.direction = s->direction;
        if (s->sender() >= 0) {
            c.values = tcp_info(s->sender());
            c.congestion_control = congestion_control_of(s->sender());
            c.values["sndbuf_granted"] = get_int(s->sender(), SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF");
        }
        if (s->receiver() >= 0) c.values["rcvbuf_granted"] = get_int(s->receiver(), SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF");
        c.values["bytes"] = s->bytes();
        c.values["throughput"] = c.values["bytes"] * 8 / elapsed;
        r.connections.push_back(std::move(c));
    }
    BufferCaps caps = local_caps();
    if (far) {
        auto report = far->stop();
        for (std::size_t i = 0; i < streams.size(); ++i) {
            const auto& s = *streams[i];
            auto client_port = local_port(s.client.get());
            auto it = report.connections.find(client_port);
            if (it == report.connections.end())
                throw Error(fmt::format("the probe server at {} did not see stream {} (client port {})",
                                        host_port(where.server.address, port), i + 1, client_port));
            auto& c = r.connections[i];
            const auto& theirs = it->second.values;
            if (s.sender() < 0) {  // the server sent: its socket's view
                for (const auto& [k, v] : theirs)
                    if (k != "rcvbuf_granted" && k != "bytes") c.values[k] = v;
                c.congestion_control = it->second.congestion_control;
            } else {
                c.values["rcvbuf_granted"] = theirs.at("rcvbuf_granted");
            }
            auto prefix = fmt::format("stream{}.", client_port);
            for (const auto& [name, series] : report.series)
                if (name.starts_with(prefix))
                    r.series[fmt::format("stream{}.{}", i + 1, name.substr(prefix.size()))] = series;
        }
        auto theirs = [&report](const char* key) {
            auto it = report.sysctls.find(key);
            return it != report.sysctls.end() ? it->second : std::string();
        };
        // Each buffer's cap is where its socket is: the receiver's rcvbuf on the server for an
        // upload, the sender's sndbuf there for a download (both: the tighter of the two).
        if (direction == "upload") caps.rmem_max = theirs("net.core.rmem_max");
        if (direction == "download") caps.wmem_max = theirs("net.core.wmem_max");
        if (both) {
            caps.rmem_max = smaller(caps.rmem_max, theirs("net.core.rmem_max"));
            caps.wmem_max = smaller(caps.wmem_max, theirs("net.core.wmem_max"));
        }
        r.notes.push_back(fmt::format(
            "server: wanlab's probe server on the server machine ({}); its sockets' TCP_INFO read there as the "
            "measurement ended{}",
            host_port(where.server.address, port),
            direction == "download" ? "" : "; upload goodput from the bytes the server acknowledged (TCP_INFO)"));
    }
    done.store(true);
    // A sender blocked in send() on a full buffer would see `done` only at its SO_SNDTIMEO:
    // shutting its side makes that send return now (EPIPE), and queues the end of stream.
    for (const auto& s : streams)
        if (s->sender() >= 0) ::shutdown(s->sender(), SHUT_WR);
    workers.join();

    summarize(r, tuning, caps, last_total, last_up, last_down, elapsed);
    return r;
}

}  // namespace wanlab::probes
