// TCP_INFO of a socket in base units, once at the end of a measurement or every interval as
// time series per stream.
//
// Contract: read from the running kernel with getsockopt(TCP_INFO); a field newer than the
// struct the kernel fills is left out, never reported as zero. Units: seconds, bytes, bit/s,
// segments (cwnd, ssthresh), counts. TcpSampler is used by one thread (the probe's), reading
// sockets other threads send and receive on, which the kernel allows.
#pragma once

#include <map>
#include <string>

#include "probes/probe.h"

namespace wanlab::probes {

/// The sending socket's view: retransmits (total), rtt (smoothed), rttvar, min_rtt, cwnd,
/// ssthresh (absent while still infinite), mss, delivery_rate, pacing_rate, in_flight,
/// busy_time, rwnd_limited_time, sndbuf_limited_time, rwnd_limited and sndbuf_limited
/// (shares of busy time), bytes_acked, notsent_bytes, snd_wnd (the window the peer
/// advertises). Throws wanlab::Error when TCP_INFO cannot be read.
std::map<std::string, double> tcp_info(int fd);

/// Time series of TCP_INFO per stream: every sample() adds, for stream `n` (1-based),
/// "streamN.FIELD" points at time `t`: the sender's gauges (cwnd, ssthresh, srtt, min_rtt,
/// delivery_rate, pacing_rate, in_flight, snd_wnd, notsent_bytes), the deltas since the
/// previous sample of its counters (retransmits, busy_time, rwnd_limited_time,
/// sndbuf_limited_time), and the receiver's rcv_space (its autotuned receive space).
class TcpSampler {
public:
    void sample(double t, int n, int sender_fd, int receiver_fd, std::map<std::string, Series>& out);

private:
    std::map<int, std::map<std::string, double>> last_;  // per stream: the counters at the previous sample
};

}  // namespace wanlab::probes
