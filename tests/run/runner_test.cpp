// The runner's pure parts: what a trial is expected to show, when the emulation holds, how
// long a trial is planned to take, how a run's record ends, how progress and its ETA are written.
#include <catch2/catch.hpp>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/mounts.h"
#include "core/signals.h"
#include "results/store.h"
#include "run/check.h"
#include "run/progress.h"
#include "run/record.h"
#include "run/runner.h"
#include "run/trial.h"
#include "tests/results/sample_run.h"
#include "tests/support/load_helper.h"

using namespace wanlab;

namespace {

experiment::Experiment loaded(const std::string& text) {
    auto l = wanlab::testing::load(text);
    INFO(l.messages);
    REQUIRE(l.exp);
    return *l.exp;
}

experiment::Trial first_trial(const std::string& text) { return loaded(text).trials.front(); }

std::string written(const std::function<void(run::Progress&)>& fn, run::Progress::Mode mode) {
    std::FILE* f = std::tmpfile();
    {
        run::Progress p(mode, f);
        fn(p);
    }
    std::rewind(f);
    std::string out;
    char buf[256];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    std::fclose(f);
    return out;
}

}  // namespace

TEST_CASE("the expected RTT is both directions' delays and each direction keeps its rate", "[run]") {
    auto t =
        first_trial("[link]\nrtt = \"40ms\"\njitter = \"2ms\"\nrate = \"100mbit\"\n[link.down]\nrate = \"20mbit\"\n");
    auto e = run::expected_of(t);
    CHECK(e.rtt == Approx(0.040));
    CHECK(e.jitter == Approx(0.004));
    CHECK(e.rate_up == Approx(100e6));
    CHECK(e.rate_down == Approx(20e6));
}

TEST_CASE("an RTT holds from 5% below to 5% above plus jitter plus 5 ms", "[run]") {
    run::Expected e;
    e.rtt = 0.040;
    CHECK(run::rtt_holds(e, 0.040));
    CHECK(run::rtt_holds(e, 0.0378));
    CHECK_FALSE(run::rtt_holds(e, 0.0370));
    CHECK(run::rtt_holds(e, 0.046));
    CHECK_FALSE(run::rtt_holds(e, 0.0475));
    e.jitter = 0.010;
    CHECK(run::rtt_holds(e, 0.056));
}

TEST_CASE("a rate holds from 85% to 105% of configured", "[run]") {
    CHECK(run::rate_holds(100e6, 96e6));
    CHECK(run::rate_holds(100e6, 85e6));
    CHECK_FALSE(run::rate_holds(100e6, 84e6));
    CHECK_FALSE(run::rate_holds(100e6, 106e6));
}

TEST_CASE("a trial record carries the configuration explanations need", "[run]") {
    auto t = first_trial(
        "[link]\nrtt = \"40ms\"\nrate = \"100mbit\"\nloss = \"1%\"\n[link.down]\nrate = \"50mbit\"\n"
        "[sysctl]\n\"net.core.rmem_max\" = 1048576\n\"net.ipv4.tcp_rmem\" = [4096, 131072, 2097152]\n");
    auto r = run::trial_record(t);
    CHECK(r.link_rtt == Approx(0.040));
    CHECK(r.link_rate == Approx(50e6));  // the slower direction
    CHECK(r.link_loss == Approx(0.01));
    CHECK(r.sysctls.at("net.core.rmem_max") == "1048576");
    CHECK(r.sysctls.at("client:net.ipv4.tcp_rmem") == "4096 131072 2097152");
    CHECK(r.sysctls.at("server:net.ipv4.tcp_rmem") == "4096 131072 2097152");
    CHECK(r.status == results::TrialStatus::pending);
}

TEST_CASE("a trial is planned as check, warm-up, and repeats of duration plus cooldown", "[run]") {
    auto exp = loaded(
        "[[probe]]\nkind = \"throughput\"\nduration = \"5s\"\n"
        "[[probe]]\nkind = \"rtt\"\ncount = 10\ninterval = \"100ms\"\n"
        "[run]\nrepeats = 3\nwarmup = \"2s\"\ncooldown = \"1s\"\n");
    // no link conditions, no check: throughput (2 + 3 x (5 + 1)) + rtt without warm-up (3 x (1 + 1))
    CHECK(run::planned_seconds(exp.trials.front(), exp.run) == Approx(20 + 6));
    auto linked = loaded(
        "[link]\nrtt = \"40ms\"\n[[probe]]\nkind = \"rtt\"\ncount = 10\ninterval = \"100ms\"\n"
        "[run]\nrepeats = 3\nwarmup = \"2s\"\ncooldown = \"1s\"\n");
    CHECK(run::planned_seconds(linked.trials.front(), linked.run) == Approx(2 + 6));  // the check's 2 s, then rtt
}

