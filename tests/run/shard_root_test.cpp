// wanlab run --shard K/N on the host kernel (a sweep without link conditions needs no netem):
// the shards of one file measure every trial of the unsharded run exactly once, each a normal
// run in its own results database that records which shard it was; `wanlab results merge` makes
// them one run that reports as the whole run does, and refuses runs that overlap.
#include "tests/support/root_helper.h"

#include <set>

#include <nlohmann/json.hpp>

using namespace wanlab;
using namespace wanlab::root_testing;

namespace {

// 3 sweep points x 2 variants = 6 trials; each measures 5-20 TCP handshakes on the bare lab.
constexpr const char* kSweep = R"(name = "shard-root"
[[probe]]
name = "p"
kind = "rtt"
method = "tcp"
count = 5
interval = "2ms"
[sweep]
"probe.p.count" = [5, 10, 20]
[[variant]]
name = "cubic"
[[variant]]
name = "reno"
[variant.sysctl.client]
"net.ipv4.tcp_congestion_control" = "reno"
[run]
repeats = 1
warmup = "0s"
cooldown = "0s"
)";

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string t = "/tmp/wanlab-shard-XXXXXX";
        path = ::mkdtemp(t.data());
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

std::string query(const std::filesystem::path& out, const std::string& sql) {
    auto r = sh(fmt::format("sqlite3 {} \"{}\"", (out / "results.db").string(), sql));
    while (!r.empty() && r.back() == '\n') r.pop_back();
    return r;
}

std::set<std::string> lines(const std::string& text) {
    std::set<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.insert(l);
    return out;
}

}  // namespace

TEST_CASE("two shards measure every trial of the whole run once, keep each point together, and merge into it",
          "[root]") {
    if (skip_unless_root()) return;
    TempDir dir;
    auto file = dir.path / "sweep.toml";
    std::ofstream(file) << kSweep;
    auto before = capture();
    int status = -1;
    auto run = [&](const std::string& out, const std::string& extra) {
        auto text = sh(fmt::format("{} run {} --out {} --quiet --no-vm {} 2>&1", WANLAB_BINARY, file.string(),
                                   (dir.path / out).string(), extra),
                       &status);
        INFO(text);
        CHECK(status == 0);
        return text;
    };
    run("whole", "");
    auto first = run("one", "--shard 1/2");
    run("two", "--shard 2/2");
    CHECK_THAT(first, Catch::Contains("shard 1/2 of the experiment's trials"));

    const std::string trials = "select idx || ' ' || id || ' ' || variant || ' ' || sweep from trials";
    auto whole = lines(query(dir.path / "whole", trials));
    auto one = lines(query(dir.path / "one", trials));
    auto two = lines(query(dir.path / "two", trials));
    REQUIRE(whole.size() == 6);
    // 3 points dealt to 2 shards: one gets 1 point (2 trials), the other 2 (4 trials).
    CHECK(std::set<std::size_t>{one.size(), two.size()} == std::set<std::size_t>{2, 4});
    std::set<std::string> both(one.begin(), one.end());
    both.insert(two.begin(), two.end());
    CHECK(both == whole);  // same places in the plan, same ids, same points: nothing twice, nothing left out
    // Each sweep point's two variants were measured together, in one shard.
    for (const auto& shard : {one, two}) {
        std::multiset<std::string> points;
        for (const auto& l : shard) points.insert(l.substr(l.find('[')));
        for (const auto& p : points) CHECK(points.count(p) == 2);
    }
    CHECK(query(dir.path / "one", "select shard || ' ' || planned_trials || ' ' || status from runs") ==
          fmt::format("1/2 {} complete", one.size()));
    CHECK(query(dir.path / "whole", "select '[' || shard || ']' from runs") == "[]");
    CHECK(query(dir.path / "two", "select count(*) from measurements") == std::to_string(two.size()));

    // Merged: the whole run's trials, each from the shard that measured it, and the same report cells.
    auto merge = [&](const std::string& inputs, const std::string& out, const std::string& extra) {
        return sh(fmt::format("cd {} && {} results merge {} --out {} {} 2>&1", dir.path.string(), WANLAB_BINARY, inputs,
                              out, extra),
                  &status);
    };
    auto merged_text = merge("one two", "merged", "--run m1 --format json");
    INFO(merged_text);
    REQUIRE(status == 0);
    CHECK(lines(query(dir.path / "merged", trials)) == whole);
    CHECK(query(dir.path / "merged", "select count(*) from measurements") == "6");
    CHECK(query(dir.path / "merged",
                "select id || ' ' || planned_trials || ' ' || status || ' [' || shard || ']' from "
                "runs") == "m1 6 complete []");
    CHECK(query(dir.path / "merged", "select count(*) from trials where origin like 'run % (shard 1/2) of one on %'") ==
          std::to_string(one.size()));
    CHECK(query(dir.path / "merged", "select count(*) from trials where origin like 'run % (shard 2/2) of two on %'") ==
          std::to_string(two.size()));
    auto cells = [&](const std::string& folder) {
        auto j = nlohmann::json::parse(
            sh(fmt::format("{} results show --out {} --format json", WANLAB_BINARY, (dir.path / folder).string())));
        std::set<std::string> out;
        for (const auto& c : j["cells"])
            out.insert(c["point"].dump() + " " + c["variant"].get<std::string>() + " " +
                       c["metric"].get<std::string>() + " n=" + std::to_string(c["values"].size()));
        return std::pair{out, j["run"]};
    };
    auto [merged_cells, merged_run] = cells("merged");
    CHECK(merged_cells == cells("whole").first);
    CHECK(merged_run["trials_done"] == 6);
    REQUIRE(merged_run["merged_from"].size() == 2);
    CHECK(merged_run["merged_from"][0]["trials"].size() + merged_run["merged_from"][1]["trials"].size() == 6);
    auto text = sh(fmt::format("{} results show --out {}", WANLAB_BINARY, (dir.path / "merged").string()));
    CHECK_THAT(text, Catch::Contains("trials: 6 of 6 done"));
    CHECK_THAT(text, Catch::Contains(" from run ") && Catch::Contains("(shard 2/2) of two on "));

    // A shard and the whole run overlap; a run of other --set arguments is another experiment.
    auto overlap = merge("one whole", "bad", "");
    CHECK(status == 2);
    CHECK_THAT(overlap, Catch::Contains("was measured by run") && Catch::Contains("give --force"));
    run("other", "--shard 2/2 --set run.warmup=1ms");
    auto other = merge("one other", "bad", "");
    CHECK(status == 2);
    CHECK_THAT(other, Catch::Contains("its --set arguments differ"));
    CHECK(!std::filesystem::exists(dir.path / "bad" / "results.db"));

    auto refused = sh(fmt::format("{} run {} --out {} --quiet --shard 7/6 2>&1", WANLAB_BINARY, file.string(),
                                  (dir.path / "bad").string()),
                      &status);
    CHECK(status == 2);
    CHECK_THAT(refused, Catch::Contains("K must be 1-6"));
    auto too_many = sh(fmt::format("{} run {} --out {} --quiet --shard 7/7 2>&1", WANLAB_BINARY, file.string(),
                                   (dir.path / "bad").string()),
                       &status);
    CHECK(status == 2);
    CHECK_THAT(too_many, Catch::Contains("the experiment has 6 trials, fewer than 7 shards: use N <= 6"));
    CHECK(capture() == before);
}
