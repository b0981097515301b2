#include "netem/kernel.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <linux/gen_stats.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet6.h>
#include <netlink/socket.h>

#include "core/error.h"
#include "core/sys.h"

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif

namespace wanlab::netem {
namespace {

std::string extack_message(const nlmsgerr* e) {
    const auto* hdr = reinterpret_cast<const nlmsghdr*>(reinterpret_cast<const char*>(e) - NLMSG_HDRLEN);
    if (!(hdr->nlmsg_flags & NLM_F_ACK_TLVS)) return {};
    std::size_t skip = (hdr->nlmsg_flags & NLM_F_CAPPED) ? sizeof(nlmsgerr) : sizeof(int) + e->msg.nlmsg_len;
    std::size_t total = hdr->nlmsg_len - NLMSG_HDRLEN;
    if (skip >= total) return {};
    const char* p = reinterpret_cast<const char*>(e) + NLMSG_ALIGN(skip);
    const char* end = reinterpret_cast<const char*>(e) + total;
    while (p + sizeof(nlattr) <= end) {
        const auto* a = reinterpret_cast<const nlattr*>(p);
        if (a->nla_len < sizeof(nlattr) || p + a->nla_len > end) break;
        if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG)
            return std::string(p + NLA_HDRLEN, strnlen(p + NLA_HDRLEN, a->nla_len - NLA_HDRLEN));
        p += NLA_ALIGN(a->nla_len);
    }
    return {};
}

int on_error(sockaddr_nl*, nlmsgerr* e, void* arg) {
    auto* out = static_cast<AckError*>(arg);
    out->error = -e->error;
    out->message = extack_message(e);
    return NL_STOP;
}

int collect(nl_msg* msg, void* arg) {
    const nlmsghdr* h = nlmsg_hdr(msg);
    const auto* p = reinterpret_cast<const std::uint8_t*>(h);
    static_cast<std::vector<std::vector<std::uint8_t>>*>(arg)->emplace_back(p, p + h->nlmsg_len);
    return NL_OK;
}

}  // namespace

