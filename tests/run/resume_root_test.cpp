// Sweeps that outlive their session, on the host kernel (a sysctl-only sweep needs no netem):
// a run killed with kill -9 half-way and resumed keeps what it measured and measures only the
// rest, into one run and one report; a run whose terminal goes away (SIGHUP from a
// pseudo-terminal) restores the machine and says how to continue; --detach goes on without
// the terminal. The machine ends as it started each time.
#include "tests/support/root_helper.h"

#include <pty.h>

#include <set>

#include <nlohmann/json.hpp>

using namespace wanlab;
using namespace wanlab::root_testing;

namespace {

// 3 sweep points x 2 variants = 6 trials of about 1.5 s each (10 handshakes 150 ms apart).
constexpr const char* kSweep = R"(name = "resume-root"
[[probe]]
name = "p"
kind = "rtt"
method = "tcp"
count = 10
interval = "150ms"
[sweep]
"probe.p.count" = [10, 11, 12]
[[variant]]
name = "cubic"
[[variant]]
name = "reno"
[variant.sysctl.client]
"net.ipv4.tcp_congestion_control" = "reno"
[[assert]]
probe = "p"
metric = "loss"
at_most = "0%"
[run]
repeats = 1
warmup = "0s"
cooldown = "0s"
)";

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string t = "/tmp/wanlab-resume-XXXXXX";
        path = ::mkdtemp(t.data());
        std::ofstream(path / "sweep.toml") << kSweep;
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string file() const { return (path / "sweep.toml").string(); }
    std::string out() const { return (path / "out").string(); }
    std::string query(const std::string& sql) const {
        auto r = sh(fmt::format("sqlite3 {}/results.db \"{}\" 2>/dev/null", out(), sql));
        while (!r.empty() && r.back() == '\n') r.pop_back();
        return r;
    }
    int done() const {
        auto n = query("select count(*) from trials where status = 'done'");
        return n.empty() ? 0 : std::stoi(n);
    }
};

/// `wanlab run FILE --resume ...` as a shell command with its output.
std::string resume(const TempDir& dir, const std::string& extra, int* status) {
    return sh(fmt::format("{} run {} --out {} --resume {} 2>&1", WANLAB_BINARY, dir.file(), dir.out(), extra), status);
}

}  // namespace

TEST_CASE("a sweep killed half-way resumes with its finished trials kept, into one run, report and judgement",
          "[root]") {
    if (skip_unless_root()) return;
    TempDir dir;
    Cleanup cleanup("rsm1");
    auto before = capture();
    {
        Wanlab run({"run", dir.file(), "--out", dir.out(), "--run", "rsm1", "--quiet", "--no-vm"});
        REQUIRE(eventually([&] { return dir.done() >= 2; }, std::chrono::seconds(60)));
        run.signal(SIGKILL);
        CHECK(run.wait() == 128 + SIGKILL);
    }
    const int kept = dir.done();
    REQUIRE(kept >= 2);
    REQUIRE(kept < 6);
    CHECK(std::filesystem::exists("/run/wanlab/rsm1.journal"));  // what the killed run left
    CHECK(dir.query("select status from runs") == "running");
    const std::string measured =
        "select m.id || ' ' || m.trial || ' ' || m.started from measurements m join trials t "
        "on t.run_id = m.run_id and t.idx = m.trial where t.status = 'done' order by m.id";
    auto first = dir.query(measured);

    int status = -1;
    // Another plan is refused, whatever --force says; another text only without --force.
    auto other_plan = resume(dir, "--set 'sweep.probe.p.count=[10, 11]' --force", &status);
    CHECK(status == 2);
    CHECK_THAT(other_plan, Catch::Contains("does not give the trials run rsm1 planned") &&
                               Catch::Contains("the run planned 6 trials, the file now gives 4"));
    std::ofstream(dir.file(), std::ios::app) << "# edited after the run began\n";
    auto edited = resume(dir, "", &status);
    CHECK(status == 2);
    CHECK_THAT(edited, Catch::Contains("would mix measurements taken under different conditions") &&
                           Catch::Contains("line 24 was the end of the file, is now `# edited after the run began`") &&
                           Catch::Contains("--force"));
    CHECK(dir.query("select status from runs") == "running");  // refusals change nothing
    std::ofstream(dir.file()) << kSweep;

    auto junit = (dir.path / "junit.xml").string();
    auto text = resume(dir, "--junit " + junit, &status);
    INFO(text);
    CHECK(status == 0);
    CHECK(capture() == before);
    CHECK(!std::filesystem::exists("/run/wanlab/rsm1.journal"));
    // Nothing measured twice: the first session's measurements are the same rows, and each
    // trial has its one measurement.
    CHECK(dir.query(measured).starts_with(first));
    CHECK(dir.query("select count(*) || ' ' || count(distinct trial) from measurements") == "6 6");
    CHECK(dir.query("select count(*) from runs") == "1");
    CHECK(dir.query("select status from runs") == "complete");
    CHECK(dir.query("select count(*) from trials where session = 1 and status = 'done'") == std::to_string(kept));
    CHECK(dir.query("select count(*) from trials where session = 2 and status = 'done'") == std::to_string(6 - kept));
    // One report, which says what each session did, and asserts judged on every trial.
    CHECK_THAT(text, Catch::Contains("trials: 6 of 6 done"));
    // Killed on this boot: the record says by whom it was left open.
    CHECK_THAT(text,
               Catch::Contains("(host): killed: its process (pid ") &&
                   Catch::Contains(") ended without closing the record: killed (kill -9, the OOM killer) or crashed"));
    CHECK_THAT(text, Catch::Contains("(host): complete; trial"));
    CHECK_THAT(text, Catch::Contains("Asserts: 6 checks, 6 passed, 0 failed"));
    CHECK_THAT(sh("cat " + junit), Catch::Contains("tests=\"6\""));
    auto j =
        nlohmann::json::parse(sh(fmt::format("{} results show rsm1 --out {} --format json", WANLAB_BINARY, dir.out())));
    REQUIRE(j["run"]["sessions"].size() == 2);
    CHECK(j["run"]["sessions"][0]["status"] == "killed");
    CHECK(j["run"]["sessions"][0]["trials"].size() == static_cast<std::size_t>(kept));
    CHECK(j["run"]["sessions"][1]["trials"].size() == static_cast<std::size_t>(6 - kept));

    auto again = resume(dir, "rsm1", &status);
    CHECK(status == 2);
    CHECK_THAT(again, Catch::Contains("run rsm1") && Catch::Contains("is complete (6 trials done): nothing to resume"));
}

