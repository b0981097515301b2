// --shard K/N: the partition of an experiment's trials (experiment/shard.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.h"
#include "experiment/shard.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using wanlab::testing::load;

namespace {

experiment::Experiment shard_experiment(const std::string& text) {
    auto l = load(text);
    INFO(l.messages);
    REQUIRE(l.exp);
    return *l.exp;
}

// 4 RTTs x 3 loss rates x 2 variants = 24 trials in 12 sweep points.
const std::string kSweep =
    "[link]\nrtt = \"10ms\"\n[[probe]]\nkind = \"rtt\"\n[sweep]\n\"link.rtt\" = [\"10ms\", \"40ms\", \"80ms\", "
    "\"160ms\"]\n\"link.loss\" = [\"0%\", \"0.1%\", \"1%\"]\n"
    "[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n[variant.sysctl]\n\"net.core.wmem_max\" = 4194304\n";

}  // namespace

TEST_CASE("a shard is read as K/N, and anything else is refused saying what is wrong", "[experiment][shard]") {
    auto s = experiment::parse_shard("2/4");
    CHECK(s.k == 2);
    CHECK(s.n == 4);
    CHECK(s.text() == "2/4");
    CHECK(experiment::parse_shard("1/1").whole());
    CHECK_THROWS_WITH(experiment::parse_shard("2"), Catch::Contains("expected K/N"));
    CHECK_THROWS_WITH(experiment::parse_shard("a/4"), Catch::Contains("expected K/N"));
    CHECK_THROWS_WITH(experiment::parse_shard("2/4/"), Catch::Contains("expected K/N"));
    CHECK_THROWS_WITH(experiment::parse_shard("-1/4"), Catch::Contains("expected K/N"));
    CHECK_THROWS_WITH(experiment::parse_shard("0/4"), Catch::Contains("K must be 1-4"));
    CHECK_THROWS_WITH(experiment::parse_shard("5/4"), Catch::Contains("K must be 1-4"));
    CHECK_THROWS_WITH(experiment::parse_shard("1/0"), Catch::Contains("N must be 1-10000"));
    CHECK_THROWS_AS(experiment::parse_shard("1/99999999999"), InputError);
}

TEST_CASE("the shards of a sweep cover every trial once, keep each point's variants together, and balance time",
          "[experiment][shard]") {
    auto exp = shard_experiment(kSweep);
    REQUIRE(exp.trials.size() == 24);
    // Planned seconds grow with the RTT, as a long path's probes would.
    std::vector<double> seconds;
    for (std::size_t i = 0; i < exp.trials.size(); ++i) seconds.push_back(10.0 + static_cast<double>(i / 6) * 7);
    const double total = std::accumulate(seconds.begin(), seconds.end(), 0.0);
    for (unsigned n : {1u, 2u, 3u, 5u, 12u}) {
        INFO("N = " << n);
        std::multiset<std::size_t> seen;
        double longest = 0;
        for (unsigned k = 1; k <= n; ++k) {
            auto mine = experiment::shard_positions(exp.trials, seconds, {k, n});
            CHECK(mine == experiment::shard_positions(exp.trials, seconds, {k, n}));  // the same file, the same part
            CHECK(std::is_sorted(mine.begin(), mine.end()));                          // plan order
            CHECK_FALSE(mine.empty());
            double load = 0;
            for (auto i : mine) {
                seen.insert(i);
                load += seconds[i];
                // The other variant of the same sweep point is in the same shard.
                auto partner = i % 2 == 0 ? i + 1 : i - 1;
                CHECK(std::count(mine.begin(), mine.end(), partner) == 1);
            }
            longest = std::max(longest, load);
        }
        CHECK(seen.size() == 24);
        CHECK(std::set<std::size_t>(seen.begin(), seen.end()).size() == 24);
        // Longest first to the least loaded: within one unit (a point: 2 x 31 s) of the mean.
        CHECK(longest <= total / n + 62 + 1e-9);
    }
}

TEST_CASE("with fewer sweep points than shards the unit is the trial, and too many shards get none",
          "[experiment][shard]") {
    auto exp = shard_experiment(
        "[[probe]]\nkind = \"rtt\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n"
        "[[variant]]\nname = \"c\"\n");
    REQUIRE(exp.trials.size() == 3);  // one point, three variants
    std::vector<double> seconds{5, 5, 5};
    std::set<std::size_t> seen;
    for (unsigned k = 1; k <= 3; ++k) {
        auto mine = experiment::shard_positions(exp.trials, seconds, {k, 3});
        CHECK(mine.size() == 1);
        seen.insert(mine.begin(), mine.end());
    }
    CHECK(seen.size() == 3);
    CHECK(experiment::shard_positions(exp.trials, seconds, {4, 4}).empty());
    CHECK(experiment::shard_positions(exp.trials, seconds, {1, 1}) == std::vector<std::size_t>{0, 1, 2});
}
