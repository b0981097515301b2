// `wanlab results merge` (results/merge.h): which runs combine, which copy of a trial is kept,
// and what the merged run says about where each trial came from.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "results/merge.h"
#include "tests/results/sample_run.h"

using namespace wanlab::results;
using wanlab::results::samples::sample_measurement;
using wanlab::results::samples::sample_run_header;
using wanlab::results::samples::sample_trial;

namespace {

/// The shard of a four-trial experiment holding `trials`, each measured twice.
MergeInput shard(const std::string& id, const std::string& shard, std::vector<std::size_t> trials,
                 const std::string& host = "lab-1") {
    MergeInput in;
    in.source = "/results/" + id;
    in.data.run = sample_run_header(id, "2026-11-30T0" + std::to_string(trials.front()) + ":00:00Z");
    in.data.run.shard = shard;
    in.data.run.status = RunStatus::complete;
    in.data.run.finished = "2026-11-30T1" + std::to_string(trials.front()) + ":00:00Z";
    in.data.run.planned_trials = trials.size();
    in.data.run.env.hostname = host;
    for (auto t : trials) {
        in.data.trials.push_back(sample_trial(t, t % 2 ? "default" : "big", std::to_string(20 * t) + "ms"));
        in.data.measurements.push_back(sample_measurement(t, 1));
        in.data.measurements.push_back(sample_measurement(t, 2));
        in.data.measurements.back().metrics["throughput"] = 1e6 * t;  // which trial's copy it is
    }
    return in;
}

std::string refusal(const std::vector<MergeInput>& inputs) {
    try {
        merge_runs(inputs, {"m"});
    } catch (const wanlab::InputError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("two shards merge into one run with every trial, its measurements and its origin", "[results][merge]") {
    auto a = shard("r1", "1/2", {1, 4}, "lab-1");
    auto b = shard("r2", "2/2", {2, 3}, "lab-2");
    std::vector<std::string> notes;
    auto m = merge_runs({a, b}, {"merged"}, &notes);
    CHECK(notes.empty());
    CHECK(m.run.id == "merged");
    CHECK(m.run.shard.empty());
    CHECK(m.run.status == RunStatus::complete);
    CHECK(m.run.text == a.data.run.text);
    CHECK(m.run.sets == a.data.run.sets);
    CHECK(m.run.started == "2026-11-30T01:00:00Z");   // the first input to start
    CHECK(m.run.finished == "2026-11-30T12:00:00Z");  // the last to finish
    CHECK(m.run.planned_trials == 4);
    REQUIRE(m.trials.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(m.trials[i].index == i + 1);
    CHECK(m.trials[0].origin == "run r1 (shard 1/2) of /results/r1 on lab-1, kernel 6.1.0-27-amd64");
    CHECK(m.trials[1].origin == "run r2 (shard 2/2) of /results/r2 on lab-2, kernel 6.1.0-27-amd64");
    CHECK(m.trials[2].origin == m.trials[1].origin);
    CHECK(m.trials[3].origin == m.trials[0].origin);
    REQUIRE(m.measurements.size() == 8);
    for (const auto& meas : m.measurements)
        if (meas.repeat == 2) CHECK(meas.metrics.at("throughput") == 1e6 * meas.trial);
}

TEST_CASE("merge refuses runs of another experiment text or --set, naming each difference", "[results][merge]") {
    auto a = shard("r1", "1/3", {1});
    auto b = shard("r2", "2/3", {2});
    auto c = shard("r3", "3/3", {3});
    b.data.run.text += "# edited\n";
    c.data.run.sets.push_back("link.delay=80ms");
    auto why = refusal({a, b, c});
    CHECK_THAT(why, Catch::Contains("run r2 of /results/r2 is not of the same experiment as run r1 of /results/r1: "
                                    "the experiment file's text differs"));
    CHECK_THAT(why, Catch::Contains("run r3 of /results/r3 is not of the same experiment as run r1 of /results/r1: "
                                    "its --set arguments differ"));
    CHECK_THAT(why, Catch::Contains("--force"));
    // Forced: merged, and said so.
    std::vector<std::string> notes;
    auto m = merge_runs({a, b, c}, {"m", true}, &notes);
    CHECK(m.trials.size() == 3);
    REQUIRE(notes.size() == 2);
    CHECK_THAT(notes[0], Catch::EndsWith("(--force)"));
}

TEST_CASE("merge refuses a trial measured by two runs, and --force keeps the first run's copy", "[results][merge]") {
    auto a = shard("r1", "", {1, 2});
    auto b = shard("r2", "", {2, 3});
    b.data.measurements[1].metrics["throughput"] = 42;  // r2's copy of trial 2
    auto why = refusal({a, b});
    CHECK_THAT(why,
               Catch::Contains("trial 2 (big) was measured by run r1 of /results/r1 and by run r2 of /results/r2"));
    CHECK_THAT(why, !Catch::Contains("trial 3"));
    std::vector<std::string> notes;
    auto m = merge_runs({a, b}, {"m", true}, &notes);
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Catch::Contains("kept run r1's"));
    REQUIRE(m.trials.size() == 3);
    CHECK_THAT(m.trials[1].origin, Catch::StartsWith("run r1 "));
    for (const auto& meas : m.measurements) CHECK(meas.metrics.at("throughput") != 42);
    CHECK(m.measurements.size() == 6);
}

TEST_CASE("a finished trial replaces an interrupted copy, a pending one stays pending and the status tells",
          "[results][merge]") {
    auto a = shard("r1", "", {1, 2, 3});
    a.data.run.status = RunStatus::interrupted;
    a.data.run.error = "interrupted by SIGINT";
    a.data.trials[1].status = TrialStatus::interrupted;
    a.data.trials[2].status = TrialStatus::pending;  // never reached
    a.data.measurements.resize(3);                   // trial 1's two and trial 2's first
    auto b = shard("r2", "", {2});
    std::vector<std::string> notes;
    auto m = merge_runs({a, b}, {"m"}, &notes);
    REQUIRE(m.trials.size() == 3);
    CHECK(m.trials[1].status == TrialStatus::done);
    CHECK_THAT(m.trials[1].origin, Catch::StartsWith("run r2 "));
    CHECK(m.trials[2].status == TrialStatus::pending);
    CHECK(m.trials[2].origin.empty());
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Catch::Contains("kept the done copy of run r2, not the interrupted one of run r1"));
    std::size_t of_trial_2 = 0;
    for (const auto& meas : m.measurements) of_trial_2 += meas.trial == 2;
    CHECK(of_trial_2 == 2);  // r2's two, not r1's cut-short one
    CHECK(m.run.status == RunStatus::interrupted);
    CHECK(m.run.error == "run r1 of /results/r1 ended interrupted: interrupted by SIGINT");
}

TEST_CASE("forced plans that give two configurations one position are renumbered with their measurements",
          "[results][merge]") {
    auto a = shard("r1", "", {1, 2});
    auto b = shard("r2", "", {1});
    b.data.run.text += "# another sweep\n";
    b.data.trials[0].id = "another-configuration";
    b.data.measurements[1].metrics["throughput"] = 7;
    std::vector<std::string> notes;
    auto m = merge_runs({a, b}, {"m", true}, &notes);
    REQUIRE(m.trials.size() == 3);
    CHECK(m.trials[2].index == 3);
    CHECK(m.trials[1].id == "another-configuration");
    CHECK(m.trials[1].index == 2);
    bool moved = false;
    for (const auto& meas : m.measurements) moved |= meas.metrics.at("throughput") == 7 && meas.trial == 2;
    CHECK(moved);
    CHECK_THAT(notes.back(), Catch::Contains("renumbered 1 to 3"));
}

TEST_CASE("merge needs two runs", "[results][merge]") {
    CHECK_THROWS_AS(merge_runs({shard("r1", "", {1})}, {"m"}), wanlab::InputError);
}
