#include "netem/tc_command.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/units.h"

namespace wanlab::netem {
namespace {

using units::format_duration;
using units::format_percent;

void percent_with_correlation(std::string& out, const char* word, double p, double corr) {
    out += fmt::format(" {} {}", word, format_percent(p));
    if (corr > 0) out += " " + format_percent(corr);
}

std::string loss_arguments(const Netem& n) {
    const Loss& l = n.loss;
    switch (l.model) {
        case Loss::Model::random: {
            std::string out = " loss random " + format_percent(l.probability);
            if (l.correlation > 0) out += " " + format_percent(l.correlation);
            return out;
        }
        case Loss::Model::gemodel:
            return fmt::format(" loss gemodel {} {} {} {}", format_percent(l.probability), format_percent(l.r),
                               format_percent(l.one_minus_h), format_percent(l.one_minus_k));
        case Loss::Model::state:
            return fmt::format(" loss state {} {} {} {} {}", format_percent(l.probability), format_percent(l.r),
                               format_percent(l.one_minus_h), format_percent(l.one_minus_k), format_percent(l.p14));
        default: return {};
    }
}

std::string slot_arguments(const Slot& s) {
    std::string out = " slot";
    if (s.distribution.empty())
        out += fmt::format(" {} {}", format_duration(s.min_delay), format_duration(s.max_delay));
    else
        out += fmt::format(" distribution {} {} {}", s.distribution, format_duration(s.dist_delay),
                           format_duration(s.dist_jitter));
    if (s.packets) out += fmt::format(" packets {}", s.packets);
    if (s.bytes) out += fmt::format(" bytes {}", s.bytes);
    return out;
}

// tbf needs a bucket of at least one MTU-sized packet; 1 ms worth of tokens (at least two
// MTUs) keeps the burst small against the delays a WAN lab configures.
std::uint64_t tbf_burst(std::uint64_t rate_bps, std::uint32_t mtu) {
    return std::max<std::uint64_t>(rate_bps / 8 / 1000, 2ull * (mtu + 14));
}

std::string queue_arguments(const Direction& d) {
    std::string out = to_string(d.queue);
    if (d.queue_limit == 0) return out;
    if (d.queue == Queue::bfifo) return out + fmt::format(" limit {}", d.queue_limit);
    if (d.queue == Queue::cake) return out + fmt::format(" memlimit {}", queue_size(d));
    return out + fmt::format(" limit {}", d.queue_limit);
}

std::string u32_match(const Filter& f) {
    std::string out;
    if (!f.prefix.empty()) out += fmt::format(" match ip {} {}", f.match_source ? "src" : "dst", f.prefix);
    if (f.port) out += fmt::format(" match ip {} {} 0xffff", f.match_source ? "sport" : "dport", f.port);
    if (out.empty()) out = " match u32 0 0";
    return out;
}

}  // namespace

std::string netem_arguments(const Netem& n) {
    std::string out = fmt::format("limit {}", n.limit_packets);
    if (n.delay.count() || n.jitter.count()) {
        out += " delay " + format_duration(n.delay);
        if (n.jitter.count()) {
            out += " " + format_duration(n.jitter);
            if (n.delay_correlation > 0) out += " " + format_percent(n.delay_correlation);
        }
        if (!n.distribution.empty()) out += " distribution " + n.distribution;
    }
    out += loss_arguments(n);
    if (n.ecn) out += " ecn";
    if (n.corrupt > 0) percent_with_correlation(out, "corrupt", n.corrupt, n.corrupt_correlation);
    if (n.duplicate > 0) percent_with_correlation(out, "duplicate", n.duplicate, n.duplicate_correlation);
    if (n.reorder > 0) {
        percent_with_correlation(out, "reorder", n.reorder, n.reorder_correlation);
        if (n.gap) out += fmt::format(" gap {}", n.gap);
    }
    if (n.rate_bps) {
        out += " rate " + units::format_rate(n.rate_bps);
        if (n.packet_overhead || n.cell_size || n.cell_overhead)
            out += fmt::format(" {} {} {}", n.packet_overhead, n.cell_size, n.cell_overhead);
    }
    if (n.slot) out += slot_arguments(*n.slot);
    return out;
}

std::vector<std::string> tc_commands(const Direction& d, const std::string& dev, const std::string& prefix,
                                     std::uint32_t mtu, const Filter& filter) {
    std::vector<std::string> out;
    auto tc = [&](const std::string& args) { out.push_back(fmt::format("{}tc {}", prefix, args)); };
    std::string netem_parent = "root";
    std::string netem_handle = "1:", netem_class = "1:1", shaper = "2:", queue = "3:";
    if (!filter.prefix.empty() || filter.port) {
        // As netem/host.cpp builds it: an htb root passing everything at the line rate in
        // 1:1, and the target's traffic in 1:2 with the netem tree below.
        tc(fmt::format("qdisc replace dev {} root handle 1: htb default 1", dev));
        tc(fmt::format("class replace dev {} parent 1: classid 1:1 htb rate {} ceil {}", dev,
                       units::format_rate(filter.line_rate_bps), units::format_rate(filter.line_rate_bps)));
        tc(fmt::format("class replace dev {} parent 1: classid 1:2 htb rate {} ceil {}", dev,
                       units::format_rate(filter.line_rate_bps), units::format_rate(filter.line_rate_bps)));
        tc(fmt::format("filter replace dev {} parent 1: protocol ip prio 1 u32{} flowid 1:2", dev, u32_match(filter)));
        netem_parent = "parent 1:2";
        netem_handle = "10:";
        netem_class = "10:1";
        shaper = "20:";
        queue = "30:";
    }
    tc(fmt::format("qdisc replace dev {} {} handle {} netem {}", dev, netem_parent, netem_handle,
                   netem_arguments(d.netem)));
    if (d.rate_bps == 0 || d.shaper == Shaper::netem) return out;
    if (d.shaper == Shaper::tbf) {
        tc(fmt::format("qdisc replace dev {} parent {} handle {} tbf rate {} burst {} latency 50ms", dev, netem_class,
                       shaper, units::format_rate(d.rate_bps), tbf_burst(d.rate_bps, mtu)));
    } else {
        tc(fmt::format("qdisc replace dev {} parent {} handle {} htb default 1", dev, netem_class, shaper));
        tc(fmt::format("class replace dev {} parent {} classid {}1 htb rate {} ceil {}", dev, shaper, shaper,
                       units::format_rate(d.rate_bps), units::format_rate(d.rate_bps)));
    }
    if (d.queue != Queue::none)
        tc(fmt::format("qdisc replace dev {} parent {}1 handle {} {}", dev, shaper, queue, queue_arguments(d)));
    return out;
}

}  // namespace wanlab::netem
