// Links inside the lab: a netlink socket bound to a namespace, veth pairs, addresses,
// routes and offload switches.
//
// Contract: everything goes through libnl-route (netlink), except offloads, which go
// through the ethtool ioctl (SIOCETHTOOL). Namespaces are named as in ProcSys ("" = the
// namespace wanlab runs in). Failures throw wanlab::Error with the attempted action and the
// kernel's reason. Addresses and routes are not separate resources: they belong to a device
// wanlab created and disappear with it. Not thread-safe; one RouteSocket per thread.
#pragma once

#include <cstdint>
#include <string>

#include "netem/kernel.h"

struct nl_sock;

namespace wanlab::lab {

class Journal;

/// A NETLINK_ROUTE socket opened inside a namespace (it stays bound there for its life).
///
/// Creates: the socket. Undoes: closes it.
class RouteSocket {
public:
    explicit RouteSocket(const std::string& ns);
    ~RouteSocket();
    RouteSocket(const RouteSocket&) = delete;
    RouteSocket& operator=(const RouteSocket&) = delete;

    nl_sock* get() const { return sock_; }
    const std::string& ns() const { return ns_; }
    /// The interface index of `dev`; throws when there is no such device.
    int ifindex(const std::string& dev);
    /// True if `dev` exists in this namespace.
    bool has(const std::string& dev);
    /// Throws for a negative libnl result of a request on this socket: "<what>: <errno
    /// text> (<the kernel's extended-ACK message>)", e.g. "adding address ...: File exists".
    void check(int err, const std::string& what);

private:
    std::string ns_;
    nl_sock* sock_ = nullptr;
    netem::AckError ack_;  ///< the last failed request's errno and message (capture_acks)
};

/// GSO, TSO and GRO of one device, as `ethtool -k` shows them.
struct Offloads {
    bool gso = false, tso = false, gro = false;
    bool operator==(const Offloads&) const = default;
};

/// One end's settings; both ends of a pair get the same.
struct LinkOptions {
    std::uint32_t mtu = 1500;         ///< bytes
    std::uint32_t txqueuelen = 1000;  ///< packets
    bool offloads = false;            ///< GSO/TSO/GRO on (true) or off (false)
};

/// VethPair: two connected virtual Ethernet devices, `name` in namespace `ns` and `peer` in
/// namespace `peer_ns`.
///
/// Creates: the pair in one RTM_NEWLINK request, the peer directly inside `peer_ns`
/// (IFLA_NET_NS_FD in the peer info, so it never appears in `ns`), with MTU and txqueuelen,
/// offloads set, both ends up; journaled first when a Journal is given. Undoes: deletes
/// `name`, which deletes the peer too; nothing to do when its namespace is already gone.
/// The destructor never throws. Move-only.
class VethPair {
public:
    VethPair(std::string ns, std::string name, std::string peer_ns, std::string peer, const LinkOptions& options,
             Journal* journal);
    ~VethPair();
    VethPair(VethPair&& o) noexcept;
    VethPair& operator=(VethPair&&) = delete;
    VethPair(const VethPair&) = delete;
    VethPair& operator=(const VethPair&) = delete;

    const std::string& name() const { return name_; }

    /// Deletes device `name` in namespace `ns`; does nothing when either is gone.
    static void remove(const std::string& ns, const std::string& name);

private:
    std::string ns_, name_, peer_ns_, peer_;
    Journal* journal_;
};

/// Sets IFF_UP on `dev`.
void set_up(RouteSocket& sock, const std::string& dev);
/// Adds an address such as "198.18.0.1/30" or "2001:2::1/126" to `dev` (IPv6 without
/// duplicate address detection, so it is usable at once).
void add_address(RouteSocket& sock, const std::string& dev, const std::string& cidr);
/// Makes `ip` (an address without its prefix) on `dev` a permanent neighbour whose link-layer
/// address is `peer_dev`'s in `peer`'s namespace: no ARP or neighbour discovery for it ever
/// crosses the link (netem would delay and drop them like any packet: one lost ARP request
/// holds every packet behind it for the 1 s of ARP's retry).
void add_permanent_neighbour(RouteSocket& sock, const std::string& dev, const std::string& ip, RouteSocket& peer,
                             const std::string& peer_dev);
/// Adds a default route through `gateway` ("198.18.0.2", or "2001:2::2" for IPv6's).
void add_default_route(RouteSocket& sock, const std::string& gateway);

/// Turns GSO, TSO and GRO on or off, then reads them back and throws if the device kept a
/// different setting. Uses the legacy ETHTOOL_S{GSO,TSO,GRO} commands (see link.cpp).
void set_offloads(const std::string& ns, const std::string& dev, bool on);
Offloads get_offloads(const std::string& ns, const std::string& dev);

}  // namespace wanlab::lab
