// The built-in transfer probe: N bytes per request, on a fresh connection each (or over one
// reused connection), timed from before connect() to the last byte, as `curl -w
// %{time_total}` times a download. Its server answers each request in-band with what the
// sending socket saw (slow start, retransmits), so the same client measures against the
// probe's own server here and against its far half on another machine. See docs/probes.md.
//
// The wire (all integers big-endian):
//   request, client -> server: "WLT1", u32 flags (bit 0: upload), u64 size; an upload's
//     `size` bytes follow it.
//   download: the server sends `size` bytes; the client, once it has them all, sends one byte.
//   trailer, server -> client, after the client's byte (download) or the last byte of an
//     upload: u8 version (1), u8 slow start (1: the server's socket is still in its initial
//     slow start), u16 zero, u32 total retransmits of that socket, u32 cwnd, u32 zero.
#include <linux/inet_diag.h>  // struct tcp_bbr_info (TCP_CC_INFO)
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/units.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/stats.h"
#include "probes/transfer.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

constexpr char kMagic[4] = {'W', 'L', 'T', '1'};
constexpr std::size_t kRequestBytes = 16, kTrailerBytes = 16;
constexpr std::uint32_t kUploadFlag = 1;
constexpr std::size_t kChunk = 256 * 1024;
// Every wait wakes this often to look at the clock and the stop flag.
constexpr auto kSlice = 100ms;
constexpr auto kSetupTimeout = 5000ms;
constexpr std::size_t kMaxSeriesPoints = 100'000;  // completion_time points kept per repeat
constexpr std::size_t kMaxKept = 1'000'000;        // completion times kept per repeat; the histogram sees all
// BBR's pacing gain in STARTUP is 2/ln 2 = 2.89 (739 in BBR_UNIT = 256ths); every later phase
// paces at 1.25 or less.
constexpr std::uint32_t kBbrStartupGainAbove = 2 * 256;

void put32(unsigned char* p, std::uint32_t v) {
    for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v & 0xff);
}
void put64(unsigned char* p, std::uint64_t v) {
    for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v & 0xff);
}
std::uint32_t get32(const unsigned char* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
    return v;
}
std::uint64_t get64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
    return v;
}

/// What the sending socket saw, read when a transfer ended.
struct SenderView {
    bool slow_start = false;
    std::uint32_t retransmits = 0;  // over the connection's life
    std::uint32_t cwnd = 0;
};

SenderView sender_view(int fd) {
    SenderView v;
    ::tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return v;
    v.retransmits = ti.tcpi_total_retrans;
    v.cwnd = ti.tcpi_snd_cwnd;
    // Still in the initial slow start: no loss, ECN mark or HyStart exit has lowered ssthresh
    // from the kernel's "infinite" (TCP_INFINITE_SSTHRESH). BBR leaves ssthresh alone; it is
    // in slow start while it paces at its STARTUP gain.
    v.slow_start = ti.tcpi_snd_ssthresh >= 0x7fffffffu;
    if (congestion_control_of(fd) == "bbr") {
        tcp_bbr_info bbr{};
        socklen_t n = sizeof bbr;
        if (::getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &bbr, &n) == 0 && n >= sizeof bbr)
            v.slow_start = bbr.bbr_pacing_gain > kBbrStartupGainAbove;
    }
    return v;
}

// ---- the server -----------------------------------------------------------------------------

struct ServerConfig {
    Tuning tuning;
    std::chrono::nanoseconds stall{};  // a connection silent this long is dropped
};

/// Reads or writes all of [data, data + n) on a blocking socket whose calls time out after
/// kSlice; false on EOF, an error, the stop flag, or no progress for `stall`.
bool server_io(int fd, char* data, std::size_t n, bool write, const Workers& running, std::chrono::nanoseconds stall) {
    auto last = Clock::now();
    while (n > 0) {
        ssize_t k = write ? ::send(fd, data, n, MSG_NOSIGNAL) : ::recv(fd, data, n, 0);
        if (k > 0) {
            data += k, n -= static_cast<std::size_t>(k);
            last = Clock::now();
            continue;
        }
        if (k == 0 && !write) return false;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        if (running.stopping() || Clock::now() - last > stall) return false;
    }
    return true;
}

