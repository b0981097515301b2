// The built-in udp probe: a paced stream of datagrams at `rate` and `size`, counted at the
// receiver: goodput, loss (and its 99% interval), RFC 3550 interarrival jitter, reordering,
// duplicates, and one-way delay, which needs both ends on one clock (wanlab's namespace lab:
// one kernel). See docs/probes.md "udp".
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <cmath>
#include <cstring>
#include <ctime>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/probe.h"
#include "probes/sockets.h"
#include "probes/stats.h"
#include "probes/udp.h"

namespace wanlab::probes {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kMagic = 0x574c5544;  // "WLUD"
constexpr std::size_t kHeader = 4 + 4 + 8 + 8;
// The receiver stops this long after the last datagram arrived once the sender is done,
// and at the latest this long after the sender is done (packets still in a long queue).
constexpr auto kQuiet = 300ms;
constexpr auto kLatest = 3s;
constexpr std::size_t kMaxKeptDelays = 200'000;
// A receive buffer that holds a second at 100 Mbit/s: a late reader must not become loss.
constexpr int kReceiveBuffer = 16 << 20;

std::int64_t ns_of(const timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

std::int64_t realtime_ns() { return ns_of(realtime_now()); }

// How long past the end a late sender may still catch up (issue 40: a bound, not a pace).
constexpr auto kCatchUpGrace = std::chrono::seconds(1);

/// Sends datagrams of `size` bytes at `rate_bps` for `duration`: each due one is sent as soon
/// as it is due (a late thread catches up in a burst, as iperf3 -u does). Returns the count.
std::uint64_t send_paced(int fd, std::size_t size, double rate_bps, Clock::duration duration, std::atomic<bool>& stop,
                         Clock::time_point& start, const Tick& tick) {
    std::vector<char> payload(size, 'w');
    std::uint32_t magic = kMagic, flags = 0;
    std::memcpy(payload.data(), &magic, 4);
    std::memcpy(payload.data() + 4, &flags, 4);
    const double per_packet_s = static_cast<double>(size) * 8 / rate_bps;
    start = Clock::now();
    const auto end = start + duration;
    std::uint64_t seq = 0;
    while (!stop.load()) {
        auto now = Clock::now();
        if (now >= end) break;
        auto due = static_cast<std::uint64_t>(seconds(now - start) / per_packet_s) + 1;
        for (; seq < due; ++seq) {
            // A burst of catch-up sends what was due when it began, but is bounded like any
            // wait: by the stop flag, and by a second past the end, so a rate far beyond what
            // the socket takes cannot make one endless loop of it.
            if ((seq & 63) == 63 && (stop.load(std::memory_order_relaxed) || Clock::now() >= end + kCatchUpGrace))
                break;
            std::memcpy(payload.data() + 8, &seq, 8);
            std::int64_t sent_ns = realtime_ns();
            std::memcpy(payload.data() + 16, &sent_ns, 8);
            // A full socket buffer (ENOBUFS, EAGAIN) loses this datagram at the sender, as a
            // real one would: it counts as sent and lost.
            (void)::send(fd, payload.data(), payload.size(), MSG_DONTWAIT);
        }
        auto next = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(static_cast<double>(seq) * per_packet_s));
        sleep_until(std::min(next, end), tick);
    }
    return seq;
}

}  // namespace

void UdpTally::add(std::uint64_t seq, std::int64_t sent_ns, std::int64_t arrival_ns, std::size_t bytes) {
    if (seq >= kMaxSequence) {  // not a datagram of this stream: a stray one must not size the table
        ++foreign;
        return;
    }
    if (seq < seen_.size() && seen_[seq]) {
        ++duplicates;
        return;
    }
    if (seq >= seen_.size()) seen_.resize(seq + 1, false);
    seen_[seq] = true;
    ++received;
    this->bytes += static_cast<double>(bytes);
    if (received > 1 && seq < highest) ++reordered;
    highest = std::max(highest, seq);
    // RFC 3550 6.4.1: D = (Rj - Ri) - (Sj - Si) between consecutive arrivals, J += (|D| - J) / 16.
    double transit = static_cast<double>(arrival_ns - sent_ns) / 1e9;
    if (received > 1) jitter += (std::fabs(transit - last_transit_) - jitter) / 16;
    last_transit_ = transit;
    if (delays.size() < kMaxKeptDelays) delays.push_back(transit);
}

