// Kernel counters around one measurement: what TCP did that the probe's own numbers do not
// show (delayed ACKs sent by timer, loss probes, timeouts, listen overflows), per lab host.
//
// Contract: counters are read from /proc/thread-self/net/netstat and /proc/thread-self/net/snmp
// and /proc/thread-self/net/snmp6 on a thread inside the host's network namespace (core/sys.h
// in_netns), so each host's counters are its own; names are "TcpExt.DelayedACKs",
// "Tcp.RetransSegs", "Ip.InReceives", "Ip6.InReceives".
// CPU times come from /proc/stat (the machine's, not a namespace's). A delta keeps only
// counters that moved, and never gauges (Tcp.CurrEstab, Tcp.MaxConn, ...). Reading fails
// soft: a host whose counters cannot be read is left out, never guessed.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/probe.h"

namespace wanlab::diagnosis {

using Counters = std::map<std::string, double>;

/// The header/value line pairs of /proc/net/netstat or /proc/net/snmp ("TcpExt: A B" then
/// "TcpExt: 1 2") -> {"TcpExt.A": 1, "TcpExt.B": 2}. Malformed pairs are skipped.
Counters parse_counters(std::string_view text);
/// /proc/net/snmp6's "Ip6InReceives 123" lines -> {"Ip6.InReceives": 123}, for the groups
/// Ip6, Icmp6, Udp6 and UdpLite6. Other lines are skipped.
Counters parse_snmp6(std::string_view text);
/// netstat, snmp and snmp6 of namespace `netns` ("" = this thread's). Empty when unreadable.
Counters read_counters(const std::string& netns);
/// after - before for every counter that moved; gauges and counters missing on either side
/// are left out.
Counters counter_delta(const Counters& before, const Counters& after);

/// Busy and total jiffies per CPU from /proc/stat's "cpuN" lines.
using CpuTimes = std::vector<std::pair<double, double>>;
CpuTimes parse_cpu_times(std::string_view proc_stat);
CpuTimes read_cpu_times();
/// The largest share of time one CPU was busy between two readings (0..1); NaN without both.
double busiest_cpu(const CpuTimes& before, const CpuTimes& after);

/// The lab hosts whose counters a measurement at `where` records: the client always (in host
/// mode this machine), the server when it is one of the lab's own namespaces.
std::vector<std::pair<std::string, std::string>> counted_hosts(const probes::Endpoints& where);

/// Adds to a Snapshot's delta() the other machines' counters (lab::Testbed::machine_counters(),
/// read before and after a measurement): each role's moved counters under its name, and
/// "cpu_busiest" raised to the busiest CPU of any machine ("cpu_busiest_machine" names it
/// when it is not this one). Malformed or missing readings are left out.
void add_machine_deltas(nlohmann::json& delta, const nlohmann::json& before, const nlohmann::json& after);

/// Snapshot: counters of each named host and the CPU times, read at construction;
/// delta() reads them again and returns {"HOST": {counter: delta, ...}, ..., "cpu_busiest": x}.
class Snapshot {
public:
    /// `hosts`: lab host name ("client", "server") -> its namespace ("" = this one). `cpu`:
    /// whether this machine's CPU times count (not when the probes run on another).
    explicit Snapshot(std::vector<std::pair<std::string, std::string>> hosts, bool cpu = true);
    nlohmann::json delta() const;

private:
    std::vector<std::pair<std::string, std::string>> hosts_;
    std::vector<Counters> before_;
    CpuTimes cpu_;
};

}  // namespace wanlab::diagnosis
