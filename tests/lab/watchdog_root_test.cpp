// The --auto-restore watchdog (root): armed before the change it guards, it runs the wanlab
// image that armed it even after the binary file is replaced, and stands down when the
// change failed and was undone.
#include "tests/support/root_helper.h"

#include <sys/stat.h>
#include <regex>

using namespace wanlab::root_testing;

namespace {

std::string stage_line(const std::string& stage) { return "wanlab lab up: stage " + stage + " done"; }

/// A copy of the wanlab binary in a fresh temporary directory, removed with it.
struct BinaryCopy {
    std::filesystem::path dir, path;
    BinaryCopy() {
        char t[] = "/tmp/wanlab-copy-XXXXXX";
        REQUIRE(::mkdtemp(t));
        dir = t;
        path = dir / "wanlab";
        std::filesystem::copy_file(WANLAB_BINARY, path);
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    }
    /// A new file under the same path (the old image lives on in whoever runs it): a
    /// "wanlab" that restores nothing, as a half-finished rebuild might leave.
    void replace() const {
        auto next = dir / "next";
        std::ofstream(next) << "#!/bin/sh\nexit 0\n";
        std::filesystem::permissions(next, std::filesystem::perms::owner_all);
        std::filesystem::rename(next, path);
    }
    ~BinaryCopy() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

/// A namespace of the test's own with a veth pair d0 - d1 in it (no dummy module needed),
/// deleted on destruction.
struct DeviceNamespace {
    std::string ns = fmt::format("wlt-wd-{}", ::getpid());
    DeviceNamespace() {
        int status = 0;
        sh(fmt::format("ip netns add {0} && ip -n {0} link add d0 type veth peer name d1 && "
                       "ip -n {0} link set d0 up && ip -n {0} link set d1 up",
                       ns),
           &status);
        REQUIRE(status == 0);
    }
    ~DeviceNamespace() {
        sh(fmt::format("ip netns del {} 2>/dev/null", ns));
        std::error_code ec;
        std::filesystem::remove(fmt::format("/run/wanlab/link/{}--d0.snapshot", ns), ec);
        std::filesystem::remove(fmt::format("/run/wanlab/dev-{}--d0.lock", ns), ec);
    }
};

}  // namespace

TEST_CASE("a watchdog restores a killed lab with the image it was armed by after the binary is replaced", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fwx");
    auto before = capture();
    BinaryCopy copy;
    {
        Wanlab up({"lab", "up", file.path.string(), "--run", "fwx", "--auto-restore", "600"}, copy.path.string());
        INFO(up.seen());
        REQUIRE(up.wait_for_line(stage_line("sysctls")));
        copy.replace();
        up.signal(SIGKILL);
        CHECK(up.wait() == 128 + SIGKILL);
    }
    CHECK(eventually([] { return !std::filesystem::exists("/run/wanlab/fwx.journal"); }));
    std::ifstream log("/run/wanlab/fwx.watchdog.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    INFO(text);
    CHECK_THAT(text, Catch::Contains("the machine is back as it was"));
    CHECK(capture() == before);
    std::filesystem::remove("/run/wanlab/fwx.watchdog.log");
}

TEST_CASE("lab up arms its watchdog before the first namespace, and it stands down when the lab comes down", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fwa");
    auto before = capture();
    Wanlab up({"lab", "up", file.path.string(), "--run", "fwa", "--auto-restore", "600"});
    INFO(up.seen());
    REQUIRE(up.wait_for_line(stage_line("namespaces")));
    auto armed = up.seen().find("auto-restore by watchdog pid");
    REQUIRE(armed != std::string::npos);
    CHECK(armed < up.seen().find(stage_line("namespaces")));
    std::smatch m;
    REQUIRE(std::regex_search(up.seen(), m, std::regex("watchdog pid ([0-9]+)")));
    pid_t watchdog = std::stoi(m[1]);
    REQUIRE(up.wait_for_line("  Ctrl-C, or `wanlab lab down fwa`, gives everything back."));
    up.signal(SIGTERM);
    CHECK(up.wait() == 0);
    // The lab came down, so wanlab ended it before exiting, and its log (nothing in it) went.
    CHECK_FALSE(alive(watchdog));
    CHECK_FALSE(std::filesystem::exists("/run/wanlab/fwa.watchdog.log"));
    CHECK(capture() == before);
}

TEST_CASE("run --auto-restore ends its watchdog as the run returns: no process and no log outlive it", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("fwr");
    auto before = capture();
    char t[] = "/tmp/wanlab-wdrun-XXXXXX";
    REQUIRE(::mkdtemp(t));
    std::filesystem::path out = t;
    int status = -1;
    auto said = sh(fmt::format("{} run {} --run fwr --out {} --auto-restore 600 --set probe.p.count=2 2>&1",
                               WANLAB_BINARY, file.path.string(), out.string()),
                   &status);
    INFO(said);
    CHECK(status == 0);
    std::smatch m;
    REQUIRE(std::regex_search(said, m, std::regex("auto-restore by watchdog pid ([0-9]+)")));
    CHECK_FALSE(alive(std::stoi(m[1])));
    CHECK_FALSE(std::filesystem::exists("/run/wanlab/fwr.watchdog.log"));
    CHECK(capture() == before);
    std::filesystem::remove_all(out);
}

TEST_CASE("link apply arms its auto-restore before the change, and a failed change leaves nothing behind", "[root]") {
    if (skip_unless_root()) return;
    DeviceNamespace space;
    int status = 0;
    std::string out =
        sh(fmt::format("{} link apply --netns {} --dev d0 --delay 20ms --auto-restore 2 2>&1", WANLAB_BINARY, space.ns),
           &status);
    INFO(out);
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("auto-restore in 2 s by watchdog pid ([0-9]+)")));
    pid_t watchdog = std::stoi(m[1]);
    auto netem_on = [&] {
        return sh(fmt::format("tc -n {} qdisc show dev d0", space.ns)).find("netem") != std::string::npos;
    };
    if (status == 0) {
        // A kernel with netem: the change held, and the watchdog undoes it at its deadline.
        CHECK(netem_on());
        CHECK(eventually([&] { return !netem_on(); }, std::chrono::seconds(15)));
    } else {
        // This kernel refused the change (no sch_netem): it was undone and the watchdog, armed
        // before it, was stood down rather than left to "restore" later.
        CHECK_THAT(out, Catch::Contains(fmt::format("watchdog pid {} stood down", watchdog)));
        CHECK(out.find("auto-restore in 2 s") < out.find("stood down"));
        CHECK_FALSE(alive(watchdog));
        CHECK_FALSE(netem_on());
        CHECK_FALSE(std::filesystem::exists(fmt::format("/run/wanlab/link/{}--d0.snapshot", space.ns)));
    }
    CHECK(eventually([watchdog] { return !alive(watchdog); }, std::chrono::seconds(15)));
}
