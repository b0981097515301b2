// Fault injection (root): `wanlab lab up` is killed at several points of a run. After
// SIGKILL, `wanlab restore` must give the machine back exactly (ip -j link, ip netns list,
// tc -j qdisc show, every touched sysctl), and the next run must refuse to start until then;
// after SIGINT or SIGTERM, the run must give everything back by itself.
#include "tests/support/root_helper.h"

using namespace wanlab::root_testing;

namespace {

std::string stage_line(const std::string& stage) { return "wanlab lab up: stage " + stage + " done"; }

}  // namespace

TEST_CASE("after kill -9 at any stage, wanlab restore gives the machine back exactly", "[root]") {
    if (skip_unless_root()) return;
    std::string stage = GENERATE(as<std::string>{}, "journal", "namespaces", "links", "sysctls");
    std::string run = "fk-" + stage.substr(0, 4);
    ExperimentFile file;
    Cleanup cleanup(run);
    auto before = capture();
    {
        Wanlab up({"lab", "up", file.path.string(), "--run", run, "--hold-after", stage});
        INFO(up.seen());
        REQUIRE(up.wait_for_line(stage_line(stage)));
        up.signal(SIGKILL);
        CHECK(up.wait() == 128 + SIGKILL);
    }
    CHECK(std::filesystem::exists("/run/wanlab/" + run + ".journal"));
    if (stage == "sysctls") CHECK(read_sysctl("net.core.rmem_max") == file.rmem_max);

    int status = 0;
    std::string refused =
        sh(fmt::format("{} lab up {} --run {}-2 2>&1", WANLAB_BINARY, file.path.string(), run), &status);
    CHECK(status == 1);
    CHECK_THAT(refused, Catch::Contains("ended without giving the machine back; nothing was changed"));

    std::string restored = sh(fmt::format("{} restore 2>&1", WANLAB_BINARY), &status);
    INFO(restored);
    CHECK(status == 0);
    CHECK(capture() == before);
    CHECK(sh(fmt::format("{} restore 2>&1", WANLAB_BINARY), &status) == "wanlab restore: nothing to restore\n");
    CHECK(status == 0);
}

TEST_CASE("a killed run can be restored by the next run with --restore", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fr1");
    Cleanup cleanup2("fr2");
    auto before = capture();
    {
        Wanlab up({"lab", "up", file.path.string(), "--run", "fr1", "--hold-after", "sysctls"});
        REQUIRE(up.wait_for_line(stage_line("sysctls")));
        up.signal(SIGKILL);
        up.wait();
    }
    {
        Wanlab up({"lab", "up", file.path.string(), "--run", "fr2", "--restore", "--hold-after", "sysctls"});
        INFO(up.seen());
        REQUIRE(up.wait_for_line(stage_line("sysctls")));
        CHECK(up.seen().find("deleted network namespace wanlab-fr1-client") != std::string::npos);
        CHECK_FALSE(std::filesystem::exists("/run/wanlab/fr1.journal"));
        up.signal(SIGTERM);
        CHECK(up.wait() == 130);
    }
    CHECK(capture() == before);
}

TEST_CASE("SIGINT or SIGTERM at any stage unwinds the run and gives everything back without restore", "[root]") {
    if (skip_unless_root()) return;
    int sig = GENERATE(SIGINT, SIGTERM);
    std::string stage = GENERATE(as<std::string>{}, "namespaces", "links", "sysctls", "up");
    std::string run = fmt::format("fs-{}-{}", sig, stage.substr(0, 4));
    ExperimentFile file;
    Cleanup cleanup(run);
    auto before = capture();
    std::vector<std::string> args{"lab", "up", file.path.string(), "--run", run};
    if (stage != "up") args.insert(args.end(), {"--hold-after", stage});
    Wanlab up(args);
    INFO(up.seen());
    REQUIRE(up.wait_for_line(stage == "up" ? stage_line("sysctls") : stage_line(stage)));
    if (stage == "up")
        REQUIRE(up.wait_for_line(fmt::format("  Ctrl-C, or `wanlab lab down {}`, gives everything back.", run)));
    up.signal(sig);
    // Holding after a stage is an interrupted run (130); a lab that is up ends normally (0).
    CHECK(up.wait() == (stage == "up" ? 0 : 130));
    CHECK(capture() == before);
}

