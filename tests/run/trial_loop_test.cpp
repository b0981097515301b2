// The trial loop (run/runner.h) driven end to end with a fake session and a fake testbed:
// what it applies in which order, what it records, how a run ends, without root or a
// kernel, as ninja's Builder runs against a fake CommandRunner.
#include <catch2/catch.hpp>

#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/signals.h"
#include "experiment/shard.h"
#include "lab/session.h"
#include "probes/probe_spec.h"
#include "probes/stats.h"
#include "report/report.h"
#include "results/store.h"
#include "run/progress.h"
#include "run/runner.h"
#include "services/service.h"
#include "tests/results/sample_run.h"
#include "tests/support/load_helper.h"

using namespace wanlab;

namespace {

experiment::Experiment loop_experiment(const std::string& text) {
    auto l = wanlab::testing::load(text);
    INFO(l.messages);
    REQUIRE(l.exp);
    return *l.exp;
}

/// What the fakes saw, shared by the session, its testbed and the test.
struct Script {
    std::vector<std::size_t> applied;                   ///< trial indexes, in the order applied
    std::vector<std::string> measured;                  ///< "trial/probe" per run_probe() call
    std::size_t service_fails_in = 0;                   ///< this trial's service fails to start (0: none)
    std::size_t interrupt_in = 0;                       ///< Ctrl-C during this trial's first probe (0: never)
    std::size_t refuse_in = 0;                          ///< the tool refuses every measurement of this trial
    std::map<std::size_t, std::vector<double>> values;  ///< trial -> the main metric of each call, in turn
    std::size_t current = 0;                            ///< the trial applied last
    int sessions_open = 0;                              ///< sessions made and not yet closed (restored)
    bool interrupted = false;
};

/// FakeTestbed: measures nothing; each probe returns the script's next value as its main
/// metric, calling `tick` as a real probe does while it waits.
class FakeTestbed final : public lab::Testbed {
public:
    explicit FakeTestbed(Script& s) : s_(s) {}
    void prepare(const experiment::LabSpec&) override {}
    void apply_link(const experiment::Trial&) override {}
    probes::Endpoints endpoints(int) const override {
        probes::Endpoints e;
        e.server.address = "198.18.0.6";
        e.client.address = "198.18.0.2";
        return e;
    }
    probes::ProbeResult run_probe(const probes::ProbeSpec& spec, const probes::Endpoints&,
                                  const probes::Tick& tick) const override {
        s_.measured.push_back(std::to_string(s_.current) + "/" + spec.name);
        if (s_.interrupt_in == s_.current) s_.interrupted = true;
        tick();
        if (s_.refuse_in == s_.current) throw probes::MeasurementError("the tool is not installed");
        auto& v = s_.values[s_.current];
        probes::ProbeResult r;
        r.kind = spec.kind;
        r.tool = "fake";
        double value = v.empty() ? 1e6 : v.front();
        if (!v.empty() && v.size() > 1) v.erase(v.begin());
        r.metrics[probes::main_metric(spec.kind)] = value;
        return r;
    }
    bool probes_here() const override { return false; }  // no counters of this machine read
    std::vector<netem::QdiscSite> qdisc_sites(const experiment::Trial&) const override { return {}; }
    std::vector<lab::CapturePoint> capture_points() const override { return {}; }
    services::Placement placement(const std::string&) const override { return {}; }
    std::string describe(const experiment::Trial&) const override { return "fake"; }
    std::string undo_text() const override { return "nothing"; }

private:
    Script& s_;
};

/// FakeSession: applies by writing down; restores (counts itself closed) when destroyed.
class FakeSession final : public lab::Session {
public:
    explicit FakeSession(Script& s) : s_(s), testbed_(s) { ++s_.sessions_open; }
    ~FakeSession() override { --s_.sessions_open; }
    void apply_trial(const experiment::Trial& t) override {
        s_.applied.push_back(t.index);
        s_.current = t.index;
    }
    void start_services(const experiment::Trial& t, const std::filesystem::path&, const probes::Tick&) override {
        if (t.index == s_.service_fails_in) throw services::ServiceFailure("service web: exited with status 1");
    }
    void check_services() override {}
    void stop_services() noexcept override {}
    const lab::Testbed& testbed() const override { return testbed_; }

private:
    Script& s_;
    FakeTestbed testbed_;
};

/// A run of `exp` on the fakes of `s`, into `store`.
run::Outcome run_on(Script& s, const experiment::Experiment& exp, results::Store& store, run::RunnerOptions o = {}) {
    run::Progress quiet(run::Progress::Mode::quiet);
    if (o.run_id.empty() && !o.resume) o.run_id = "loop1";
    auto tick = [&s] {
        if (s.interrupted) throw sys::Interrupted(SIGINT);
    };
    auto open = [&s](const std::vector<experiment::Trial>&, const run::SessionRequest&, results::Environment&) {
        return std::make_unique<FakeSession>(s);
    };
    return run::run_experiment(exp, "the text", o, store, quiet, tick, open);
}

// Three trials (a sweep of three points), two probes each, two repeats, no waits.
const char* const kThree =
    "[sweep]\n\"sysctl.net.core.rmem_max\" = [212992, 4194304, 33554432]\n"
    "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n"
    "[[probe]]\nname = \"ping\"\nkind = \"rtt\"\ncount = 5\ninterval = \"10ms\"\n"
    "[run]\nrepeats = 2\nwarmup = \"0s\"\ncooldown = \"0s\"\nduration = \"1s\"\n";

std::size_t count_of(const results::RunData& d, std::size_t trial, const std::string& probe) {
    std::size_t n = 0;
    for (const auto& m : d.measurements) n += m.trial == trial && m.probe == probe;
    return n;
}

}  // namespace