/// One connection: requests until the client closes it.
void serve_connection(int fd, const ServerConfig& config, const Workers& running) {
    std::vector<char> buffer(kChunk, 'x');
    unsigned char request[kRequestBytes];
    while (server_io(fd, reinterpret_cast<char*>(request), sizeof request, false, running, config.stall)) {
        if (std::memcmp(request, kMagic, sizeof kMagic) != 0) return;  // not this probe's client
        bool upload = (get32(request + 4) & kUploadFlag) != 0;
        std::uint64_t size = get64(request + 8);
        if (size == 0 || size > kMaxTransferSize) return;
        for (std::uint64_t left = size; left > 0;) {
            auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer.size()));
            if (!server_io(fd, buffer.data(), n, !upload, running, config.stall)) return;
            left -= n;
        }
        if (!upload) {  // the client's byte: it has every byte, so every byte was acknowledged
            char done = 0;
            if (!server_io(fd, &done, 1, false, running, config.stall)) return;
        }
        auto view = upload ? SenderView{} : sender_view(fd);
        unsigned char trailer[kTrailerBytes] = {};
        trailer[0] = 1;
        trailer[1] = view.slow_start ? 1 : 0;
        put32(trailer + 4, view.retransmits);
        put32(trailer + 8, view.cwnd);
        if (!server_io(fd, reinterpret_cast<char*>(trailer), sizeof trailer, true, running, config.stall)) return;
    }
}

/// The server: `threads` threads, each accepting on the shared non-blocking listener and
/// serving one connection at a time, so a probe of `parallel` connections needs that many
/// (plus one, for a connection opened while another thread is still closing its last).
class TransferServer final : public FarServer {
public:
    TransferServer(const Endpoint& at, const ServerConfig& config, int threads) : config_(config) {
        listener_ = listen_tcp(at.netns, at.address, at.port, [&](int fd) { tune(fd, config_.tuning); });
        port_ = local_port(listener_.get());
        set_nonblocking(listener_.get());
        workers_.watch(listener_.get());
        for (int i = 0; i < threads; ++i) workers_.spawn([this] { accept_loop(); });
    }
    ~TransferServer() override {
        try {
            stop();
        } catch (...) {
            // the destructor of a server whose owner did not ask what it saw
        }
    }
    std::uint16_t port() const override { return port_; }
    /// True once a serving thread failed (stop() rethrows its error).
    bool failed() const { return failed_.load(); }
    FarReport stop() override {
        if (stopped_) return {};
        stopped_ = true;
        workers_.stop();
        workers_.join();  // rethrows a thread's failure
        return {};
    }

private:
    void accept_loop() {
        try {
            while (!workers_.stopping()) {
                pollfd p{listener_.get(), POLLIN, 0};
                if (::poll(&p, 1, static_cast<int>(kSlice.count())) <= 0) continue;
                Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
                if (!fd) {
                    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
                    if (workers_.stopping()) return;
                    sys::fail_errno("accepting a transfer connection");
                }
                set_int(fd.get(), IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
                if (!config_.tuning.congestion_control.empty())
                    set_congestion_control(fd.get(), config_.tuning.congestion_control);
                set_timeouts(fd.get(), std::chrono::duration_cast<std::chrono::milliseconds>(kSlice));
                serve_connection(fd.get(), config_, workers_);
            }
        } catch (...) {
            failed_ = true;
            throw;
        }
    }

    ServerConfig config_;
    Fd listener_;
    std::uint16_t port_ = 0;
    bool stopped_ = false;
    std::atomic<bool> failed_{false};
    Workers workers_;  // last: joined before the listener closes
};

ServerConfig server_config(const TransferOptions& o) { return {o.tuning, o.timeout + 1s}; }

// ---- the client -----------------------------------------------------------------------------

enum class Outcome { done, failed, timed_out, stopped };

/// One transfer's clock and how it went; times in seconds from its start.
struct Attempt {
    Outcome outcome = Outcome::failed;
    double connect = std::numeric_limits<double>::quiet_NaN();
    double first_byte = std::numeric_limits<double>::quiet_NaN();
    double completion = 0;
    SenderView sender;
    std::string error;
};

/// A non-blocking socket's reads and writes, bounded by one transfer's deadline and the
/// stop flag.
class Io {
public:
    Io(int fd, Clock::time_point deadline, const std::atomic<bool>& stop, Attempt& a)
        : fd_(fd), deadline_(deadline), stop_(stop), a_(a) {}