TEST_CASE("a run whose terminal goes away restores the machine, says how to resume, and resumes", "[root]") {
    if (skip_unless_root()) return;
    TempDir dir;
    Cleanup cleanup("rsm2");
    auto before = capture();
    int master = -1;
    pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);  // the child leads a session on the pty
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::execl(WANLAB_BINARY, WANLAB_BINARY, "run", dir.file().c_str(), "--out", dir.out().c_str(), "--run", "rsm2",
                "--no-vm", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // Drain the terminal while the run goes on, as a terminal would.
    std::string seen;
    bool started = eventually(
        [&] {
            char b[4096];
            pollfd p{master, POLLIN, 0};
            while (::poll(&p, 1, 0) > 0) {
                ssize_t n = ::read(master, b, sizeof b);
                if (n <= 0) break;
                seen.append(b, static_cast<std::size_t>(n));
            }
            return dir.done() >= 1;
        },
        std::chrono::seconds(60));
    INFO(seen);
    REQUIRE(started);
    ::close(master);  // the terminal goes away: the kernel sends SIGHUP to the session's leader
    int st = 0;
    REQUIRE(eventually([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, std::chrono::seconds(30)));
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 130);
    CHECK(capture() == before);
    CHECK(!std::filesystem::exists("/run/wanlab/rsm2.journal"));
    CHECK(dir.query("select status from runs") == "interrupted");
    auto error = dir.query("select error from runs");
    CHECK_THAT(error,
               Catch::StartsWith("interrupted by SIGHUP") &&
                   Catch::Contains("continue with: wanlab run " + dir.file() + " --resume rsm2 --out " + dir.out()));
    const int kept = dir.done();
    int status = -1;
    auto text = resume(dir, "--quiet", &status);
    INFO(text);
    CHECK(status == 0);
    CHECK(dir.query("select count(*) from trials where session = 2") == std::to_string(6 - kept));
    CHECK_THAT(text, Catch::Contains("(host): interrupted: interrupted by SIGHUP"));
    CHECK(capture() == before);
}

TEST_CASE("a run given --detach goes on in its own session with its output in the results folder", "[root]") {
    if (skip_unless_root()) return;
    TempDir dir;
    Cleanup cleanup("rsm3");
    auto before = capture();
    int status = -1;
    auto said =
        sh(fmt::format("{} run {} --out {} --run rsm3 --detach 2>&1", WANLAB_BINARY, dir.file(), dir.out()), &status);
    INFO(said);
    CHECK(status == 0);
    auto at = said.find("(pid ");
    REQUIRE(at != std::string::npos);
    pid_t pid = std::stoi(said.substr(at + 5));
    CHECK_THAT(said, Catch::Contains("run rsm3 goes on in the background") &&
                         Catch::Contains("tail -f " + dir.out() + "/wanlab-rsm3.log"));
    // Its own session, so no terminal's hangup reaches it.
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string state, ppid, pgrp, session;
    fields >> state >> ppid >> pgrp >> session;
    CHECK(session == std::to_string(pid));
    REQUIRE(eventually([&] { return !alive(pid); }, std::chrono::seconds(90)));
    CHECK(dir.query("select status from runs") == "complete");
    auto log = sh(fmt::format("cat {}/wanlab-rsm3.log", dir.out()));
    CHECK_THAT(log, Catch::Contains("Asserts: 6 checks, 6 passed, 0 failed"));
    CHECK(capture() == before);
}