void loss_metrics(std::map<std::string, double>& m, double lost, double n) {
    if (!(n > 0)) return;
    auto interval = stats::wilson_interval(lost, n, kZ99);
    m["loss"] = lost / n;
    m["loss_low"] = interval.low;
    m["loss_high"] = interval.high;
}

void udp_metrics(ProbeResult& r, const UdpTally& t, std::uint64_t sent, double seconds_sent, bool shared_clock) {
    auto n = static_cast<double>(sent);
    double received = static_cast<double>(t.received);
    double lost = std::max(0.0, n - received);
    r.metrics["sent"] = n;
    r.metrics["received"] = received;
    r.metrics["throughput"] = seconds_sent > 0 ? t.bytes * 8 / seconds_sent : std::nan("");
    loss_metrics(r.metrics, lost, n);
    if (t.received > 1) r.metrics["jitter"] = t.jitter;
    if (t.received > 0) {
        r.metrics["reordered"] = static_cast<double>(t.reordered) / received;
        r.metrics["duplicates"] = static_cast<double>(t.duplicates);
    }
    if (shared_clock && !t.delays.empty()) {
        auto p = stats::percentiles(t.delays, {0, 50, 99});
        r.metrics["delay_min"] = p[0];
        r.metrics["delay_p50"] = p[1];
        r.metrics["delay_p99"] = p[2];
        r.metrics["delay_avg"] = stats::mean(t.delays);
        r.samples["delay"] = t.delays;
    }
}

