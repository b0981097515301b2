// An experiment: the TOML file a user writes, loaded, validated and expanded into trials.
//
// Contract: load_experiment() never touches the machine and never needs root. It parses
// (TOML syntax), then validates in separate passes (each section strictly, then cross-field
// rules), collecting every error it can find into Diagnostics with file:line:column. On
// success the experiment holds an ordered list of fully concrete trials: defaults resolved,
// `rtt` split, profiles merged, netem limits sized, base units throughout, each with a stable
// id. `--set KEY=VALUE` overrides are applied to the document before validation, so they get
// the same checks and messages (located in the --set argument). Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "experiment/profiles.h"
#include "experiment/tune.h"
#include "netem/link_spec.h"
#include "netem/schedule.h"
#include "probes/probe_spec.h"
#include "services/service_spec.h"
#include "sysctl/sysctl_spec.h"

namespace wanlab::experiment {

/// [hosts.NAME] of [lab] mode = "hosts": one real machine of the experiment.
struct Machine {
    std::string name;               ///< its role: client, server, router
    std::string ssh;                ///< "local", or an ssh destination (user@host, a config alias)
    std::string address;            ///< what probes connect to ("" for a local client)
    std::string wanlab = "wanlab";  ///< the program on that machine
    std::string dev;  ///< client, router: the interface for [link] ("": the one that routes to the server)
    /// server: the port wanlab's probe servers listen on there (0: a free one per measurement)
    std::uint16_t probe_port = 0;
    Location at;  ///< the [hosts.NAME] header
};

/// [lab]: where the experiment runs.
struct LabSpec {
    enum class Mode { netns, host, hosts };
    Mode mode = Mode::netns;
    std::string dev;                    ///< host mode: the interface to impair
    std::string target;                 ///< host mode: impair only traffic to/from this address or prefix
    std::uint16_t port = 0;             ///< host mode: ... and this port (0 = any)
    std::uint32_t mtu = 1500;           ///< bytes, on every lab link
    bool offloads = false;              ///< GSO/TSO/GRO on the lab's links (off: shapers see real packets)
    std::uint32_t queue_length = 1000;  ///< txqueuelen of lab links, packets
    /// The namespace lab's addressing: 198.18.0.0/15, 2001:2::/48 (RFC 5180), or both.
    enum class Ip { v4, v6, dual };
    Ip ip = Ip::v4;
    std::uint64_t line_rate_bps = 10'000'000'000;  ///< sizes `limit = "auto"` when no rate is set
    std::vector<Machine> machines;                 ///< hosts mode: [hosts.client], [hosts.server]
    std::string ssh_config;                        ///< hosts mode: [hosts] ssh_config, passed to ssh as -F
    /// Its lines that make ssh run a command (ProxyCommand, LocalCommand, KnownHostsCommand,
    /// Match exec) or read another file (Include), as "line N: TEXT"; `plan` shows them.
    std::vector<std::string> ssh_commands;
    bool ssh_config_read = false;  ///< it could be read when the file was loaded

