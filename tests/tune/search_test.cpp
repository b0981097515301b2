// tune/search.h driven by fake measurements: each candidate's true goal per path is a model the
// test states (a window-limited stream, Mathis's loss bound, a queue's delay), measured with
// 2% of noise. The search must find what the model says, recommend the least that gets there,
// say "no change" when nothing beats the baseline, and spend its budget as it says.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "tests/support/load_helper.h"
#include "tune/search.h"

using namespace wanlab;
using namespace wanlab::tune;
using Catch::Matchers::Contains;

namespace {

// The [tune] of `space` (TOML lines of [tune.space]) over a throughput probe, with `extra`
// lines in [tune].
experiment::TuneSpec spec_of(const std::string& space, const std::string& extra = "", const std::string& sweep = "") {
    std::vector<testing::Loaded> keep;
    keep.push_back(testing::load("[link]\nrtt = \"160ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\n" + sweep +
                                 "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n"
                                 "[[probe]]\nname = \"ping\"\nkind = \"rtt\"\n"
                                 "[run]\nduration = \"8s\"\n[tune]\ngoal = \"bulk.throughput\"\n" +
                                 extra + "[tune.space]\n" + space));
    INFO(keep.back().messages);
    REQUIRE(keep.back().exp);
    REQUIRE(keep.back().exp->tune);
    return *keep.back().exp->tune;
}

// A fake measurement: `truth(candidate, path)` with 2% Gaussian noise, seeded by the stage,
// candidate and path so that a run is repeatable; each measurement costs its length and
// `overhead` seconds.
struct Fake {
    std::function<double(const Candidate&, std::size_t)> truth;
    std::size_t paths = 1;
    double overhead = 2;
    std::function<double(const Candidate&, std::size_t)> rtt;  // a constraint's metric, if any
    std::string diagnosis;
    std::vector<StageRequest> asked;

    StageResult operator()(const StageRequest& req) {
        asked.push_back(req);
        StageResult res;
        const std::size_t repeats = req.adaptive ? req.repeats + 2 : req.repeats;
        for (const auto& c : req.candidates) {
            Measured m;
            m.goal.resize(paths);
            if (rtt) m.constraints.assign(1, std::vector<std::vector<double>>(paths));
            for (std::size_t p = 0; p < paths; ++p) {
                std::seed_seq seed{
                    static_cast<int>(req.number), static_cast<int>(p),
                    static_cast<int>(std::hash<std::string>()(std::to_string(c.choice.size()) +
                                                              std::string(c.choice.begin(), c.choice.end())) &
                                     0x7fffffff)};
                std::mt19937 gen(seed);
                std::normal_distribution<double> noise(1, 0.02);
                for (std::size_t r = 0; r < repeats; ++r) {
                    m.goal[p].push_back(truth(c, p) * noise(gen));
                    if (rtt) m.constraints[0][p].push_back(rtt(c, p) * noise(gen));
                }
            }
            res.candidates.push_back(m);
        }
        res.seconds = static_cast<double>(req.candidates.size() * paths * repeats) *
                      (std::chrono::duration<double>(req.duration).count() + overhead);
        res.baseline_diagnosis.assign(paths, diagnosis);
        return res;
    }
};

// One stream on a clean path: one window (half the receive buffer) per round trip, at most the
// link's 95 Mbit/s of goodput.
double window_limited(double buffer, double rtt) { return std::min(95e6, buffer * 0.5 * 8 / rtt); }

const std::vector<int> kNoneWritten{kAsWritten};

// The stages as the test's failure message shows them.
std::string describe(const experiment::TuneSpec& spec, const Outcome& o) {
    std::string out;
    for (const auto& st : o.stages) {
        out += fmt::format("stage {} ({} s):\n", st.request.number,
                           std::chrono::duration<double>(st.request.duration).count());
        for (const auto& s : st.scored)
            out += fmt::format("  {} score {:.3f} {}\n", label(spec, s.candidate), s.score, s.dropped);
    }
    for (const auto& n : o.notes) out += "note: " + n + "\n";
    return out;
}

}  // namespace

