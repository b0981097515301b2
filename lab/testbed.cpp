#include "lab/testbed.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "experiment/plan.h"
#include "lab/journal.h"
#include "lab/ssh_guard.h"
#include "netem/device.h"
#include "netem/host.h"
#include "netem/kernel.h"
#include "netem/preflight.h"

namespace wanlab::lab {
namespace {

bool any_up(const std::vector<experiment::Trial>& trials) {
    return std::any_of(trials.begin(), trials.end(), [](const experiment::Trial& t) { return t.link.up.impaired(); });
}

bool any_down(const std::vector<experiment::Trial>& trials) {
    return std::any_of(trials.begin(), trials.end(), [](const experiment::Trial& t) { return t.link.down.impaired(); });
}

/// NamespaceTestbed: the client - router - server lab of lab/topology.h.
/// Creates: the topology; on the first apply_link(), a snapshot of each router egress
/// device's qdiscs, journaled before the first change. Undoes: the qdiscs, then the
/// topology (member order).
class NamespaceTestbed final : public Testbed {
public:
    NamespaceTestbed(const experiment::LabSpec& lab, const std::string& run, Journal& journal, sysctl::ProcSys& proc,
                     const Progress& progress)
        : run_(run), journal_(journal), proc_(proc), progress_(progress), built_(lab) {
        topology_.emplace(lab, run, &journal, proc, progress);
    }

    void prepare(const experiment::LabSpec& lab) override {
        if (lab.mtu == built_.mtu && lab.offloads == built_.offloads && lab.queue_length == built_.queue_length &&
            lab.ip == built_.ip)
            return;
        // A [lab] key the links are made with (a sweep of lab.mtu): the lab is built again,
        // under the same names, with the trial's; its sysctls and qdiscs follow.
        up_.reset();
        down_.reset();
        router_.reset();
        topology_.reset();
        topology_.emplace(lab, run_, &journal_, proc_, progress_);
        built_ = lab;
    }

    void apply_link(const experiment::Trial& trial) override {
        if (!router_) {
            const std::string ns = topology_->ns("router");
            router_.emplace(ns);
            up_.emplace(*router_, experiment::LabNames::kRouterToServer);
            down_.emplace(*router_, experiment::LabNames::kRouterToClient);
            // Written before the first qdisc change, so `wanlab restore` can put the trees
            // back even if the namespace outlives a killed run.
            journal_.record(qdisc_entry(ns, experiment::LabNames::kRouterToServer, up_->serialize()));
            journal_.record(qdisc_entry(ns, experiment::LabNames::kRouterToClient, down_->serialize()));
        }
        auto psched = netem::Psched::from_proc();
        auto put = [&](netem::DeviceQdiscs& dev, const netem::Direction& d) {
            if (d.impaired())
                dev.apply(d, trial.lab.mtu, psched);
            else
                dev.restore();
        };
        put(*up_, trial.link.up);
        put(*down_, trial.link.down);
    }

    probes::Endpoints endpoints(int family) const override {
        family = resolved(family);
        probes::Endpoints e;
        e.server = {topology_->ns("server"), Addressing::of("server", family), 0};
        e.client = {topology_->ns("client"), Addressing::of("client", family), 0};
        return e;
    }

    std::vector<netem::QdiscSite> qdisc_sites(const experiment::Trial& trial) const override {
        std::vector<netem::QdiscSite> out;
        if (trial.link.up.impaired())
            out.push_back({"up", topology_->ns("router"), experiment::LabNames::kRouterToServer, {}});
        if (trial.link.down.impaired())
            out.push_back({"down", topology_->ns("router"), experiment::LabNames::kRouterToClient, {}});
        return out;
    }

    std::vector<CapturePoint> capture_points() const override {
        return {{"client", topology_->ns("client"), Addressing::kClientDev, ""},
                {"server", topology_->ns("server"), Addressing::kServerDev, ""}};
    }

