#include "run/check.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/sockets.h"
#include "probes/stats.h"

namespace wanlab::run {
namespace {

using namespace std::chrono_literals;
using probes::Clock;

constexpr std::size_t kPayload = 1472;  // one full 1500-byte IPv4 packet
// What netem's rate counts besides the payload: Ethernet 14 + UDP 8 + the IP header.
std::size_t wire_overhead(int family) { return family == AF_INET6 ? 14 + 40 + 8 : 14 + 20 + 8; }
constexpr std::size_t kBatch = 32;  // datagrams per sendmmsg()

// The check's RTT: 20 TCP handshakes started 20 ms apart, overlapping on a path longer than
// that, so the check takes about 0.4 s and one RTT whatever the path (20 one after the other
// took 20 RTTs: 12 s on a 600 ms satellite path).
constexpr std::int64_t kHandshakes = 20;
constexpr auto kHandshakeGap = 20ms;

struct Received {
    std::uint64_t bytes = 0;  // wire bytes after the first datagram
    Clock::time_point first{}, last{};
    bool any = false;
};

void receive_until_quiet(int fd, std::size_t overhead, Clock::time_point deadline, std::chrono::milliseconds quiet,
                         Received& r) {
    std::vector<char> buf(65536);
    for (;;) {
        auto now = Clock::now();
        if (now >= deadline) return;
        auto limit = r.any ? std::min(deadline, r.last + quiet) : deadline;
        if (now >= limit) return;
        pollfd p{fd, POLLIN, 0};
        int wait = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(limit - now).count());
        if (::poll(&p, 1, wait) <= 0) continue;
        for (;;) {
            ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
            if (n < 0) break;
            auto t = Clock::now();
            if (!r.any) {
                r.any = true;
                r.first = t;
            } else {
                r.bytes += static_cast<std::uint64_t>(n) + overhead;
            }
            r.last = t;
        }
    }
}

void send_paced(int fd, const probes::SockAddr& to, double rate, std::chrono::milliseconds duration,
                const probes::Tick& tick) {
    std::vector<char> payload(kPayload, 'w');
    std::vector<iovec> iov(kBatch);
    std::vector<mmsghdr> msgs(kBatch);
    for (std::size_t i = 0; i < kBatch; ++i) {
        iov[i] = {payload.data(), payload.size()};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = const_cast<sockaddr*>(to.get());
        msgs[i].msg_hdr.msg_namelen = to.len;
    }
    const double per_batch =
        static_cast<double>(kBatch * (kPayload + wire_overhead(to.family())) * 8) / rate;  // seconds
    auto start = Clock::now(), end = start + duration, next_tick = start;
    for (std::uint64_t batch = 0;; ++batch) {
        auto due =
            start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(per_batch * batch));
        // Stop at the end of `duration` by the clock too: a sender slower than the rate (an
        // emulated CPU at 1 Gbit/s) would otherwise send every planned batch, for many times
        // `duration` (tens of seconds per try at 10 Gbit/s in the micro-VM).
        if (due >= end || Clock::now() >= end) return;
        if (due > Clock::now()) std::this_thread::sleep_until(due);
        ::sendmmsg(fd, msgs.data(), kBatch, MSG_DONTWAIT);  // drops (ENOBUFS, EAGAIN) are what a blast expects
        if (Clock::now() >= next_tick) {
            if (tick) tick();
            next_tick = Clock::now() + 100ms;
        }
    }
}

}  // namespace

Expected expected_of(const experiment::Trial& trial) {
    Expected e;
    const auto& up = trial.link.up;
    const auto& down = trial.link.down;
    e.rtt = probes::seconds(up.netem.delay + down.netem.delay);
    e.jitter = probes::seconds(up.netem.jitter + down.netem.jitter);
    e.rate_up = static_cast<double>(up.rate_bps);
    e.rate_down = static_cast<double>(down.rate_bps);
    return e;
}

bool rtt_holds(const Expected& e, double measured) {
    return measured >= 0.95 * e.rtt - 0.0002 && measured <= 1.05 * e.rtt + e.jitter + 0.005;
}

