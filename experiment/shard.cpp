#include "experiment/shard.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::experiment {

std::string Shard::text() const { return fmt::format("{}/{}", k, n); }

Shard parse_shard(const std::string& text) {
    auto slash = text.find('/');
    auto number = [&](std::string_view part, unsigned& out) {
        auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
        return !part.empty() && ec == std::errc() && end == part.data() + part.size();
    };
    Shard s;
    if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), s.k) ||
        !number(std::string_view(text).substr(slash + 1), s.n))
        throw InputError(fmt::format("--shard \"{}\": expected K/N, two whole numbers, as in --shard 2/4", text));
    if (s.n < 1 || s.n > 10'000)
        throw InputError(fmt::format("--shard {}: N must be 1-10000 (the most trials an experiment has)", text));
    if (s.k < 1 || s.k > s.n)
        throw InputError(fmt::format("--shard {}: K must be 1-{} (shards are numbered from 1)", text, s.n));
    return s;
}

std::vector<std::size_t> shard_positions(const std::vector<Trial>& trials, const std::vector<double>& seconds,
                                         Shard s) {
    // Units: the trials of one sweep point (in plan order they are adjacent), or single
    // trials when there are fewer points than shards.
    std::vector<std::vector<std::size_t>> units;
    for (std::size_t i = 0; i < trials.size(); ++i) {
        if (units.empty() || trials[i].sweep != trials[units.back().front()].sweep) units.emplace_back();
        units.back().push_back(i);
    }
    if (units.size() < s.n) {
        units.clear();
        for (std::size_t i = 0; i < trials.size(); ++i) units.push_back({i});
    }
    std::vector<double> cost(units.size(), 0);
    for (std::size_t u = 0; u < units.size(); ++u)
        for (auto i : units[u]) cost[u] += i < seconds.size() ? seconds[i] : 0;
    std::vector<std::size_t> order(units.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return cost[a] > cost[b]; });
    std::vector<double> load(s.n, 0);
    std::vector<std::size_t> out;
    for (auto u : order) {
        auto least = static_cast<unsigned>(std::min_element(load.begin(), load.end()) - load.begin());
        load[least] += cost[u];
        if (least + 1 == s.k) out.insert(out.end(), units[u].begin(), units[u].end());
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace wanlab::experiment
