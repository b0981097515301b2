// Netlink encoding of qdisc trees: the exact RTM_NEWQDISC / RTM_NEWTCLASS / RTM_DELQDISC
// requests that put a Direction on a device. Pure: builds bytes with libnl's message API and
// sends nothing, so unit tests can assert every attribute without root.
//
// Contract:
// - netem options are encoded as iproute2 6.1 encodes them (tests/netem/fixtures holds
//   tc's own bytes as the reference), with one deliberate difference: CORR, REORDER,
//   CORRUPT, RATE, ECN and SLOT are always sent, zero when unused. The kernel keeps the old
//   value of any of these that a change omits, so a `replace` from one trial to the next
//   must state them all (see ../shared/notes/dependencies.md, "Kernel change semantics").
// - Probabilities are u32 with 0 = 0% and UINT32_MAX = 100%, rounded as tc rounds.
// - Delay and jitter go in qopt as psched ticks (Psched: 64 ns per tick on modern kernels).
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "netem/link_spec.h"
#include "netem/tc_command.h"

namespace wanlab::netem {

/// Kernel clock resolution for psched ticks, as /proc/net/psched reports it.
struct Psched {
    double ticks_per_usec = 15.625;  ///< 1 tick = 64 ns: every kernel since 2.6.28 with hrtimers
    /// Reads /proc/net/psched (or returns the default if it cannot).
    static Psched from_proc();
    std::uint32_t ticks(std::chrono::nanoseconds d) const;
};

/// One complete netlink request (nlmsghdr and payload; seq and port are filled when sent)
/// and what it does, for error messages ("replace netem 1: on wl-rs").
struct Request {
    std::string what;
    std::vector<std::uint8_t> bytes;
};

/// u32 probability as the kernel takes it: rint(p * UINT32_MAX).
std::uint32_t probability(double fraction);

/// A delay distribution table (s16 values, NETEM_DIST_SCALE = 8192) by name ("normal",
/// "pareto", "paretonormal", "experimental": iproute2's tables) or path. Throws
/// InputError naming the places searched when it is missing.
std::vector<std::int16_t> load_distribution(const std::string& name_or_path);

/// The TCA_OPTIONS payload of a netem qdisc: tc_netem_qopt followed by TCA_NETEM_*
/// attributes. `table` is the delay distribution (empty = none).
std::vector<std::uint8_t> netem_options(const Netem& n, const Psched& psched, const std::vector<std::int16_t>& table);

/// Where the tree hangs and its handles. The default: netem 1: at the root, shaper 2:,
/// queue 3:. Host mode with a filter hangs it below class 1:2 of an htb root instead
/// (kFilteredLayout: netem 10:, shaper 20:, queue 30:).
struct TreeLayout {
    std::uint32_t netem_parent = 0xffffffffu;  // TC_H_ROOT
    std::uint32_t netem = 0x00010000;
    std::uint32_t shaper = 0x00020000;
    std::uint32_t queue = 0x00030000;
};
inline constexpr TreeLayout kFilteredLayout{0x00010002, 0x00100000, 0x00200000, 0x00300000};
/// The shaper and the queue each have a second handle, the layout's plus this (2: and 6:,
/// 3: and 7:): a trial that changes their kind, or any queue, grafts the new one at the
/// other handle (netem/device.cpp).
inline constexpr std::uint32_t kAlternateHandle = 0x00040000;

/// Where one direction's tree sits, for reading its statistics.
struct QdiscSite {
    std::string direction;  ///< "up" (client -> server) or "down"
    std::string netns;      ///< namespace name ("" = this one)
    std::string dev;
    TreeLayout layout;  ///< the handles of wanlab's tree on `dev`
};

/// The netem qdisc of `n` at `parent` with `handle`, create-or-replace: on a netem qdisc
/// already there with that handle, the kernel changes it in place (its queue stays).
Request netem_request(const Netem& n, int ifindex, const std::string& dev, std::uint32_t parent, std::uint32_t handle,
                      const Psched& psched);

/// Every request that builds `d` on device `ifindex`, parents first, each a create-or-
/// replace. Distribution tables are loaded with load_distribution().
std::vector<Request> tree_requests(const Direction& d, int ifindex, const std::string& dev, std::uint32_t mtu,
                                   const Psched& psched, const TreeLayout& layout = {});

/// The shaper's requests of `d` (tbf, or htb and its class) hung at `parent`, and its queue's
/// below it; none without a rate or with shaper = "netem". tree_requests() hangs them at
/// netem's class; bench/apply_bench hangs them at the root, to measure the control path on a
/// kernel without netem.
std::vector<Request> shaper_requests(const Direction& d, int ifindex, const std::string& dev, std::uint32_t parent,
                                     std::uint32_t mtu, const Psched& psched, const TreeLayout& layout = {});

/// Deletes the qdisc at `parent` of `ifindex` (`handle` 0: whichever is there), such as the
/// ingress qdisc (TC_H_INGRESS) or a shaper below netem; `what` names it in errors.
Request delete_qdisc(int ifindex, std::uint32_t parent, std::uint32_t handle, std::string what);
/// Deletes the root qdisc of `ifindex` (the kernel then restores its default qdisc).
Request delete_root(int ifindex, const std::string& dev);

}  // namespace wanlab::netem
