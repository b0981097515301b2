// The udp probe's arithmetic, shared by the built-in stream (probes/udp.cpp) and iperf3 -u
// (probes/external.cpp): what the receiver counts, and the metrics made of it.
//
// Contract: pure. UdpTally takes each datagram as it arrives (sequence number from 0, the
// sender's and the receiver's clock in ns) and keeps RFC 3550's interarrival jitter, the
// datagrams that arrived after a higher sequence number (reordered), duplicates and, up to a
// bound, every one-way delay. udp_metrics() writes the kind's metrics in base units.
// Not thread-safe (one receiver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probes/probe.h"

namespace wanlab::probes {

/// z of a two-sided 99% interval.
inline constexpr double kZ99 = 2.5758293035489;

/// Sequence numbers from here on are not the stream's (2^28 datagrams: 35 minutes at 10 Gbit/s
/// of full-size datagrams); the tally's table of seen numbers stays under 32 MiB.
inline constexpr std::uint64_t kMaxSequence = std::uint64_t{1} << 28;

struct UdpTally {
    std::uint64_t received = 0;    ///< distinct datagrams
    std::uint64_t foreign = 0;     ///< datagrams with a sequence number of no stream (ignored)
    std::uint64_t duplicates = 0;  ///< copies of one already counted
    std::uint64_t reordered = 0;   ///< arrived after a higher sequence number
    std::uint64_t highest = 0;
    double bytes = 0;            ///< payload of the distinct ones
    double jitter = 0;           ///< RFC 3550 J, seconds
    std::vector<double> delays;  ///< one-way delay per datagram, s (arrival - send clock)
    void add(std::uint64_t seq, std::int64_t sent_ns, std::int64_t arrival_ns, std::size_t bytes);

private:
    std::vector<bool> seen_;
    double last_transit_ = 0;
};

/// `loss` = lost / n and its 99% interval (`loss_low`, `loss_high`: stats::wilson_interval)
/// into `m`; nothing for n = 0.
void loss_metrics(std::map<std::string, double>& m, double lost, double n);

/// The udp metrics of a stream of `sent` datagrams over `seconds_sent`: throughput (at the
/// receiver), loss with its 99% interval (loss_low, loss_high), jitter, reordered,
/// duplicates, sent, received, and with `shared_clock` the one-way delays (delay_min, _p50,
/// _p99, _avg; samples "delay").
void udp_metrics(ProbeResult& r, const UdpTally& t, std::uint64_t sent, double seconds_sent, bool shared_clock);

/// kind "udp", tool builtin: the receiver in the destination's namespace, the sender in the
/// source's (upload: client -> server), both here.
ProbeResult run_udp(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);

}  // namespace wanlab::probes
