#include "netem/host.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/tc_act/tc_mirred.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>

#include "core/address.h"
#include "core/error.h"

namespace wanlab::netem {
namespace {

void check(int err, const std::string& what) {
    if (err < 0) throw Error(fmt::format("encoding {}: {}", what, nl_geterror(err)));
}

Request take(std::string what, nl_msg* m) {
    const nlmsghdr* h = nlmsg_hdr(m);
    const auto* p = reinterpret_cast<const std::uint8_t*>(h);
    Request r{std::move(what), std::vector<std::uint8_t>(p, p + h->nlmsg_len)};
    nlmsg_free(m);
    return r;
}

addr::Prefix parse_prefix(const std::string& text) {
    auto p = addr::parse_prefix(text);
    if (!p) throw InputError(fmt::format("target `{}` is not an IP address or prefix", text));
    return *p;
}

Request htb_root(int ifindex, const std::string& dev) {
    rtnl_qdisc* q = rtnl_qdisc_alloc();
    rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
    rtnl_tc_set_parent(TC_CAST(q), TC_H_ROOT);
    rtnl_tc_set_handle(TC_CAST(q), 0x10000);
    check(rtnl_tc_set_kind(TC_CAST(q), "htb"), "htb root");
    check(rtnl_htb_set_defcls(q, 1), "htb default class");
    nl_msg* m = nullptr;
    int err = rtnl_qdisc_build_add_request(q, NLM_F_CREATE | NLM_F_REPLACE, &m);
    rtnl_qdisc_put(q);
    check(err, "htb root");
    return take(fmt::format("replace htb 1: on {}", dev), m);
}

Request htb_class(int ifindex, const std::string& dev, std::uint32_t classid, std::uint64_t rate_bps) {
    rtnl_class* c = rtnl_class_alloc();
    rtnl_tc_set_ifindex(TC_CAST(c), ifindex);
    rtnl_tc_set_parent(TC_CAST(c), 0x10000);
    rtnl_tc_set_handle(TC_CAST(c), classid);
    check(rtnl_tc_set_kind(TC_CAST(c), "htb"), "htb class");
    check(rtnl_htb_set_rate64(c, rate_bps / 8), "htb class rate");
    check(rtnl_htb_set_ceil64(c, rate_bps / 8), "htb class ceil");
    nl_msg* m = nullptr;
    int err = rtnl_class_build_add_request(c, NLM_F_CREATE | NLM_F_REPLACE, &m);
    rtnl_class_put(c);
    check(err, "htb class");
    return take(fmt::format("replace htb class 1:{:x} on {}", classid & 0xffff, dev), m);
}

}  // namespace

std::string ifb_name(const std::string& dev) {
    std::string name = "wlifb-" + dev;
    if (name.size() <= 15) return name;
    // Keep it unique for long names: a short hash of the whole device name.
    std::uint32_t h = 2166136261u;
    for (unsigned char c : dev) h = (h ^ c) * 16777619u;
    return fmt::format("wlifb-{:08x}", h).substr(0, 15);
}

namespace {
using ClsPtr = std::unique_ptr<rtnl_cls, void (*)(rtnl_cls*)>;

// A u32 filter's identity: device, parent, priority and protocol. Adding and deleting
// wanlab's filter both start here, so the delete names exactly what was added.
ClsPtr u32_at(int ifindex, std::uint32_t parent, std::uint16_t prio, bool v6) {
    ClsPtr cls(rtnl_cls_alloc(), rtnl_cls_put);
    rtnl_tc_set_ifindex(TC_CAST(cls.get()), ifindex);
    rtnl_tc_set_parent(TC_CAST(cls.get()), parent);
    check(rtnl_tc_set_kind(TC_CAST(cls.get()), "u32"), "u32 filter");
    rtnl_cls_set_prio(cls.get(), prio);
    rtnl_cls_set_protocol(cls.get(), v6 ? ETH_P_IPV6 : ETH_P_IP);
    return cls;
}

bool is_v6(const Filter& f) { return !f.prefix.empty() && parse_prefix(f.prefix).family == AF_INET6; }
}  // namespace

Request target_filter(int ifindex, const std::string& dev, std::uint32_t parent, const Filter& f, std::uint32_t classid,
                      int redirect_ifindex, std::uint16_t prio) {
    addr::Prefix p = f.prefix.empty() ? addr::Prefix{} : parse_prefix(f.prefix);
    bool v6 = p.family == AF_INET6;
    ClsPtr cls = u32_at(ifindex, parent, prio, v6);
    if (!f.prefix.empty()) {
        // Offsets in the IP header: v4 source 12, destination 16; v6 source 8, destination 24.
        int off = v6 ? (f.match_source ? 8 : 24) : (f.match_source ? 12 : 16);
        if (v6)
            check(rtnl_u32_add_key_in6_addr(cls.get(), reinterpret_cast<const in6_addr*>(p.bytes), p.length, off, 0),
                  "u32 key");
        else
            check(rtnl_u32_add_key_in_addr(cls.get(), reinterpret_cast<const in_addr*>(p.bytes), p.length, off, 0),
                  "u32 key");
    }
    if (f.port) {
        // Ports right after a header without options (as tc's `match ip dport` assumes).
        // libnl takes the value in host order and puts it in network order itself.
        int base = v6 ? 40 : 20;
        check(rtnl_u32_add_key_uint16(cls.get(), f.port, 0xffff, base + (f.match_source ? 0 : 2), 0), "u32 port");
    }
    if (f.prefix.empty() && !f.port) check(rtnl_u32_add_key_uint32(cls.get(), 0, 0, 0, 0), "u32 match-all");
    std::string what;
    if (redirect_ifindex) {
        rtnl_act* act = rtnl_act_alloc();
        check(rtnl_tc_set_kind(TC_CAST(act), "mirred"), "mirred");
        rtnl_mirred_set_action(act, TCA_EGRESS_REDIR);
        rtnl_mirred_set_policy(act, TC_ACT_STOLEN);
        rtnl_mirred_set_ifindex(act, static_cast<std::uint32_t>(redirect_ifindex));
        int err = rtnl_u32_add_action(cls.get(), act);
        rtnl_act_put(act);
        check(err, "mirred action");
        // As tc does for a rule with actions: without TERMINAL the keys match but the
        // action never runs.
        check(rtnl_u32_set_cls_terminal(cls.get()), "u32 terminal");
        what = fmt::format("add ingress redirect filter on {}", dev);
    } else {
        check(rtnl_u32_set_classid(cls.get(), classid), "u32 classid");
        check(rtnl_u32_set_cls_terminal(cls.get()), "u32 terminal");
        what = fmt::format("add target filter on {}", dev);
    }
    nl_msg* m = nullptr;
    check(rtnl_cls_build_add_request(cls.get(), NLM_F_CREATE | NLM_F_EXCL, &m), "u32 filter");
    return take(what, m);
}

Request exempt_filter(int ifindex, const std::string& dev, std::uint32_t parent, const Flow& f, bool ingress,
                      std::uint32_t classid, std::uint16_t prio) {
    addr::Prefix local = parse_prefix(f.local), peer = parse_prefix(f.peer);
    if (local.family != peer.family)
        throw InputError(fmt::format("flow {} - {}: two address families", f.local, f.peer));
    bool v6 = local.family == AF_INET6;
    const addr::Prefix& src = ingress ? peer : local;
    const addr::Prefix& dst = ingress ? local : peer;
    std::uint16_t sport = ingress ? f.peer_port : f.local_port, dport = ingress ? f.local_port : f.peer_port;
    ClsPtr cls = u32_at(ifindex, parent, prio, v6);
    // The header offsets of target_filter(); the protocol byte: v4 9, v6 6 (next header, no
    // extension headers between, as tc's `match ip6 protocol` assumes).
    if (v6) {
        check(rtnl_u32_add_key_in6_addr(cls.get(), reinterpret_cast<const in6_addr*>(src.bytes), 128, 8, 0), "u32 key");
        check(rtnl_u32_add_key_in6_addr(cls.get(), reinterpret_cast<const in6_addr*>(dst.bytes), 128, 24, 0),
              "u32 key");
    } else {
        check(rtnl_u32_add_key_in_addr(cls.get(), reinterpret_cast<const in_addr*>(src.bytes), 32, 12, 0), "u32 key");
        check(rtnl_u32_add_key_in_addr(cls.get(), reinterpret_cast<const in_addr*>(dst.bytes), 32, 16, 0), "u32 key");
    }
    check(rtnl_u32_add_key_uint8(cls.get(), IPPROTO_TCP, 0xff, v6 ? 6 : 9, 0), "u32 protocol");
    int base = v6 ? 40 : 20;
    check(rtnl_u32_add_key_uint16(cls.get(), sport, 0xffff, base, 0), "u32 port");  // host order, as above
    check(rtnl_u32_add_key_uint16(cls.get(), dport, 0xffff, base + 2, 0), "u32 port");
    // Egress: into the pass-through class. Ingress: a match with no action is TC_ACT_OK,
    // which ends the classification with the packet untouched.
    if (!ingress) check(rtnl_u32_set_classid(cls.get(), classid), "u32 classid");
    check(rtnl_u32_set_cls_terminal(cls.get()), "u32 terminal");
    nl_msg* m = nullptr;
    check(rtnl_cls_build_add_request(cls.get(), NLM_F_CREATE | NLM_F_EXCL, &m), "u32 filter");
    return take(
        fmt::format("add exemption filter for {}:{} - {}:{} on {}", f.local, f.local_port, f.peer, f.peer_port, dev),
        m);
}

Request delete_filters(int ifindex, const std::string& dev, std::uint32_t parent, std::uint16_t prio, bool v6) {
    ClsPtr cls = u32_at(ifindex, parent, prio, v6);
    nl_msg* m = nullptr;
    check(rtnl_cls_build_delete_request(cls.get(), 0, &m), "u32 filter");
    return take(fmt::format("delete filter priority {} on {}", prio, dev), m);
}

namespace {
// Whether the device's root tree (qdiscs and classes: kind, handle, parent, options) is the
// snapshot's.
bool same_tree(QdiscKernel& kernel, int ifindex, const DeviceQdiscs& snapshot) {
    auto same = [](std::vector<TcObject> now, const std::vector<TcObject>& then) {
        std::erase_if(now, [](const TcObject& o) { return o.parent == TC_H_INGRESS; });
        std::vector<TcObject> old = then;
        std::erase_if(old, [](const TcObject& o) { return o.parent == TC_H_INGRESS; });
        return std::equal(now.begin(), now.end(), old.begin(), old.end(), [](const TcObject& a, const TcObject& b) {
            return a.kind == b.kind && a.handle == b.handle && a.parent == b.parent && a.options == b.options;
        });
    };
    return same(kernel.dump(ifindex, false), snapshot.snapshot_qdiscs()) &&
           same(kernel.dump(ifindex, true), snapshot.snapshot_classes());
}

const TcObject* ingress_of(const std::vector<TcObject>& qdiscs) {
    for (const auto& q : qdiscs)
        if (q.parent == TC_H_INGRESS) return &q;
    return nullptr;
}
}  // namespace

void undo_host(QdiscKernel& kernel, const HostUndo& u) {
    std::string failures;
    auto attempt = [&](auto&& step) {
        try {
            step();
        } catch (const std::exception& e) {
            failures += (failures.empty() ? "" : "; ") + std::string(e.what());
        }
    };
    auto exists = [&kernel](const std::string& dev) -> int {
        try {
            return kernel.ifindex(dev);
        } catch (const Error&) {
            return 0;
        }
    };
    if (int ifindex = exists(u.dev)) {
        if (u.ingress_created) {
            attempt([&] {
                // The ingress qdisc wanlab made goes only while it is still wanlab's: an
                // `ingress` carrying wanlab's filter and nobody else's. One a CNI or a user
                // made meanwhile (a clsact, or filters at other priorities) stays; only
                // wanlab's filter leaves it.
                auto qdiscs = kernel.dump(ifindex, false);
                const TcObject* ingress = ingress_of(qdiscs);
                // A clsact in its place means the hook was replaced, wanlab's filter with it.
                if (!ingress || ingress->kind != "ingress") return;
                bool ours = false, foreign = false;
                for (const auto& f : kernel.dump_filters(ifindex, 0xffff0000))
                    ((f.info >> 16) == u.filter_prio && (f.kind.empty() || f.kind == "u32") ? ours : foreign) = true;
                if (ours && !foreign)
                    kernel.send(
                        delete_qdisc(ifindex, TC_H_INGRESS, 0, fmt::format("delete ingress qdisc of {}", u.dev)));
                else if (ours)
                    kernel.send(delete_filters(ifindex, u.dev, 0xffff0000, u.filter_prio, u.v6));
            });
        } else if (u.filter_parent) {
            attempt([&] {
                for (const auto& f : kernel.dump_filters(ifindex, u.filter_parent))
                    if ((f.info >> 16) == u.filter_prio) {
                        kernel.send(delete_filters(ifindex, u.dev, u.filter_parent, u.filter_prio, u.v6));
                        break;
                    }
            });
        }
        attempt([&] {
            auto root = DeviceQdiscs::from_serialized(kernel, u.dev, u.root_snapshot);
            // A tree exactly as the snapshot has it was never changed (a run that impaired
            // only the way in, or was killed before): deleting and replaying it would lose
            // what the snapshot does not hold, its statistics and queued packets.
            if (!same_tree(kernel, ifindex, root)) root.restore();
            root.release();
        });
    }
    if (!u.ifb.empty() && exists(u.ifb)) attempt([&] { kernel.delete_link(u.ifb); });
    if (!failures.empty()) throw Error(failures);
}

HostImpairment::HostImpairment(QdiscKernel& kernel, std::string dev, Filter target, std::uint64_t line_rate_bps)
    : kernel_(kernel), dev_(std::move(dev)), target_(std::move(target)), line_rate_bps_(line_rate_bps),
      ifindex_(kernel.ifindex(dev_)) {
    // Everything undo needs, read before anything changes.
    egress_.emplace(kernel_, dev_);
    plan_.dev = dev_;
    plan_.root_snapshot = egress_->serialize();
    plan_.ifb = ifb_name(dev_);
    plan_.v6 = is_v6(target_);
    // wanlab replaces the root tree for the way out and replays the snapshot afterwards; the
    // snapshot holds qdiscs and classes, not filters, so a root tree with filters of the
    // user's could not be given back.
    if (!egress_->default_root()) {
        // Counted by (parent, priority): the kernel dumps a u32 filter as its hash table and its key.
        std::set<std::pair<std::uint32_t, std::uint32_t>> found;
        auto look = [&](std::uint32_t parent) {
            for (const auto& f : kernel_.dump_filters(ifindex_, parent)) found.emplace(parent, f.info >> 16);
        };
        for (const auto& q : egress_->snapshot_qdiscs())
            if (q.parent != TC_H_INGRESS) look(q.handle);
        for (const auto& c : egress_->snapshot_classes()) look(c.handle);
        std::size_t filters = found.size();
        if (filters > 0)
            egress_error_ = fmt::format(
                "{}'s root qdisc tree has {} filter{} of its own, which wanlab could not put "
                "back after replacing the tree; impair only the download direction ([link.down]), "
                "or remove them first (`tc filter show dev {}`)",
                dev_, filters, filters == 1 ? "" : "s", dev_);
    }
    auto qdiscs = kernel_.dump(ifindex_, false);  // kept: `existing` points into it
    const TcObject* existing = ingress_of(qdiscs);
    if (!existing) {
        plan_.ingress_created = true;
        plan_.filter_parent = 0xffff0000;
        plan_.filter_prio = 1;
        return;
    }
    // The user's own ingress or clsact qdisc stays, with its filters; ours joins them at the
    // lowest priority number none of theirs uses.
    if (existing->kind != "ingress" && existing->kind != "clsact") {
        ingress_error_ = fmt::format(
            "{} has an ingress qdisc of kind {}, which wanlab cannot add a filter to; remove "
            "it or impair only the upload direction ([link.up])",
            dev_, existing->kind);
        return;
    }
    plan_.filter_parent = existing->kind == "clsact" ? TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS) : 0xffff0000;
    std::vector<std::uint16_t> used;
    for (const auto& f : kernel_.dump_filters(ifindex_, plan_.filter_parent))
        used.push_back(static_cast<std::uint16_t>(f.info >> 16));
    plan_.filter_prio = 1;
    while (std::find(used.begin(), used.end(), plan_.filter_prio) != used.end()) ++plan_.filter_prio;
}

