// What a run records, in results/' model: a trial's configuration, a repeat's measurement,
// the machine as the run found it, and the time.
//
// Contract: record_of(), trial_record() and environment_keys() are pure; environment() reads
// uname and /proc/sys of wanlab's own namespace (never writes). Thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "probes/probe.h"
#include "probes/probe_spec.h"
#include "results/model.h"

namespace wanlab::run {

/// One repeat's record as the results store keeps it (no counters: the caller adds them).
results::Measurement record_of(const probes::ProbeSpec& spec, const probes::ProbeResult& r, std::size_t trial,
                               unsigned repeat, const std::string& started);

/// The trial as the results model records it (configuration that explanations need).
results::Trial trial_record(const experiment::Trial& t);

/// The sysctls an environment records: the usual buffer and congestion-control keys and
/// every key the experiment sets.
std::vector<std::string> environment_keys(const experiment::Experiment& exp);

/// The machine as the run found it: uname, the sysctls of environment_keys() (host
/// namespace).
results::Environment environment(const experiment::Experiment& exp, const std::string& where);
/// This machine as a run in the micro-VM records the one that started it (Environment::host):
/// uname and the usual buffer, congestion-control and qdisc keys.
results::MachineEnvironment this_machine_environment();
/// What this_machine_environment() wrote to `path` (--host-env). Throws wanlab::Error naming
/// the file when it cannot be read or is not one.
results::MachineEnvironment read_host_environment(const std::string& path);

/// Now as ISO 8601 UTC ("2026-11-30T04:12:09Z").
std::string utc_now();

}  // namespace wanlab::run
