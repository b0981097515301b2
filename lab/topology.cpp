#include "lab/topology.h"

#include "lab/journal.h"

namespace wanlab::lab {
namespace {

void loopback_up(const std::string& ns) {
    RouteSocket sock(ns);
    set_up(sock, "lo");
}

}  // namespace

Topology::Topology(const experiment::LabSpec& spec, const std::string& run, Journal* journal, sysctl::ProcSys& proc,
                   const Progress& progress) {
    names_.run = run;
    auto step = [&](const std::string& stage) {
        if (progress) progress(stage);
    };
    client_.emplace(ns("client"), journal);
    router_.emplace(ns("router"), journal);
    server_.emplace(ns("server"), journal);
    for (const char* host : {"client", "router", "server"}) {
        loopback_up(ns(host));
        // A router solicits the neighbour it forwards to from its link-local address, and
        // sends nothing while that address is in duplicate-address detection (about 2 s
        // after the link comes up): forwarded IPv6 would be lost at the start of a run. The
        // devices get the namespace's default when they arrive, so none runs DAD. (The
        // setting lives and dies with the namespace.)
        if (spec.has_ipv6()) proc.write(ns(host), "net.ipv6.conf.default.accept_dad", "0");
    }
    step("namespaces");

    LinkOptions options{spec.mtu, spec.queue_length, spec.offloads};
    client_link_.emplace(ns("router"), experiment::LabNames::kRouterToClient, ns("client"), Addressing::kClientDev,
                         options, journal);
    server_link_.emplace(ns("router"), experiment::LabNames::kRouterToServer, ns("server"), Addressing::kServerDev,
                         options, journal);
    {
        RouteSocket client(ns("client")), router(ns("router")), server(ns("server"));
        using A = Addressing;
        for (bool v6 : {false, true}) {
            if (!(v6 ? spec.has_ipv6() : spec.has_ipv4())) continue;
            add_address(client, A::kClientDev, v6 ? A::kClient6 : A::kClient);
            add_address(router, experiment::LabNames::kRouterToClient,
                        v6 ? A::kRouterClientSide6 : A::kRouterClientSide);
            add_address(router, experiment::LabNames::kRouterToServer,
                        v6 ? A::kRouterServerSide6 : A::kRouterServerSide);
            add_address(server, A::kServerDev, v6 ? A::kServer6 : A::kServer);
            add_default_route(client, v6 ? A::kClientGateway6 : A::kClientGateway);
            add_default_route(server, v6 ? A::kServerGateway6 : A::kServerGateway);
            // Each end knows the other's link-layer address: the emulated path carries no ARP
            // or neighbour discovery, which netem would delay and drop (a lost ARP request
            // held the first emulation check of a lossy path for 1 s, ARP's retry).
            const char* rc = experiment::LabNames::kRouterToClient;
            const char* rs = experiment::LabNames::kRouterToServer;
            add_permanent_neighbour(client, A::kClientDev, v6 ? A::kClientGateway6 : A::kClientGateway, router, rc);
            add_permanent_neighbour(router, rc, v6 ? A::kClientIp6 : A::kClientIp, client, A::kClientDev);
            add_permanent_neighbour(router, rs, v6 ? A::kServerIp6 : A::kServerIp, server, A::kServerDev);
            add_permanent_neighbour(server, A::kServerDev, v6 ? A::kServerGateway6 : A::kServerGateway, router, rs);
        }
    }
    forwarding_.emplace(proc, [journal](const std::string& n, const std::string& key, const std::string* old,
                                        const std::string& value) {
        if (journal) journal->record(old ? sysctl_entry(n, key, *old, value) : sysctl_write_entry(n, key, value));
    });
    if (spec.has_ipv4()) forwarding_->set(ns("router"), "net.ipv4.ip_forward", "1");
    if (spec.has_ipv6()) forwarding_->set(ns("router"), "net.ipv6.conf.all.forwarding", "1");
    step("links");
}

PairTopology::PairTopology(const std::string& prefix, Journal* journal)
    : a_(prefix + "-a", journal), b_(prefix + "-b", journal) {
    veth_.emplace(a_.name(), "wlp-a", b_.name(), "wlp-b", LinkOptions{1500, 1000, true}, journal);
    RouteSocket sa(a_.name()), sb(b_.name());
    set_up(sa, "lo");
    set_up(sb, "lo");
    add_address(sa, "wlp-a", std::string(kClientIp) + "/30");
    add_address(sb, "wlp-b", std::string(kServerIp) + "/30");
    add_address(sa, "wlp-a", std::string(kClientIp6) + "/126");
    add_address(sb, "wlp-b", std::string(kServerIp6) + "/126");
}

probes::Endpoints PairTopology::endpoints(std::uint16_t server_port, int family) const {
    const bool v6 = family == AF_INET6;
    probes::Endpoints e;
    e.server = {b_.name(), v6 ? kServerIp6 : kServerIp, server_port};
    e.client = {a_.name(), v6 ? kClientIp6 : kClientIp, 0};
    return e;
}

const char* Addressing::of(const std::string& host, int family) {
    const bool v6 = family == AF_INET6;
    if (host == "client") return v6 ? kClientIp6 : kClientIp;
    if (host == "router") return v6 ? kClientGateway6 : kClientGateway;
    return v6 ? kServerIp6 : kServerIp;
}

}  // namespace wanlab::lab
