// [[assert]]: the gates a run is judged by, checked against the experiment's probes and
// variants when the file is loaded (evaluating them is report/asserts.cpp).
//
// Contract: an assert names a metric of one probe (the probe may be left out when only one
// probe reports that metric), bounds in that metric's unit, and optionally a variant and a
// minimum gain over the baseline; each mistake is located at its key. Pure; thread-safe.
#pragma once

#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "experiment/experiment.h"

namespace wanlab::experiment {

/// Reads [[assert]] (`table_array` may be null) into `out`, against `probes` and exp's
/// variants and baseline.
void parse_asserts(const config::Node* table_array, const Experiment& exp, const std::vector<probes::ProbeSpec>& probes,
                   Diagnostics& diag, std::vector<AssertSpec>& out);

}  // namespace wanlab::experiment
