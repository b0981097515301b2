// HostImpairment: link conditions on a real interface, for traffic to and from one target
// only (host mode). Everything else on the interface, such as the SSH session that
// administers the machine, passes untouched.
//
// Creates, on apply():
//   egress ("up", toward the target): an htb root 1: whose default class 1:1 passes all
//     traffic at the line rate, a class 1:2 for the target's traffic with the netem tree
//     below it (netem 10:, shaper 20:, queue 30:), and a u32 filter sending packets to the
//     target (prefix, and port if given) to 1:2. (An htb root rather than prio: prio is
//     missing from some kernels, this project's among them.)
//   ingress ("down", from the target): an ifb device wlifb-<dev>, an ingress qdisc on the
//     interface with a u32 filter redirecting the target's packets to the ifb (mirred), and
//     the netem tree on the ifb's root.
// Undoes, in restore() and the destructor (never throws): the interface's root tree back to
// its snapshot, the ingress qdisc removed, the ifb deleted. Not thread-safe.
#pragma once

#include <optional>
#include <string>

#include "netem/device.h"
#include "netem/kernel.h"
#include "netem/tc_command.h"

namespace wanlab::netem {

/// The u32 filter that selects the target's traffic: to it (egress) or from it (ingress,
/// Filter::match_source). Either classifies into `classid` or redirects to `redirect_ifindex`.
Request target_filter(int ifindex, const std::string& dev, std::uint32_t parent, const Filter& f,
                      std::uint32_t classid, int redirect_ifindex);

/// The name of the ifb device wanlab makes for `dev` (at most 15 characters).
std::string ifb_name(const std::string& dev);

class HostImpairment {
public:
    HostImpairment(QdiscKernel& kernel, std::string dev, Filter target, std::uint64_t line_rate_bps);
    ~HostImpairment();
    HostImpairment(const HostImpairment&) = delete;
    HostImpairment& operator=(const HostImpairment&) = delete;

    /// Applies `up` to traffic toward the target and `down` to traffic from it; an
    /// unimpaired direction is left alone. Replaces a previous apply() in place.
    void apply(const Direction& up, const Direction& down, std::uint32_t mtu, const Psched& psched);
    void restore();

private:
    void build_egress_root();
    void build_ingress();
    QdiscKernel& kernel_;
    std::string dev_;
    Filter target_;
    std::uint64_t line_rate_bps_;
    int ifindex_;
    std::optional<DeviceQdiscs> egress_;
    bool egress_root_ = false;
    bool ingress_ = false;
    std::string ifb_;
    std::optional<DeviceQdiscs> ifb_qdiscs_;
};

}  // namespace wanlab::netem
