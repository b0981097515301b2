#include "lab/link.h"

#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/route.h>

#include "core/error.h"
#include "core/sys.h"
#include "core/text.h"
#include "lab/journal.h"
#include "lab/netns.h"
#include "netem/kernel.h"
#include "sysctl/proc_sys.h"

namespace wanlab::lab {
namespace {

// Throws for a negative libnl result: "<what>: <libnl's text>".
void check_nl(int err, const std::string& what) {
    if (err < 0) throw Error(fmt::format("{}: {}", what, nl_geterror(err)));
}

struct LinkPut {
    void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};
struct AddrPut {
    void operator()(nl_addr* a) const { nl_addr_put(a); }
};
using LinkPtr = std::unique_ptr<rtnl_link, LinkPut>;
using AddrPtr = std::unique_ptr<nl_addr, AddrPut>;

AddrPtr parse_addr(const std::string& text) {
    nl_addr* a = nullptr;
    check_nl(nl_addr_parse(text.c_str(), AF_UNSPEC, &a), fmt::format("parsing address {}", text));
    return AddrPtr(a);
}

LinkPtr kernel_link(RouteSocket& sock, const std::string& dev) {
    rtnl_link* l = nullptr;
    check_nl(rtnl_link_get_kernel(sock.get(), 0, dev.c_str(), &l),
             fmt::format("looking up device {} {}", dev, sysctl::where(sock.ns())));
    return LinkPtr(l);
}

// One ethtool ioctl on `dev`, made from a socket inside the device's namespace.
void ethtool(const std::string& ns, const std::string& dev, ethtool_value& value, const std::string& what) {
    sys::in_netns(ns, [&] {
        sys::Fd s(static_cast<int>(
            sys::check_sys(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), "opening a socket for ethtool")));
        ifreq ifr{};
        std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev.c_str());
        ifr.ifr_data = reinterpret_cast<char*>(&value);
        sys::check_sys(::ioctl(s.get(), SIOCETHTOOL, &ifr), fmt::format("{} of {} {}", what, dev, sysctl::where(ns)));
    });
}

bool get_one(const std::string& ns, const std::string& dev, std::uint32_t cmd, const char* name) {
    ethtool_value v{cmd, 0};
    ethtool(ns, dev, v, fmt::format("reading {}", name));
    return v.data != 0;
}

}  // namespace

// --- RouteSocket ------------------------------------------------------------------------

RouteSocket::RouteSocket(const std::string& ns) : ns_(ns), sock_(netem::open_route_socket(ns, &ack_)) {}

void RouteSocket::check(int err, const std::string& what) {
    netem::AckError ack = std::exchange(ack_, {});
    if (err < 0) throw Error(fmt::format("{}: {}", what, netem::ack_reason(ack, err)));
}

RouteSocket::~RouteSocket() {
    if (sock_) nl_socket_free(sock_);
}

int RouteSocket::ifindex(const std::string& dev) { return rtnl_link_get_ifindex(kernel_link(*this, dev).get()); }

bool RouteSocket::has(const std::string& dev) {
    rtnl_link* l = nullptr;
    if (rtnl_link_get_kernel(sock_, 0, dev.c_str(), &l) < 0) return false;
    rtnl_link_put(l);
    return true;
}

// --- VethPair ---------------------------------------------------------------------------