    services::Placement placement(const std::string& host) const override {
        return {topology_->ns(host), Addressing::of(host, resolved(AF_UNSPEC))};
    }

    std::string describe(const experiment::Trial&) const override {
        const auto& t = *topology_;
        auto both = [&](const char* v4, const char* v6) {
            return built_.ip == experiment::LabSpec::Ip::v4   ? std::string(v4)
                   : built_.ip == experiment::LabSpec::Ip::v6 ? std::string(v6)
                                                              : fmt::format("{} {}", v4, v6);
        };
        return fmt::format(
            "  {}  wl-c {}\n"
            "  {}  wl-rc {}, wl-rs {}, forwarding on\n"
            "  {}  wl-s {}\n"
            "  try: ip netns exec {} ping {}",
            t.ns("client"), both(Addressing::kClient, Addressing::kClient6), t.ns("router"),
            both(Addressing::kRouterClientSide, Addressing::kRouterClientSide6),
            both(Addressing::kRouterServerSide, Addressing::kRouterServerSide6), t.ns("server"),
            both(Addressing::kServer, Addressing::kServer6), t.ns("client"),
            Addressing::of("server", resolved(AF_UNSPEC)));
    }

    std::string undo_text() const override { return fmt::format("tearing down run {}", run_); }

private:
    // AF_UNSPEC -> the lab's first family; a family the lab was not built with is an error.
    int resolved(int family) const {
        if (family == AF_UNSPEC) return built_.has_ipv4() ? AF_INET : AF_INET6;
        if ((family == AF_INET && !built_.has_ipv4()) || (family == AF_INET6 && !built_.has_ipv6()))
            throw Error(fmt::format("the lab has no {} addresses ([lab] ip = \"{}\")",
                                    family == AF_INET ? "IPv4" : "IPv6", built_.ip_name()));
        return family;
    }

    std::string run_;
    Journal& journal_;
    sysctl::ProcSys& proc_;
    Progress progress_;
    experiment::LabSpec built_;  ///< the [lab] the topology was built with
    // Creation order; destruction runs in reverse.
    std::optional<Topology> topology_;
    std::optional<netem::NetlinkKernel> router_;
    std::optional<netem::DeviceQdiscs> up_, down_;
};

/// HostTestbed: one interface of this machine, impaired toward one target (netem/host.h).
/// Creates: the interface's undo plan, journaled before its first change. Undoes: restores
/// the interface; if that fails, logs it and keeps the journal for `wanlab restore`.
class HostTestbed final : public Testbed {
public:
    HostTestbed(const std::vector<experiment::Trial>& trials, const std::string& run, Journal& journal, const Log& log)
        : run_(run), journal_(journal), log_(log), lab_(trials.front().lab), kernel_("") {
        netem::Filter target{lab_.target, lab_.port, false, lab_.line_rate_bps};
        host_.emplace(kernel_, lab_.dev, target, lab_.line_rate_bps);
        host_->check(any_up(trials), any_down(trials));
        journal_.record(host_entry("", host_->undo_plan()));  // before its first change
    }

    ~HostTestbed() override {
        try {
            host_->restore();
        } catch (const std::exception& e) {
            if (log_) log_(fmt::format("could not restore {}: {}; `wanlab restore` retries", lab_.dev, e.what()));
            journal_.keep();
        }
    }

    void prepare(const experiment::LabSpec&) override {}

    void apply_link(const experiment::Trial& trial) override {
        host_->apply(trial.link.up, trial.link.down, trial.lab.mtu, netem::Psched::from_proc());
    }

    probes::Endpoints endpoints(int) const override {
        // The client in wanlab's own namespace, against servers already running on the target.
        probes::Endpoints e;
        e.server = {"", lab_.target.substr(0, lab_.target.find('/')), lab_.port, true};
        return e;
    }

    std::vector<netem::QdiscSite> qdisc_sites(const experiment::Trial& trial) const override {
        // Egress below the filter's htb class; ingress on the ifb's root.
        std::vector<netem::QdiscSite> out;
        if (trial.link.up.impaired()) out.push_back({"up", "", lab_.dev, netem::kFilteredLayout});
        if (trial.link.down.impaired()) out.push_back({"down", "", netem::ifb_name(lab_.dev), {}});
        return out;
    }