TEST_CASE("trial loop: every trial is applied in plan order and each probe's repeats recorded as taken",
          "[run][loop]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    Script s;
    auto exp = loop_experiment(kThree);
    REQUIRE(exp.trials.size() == 3);
    auto out = run_on(s, exp, store);
    CHECK(out.exit_code == 0);
    CHECK(s.applied == std::vector<std::size_t>{1, 2, 3});
    CHECK(s.sessions_open == 0);  // closed (the machine restored) before the run ended
    CHECK(s.measured.size() == 3 * 2 * 2);
    auto stored = store.load_run("loop1");
    CHECK(stored.run.status == results::RunStatus::complete);
    CHECK(stored.run.planned_trials == 3);
    REQUIRE(stored.trials.size() == 3);
    for (const auto& t : stored.trials) {
        CHECK(t.status == results::TrialStatus::done);
        CHECK(count_of(stored, t.index, "bulk") == 2);
        CHECK(count_of(stored, t.index, "ping") == 2);
    }
    CHECK(stored.measurements.size() == out.data.measurements.size());
}

TEST_CASE("trial loop: a trial whose service fails is recorded failed, the others measured, the run fails",
          "[run][loop]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    Script s;
    s.service_fails_in = 2;
    auto out = run_on(s, loop_experiment(kThree), store);
    CHECK(out.exit_code == 1);
    CHECK(s.applied == std::vector<std::size_t>{1, 2, 3});
    auto stored = store.load_run("loop1");
    CHECK(stored.run.status == results::RunStatus::failed);
    CHECK(stored.run.error.find("1 of 3 trials failed") != std::string::npos);
    CHECK(stored.trials.at(0).status == results::TrialStatus::done);
    CHECK(stored.trials.at(1).status == results::TrialStatus::failed);
    CHECK(stored.trials.at(1).error == "service web: exited with status 1");
    CHECK(stored.trials.at(2).status == results::TrialStatus::done);
    CHECK(count_of(stored, 2, "bulk") == 0);
    CHECK(count_of(stored, 3, "bulk") == 2);
    CHECK(s.sessions_open == 0);
}

TEST_CASE("trial loop: a tool's refusal is recorded with its reason beside the measurements, and the run goes on",
          "[run][loop]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    Script s;
    s.refuse_in = 1;
    auto out = run_on(s, loop_experiment(kThree), store);
    CHECK(out.exit_code == 0);
    auto stored = store.load_run("loop1");
    REQUIRE(count_of(stored, 1, "bulk") == 2);  // each refused repeat is a record, not a gap
    for (const auto& m : stored.measurements)
        if (m.trial == 1) {
            CHECK(m.metrics.empty());
            REQUIRE(m.notes.size() == 1);
            CHECK(m.notes[0] == std::string(results::kErrorNote) + "the tool is not installed");
        }
    CHECK(count_of(stored, 2, "bulk") == 2);
}

TEST_CASE("trial loop: Ctrl-C mid-trial restores, ends the run interrupted with 130, and a resume measures the rest",
          "[run][loop]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    auto exp = loop_experiment(kThree);
    Script s;
    s.interrupt_in = 2;
    auto out = run_on(s, exp, store);
    CHECK(out.exit_code == 130);
    CHECK(s.sessions_open == 0);
    auto stopped = store.load_run("loop1");
    CHECK(stopped.run.status == results::RunStatus::interrupted);
    CHECK(stopped.trials.at(0).status == results::TrialStatus::done);
    CHECK(stopped.trials.at(1).status == results::TrialStatus::interrupted);
    CHECK(stopped.trials.at(2).status == results::TrialStatus::pending);
    CHECK(count_of(stopped, 1, "bulk") == 2);

    Script again;
    run::RunnerOptions o;
    o.resume = &stopped;
    o.resume_note = "resumed by the test";
    auto resumed = run_on(again, exp, store, o);
    CHECK(resumed.exit_code == 0);
    CHECK(again.applied == std::vector<std::size_t>{2, 3});  // trial 1 kept, not measured again
    auto whole = store.load_run("loop1");
    CHECK(whole.run.status == results::RunStatus::complete);
    REQUIRE(whole.run.sessions.size() == 2);
    CHECK(whole.run.sessions[1].note == "resumed by the test");
    for (std::size_t t = 1; t <= 3; ++t) CHECK(count_of(whole, t, "bulk") == 2);
    CHECK(whole.trials.at(0).session == 1);
    CHECK(whole.trials.at(1).session == 2);
}

