// A run of one shard: the trials of experiment/shard.h's partition that this machine measures,
// dealt by their planned seconds (run/progress.h).
#pragma once

#include <cstddef>
#include <string>

#include "experiment/experiment.h"

namespace wanlab::run {

/// Keeps only the trials of shard `text` ("K/N") in `exp`, with their plan positions and
/// ids (experiment/shard.h). Throws InputError, naming `file`, when the shard has none;
/// returns how many trials the whole experiment has.
std::size_t keep_shard(experiment::Experiment& exp, const std::string& file, const std::string& text);

}  // namespace wanlab::run
