#include "lab/topology.h"

#include "lab/journal.h"

namespace wanlab::lab {
namespace {

void loopback_up(const std::string& ns) {
    RouteSocket sock(ns);
    set_up(sock, "lo");
}

}  // namespace

Topology::Topology(const LabSpec& spec, const std::string& run, Journal* journal, sysctl::ProcSys& proc,
                   const Progress& progress) {
    names_.run = run;
    auto step = [&](const std::string& stage) {
        if (progress) progress(stage);
    };
    client_.emplace(ns("client"), journal);
    router_.emplace(ns("router"), journal);
    server_.emplace(ns("server"), journal);
    for (const char* host : {"client", "router", "server"}) loopback_up(ns(host));
    step("namespaces");

    LinkOptions options{spec.mtu, spec.queue_length, spec.offloads};
    client_link_.emplace(ns("router"), LabNames::kRouterToClient, ns("client"), Addressing::kClientDev, options,
                         journal);
    server_link_.emplace(ns("router"), LabNames::kRouterToServer, ns("server"), Addressing::kServerDev, options,
                         journal);
    {
        RouteSocket client(ns("client")), router(ns("router")), server(ns("server"));
        add_address(client, Addressing::kClientDev, Addressing::kClient);
        add_address(router, LabNames::kRouterToClient, Addressing::kRouterClientSide);
        add_address(router, LabNames::kRouterToServer, Addressing::kRouterServerSide);
        add_address(server, Addressing::kServerDev, Addressing::kServer);
        add_default_route(client, Addressing::kClientGateway);
        add_default_route(server, Addressing::kServerGateway);
    }
    forwarding_.emplace(proc, [journal](const std::string& n, const std::string& key, const std::string* old,
                                        const std::string& value) {
        if (journal) journal->record(old ? sysctl_entry(n, key, *old, value) : sysctl_write_entry(n, key, value));
    });
    forwarding_->set(ns("router"), "net.ipv4.ip_forward", "1");
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
}

probes::Endpoints PairTopology::endpoints(std::uint16_t server_port) const {
    probes::Endpoints e;
    e.server = {b_.name(), kServerIp, server_port};
    e.client = {a_.name(), kClientIp, 0};
    return e;
}

}  // namespace wanlab::lab
