#include "run/shard.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "experiment/shard.h"
#include "run/progress.h"

namespace wanlab::run {

std::size_t keep_shard(experiment::Experiment& exp, const std::string& file, const std::string& text) {
    auto shard = experiment::parse_shard(text);
    const std::size_t all = exp.trials.size();
    std::vector<double> seconds;
    for (const auto& t : exp.trials) seconds.push_back(planned_seconds(t, exp.run));
    auto keep = experiment::shard_positions(exp.trials, seconds, shard);
    if (keep.empty())
        throw InputError(fmt::format("{}: --shard {}: the experiment has {} trial{}, fewer than {} shards: use N <= {}",
                                     file, text, all, all == 1 ? "" : "s", shard.n, all));
    std::vector<experiment::Trial> mine;
    for (auto i : keep) mine.push_back(std::move(exp.trials[i]));
    exp.trials = std::move(mine);
    return all;
}

}  // namespace wanlab::run
