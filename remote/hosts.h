// HostsSession: a run of [lab] mode = "hosts", across real machines. wanlab here is the
// controller; the probes run on the client machine: here, or through that machine's agent
// when it is another (lab::Testbed::run_probe()); a built-in probe's own server runs in the
// server machine's agent for each measurement (lab::Testbed::measure()). Each machine, this
// one included, changes and gives back only itself, through its own `wanlab agent`
// (remote/agent.h): reached over ssh (remote/ssh.h) or, for ssh = "local", started here.
//
// Creates, in order: a private folder for ssh's control sockets; per machine (client first)
// the agent, whose hello is checked (same wanlab version and protocol), and its `begin`: the
// machine's own journal (run RUN-ROLE: RUN-client, RUN-server), locks and watchdog; a thread
// that pings every agent every few seconds, so an agent whose controller vanished (no FIN
// ever comes from a machine that lost power) gives its machine back when its lease runs out.
// Per trial: each machine's sysctls ([sysctl] on every machine, [sysctl.ROLE] on its own),
// the link conditions ([link]) by the client's agent on the client's interface toward the
// server, or by the router's on its interface toward the server when [hosts.router] is
// given (egress, and ingress through an ifb, as host mode does: netem/host.h),
// sparing the ssh connections of this controller (their 5-tuples, read from /proc when the
// machines are connected), then its services. Undoes: stops the pings, sends each agent `end` (its machine given back,
// its journal removed), closes the channels, removes the folder. A controller killed by
// SIGKILL takes ssh with it (PR_SET_PDEATHSIG), each remote agent reads EOF and gives its
// machine back; the local agent, killed too, is given back by its watchdog. Not thread-safe
// (the keep-alive thread only pings).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lab/session.h"
#include "netem/tc_command.h"
#include "remote/channel.h"

namespace wanlab::remote {

struct HostsOptions {
    std::string run;             ///< the run id; each machine journals RUN-ROLE
    bool restore_stale = false;  ///< each machine restores stale journals instead of refusing
    /// `wanlab run --resume`: each machine first undoes what a killed session of this very run
    /// left there (its stale RUN-ROLE journal), as a local resumed run does; others are refused.
    bool resume = false;
    unsigned deadline_s = 0;  ///< each machine's watchdog: gives it back after this (0: none)
    std::chrono::milliseconds connect_timeout{30000};
    /// --allow-ssh-commands: a [hosts] ssh_config that makes ssh run commands is used; else refused.
    bool allow_ssh_commands = false;
    lab::Progress progress;  ///< "connected ROLE", "sysctls", "services"
    lab::Log log;
};

/// Throws InputError when `lab`'s [hosts] ssh_config, read now, makes ssh run commands (root
/// would run them) and the user has not allowed it with --allow-ssh-commands.
void refuse_ssh_commands(const experiment::LabSpec& lab, bool allowed);

class HostsSession final : public lab::Session {
public:
    /// Connects to every machine and begins the run on each; throws wanlab::Error (a missing
    /// or different wanlab, ssh's own words) before any machine has changed anything beyond
    /// those that began: they are given back as the session unwinds.
    HostsSession(const std::vector<experiment::Trial>& trials, const HostsOptions& options);
    ~HostsSession() override;
    HostsSession(const HostsSession&) = delete;
    HostsSession& operator=(const HostsSession&) = delete;

    void apply_trial(const experiment::Trial& trial) override;
    void start_services(const experiment::Trial& trial, const std::filesystem::path& dir,
                        const probes::Tick& tick) override;
    void check_services() override;
    void stop_services() noexcept override;
    const lab::Testbed& testbed() const override { return *testbed_; }

    /// Each machine as its agent saw it before the run's first change, by role: {"ssh",
    /// "hostname", "kernel", "machine", "sysctls_before": the values of `keys` there}.
    nlohmann::json machines(const std::vector<std::string>& keys);

    /// The journal name of `role`'s machine in run `run`.
    static std::string machine_run(const std::string& run, const std::string& role) { return run + "-" + role; }

private:
    struct Machine {
        experiment::Machine spec;
        std::unique_ptr<Channel> channel;
    };
    Channel& channel_of(const std::string& role);
    void keep_alive();

    /// PrivateDir: a folder only this user reads (ssh's control sockets). Creates it; removes it
    /// with what is in it.
    struct PrivateDir {
        std::filesystem::path path;
        PrivateDir();
        ~PrivateDir();
        PrivateDir(const PrivateDir&) = delete;
        PrivateDir& operator=(const PrivateDir&) = delete;
    };

    HostsOptions options_;
    PrivateDir control_dir_;
    std::unique_ptr<lab::Testbed> testbed_;
    std::vector<Machine> machines_;
    std::vector<netem::Flow> exempt_;         ///< the ssh connections to the other machines
    bool any_up_ = false, any_down_ = false;  ///< some trial impairs that direction
    std::string link_role_;                   ///< whose agent applies [link]: LabSpec::link_machine()
    std::string link_dev_;                    ///< on which interface ("": the router's agent finds it)
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread pinger_;  // last: started once the machines began
};

/// The sysctls `trial` sets on the machine of `role`: [sysctl] on every machine, then
/// [sysctl.ROLE] (which wins for a key both set), as (key, value) in order.
std::vector<std::pair<std::string, std::string>> machine_sysctls(const experiment::Trial& trial,
                                                                 const std::string& role);

}  // namespace wanlab::remote