TEST_CASE("tune: on a clean long path the smallest buffer within 5% of the best is recommended, not the largest",
          "[tune]") {
    auto spec = spec_of("\"sysctl.net.ipv4.tcp_rmem\" = { from = \"256KiB\", to = \"64MiB\", scale = \"x2\" }\n");
    REQUIRE(spec.space.at(0).values.size() == 9);
    // The file's own maximum: 1 MiB, none of the values' twin (26 Mbit/s of window).
    const double written = 1024 * 1024 + 1;
    Fake fake;
    fake.truth = [&](const Candidate& c, std::size_t) {
        double buffer =
            c.choice[0] == kAsWritten ? written : spec.space[0].amounts[static_cast<std::size_t>(c.choice[0])];
        return window_limited(buffer, 0.160);
    };
    SearchOptions options;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, kNoneWritten, options, std::ref(fake));
    INFO(fake.asked.size() << " stages");
    // 4 MiB carries 104.9 Mbit/s of window: the link's 95; 2 MiB only 52.4.
    // A range of tcp_rmem runs over its maximum.
    CHECK(label(spec, o.recommended) == "sysctl.net.ipv4.tcp_rmem=4096 131072 4194304");
    CHECK(o.beats_baseline);
    REQUIRE(o.paths.size() == 1);
    CHECK(o.paths[0].rec_mean == Approx(95e6).epsilon(0.05));
    CHECK(o.paths[0].base_mean == Approx(26.2e6).epsilon(0.05));
}

TEST_CASE("tune: when the file as written is as good, nothing is recommended", "[tune]") {
    auto spec = spec_of("\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\", \"reno\"]\n");
    Fake fake;
    fake.truth = [](const Candidate&, std::size_t) { return 94e6; };  // a short clean path: all fill it
    SearchOptions options;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, {0}, options, std::ref(fake));  // the machine's default is cubic
    CHECK(o.recommended.baseline());
    CHECK_FALSE(o.beats_baseline);
    CHECK(o.measured_seconds <= std::chrono::duration<double>(spec.budget).count());
}

TEST_CASE("tune: on a lossy long path bbr is chosen, and it is confirmed against the baseline", "[tune]") {
    auto spec = spec_of("\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\", \"reno\"]\n");
    Fake fake;
    fake.truth = [](const Candidate& c, std::size_t) {
        // 100 ms, 1% loss: Mathis's bound of a loss-based stream is 1.4 Mbit/s; bbr keeps 40.
        return c.choice[0] == 1 ? 40e6 : c.choice[0] == 2 ? 1.2e6 : 1.4e6;
    };
    SearchOptions options;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, {0}, options, std::ref(fake));
    CHECK(label(spec, o.recommended) == "probe.bulk.congestion_control=bbr");
    CHECK(o.beats_baseline);
    REQUIRE(o.paths.size() == 1);
    CHECK(o.paths[0].better);
    CHECK(o.paths[0].delta == Approx(40e6 / 1.4e6 - 1).epsilon(0.1));
    // The last stage confirmed at the file's length with adaptive repeats.
    REQUIRE_FALSE(o.stages.empty());
    CHECK(o.stages.back().request.confirmation);
    CHECK(o.stages.back().request.adaptive);
    CHECK(o.stages.back().request.duration == std::chrono::seconds(8));
    // The first stage measured every candidate, shorter; reno was dropped by the test.
    CHECK(o.stages.front().request.candidates.size() == 3);  // baseline (cubic), bbr, reno
    CHECK(o.stages.front().request.duration == std::chrono::seconds(2));
    bool reno_dropped = false;
    for (const auto& s : o.stages.front().scored)
        if (s.candidate.choice[0] == 2) reno_dropped = !s.dropped.empty();
    CHECK(reno_dropped);
}