bool rate_holds(double configured, double measured) {
    return measured >= 0.85 * configured && measured <= 1.05 * configured;
}

double measure_udp_rate(const probes::Endpoint& from, const probes::Endpoint& to, double send_rate,
                        std::chrono::milliseconds duration, const probes::Tick& tick) {
    const int family = probes::family_of(to.address);
    sys::Fd rx = probes::socket_in(to.netns, family, SOCK_DGRAM);
    probes::bind_to(rx.get(), family, to.address, 0, "the rate check's receiver");
    probes::set_int(rx.get(), SOL_SOCKET, SO_RCVBUF, 4 << 20, "SO_RCVBUF");
    auto at = probes::sock_addr(to.address, probes::local_port(rx.get()));
    sys::Fd tx = probes::socket_in(from.netns, family, SOCK_DGRAM);
    if (!from.address.empty()) probes::bind_to(tx.get(), family, from.address, 0, "the rate check's sender");
    Received got;
    // The receiver runs until the path has been quiet for 300 ms, or 3 s past the send.
    auto deadline = Clock::now() + duration + 3s;
    std::thread receiver([&] { receive_until_quiet(rx.get(), wire_overhead(family), deadline, 300ms, got); });
    try {
        send_paced(tx.get(), at, send_rate, duration, tick);
    } catch (...) {
        receiver.join();
        throw;
    }
    receiver.join();
    double span = probes::seconds(got.last - got.first);
    if (!got.any || span <= 0) return 0;
    return static_cast<double>(got.bytes) * 8 / span;
}

results::EmulationCheck check_emulation(const experiment::Trial& trial, const probes::Endpoints& where,
                                        const probes::Tick& tick) {
    results::EmulationCheck c;
    auto e = expected_of(trial);
    std::vector<std::string> notes;
    if (e.rtt > 0) {
        auto r = probes::overlapping_handshakes(kHandshakes, kHandshakeGap, where, tick);
        c.checked = true;
        c.rtt_configured = e.rtt;
        c.rtt_measured = r.metrics.count("rtt_p50") ? r.metrics.at("rtt_p50") : results::kNaN;
        bool ok = !std::isnan(c.rtt_measured) && rtt_holds(e, c.rtt_measured);
        c.held = c.held && ok;
        notes.push_back(fmt::format("rtt {:.1f} ms for {:g} ms configured{}", c.rtt_measured * 1e3, e.rtt * 1e3,
                                    ok ? "" : " (did not hold)"));
    }
    // Let the queue a blast filled drain before anything else measures.
    auto drain = [&] {
        probes::sleep_until(
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(e.rtt + 0.2)),
            tick);
    };
    auto rate = [&](const char* dir, double configured, const probes::Endpoint& from, const probes::Endpoint& to) {
        if (configured <= 0) return;
        double measured = measure_udp_rate(from, to, configured * 1.25, 1000ms, tick);
        // A shaper cannot deliver more than its rate, but a sender starved of CPU for a moment
        // (an emulated CPU, a busy host) delivers less: a short measurement gets one more try
        // and the better of the two counts.
        if (!rate_holds(configured, measured)) {
            drain();
            measured = std::max(measured, measure_udp_rate(from, to, configured * 1.25, 1000ms, tick));
        }
        bool ok = rate_holds(configured, measured);
        c.checked = true;
        c.held = c.held && ok;
        // The slower direction is the one reported; both are in the note.
        if (std::isnan(c.rate_measured) || configured < c.rate_configured) {
            c.rate_configured = configured;
            c.rate_measured = measured;
        }
        notes.push_back(fmt::format("{} rate {:.1f} Mbit/s for {:g} Mbit/s configured{}", dir, measured / 1e6,
                                    configured / 1e6, ok ? "" : " (did not hold)"));
        drain();
    };
    rate("up", e.rate_up, where.client, where.server);
    rate("down", e.rate_down, where.server, where.client);
    c.note = fmt::format("{}", fmt::join(notes, "; "));
    return c;
}

}  // namespace wanlab::run
