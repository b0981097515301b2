// `wanlab plan`: the trials of an experiment as a human table and as JSON, from the same
// data. One data model, two printers: the table uses human units ("20ms", "100mbit"), the
// JSON base units (seconds, bit/s, bytes, fractions), as iproute2's JSON output does.
// Also the equivalent tc and sysctl command lines of each trial, which is what the lab will
// apply through netlink and /proc/sys. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment/experiment.h"
#include "experiment/lab_names.h"

namespace wanlab::experiment {

/// tc and sysctl command lines equivalent to applying `t`.
std::vector<std::string> trial_commands(const Trial& t, const LabNames& names = {});

/// Short human summary of one direction: "delay 20ms 2ms loss 1% rate 100mbit (tbf, pfifo)".
std::string direction_summary(const netem::Direction& d);

/// A probe of `t` asking for more socket buffer than the trial's maxima grant, and what its
/// tool does about it. Linux grants SO_RCVBUF/SO_SNDBUF twice the ask, up to twice
/// net.core.rmem_max/wmem_max: the built-in probe is clamped to that; iperf3 3.12 reads the
/// buffer back and refuses a -w it did not get ("socket buffer size not set correctly").
/// Only maxima the trial sets are known here; validate and plan never read the machine.
struct BufferClamp {
    std::string probe, option, key;                 ///< "bulk", "rcvbuf" (iperf3: "-w"), "net.core.rmem_max"
    std::uint64_t asked = 0, max = 0, granted = 0;  ///< bytes
    bool refused = false;                           ///< the tool refuses: the measurements fail
    std::string text() const;                       ///< one line for plan and validate
};
std::vector<BufferClamp> buffer_clamps(const Trial& t);

std::string render_plan_text(const Experiment& exp);
nlohmann::json plan_json(const Experiment& exp);

}  // namespace wanlab::experiment
