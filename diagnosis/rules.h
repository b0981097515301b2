// Diagnosis: each rule a small function from the evidence of one probe in one trial to a
// verdict that names a cause and cites its numbers, or nothing when its evidence does not hold.
//
// Contract: pure. Evidence holds medians over a probe's repeats in base units; NaN means
// "not recorded", and a rule whose evidence is NaN says nothing. A verdict never contradicts
// the measurement: the path's RTT is the configured one, else TCP's minimum, never an RTT
// taken under load. Advice is given only where following it can change the result.
// Thresholds and their sources: docs/diagnosis.md.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace wanlab::diagnosis {

inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

/// One direction's queues as the kernel counted them (diagnosis/qdisc_watch.h), medians per
/// repeat. Drops of a parent include its child's (the rule subtracts).
struct QueueEvidence {
    std::string direction;   ///< "up" (client -> server) or "down"
    double loss = kUnknown;  ///< the direction's random loss probability (NaN: another model)
    // netem
    double netem_sent = kUnknown, netem_drops = kUnknown;
    double netem_limit = kUnknown;  ///< packets
    double netem_peak = kUnknown;   ///< largest qlen seen, packets (its delay line included)
    // the qdisc below netem that drops on overflow: the fifo queue, else the tbf shaper
    std::string bottleneck;         ///< "queue" or "shaper" ("" = none with a known limit)
    double child_drops = kUnknown;  ///< what netem's child (the shaper, or the queue) dropped
    double bottleneck_drops = kUnknown, bottleneck_sent = kUnknown;
    double bottleneck_limit = kUnknown, bottleneck_limit_bytes = kUnknown;  ///< one of the two
    double bottleneck_peak = kUnknown;                                      ///< packets
};

struct Evidence {
    std::string kind;  ///< probe kind: throughput, rtt, rr, http, command
    // The path as configured (NaN: none).
    double rtt_configured = kUnknown, rate_configured = kUnknown, loss_configured = kUnknown;
    // TCP_INFO over the probe's connections.
    double min_rtt = kUnknown;  ///< smallest RTT TCP saw, s
    double srtt = kUnknown;     ///< smoothed RTT at the end, under load, s
    double mss = kUnknown;      ///< bytes
    std::string congestion_control;
    double rwnd_limited = kUnknown, sndbuf_limited = kUnknown;  ///< shares of busy time, 0..1
    double rcvbuf = kUnknown, sndbuf = kUnknown;                ///< the buffer one stream was granted, bytes
    double streams = kUnknown;
    // What the probe measured.
    double throughput = kUnknown;    ///< bit/s
    double rtt_p50 = kUnknown;       ///< an rtt probe's median RTT, s
    bool under_load = false;         ///< measured at the same time as a group's throughput probes
    double latency_mean = kUnknown;  ///< s per transaction or request
    double transactions = kUnknown;  ///< per repeat
    // Counters per repeat (diagnosis/counters.h).
    double client_delayed_acks = kUnknown;  ///< TcpExt.DelayedACKs on the client
    double cpu_busiest = kUnknown;          ///< the busiest CPU's busy share, 0..1
    std::string cpu_machine;                ///< hosts mode: the other machine it was on ("" = this one)
    bool client_quickack = false;           ///< the built-in client already quick-acks
    std::vector<QueueEvidence> queues;      ///< the emulated link's, per direction
};

struct Verdict {
    std::string rule;  ///< "delayed-ack-stall", "rate-bound", ...
    std::string text;  ///< the sentence: cause, numbers, and advice where it can help
};

/// The base RTT: configured, else TCP's minimum; NaN when neither is known.
double path_rtt(const Evidence& e);

std::optional<Verdict> receive_window_limited(const Evidence& e);
std::optional<Verdict> send_buffer_limited(const Evidence& e);
std::optional<Verdict> delayed_ack_stall(const Evidence& e);
std::optional<Verdict> rate_bound(const Evidence& e);
std::optional<Verdict> loss_bound(const Evidence& e);
std::optional<Verdict> queue_overflow(const Evidence& e);
std::optional<Verdict> bufferbloat(const Evidence& e);
std::optional<Verdict> cpu_bound(const Evidence& e);

/// The trial's own rule, before any probe's: its emulation check measured the path and found
/// it unlike its configuration (not `held`), so no number of the trial describes the
/// configured path. `note` is the check's ("up rate 8.0 Mbit/s for 20 Mbit/s configured").
std::optional<Verdict> emulation_not_held(bool held, const std::string& note);

/// Every rule of a probe's evidence that holds, in the order above.
std::vector<Verdict> diagnose(const Evidence& e);

}  // namespace wanlab::diagnosis