HostImpairment::~HostImpairment() {
    try {
        restore();
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: could not restore {}: {}\n", dev_, e.what()).c_str(), stderr);
    }
}

void HostImpairment::check(bool up, bool down) const {
    if (up && !egress_error_.empty()) throw InputError(egress_error_);
    if (down && !ingress_error_.empty()) throw InputError(ingress_error_);
}

void HostImpairment::build_egress_root() {
    check(true, false);
    if (!egress_) egress_.emplace(kernel_, dev_);
    Filter to_target = target_;
    to_target.match_source = false;
    std::vector<Request> build{htb_root(ifindex_, dev_), htb_class(ifindex_, dev_, 0x10001, line_rate_bps_),
                               htb_class(ifindex_, dev_, 0x10002, line_rate_bps_)};
    const auto exempt = exempt_flows();
    for (const auto& f : exempt) build.push_back(exempt_filter(ifindex_, dev_, 0x10000, f, false, 0x10001, 1));
    build.push_back(target_filter(ifindex_, dev_, 0x10000, to_target, 0x10002, 0, exempt.empty() ? 1 : 2));
    egress_->apply_requests(std::move(build));
    egress_root_ = true;
}

std::vector<Flow> HostImpairment::exempt_flows() const {
    // A flow of the other address family never matches the target's filter.
    std::vector<Flow> out;
    for (const auto& f : target_.exempt)
        if (parse_prefix(f.local).family == (plan_.v6 ? AF_INET6 : AF_INET)) out.push_back(f);
    return out;
}