VethPair::VethPair(std::string ns, std::string name, std::string peer_ns, std::string peer, const LinkOptions& options,
                   Journal* journal)
    : ns_(std::move(ns)), name_(std::move(name)), peer_ns_(std::move(peer_ns)), peer_(std::move(peer)),
      journal_(journal) {
    std::string what =
        fmt::format("creating veth {} {} with peer {} {}", name_, sysctl::where(ns_), peer_, sysctl::where(peer_ns_));
    RouteSocket sock(ns_);
    if (sock.has(name_)) {
        std::string taken = std::move(name_);
        name_.clear();
        throw Error(fmt::format("{}: a device {} exists already", what, taken));
    }
    sys::Fd peer_fd(static_cast<int>(sys::check_sys(::open(sys::netns_path(peer_ns_).c_str(), O_RDONLY | O_CLOEXEC),
                                                    fmt::format("opening network namespace {}", peer_ns_))));
    std::unique_ptr<rtnl_link, void (*)(rtnl_link*)> veth(rtnl_link_veth_alloc(), rtnl_link_veth_release);
    if (!veth) throw Error(what + ": out of memory");
    rtnl_link_set_name(veth.get(), name_.c_str());
    rtnl_link_set_mtu(veth.get(), options.mtu);
    rtnl_link_set_txqlen(veth.get(), options.txqueuelen);
    LinkPtr peer_link(rtnl_link_veth_get_peer(veth.get()));
    rtnl_link_set_name(peer_link.get(), peer_.c_str());
    rtnl_link_set_mtu(peer_link.get(), options.mtu);
    rtnl_link_set_txqlen(peer_link.get(), options.txqueuelen);
    rtnl_link_set_ns_fd(peer_link.get(), peer_fd.get());
    if (journal_) journal_->record(link_entry(ns_, name_));
    try {
        sock.check(rtnl_link_add(sock.get(), veth.get(), NLM_F_CREATE | NLM_F_EXCL), what);
    } catch (...) {
        name_.clear();
        throw;
    }
    try {
        RouteSocket peer_sock(peer_ns_);
        set_offloads(ns_, name_, options.offloads);
        set_offloads(peer_ns_, peer_, options.offloads);
        set_up(sock, name_);
        set_up(peer_sock, peer_);
    } catch (...) {
        // A constructor that throws gets no destructor call: undo the pair here.
        try {
            remove(ns_, name_);
        } catch (const std::exception& e) {
            std::fputs(fmt::format("wanlab: warning: {}\n", text::terminal_safe(e.what())).c_str(), stderr);
            if (journal_) journal_->keep();
        }
        name_.clear();
        throw;
    }
}

VethPair::VethPair(VethPair&& o) noexcept
    : ns_(std::move(o.ns_)), name_(std::move(o.name_)), peer_ns_(std::move(o.peer_ns_)), peer_(std::move(o.peer_)),
      journal_(o.journal_) {
    o.name_.clear();
}

VethPair::~VethPair() {
    if (name_.empty()) return;
    try {
        remove(ns_, name_);
    } catch (const std::exception& e) {
        std::fputs(fmt::format("wanlab: warning: {}\n", text::terminal_safe(e.what())).c_str(), stderr);
        if (journal_) journal_->keep();
    }
}

void VethPair::remove(const std::string& ns, const std::string& name) {
    if (!ns.empty() && !NetNamespace::exists(ns)) return;
    RouteSocket sock(ns);
    rtnl_link* l = nullptr;
    if (rtnl_link_get_kernel(sock.get(), 0, name.c_str(), &l) < 0) return;  // already gone
    LinkPtr link(l);
    int err = rtnl_link_delete(sock.get(), link.get());
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) return;
    sock.check(err, fmt::format("deleting device {} {}", name, sysctl::where(ns)));
}

// --- addresses, routes ------------------------------------------------------------------

void set_up(RouteSocket& sock, const std::string& dev) {
    auto link = kernel_link(sock, dev);
    LinkPtr change(rtnl_link_alloc());
    rtnl_link_set_flags(change.get(), IFF_UP);
    sock.check(rtnl_link_change(sock.get(), link.get(), change.get(), 0),
               fmt::format("setting {} up {}", dev, sysctl::where(sock.ns())));
}

void add_address(RouteSocket& sock, const std::string& dev, const std::string& cidr) {
    std::unique_ptr<rtnl_addr, void (*)(rtnl_addr*)> addr(rtnl_addr_alloc(), rtnl_addr_put);
    auto local = parse_addr(cidr);
    rtnl_addr_set_ifindex(addr.get(), sock.ifindex(dev));
    check_nl(rtnl_addr_set_local(addr.get(), local.get()), fmt::format("address {}", cidr));
    // An IPv6 address would otherwise stay "tentative" through duplicate address detection
    // (about 2 s), unusable as a source; the lab's links have no one else on them.
    if (nl_addr_get_family(local.get()) == AF_INET6) rtnl_addr_set_flags(addr.get(), IFA_F_NODAD);
    sock.check(rtnl_addr_add(sock.get(), addr.get(), NLM_F_CREATE | NLM_F_EXCL),
               fmt::format("adding address {} to {} {}", cidr, dev, sysctl::where(sock.ns())));
}

