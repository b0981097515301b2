// What crosses the wire between the controller and `wanlab agent`: the hello and its
// version check, and the pieces of a trial a host needs (its sysctls, its services), as JSON.
//
// Contract: pure; thread-safe. A service travels with its templates' text (read at load on
// the controller), never a path, so the agent needs none of the controller's files.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "netem/link_spec.h"
#include "netem/tc_command.h"
#include "probes/probe.h"
#include "services/service_spec.h"

namespace wanlab::remote {

/// The agent's first line: who it is and on what (uname -r, uname -m).
nlohmann::json hello(const std::string& hostname, const std::string& kernel, const std::string& machine);

/// Why the controller cannot work with an agent that said `hello` on host `host`, or "": a
/// different wanlab version or protocol (with what to do about it).
std::string hello_problem(const nlohmann::json& hello, const std::string& host, const std::string& wanlab);

/// A direction's link conditions, every field exactly (durations in ns); without the keys'
/// source locations, which are the controller's. Each [link] key's row in netem's attribute
/// table writes and reads its own fields (netem::to_agent_json), so a new row needs no edit here.
nlohmann::json direction_json(const netem::Direction& d);
/// Throws wanlab::Error for a malformed one.
netem::Direction direction_of(const nlohmann::json& j);

nlohmann::json flow_json(const netem::Flow& f);
/// Throws wanlab::Error for a malformed one.
netem::Flow flow_of(const nlohmann::json& j);

/// A probe as its far server needs it: name, kind and options (each typed as JSON types it:
/// integers, floats, booleans, strings).
nlohmann::json probe_json(const probes::ProbeSpec& p);
/// Throws wanlab::Error for a malformed one.
probes::ProbeSpec probe_of(const nlohmann::json& j);

nlohmann::json far_report_json(const probes::FarReport& r);
/// Throws wanlab::Error for a malformed one.
probes::FarReport far_report_of(const nlohmann::json& j);

/// A measurement's result, whole but for samples past `max_samples` per distribution (each
/// thinned to its first ones, with a note saying so); NaN values cross as null.
nlohmann::json probe_result_json(const probes::ProbeResult& r, std::size_t max_samples = 1'000'000);
/// Throws wanlab::Error for a malformed one.
probes::ProbeResult probe_result_of(const nlohmann::json& j);

nlohmann::json service_json(const services::ServiceSpec& s);
/// Throws wanlab::InputError naming the field for a malformed one.
services::ServiceSpec service_of(const nlohmann::json& j);

}  // namespace wanlab::remote
