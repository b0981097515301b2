#include "diagnosis/rules.h"

#include <fmt/format.h>

#include "probes/human.h"

namespace wanlab::diagnosis {
namespace {

using probes::Unit;

std::string ms(double s) { return probes::human(Unit::seconds, s); }
std::string rate(double bps) { return probes::human(Unit::bits_per_second, bps); }
bool known(double x) { return std::isfinite(x); }

// Linux's delayed-ACK timer starts at TCP_DELACK_MIN (HZ/25 = 40 ms) and may grow up to
// TCP_DELACK_MAX (200 ms) on a quiet connection (include/net/tcp.h).
constexpr double kDelackMin = 0.040, kDelackMax = 0.200;

}  // namespace

double path_rtt(const Evidence& e) {
    if (e.rtt_configured > 0) return e.rtt_configured;
    if (e.min_rtt > 0) return e.min_rtt;
    return kUnknown;
}

std::optional<Verdict> delayed_ack_stall(const Evidence& e) {
    if (e.kind != "rr" && e.kind != "http") return std::nullopt;
    if (!known(e.latency_mean) || !(e.transactions > 0) || !known(e.client_delayed_acks)) return std::nullopt;
    double base = known(path_rtt(e)) ? path_rtt(e) : 0;
    double excess = e.latency_mean - base;
    // The wait is the timer (minus a little: it runs from the segment's arrival), not more
    // than its longest value plus scheduling.
    if (excess < kDelackMin * 0.85 || excess > kDelackMax * 1.1) return std::nullopt;
    double per_request = e.client_delayed_acks / e.transactions;
    if (per_request < 0.5) return std::nullopt;  // most requests did not wait on the timer
    const char* one = e.kind == "http" ? "request" : "transaction";
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
    if (e.kind != "throughput" || !(e.rate_configured > 0) || !known(e.throughput)) return std::nullopt;
    double share = e.throughput / e.rate_configured;
    // Goodput is the rate less the headers (~5% at a 1500-byte MTU): 85% is the link, full.
    if (share < 0.85) return std::nullopt;
    return Verdict{"rate-bound",
                   fmt::format("rate-bound: {} of the configured {} ({:.0f}%): the emulated link's rate sets this "
                               "number; larger socket buffers or another congestion control cannot raise it",
                               rate(e.throughput), rate(e.rate_configured), share * 100)};
}

std::optional<Verdict> loss_bound(const Evidence& e) {
    if (e.kind != "throughput" || !(e.loss_configured > 0) || !known(e.throughput)) return std::nullopt;
    double rtt = path_rtt(e);
    if (!(rtt > 0)) return std::nullopt;
    if (e.rate_configured > 0 && e.throughput >= 0.85 * e.rate_configured) return std::nullopt;
    double mss = e.mss > 0 ? e.mss : 1448;
    // Mathis et al. 1997: one loss-based stream carries about MSS/RTT * C/sqrt(p), C = sqrt(3/2).
    double bound = mss * 8 / rtt * std::sqrt(1.5) / std::sqrt(e.loss_configured);
    double ratio = e.throughput / bound;
    if (ratio < 0.25 || ratio > 2.5) return std::nullopt;  // another cause, or a cc that ignores random loss
    auto text = fmt::format(
        "loss-bound: {} loss at {} RTT allows one loss-based stream about {} (MSS / (RTT x sqrt(p)) x 1.22, "
        "Mathis et al.); measured {} ({:.1f}x)",
        probes::human(Unit::fraction, e.loss_configured), ms(rtt), rate(bound), rate(e.throughput), ratio);
    if (e.congestion_control != "bbr")
        text += fmt::format(
            "; {} backs off on every loss: bbr, which does not read random loss as congestion, "
            "can carry more",
            e.congestion_control.empty() ? "this congestion control" : e.congestion_control);
    return Verdict{"loss-bound", text};
}

std::optional<Verdict> bufferbloat(const Evidence& e) {
    if (e.kind != "throughput" || !known(e.srtt)) return std::nullopt;
    double base = path_rtt(e);
    if (!(base > 0)) return std::nullopt;
    double queue = e.srtt - base;
    if (e.srtt < 2 * base || queue < 0.010) return std::nullopt;
    auto text = fmt::format("bufferbloat: RTT under load {} against the path's {}: a standing queue of {}", ms(e.srtt),
                            ms(base), ms(queue));
    if (e.rate_configured > 0) {
        text += fmt::format(" (about {} at {})", probes::human(Unit::bytes, queue * e.rate_configured / 8),
                            rate(e.rate_configured));
        // Only the emulated queue is wanlab's to change.
        text += "; an AQM on the link (qdisc = \"fq_codel\") or a shorter queue limit keeps the delay down";
    }
    return Verdict{"bufferbloat", text};
}

std::optional<Verdict> cpu_bound(const Evidence& e) {
    if (!(e.cpu_busiest >= 0.90)) return std::nullopt;
    return Verdict{"cpu-bound",
                   fmt::format("CPU-bound: one CPU was busy {:.0f}% of the measurement: the endpoints or the "
                               "emulation, not the network, may set this number",
                               e.cpu_busiest * 100)};
}

std::vector<Verdict> diagnose(const Evidence& e) {
    std::vector<Verdict> out;
    for (auto rule : {delayed_ack_stall, rate_bound, loss_bound, bufferbloat, cpu_bound})
        if (auto v = rule(e)) out.push_back(std::move(*v));
    return out;
}

}  // namespace wanlab::diagnosis