    /// Waits for `events`; false (the attempt's outcome set) on the deadline or a stop.
    bool wait(short events) {
        for (;;) {
            if (stop_.load(std::memory_order_relaxed)) return end(Outcome::stopped, "stopped");
            auto now = Clock::now();
            if (now >= deadline_) return end(Outcome::timed_out, "timed out");
            auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now);
            pollfd p{fd_, events, 0};
            int n = ::poll(&p, 1, static_cast<int>(std::min<std::chrono::milliseconds>(left, kSlice).count()));
            if (n > 0) return true;
            if (n < 0 && errno != EINTR) return end(Outcome::failed, fmt::format("poll: {}", std::strerror(errno)));
        }
    }
    bool send(const char* data, std::size_t n) {
        while (n > 0) {
            ssize_t k = ::send(fd_, data, n, MSG_NOSIGNAL);
            if (k > 0) {
                data += k, n -= static_cast<std::size_t>(k);
            } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
                if (!wait(POLLOUT)) return false;
            } else {
                return end(Outcome::failed, fmt::format("send: {}", std::strerror(errno)));
            }
        }
        return true;
    }
    /// Reads n bytes into `data`, or, with `discard`, reads them kChunk at a time over
    /// data[0, kChunk); `first` is called once, when the first of them arrives.
    template <typename First>
    bool recv(char* data, std::uint64_t n, bool discard, First&& first) {
        bool any = false;
        while (n > 0) {
            auto want = static_cast<std::size_t>(discard ? std::min<std::uint64_t>(n, kChunk) : n);
            ssize_t k = ::recv(fd_, data, want, 0);
            if (k > 0) {
                if (!any) first(), any = true;
                n -= static_cast<std::uint64_t>(k);
                if (!discard) data += k;
            } else if (k == 0) {
                return end(Outcome::failed, "the server closed the connection");
            } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                if (!wait(POLLIN)) return false;
            } else {
                return end(Outcome::failed, fmt::format("recv: {}", std::strerror(errno)));
            }
        }
        return true;
    }

private:
    bool end(Outcome o, std::string why) {
        a_.outcome = o;
        a_.error = std::move(why);
        return false;
    }
    int fd_;
    Clock::time_point deadline_;
    const std::atomic<bool>& stop_;
    Attempt& a_;
};

/// One connection lane: transfers one after another, reusing its connection or not.
struct Lane {
    const TransferOptions& o;
    const SockAddr& server;
    const std::string& client_address;
    const std::atomic<bool>& stop;
    std::vector<char> buffer = std::vector<char>(kChunk, 'u');
    Fd conn;
    std::uint32_t retransmits_before = 0;  // the connection's total at the previous transfer's end

    Attempt transfer() {
        Attempt a;
        auto t0 = Clock::now();
        auto since = [t0] { return seconds(Clock::now() - t0); };
        if (!conn && !open(a, t0)) {
            a.completion = since();
            return a;
        }
        Io on(conn.get(), t0 + o.timeout, stop, a);
        unsigned char request[kRequestBytes];
        std::memcpy(request, kMagic, sizeof kMagic);
        put32(request + 4, o.upload ? kUploadFlag : 0);
        put64(request + 8, o.size);
        bool ok = on.send(reinterpret_cast<const char*>(request), sizeof request);
        for (std::uint64_t left = o.upload ? o.size : 0; ok && left > 0;) {
            auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer.size()));
            ok = on.send(buffer.data(), n);
            left -= n;
        }
        if (ok && !o.upload) {
            ok = on.recv(buffer.data(), o.size, true, [&] { a.first_byte = since(); });
            if (ok) a.completion = since();
            char done = 'd';
            ok = ok && on.send(&done, 1);
        }
        unsigned char trailer[kTrailerBytes];
        ok = ok && on.recv(reinterpret_cast<char*>(trailer), sizeof trailer, false, [] {});
        if (ok && o.upload) a.completion = since();  // the server has every byte
        if (!ok) {
            if (a.completion == 0) a.completion = since();
            conn.reset();  // a broken or late connection is not reused
            return a;
        }
        if (trailer[0] != 1) {
            a.outcome = Outcome::failed;
            a.error = "the server's answer is not a wanlab transfer server's";
            conn.reset();
            return a;
        }
        a.outcome = Outcome::done;
        a.sender =
            o.upload ? sender_view(conn.get()) : SenderView{trailer[1] == 1, get32(trailer + 4), get32(trailer + 8)};
        std::uint32_t total = a.sender.retransmits;
        a.sender.retransmits = total >= retransmits_before ? total - retransmits_before : total;
        retransmits_before = total;
        if (!o.reuse) close_now();
        return a;
    }