TEST_CASE("progress in a log is one plain line per step, with elapsed time and ETA", "[run]") {
    auto out = written(
        [](run::Progress& p) {
            p.plan(std::chrono::seconds(100));
            p.status("[1/2] default: bulk repeat 1/3", std::chrono::seconds(0));
            p.line("run r1 interrupted");
        },
        run::Progress::Mode::lines);
    CHECK(out == "wanlab: [1/2] default: bulk repeat 1/3 | 0s elapsed, ETA 1m40s\nwanlab: run r1 interrupted\n");
}

TEST_CASE("progress on a terminal rewrites one line and clears it before a lasting line", "[run]") {
    auto out = written(
        [](run::Progress& p) {
            p.status("a", std::chrono::seconds(0));
            p.status("b", std::chrono::seconds(0));
            p.line("done");
        },
        run::Progress::Mode::terminal);
    CHECK(out.find("\r\x1b[Ka |") == 0);
    CHECK(out.find("\r\x1b[Kb |") != std::string::npos);
    std::string last = "\r\x1b[Kwanlab: done\n";
    CHECK(out.substr(out.size() - last.size()) == last);
}

TEST_CASE("progress shows a service's or a file's escape sequences escaped, its own intact", "[run][security]") {
    auto out = written(
        [](run::Progress& p) {
            p.status("[1/1] \x1b]0;owned\x07 repeat 1/3", std::chrono::seconds(0));
            p.line("service web failed: \x1b[2J\u202e");
        },
        run::Progress::Mode::terminal);
    CHECK(out.find("\r\x1b[K[1/1] \\x1b]0;owned\\x07 repeat") == 0);
    CHECK(out.find("wanlab: service web failed: \\x1b[2J\\u202e\n") != std::string::npos);
    CHECK(out.find("\x1b[2J") == std::string::npos);
}

TEST_CASE("quiet progress writes nothing", "[run]") {
    auto out = written(
        [](run::Progress& p) {
            p.status("a", std::chrono::seconds(0));
            p.line("b");
        },
        run::Progress::Mode::quiet);
    CHECK(out.empty());
}

TEST_CASE("clock times read as h/m/s", "[run]") {
    CHECK(run::Progress::clock(12.4) == "12s");
    CHECK(run::Progress::clock(245) == "4m05s");
    CHECK(run::Progress::clock(3720) == "1h02m");
    CHECK(run::Progress::clock(-1) == "?");
}

namespace {

/// A run of two pending trials, as run_experiment() hands it to recorded_run().
results::RunData planned_run() {
    results::RunData d;
    d.run = results::samples::sample_run_header("r1");
    d.run.status = results::RunStatus::running;
    for (std::size_t i = 1; i <= 2; ++i) {
        results::Trial t;
        t.index = i;
        t.id = "t" + std::to_string(i);
        t.variant = "default";
        d.trials.push_back(t);
    }
    return d;
}

}  // namespace

TEST_CASE("a run whose probe throws std::invalid_argument ends failed with its message", "[run]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    auto data = planned_run();
    bool restored = false;
    int code = run::recorded_run(
        store, data,
        [&](results::Trial*& current) {
            current = &data.trials[0];
            throw std::invalid_argument("stod");  // what a probe's std::stod throws on bad tool output
        },
        [&] { restored = true; });
    CHECK(code == 1);
    CHECK(restored);
    auto stored = store.load_run("r1");
    CHECK(stored.run.status == results::RunStatus::failed);
    CHECK(stored.run.error == "stod");
    CHECK_FALSE(stored.run.finished.empty());
    CHECK(stored.trials.at(0).status == results::TrialStatus::failed);
    CHECK(stored.trials.at(0).error == "stod");
    CHECK(stored.trials.at(1).status == results::TrialStatus::pending);
}

TEST_CASE("a recorded run ends complete, interrupted, or failed with a wanlab error's exit code", "[run]") {
    results::samples::TempDir dir;
    results::Store store(dir.path / "results.db");
    struct Case {
        std::string id;
        std::function<void()> body;
        int code;
        results::RunStatus status;
        std::string error;
    } cases[] = {
        {"ok", [] {}, 0, results::RunStatus::complete, ""},
        {"int", [] { throw sys::Interrupted(SIGINT); }, 130, results::RunStatus::interrupted, "interrupted by SIGINT"},
        {"bad", [] { throw InputError("bad input"); }, 2, results::RunStatus::failed, "bad input"},
    };
    for (const auto& c : cases) {
        auto data = planned_run();
        data.run.id = c.id;
        CHECK(run::recorded_run(
                  store, data, [&](results::Trial*&) { c.body(); }, [] {}) == c.code);
        auto stored = store.load_run(c.id);
        CHECK(stored.run.status == c.status);
        CHECK(stored.run.error == c.error);
    }
}

