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
#include <optional>
#include <string>
#include <vector>

namespace wanlab::diagnosis {

inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

struct Evidence {
    std::string kind;  ///< probe kind: throughput, rtt, rr, http, command
    // The path as configured (NaN: none).
    double rtt_configured = kUnknown, rate_configured = kUnknown, loss_configured = kUnknown;
    // TCP_INFO over the probe's connections.
    double min_rtt = kUnknown;  ///< smallest RTT TCP saw, s
    double srtt = kUnknown;     ///< smoothed RTT at the end, under load, s
    double mss = kUnknown;      ///< bytes
    std::string congestion_control;
    // What the probe measured.
    double throughput = kUnknown;    ///< bit/s
    double latency_mean = kUnknown;  ///< s per transaction or request
    double transactions = kUnknown;  ///< per repeat
    // Counters per repeat (diagnosis/counters.h).
    double client_delayed_acks = kUnknown;  ///< TcpExt.DelayedACKs on the client
    double cpu_busiest = kUnknown;          ///< the busiest CPU's busy share, 0..1
    bool client_quickack = false;           ///< the built-in client already quick-acks
};

struct Verdict {
    std::string rule;  ///< "delayed-ack-stall", "rate-bound", ...
    std::string text;  ///< the sentence: cause, numbers, and advice where it can help
};

/// The base RTT: configured, else TCP's minimum; NaN when neither is known.
double path_rtt(const Evidence& e);

std::optional<Verdict> delayed_ack_stall(const Evidence& e);
std::optional<Verdict> rate_bound(const Evidence& e);
std::optional<Verdict> loss_bound(const Evidence& e);
std::optional<Verdict> bufferbloat(const Evidence& e);
std::optional<Verdict> cpu_bound(const Evidence& e);

/// Every rule that holds, in the order above.
std::vector<Verdict> diagnose(const Evidence& e);

}  // namespace wanlab::diagnosis
