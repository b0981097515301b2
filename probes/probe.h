// Running a probe: one measurement between a server and a client, each in its own network
// namespace, returning typed metrics in base units plus the raw samples behind them.
//
// Contract: make_probe() takes a ProbeSpec already validated by parse_probe() (options in
// base units, every option present) and returns the probe for its kind and `tool`. run()
// starts the server side in the server's namespace (unless the server is `remote`: then it
// starts nothing there and the client connects to the server already listening at
// address:port, or throws wanlab::InputError with remote_unsupported()'s reason when the
// probe needs a server of wanlab's own), the client side in the client's namespace, measures
// for the spec's `duration` (or `count` probes, bounded by `duration` plus timeouts), stops
// and joins every thread it started and closes every socket before it returns or throws.
// Metric names are those of the kind's table in probe_spec.h (plus extra ones the table also
// declares); values are in base units: seconds, bit/s, bytes, fractions, counts.
// `tick` is called from the calling thread at least every 100 ms; it may throw (Ctrl-C) to
// abort the probe, and run() rethrows after cleaning up. Failures throw wanlab::Error.
// A Probe is used by one thread at a time; different probes may run concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/process.h"
#include "probes/probe_spec.h"
#include "probes/series.h"

namespace wanlab::probes {

class FarServer;

/// Where one side of a probe runs.
struct Endpoint {
    std::string netns;       ///< a namespace name (core/sys.h), or "" for the namespace wanlab runs in
    std::string address;     ///< IPv4 or IPv6; the server listens here, the client connects from here ("" = any)
    std::uint16_t port = 0;  ///< server: 0 = any free port
    /// server side only: the server already runs elsewhere (host mode), listening at
    /// address:port; the probe starts nothing
    bool remote = false;
    /// server side only, with `remote`: the server listening at address:port is this probe's
    /// own far half (FarServer, on another machine), which the probe stops when it ends
    std::shared_ptr<FarServer> far = nullptr;
};

struct Endpoints {
    Endpoint server;
    Endpoint client;
};

/// One TCP connection's view, from TCP_INFO and getsockopt at the end of the measurement.
struct ConnectionStats {
    std::string direction;                 ///< "upload" (client sends) or "download"
    std::string congestion_control;        ///< as the socket reports it
    std::map<std::string, double> values;  ///< base units, see docs/probes.md
};

/// The notes a throughput measurement carries when it asked for no socket buffer, so the
/// kernel autotuned it: then net.ipv4.tcp_rmem / tcp_wmem cap the buffer, and
/// net.core.rmem_max / wmem_max (which cap only an explicit SO_RCVBUF / SO_SNDBUF) do not.
inline constexpr const char* kRcvbufAutotuned = "rcvbuf: autotuned (net.ipv4.tcp_rmem)";
inline constexpr const char* kSndbufAutotuned = "sndbuf: autotuned (net.ipv4.tcp_wmem)";

/// The note an rr or http probe carries when its client set TCP_QUICKACK after every read, so
/// a diagnosis does not advise what it already does.
inline constexpr const char* kClientQuickackNote = "client: TCP_QUICKACK after each read";

/// The note a group's member carries when the group has throughput probes: it measured while
/// they loaded the path ("under load: beside load, up in group rrul").
inline constexpr const char* kUnderLoadNote = "under load: ";

/// The note that says a command probe's metric came from its output, and the metric's unit
/// and direction: "metric: NAME: UNIT, higher|lower is better; from ...". The report reads
/// these to know a metric no kind declares (parse_output_note()).
inline constexpr const char* kOutputMetricNote = "metric: ";

/// A command probe's metric as its note states it.
struct NotedMetric {
    std::string name;
    Unit unit = Unit::count;
    bool higher_is_better = false;
};
/// The metric a note made by the command probe describes; nullopt for any other note.
std::optional<NotedMetric> parse_output_note(const std::string& note);

/// What the far half of a built-in probe saw on its machine (FarServer::stop()).
struct FarReport {
    /// Per connection, by the client's port as the server saw it: the server socket's
    /// TCP_INFO (tcp_info()), "sndbuf_granted", "rcvbuf_granted", "bytes" (received).
    std::map<std::uint16_t, ConnectionStats> connections;
    /// The server's sending sockets' TCP_INFO per interval (TcpSampler), each stream named by
    /// the client's port: "stream40123.cwnd"; times from the server's last accept.
    std::map<std::string, Series> series;
    /// The server machine's sysctls that cap what the probe asked of its sockets
    /// ("net.core.rmem_max", "net.core.wmem_max"), as read there.
    std::map<std::string, std::string> sysctls;
    std::uint64_t requests = 0;  ///< http: requests the server answered
};

/// FarServer: a built-in probe's server on another machine (hosts mode): started before the
/// probe runs, listening at the Endpoint's address and port(); stop() ends it and returns
/// what it saw, rethrowing a serving thread's failure. Implemented by serve_far() (the agent
/// runs it) and by the controller's proxy to that agent (remote/hosts.cpp).
class FarServer {
public:
    virtual ~FarServer() = default;
    virtual std::uint16_t port() const = 0;
    /// Idempotent: a second call returns the first report.
    virtual FarReport stop() = 0;
};

/// Whether wanlab can run `spec`'s server on another machine (serve_far()): the built-in
/// throughput, rr, transfer and http (no url) probes, and rtt over tcp or udp.
bool far_servable(const ProbeSpec& spec);
/// Starts `spec`'s server half at `at` (its address, or any when ""; port 0 = a free one).
/// Creates: the listening socket and the threads serving it. Undoes: stop(), or the
/// destructor. Throws wanlab::InputError for a spec far_servable() refuses.
std::unique_ptr<FarServer> serve_far(const ProbeSpec& spec, const Endpoint& at);

struct ProbeResult {
    std::string kind;
    std::string tool;  ///< "builtin", "iperf3", "ping"
    /// Metric name (probe_spec's table) -> value in base units.
    std::map<std::string, double> metrics;
    /// Distributions by name: "rtt" (seconds per answered probe), "latency" (seconds per
    /// transaction or request), each in the order measured.
    std::map<std::string, std::vector<double>> samples;
    /// Time series by name: "throughput" per interval, TCP_INFO per stream ("stream1.cwnd"),
    /// latency and rate per interval ("latency_mean", "requests_per_second").
    std::map<std::string, Series> series;
    std::vector<ConnectionStats> connections;
    /// Facts a reader needs to trust the numbers ("rcvbuf: asked 64MiB, granted 416KiB,
    /// clamped by net.core.rmem_max").
    std::vector<std::string> notes;
    /// When the series' t = 0 was (the built-in probes set it), so a group's members' series
    /// can be put on one clock (probes/group.h).
    std::optional<std::chrono::steady_clock::time_point> began;
};

/// Called while a probe waits; throws to stop it (core/process.h).
using Tick = sys::Tick;

/// One measurement that could not be made while the lab itself is fine: an external tool
/// refused what it was asked (iperf3 and a -w the kernel clamps). The message carries the
/// tool's words and the fix; the runner records it as that measurement's error and goes on.
class MeasurementError : public Error {
public:
    using Error::Error;
};

class Probe {
public:
    virtual ~Probe() = default;
    virtual ProbeResult run(const Endpoints& where, const Tick& tick) = 0;
};

/// A metric a probe reports, from probe_spec's table (every one can be asserted); nullptr
/// for a name the kind does not report.
const MetricSpec* describe_metric(const ProbeKind& kind, std::string_view metric);

/// The probe for spec.kind and its `tool` option. Throws wanlab::InputError for a
/// combination that is not implemented (names what is).
std::unique_ptr<Probe> make_probe(const ProbeSpec& spec);

/// Why `spec` cannot measure against a remote target with the [lab] port `port` (0 = none),
/// or "" if it can. For the experiment loader, before anything runs; pure.
std::string remote_unsupported(const ProbeSpec& spec, std::uint16_t port);
/// For the probes: throws wanlab::InputError when `server` is remote and `spec` cannot measure
/// against it (remote_unsupported()'s reason for port = server.port; the [lab] port filter's
/// ICMP rule is the loader's alone, as such a probe still runs).
void check_remote(const ProbeSpec& spec, const Endpoint& server);

// Typed access to a validated spec's options (throws wanlab::Error if absent or mistyped).
std::int64_t option_int(const ProbeSpec& spec, const std::string& name);  ///< integer, size, duration (ns), rate
bool option_bool(const ProbeSpec& spec, const std::string& name);
std::string option_string(const ProbeSpec& spec, const std::string& name);
/// The address family the probe's `family` option asks for: AF_INET, AF_INET6, or AF_UNSPEC
/// for "auto" (the lab's first: IPv4 unless the lab has IPv6 only) and for a command probe.
int probe_family(const ProbeSpec& spec);

// The built-in probes (probes/throughput.cpp, rtt.cpp, rr.cpp, http.cpp).
ProbeResult run_throughput(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
ProbeResult run_rtt(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
/// rtt's metrics from `count` TCP handshakes to a listener of its own in where.server (a lab
/// host, not a remote server), one started every `interval` while earlier ones are still in
/// flight: about count x interval + one RTT, where the rtt probe, which starts the next one
/// only after an answer, takes count x RTT on a long path. The emulation check's RTT.
ProbeResult overlapping_handshakes(std::int64_t count, std::chrono::nanoseconds interval, const Endpoints& where,
                                   const Tick& tick);
ProbeResult run_rr(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
/// http: the built-in server in where.server (none when the `url` option is set) and the load
/// generator in where.client.
ProbeResult run_http(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
/// kind "transfer" (probes/transfer.cpp): `size` bytes per transfer between the built-in
/// client and server; with tool "curl" (probes/curl.cpp), curl against `url` or the built-in
/// http server sending `size` bytes.
ProbeResult run_transfer(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
ProbeResult run_transfer_curl(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
/// kind "command" (probes/command.cpp): spec.command in where.client's namespace.
ProbeResult run_command(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);

/// The SO_RCVLOWAT the built-in throughput probe's receiver asks for at this arrival rate, so
/// that the kernel wakes it once per batch instead of once per segment. On a veth the sender's
/// CPU runs the receiving side's softirq, so it also pays for waking the receiver, and with one
/// stream that CPU is the limit: batching the wake-ups took one stream from iperf3's speed to
/// 1.6-1.9x it, at half its CPU per byte (docs/performance.md).
/// It is the power of two at or below the least of 128 KiB; 1 ms of data at this rate, so the
/// bytes that arrived but are not counted yet never exceed 1 ms's worth; and an eighth of the
/// socket's receive buffer (`rcvbuf`, SO_RCVBUF), because tcp_set_rcvlowat() grows a buffer
/// smaller than about twice the watermark and clamps the window to it, and the probe must not
/// change the window it measures. At least 1 (the kernel's default).
int receive_watermark(double bytes_per_second, std::int64_t rcvbuf);

// The built-in probes' far halves (serve_far()), beside their clients.
std::unique_ptr<FarServer> serve_throughput(const ProbeSpec& spec, const Endpoint& at);
std::unique_ptr<FarServer> serve_rr(const ProbeSpec& spec, const Endpoint& at);
std::unique_ptr<FarServer> serve_http(const ProbeSpec& spec, const Endpoint& at);
std::unique_ptr<FarServer> serve_rtt(const ProbeSpec& spec, const Endpoint& at);
std::unique_ptr<FarServer> serve_transfer(const ProbeSpec& spec, const Endpoint& at);

}  // namespace wanlab::probes
