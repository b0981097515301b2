// `wanlab results merge`: runs of one experiment (the shards of a sweep, pieces of an
// interrupted run, repeats on other days) combined into one run whose report, pivot and
// asserts cover every trial.
//
// Contract: merge_runs() is pure. Every input must be a run of the same experiment text and
// --set arguments as the first; a trial measured (status other than "pending") in two inputs
// is an overlap. Both are refused with every difference listed (InputError), unless `force`:
// then the first input, in argument order, keeps an overlapping trial. Each merged trial
// records its origin (which run, shard, database, machine and kernel); a trial no input
// measured stays pending. The merged run starts when the first input started and finishes
// when the last finished; it is "complete" only when every input is.
#pragma once

#include <string>
#include <vector>

#include "results/model.h"

namespace wanlab::results {

struct MergeInput {
    std::string source;  ///< where it was read: the results folder
    RunData data;
};

struct MergeOptions {
    std::string run_id;  ///< the merged run's id
    bool force = false;  ///< merge different experiment texts, keep the first of overlapping trials
};

/// The merged run. `notes` receives what --force let through ("trial 3 ... kept from ...").
RunData merge_runs(const std::vector<MergeInput>& inputs, const MergeOptions& options,
                   std::vector<std::string>* notes = nullptr);

/// "run ID (shard K/N) of SOURCE on HOST, kernel KERNEL": a trial's origin.
std::string origin_of(const MergeInput& input);

}  // namespace wanlab::results
