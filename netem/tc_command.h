// The tc command lines equivalent to a direction's qdisc tree, for `wanlab plan` and
// `wanlab link apply --dry-run`. wanlab itself never runs tc: it sends the same settings
// through netlink. Pure; thread-safe.
//
// The tree:
//   root 1: netem (delay, loss, ...; with its own `rate` when shaper = "netem")
//     └ 1:1 -> 2: tbf | htb (rate, when shaper = "tbf" / "htb")
//                 └ 3: pfifo | bfifo | fq_codel | cake (the bottleneck queue, if set)
// With a filter (host mode toward one target), an htb root passes other traffic through
// class 1:1 and sends the target's to class 1:2, below which the tree hangs (netem 10:,
// shaper 20:, queue 30:); see netem/host.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "netem/link_spec.h"

namespace wanlab::netem {

/// One TCP connection as this machine sees it: wanlab's own control connection (ssh to
/// another machine of the run), which link conditions must never touch.
struct Flow {
    std::string local;  ///< "198.18.9.1" (no prefix length)
    std::uint16_t local_port = 0;
    std::string peer;
    std::uint16_t peer_port = 0;
};

/// Traffic the impairment applies to; empty = all traffic on the device.
struct Filter {
    std::string prefix;                            ///< "203.0.113.7/32"; empty = any address
    std::uint16_t port = 0;                        ///< 0 = any port
    bool match_source = false;                     ///< ingress (down) direction matches the peer as source
    std::uint64_t line_rate_bps = 10'000'000'000;  ///< rate of the unimpaired htb classes
    std::vector<Flow> exempt = {};                 ///< never impaired, though the target's (host filter only)
};

/// The netem arguments as tc spells them, in tc's order (netem/attributes.h): "limit 1000
/// delay 20ms 2ms 25% distribution normal loss random 1%". `except` leaves out the
/// arguments of these keys ("limit", "rate").
std::string netem_arguments(const Netem& n, std::initializer_list<std::string_view> except = {});

/// `tc qdisc replace dev DEV ...` lines building the whole tree, in order. `prefix` goes in
/// front of each (e.g. "ip netns exec wanlab-RUN-router "). `mtu` sizes the tbf burst.
std::vector<std::string> tc_commands(const Direction& d, const std::string& dev, const std::string& prefix,
                                     std::uint32_t mtu, const Filter& filter = {});

}  // namespace wanlab::netem