TEST_CASE("tune: on several paths the score is the worst ratio, so a setting that holds on all wins", "[tune]") {
    auto spec = spec_of(
        "\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\"]\n"
        "\"sysctl.net.ipv4.tcp_rmem\" = [\"4096 131072 1048576\", \"4096 131072 16777216\"]\n",
        "", "[sweep]\n\"link.up.loss\" = [\"0%\", \"1%\"]\n");
    Fake fake;
    fake.paths = 2;
    // Path 0 (clean): the buffer binds, cc does not. Path 1 (1% loss): bbr carries 40, cubic 1.4.
    fake.truth = [](const Candidate& c, std::size_t p) {
        const bool big = c.choice[1] == 1;
        const bool bbr = c.choice[0] == 1;
        if (p == 0) return big ? 95e6 : 26e6;
        return bbr ? (big ? 40e6 : 26e6) : 1.4e6;
    };
    SearchOptions options;
    options.paths = 2;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, {0, 0}, options, std::ref(fake));
    CHECK(label(spec, o.recommended) ==
          "probe.bulk.congestion_control=bbr sysctl.net.ipv4.tcp_rmem=4096 131072 16777216");
    CHECK(o.beats_baseline);
    // Both keys changed: each one's part is measured by putting it back.
    REQUIRE(o.contributions.size() == 2);
    for (const auto& c : o.contributions) CHECK(c.loss > 0.3);
}

TEST_CASE("tune: a candidate that breaks a constraint is never recommended", "[tune]") {
    auto spec = spec_of("\"link.qdisc\" = [\"pfifo\", \"fq_codel\"]\n\"link.qdisc_limit\" = [100, 1000]\n",
                        "constraints = [\"ping.rtt_p50 <= 200ms\"]\n");
    Fake fake;
    // The deep pfifo carries a little more but queues 700 ms; fq_codel keeps the RTT near 170 ms.
    fake.truth = [](const Candidate& c, std::size_t) { return c.choice[0] == 1 ? 90e6 : 94e6; };
    fake.rtt = [](const Candidate& c, std::size_t) {
        if (c.choice[0] == 1) return 0.170;
        return c.choice[1] == 1 ? 0.9 : 0.25;
    };
    SearchOptions options;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, {kAsWritten, kAsWritten}, options, std::ref(fake));
    REQUIRE_FALSE(o.recommended.baseline());
    CHECK(o.recommended.choice[0] == 1);  // fq_codel
    // It carries less than the deep FIFO, but the baseline broke the constraint.
    CHECK(o.beats_baseline);
    for (const auto& s : o.stages.front().scored)
        if (s.candidate.choice[0] == 0) CHECK_THAT(s.dropped, Contains("broke \"ping.rtt_p50 <= 200ms\""));
}

TEST_CASE("tune: a budget too small for every candidate measures first what the baseline's diagnosis points at",
          "[tune]") {
    auto spec = spec_of(
        "\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\", \"reno\", \"htcp\"]\n"
        "\"sysctl.net.core.rmem_max\" = { from = \"256KiB\", to = \"64MiB\", scale = \"x2\" }\n",
        "budget = \"6min\"\n");
    Fake fake;
    fake.diagnosis = "receive-window-limited";
    fake.truth = [&](const Candidate& c, std::size_t) {
        double buffer =
            c.choice[1] == kAsWritten ? 212992 : spec.space[1].amounts[static_cast<std::size_t>(c.choice[1])];
        return window_limited(buffer, 0.160);
    };
    SearchOptions options;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, {0, kAsWritten}, options, std::ref(fake));
    CHECK(o.seeded_by == "receive-window-limited");
    REQUIRE(o.stages.size() >= 2);
    CHECK(o.stages[0].request.candidates.size() == 1);  // the baseline, for its diagnosis
    const auto& first = o.stages[1].request.candidates;
    CHECK(first.size() < 4 * 9);
    // Every candidate of the first stage after the baseline changes only the buffer.
    for (std::size_t i = 1; i < first.size(); ++i) CHECK(first[i].choice[0] == kAsWritten);
    CHECK(o.measured_seconds <= 360);
    INFO(describe(spec, o));
    CHECK(label(spec, o.recommended) == "sysctl.net.core.rmem_max=4MiB");
    bool said = false;
    for (const auto& n : o.notes) said = said || n.find("receive-window-limited") != std::string::npos;
    CHECK(said);
}

