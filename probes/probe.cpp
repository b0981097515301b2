#include "probes/probe.h"

#include <sys/socket.h>

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "probes/external.h"
#include "probes/group.h"
#include "probes/udp.h"

namespace wanlab::probes {
namespace {

using RunFn = ProbeResult (*)(const ProbeSpec&, const Endpoints&, const Tick&);

/// What a repeat attempted and how much of it failed, in the same three metrics for every
/// kind that counts exchanges, whatever tool measured: rtt (probes sent; unanswered ones
/// failed), rr and http (transactions or requests begun; `errors` failed). A failed exchange
/// leaves no latency sample, so these say what the percentiles rest on; the report shows them
/// beside every figure that lost some (issue 39).
void add_tally(const ProbeTraits& traits, ProbeResult& r) {
    auto get = [&r](const char* name) {
        auto it = r.metrics.find(name);
        return it == r.metrics.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
    };
    double attempted = std::numeric_limits<double>::quiet_NaN(), failed = attempted;
    if (traits.exchanges_metric) {
        // A non-2xx answer completed (it is among `requests`) and is an error too.
        double done = get(traits.exchanges_metric), errors = get("errors"), non_2xx = get("non_2xx");
        if (std::isfinite(done) && std::isfinite(errors)) {
            failed = errors;
            attempted = done + errors - (std::isfinite(non_2xx) ? non_2xx : 0);
        }
    } else if (traits.counted) {
        double sent = get("sent"), loss = get("loss");
        if (std::isfinite(sent) && std::isfinite(loss)) {
            attempted = sent;
            failed = std::round(sent * loss);
        }
    }
    if (!std::isfinite(attempted)) return;
    r.metrics["attempted"] = attempted;
    r.metrics["completed"] = attempted - failed;
    r.metrics["failed"] = failed;
    r.metrics["failure_rate"] = attempted > 0 ? failed / attempted : 0;
    // Of the failed, those that timed out, where the kind tells them apart.
    if (traits.counted)
        r.metrics["timed_out"] = failed;  // an rtt probe unanswered within 1 s
    else if (double t = get("timeouts"); std::isfinite(t))
        r.metrics["timed_out"] = t;
    if (failed <= 0) return;
    const std::string one = traits.exchange ? traits.exchange : "probe";
    std::string how;
    if (double t = get("timeouts"); std::isfinite(t) && t > 0) how = fmt::format(" ({:.0f} timed out)", t);
    if (traits.counted) how = " (unanswered within 1 s)";
    const char* figures = traits.measures_rtt ? "RTT" : "latency";
    r.notes.push_back(fmt::format(
        "{:.0f} of {:.0f} {}s failed{}: {}", failed, attempted, one, how,
        failed >= attempted ? fmt::format("no {} figures", figures)
                            : fmt::format("the {} figures rest on the other {:.0f}", figures, attempted - failed)));
}

/// A probe that is one function of (spec, endpoints).
class FunctionProbe : public Probe {
public:
    FunctionProbe(ProbeSpec spec, RunFn fn) : spec_(std::move(spec)), fn_(fn) {}
    ProbeResult run(const Endpoints& where, const Tick& tick) override {
        auto r = fn_(spec_, where, tick);
        const auto& traits = traits_of(spec_.kind);
        // Each tool's streams the same way: Jain's index over their goodput.
        if (traits.bulk_tcp)
            if (double f = flow_fairness(r); std::isfinite(f)) r.metrics["fairness"] = f;
        add_tally(traits, r);
        return r;
    }

private:
    ProbeSpec spec_;
    RunFn fn_;
};

struct Implementation {
    const char* kind;
    const char* tool;
    RunFn run;
};

constexpr Implementation kImplementations[] = {
    {"throughput", "builtin", &run_throughput},
    {"throughput", "iperf3", &run_iperf3},
    {"udp", "builtin", &run_udp},
    {"udp", "iperf3", &run_iperf3_udp},
    {"rtt", "builtin", &run_rtt},
    {"rtt", "ping", &run_ping},
    {"rtt", "hping3", &run_hping3},
    {"rr", "builtin", &run_rr},
    {"http", "builtin", &run_http},
    {"http", "wrk", &run_wrk},
    {"transfer", "builtin", &run_transfer},
    {"transfer", "curl", &run_transfer_curl},
    {"command", "builtin", &run_command},
};

const OptionValue& option(const ProbeSpec& spec, const std::string& name) {
    auto it = spec.options.find(name);
    if (it == spec.options.end()) throw Error(fmt::format("probe {} has no option `{}`", spec.name, name));
    return it->second;
}

std::string tool_of(const ProbeSpec& spec) {
    auto t = spec.options.find("tool");
    return t != spec.options.end() ? std::get<std::string>(t->second) : "builtin";
}

/// What an rtt probe sends: ping is ICMP and hping3 TCP whatever `method` says (their runners
/// refuse the mismatch), the built-in probe follows `method`.
std::string rtt_protocol(const ProbeSpec& spec) {
    auto tool = tool_of(spec);
    if (tool == "ping") return "icmp";
    if (tool == "hping3") return "tcp";
    return option_string(spec, "method");
}

/// What keeps `spec` from measuring against a remote target at all, whoever asks: a server of
/// wanlab's own it would need there, or a port it would need to connect to. "" if nothing.
std::string remote_incapable(const ProbeSpec& spec, std::uint16_t port) {
    switch (traits_of(spec.kind).remote) {
        case RemoteTarget::own: return "";
        case RemoteTarget::external_tool:
            if (tool_of(spec) != "builtin") return "";
            return fmt::format(
                "the built-in {} probe needs wanlab's own receiver on the far side, which does not run "
                "on a remote target; use tool = \"iperf3\" with `iperf3 -s` running on the target",
                spec.kind);
        case RemoteTarget::never:
            return fmt::format(
                "the {} probe needs wanlab's own server, which does not run on a remote target; in host "
                "mode measure with an http probe with a `url` or an rtt probe",
                spec.kind);
        case RemoteTarget::url:
            if (!option_string(spec, "url").empty()) return "";
            if (spec.kind == "transfer")
                return "the built-in transfer probe needs wanlab's own server on the far side, which does not run "
                       "on a remote target; use tool = \"curl\" with a `url` the target serves";
            return fmt::format("an {} probe against a remote target needs `url`", spec.kind);
        case RemoteTarget::protocol: break;
    }
    auto protocol = rtt_protocol(spec);
    if (protocol == "udp")
        return "rtt method \"udp\" needs wanlab's UDP echo server, which does not run on a remote target; use "
               "method = \"tcp\" or \"icmp\"";
    if (protocol == "tcp" && port == 0)
        return "a TCP rtt probe against a remote target needs a port to connect to: set the [lab] port to one the "
               "target listens on";
    return "";
}

}  // namespace

std::string remote_unsupported(const ProbeSpec& spec, std::uint16_t port) {
    if (auto why = remote_incapable(spec, port); !why.empty()) return why;
    if (port != 0 && spec.kind == "rtt" && rtt_protocol(spec) == "icmp")
        return "ICMP carries no port: the [lab] port filter would leave it unimpaired; use method = \"tcp\" or drop "
               "`port`";
    return "";
}

void check_remote(const ProbeSpec& spec, const Endpoint& server) {
    if (!server.remote || server.far) return;
    if (auto why = remote_incapable(spec, server.port); !why.empty()) throw InputError(why);
}

std::optional<NotedMetric> parse_output_note(const std::string& note) {
    std::string_view s(note);
    if (!s.starts_with(kOutputMetricNote)) return std::nullopt;
    s.remove_prefix(std::string_view(kOutputMetricNote).size());
    auto colon = s.find(": ");
    auto comma = s.find(", ", colon == std::string_view::npos ? 0 : colon);
    if (colon == std::string_view::npos || comma == std::string_view::npos) return std::nullopt;
    NotedMetric m;
    m.name = std::string(s.substr(0, colon));
    if (!unit_of_name(s.substr(colon + 2, comma - colon - 2), m.unit)) return std::nullopt;
    auto rest = s.substr(comma + 2);
    if (rest.starts_with("higher is better"))
        m.higher_is_better = true;
    else if (!rest.starts_with("lower is better"))
        return std::nullopt;
    return m;
}

const MetricSpec* describe_metric(const ProbeKind& kind, std::string_view metric) { return find_metric(kind, metric); }

bool far_servable(const ProbeSpec& spec) {
    auto tool = tool_of(spec);
    if (spec.kind == "throughput") return tool == "builtin";
    if (spec.kind == "rr") return true;
    if (spec.kind == "transfer") return tool == "builtin";
    if (spec.kind == "http") return option_string(spec, "url").empty();  // the built-in server, for either client
    if (spec.kind == "rtt") return rtt_protocol(spec) != "icmp";         // icmp needs no server
    return false;
}

std::unique_ptr<FarServer> serve_far(const ProbeSpec& spec, const Endpoint& at) {
    if (!far_servable(spec))
        throw InputError(fmt::format("probe `{}` ({}, tool {}) has no server wanlab runs on another machine", spec.name,
                                     spec.kind, tool_of(spec)));
    Endpoint here = at;
    if (here.address.empty()) here.address = "0.0.0.0";
    here.remote = false;
    here.far = nullptr;
    if (spec.kind == "throughput") return serve_throughput(spec, here);
    if (spec.kind == "rr") return serve_rr(spec, here);
    if (spec.kind == "http") return serve_http(spec, here);
    if (spec.kind == "transfer") return serve_transfer(spec, here);
    return serve_rtt(spec, here);
}

std::unique_ptr<Probe> make_probe(const ProbeSpec& spec) {
    std::string tool = tool_of(spec);
    std::string available;
    for (const auto& impl : kImplementations) {
        if (spec.kind != impl.kind) continue;
        if (tool == impl.tool) return std::make_unique<FunctionProbe>(spec, impl.run);
        available += fmt::format("{}{}", available.empty() ? "" : ", ", impl.tool);
    }
    if (available.empty()) throw InputError(fmt::format("probe kind `{}` cannot be measured yet", spec.kind));
    throw InputError(fmt::format("probe kind `{}` with tool `{}` cannot be measured yet (available: {})", spec.kind,
                                 tool, available));
}

std::int64_t option_int(const ProbeSpec& spec, const std::string& name) {
    const auto& v = option(spec, name);
    if (auto i = std::get_if<std::int64_t>(&v)) return *i;
    throw Error(fmt::format("probe option `{}` is not a number", name));
}

bool option_bool(const ProbeSpec& spec, const std::string& name) {
    const auto& v = option(spec, name);
    if (auto b = std::get_if<bool>(&v)) return *b;
    throw Error(fmt::format("probe option `{}` is not a boolean", name));
}

std::string option_string(const ProbeSpec& spec, const std::string& name) {
    const auto& v = option(spec, name);
    if (auto s = std::get_if<std::string>(&v)) return *s;
    throw Error(fmt::format("probe option `{}` is not a string", name));
}

int probe_family(const ProbeSpec& spec) {
    auto it = spec.options.find("family");
    const auto* v = it == spec.options.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (!v) return AF_UNSPEC;
    return *v == "ipv4" ? AF_INET : *v == "ipv6" ? AF_INET6 : AF_UNSPEC;
}

}  // namespace wanlab::probes
