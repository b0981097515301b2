// Sharding: one deterministic part of an experiment's trials, so that a batch system (a CI
// matrix, Slurm array jobs, Kubernetes indexed Jobs, GNU parallel over ssh) can spread one
// sweep across machines, each shard a normal run in its own results database.
//
// Contract: every shard of a file computes the same partition from the file alone (its
// trials and their planned seconds), so N machines given K = 1..N agree without talking.
// The unit is the sweep point: a point's variants stay together, measured back to back on
// one machine, so each comparison with the baseline is made under one machine's conditions.
// When there are fewer points than shards, the unit is the trial. Units are dealt longest
// first to the least loaded shard (ties: the lower shard, then plan order), which keeps the
// longest shard within one unit of the average. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "experiment/experiment.h"

namespace wanlab::experiment {

struct Shard {
    unsigned k = 1, n = 1;  ///< shard k of n, 1 <= k <= n
    bool whole() const { return n == 1; }
    std::string text() const;  ///< "K/N"
};

/// "K/N" as --shard takes it; InputError saying what is wrong otherwise.
Shard parse_shard(const std::string& text);

/// The positions (0-based, plan order) of `trials` that shard `s` measures; `seconds[i]` is
/// trial i's planned duration. Empty when there are fewer units than shards.
std::vector<std::size_t> shard_positions(const std::vector<Trial>& trials, const std::vector<double>& seconds, Shard s);

}  // namespace wanlab::experiment