TEST_CASE("trial loop: adaptive repeats stop at the minimum for a steady probe and take Stein's count for a noisy one",
          "[run][loop][repeats]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    auto exp = loop_experiment(
        "[sweep]\n\"sysctl.net.core.rmem_max\" = [212992, 4194304]\n"
        "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n"
        "[run]\nrepeats = \"auto\"\nmin_repeats = 3\nmax_repeats = 10\nprecision = \"5%\"\n"
        "warmup = \"0s\"\ncooldown = \"0s\"\nduration = \"1s\"\n");
    Script s;
    s.values[1] = {100e6, 100.5e6, 99.5e6};  // steady: 3 are enough
    const std::vector<double> noisy = {100e6, 140e6, 70e6};
    s.values[2] = noisy;
    s.values[2].push_back(100e6);
    auto out = run_on(s, exp, store);
    CHECK(out.exit_code == 0);
    auto stored = store.load_run("loop1");
    const auto want = probes::stats::stein_repeats(noisy, 0.05, 10);
    CHECK(want > 3);
    CHECK(count_of(stored, 1, "bulk") == 3);
    CHECK(count_of(stored, 2, "bulk") == want);
    CHECK(stored.run.repeats.adaptive);
}

TEST_CASE("trial loop: a shard measures only its trials and records which shard it is", "[run][loop]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    auto exp = loop_experiment(
        "[sweep]\n\"sysctl.net.core.rmem_max\" = [212992, 1048576, 4194304, 33554432]\n"
        "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n"
        "[run]\nrepeats = 1\nwarmup = \"0s\"\ncooldown = \"0s\"\nduration = \"1s\"\n");
    std::vector<double> seconds;
    for (const auto& t : exp.trials) seconds.push_back(run::planned_seconds(t, exp.run));
    auto keep = experiment::shard_positions(exp.trials, seconds, experiment::parse_shard("2/2"));
    REQUIRE(!keep.empty());
    std::vector<experiment::Trial> mine;
    std::vector<std::size_t> indexes;
    for (auto i : keep) {
        indexes.push_back(exp.trials[i].index);
        mine.push_back(exp.trials[i]);
    }
    exp.trials = mine;
    Script s;
    run::RunnerOptions o;
    o.shard = "2/2";
    auto out = run_on(s, exp, store, o);
    CHECK(out.exit_code == 0);
    CHECK(s.applied == indexes);
    auto stored = store.load_run("loop1");
    CHECK(stored.run.shard == "2/2");
    CHECK(stored.run.planned_trials == indexes.size());
    CHECK(stored.measurements.size() == indexes.size());
}

TEST_CASE("trial loop: asserts gate the exit code: 3 when one fails, the run's own code when the run failed",
          "[run][loop]") {
    auto exp = loop_experiment(
        "[sweep]\n\"sysctl.net.core.rmem_max\" = [212992, 4194304]\n"
        "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n"
        "[[assert]]\nprobe = \"bulk\"\nmetric = \"throughput\"\nat_least = \"50mbit\"\n"
        "[run]\nrepeats = 2\nwarmup = \"0s\"\ncooldown = \"0s\"\nduration = \"1s\"\n");
    struct Case {
        double slow;          // trial 2's throughput
        std::size_t failing;  // trial whose service fails (0: none)
        int code;
    } cases[] = {{80e6, 0, 0}, {20e6, 0, 3}, {80e6, 1, 1}};
    for (const auto& c : cases) {
        results::samples::TempDir dir;
        results::Store store(dir.path / "results.db");
        Script s;
        s.values[1] = {90e6};
        s.values[2] = {c.slow};
        s.service_fails_in = c.failing;
        auto out = run_on(s, exp, store);
        auto outcomes = report::evaluate(out.data, exp.asserts);
        INFO("trial 2 at " << c.slow << " bit/s, service failing in trial " << c.failing);
        CHECK(report::gate_status(outcomes, out.exit_code) == c.code);
    }
}
