#include "probes/tcp_info.h"

#include <linux/tcp.h>  // the full struct tcp_info (glibc's netinet/tcp.h lacks the chrono fields)
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <utility>

#include <fmt/format.h>

#include "core/sys.h"

namespace wanlab::probes {
namespace {

// The kernel's ssthresh before the first loss (TCP_INFINITE_SSTHRESH).
constexpr std::uint32_t kInfiniteSsthresh = 0x7fffffff;

struct Raw {
    ::tcp_info ti{};
    socklen_t len = 0;
    /// Whether the kernel filled `field` (its struct may be older than ours).
    bool has(std::size_t end_offset) const { return len >= end_offset; }
};

#define WANLAB_HAS(raw, field) (raw).has(offsetof(::tcp_info, field) + sizeof((raw).ti.field))

bool read_raw(int fd, Raw& r) {
    r.len = sizeof r.ti;
    return ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &r.ti, &r.len) == 0;
}

std::map<std::string, double> decode(const Raw& r) {
    const ::tcp_info& ti = r.ti;
    std::map<std::string, double> v{
        {"retransmits", ti.tcpi_total_retrans},
        {"rtt", ti.tcpi_rtt / 1e6},
        {"rttvar", ti.tcpi_rttvar / 1e6},
        {"cwnd", ti.tcpi_snd_cwnd},
        {"mss", ti.tcpi_snd_mss},
        // Linux's tcp_packets_in_flight(): sent and not yet acknowledged, sacked or lost.
        {"in_flight",
         (static_cast<double>(ti.tcpi_unacked) - ti.tcpi_sacked - ti.tcpi_lost + ti.tcpi_retrans) * ti.tcpi_snd_mss},
        {"rcv_space", ti.tcpi_rcv_space},
    };
    if (ti.tcpi_snd_ssthresh < kInfiniteSsthresh) v["ssthresh"] = ti.tcpi_snd_ssthresh;
    if (WANLAB_HAS(r, tcpi_max_pacing_rate) && ti.tcpi_pacing_rate != ~0ULL)
        v["pacing_rate"] = static_cast<double>(ti.tcpi_pacing_rate) * 8;
    if (WANLAB_HAS(r, tcpi_bytes_acked)) v["bytes_acked"] = static_cast<double>(ti.tcpi_bytes_acked);
    if (WANLAB_HAS(r, tcpi_notsent_bytes)) v["notsent_bytes"] = ti.tcpi_notsent_bytes;
    if (WANLAB_HAS(r, tcpi_min_rtt)) v["min_rtt"] = ti.tcpi_min_rtt / 1e6;
    if (WANLAB_HAS(r, tcpi_delivery_rate)) v["delivery_rate"] = static_cast<double>(ti.tcpi_delivery_rate) * 8;
    if (WANLAB_HAS(r, tcpi_sndbuf_limited)) {
        double busy = static_cast<double>(ti.tcpi_busy_time);
        v["busy_time"] = busy / 1e6;
        v["rwnd_limited_time"] = static_cast<double>(ti.tcpi_rwnd_limited) / 1e6;
        v["sndbuf_limited_time"] = static_cast<double>(ti.tcpi_sndbuf_limited) / 1e6;
        v["rwnd_limited"] = busy > 0 ? static_cast<double>(ti.tcpi_rwnd_limited) / busy : 0;
        v["sndbuf_limited"] = busy > 0 ? static_cast<double>(ti.tcpi_sndbuf_limited) / busy : 0;
    }
    if (WANLAB_HAS(r, tcpi_snd_wnd)) v["snd_wnd"] = ti.tcpi_snd_wnd;
    return v;
}

#undef WANLAB_HAS

// What a series shows of the sender: gauges as they are, counters as deltas per interval.
// (tcp_info()'s name, the series' name): the smoothed RTT is "srtt" beside min_rtt.
constexpr std::pair<const char*, const char*> kGauges[] = {{"cwnd", "cwnd"},
                                                           {"ssthresh", "ssthresh"},
                                                           {"rtt", "srtt"},
                                                           {"min_rtt", "min_rtt"},
                                                           {"delivery_rate", "delivery_rate"},
                                                           {"pacing_rate", "pacing_rate"},
                                                           {"in_flight", "in_flight"},
                                                           {"snd_wnd", "snd_wnd"},
                                                           {"notsent_bytes", "notsent_bytes"}};
constexpr const char* kCounters[] = {"retransmits", "busy_time", "rwnd_limited_time", "sndbuf_limited_time"};

}  // namespace

std::map<std::string, double> tcp_info(int fd) {
    Raw r;
    if (!read_raw(fd, r)) sys::fail_errno("reading TCP_INFO");
    return decode(r);
}

void TcpSampler::sample(double t, int n, int sender_fd, int receiver_fd, std::map<std::string, Series>& out) {
    Raw sender, receiver;
    auto name = [n](const char* field) { return fmt::format("stream{}.{}", n, field); };
    if (read_raw(sender_fd, sender)) {  // a stream that is gone has nothing more to show
        auto v = decode(sender);
        for (const auto& [field, series] : kGauges)
            if (auto it = v.find(field); it != v.end()) out[name(series)].add(t, it->second);
        auto& last = last_[n];
        for (const char* c : kCounters) {
            auto it = v.find(c);
            if (it == v.end()) continue;
            auto before = last.find(c);
            out[name(c)].add(t, before == last.end() ? it->second : it->second - before->second);
            last[c] = it->second;
        }
    }
    if (read_raw(receiver_fd, receiver)) out[name("rcv_space")].add(t, receiver.ti.tcpi_rcv_space);
}

}  // namespace wanlab::probes
