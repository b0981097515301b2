// Whether a probe's `timeout` can fit what it asks for on the path it runs on. A request that
// times out leaves no latency sample, and the ones that survive are the fast ones: a timeout
// shorter than one response on the configured path biases every figure the probe gives
// (issue 39). Pure: from the trials' configuration alone, before anything runs.
#pragma once

#include <string>

#include "core/diagnostic.h"
#include "experiment/experiment.h"

namespace wanlab::experiment {

/// How long one response of `bytes` takes on a fresh TCP connection over a path of `rtt`
/// seconds, `rate` bit/s (0: none) and random `loss` (0..1), by the textbook model: the
/// handshake, slow start from an initial window of 10 segments (RFC 6928) doubling each round
/// trip, and with loss the rate loss-based TCP sustains (Mathis et al., 1997:
/// MSS / RTT x 1.22 / sqrt(p)). Each part is kept so a message can cite it.
struct ResponseTime {
    double slow_start = 0;  ///< s: the handshake and the rounds of slow start
    double at_rate = 0;     ///< s: the bytes at the configured rate (0: no rate)
    double at_loss = 0;     ///< s: the bytes at the Mathis rate (0: no loss)
    double loss_rate = 0;   ///< bit/s: that Mathis rate (0: no loss)
    double total() const;   ///< the slowest of the three
};
ResponseTime response_time(double bytes, double rtt, double rate, double loss);

/// Warns, once per probe at its [[probe]] header, when an http probe's `timeout` is shorter
/// than response_time() of its `response_size` (a transfer probe's: of its `size`, the way it
/// goes) on the slowest path of the trials it runs in.
void warn_short_timeouts(const Experiment& exp, Diagnostics& diag);

}  // namespace wanlab::experiment
