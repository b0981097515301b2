// The trust boundaries of docs/security.md on the real machine (root), through the binary:
// a value someone else changed during a run, a planted symlink for /run/wanlab, journals
// wanlab did not write.
#include "tests/support/root_helper.h"

#include <sys/stat.h>
#include <algorithm>

using namespace wanlab::root_testing;

namespace {
std::string stage_line(const std::string& stage) { return "wanlab lab up: stage " + stage + " done"; }

void write_sysctl(const std::string& key, const std::string& value) {
    std::string path = "/proc/sys/" + key;
    std::replace(path.begin() + 10, path.end(), '.', '/');
    std::ofstream(path) << value;
}

// /run/wanlab moved aside for the test's life, and put back.
struct RunDirAside {
    std::filesystem::path real = "/run/wanlab", saved = "/run/wanlab.trust-test";
    bool moved = false;
    RunDirAside() {
        std::error_code ec;
        if (std::filesystem::exists(std::filesystem::symlink_status(real, ec))) {
            std::filesystem::rename(real, saved);
            moved = true;
        }
    }
    ~RunDirAside() {
        std::error_code ec;
        std::filesystem::remove_all(real, ec);  // the planted symlink (not followed) or the test's directory
        if (moved) std::filesystem::rename(saved, real, ec);
    }
};
}  // namespace

TEST_CASE("a sysctl someone else changed during a run keeps their value, at the end and after a kill", "[root]") {
    if (skip_unless_root()) return;
    bool killed = GENERATE(false, true);
    INFO((killed ? "kill -9, then wanlab restore" : "the run's own restore"));
    std::string run = killed ? "tr-kill" : "tr-end";
    ExperimentFile file;
    Cleanup cleanup(run);
    std::string rmem_before = read_sysctl("net.core.rmem_max");
    std::string theirs = std::to_string(std::stoll(file.wmem_max) + 4096);
    {
        Wanlab up({"lab", "up", file.path.string(), "--run", run, "--hold-after", "sysctls"});
        REQUIRE(up.wait_for_line(stage_line("sysctls")));
        REQUIRE(read_sysctl("net.core.wmem_max") == file.wmem_max);
        write_sysctl("net.core.wmem_max", theirs);  // another tool, mid-run
        up.signal(killed ? SIGKILL : SIGTERM);
        CHECK(up.wait() == (killed ? 128 + SIGKILL : 130));  // interrupted while holding: 130
    }
    if (killed) {
        int status = 0;
        std::string out = sh(fmt::format("{} restore {} 2>&1", WANLAB_BINARY, run), &status);
        INFO(out);
        CHECK(status == 0);
        CHECK_THAT(out, Catch::Contains("left alone: net.core.wmem_max on the host was changed during the run (now \"" +
                                        theirs + "\", wanlab wrote \"" + file.wmem_max + "\")"));
    }
    CHECK(read_sysctl("net.core.wmem_max") == theirs);       // theirs, not reverted
    CHECK(read_sysctl("net.core.rmem_max") == rmem_before);  // still wanlab's: restored
    CHECK(sh("ip netns list").find("wanlab-" + run) == std::string::npos);
}

TEST_CASE("/run/wanlab planted as a symlink is refused before anything changes", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("tr-sym");
    RunDirAside aside;
    char t[] = "/tmp/wanlab-planted-XXXXXX";
    std::filesystem::path planted = ::mkdtemp(t);
    std::filesystem::create_symlink(planted, "/run/wanlab");
    auto before = capture();
    int status = 0;
    std::string out = sh(fmt::format("{} lab up {} --run tr-sym 2>&1", WANLAB_BINARY, file.path.string()), &status);
    INFO(out);
    CHECK(status == 1);
    CHECK_THAT(out, Catch::Contains("/run/wanlab is a symbolic link, not a directory of wanlab's"));
    CHECK(capture() == before);
    CHECK(std::filesystem::is_empty(planted));  // nothing written through the link
    std::filesystem::remove_all(planted);
}

TEST_CASE("a journal wanlab did not write is not acted on, and an unreadable one can be forgotten", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("tr-fj");
    RunDirAside aside;
    std::filesystem::create_directory("/run/wanlab");
    ::chmod("/run/wanlab", 0700);
    // Someone else's namespace, which a forged entry names.
    sh("ip netns add wanlab-victim-x");
    std::ofstream("/run/wanlab/tr-fj.journal")
        << R"({"op":"begin","run":"tr-fj","pid":1,"start_time":1})"
        << "\n"
        << R"({"op":"netns","name":"wanlab-victim-x"})"
        << "\n"
        << R"({"op":"sysctl","ns":"","key":"kernel.core_pattern","old":"|/tmp/x"})"
        << "\n";
    int status = 0;
    std::string out = sh(fmt::format("{} restore tr-fj 2>&1", WANLAB_BINARY), &status);
    INFO(out);
    CHECK(status == 1);
    CHECK_THAT(out, Catch::Contains("journal entry left alone") &&
                        Catch::Contains("is not one of run tr-fj's namespaces") &&
                        Catch::Contains("`key` is not a canonical net.* sysctl name"));
    CHECK(sh("ip netns list").find("wanlab-victim-x") != std::string::npos);
    CHECK(read_sysctl("kernel.core_pattern") != "|/tmp/x");
    std::filesystem::remove("/run/wanlab/tr-fj.journal");

    // A journal that is a symlink is never read; every run says how to get past it.
    std::filesystem::create_symlink("/etc/hostname", "/run/wanlab/tr-ln.journal");
    out = sh(fmt::format("{} lab up {} --run tr-fj 2>&1", WANLAB_BINARY, file.path.string()), &status);
    CHECK(status == 1);
    CHECK_THAT(out, Catch::Contains("is a symbolic link") && Catch::Contains("wanlab restore --forget tr-ln"));
    out = sh(fmt::format("{} restore --forget tr-ln 2>&1", WANLAB_BINARY), &status);
    CHECK(status == 0);
    CHECK_THAT(out, Catch::Contains("forgot run tr-ln"));
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status("/run/wanlab/tr-ln.journal")));
    CHECK(std::filesystem::exists("/etc/hostname"));
    sh("ip netns del wanlab-victim-x");
}
