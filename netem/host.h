// HostImpairment: link conditions on a real interface, for traffic to and from one target
// only (host mode). Everything else on the interface, such as the SSH session that
// administers the machine, passes untouched.
//
// Creates, on apply():
//   egress ("up", toward the target): an htb root 1: whose default class 1:1 passes all
//     traffic at the line rate, a class 1:2 for the target's traffic with the netem tree
//     below it (netem 10:, shaper 20:, queue 30:), and a u32 filter sending packets to the
//     target (prefix, and port if given) to 1:2; with exempt flows (Filter::exempt), a u32
//     filter per flow at priority 1 sends its packets to 1:1 and the target's is at 2. (An htb root rather than prio:
//     prio is missing from some kernels, this project's among them.)
//   ingress ("down", from the target): an ifb device wlifb-<dev>, an ingress qdisc on the
//     interface with a u32 filter redirecting the target's packets to the ifb (mirred), and
//     the netem tree on the ifb's root; exempt flows' filters, no action, come first at the
//     same priority. When the interface already has an ingress (or
//     clsact) qdisc, the user's, it is kept with its filters: wanlab adds its filter at the
//     lowest priority number none of them uses (so it sees the target's packets first unless
//     one of the user's filters is at priority 1), and takes only that priority away.
// Undoes, in restore() and the destructor (never throws): the interface's root tree back to
// its snapshot, the ingress qdisc removed (or, if it was the user's, wanlab's filter), the
// ifb deleted. Everything undo needs is known at construction, before any change
// (undo_plan()), so a caller journals it first and a later process can undo a killed one's
// changes with undo_host(). Not thread-safe.
#pragma once

#include <optional>
#include <string>

#include "netem/device.h"
#include "netem/kernel.h"
#include "netem/tc_command.h"

namespace wanlab::netem {

/// The u32 filter that selects the target's traffic: to it (egress) or from it (ingress,
/// Filter::match_source). Either classifies into `classid` or redirects to `redirect_ifindex`.
Request target_filter(int ifindex, const std::string& dev, std::uint32_t parent, const Filter& f, std::uint32_t classid,
                      int redirect_ifindex, std::uint16_t prio = 1);

/// The u32 filter that exempts one TCP connection `f` from the target's filter: on egress
/// (its packets from local to peer) into the pass-through class `classid`; on ingress
/// (`ingress`: peer to local) with no action, which ends classification there. Evaluated
/// before the target's filter: a lower priority number on egress, the same priority and
/// added first on ingress (u32 tries a priority's filters in the order of their handles,
/// which the kernel gives out rising).
Request exempt_filter(int ifindex, const std::string& dev, std::uint32_t parent, const Flow& f, bool ingress,
                      std::uint32_t classid, std::uint16_t prio);

/// Deletes the filters at `prio` below `parent` (all of them: the kernel deletes by priority).
Request delete_filters(int ifindex, const std::string& dev, std::uint32_t parent, std::uint16_t prio, bool v6);

/// The name of the ifb device wanlab makes for `dev` (at most 15 characters).
std::string ifb_name(const std::string& dev);

/// What undoing a HostImpairment takes; fixed before it changes anything.
struct HostUndo {
    std::string dev;
    std::string root_snapshot;        ///< the interface's root tree, DeviceQdiscs::serialize()
    std::string ifb;                  ///< the ifb device wanlab creates for the ingress direction
    bool ingress_created = false;     ///< the interface had no ingress qdisc: wanlab's goes entirely
    std::uint32_t filter_parent = 0;  ///< else: wanlab's filter, at this parent and priority
    std::uint16_t filter_prio = 0;
    bool v6 = false;  ///< the filter's protocol
};

/// Undoes whatever a HostImpairment with plan `u` changed, looking at the kernel first so
/// every step is skipped when its change is absent, and the ingress qdisc wanlab created is
/// deleted only while it carries wanlab's filter and no other (else only that filter goes); (never made, or already
/// undone; a root tree identical to the snapshot is left alone): safe to run any number of times, from any process.
/// Throws wanlab::Error listing the steps that failed; the others are done regardless.
void undo_host(QdiscKernel& kernel, const HostUndo& u);

class HostImpairment {
public:
    HostImpairment(QdiscKernel& kernel, std::string dev, Filter target, std::uint64_t line_rate_bps);
    ~HostImpairment();
    HostImpairment(const HostImpairment&) = delete;
    HostImpairment& operator=(const HostImpairment&) = delete;

    /// Applies `up` to traffic toward the target and `down` to traffic from it. Replaces a
    /// previous apply() in place; a direction never impaired is left alone, one impaired
    /// before gets a netem without conditions (a pass-through).
    void apply(const Direction& up, const Direction& down, std::uint32_t mtu, const Psched& psched);
    void restore();
    const HostUndo& undo_plan() const { return plan_; }
    /// Throws wanlab::InputError, before anything changes, if the interface's own set-up
    /// keeps a direction that will be impaired (`up`, `down`) from being given back: a root
    /// tree with filters of the user's, an ingress qdisc of a kind wanlab cannot join.
    void check(bool up, bool down) const;

private:
    void build_egress_root();
    void build_ingress();
    std::vector<Flow> exempt_flows() const;
    HostUndo plan_;
    QdiscKernel& kernel_;
    std::string dev_;
    Filter target_;
    std::uint64_t line_rate_bps_;
    int ifindex_;
    std::optional<DeviceQdiscs> egress_;
    bool egress_root_ = false;
    bool ingress_built_ = false;  ///< the ifb and wanlab's ingress filter (may) exist
    std::string ingress_error_;   ///< why the ingress direction cannot be impaired, if so
    std::string egress_error_;    ///< why the egress direction cannot be, if so
    std::optional<DeviceQdiscs> ifb_qdiscs_;
};

}  // namespace wanlab::netem
