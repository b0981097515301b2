// tune/answer.h: what a user reads and applies after `wanlab tune`, from an outcome the test
// builds by hand.
#include <catch2/catch.hpp>

#include "tests/support/load_helper.h"
#include "tune/answer.h"

using namespace wanlab;
using namespace wanlab::tune;
using Catch::Matchers::Contains;

namespace {

struct Fixture {
    testing::Loaded loaded = testing::load(
        "[link]\nrtt = \"80ms\"\nrate = \"100mbit\"\n[sweep]\n\"link.up.loss\" = [\"0%\", \"1%\"]\n"
        "[[probe]]\nname = \"bulk\"\nkind = \"throughput\"\n[tune]\ngoal = \"bulk.throughput\"\n"
        "[tune.space]\n\"sysctl.server.net.ipv4.tcp_rmem\" = [\"4096 131072 1048576\", \"4096 131072 16777216\"]\n"
        "\"probe.bulk.congestion_control\" = [\"cubic\", \"bbr\"]\n");
    Subject s;
    Outcome o;

    Fixture() {
        INFO(loaded.messages);
        REQUIRE(loaded.exp);
        REQUIRE(loaded.exp->tune);
        s.spec = &*loaded.exp->tune;
        s.as_written = {kAsWritten, 0};
        s.written = {"4096 131072 6291456", "cubic"};
        s.paths = {"link.up.loss=0%", "link.up.loss=1%"};
        s.runs = {"t1-s1", "t1-s2"};
        s.id = "t1";
        s.file = "tune.toml";
        o.baseline = Candidate{{kAsWritten, kAsWritten}};
        o.recommended = o.best = Candidate{{1, 1}};
        o.beats_baseline = true;
        o.measured_seconds = 312;
        o.paths = {{1.2, 0.001, 40e6, 1e6, 88e6, 2e6, 88e6, 2e6, true, true},
                   {28.0, 0.0001, 1.4e6, 0.1e6, 40.6e6, 1e6, 40.6e6, 1e6, true, true}};
        o.contributions = {{0, 0.55, {40e6, 39e6}}, {1, 0.96, {88e6, 1.5e6}}};
        Stage st;
        st.request.number = 1;
        st.request.duration = std::chrono::seconds(2);
        st.request.candidates = {o.baseline, o.recommended};
        Scored base{o.baseline, {40e6, 1.4e6}, {3, 3}, 0.035, 0, true, "worse than bbr on path 2", {}};
        Scored rec{o.recommended, {88e6, 40e6}, {3, 3}, 1.0, 0, true, "", {}};
        st.scored = {base, rec};
        st.seconds = 48;
        o.stages.push_back(st);
    }
};

}  // namespace

TEST_CASE("tune's answer: the recommendation, each path before and after with its test, and the search", "[tune]") {
    Fixture f;
    auto text = answer_text(f.o, f.s);
    CHECK_THAT(text, Contains("Recommended: sysctl.server.net.ipv4.tcp_rmem=4096 131072 16777216 "
                              "probe.bulk.congestion_control=bbr"));
    CHECK_THAT(text, Contains("link.up.loss=1%: 1.40 Mbit/s +- 100.0 kbit/s -> 40.60 Mbit/s +- 1.00 Mbit/s"));
    CHECK_THAT(text, Contains("probe.bulk.congestion_control = bbr: 96.0%"));
    CHECK_THAT(text, Contains("dropped, worse than bbr on path 2"));
    auto j = answer_json(f.o, f.s);
    CHECK(j["recommended"]["probe.bulk.congestion_control"] == "bbr");
    CHECK(j["changes"].size() == 2);
    CHECK(j["measured_seconds"] == 312);
    CHECK(j["baseline"]["values"]["probe.bulk.congestion_control"] == "cubic");
    CHECK(j["best"]["paths"][1]["mean"].get<double>() == Approx(40.6e6));
    CHECK(j["stages"][0]["candidates"][1]["recommended"] == true);
    CHECK(j["stages"][0]["run"] == "t1-s1");
}

TEST_CASE("tune's answer as sysctl.d and tuned: each key on its machine, with the measured reason", "[tune]") {
    Fixture f;
    auto dropin = sysctl_dropin(f.o, f.s);
    CHECK_THAT(dropin, Contains("net.ipv4.tcp_rmem = 4096 131072 16777216\n"));
    CHECK_THAT(dropin, Contains("# net.ipv4.tcp_rmem (from sysctl.server.net.ipv4.tcp_rmem): on the server; putting "
                                "it back to 4096 131072 6291456 cost 55.0%"));
    CHECK_THAT(dropin, Contains("net.ipv4.tcp_congestion_control = bbr\n"));
    CHECK_THAT(dropin, Contains("on the sending machine"));
    CHECK_THAT(dropin, Contains("tcp_bbr"));
    auto tuned = tuned_profile(f.o, f.s);
    CHECK_THAT(tuned, Contains("[main]\nsummary=wanlab tune t1") && Contains("[sysctl]\nnet.ipv4.tcp_rmem = "));
    // Nothing beats the baseline: nothing to write.
    f.o.beats_baseline = false;
    f.o.recommended = f.o.baseline;
    CHECK(sysctl_dropin(f.o, f.s).empty());
    auto j = answer_json(f.o, f.s);
    CHECK(j["changes"].empty());
    CHECK(j["recommended"]["probe.bulk.congestion_control"] == "cubic");
    CHECK_THAT(answer_text(f.o, f.s), Contains("no change: no setting in this space beats the baseline"));
}

TEST_CASE("tune's answer as a page: the recommendation, each path, and the search with the chosen one marked",
          "[tune]") {
    Fixture f;
    auto page = answer_page(f.o, f.s);
    CHECK_THAT(page, Contains("<h2>Recommendation</h2>") && Contains("Recommended: sysctl.server.net.ipv4.tcp_rmem"));
    CHECK_THAT(page, Contains("link.up.loss=1%") && Contains("+2800.0%"));
    CHECK_THAT(page, Contains(R"("status":"recommended")"));
    CHECK_THAT(page, Contains("stage 1: as written: worse than bbr on path 2"));
}
