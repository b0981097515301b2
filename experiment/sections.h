// The sections of one merged document ([run], [lab], [link], [sysctl], [[probe]]) read into
// a Trial: the last pass of loading, run once per trial by expand_trials(). A [link] or
// [sysctl] naming a profile is read over that profile (the file's keys win).
//
// Contract: every error is located at its key or value in `diag`; the returned values hold
// defaults where a key was wrong, so one pass reports every error. Pure; thread-safe.
#pragma once

#include "core/config.h"
#include "core/diagnostic.h"
#include "experiment/experiment.h"
#include "sysctl/sysctl_spec.h"

namespace wanlab::experiment {

/// [run]: repeats, warmup, cooldown, duration, seed, baseline. `table` may be null.
RunSpec parse_run(const config::Node* table, Diagnostics& diag);

/// Parses one fully merged document (base + variant + sweep point) into a trial; host mode's
/// probes are checked against its target filter.
/// `file` is the experiment file: services' template paths are relative to its folder.
/// `known_sysctl`: the [sysctl] an earlier trial parsed from the same [sysctl], [lab] and
/// [hosts] (expand_trials()); the document's own [sysctl] is then not read again. `traces`: the
/// traces the load has read so far (null: read the link's own).
Trial parse_trial(const config::Node& doc, const RunSpec& run, const std::string& file, const ProfileLibrary& profiles,
                  config::Documents& docs, Diagnostics& diag, const sysctl::SysctlSpec* known_sysctl = nullptr,
                  netem::TraceCache* traces = nullptr);

}  // namespace wanlab::experiment
