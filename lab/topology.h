// Topology: the three-namespace lab, client - router - server.
//
//   wanlab-RUN-client          wanlab-RUN-router                 wanlab-RUN-server
//   wl-c 198.18.0.1/30 ---- wl-rc 198.18.0.2/30
//                           wl-rs 198.18.0.5/30 ---- wl-s 198.18.0.6/30
//   default via 198.18.0.2     ip_forward = 1                    default via 198.18.0.5
//
// With [lab] ip = "ipv6" or "dual", the same shape from 2001:2::/48 (RFC 5180, IPv6
// benchmarking), one /126 per link, the last digits those of the IPv4 addresses:
//   wl-c 2001:2::1/126 ---- wl-rc 2001:2::2/126, wl-rs 2001:2::5/126 ---- wl-s 2001:2::6/126
// added without duplicate address detection (usable at once) and with IPv6 forwarding on in
// the router.
//
// Addresses come from 198.18.0.0/15 (RFC 2544 benchmarking), one /30 per link. Link
// conditions belong on the router's egress (wl-rs carries client -> server, wl-rc server ->
// client), so neither endpoint's TCP sees a qdisc of its own (TCP Small Queues).
//
// Creates, in this order: the three namespaces (loopback up), the two veth pairs (MTU,
// txqueuelen, offloads from the LabSpec; addresses, routes), forwarding in the router.
// Undoes: everything in reverse, by member destruction order. Move-less; not thread-safe.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "experiment/experiment.h"
#include "experiment/lab_names.h"
#include "lab/link.h"
#include "lab/netns.h"
#include "probes/probe.h"
#include "sysctl/proc_sys.h"
#include "sysctl/snapshot.h"

namespace wanlab::lab {

class Journal;

/// The lab's fixed addressing.
struct Addressing {
    static constexpr const char* kClientDev = "wl-c";
    static constexpr const char* kServerDev = "wl-s";
    static constexpr const char* kClient = "198.18.0.1/30";
    static constexpr const char* kRouterClientSide = "198.18.0.2/30";
    static constexpr const char* kRouterServerSide = "198.18.0.5/30";
    static constexpr const char* kServer = "198.18.0.6/30";
    static constexpr const char* kClientGateway = "198.18.0.2";
    static constexpr const char* kServerGateway = "198.18.0.5";
    static constexpr const char* kClientIp = "198.18.0.1";
    static constexpr const char* kServerIp = "198.18.0.6";

    static constexpr const char* kClient6 = "2001:2::1/126";
    static constexpr const char* kRouterClientSide6 = "2001:2::2/126";
    static constexpr const char* kRouterServerSide6 = "2001:2::5/126";
    static constexpr const char* kServer6 = "2001:2::6/126";
    static constexpr const char* kClientGateway6 = "2001:2::2";
    static constexpr const char* kServerGateway6 = "2001:2::5";
    static constexpr const char* kClientIp6 = "2001:2::1";
    static constexpr const char* kServerIp6 = "2001:2::6";

    /// The address of lab host `host` ("client", "router" (its client side), "server") in
    /// `family` (AF_INET or AF_INET6).
    static const char* of(const std::string& host, int family);
};

/// Called after each stage ("namespaces", "links") so a caller can check for signals.
using Progress = std::function<void(const std::string& stage)>;

class Topology {
public:
    Topology(const experiment::LabSpec& spec, const std::string& run, Journal* journal, sysctl::ProcSys& proc,
             const Progress& progress = {});
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;

    const experiment::LabNames& names() const { return names_; }
    /// "wanlab-RUN-client", ...
    std::string ns(const std::string& host) const { return names_.ns(host); }

private:
    experiment::LabNames names_;
    // Creation order; destruction runs in reverse.
    std::optional<NetNamespace> client_, router_, server_;
    std::optional<VethPair> client_link_, server_link_;
    std::optional<sysctl::SysctlSnapshot> forwarding_;
};

/// PairTopology: `wanlab probe`'s bare lab, two namespaces joined by one veth pair.
///
///   PREFIX-a  wlp-a 198.18.100.1/30 ---- wlp-b 198.18.100.2/30  PREFIX-b
///             wlp-a 2001:2::100:1/126      wlp-b 2001:2::100:2/126
///
/// Creates: the two namespaces (loopback up), the pair (kernel-default offloads on, MTU
/// 1500), the addresses; each namespace and the pair journaled before it is made when a
/// Journal is given, so `wanlab restore` removes them after a killed probe. Undoes: the
/// pair and both namespaces, by member destruction order.
class PairTopology {
public:
    static constexpr const char* kClientIp = "198.18.100.1";
    static constexpr const char* kServerIp = "198.18.100.2";
    static constexpr const char* kClientIp6 = "2001:2::100:1";
    static constexpr const char* kServerIp6 = "2001:2::100:2";

    PairTopology(const std::string& prefix, Journal* journal);
    PairTopology(const PairTopology&) = delete;
    PairTopology& operator=(const PairTopology&) = delete;

    /// The client in PREFIX-a, the server in PREFIX-b on `server_port` (0 = the probe's own),
    /// over `family` (AF_INET or AF_INET6).
    probes::Endpoints endpoints(std::uint16_t server_port, int family = AF_INET) const;

private:
    NetNamespace a_, b_;
    std::optional<VethPair> veth_;
};

}  // namespace wanlab::lab
