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

namespace wanlab::lab {

/// tc and sysctl command lines equivalent to applying `t`.
std::vector<std::string> trial_commands(const Trial& t, const LabNames& names = {});

/// Short human summary of one direction: "delay 20ms 2ms loss 1% rate 100mbit (tbf, pfifo)".
std::string direction_summary(const netem::Direction& d);

std::string render_plan_text(const Experiment& exp);
nlohmann::json plan_json(const Experiment& exp);

}  // namespace wanlab::lab
