// Diagnosis: each rule a small function from the evidence of one probe in one trial to a
// verdict that names a cause and cites its numbers, or nothing when its evidence does not hold.
//
// Contract: pure. Evidence holds medians over a probe's repeats in base units; NaN means
// "not recorded", and a rule whose evidence is NaN says nothing. A verdict never contradicts
// the measurement: the path's RTT is the configured one, else TCP's minimum, never an RTT
// taken under load. Advice is given only where following it can change the result.
// One verdict per measurement: diagnose() names the cause that binds the measured number first
// (Role::binding) with its advice, and the rest as observations whose text gives no advice
// against it. Thresholds, the order of precedence and their sources: docs/diagnosis.md.
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

/// One phase of a scheduled link (one [[link.schedule]] entry: run/schedule_check.h
/// phases_of()), medians over the repeats.
struct PhaseEvidence {
    double entry = kUnknown;                ///< 0: [link] itself
    double from = kUnknown, to = kUnknown;  ///< s from the start of each repeat
    /// What the link allowed in it: the slowest direction's rate, time-weighted (an outage
    /// counts 0; NaN: no rate), the seconds of outage, the RTT and loss of its own state.
    double rate = kUnknown, outage = kUnknown, rtt = kUnknown, loss = kUnknown;
    /// What was measured in it: the medians of the throughput and RTT series.
    double throughput = kUnknown, rtt_p50 = kUnknown;
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
    /// The link changed during each repeat ([[link.schedule]]): changes per repeat (NaN: none),
    /// and how late they landed, s (medians over the repeats; the max the largest).
    double schedule_changes = kUnknown;
    double schedule_late_median = kUnknown, schedule_late_p99 = kUnknown, schedule_late_max = kUnknown;
    /// What the schedule allowed over the whole measurement: the slowest direction's rate,
    /// time-weighted (an outage counts 0; NaN: unknown), and the seconds of outage.
    double schedule_rate = kUnknown, schedule_outage = kUnknown;
    std::vector<PhaseEvidence> phases;  ///< empty: no [[link.schedule]] entries (a trace has none)
};

/// What a verdict is to its measurement: the cause that set the measured number, or something
/// else the evidence shows (which did not set it, or could not be shown to).
enum class Role { binding, observed };

/// "binding" or "observed", as the report's JSON spells it.
const char* to_string(Role r);

struct Verdict {
    std::string rule;            ///< "delayed-ack-stall", "rate-bound", ...
    std::string text;            ///< the sentence: cause, numbers, and advice where it can help
    Role role = Role::observed;  ///< set by diagnose(); a rule on its own says nothing of precedence
};

/// The base RTT: configured, else TCP's minimum; NaN when neither is known.
double path_rtt(const Evidence& e);

std::optional<Verdict> receive_window_limited(const Evidence& e);
std::optional<Verdict> send_buffer_limited(const Evidence& e);
std::optional<Verdict> delayed_ack_stall(const Evidence& e);
std::optional<Verdict> rate_bound(const Evidence& e);
std::optional<Verdict> loss_bound(const Evidence& e);
/// Drops beyond the loss model, by netem's limit or the bottleneck queue's. The limit is
/// blamed (and advice to raise it given) only where the drops cost throughput: a bulk stream
/// below the configured rate (queue_drops_cost()); a full link's drops are named as a fact.
std::optional<Verdict> queue_overflow(const Evidence& e);
std::optional<Verdict> bufferbloat(const Evidence& e);
std::optional<Verdict> cpu_bound(const Evidence& e);
/// Under a schedule or trace: a bulk stream that carried at least 85% of the rate the link's
/// states allowed on average over the measurement (an outage counting 0) was bound by it.
std::optional<Verdict> schedule_rate_bound(const Evidence& e);
/// Under a schedule: what bound each phase, read against the state in force in it (an
/// outage's dip is the outage; otherwise the rate in force, the loss in force by Mathis's
/// bound, or a standing queue over the delay in force), or only how far below the rate it was.
std::optional<Verdict> schedule_phases(const Evidence& e);
/// The link changed during the measurement: the rules that compare it with [link]'s fixed
/// rate, loss and RTT (rate-bound, queue-overflow, loss-bound, bufferbloat) do not apply (the
/// rate is compared with what the schedule allowed, each phase with its own state), and this
/// says so (an observation: a schedule is the experiment, not a cause to fix).
std::optional<Verdict> link_changed(const Evidence& e);

/// The trial's own rule, before any probe's: its emulation check measured the path and found
/// it unlike its configuration (not `held`), so no number of the trial describes the
/// configured path. `note` is the check's ("up rate 8.0 Mbit/s for 20 Mbit/s configured").
std::optional<Verdict> emulation_not_held(bool held, const std::string& note);

/// The link carried at least 85% of its configured rate (goodput less ~5% of headers: full).
bool link_full(const Evidence& e);

/// Whether a queue's drops can have cost this measurement: for a bulk stream, when the link
/// was not full (a full link's drops are how a loss-based stream finds its rate, and a larger
/// queue only adds delay); for a probe that times exchanges or pings, always (a lost packet
/// waits a retransmission).
bool queue_drops_cost(const Evidence& e);

/// Every rule of a probe's evidence that holds. The first, when any rule that can set this
/// kind of measurement holds, is the binding one (Role::binding), in this order of precedence:
/// rate-bound, receive-window-limited and send-buffer-limited (where the measurement is at
/// least half the cap the buffer implies), delayed-ack-stall, queue-overflow
/// (where its drops cost throughput), loss-bound, bufferbloat (of a probe that measures RTT,
/// never of a throughput), cpu-bound. The others follow in that order as Role::observed, their
/// advice withheld where it goes against the binding verdict's. At most one is binding; none
/// when nothing holds that can set the number (a throughput probe that only saw a queue).
std::vector<Verdict> diagnose(const Evidence& e);

}  // namespace wanlab::diagnosis