private:
    bool open(Attempt& a, Clock::time_point t0) {
        retransmits_before = 0;
        try {
            Fd fd(::socket(server.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
            if (!fd) sys::fail_errno("opening a socket");
            set_int(fd.get(), IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
            tune(fd.get(), o.tuning);
            if (!client_address.empty()) bind_to(fd.get(), server.family(), client_address, 0, "the transfer client");
            if (::connect(fd.get(), server.get(), server.len) != 0 && errno != EINPROGRESS)
                return fail(a, fmt::format("connect: {}", std::strerror(errno)));
            Io io(fd.get(), t0 + o.timeout, stop, a);
            if (!io.wait(POLLOUT)) return false;
            int err = get_int(fd.get(), SOL_SOCKET, SO_ERROR, "SO_ERROR");
            if (err != 0) return fail(a, fmt::format("connect: {}", std::strerror(err)));
            a.connect = seconds(Clock::now() - t0);
            conn = std::move(fd);
            return true;
        } catch (const Error& e) {
            return fail(a, e.what());
        }
    }
    static bool fail(Attempt& a, std::string why) {
        a.outcome = Outcome::failed;
        a.error = std::move(why);
        return false;
    }
    /// Closes without TIME_WAIT (an RST after the trailer: every byte is accounted for), so
    /// thousands of fresh connections a second do not run out of local ports.
    void close_now() {
        linger l{1, 0};
        ::setsockopt(conn.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
        conn.reset();
    }
};

/// Sleeps `d`, or less when the workers are stopped.
void pause(std::chrono::nanoseconds d, const Workers& workers) {
    for (auto until = Clock::now() + d; !workers.stopping();) {
        auto now = Clock::now();
        if (now >= until) return;
        std::this_thread::sleep_for(std::min<Clock::duration>(until - now, 20ms));
    }
}

struct LaneTally {
    TransferTally tally;
    Clock::time_point finished;
};

void run_lane(const TransferOptions& o, const SockAddr& server, const Endpoint& client, Clock::time_point start,
              Clock::time_point end, const Workers& workers, LaneTally& lane_tally, std::size_t keep) {
    NetnsScope in(client.netns);  // every socket this lane opens lives in the client's namespace
    Lane lane{o, server, client.address, workers.flag(), std::vector<char>(kChunk, 'u'), Fd(), 0};
    auto& t = lane_tally.tally;
    for (std::int64_t n = 0; o.count == 0 || n < o.count; ++n) {
        if (n > 0 && o.gap.count() > 0) pause(o.gap, workers);
        if (workers.stopping() || Clock::now() >= end) break;
        auto begun = Clock::now();
        auto a = lane.transfer();
        if (a.outcome == Outcome::stopped) break;
        if (a.outcome != Outcome::done) {
            t.lost(a.outcome == Outcome::timed_out, a.error);
            continue;
        }
        t.slow_start += a.sender.slow_start ? 1 : 0;
        t.retransmits += a.sender.retransmits;
        t.completed(seconds(begun - start) + a.completion, a.completion, a.first_byte, a.connect,
                    static_cast<double>(o.size), keep);
    }
    lane_tally.finished = Clock::now();
}

}  // namespace

void TransferTally::completed(double at, double completion_s, double first_byte_s, double connect_s, double moved,
                              std::size_t keep) {
    ++done;
    busy += completion_s;
    bytes += moved;
    histogram.record(static_cast<std::uint64_t>(std::max(0.0, completion_s) * 1e9));
    if (completion.size() < keep) {
        completion.push_back(completion_s);
        if (std::isfinite(first_byte_s)) first_byte.push_back(first_byte_s);
        if (std::isfinite(connect_s)) connect.push_back(connect_s);
    }
    if (series.size() < kMaxSeriesPoints) series.add(at, completion_s);
}

void TransferTally::lost(bool timed_out_, const std::string& why) {
    (timed_out_ ? timed_out : failed) += 1;
    if (first_error.empty()) first_error = why;
}

void TransferTally::merge(const TransferTally& t) {
    done += t.done, failed += t.failed, timed_out += t.timed_out;
    slow_start += t.slow_start, retransmits += t.retransmits, busy += t.busy, bytes += t.bytes;
    histogram.merge(t.histogram);
    completion.insert(completion.end(), t.completion.begin(), t.completion.end());
    first_byte.insert(first_byte.end(), t.first_byte.begin(), t.first_byte.end());
    connect.insert(connect.end(), t.connect.begin(), t.connect.end());
    for (std::size_t i = 0; i < t.series.size(); ++i) series.add(t.series.t[i], t.series.value[i]);
    if (first_error.empty()) first_error = t.first_error;
}

void add_transfer_metrics(ProbeResult& r, const TransferOptions& o, TransferTally all, double elapsed,
                          bool sender_seen) {
    auto& m = r.metrics;
    double nan = std::numeric_limits<double>::quiet_NaN();
    m["transfers"] = static_cast<double>(all.done);
    m["errors"] = static_cast<double>(all.failed + all.timed_out);
    m["timeouts"] = static_cast<double>(all.timed_out);
    m["goodput"] = all.busy > 0 ? all.bytes * 8 / all.busy : nan;
    m["throughput"] = elapsed > 0 ? all.bytes * 8 / elapsed : nan;
    if (sender_seen) {
        m["slow_start_share"] =
            all.done > 0 ? static_cast<double>(all.slow_start) / static_cast<double>(all.done) : nan;
        m["retransmits"] = static_cast<double>(all.retransmits);
    }
    for (const char* k : {"completion_mean", "completion_p50", "completion_p90", "completion_p99", "completion_max"})
        m[k] = nan;
    if (all.done > 0 && all.completion.size() == all.done) {  // exact, from every sample
        auto q = stats::percentiles(all.completion, {50, 90, 99});
        m["completion_mean"] = stats::mean(all.completion), m["completion_p50"] = q[0];
        m["completion_p90"] = q[1], m["completion_p99"] = q[2], m["completion_max"] = stats::max(all.completion);
    } else if (all.done > 0) {  // within 0.8%, from the histogram
        const auto& h = all.histogram;
        m["completion_mean"] = h.mean() / 1e9, m["completion_p50"] = h.percentile(50) / 1e9;
        m["completion_p90"] = h.percentile(90) / 1e9, m["completion_p99"] = h.percentile(99) / 1e9;
        m["completion_max"] = h.max() / 1e9;
        r.notes.push_back(
            fmt::format("completion percentiles from the histogram (0.8% resolution): more than {} "
                        "transfers",
                        all.completion.size()));
    }
    if (!o.upload) {
        auto q = all.first_byte.empty() ? std::vector<double>{nan, nan} : stats::percentiles(all.first_byte, {50, 99});
        m["ttfb_p50"] = q[0], m["ttfb_p99"] = q[1];
    }
    if (!o.reuse) m["connect_p50"] = all.connect.empty() ? nan : stats::percentiles(all.connect, {50})[0];
    r.samples["completion"] = std::move(all.completion);
    r.series["completion_time"] = std::move(all.series);
    if (!all.first_error.empty()) r.notes.push_back(fmt::format("first failure: {}", all.first_error));
}

TransferOptions transfer_options(const ProbeSpec& spec) {
    TransferOptions o;
    auto size = option_int(spec, "size");
    if (size < 1 || static_cast<std::uint64_t>(size) > kMaxTransferSize)
        throw InputError(
            fmt::format("transfer probe: `size` must be 1 byte to {}", units::format_size(kMaxTransferSize)));
    o.size = static_cast<std::uint64_t>(size);
    o.upload = option_string(spec, "direction") == "upload";
    o.reuse = option_bool(spec, "reuse");
    o.parallel = static_cast<int>(option_int(spec, "parallel"));
    o.count = option_int(spec, "count");
    o.gap = std::chrono::nanoseconds(option_int(spec, "gap"));
    o.timeout = std::chrono::nanoseconds(option_int(spec, "timeout"));
    o.duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    o.tuning = {option_int(spec, "sndbuf"), option_int(spec, "rcvbuf"), option_string(spec, "congestion_control")};
    return o;
}

std::string describe(const TransferOptions& o) {
    return fmt::format("{} {} per transfer, {}, {} connection{} at a time{}{}", units::format_size(o.size),
                       o.upload ? "uploaded" : "downloaded",
                       o.reuse ? "over one reused connection per lane" : "each on a fresh connection (handshake timed)",
                       o.parallel, o.parallel == 1 ? "" : "s",
                       o.count > 0 ? fmt::format(", at most {} per connection", o.count) : "",
                       o.gap.count() > 0 ? fmt::format(", {} between transfers", units::format_duration(o.gap)) : "");
}

std::unique_ptr<FarServer> serve_transfer(const ProbeSpec& spec, const Endpoint& at) {
    auto o = transfer_options(spec);
    return std::make_unique<TransferServer>(at, server_config(o), o.parallel + 1);
}

ProbeResult run_transfer(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    check_remote(spec, where.server);
    auto o = transfer_options(spec);
    const auto& far = where.server.far;
    std::unique_ptr<TransferServer> own;
    auto port = where.server.port;
    if (!far) {
        own = std::make_unique<TransferServer>(where.server, server_config(o), o.parallel + 1);
        port = own->port();
    }
    auto server = sock_addr(where.server.address, port);

    std::vector<LaneTally> lanes(static_cast<std::size_t>(o.parallel));
    std::size_t keep = kMaxKept / lanes.size();
    auto start = Clock::now(), end = start + o.duration;
    std::atomic<std::size_t> running{lanes.size()};
    Workers workers;
    for (auto& lane : lanes)
        workers.spawn([&, t = &lane] {
            run_lane(o, server, where.client, start, end, workers, *t, keep);
            running.fetch_sub(1);
        });
    // A transfer begun before the end may run to its timeout; past that the lanes are stopped.
    for (auto hard_end = end + o.timeout + kSetupTimeout; running.load() > 0;) {
        if (tick) tick();  // may throw: ~Workers stops and joins the lanes
        if ((own && own->failed()) || Clock::now() >= hard_end) workers.stop();
        std::this_thread::sleep_for(20ms);
    }
    workers.join();
    if (own) own->stop();  // rethrows a serving thread's failure
    if (far) far->stop();
    auto last = start;
    TransferTally all;
    for (const auto& t : lanes) {
        last = std::max(last, t.finished);
        all.merge(t.tally);
    }
    ProbeResult r;
    r.began = start;
    r.kind = "transfer";
    r.tool = "builtin";
    add_transfer_metrics(r, o, std::move(all), seconds(last - start), true);
    r.notes.push_back(describe(o));
    r.notes.push_back(
        "slow_start_share: transfers whose sending socket was still in its initial slow start at the end "
        "(ssthresh never lowered; for bbr, still in STARTUP)");
    if (o.tuning.congestion_control.empty())
        r.notes.push_back("congestion control: the sysctl's (net.ipv4.tcp_congestion_control)");
    else
        r.notes.push_back(
            fmt::format("congestion control: {} on both ends (TCP_CONGESTION)", o.tuning.congestion_control));
    if (o.tuning.sndbuf == 0) r.notes.push_back(kSndbufAutotuned);
    if (o.tuning.rcvbuf == 0) r.notes.push_back(kRcvbufAutotuned);
    if (!o.reuse) {
        // The sender's kernel keeps each peer's ssthresh for its next connection.
        std::string nosave;
        sys::in_netns(o.upload ? where.client.netns : (far ? "" : where.server.netns),
                      [&] { nosave = read_first_line("/proc/sys/net/ipv4/tcp_no_metrics_save"); });
        if (nosave == "0" && !(far && !o.upload))
            r.notes.push_back(
                "tcp_no_metrics_save = 0 where the sender is: its kernel remembers a peer's ssthresh from a "
                "connection that lost packets, so a later fresh connection may leave slow start early, as a real "
                "client's next connection would");
    }
    if (far)
        r.notes.push_back(fmt::format("server: wanlab's transfer server on the server machine ({})",
                                      host_port(where.server.address, port)));
    return r;
}

}  // namespace wanlab::probes