TEST_CASE("the ETA stays within 25% of the real time left and moves smoothly from step to step", "[run]") {
    // Ten trials of the main example's shape: a 2 s check, a 2 s warm-up, 3 repeats of 5 s +
    // 1 s cooldown (22 s planned), each really taking 28 s, after 8 s of building the lab. The old
    // estimate (planned left x elapsed / done) read over 20 minutes at the first repeat.
    struct Step {
        double planned, actual;
    };
    std::vector<Step> steps;
    for (int t = 0; t < 10; ++t) {
        steps.push_back({2, 3.1});
        steps.push_back({2, 2.4});
        for (int r = 0; r < 3; ++r) steps.push_back({6, 6.0 + (r % 2 ? 1.9 : 1.3)});
    }
    double planned = 0, actual = 0;
    for (const auto& s : steps) planned += s.planned, actual += s.actual;
    run::EtaEstimator eta;
    eta.plan(planned);
    double elapsed = 8, done = 0, previous = -1, step = 0;
    for (const auto& s : steps) {
        double estimate = eta.at(elapsed, done), left = actual - (elapsed - 8);
        INFO("elapsed " << elapsed << " s, real time left " << left << " s, ETA " << estimate << " s");
        CHECK(estimate >= 0.75 * left);
        CHECK(estimate <= 1.25 * left);
        // From one step to the next the ETA moves by the step's own length, give or take 10%.
        if (previous >= 0) CHECK(std::abs(estimate - (previous - step)) <= 0.1 * previous);
        previous = estimate;
        step = s.actual;
        elapsed += s.actual;
        done += s.planned;
    }
    CHECK(eta.at(elapsed, done) == 0);
}

// The micro-VM's results share: 9p over the host's ext4, which statfs() reports as ext4.
TEST_CASE("mount_type finds the mount that holds a path and the type after the dash", "[run]") {
    const std::string info =
        "22 1 0:20 / / rw,relatime - 9p hostroot ro,trans=virtio\n"
        "30 22 0:25 / /tmp rw,relatime shared:5 - overlay overlay rw,lowerdir=/host/tmp\n"
        "31 30 0:26 / /tmp/results rw,sync,dirsync - 9p wanlabout rw,trans=virtio\n"
        "32 30 0:27 / /tmp/with\\040space rw - nfs4 server:/x rw\n"
        "33 22 0:28 / /run rw - tmpfs tmpfs rw\n"
        "34 33 0:29 / /run rw - fuse.sshfs host:/ rw\n";
    CHECK(sys::mount_type(info, "/tmp/results/run-1/trial-1") == "9p");
    CHECK(sys::mount_type(info, "/tmp/results") == "9p");
    CHECK(sys::mount_type(info, "/tmp/results/") == "9p");
    CHECK(sys::mount_type(info, "/tmp/resultsx") == "overlay");  // a sibling, not inside
    CHECK(sys::mount_type(info, "/tmp/wanlab-trials-x") == "overlay");
    CHECK(sys::mount_type(info, "/tmp/with space/a") == "nfs4");
    CHECK(sys::mount_type(info, "/run/x") == "fuse.sshfs");  // the later mount over /run hides tmpfs
    CHECK(sys::mount_type(info, "/etc") == "9p");
    CHECK(sys::mount_type("", "/etc").empty());
    CHECK(sys::mount_type("garbage line\n", "/etc").empty());
}

TEST_CASE("on_network_fs reads this machine's mount table: /proc is local", "[run]") {
    CHECK_FALSE(sys::on_network_fs("/proc/self"));
}

TEST_CASE("the plan of adaptive repeats follows the counts decided so far", "[run][repeats]") {
    // Four probes of 10 s per repeat, planned at 3 repeats each (120 s of repeats).
    run::RepeatForecast f(3, 40);
    CHECK(f.assumed() == 3);
    // The first decides on 7: +40 s for itself, and the three still to come are now planned
    // at 7 too: +120 s.
    CHECK(f.decided(10, 7) == Approx(40 + 120));
    CHECK(f.assumed() == Approx(7));
    // The second on 3: -40 s for itself (planned at 7); the mean is 5 now: the two left -40 s.
    CHECK(f.decided(10, 3) == Approx(-40 - 40));
    CHECK(f.assumed() == Approx(5));
    // Planned in all after every decision = the repeats really run.
    double planned = 3 * 40 + 160 - 80;
    planned += f.decided(10, 5);
    planned += f.decided(10, 10);
    CHECK(planned == Approx((7 + 3 + 5 + 10) * 10));
}