ProbeResult run_udp(const ProbeSpec& spec, const Endpoints& where, const Tick& tick) {
    check_remote(spec, where.server);
    const bool upload = option_string(spec, "direction") == "upload";
    const Endpoint& from = upload ? where.client : where.server;
    const Endpoint& to = upload ? where.server : where.client;
    auto size = static_cast<std::size_t>(option_int(spec, "size"));
    auto rate = static_cast<double>(option_int(spec, "rate"));
    auto duration = std::chrono::nanoseconds(option_int(spec, "duration"));
    auto interval = seconds(std::chrono::nanoseconds(option_int(spec, "interval")));
    const double sending_s = seconds(duration);
    if (size < kHeader) throw InputError(fmt::format("udp probe: `size` must be at least {} bytes", kHeader));

    const int family = family_of(where.server.address);
    Fd receiver = socket_in(to.netns, family, SOCK_DGRAM);
    bind_to(receiver.get(), family, to.address, 0, "the UDP receiver");
    // SO_RCVBUFFORCE (root) passes net.core.rmem_max; else the capped SO_RCVBUF.
    if (::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUFFORCE, &kReceiveBuffer, sizeof kReceiveBuffer) != 0)
        set_int(receiver.get(), SOL_SOCKET, SO_RCVBUF, kReceiveBuffer, "SO_RCVBUF");
    set_int(receiver.get(), SOL_SOCKET, SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS");
    set_timeouts(receiver.get(), 50ms);
    Fd sender = socket_in(from.netns, family, SOCK_DGRAM);
    if (!from.address.empty()) bind_to(sender.get(), family, from.address, 0, "the UDP sender");
    auto dest = sock_addr(to.address, local_port(receiver.get()));
    if (::connect(sender.get(), dest.get(), dest.len) != 0)
        sys::fail_errno("connecting the UDP sender to " + to.address);

    // The receiver's thread counts; the calling thread sends (it calls `tick`).
    UdpTally tally;
    std::mutex mutex;  // tally and the series, read by the sender's side between intervals
    std::atomic<bool> sending{true}, stop{false}, counted{false};
    std::atomic<std::int64_t> sent_end_ns{0};
    Clock::time_point start = Clock::now();
    std::atomic<std::int64_t> start_ns{0};
    Series throughput, jitter;
    Workers workers;
    workers.watch(receiver.get());
    int rfd = receiver.get();
    workers.spawn([&, rfd] {
        struct Counted {  // however the thread ends
            std::atomic<bool>& flag;
            ~Counted() { flag = true; }
        } counting{counted};
        std::vector<char> buf(std::max<std::size_t>(size, kHeader) + 64);
        auto last_arrival = Clock::now();
        double interval_bytes = 0;
        double next_mark = interval;
        for (;;) {
            timespec stamp{};
            ssize_t n = recv_stamped(rfd, buf.data(), buf.size(), stamp);
            const std::int64_t arrival = ns_of(stamp);
            auto now = Clock::now();
            if (n >= static_cast<ssize_t>(kHeader)) {
                std::uint32_t magic = 0;
                std::memcpy(&magic, buf.data(), 4);
                if (magic == kMagic) {
                    std::uint64_t seq = 0;
                    std::int64_t sent_ns = 0;
                    std::memcpy(&seq, buf.data() + 8, 8);
                    std::memcpy(&sent_ns, buf.data() + 16, 8);
                    std::lock_guard lock(mutex);
                    tally.add(seq, sent_ns, arrival, static_cast<std::size_t>(n));
                    interval_bytes += static_cast<double>(n);
                    last_arrival = now;
                }
            }
            if (workers.stopping() || stop.load()) return;
            double at = static_cast<double>(realtime_ns() - start_ns.load()) / 1e9;
            // This interval's goodput and jitter, for the intervals of the sending time only (what
            // arrives after it, late, counts in the last one).
            if (start_ns.load() > 0 && at >= next_mark && next_mark <= sending_s + 1e-6) {
                std::lock_guard lock(mutex);
                throughput.add(next_mark, interval_bytes * 8 / interval);
                if (tally.received > 1) jitter.add(next_mark, tally.jitter);
                interval_bytes = 0;
                next_mark += interval;
            }
            if (!sending.load()) {
                auto ended = Clock::time_point(Clock::duration(sent_end_ns.load()));
                if ((now - last_arrival >= kQuiet && now - ended >= kQuiet) || now - ended >= kLatest) return;
            }
        }
    });
    start_ns = realtime_ns();
    std::uint64_t sent = 0;
    try {
        sent = send_paced(sender.get(), size, rate, duration, stop, start, tick);
    } catch (...) {
        stop = true;  // the receiver ends within its 50 ms timeout; ~Workers joins it
        throw;
    }
    double seconds_sent = seconds(Clock::now() - start);
    sent_end_ns = Clock::now().time_since_epoch().count();
    sending = false;
    // Wait for the stragglers, still answering Ctrl-C.
    while (!counted.load()) {
        try {
            sleep_until(Clock::now() + 50ms, tick);
        } catch (...) {
            stop = true;
            throw;
        }
    }
    workers.join();

    ProbeResult r;
    r.kind = "udp";
    r.tool = "builtin";
    r.began = start;
    std::lock_guard lock(mutex);
    udp_metrics(r, tally, sent, seconds_sent, !where.server.remote);
    r.series["throughput"] = throughput;
    r.series["jitter"] = jitter;
    r.notes.push_back(fmt::format("udp: {} datagrams of {} bytes {} at {:.3f} Mbit/s; counted at the receiver", sent,
                                  size, upload ? "client -> server" : "server -> client", rate / 1e6));
    if (!where.server.remote)
        r.notes.push_back("delay: one-way, sender's and receiver's CLOCK_REALTIME (one kernel: the namespace lab)");
    return r;
}

}  // namespace wanlab::probes
