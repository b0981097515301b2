#include "remote/hosts.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "core/sys.h"
#include "core/text.h"
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

// A probe on the client machine has this long beyond its own time to answer: tools starting,
// timeouts of the last transactions, the result crossing the wire.
constexpr auto kProbeSlack = std::chrono::milliseconds(120'000);

/// AgentFar: a built-in probe's server on the server machine, run by its agent for one
/// measurement (probes::serve_far() there). Creates: the server, through `probe_serve`.
/// Undoes: `probe_stop`, by stop() (which returns what it saw) or the destructor.
class AgentFar final : public probes::FarServer {
public:
    AgentFar(Channel& channel, const probes::ProbeSpec& spec, std::uint16_t port) : channel_(channel) {
        auto answer =
            channel_.call("probe_serve", {{"probe", probe_json(spec)}, {"address", ""}, {"port", port}}, kCall);
        port_ = answer.at("port").get<std::uint16_t>();
    }
    ~AgentFar() override {
        if (report_) return;
        try {
            channel_.call("probe_stop", json::object(), kCall);
        } catch (const std::exception&) {
            // The agent stops it with the next one, or as it gives its machine back.
        }
    }
    AgentFar(const AgentFar&) = delete;
    AgentFar& operator=(const AgentFar&) = delete;
    std::uint16_t port() const override { return port_; }
    probes::FarReport stop() override {
        if (!report_) report_ = far_report_of(channel_.call("probe_stop", json::object(), kCall).at("report"));
        return *report_;
    }

private:
    Channel& channel_;
    std::uint16_t port_ = 0;
    std::optional<probes::FarReport> report_;
};

/// The testbed of hosts mode: the probes run here, against the server machine (a built-in
/// probe's own server started there by its agent); link conditions, if any, on `dev` here
/// (the client's agent applies them: HostsSession).
class HostsTestbed final : public lab::Testbed {
public:
    HostsTestbed(const experiment::LabSpec& lab, std::string dev) : lab_(lab), dev_(std::move(dev)) {
        if (const auto* server = lab_.machine("server")) probe_port_ = server->probe_port;
    }
    void prepare(const experiment::LabSpec&) override {}
    void apply_link(const experiment::Trial&) override {}
    probes::Endpoints endpoints(int) const override {
        probes::Endpoints e;
        e.server = {"", address("server"), 0, true};
        e.client = {"", address("client"), 0};
        return e;
    }
    // As host mode's: egress below the filter's htb class, ingress on the ifb's root.
    std::vector<netem::QdiscSite> qdisc_sites(const experiment::Trial& trial) const override {
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
    /// The agents of the machines other than this one, by role, once they began; `client`:
    /// the client machine's, when it is not this one (the probes then run there).
    void set_agents(std::vector<std::pair<std::string, Channel*>> agents, Channel* client) {
        agents_ = std::move(agents);
        client_ = client;
        for (const auto& [role, channel] : agents_)
            if (role == "server") server_ = channel;
    }
    bool probes_here() const override { return client_ == nullptr; }
    probes::ProbeResult run_probe(const probes::ProbeSpec& spec, const probes::Endpoints& where,
                                  const probes::Tick& tick) const override {
        if (!client_) return probes::make_probe(spec)->run(where, tick);
        if (probes::traits_of(spec.kind).runs_here_only)
            throw Error("a command probe runs on this machine, not on the client machine");
        // The far server's report, which the probe asks for as it ends, comes from the server
        // machine's agent through this controller.
        auto far = where.server.far;
        Channel::Asked asked = [far](const json& question) -> json {
            if (question.value("op", "") != "probe_stop" || !far)
                throw Error(fmt::format("the client machine asked for `{}`",
                                        text::terminal_safe(json_input::dump(question).substr(0, 200))));
            return far_report_json(far->stop());
        };
        json server = {
            {"address", where.server.address}, {"port", where.server.port}, {"far", where.server.far != nullptr}};
        auto within =
            std::chrono::milliseconds(static_cast<std::int64_t>(probes::planned_seconds(spec) * 1000)) + kProbeSlack;
        try {
            auto answer =
                client_->call("probe_run", {{"probe", probe_json(spec)}, {"server", server}}, within, asked, tick);
            return probe_result_of(answer.at("result"));
        } catch (const AgentError& e) {
            if (e.failure() == "measurement") throw probes::MeasurementError(e.what());
            throw;
        }
    }
    probes::Endpoints measure(const probes::ProbeSpec& spec, probes::Endpoints where) const override {
        // A probe with `server_port` measures against a [[service]]; others need their own.
        if (where.server.port != 0 || !server_ || !probes::far_servable(spec)) return where;
        auto far = std::make_shared<AgentFar>(*server_, spec, probe_port_);
        where.server.port = far->port();
        where.server.far = std::move(far);
        return where;
    }
    json machine_counters() const override {
        json out = json::object();
        for (const auto& [role, channel] : agents_) {
            auto answer = channel->call("counters", json::object(), kCall);
            out[role] = {{"counters", answer.at("counters")}, {"cpu", answer.at("cpu")}};
        }
        return out;
    }
    services::Placement placement(const std::string& host) const override { return {"", address(host)}; }
    std::string describe(const experiment::Trial&) const override {
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
    experiment::LabSpec lab_;
    std::string dev_;
    std::uint16_t probe_port_ = 0;
    std::vector<netem::Flow> exempt_;
    std::vector<std::pair<std::string, Channel*>> agents_;
    Channel* client_ = nullptr;  ///< the client machine's agent, when the probes run there
    Channel* server_ = nullptr;  ///< the server machine's agent, which runs the probes' servers
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

std::vector<std::pair<std::string, std::string>> machine_sysctls(const experiment::Trial& trial,
                                                                 const std::string& role) {
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

void refuse_ssh_commands(const experiment::LabSpec& lab, bool allowed) {
    if (lab.ssh_config.empty() || allowed) return;
    // Read again here, not taken from the load: the file may have changed since.
    auto lines =
        experiment::ssh_command_lines(sys::read_file(lab.ssh_config, sys::kMaxInputBytes, "[hosts] ssh_config"));
    if (lines.empty()) return;
    throw InputError(fmt::format(
        "[hosts] ssh_config {} makes ssh run commands, as the user running wanlab (root for a run): {}; read "
        "them, then run again with --allow-ssh-commands, or name a config without them",
        text::terminal_safe(lab.ssh_config), fmt::join(lines, "; ")));
}

HostsSession::HostsSession(const std::vector<experiment::Trial>& trials, const HostsOptions& options)
    : options_(options) {
    lab::check_run_id(options.run);
    if (trials.empty()) throw InputError("the experiment has no trials");
    const auto& lab = trials.front().lab;
    refuse_ssh_commands(lab, options.allow_ssh_commands);
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
    if (link && link_role_ == "client" && lab.machine("client")->ssh == "local") {
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
                       {"resume", options.resume},
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
    auto& testbed = static_cast<HostsTestbed&>(*testbed_);
    testbed.set_exempt(exempt_);
    std::vector<std::pair<std::string, Channel*>> agents;
    Channel* client = nullptr;
    for (const auto& m : machines_) {
        if (m.spec.name != "client")
            agents.emplace_back(m.spec.name, m.channel.get());
        else if (!m.channel->destination().local())  // the probes run there
            agents.emplace_back(m.spec.name, client = m.channel.get());
    }
    testbed.set_agents(std::move(agents), client);
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
                // A machine whose agent is busy with a request (a probe on the client
                // machine) is not waiting for a ping; the others must not wait behind it.
                m.channel->ping_unless_busy(kCall);
            } catch (const std::exception&) {
                // The run's next request to it says what happened.
            }
        }
        lock.lock();
    }
}

json HostsSession::machines(const std::vector<std::string>& keys) {
    json out = json::object();
    for (auto& m : machines_) {
        const auto& h = m.channel->hello();
        auto values = m.channel->call("read", {{"keys", keys}}, kCall).value("values", json::object());
        out[m.spec.name] = {{"ssh", m.spec.ssh},
                            {"hostname", h.value("host", "")},
                            {"kernel", h.value("kernel", "")},
                            {"machine", h.value("machine", "")},
                            {"sysctls_before", values}};
    }
    return out;
}

Channel& HostsSession::channel_of(const std::string& role) {
    for (auto& m : machines_)
        if (m.spec.name == role) return *m.channel;
    throw Error(fmt::format("no machine `{}` in [hosts]", role));
}

void HostsSession::apply_trial(const experiment::Trial& trial) {
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
        auto needs = lab::needed_qdiscs(std::vector<experiment::Trial>{trial});
        channel_of(link_role_)
            .call("link",
                  {{"dev", link_dev_},
                   {"needs", needs},
                   {"any_up", any_up_},
                   {"any_down", any_down_},
                   {"target", testbed_->endpoints(AF_UNSPEC).server.address},
                   {"exempt", exempt},
                   {"line_rate", trial.lab.line_rate_bps},
                   {"mtu", trial.lab.mtu},
                   {"up", direction_json(trial.link.up)},
                   {"down", direction_json(trial.link.down)}},
                  kCall);
        if (options_.progress) options_.progress("link");
    }
}

void HostsSession::start_services(const experiment::Trial& trial, const std::filesystem::path&,
                                  const probes::Tick& tick) {
    stop_services();
    auto where = testbed_->endpoints(AF_UNSPEC);
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