    // The real interface carries more than the lab: only the target's packets are kept.
    std::vector<CapturePoint> capture_points() const override {
        auto target = lab_.target.substr(0, lab_.target.find('/'));
        auto filter = lab_.target.find('/') == std::string::npos ? "host " + target : "net " + lab_.target;
        if (lab_.port) filter += fmt::format(" and port {}", lab_.port);
        return {{"host", "", lab_.dev, filter}};
    }

    // This machine is the only lab host: a service runs in wanlab's own namespace.
    services::Placement placement(const std::string&) const override { return {"", "127.0.0.1"}; }

    std::string describe(const experiment::Trial& trial) const override {
        return fmt::format(
            "  {}: toward {}{} only: up {}, down {}\n"
            "  try: tc qdisc show dev {}; tc filter show dev {}",
            lab_.dev, lab_.target, lab_.port ? fmt::format(" port {}", lab_.port) : "",
            experiment::direction_summary(trial.link.up), experiment::direction_summary(trial.link.down), lab_.dev,
            lab_.dev);
    }

    std::string undo_text() const override { return fmt::format("restoring {} (run {})", lab_.dev, run_); }

private:
    std::string run_;
    Journal& journal_;
    Log log_;
    experiment::LabSpec lab_;
    netem::NetlinkKernel kernel_;
    std::optional<netem::HostImpairment> host_;
};

}  // namespace

void check_testbed(const std::vector<experiment::Trial>& trials, const std::vector<sysctl::Change>& changes,
                   sysctl::ProcSys& proc, bool force) {
    const auto& lab = trials.front().lab;
    if (lab.mode != experiment::LabSpec::Mode::host) return;
    try {
        (void)netem::NetlinkKernel("").ifindex(lab.dev);
    } catch (const Error& e) {
        throw InputError(
            fmt::format("[lab] dev = \"{}\": {}; `ip link` lists this machine's interfaces", lab.dev, e.what()));
    }
    refuse_if_ssh("", lab.dev, lab.target, lab.port, force);
    // Host mode's sysctls go on this machine itself, under every session it has.
    std::vector<HostSysctl> host;
    for (const auto& c : changes)
        if (c.ns.empty()) host.push_back({c.key, c.value, proc.read("", c.key).value_or("")});
    refuse_sysctls_if_ssh(host, force);
    if (any_down(trials)) {
        if (auto why = netem::ifb_autoload_problem(); !why.empty())
            throw InputError(
                fmt::format("[link.down] in host mode redirects the target's packets through an ifb device: {}", why));
    }
}

std::string unverifiable(const experiment::LabSpec& lab) {
    if (lab.mode == experiment::LabSpec::Mode::host)
        return "host mode: not measured (the real path adds its own RTT); the qdiscs were read back";
    if (lab.mode == experiment::LabSpec::Mode::hosts)
        return "hosts mode: not measured (the real path adds its own RTT); the agent that applied them read the qdiscs "
               "back";
    return {};
}

std::vector<TestbedLock> testbed_locks(const experiment::LabSpec& lab) {
    if (lab.mode != experiment::LabSpec::Mode::host) return {};
    return {{fmt::format("dev-{}.lock", lab.dev), "device " + lab.dev}};
}

std::unique_ptr<Testbed> make_testbed(const std::vector<experiment::Trial>& trials, const std::string& run,
                                      Journal& journal, sysctl::ProcSys& proc, const Progress& progress,
                                      const Log& log) {
    const auto& lab = trials.front().lab;
    if (lab.mode == experiment::LabSpec::Mode::host) return std::make_unique<HostTestbed>(trials, run, journal, log);
    return std::make_unique<NamespaceTestbed>(lab, run, journal, proc, progress);
}

}  // namespace wanlab::lab
