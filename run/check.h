// The emulation check: before a trial's probes run, measure that the path does what the
// trial configured, so a result is never read off a path that did not hold.
//
// Contract: check_emulation() measures across the lab's client and server (RTT by TCP
// handshake timing, 20 probes; the rate of each direction that has one by a paced UDP
// stream at 125% of the rate for 1 s, counted in wire bytes at the receiver) and compares
// with the configuration: RTT held when the median is within [95% of configured - 0.2 ms,
// 105% of configured + both jitters + 5 ms] (the slack above covers the emulated CPU of a
// micro-VM, which adds 1-3 ms per round trip); rate held when the measured rate is within
// 85% to 105% of configured (a rate short of that is measured once more and the better of
// the two kept: a sender briefly starved of CPU is not the path). Only traffic between the lab's namespaces. Checks
// nothing (checked = false) when the trial sets neither delay nor rate. `tick` as in probes/probe.h. Failures to
// measure throw wanlab::Error. Not thread-safe.
#pragma once

#include <string>

#include "experiment/experiment.h"
#include "probes/probe.h"
#include "results/model.h"

namespace wanlab::run {

/// What the trial configured, in base units: RTT (s) as both directions' delays, each
/// direction's rate (bit/s, 0 = none) and jitter (s).
struct Expected {
    double rtt = 0, jitter = 0;
    double rate_up = 0, rate_down = 0;
};
Expected expected_of(const experiment::Trial& trial);

/// Whether `measured` RTT (s) holds for `e` (pure; the tolerance in the header comment).
bool rtt_holds(const Expected& e, double measured);
/// Whether `measured` rate (bit/s) holds for `configured`.
bool rate_holds(double configured, double measured);

results::EmulationCheck check_emulation(const experiment::Trial& trial, const probes::Endpoints& where,
                                        const probes::Tick& tick);

/// The UDP rate measurement on its own: `from` sends to `to` at `send_rate` bit/s for
/// `duration`; returns the rate (bit/s, wire bytes incl. Ethernet/IP/UDP headers) at which
/// datagrams arrived.
double measure_udp_rate(const probes::Endpoint& from, const probes::Endpoint& to, double send_rate,
                        std::chrono::milliseconds duration, const probes::Tick& tick);

}  // namespace wanlab::run