TEST_CASE(
    "tune: the grid leaves out the baseline's twin and what is over the buffer budget, and cheaper is fewer changes",
    "[tune]") {
    auto spec = spec_of(
        "\"sysctl.net.core.rmem_max\" = [\"1MiB\", \"4MiB\", \"16MiB\"]\n"
        "\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\"]\n",
        "buffer_budget = \"8MiB\"\n");
    // The machine has 4 MiB and cubic: (4MiB, cubic) is the baseline itself.
    const std::vector<int> written{1, 0};
    auto g = grid(spec, written);
    CHECK(g.front().baseline());
    CHECK(g.size() == 1 + 2 * 2 - 1);  // 16 MiB is over the budget; (4MiB, cubic) is the baseline
    for (const auto& c : g) CHECK_FALSE((c.choice[0] == 1 && c.choice[1] == 0));
    // (1MiB, cubic) changes one key; (4MiB, bbr) changes one; (1MiB, bbr) two.
    Candidate small{{0, kAsWritten}}, bbr{{kAsWritten, 1}}, both{{0, 1}};
    CHECK(std::find(g.begin(), g.end(), small) != g.end());
    CHECK(std::find(g.begin(), g.end(), bbr) != g.end());
    CHECK(cheaper(spec, written, small, both));
    CHECK(cheaper(spec, written, bbr, both));
    CHECK(cheaper(spec, written, small, bbr));  // one change each: the smaller buffer
    CHECK(variant_name(spec, both) == "rmem_max-1MiB_congestion_control-bbr");
    CHECK(variant_name(spec, g.front()) == "baseline");
}

TEST_CASE("tune: a setting worse on one path but far better on the other beats the baseline by the worst path",
          "[tune]") {
    // Short measurements on a clean and a lossy path: bbr ramps slower on the clean one (-15%),
    // and carries ten times cubic's on the lossy one.
    auto spec = spec_of("\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\"]\n", "",
                        "[sweep]\n\"link.up.loss\" = [\"0%\", \"1%\"]\n");
    Fake fake;
    fake.paths = 2;
    fake.truth = [](const Candidate& c, std::size_t p) {
        const bool bbr = c.choice[0] == 1;
        return p == 0 ? (bbr ? 80e6 : 94e6) : (bbr ? 40e6 : 4e6);
    };
    SearchOptions options;
    options.paths = 2;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, {0}, options, std::ref(fake));
    INFO(describe(spec, o));
    CHECK(label(spec, o.recommended) == "probe.bulk.congestion_control=bbr");
    CHECK(o.beats_baseline);
    REQUIRE(o.paths.size() == 2);
    CHECK_FALSE(o.paths[0].better);  // worse on the clean path, and the answer says so
    CHECK(o.paths[1].better);
    bool said = false;
    for (const auto& n : o.notes) said = said || n.find("on path 1 the recommendation is") != std::string::npos;
    CHECK(said);
}

TEST_CASE("tune: a budget too small for a confirmation judges by the last stage that measured both", "[tune]") {
    auto spec = spec_of("\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\", \"reno\"]\n", "budget = \"80s\"\n");
    Fake fake;
    fake.truth = [](const Candidate& c, std::size_t) { return c.choice[0] == 1 ? 40e6 : 1.4e6; };
    SearchOptions options;
    options.full_duration = std::chrono::seconds(8);
    auto o = search(spec, {0}, options, std::ref(fake));
    INFO(describe(spec, o));
    CHECK(label(spec, o.recommended) == "probe.bulk.congestion_control=bbr");
    CHECK(o.beats_baseline);
    CHECK(o.measured_seconds <= 80);
    CHECK_FALSE(o.stages.back().request.confirmation);
    bool said = false;
    for (const auto& n : o.notes) said = said || n.find("no confirmation at full length") != std::string::npos;
    CHECK(said);
}