    /// The hosts sysctls can be set on: client, router, server (netns), host, or the
    /// machines of hosts mode.
    std::vector<std::string> hosts() const;
    /// Hosts mode: the machine of `role`, or nullptr.
    const Machine* machine(const std::string& role) const;
    bool has_ipv4() const { return ip != Ip::v6; }
    bool has_ipv6() const { return ip != Ip::v4; }
    /// "ipv4", "ipv6" or "dual", as [lab] ip is written.
    const char* ip_name() const { return ip == Ip::v4 ? "ipv4" : ip == Ip::v6 ? "ipv6" : "dual"; }
    /// Hosts mode: the machine whose agent applies [link]: "router" when there is one, else "client".
    std::string link_machine() const { return machine("router") ? "router" : "client"; }
};

/// The lines of an ssh_config's text that make ssh run a command (ProxyCommand, LocalCommand,
/// KnownHostsCommand, Match exec) or read more configuration that might (Include), as
/// "line N: TEXT": ssh runs them as the user running wanlab, root for a run.
std::vector<std::string> ssh_command_lines(const std::string& text);

/// [run]: how trials are measured.
struct RunSpec {
    std::uint32_t repeats = 3;  ///< each probe's measurements per trial, when not `adaptive`
    /// repeats = "auto": Stein's two-stage rule (probes/stats.h stein_repeats()): min_repeats,
    /// then as many as bring the 95% interval of the mean within +-precision of the median,
    /// at most max_repeats.
    bool adaptive = false;
    std::uint32_t min_repeats = 3, max_repeats = 10;
    double precision = 0.05;  ///< fraction
    /// The repeats a trial's probe is planned with before it has measured: the fixed count, or
    /// the adaptive rule's first stage.
    std::uint32_t first_repeats() const { return adaptive ? min_repeats : repeats; }
    std::chrono::nanoseconds warmup{std::chrono::seconds(1)};
    std::chrono::nanoseconds cooldown{std::chrono::seconds(1)};
    std::chrono::nanoseconds duration{std::chrono::seconds(10)};  ///< default probe duration
    std::uint64_t seed = 1;
    std::string baseline;  ///< variant name; the first variant when not set
};

/// [[assert]]: a CI gate on one metric.
struct AssertSpec {
    std::string probe;               ///< probe name
    std::string metric;              ///< a metric of that probe's kind
    std::string variant;             ///< "" = every variant (for bounds) / every non-baseline variant (gains)
    std::optional<double> at_least;  ///< base units of the metric
    std::optional<double> at_most;
    std::optional<double> min_gain;  ///< fraction: improvement over the baseline, in the better direction
    Location at;
};

/// One configuration to measure: a variant at one sweep point.
struct Trial {
    std::size_t index = 0;  ///< 1-based position in the plan
    std::string id;         ///< stable: a hash of variant and sweep values
    std::string variant;
    std::vector<std::pair<std::string, std::string>> sweep;  ///< path, value as written
    LabSpec lab;
    netem::LinkSpec link;
    netem::Schedule schedule;  ///< [[link.schedule]]: how the link changes during each measurement
    sysctl::SysctlSpec sysctl;
    std::vector<probes::ProbeSpec> probes;
    std::vector<services::ServiceSpec> services;  ///< started on their hosts, in this order, after the sysctls
};

/// [sweep] mode: every combination of the axes' values, or their values side by side.
enum class SweepMode { cross, zip };
/// "cross" or "zip", as the file writes it.
const char* sweep_mode_name(SweepMode mode) noexcept;

/// A variant made in code rather than written as [[variant]] (tune's candidates): its name
/// and the values it sets, by the dotted keys [sweep] takes, each as TOML text ("\"bbr\"",
/// "4194304") with where the file wrote it, for messages.
struct MadeVariant {
    struct Value {
        std::string path, toml;
        Location at;
    };
    std::string name;
    std::vector<Value> values;
};

struct Experiment {
    std::string file;
    std::string name;
    std::string description;
    RunSpec run;
    std::vector<std::string> variants;  ///< in file order; "default" when none is declared
    std::vector<std::string> sweep_keys;
    SweepMode sweep_mode = SweepMode::cross;
    std::vector<AssertSpec> asserts;
    std::vector<Trial> trials;
    std::vector<std::string> sets;  ///< the --set arguments applied
    std::optional<TuneSpec> tune;   ///< [tune]: what `wanlab tune` searches (experiment/tune.h)
};

inline constexpr std::size_t kMaxTrials = 10'000;

/// Loads `text` (named `file` in messages) with `sets` ("KEY=VALUE") applied. Returns the
/// experiment, or nullopt with errors in `diag`; warnings may be present either way.
/// `docs` keeps the sources for rendering diagnostics and must outlive the call's use of them.
/// `made`: variants made in code in place of the file's (which must then declare none), the
/// first the baseline: `wanlab tune`'s candidates.
std::optional<Experiment> load_experiment(const std::string& file, const std::string& text,
                                          const std::vector<std::string>& sets, const ProfileLibrary& profiles,
                                          config::Documents& docs, Diagnostics& diag,
                                          const std::vector<MadeVariant>* made = nullptr);

}  // namespace wanlab::experiment
