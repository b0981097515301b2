// External probes: iperf3, ping, wrk and hping3, started inside the right namespace (see
// sys::Process), their output parsed into the same metrics as the built-in probes.
//
// Contract: the parsers are pure and take the tool's whole output as text, so tests feed
// them recorded fixtures; they throw wanlab::Error naming the tool when the output is not
// what that tool prints. The runners start the server side the way the built-in probe of
// the same kind does (or the tool's own server) in the server's namespace, or nothing for a
// remote server (check_remote()), the tool in the client's, bounded by the probe's duration plus a grace period; a
// missing tool throws wanlab::Error naming the Debian package, a failed one its exit status and the tail of its stderr,
// and options the tool cannot honour throw wanlab::InputError. Thread-safe.
#pragma once

#include <string>

#include "core/process.h"
#include "probes/probe.h"

namespace wanlab::probes {

/// `iperf3 -c ... -J` output -> throughput metrics (throughput, retransmits, rtt, cwnd) and
/// series per interval (throughput; per sending stream cwnd, srtt, retransmits, snd_wnd),
/// from the sender's side as iperf3 reports it.
ProbeResult parse_iperf3_json(const std::string& text);
/// `ping -c N ...` output (iputils) -> rtt metrics; samples from the "time=" lines, and with
/// `interval_s` (ping's -i) the series "rtt" at each probe's send time (icmp_seq).
ProbeResult parse_ping(const std::string& text, double interval_s = 0);
/// `hping3 -S ...` stdout followed by its stderr (where hping3 prints the statistics) ->
/// rtt metrics; samples from the "rtt=X ms" lines (hping3 prints 0.1 ms steps).
ProbeResult parse_hping3(const std::string& text, double interval_s = 0);
/// `wrk --latency ...` text output (wrk 4.x, no Lua script) -> http metrics: requests/s,
/// requests, mean/max latency, p50/p90/p99 (p75 in a note), errors, timeouts, non_2xx
/// (wrk's "Non-2xx or 3xx": status >= 400), throughput.
ProbeResult parse_wrk(const std::string& text);

/// iperf3 -c against `iperf3 -s -1` started in the server's namespace, or against the remote
/// target's own iperf3 -s; port server.port, or 5201 when that is 0.
ProbeResult run_iperf3(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
/// `iperf3 -c ... -u -J` output (3.12: end.sum_received) -> udp metrics from its receiver's
/// report: throughput, loss and its 99% interval, jitter, reordered (out_of_order); no delay.
ProbeResult parse_iperf3_udp_json(const std::string& text);
/// iperf3 -c -u at the probe's rate and size, against a server as run_iperf3()'s.
ProbeResult run_iperf3_udp(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
ProbeResult run_ping(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
/// hping3 -S against a listening socket of the built-in tcp rtt server, or of a remote target
/// at server.port (method tcp only).
ProbeResult run_hping3(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
/// wrk against the built-in http server (or `url`), whole seconds, closed loop only.
ProbeResult run_wrk(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);

}  // namespace wanlab::probes
