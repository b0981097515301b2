#include "remote/hosts.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "lab/capabilities.h"
#include "lab/watchdog.h"
#include "netem/host.h"
#include "remote/flows.h"
#include "remote/protocol.h"
#include "services/service.h"

namespace wanlab::remote {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// An agent hears from the controller at least this often (the pings), and gives its
// machine back when it has not for the lease: a few missed pings, not one slow answer.
constexpr auto kPingEvery = 5s;
constexpr unsigned kLeaseS = 30;
constexpr auto kCall = 60s;  // a sysctl, a stop, a read
constexpr auto kEnd = 120s;  // everything given back

/// The testbed of hosts mode: the probes run here, against the server machine; link
/// conditions, if any, on `dev` here (the client's agent applies them: HostsSession).
class HostsTestbed final : public lab::Testbed {
public:
    HostsTestbed(const lab::LabSpec& lab, std::string dev) : lab_(lab), dev_(std::move(dev)) {}
    void prepare(const lab::LabSpec&) override {}
    void apply_link(const lab::Trial&) override {}
    probes::Endpoints endpoints() const override {
        probes::Endpoints e;
        e.server = {"", address("server"), 0, true};
        e.client = {"", address("client"), 0};
        return e;
    }
    // As host mode's: egress below the filter's htb class, ingress on the ifb's root.
    std::vector<netem::QdiscSite> qdisc_sites(const lab::Trial& trial) const override {
        std::vector<netem::QdiscSite> out;
        if (dev_.empty()) return out;
        if (trial.link.up.impaired()) out.push_back({"up", "", dev_, netem::kFilteredLayout});
        if (trial.link.down.impaired()) out.push_back({"down", "", netem::ifb_name(dev_), {}});
        return out;
    }
    // The client's interface carries more than the run: only the server's packets are kept,
    // not those of wanlab's own ssh connections.
    std::vector<lab::CapturePoint> capture_points() const override {
        if (dev_.empty()) return {};
        auto filter = fmt::format("host {}", address("server"));
        for (const auto& f : exempt_)
            filter += fmt::format(" and not (tcp and host {} and port {} and host {} and port {})", f.local,
                                  f.local_port, f.peer, f.peer_port);
        return {{"client", "", dev_, filter}};
    }
    void set_exempt(std::vector<netem::Flow> flows) { exempt_ = std::move(flows); }
    services::Placement placement(const std::string& host) const override { return {"", address(host)}; }
    std::string describe(const lab::Trial&) const override {
        std::string out;
        for (const auto& m : lab_.machines)
            out += fmt::format("  {}: {}{}\n", m.name, m.ssh, m.address.empty() ? "" : " (" + m.address + ")");
        return out;
    }
    std::string undo_text() const override { return "giving every machine back"; }

private:
    std::string address(const std::string& role) const {
        for (const auto& m : lab_.machines)
            if (m.name == role) return m.address;
        return "";
    }
    lab::LabSpec lab_;
    std::string dev_;
    std::vector<netem::Flow> exempt_;
};

}  // namespace

HostsSession::PrivateDir::PrivateDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "wanlab-ssh-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) sys::fail_errno("creating a folder for ssh's control sockets");
    path = pattern;
}

HostsSession::PrivateDir::~PrivateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

std::vector<std::pair<std::string, std::string>> machine_sysctls(const lab::Trial& trial, const std::string& role) {
    std::vector<std::pair<std::string, std::string>> out;
    auto put = [&out](const std::string& key, const std::string& value) {
        auto it = std::find_if(out.begin(), out.end(), [&key](const auto& kv) { return kv.first == key; });
        if (it != out.end())
            it->second = value;
        else
            out.emplace_back(key, value);
    };
    for (const auto& s : trial.sysctl.global) put(s.key, s.value);
    if (auto it = trial.sysctl.per_host.find(role); it != trial.sysctl.per_host.end())
        for (const auto& s : it->second) put(s.key, s.value);
    return out;
}

HostsSession::HostsSession(const std::vector<lab::Trial>& trials, const HostsOptions& options) : options_(options) {
    lab::check_run_id(options.run);
    if (trials.empty()) throw InputError("the experiment has no trials");
    const auto& lab = trials.front().lab;
    // Link conditions go on the router's interface toward the server when there is a router
    // (its agent finds the interface unless [hosts.router] dev names it), else on this
    // machine's (the client's), found here: the testbed reads its qdiscs' statistics.
    for (const auto& t : trials) {
        any_up_ = any_up_ || t.link.up.impaired();
        any_down_ = any_down_ || t.link.down.impaired();
    }
    const bool link = any_up_ || any_down_;
    link_role_ = lab.link_machine();
    link_dev_ = lab.machine(link_role_)->dev;
    std::string local_dev;
    if (link && link_role_ == "client") {
        if (link_dev_.empty()) link_dev_ = route_device(lab.machine("server")->address);
        local_dev = link_dev_;
    }
    testbed_ = std::make_unique<HostsTestbed>(lab, local_dev);
    const auto self = lab::self_exe();
    // The client (this machine) first: a local failure is found before any ssh.
    auto machines = lab.machines;
    std::stable_sort(machines.begin(), machines.end(), [](const auto& a, const auto&) { return a.name == "client"; });
    for (const auto& m : machines) {
        Destination d{m.name, m.ssh, lab.ssh_config, m.wanlab};
        auto channel = std::make_unique<Channel>(d, control_dir_.path, self, options.connect_timeout);
        if (auto why = hello_problem(channel->hello(), m.name, m.wanlab); !why.empty()) throw Error(why);
        std::set<std::string> keys;  // every key any trial sets here: locked for the run
        for (const auto& t : trials)
            for (const auto& kv : machine_sysctls(t, m.name)) keys.insert(kv.first);
        channel->call("begin",
                      {{"run", machine_run(options.run, m.name)},
                       {"lease_s", kLeaseS},
                       {"deadline_s", options.deadline_s},
                       {"restore", options.restore_stale},
                       {"global_keys", keys}},
                      kCall);
        if (options.progress) options.progress("connected " + m.name);
        machines_.push_back({m, std::move(channel)});
    }
    // wanlab's own connections to the other machines: never impaired.
    if (link)
        for (const auto& m : machines_) {
            if (m.channel->destination().local()) continue;
            auto flows = tcp_flows_of(m.channel->pid());
            if (flows.empty() && options.log)
                options.log(
                    fmt::format("{}: found no TCP connection of ssh's to exempt from the link conditions; "
                                "if it crosses them, they slow the run's control too",
                                m.spec.name));
            exempt_.insert(exempt_.end(), flows.begin(), flows.end());
        }
    static_cast<HostsTestbed&>(*testbed_).set_exempt(exempt_);
    pinger_ = std::thread([this] { keep_alive(); });
}