void add_permanent_neighbour(RouteSocket& sock, const std::string& dev, const std::string& ip, RouteSocket& peer,
                             const std::string& peer_dev) {
    auto link = kernel_link(peer, peer_dev);
    nl_addr* lladdr = rtnl_link_get_addr(link.get());  // owned by the link
    if (!lladdr) throw Error(fmt::format("{} {} has no link-layer address", peer_dev, sysctl::where(peer.ns())));
    std::unique_ptr<rtnl_neigh, void (*)(rtnl_neigh*)> n(rtnl_neigh_alloc(), rtnl_neigh_put);
    auto dst = parse_addr(ip);
    rtnl_neigh_set_ifindex(n.get(), sock.ifindex(dev));
    check_nl(rtnl_neigh_set_dst(n.get(), dst.get()), fmt::format("neighbour {}", ip));
    rtnl_neigh_set_lladdr(n.get(), lladdr);
    rtnl_neigh_set_state(n.get(), NUD_PERMANENT);
    sock.check(rtnl_neigh_add(sock.get(), n.get(), NLM_F_CREATE | NLM_F_REPLACE),
               fmt::format("adding {} as a permanent neighbour on {} {}", ip, dev, sysctl::where(sock.ns())));
}

void add_default_route(RouteSocket& sock, const std::string& gateway) {
    std::unique_ptr<rtnl_route, void (*)(rtnl_route*)> route(rtnl_route_alloc(), rtnl_route_put);
    auto gw = parse_addr(gateway);
    const int family = nl_addr_get_family(gw.get());
    auto dst = parse_addr(family == AF_INET6 ? "::/0" : "0.0.0.0/0");
    rtnl_route_set_family(route.get(), static_cast<std::uint8_t>(family));
    check_nl(rtnl_route_set_dst(route.get(), dst.get()), "route destination");
    rtnl_nexthop* nh = rtnl_route_nh_alloc();
    rtnl_route_nh_set_gateway(nh, gw.get());
    rtnl_route_add_nexthop(route.get(), nh);  // the route owns nh from here
    sock.check(rtnl_route_add(sock.get(), route.get(), NLM_F_CREATE | NLM_F_EXCL),
               fmt::format("adding a default route via {} {}", gateway, sysctl::where(sock.ns())));
}

// --- offloads ---------------------------------------------------------------------------

// The legacy per-feature commands, not ETHTOOL_SFEATURES: they are one ioctl each with a
// fixed ABI and map exactly onto `ethtool -K dev gso|tso|gro on|off` (STSO switches every
// TSO flavour, as ethtool does), whereas SFEATURES first needs the feature-name string set
// (ETHTOOL_GSSET_INFO + ETHTOOL_GSTRINGS) to find the bit of each feature. The kernel still
// implements them by translating to the same feature bits.
void set_offloads(const std::string& ns, const std::string& dev, bool on) {
    const std::uint32_t data = on ? 1 : 0;
    for (auto [cmd, name] :
         {std::pair{ETHTOOL_SGSO, "GSO"}, std::pair{ETHTOOL_STSO, "TSO"}, std::pair{ETHTOOL_SGRO, "GRO"}}) {
        ethtool_value v{static_cast<std::uint32_t>(cmd), data};
        ethtool(ns, dev, v, fmt::format("turning {} {}", name, on ? "on" : "off"));
    }
    Offloads want{on, on, on};
    Offloads got = get_offloads(ns, dev);
    if (!(got == want))
        throw Error(fmt::format("{} {} kept offloads gso {} tso {} gro {} after being asked to turn them {}", dev,
                                sysctl::where(ns), got.gso, got.tso, got.gro, on ? "on" : "off"));
}

Offloads get_offloads(const std::string& ns, const std::string& dev) {
    return {get_one(ns, dev, ETHTOOL_GGSO, "GSO"), get_one(ns, dev, ETHTOOL_GTSO, "TSO"),
            get_one(ns, dev, ETHTOOL_GGRO, "GRO")};
}

}  // namespace wanlab::lab
