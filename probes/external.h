// External probes: iperf3 and ping, started inside the right namespace, their output parsed
// into the same metrics as the built-in probes.
//
// Contract: the parsers are pure and take the tool's whole output as text, so tests feed
// them recorded fixtures; they throw wanlab::Error naming the tool when the output is not
// what that tool prints. The runners fork/exec the tool (see ToolProcess) in the endpoint's
// namespace, bounded by the probe's duration plus a grace period, and throw wanlab::Error
// naming the Debian package when the tool is not installed. Thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "probes/probe.h"

namespace wanlab::probes {

/// `iperf3 -c ... -J` output -> throughput metrics (throughput, retransmits, rtt, cwnd) and
/// per-interval samples, from the sender's side as iperf3 reports it.
ProbeResult parse_iperf3_json(const std::string& text);
/// `ping -c N ...` output (iputils) -> rtt metrics; samples from the "time=" lines.
ProbeResult parse_ping(const std::string& text);

ProbeResult run_iperf3(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);
ProbeResult run_ping(const ProbeSpec& spec, const Endpoints& where, const Tick& tick);

/// The full path of `tool` on PATH; throws "TOOL is not installed (apt-get install PACKAGE)".
std::string find_tool(const std::string& tool, const std::string& debian_package);

struct ToolOutput {
    int status = -1;  ///< wait status
    std::string out, err;
    bool timed_out = false;
};

/// ToolProcess: one external tool running in a network namespace, its stdout and stderr
/// captured. Creates: the child (setns in the child before exec, own process group,
/// PR_SET_PDEATHSIG=SIGKILL). Undoes: SIGKILL to its process group and a blocking reap, if
/// it is still there. The destructor never throws. Not thread-safe.
class ToolProcess {
public:
    ToolProcess(const std::string& netns, std::vector<std::string> argv);
    ~ToolProcess();
    ToolProcess(const ToolProcess&) = delete;
    ToolProcess& operator=(const ToolProcess&) = delete;

    /// Reads its output until it exits or `timeout` passes (then kills it), calling `tick`
    /// every 100 ms.
    ToolOutput wait(std::chrono::milliseconds timeout, const Tick& tick);
    /// SIGTERM now, SIGKILL after `grace`; returns what it printed.
    ToolOutput stop(std::chrono::milliseconds grace);

private:
    ToolOutput collect(std::chrono::milliseconds timeout, const Tick& tick, bool terminate_first);
    pid_t pid_ = -1;
    int out_ = -1, err_ = -1;
    std::string out_text_, err_text_;
};

}  // namespace wanlab::probes