HostsSession::~HostsSession() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (pinger_.joinable()) pinger_.join();
    // Newest first, as everything else is undone.
    for (auto it = machines_.rbegin(); it != machines_.rend(); ++it) {
        try {
            auto answer = it->channel->call("end", {}, kEnd);
            for (const auto& note : answer.value("notes", std::vector<std::string>{}))
                if (options_.log) options_.log(fmt::format("{}: {}", it->spec.name, note));
        } catch (const std::exception& e) {
            if (options_.log)
                options_.log(
                    fmt::format("{}: {}; its agent gives it back as the connection closes, or `wanlab "
                                "restore` there",
                                it->spec.name, e.what()));
        }
        it->channel.reset();
    }
}

void HostsSession::keep_alive() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, kPingEvery, [this] { return stopping_; })) {
        lock.unlock();
        for (auto& m : machines_) {
            try {
                m.channel->call("ping", {}, kCall);
            } catch (const std::exception&) {
                // The run's next request to it says what happened.
            }
        }
        lock.lock();
    }
}

Channel& HostsSession::channel_of(const std::string& role) {
    for (auto& m : machines_)
        if (m.spec.name == role) return *m.channel;
    throw Error(fmt::format("no machine `{}` in [hosts]", role));
}

void HostsSession::apply_trial(const lab::Trial& trial) {
    stop_services();
    for (auto& m : machines_) {
        json set = json::array();
        for (const auto& [key, value] : machine_sysctls(trial, m.spec.name)) set.push_back({key, value});
        m.channel->call("sysctl", {{"set", set}}, kCall);
    }
    if (options_.progress) options_.progress("sysctls");
    if (any_up_ || any_down_) {
        json exempt = json::array();
        for (const auto& f : exempt_) exempt.push_back(flow_json(f));
        auto needs = lab::needed_qdiscs(std::vector<lab::Trial>{trial});
        channel_of(link_role_)
            .call("link",
                  {{"dev", link_dev_},
                   {"needs", needs},
                   {"any_up", any_up_},
                   {"any_down", any_down_},
                   {"target", testbed_->endpoints().server.address},
                   {"exempt", exempt},
                   {"line_rate", trial.lab.line_rate_bps},
                   {"mtu", trial.lab.mtu},
                   {"up", direction_json(trial.link.up)},
                   {"down", direction_json(trial.link.down)}},
                  kCall);
        if (options_.progress) options_.progress("link");
    }
}

void HostsSession::start_services(const lab::Trial& trial, const std::filesystem::path&, const probes::Tick& tick) {
    stop_services();
    auto where = testbed_->endpoints();
    std::map<std::string, std::string> values{
        {"server", where.server.address}, {"client", where.client.address}, {"trial", trial.id}, {"run", options_.run}};
    for (const auto& spec : trial.services) {
        if (tick) tick();
        auto& channel = channel_of(spec.host);
        // Its ready wait happens there: the call waits for it, and a little more.
        auto wait =
            std::chrono::duration_cast<std::chrono::milliseconds>(spec.ready.timeout + spec.ready.delay) + kCall;
        try {
            channel.call("service_start",
                         {{"service", service_json(spec)},
                          {"values", values},
                          {"trial", fmt::format("trial-{}-{}", trial.index, trial.id)},
                          {"address", testbed_->placement(spec.host).address}},
                         wait);
        } catch (const AgentError& e) {
            if (e.failure() == "service") throw services::ServiceFailure(e.what());
            throw;
        }
    }
    if (options_.progress && !trial.services.empty()) options_.progress("services");
}

void HostsSession::check_services() {
    for (auto& m : machines_) {
        try {
            m.channel->call("service_check", {}, kCall);
        } catch (const AgentError& e) {
            if (e.failure() == "service") throw services::ServiceFailure(e.what());
            throw;
        }
    }
}

void HostsSession::stop_services() noexcept {
    for (auto& m : machines_) {
        try {
            m.channel->call("service_stop", {}, kCall);
        } catch (const std::exception& e) {
            if (options_.log) options_.log(fmt::format("{}: stopping its services: {}", m.spec.name, e.what()));
        }
    }
}

}  // namespace wanlab::remote