TEST_CASE("two runs cannot change the same global sysctl at once", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fl1");
    Cleanup cleanup2("fl2");
    auto before = capture();
    {
        Wanlab first({"lab", "up", file.path.string(), "--run", "fl1"});
        REQUIRE(first.wait_for_line(stage_line("sysctls")));
        int status = 0;
        std::string second = sh(fmt::format("{} lab up {} --run fl2 2>&1", WANLAB_BINARY, file.path.string()), &status);
        CHECK(status == 1);
        CHECK_THAT(second, Catch::Contains("another wanlab run is changing net.core.rmem_max"));
        CHECK(sh("ip netns list").find("wanlab-fl2") == std::string::npos);
        first.signal(SIGTERM);
        CHECK(first.wait() == 0);
    }
    CHECK(capture() == before);
}

TEST_CASE("wanlab lab down stops a running lab from another process", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fd1");
    auto before = capture();
    Wanlab up({"lab", "up", file.path.string(), "--run", "fd1"});
    REQUIRE(up.wait_for_line(stage_line("sysctls")));
    int status = 0;
    CHECK(sh(fmt::format("{} lab down fd1", WANLAB_BINARY), &status) == "wanlab lab down: run fd1 is down\n");
    CHECK(status == 0);
    CHECK(up.wait() == 0);
    CHECK(capture() == before);
}

TEST_CASE("after kill -9 of wanlab probe mid-measurement, wanlab restore removes its bare lab", "[root]") {
    if (skip_unless_root()) return;
    auto before = capture();
    std::string run, a, b;
    {
        Wanlab probe({"probe", "throughput", "--duration", "30s"});
        run = fmt::format("probe-{}", probe.pid());
        a = fmt::format("wanlab-{}-a", run), b = fmt::format("wanlab-{}-b", run);
        // Named for the probe's pid: nobody else's namespaces.
        struct Gone {
            std::string a, b;
            ~Gone() { sh(fmt::format("ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null", a, b)); }
        } gone{a, b};
        REQUIRE(eventually([&] { return sh(fmt::format("ip -n {} link show wlp-b 2>/dev/null", b)).size() > 0; }));
        ::sleep(2);  // the probe is measuring now
        probe.signal(SIGKILL);
        CHECK(probe.wait() == 128 + SIGKILL);
        std::string left = sh("ip netns list");
        CHECK_THAT(left, Catch::Contains(a) && Catch::Contains(b));
        CHECK(std::filesystem::exists("/run/wanlab/" + run + ".journal"));

        int status = 0;
        std::string restored = sh(fmt::format("{} restore 2>&1", WANLAB_BINARY), &status);
        INFO(restored);
        CHECK(status == 0);
        CHECK_THAT(restored, Catch::Contains("deleted network namespace " + a));
        CHECK(sh("ip netns list").find("wanlab-" + run) == std::string::npos);
        CHECK_FALSE(std::filesystem::exists("/run/wanlab/" + run + ".journal"));
    }
    CHECK(capture() == before);
}

TEST_CASE("wanlab probe refuses to build its lab while a killed run's journal is left", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fpj");
    {
        Wanlab up({"lab", "up", file.path.string(), "--run", "fpj", "--hold-after", "journal"});
        REQUIRE(up.wait_for_line(stage_line("journal")));
        up.signal(SIGKILL);
        up.wait();
    }
    int status = 0;
    std::string refused = sh(fmt::format("{} probe rtt --count 1 2>&1", WANLAB_BINARY), &status);
    CHECK(status == 1);
    CHECK_THAT(refused, Catch::Contains("ended without giving the machine back; nothing was changed"));
    CHECK_THAT(refused, !Catch::Contains("rtt ("));  // no measurement: it stopped before its lab
}

TEST_CASE("without root, what changes the machine is refused with exit status 2 and nothing touched", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    auto before = capture();
    // A copy of the binary and the file that an ordinary user can read, run as `nobody`.
    char dir[] = "/tmp/wanlab-noroot-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const std::string d = dir;
    REQUIRE(sh(fmt::format("cp {} {}/wanlab && cp {} {}/x.toml && chmod -R a+rX {} && echo ok", WANLAB_BINARY, d,
                           file.path.string(), d, d)) == "ok\n");
    for (const std::string& cmd : {"run " + d + "/x.toml --no-vm --out " + d + "/out", std::string("probe rtt")}) {
        int status = 0;
        auto said = sh(
            fmt::format("cd {} && setpriv --reuid=nobody --regid=nogroup --clear-groups {}/wanlab {} 2>&1", d, d, cmd),
            &status);
        INFO(cmd << ": " << said);
        CHECK(status == 2);
        CHECK_THAT(said, Catch::Contains("needs CAP_NET_ADMIN and CAP_SYS_ADMIN") &&
                             Catch::Contains("Nothing was changed. Run it as root (sudo)."));
    }
    CHECK(capture() == before);
    std::filesystem::remove_all(d);
}
