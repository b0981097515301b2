#include "diagnosis/rules.h"

#include <fmt/format.h>

#include "diagnosis/qdisc_watch.h"
#include "probes/human.h"
#include "probes/probe_spec.h"

namespace wanlab::diagnosis {
namespace {

using probes::Unit;

std::string ms(double s) { return probes::human(Unit::seconds, s); }
std::string rate(double bps) { return probes::human(Unit::bits_per_second, bps); }
std::string bytes(double b) { return probes::human(Unit::bytes, b); }
bool known(double x) { return std::isfinite(x); }
// The measurement's kind, as the rules ask about it (probes/probe_spec.h).
const probes::ProbeTraits& kind_of(const Evidence& e) { return probes::traits_of(e.kind); }

// The window per round trip a buffer allows: with the default tcp_adv_win_scale (1) the
// kernel counts skb overhead against a socket buffer and about half of it carries data.
constexpr double kWindowShare = 0.5;

// A stream limited by its buffer moves at most one window per round trip. Reported when
// the share of busy time is a majority; the cap only when the measurement does not refute
// it (exceeds it by more than 25%).
std::optional<Verdict> buffer_limited(const Evidence& e, double share, double buffer, const char* rule,
                                      const char* limited, const char* which) {
    if (!kind_of(e).bulk_tcp || !(share > 0.5)) return std::nullopt;
    auto text = fmt::format("{} {:.0f}% of the time", limited, share * 100);
    double rtt = path_rtt(e);
    double cap = buffer * kWindowShare * 8 / rtt;
    if (buffer > 0 && rtt > 0 && !(e.throughput > 1.25 * cap))
        text += fmt::format(": {} of {} (about {} of window) caps one stream near {} at this RTT ({}{})", which,
                            bytes(buffer), bytes(buffer * kWindowShare), rate(cap), ms(rtt),
                            e.rtt_configured > 0 ? "" : " minimum measured");
    if (known(e.throughput))
        text += fmt::format("; measured {}{}", rate(e.throughput),
                            e.streams > 1 ? fmt::format(" over {:.0f} streams", e.streams) : "");
    return Verdict{rule, text};
}

// Whether a buffer limit TCP_INFO reported can be what set the measured number: the cap it
// implies (kWindowShare of the buffer per round trip, the lower estimate: newer kernels let
// more of a buffer be window) is not far above the measurement. A stream that carried under
// half of even that cap was held by something else (a receiver that did not drain its buffer,
// a cwnd cut by loss): its limited share is a fact, not the bound.
bool buffer_binds(const Evidence& e, double buffer) {
    double rtt = path_rtt(e);
    if (!(buffer > 0) || !(rtt > 0) || !known(e.throughput)) return true;
    return e.throughput >= 0.5 * buffer * kWindowShare * 8 / rtt;
}

// A full-size segment as a queue holds it (the lab's links carry real packets: offloads are
// off): the MSS plus TCP with timestamps, IPv4 and Ethernet headers; at MTU 1500, 1514.
double packet_bytes(const Evidence& e) { return e.mss > 0 ? e.mss + 12 + 20 + 20 + 14 : 1514; }

/// The bandwidth-delay product a queue of this path must hold, bytes; NaN when unknown. The
/// rate is the configured one, else what was measured (a queue without a rate of its own
/// fills at the sender's pace).
double bdp_bytes(const Evidence& e) {
    double r = e.rate_configured > 0 ? e.rate_configured : e.throughput;
    double rtt = path_rtt(e);
    return r > 0 && rtt > 0 ? r * rtt / 8 : kUnknown;
}

// What a full link's queue drops: the drops a loss-based stream finds the link's rate by, no
// fault of the limit (docs/diagnosis.md "One verdict per measurement").
std::string no_cost(double drops, double offered) {
    return fmt::format(
        "; the link was full, so these drops ({} of the packets) cost no throughput: a loss-based stream finds "
        "the link's rate by such drops, and a longer queue would only add delay",
        probes::human(Unit::fraction, drops / offered));
}

// netem's own drops beyond what its loss model explains: the queue limit's. "" when there
// are none to speak of (within 3 sigma of the model's expectation, binomial).
std::string netem_overflow(const Evidence& e, const QueueEvidence& q) {
    if (!known(q.netem_drops) || !known(q.netem_sent) || !(q.netem_limit > 0)) return "";
    double own = q.netem_drops - (known(q.child_drops) ? q.child_drops : 0);
    if (!(own >= 1)) return "";
    double offered = q.netem_sent + own;
    double p = known(q.loss) ? q.loss : 0;
    double expected = p * offered, sigma = std::sqrt(offered * p * (1 - p));
    double excess = own - expected;
    bool model_known = known(q.loss);
    // Without a known loss model only a queue seen at its limit says the limit dropped them.
    if (model_known ? !(excess > 3 * sigma + 1) : !(q.netem_peak >= 0.9 * q.netem_limit)) return "";
    auto text = fmt::format("queue overflow ({}): netem dropped {:.0f} of {:.0f} packets", q.direction, own, offered);
    if (model_known && p > 0)
        text += fmt::format(", {:.0f} more than its loss model's {} explains (about {:.0f})", excess,
                            probes::human(Unit::fraction, p), expected);
    else if (!model_known)
        text += " (its loss model's drops among them)";
    if (!known(q.netem_peak) || q.netem_peak >= 0.9 * q.netem_limit)
        text += fmt::format(
            ": its queue limit of {:.0f} packets was reached{}", q.netem_limit,
            known(q.netem_peak) ? fmt::format(" (peak {:.0f} queued, its delay line included)", q.netem_peak) : "");
    else  // the samples missed the peak: say what they saw, and what else drops
        text += fmt::format(
            ": besides its loss model only its queue limit of {:.0f} packets drops (the {} ms samples saw at "
            "most {:.0f} queued: it filled between them)",
            q.netem_limit, kQdiscSampleEvery.count(), q.netem_peak);
    if (!queue_drops_cost(e)) return text + no_cost(own, offered);
    double bdp = bdp_bytes(e);
    if (known(bdp) && q.netem_limit * packet_bytes(e) < bdp) {
        double need = std::ceil(bdp / packet_bytes(e));
        text += fmt::format(
            "; it holds {} of full-size packets, below the bandwidth-delay product {} ({:.0f} packets): netem "
            "keeps every packet of its delay for the whole delay, so a limit below the BDP drops what the path "
            "should carry. Raise [link] limit above {:.0f}",
            bytes(q.netem_limit * packet_bytes(e)), bytes(bdp), need, need);
    }
    return text;
}

// Drops of the fifo queue below the shaper (or the tbf's own): a bottleneck queue that
// overflowed. AQMs (fq_codel, cake) drop on purpose and have no known limit here.
std::string bottleneck_overflow(const Evidence& e, const QueueEvidence& q) {
    if (q.bottleneck.empty() || !(q.bottleneck_drops >= 1)) return "";
    double limit_bytes = q.bottleneck_limit_bytes > 0 ? q.bottleneck_limit_bytes
                         : q.bottleneck_limit > 0     ? q.bottleneck_limit * packet_bytes(e)
                                                      : kUnknown;
    if (!known(limit_bytes)) return "";
    auto limit = q.bottleneck_limit > 0 ? fmt::format("{:.0f} packets", q.bottleneck_limit) : bytes(limit_bytes);
    double offered = (known(q.bottleneck_sent) ? q.bottleneck_sent : 0) + q.bottleneck_drops;
    auto text = fmt::format("queue overflow ({}): the bottleneck queue ({}, limit {}) dropped {:.0f} of {:.0f} packets",
                            q.direction, q.bottleneck == "queue" ? "qdisc" : "the tbf shaper's own", limit,
                            q.bottleneck_drops, offered);
    if (known(q.bottleneck_peak)) text += fmt::format(" (peak {:.0f} queued)", q.bottleneck_peak);
    // A larger queue can only raise the goodput of a link that was not already full.
    if (!queue_drops_cost(e)) return text + no_cost(q.bottleneck_drops, offered);
    double bdp = bdp_bytes(e);
    if (known(bdp) && limit_bytes < bdp && kind_of(e).bulk_tcp)
        text += fmt::format(
            "; the queue is below the bandwidth-delay product {} ({:.0f} packets), so a loss-based stream backs off "
            "before it fills the link: a queue of one BDP ([link] qdisc_limit = {:.0f}) lets it, at the cost of "
            "up to one RTT of queueing delay",
            bytes(bdp), std::ceil(bdp / packet_bytes(e)), std::ceil(bdp / packet_bytes(e)));
    return text;
}

// Linux's delayed-ACK timer starts at TCP_DELACK_MIN (HZ/25 = 40 ms) and may grow up to
// TCP_DELACK_MAX (200 ms) on a quiet connection (include/net/tcp.h).
constexpr double kDelackMin = 0.040, kDelackMax = 0.200;

// A rule's sentence as the binding cause (with its advice) or as an observation beside another
// cause that binds (without advice that cause makes wrong).
enum class Form { binding, observed };

}  // namespace

double path_rtt(const Evidence& e) {
    if (e.rtt_configured > 0) return e.rtt_configured;
    if (e.min_rtt > 0) return e.min_rtt;
    return kUnknown;
}

std::optional<Verdict> receive_window_limited(const Evidence& e) {
    return buffer_limited(e, e.rwnd_limited, e.rcvbuf, "receive-window-limited", "receive-window limited",
                          "a receive buffer");
}

std::optional<Verdict> send_buffer_limited(const Evidence& e) {
    return buffer_limited(e, e.sndbuf_limited, e.sndbuf, "send-buffer-limited", "send-buffer limited", "a send buffer");
}

std::optional<Verdict> delayed_ack_stall(const Evidence& e) {
    const char* one = kind_of(e).exchange;  // "transaction", "request"
    if (!one) return std::nullopt;
    if (!known(e.latency_mean) || !(e.transactions > 0) || !known(e.client_delayed_acks)) return std::nullopt;
    double base = known(path_rtt(e)) ? path_rtt(e) : 0;
    double excess = e.latency_mean - base;
    // The wait is the timer (minus a little: it runs from the segment's arrival), not more
    // than its longest value plus scheduling.
    if (excess < kDelackMin * 0.85 || excess > kDelackMax * 1.1) return std::nullopt;
    double per_request = e.client_delayed_acks / e.transactions;
    if (per_request < 0.5) return std::nullopt;  // most requests did not wait on the timer
    auto over = base > 0 ? fmt::format(", {} more than the path's RTT ({})", ms(excess), ms(base)) : std::string();
    auto text = fmt::format(
        "delayed-ACK stall: a {} took {} on average{}, near the kernel's {} delayed-ACK timer; the client's timer "
        "fired {:.0f} times for {:.0f} {}s (TcpExt.DelayedACKs, {:.2f} per {}): the server holds the rest of each "
        "answer (Nagle) until its first part is acknowledged, and the client delays that ACK. Cures: TCP_NODELAY "
        "on the server (nginx: tcp_nodelay on; the built-in rr/http server: server_nodelay = true)",
        one, ms(e.latency_mean), over, ms(kDelackMin), e.client_delayed_acks, e.transactions, one, per_request, one);
    // Quick-ack on a client that already sets it cannot change the result.
    if (!e.client_quickack) text += ", or TCP_QUICKACK on the client (client_quickack = true)";
    return Verdict{"delayed-ack-stall", text};
}

std::optional<Verdict> rate_bound(const Evidence& e) {
    if (!kind_of(e).bulk_tcp || !(e.rate_configured > 0) || !known(e.throughput)) return std::nullopt;
    if (!link_full(e)) return std::nullopt;
    double share = e.throughput / e.rate_configured;
    return Verdict{"rate-bound",
                   fmt::format("rate-bound: {} of the configured {} ({:.0f}%): the emulated link's rate sets this "
                               "number; larger socket buffers or another congestion control cannot raise it",
                               rate(e.throughput), rate(e.rate_configured), share * 100)};
}

namespace {

std::optional<Verdict> loss_bound_as(const Evidence& e, Form form) {
    if (!kind_of(e).bulk_tcp || !(e.loss_configured > 0) || !known(e.throughput)) return std::nullopt;
    double rtt = path_rtt(e);
    if (!(rtt > 0)) return std::nullopt;
    if (link_full(e)) return std::nullopt;
    double mss = e.mss > 0 ? e.mss : 1448;
    // Mathis et al. 1997: one loss-based stream carries about MSS/RTT * C/sqrt(p), C = sqrt(3/2).
    double bound = mss * 8 / rtt * std::sqrt(1.5) / std::sqrt(e.loss_configured);
    double ratio = e.throughput / bound;
    if (ratio < 0.25 || ratio > 2.5) return std::nullopt;  // another cause, or a cc that ignores random loss
    auto text = fmt::format(
        "loss-bound: {} loss at {} RTT allows one loss-based stream about {} (MSS / (RTT x sqrt(p)) x 1.22, "
        "Mathis et al.); measured {} ({:.1f}x)",
        probes::human(Unit::fraction, e.loss_configured), ms(rtt), rate(bound), rate(e.throughput), ratio);
    // Beside a window or a queue that binds, bbr would meet that bound instead.
    if (e.congestion_control != "bbr" && form == Form::binding)
        text += fmt::format(
            "; {} backs off on every loss: bbr, which does not read random loss as congestion, "
            "can carry more",
            e.congestion_control.empty() ? "this congestion control" : e.congestion_control);
    return Verdict{"loss-bound", text};
}

// `shorter_queue`: whether a shorter queue limit may be advised (not beside a queue limit
// blamed for drops that cost the measurement).
std::optional<Verdict> bufferbloat_as(const Evidence& e, bool shorter_queue) {
    // The loaded RTT: TCP's own under its load, or an rtt probe's beside a group's bulk flows.
    const bool pinged = kind_of(e).measures_rtt && e.under_load;
    if (!kind_of(e).bulk_tcp && !pinged) return std::nullopt;
    double loaded = pinged ? e.rtt_p50 : e.srtt;
    if (!known(loaded)) return std::nullopt;
    double base = path_rtt(e);
    if (!(base > 0)) return std::nullopt;
    double queue = loaded - base;
    if (loaded < 2 * base || queue < 0.010) return std::nullopt;
    auto text = fmt::format("bufferbloat: RTT under load {}{} against the path's {}: a standing queue of {}",
                            ms(loaded), pinged ? " (median, beside the group's bulk flows)" : "", ms(base), ms(queue));
    if (e.rate_configured > 0) {
        text += fmt::format(" (about {} at {})", probes::human(Unit::bytes, queue * e.rate_configured / 8),
                            rate(e.rate_configured));
        // Only the emulated queue is wanlab's to change.
        text += shorter_queue
                    ? "; an AQM on the link (qdisc = \"fq_codel\") or a shorter queue limit keeps the delay down"
                    : "; an AQM on the link (qdisc = \"fq_codel\") keeps the delay down";
    }
    return Verdict{"bufferbloat", text};
}

std::optional<Verdict> cpu_bound_as(const Evidence& e, Form form) {
    if (!(e.cpu_busiest >= 0.90)) return std::nullopt;
    auto on = e.cpu_machine.empty() ? std::string() : " of the " + e.cpu_machine + " machine";
    if (form == Form::observed)
        return Verdict{"cpu-bound",
                       fmt::format("a busy CPU: one CPU{} was busy {:.0f}% of the measurement, near its limit too", on,
                                   e.cpu_busiest * 100)};
    return Verdict{"cpu-bound",
                   fmt::format("CPU-bound: one CPU{} was busy {:.0f}% of the measurement: the endpoints or the "
                               "emulation, not the network, may set this number",
                               on, e.cpu_busiest * 100)};
}

// A verdict that another cause binds: said again without advice the binding one makes wrong.
Verdict observed(const Evidence& e, Verdict v, const std::string& binding) {
    if (v.rule == "loss-bound") v = *loss_bound_as(e, Form::observed);
    if (v.rule == "cpu-bound") v = *cpu_bound_as(e, Form::observed);
    if (v.rule == "bufferbloat") v = *bufferbloat_as(e, binding != "queue-overflow");
    v.role = Role::observed;
    return v;
}

}  // namespace

std::optional<Verdict> loss_bound(const Evidence& e) { return loss_bound_as(e, Form::binding); }

std::optional<Verdict> queue_overflow(const Evidence& e) {
    std::vector<std::string> parts;
    for (const auto& q : e.queues)
        for (auto part : {netem_overflow(e, q), bottleneck_overflow(e, q)})
            if (!part.empty()) parts.push_back(std::move(part));
    if (parts.empty()) return std::nullopt;
    std::string text;
    for (const auto& p : parts) text += (text.empty() ? "" : "; ") + p;
    return Verdict{"queue-overflow", text};
}

std::optional<Verdict> bufferbloat(const Evidence& e) { return bufferbloat_as(e, true); }

std::optional<Verdict> cpu_bound(const Evidence& e) { return cpu_bound_as(e, Form::binding); }

std::optional<Verdict> emulation_not_held(bool held, const std::string& note) {
    if (held) return std::nullopt;
    return Verdict{
        "emulation-not-held",
        fmt::format("emulation did not hold: {}; this trial's numbers do not describe the configured path", note)};
}

std::optional<Verdict> schedule_rate_bound(const Evidence& e) {
    if (!kind_of(e).bulk_tcp || !(e.schedule_rate > 0) || !known(e.throughput)) return std::nullopt;
    if (!(e.throughput >= 0.85 * e.schedule_rate)) return std::nullopt;
    // Every phase full too: a phase that fell short (loss, a window, a ramp after a change)
    // had room that something else left unused, however full the whole was.
    for (const auto& p : e.phases) {
        const double length = p.to - p.from, outage = p.outage > 0 ? p.outage : 0;
        if (outage >= 0.5 * length || !(p.rate > 0) || !known(p.throughput)) continue;
        if (p.throughput < 0.85 * p.rate * length / (length - outage)) return std::nullopt;
    }
    auto outage =
        e.schedule_outage > 0 ? fmt::format(", its {} of outage counted as nothing", ms(e.schedule_outage)) : "";
    return Verdict{
        "rate-bound",
        fmt::format("rate-bound: {} of the {} the link's schedule allowed on average over the measurement "
                    "({:.0f}%: the rates in force, weighted by how long each held{}): the schedule sets "
                    "this number; larger socket buffers or another congestion control cannot raise it",
                    rate(e.throughput), rate(e.schedule_rate), e.throughput / e.schedule_rate * 100, outage)};
}

namespace {

// One phase of a bulk stream against the state in force in it.
std::string phase_throughput(const Evidence& e, const PhaseEvidence& p) {
    const double length = p.to - p.from;
    std::string text = fmt::format("median throughput {}", rate(p.throughput));
    const double outage = p.outage > 0 ? p.outage : 0;
    // Half of the phase or more without a packet: its median is the outage's.
    if (outage > 0 && outage >= 0.5 * length)
        return text + fmt::format(
                          " during an outage of {}: nothing passes, so the dip is the outage, not loss or "
                          "a window",
                          ms(outage));
    if (outage > 0) text += fmt::format(" (after an outage of {})", ms(outage));
    // The rate of the state in force outside the outage.
    const double in_force = p.rate > 0 && length > outage ? p.rate * length / (length - outage) : kUnknown;
    if (in_force > 0 && p.throughput >= 0.85 * in_force)
        return text +
               fmt::format(", {:.0f}% of the {} in force: the rate", p.throughput / in_force * 100, rate(in_force));
    const double rtt = p.rtt > 0 ? p.rtt : path_rtt(e);
    if (p.loss > 0 && rtt > 0) {
        const double mss = e.mss > 0 ? e.mss : 1448;
        const double bound = mss * 8 / rtt * std::sqrt(1.5) / std::sqrt(p.loss);
        const double ratio = p.throughput / bound;
        if (ratio >= 0.25 && ratio <= 2.5)
            return text + fmt::format(
                              ", {:.1f}x the {} that {} loss at {} allows one loss-based stream (Mathis et "
                              "al.): loss-bound{}",
                              ratio, rate(bound), probes::human(Unit::fraction, p.loss), ms(rtt),
                              in_force > 0 ? fmt::format(", below the {} in force", rate(in_force)) : "");
    }
    if (in_force > 0)
        text += fmt::format(", {:.0f}% of the {} in force", p.throughput / in_force * 100, rate(in_force));
    return text;
}

// One phase of an RTT probe against the delay in force in it.
std::string phase_rtt(const PhaseEvidence& p) {
    std::string text = fmt::format("median RTT {}", ms(p.rtt_p50));
    if (p.outage > 0) text += fmt::format(" (an outage of {} in it)", ms(p.outage));
    if (!(p.rtt > 0)) return text;
    const double queue = p.rtt_p50 - p.rtt;
    if (p.rtt_p50 >= 2 * p.rtt && queue >= 0.010)
        return text +
               fmt::format(" against the {} in force: a standing queue of {} (bufferbloat)", ms(p.rtt), ms(queue));
    return text + fmt::format(", the {} in force {}", ms(p.rtt),
                              queue >= 0 ? fmt::format("and {} of queueing", ms(queue)) : std::string("and no queue"));
}

}  // namespace

std::optional<Verdict> schedule_phases(const Evidence& e) {
    if (e.phases.size() < 2) return std::nullopt;
    const bool bulk = kind_of(e).bulk_tcp, pinged = kind_of(e).measures_rtt;
    std::string text;
    for (const auto& p : e.phases) {
        std::string what;
        if (bulk && known(p.throughput))
            what = phase_throughput(e, p);
        else if (pinged && known(p.rtt_p50))
            what = phase_rtt(p);
        if (what.empty()) continue;
        text += fmt::format("{}{} {:.2f}-{:.2f} s: {}", text.empty() ? "" : "; ",
                            p.entry > 0 ? fmt::format("#{:.0f}", p.entry) : std::string("[link]"), p.from, p.to, what);
    }
    if (text.empty()) return std::nullopt;
    return Verdict{"schedule-phases", "each phase of the link's schedule against the state in force in it: " + text};
}

std::optional<Verdict> link_changed(const Evidence& e) {
    if (!(e.schedule_changes >= 0)) return std::nullopt;
    std::string late;
    if (e.schedule_late_median >= 0 && e.schedule_changes > 0)
        late = fmt::format(", each landing {} after its planned instant (median; p99 {}, at most {})",
                           ms(e.schedule_late_median), ms(e.schedule_late_p99), ms(e.schedule_late_max));
    return Verdict{
        "link-schedule",
        fmt::format("the link changed during each repeat ({:.0f} change{} in place, as its schedule or trace says{}): "
                    "the rules that compare a measurement with [link]'s fixed rate, loss and RTT "
                    "(queue-overflow, loss-bound, bufferbloat) do not apply, and rate-bound compares with the "
                    "rate the schedule allowed; the series link.up.rate, link.up.delay and link.up.loss (and "
                    "down) beside the measured ones show what held when",
                    e.schedule_changes, e.schedule_changes == 1 ? "" : "s", late)};
}

std::vector<Verdict> diagnose(const Evidence& e) {
    // The rules in their order of precedence, each with whether it can set this measurement's
    // number (docs/diagnosis.md "One verdict per measurement"). Under a schedule, those that
    // compare with [link]'s fixed figures have nothing fixed to compare with.
    const bool fixed = !(e.schedule_changes >= 0);
    const std::pair<std::optional<Verdict>, bool> found[] = {
        {fixed ? rate_bound(e) : schedule_rate_bound(e), true},
        {receive_window_limited(e), buffer_binds(e, e.rcvbuf)},
        {send_buffer_limited(e), buffer_binds(e, e.sndbuf)},
        {delayed_ack_stall(e), true},
        {fixed ? queue_overflow(e) : std::nullopt, queue_drops_cost(e) && !kind_of(e).measures_rtt},
        {fixed ? loss_bound(e) : std::nullopt, true},
        {fixed ? bufferbloat(e) : std::nullopt, kind_of(e).measures_rtt},
        {cpu_bound(e), true},
        {schedule_phases(e), false},
        {link_changed(e), false},
    };
    std::vector<Verdict> out;
    for (const auto& [v, can_bind] : found)
        if (v && can_bind) {
            out.push_back(*v);
            out.back().role = Role::binding;
            break;
        }
    const std::string binding = out.empty() ? "" : out.front().rule;
    for (const auto& [v, can_bind] : found)
        if (v && v->rule != binding) out.push_back(binding.empty() ? *v : observed(e, *v, binding));
    return out;
}

const char* to_string(Role r) { return r == Role::binding ? "binding" : "observed"; }

bool link_full(const Evidence& e) {
    // Goodput is the rate less the headers (~5% at a 1500-byte MTU): 85% is the link, full.
    return e.rate_configured > 0 && e.throughput >= 0.85 * e.rate_configured;
}

bool queue_drops_cost(const Evidence& e) { return !kind_of(e).bulk_tcp || !link_full(e); }

}  // namespace wanlab::diagnosis
