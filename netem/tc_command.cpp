#include "netem/tc_command.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/text.h"

#include "core/units.h"
#include "netem/attributes.h"
#include "netem/queue.h"

namespace wanlab::netem {
namespace {

std::string queue_arguments(const Direction& d) { return to_string(d.queue) + queue_tc_arguments(d); }

std::string u32_match(const Filter& f) {
    std::string out;
    if (!f.prefix.empty()) out += fmt::format(" match ip {} {}", f.match_source ? "src" : "dst", f.prefix);
    if (f.port) out += fmt::format(" match ip {} {} 0xffff", f.match_source ? "sport" : "dport", f.port);
    if (out.empty()) out = " match u32 0 0";
    return out;
}

}  // namespace

std::string netem_arguments(const Netem& n, std::initializer_list<std::string_view> except) {
    std::vector<const Attribute*> rows;
    for (const auto& a : attributes())
        if (a.tc_rank >= 0 && std::find(except.begin(), except.end(), a.key) == except.end()) rows.push_back(&a);
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Attribute* x, const Attribute* y) { return x->tc_rank < y->tc_rank; });
    std::string out;
    for (const auto* a : rows) a->tc(n, out);
    return out.empty() ? out : out.substr(1);  // each row writes " word ..."
}

std::vector<std::string> tc_commands(const Direction& d, const std::string& device, const std::string& prefix,
                                     std::uint32_t mtu, const Filter& filter) {
    std::vector<std::string> out;
    const std::string dev = text::shell_quote(device);  // every other word is one wanlab wrote
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
        tc(fmt::format("class replace dev {} parent {} classid {}1 htb rate {} ceil {} burst {} cburst {}", dev, shaper,
                       shaper, units::format_rate(d.rate_bps), units::format_rate(d.rate_bps),
                       tbf_burst(d.rate_bps, mtu), tbf_burst(d.rate_bps, mtu)));
    }
    if (d.queue != Queue::none)
        tc(fmt::format("qdisc replace dev {} parent {}1 handle {} {}", dev, shaper, queue, queue_arguments(d)));
    return out;
}

}  // namespace wanlab::netem