void HostImpairment::build_ingress() {
    check(false, true);
    ingress_built_ = true;  // before the first change: restore() undoes whatever part was made
    int ifb_index = kernel_.create_ifb(plan_.ifb);
    if (plan_.ingress_created) {
        TcObject ingress;
        ingress.kind = "ingress";
        ingress.ifindex = ifindex_;
        ingress.parent = TC_H_INGRESS;
        ingress.handle = 0xffff0000;
        kernel_.send(replay_request(ingress, false, dev_));
    }
    Filter from_target = target_;
    from_target.match_source = true;
    for (const auto& f : exempt_flows())
        kernel_.send(exempt_filter(ifindex_, dev_, plan_.filter_parent, f, true, 0, plan_.filter_prio));
    kernel_.send(target_filter(ifindex_, dev_, plan_.filter_parent, from_target, 0, ifb_index, plan_.filter_prio));
    ifb_qdiscs_.emplace(kernel_, plan_.ifb);
}

void HostImpairment::apply(const Direction& up, const Direction& down, std::uint32_t mtu, const Psched& psched) {
    // A direction an earlier apply() impaired and this one does not keeps its tree with a
    // netem of no conditions: traffic passes unchanged, and nothing is deleted mid-run.
    if (up.impaired() || egress_root_) {
        if (!egress_root_) build_egress_root();
        egress_->apply(up, mtu, psched, kFilteredLayout);
    }
    if (down.impaired() || ifb_qdiscs_) {
        if (!ifb_qdiscs_) build_ingress();
        ifb_qdiscs_->apply(down, mtu, psched);
    }
}

void HostImpairment::restore() {
    if (ifb_qdiscs_) ifb_qdiscs_->release();  // the ifb goes away with its qdiscs
    ifb_qdiscs_.reset();
    egress_root_ = false;
    bool egress_changed = egress_ && egress_->changed();
    if (egress_) egress_->release();  // undo_host() restores the same snapshot
    egress_.reset();
    if (!egress_changed && !ingress_built_) return;
    HostUndo u = plan_;
    if (!ingress_built_) {  // never made: whatever has these names now is not wanlab's
        u.ifb.clear();
        u.ingress_created = false;
        u.filter_parent = 0;
    }
    ingress_built_ = false;
    undo_host(kernel_, u);
}

}  // namespace wanlab::netem