void capture_acks(nl_sock* sock, AckError* out) {
    int one = 1;
    ::setsockopt(nl_socket_get_fd(sock), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
    ::setsockopt(nl_socket_get_fd(sock), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    nl_socket_modify_err_cb(sock, NL_CB_CUSTOM, on_error, out);
}

nl_sock* open_route_socket(const std::string& netns, AckError* acks) {
    // A netlink socket belongs to the namespace of the thread that opens it: step in, open,
    // step back.
    sys::NetnsScope in(netns);
    nl_sock* sock = nl_socket_alloc();
    if (!sock) throw Error("allocating a netlink socket: out of memory");
    if (int err = nl_connect(sock, NETLINK_ROUTE); err < 0) {
        nl_socket_free(sock);
        throw Error(fmt::format("opening a netlink socket{}: {}", netns.empty() ? "" : " in namespace " + netns,
                                nl_geterror(err)));
    }
    capture_acks(sock, acks);
    return sock;
}

std::string ack_reason(const AckError& ack, int nl_err) {
    std::string reason = ack.error ? std::strerror(ack.error) : nl_geterror(nl_err);
    if (!ack.message.empty()) reason += fmt::format(" ({})", ack.message);
    return reason;
}

namespace {

// TCA_STATS2's nested attributes: gnet_stats_basic (u64 bytes, u32 packets), the 64-bit
// packet count, gnet_stats_queue (qlen, backlog, drops, requeues, overlimits).
TcStats parse_stats2(const std::uint8_t* data, std::size_t size) {
    TcStats st;
    st.present = true;
    std::size_t off = 0;
    bool pkt64 = false;
    while (off + NLA_HDRLEN <= size) {
        nlattr a;
        std::memcpy(&a, data + off, sizeof a);
        if (a.nla_len < NLA_HDRLEN || off + a.nla_len > size) break;
        const auto* p = data + off + NLA_HDRLEN;
        std::size_t n = a.nla_len - NLA_HDRLEN;
        switch (a.nla_type & NLA_TYPE_MASK) {
            case TCA_STATS_BASIC:
                if (n >= 12) {
                    std::memcpy(&st.bytes, p, 8);
                    std::uint32_t packets;
                    std::memcpy(&packets, p + 8, 4);
                    if (!pkt64) st.packets = packets;
                }
                break;
            case TCA_STATS_PKT64:
                if (n >= 8) std::memcpy(&st.packets, p, 8), pkt64 = true;
                break;
            case TCA_STATS_QUEUE:
                if (n >= sizeof(gnet_stats_queue)) {
                    gnet_stats_queue q;
                    std::memcpy(&q, p, sizeof q);
                    st.qlen = q.qlen, st.backlog = q.backlog, st.drops = q.drops;
                    st.requeues = q.requeues, st.overlimits = q.overlimits;
                }
                break;
            default: break;
        }
        off += NLA_ALIGN(a.nla_len);
    }
    return st;
}

}  // namespace

TcObject parse_tc_message(const std::vector<std::uint8_t>& message) {
    TcObject o;
    o.message = message;
    if (message.size() < NLMSG_HDRLEN + sizeof(tcmsg)) return o;
    tcmsg t;
    std::memcpy(&t, message.data() + NLMSG_HDRLEN, sizeof t);
    o.ifindex = t.tcm_ifindex;
    o.handle = t.tcm_handle;
    o.parent = t.tcm_parent;
    o.info = t.tcm_info;
    std::size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(tcmsg));
    std::uint32_t len;
    std::memcpy(&len, message.data(), sizeof len);
    len = std::min<std::uint32_t>(len, static_cast<std::uint32_t>(message.size()));
    while (off + NLA_HDRLEN <= len) {
        nlattr a;
        std::memcpy(&a, message.data() + off, sizeof a);
        if (a.nla_len < NLA_HDRLEN || off + a.nla_len > len) break;
        const auto* payload = message.data() + off + NLA_HDRLEN;
        std::size_t size = a.nla_len - NLA_HDRLEN;
        switch (a.nla_type & NLA_TYPE_MASK) {
            case TCA_KIND:
                o.kind.assign(reinterpret_cast<const char*>(payload),
                              strnlen(reinterpret_cast<const char*>(payload), size));
                break;
            case TCA_OPTIONS: o.options.assign(payload, payload + size); break;
            case TCA_STATS2: o.stats = parse_stats2(payload, size); break;
            default: break;
        }
        off += NLA_ALIGN(a.nla_len);
    }
    return o;
}

// --- NetlinkKernel ------------------------------------------------------------------------

NetlinkKernel::NetlinkKernel(const std::string& netns) : sock_(open_route_socket(netns, &ack_)) {}

NetlinkKernel::~NetlinkKernel() {
    if (sock_) nl_socket_free(sock_);
}

int NetlinkKernel::ifindex(const std::string& dev) {
    rtnl_link* link = nullptr;
    int err = rtnl_link_get_kernel(sock_, 0, dev.c_str(), &link);
    if (err < 0)
        throw Error(
            fmt::format("no network device `{}` here{}", dev,
                        err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV ? "" : fmt::format(" ({})", nl_geterror(err))));
    int index = rtnl_link_get_ifindex(link);
    rtnl_link_put(link);
    return index;
}

void NetlinkKernel::send(const Request& r) {
    std::vector<std::uint8_t> copy = r.bytes;
    nl_msg* msg = nlmsg_convert(reinterpret_cast<nlmsghdr*>(copy.data()));
    if (!msg) throw Error(fmt::format("{}: out of memory", r.what));
    ack_ = {};
    int err = nl_send_auto(sock_, msg);
    nlmsg_free(msg);
    if (err >= 0) err = nl_wait_for_ack(sock_);
    if (err >= 0) return;
    throw Error(fmt::format("{}: {}", r.what, ack_reason(ack_, err)));
}

std::vector<TcObject> NetlinkKernel::dump(int ifindex, bool classes) {
    return dump_messages(classes ? RTM_GETTCLASS : RTM_GETQDISC, ifindex, 0, classes ? "classes" : "qdiscs");
}

std::vector<TcObject> NetlinkKernel::dump_filters(int ifindex, std::uint32_t parent) {
    return dump_messages(RTM_GETTFILTER, ifindex, parent, "filters");
}

std::vector<TcObject> NetlinkKernel::dump_messages(int type, int ifindex, std::uint32_t parent, const char* what) {
    tcmsg t{};
    t.tcm_family = AF_UNSPEC;
    t.tcm_ifindex = ifindex;
    t.tcm_parent = parent;
    std::vector<std::vector<std::uint8_t>> messages;
    nl_socket_modify_cb(sock_, NL_CB_VALID, NL_CB_CUSTOM, collect, &messages);
    int err = nl_send_simple(sock_, type, NLM_F_DUMP, &t, sizeof t);
    if (err >= 0) err = nl_recvmsgs_default(sock_);
    if (err < 0) throw Error(fmt::format("reading the {} of device {}: {}", what, ifindex, nl_geterror(err)));
    std::vector<TcObject> out;
    for (const auto& m : messages) {
        auto o = parse_tc_message(m);
        if (o.ifindex == ifindex) out.push_back(std::move(o));
    }
    return out;
}

int NetlinkKernel::create_ifb(const std::string& name) {
    rtnl_link* l = rtnl_link_alloc();
    rtnl_link_set_name(l, name.c_str());
    rtnl_link_set_type(l, "ifb");
    int err = rtnl_link_add(sock_, l, NLM_F_CREATE | NLM_F_EXCL);
    rtnl_link_put(l);
    if (err < 0)
        throw Error(fmt::format("creating ifb device {}: {}{}", name, nl_geterror(err),
                                err == -NLE_OBJ_NOTFOUND || err == -NLE_OPNOTSUPP
                                    ? " (this kernel has no ifb: `modprobe ifb`, or see `wanlab doctor`)"
                                    : ""));
    // Up, and without an IPv6 link-local address: a new device with one sends its own router
    // solicitations and MLD reports through its root qdisc, which would count them (measured:
    // an ifb netem that carried 60 echo replies reported 61 packets).
    const int index = ifindex(name);
    auto change = [&](bool up, bool quiet_v6) {
        rtnl_link* old = rtnl_link_alloc();
        rtnl_link_set_ifindex(old, index);
        rtnl_link* to = rtnl_link_alloc();
        if (up) rtnl_link_set_flags(to, IFF_UP);
        if (quiet_v6) rtnl_link_inet6_set_addr_gen_mode(to, IN6_ADDR_GEN_MODE_NONE);
        int e = rtnl_link_change(sock_, old, to, 0);
        rtnl_link_put(to);
        rtnl_link_put(old);
        return e;
    };
    // While it is down; a kernel without IPv6 refuses this, and then has nothing to send.
    change(false, true);
    if ((err = change(true, false)) < 0)
        throw Error(fmt::format("setting ifb device {} up: {}", name, nl_geterror(err)));
    return index;
}

void NetlinkKernel::delete_link(const std::string& name) {
    rtnl_link* l = rtnl_link_alloc();
    rtnl_link_set_name(l, name.c_str());
    int err = rtnl_link_delete(sock_, l);
    rtnl_link_put(l);
    if (err < 0 && err != -NLE_OBJ_NOTFOUND && err != -NLE_NODEV)
        throw Error(fmt::format("deleting device {}: {}", name, nl_geterror(err)));
}

const TcObject* child_of(const std::vector<TcObject>& qdiscs, std::uint32_t parent) {
    for (const auto& q : qdiscs)
        if (q.parent == parent) return &q;
    return nullptr;
}

}  // namespace wanlab::netem
