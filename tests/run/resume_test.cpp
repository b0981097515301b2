// run/resume.h: which differences stop a recorded run from being continued, which --force
// lets through, and what a run from before sessions were kept looks like.
#include <catch2/catch.hpp>

#include "run/record.h"
#include "run/resume.h"
#include "run/runner.h"
#include "tests/support/load_helper.h"

using namespace wanlab;

namespace {

constexpr const char* kFile = R"([[probe]]
kind = "rtt"
[sweep]
"link.delay" = ["10ms", "20ms"]
[[variant]]
name = "a"
[[variant]]
name = "b"
)";

experiment::Experiment loaded_experiment(const std::string& text, const std::vector<std::string>& sets = {}) {
    auto l = testing::load(text, sets);
    INFO(l.messages);
    REQUIRE(l.exp);
    return *l.exp;
}

/// The run as `wanlab run` recorded it: every trial of `text`, on kernel 6.1.0 on host lab-1.
results::RunData recorded(const std::string& text) {
    results::RunData d;
    d.run.id = "r1";
    d.run.text = text;
    d.run.status = results::RunStatus::interrupted;
    d.run.env.hostname = "lab-1";
    d.run.env.kernel = "6.1.0";
    d.run.env.where = "host";
    for (const auto& t : loaded_experiment(text).trials) d.trials.push_back(run::trial_record(t));
    return d;
}

results::Environment machine(const std::string& kernel = "6.1.0", const std::string& host = "lab-1") {
    results::Environment e;
    e.hostname = host;
    e.kernel = kernel;
    e.where = "host";
    return e;
}

}  // namespace

TEST_CASE("the file that started a run resumes it on the same machine with nothing to force", "[resume]") {
    auto d = recorded(kFile);
    auto p = run::resume_problems(d, loaded_experiment(kFile), kFile, {}, "", machine());
    CHECK(p.refused.empty());
    CHECK(p.forceable.empty());
}

TEST_CASE("a file that gives other trials is refused with each difference", "[resume]") {
    auto d = recorded(kFile);
    std::string fewer = kFile;
    fewer.replace(fewer.find(", \"20ms\""), 8, "");
    auto p = run::resume_problems(d, loaded_experiment(fewer), fewer, {}, "", machine());
    REQUIRE(!p.refused.empty());
    CHECK(p.refused.front() == "the run planned 4 trials, the file now gives 2");
    // The same number of trials, other configurations: each moved trial is named.
    std::string other = kFile;
    other.replace(other.find("\"20ms\""), 6, "\"30ms\"");
    p = run::resume_problems(d, loaded_experiment(other), other, {}, "", machine());
    REQUIRE(p.refused.size() == 2);
    CHECK_THAT(p.refused[0], Catch::StartsWith("trial 3: the run measured ") && Catch::Contains("link.delay=20ms") &&
                                 Catch::Contains("the file now gives") && Catch::Contains("link.delay=30ms"));
}

TEST_CASE("another text, --set, kernel or machine is forceable, and named", "[resume]") {
    auto d = recorded(kFile);
    std::string edited = std::string(kFile) + "[run]\nduration = \"3s\"\n";
    auto p = run::resume_problems(d, loaded_experiment(edited, {"run.repeats=2"}), edited, {"run.repeats=2"}, "",
                                  machine("6.1.0-28", "lab-2"));
    CHECK(p.refused.empty());
    REQUIRE(p.forceable.size() == 4);
    CHECK_THAT(p.forceable[0], Catch::Contains("kernel 6.1.0 then, 6.1.0-28 now"));
    CHECK_THAT(p.forceable[1], Catch::Contains("machine lab-1 then, lab-2 now"));
    CHECK_THAT(p.forceable[2],
               Catch::Contains("the file's text changed: line 9 was the end of the file, is now `[run]`"));
    CHECK_THAT(p.forceable[3], Catch::Contains("the run had --set none, this one run.repeats=2"));
}

TEST_CASE("a run recorded before sessions were kept reads as one session of its own", "[resume]") {
    results::Run r;
    r.started = "s";
    r.finished = "f";
    r.status = results::RunStatus::failed;
    r.error = "e";
    r.env.kernel = "k";
    auto s = run::sessions_of(r);
    REQUIRE(s.size() == 1);
    CHECK(s[0].started == "s");
    CHECK(s[0].status == results::RunStatus::failed);
    CHECK(s[0].kernel == "k");
    r.sessions = {s[0], s[0]};
    CHECK(run::sessions_of(r).size() == 2);
}
