// `wanlab shell` on the real machine (root), through the binary: a command runs in the trial's
// client namespace with the trial's sysctls, its exit status is wanlab's, a signal to wanlab
// ends the command's whole process group, and the machine is given back exactly.
#include "tests/support/root_helper.h"

using namespace wanlab::root_testing;

TEST_CASE("wanlab shell runs a command in the trial's client namespace and gives everything back", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("sh-cmd");
    auto before = capture();
    int status = 0;
    std::string out =
        sh(fmt::format("{} shell {} --run sh-cmd -- sh -c 'cat /proc/sys/net/ipv4/tcp_congestion_control; "
                       "ip -br -4 addr; echo server=$WANLAB_SERVER ns=$WANLAB_CLIENT_NS; "
                       "ping -c 1 -W 2 $WANLAB_SERVER >/dev/null && echo reached; exit 7' 2>/dev/null",
                       WANLAB_BINARY, file.path.string()),
           &status);
    INFO(out);
    CHECK(status == 7);                            // the command's own
    CHECK_THAT(out, Catch::StartsWith("reno\n"));  // the trial's [sysctl.client], in the client namespace
    CHECK_THAT(out, Catch::Contains("wl-c@") && Catch::Contains("198.18.0."));
    CHECK_THAT(out, Catch::Contains("server=198.18.0.") && Catch::Contains(" ns=wanlab-sh-cmd-client"));
    CHECK_THAT(out, Catch::Contains("reached"));  // across the router to the server
    CHECK(capture() == before);
}

TEST_CASE("a signal to wanlab shell ends the command's process group and brings the lab down", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    Cleanup cleanup("sh-sig");
    auto before = capture();
    {
        Wanlab shell(
            {"shell", file.path.string(), "--run", "sh-sig", "--", "sh", "-c", "sleep 61.25 & echo ready; wait"});
        INFO(shell.seen());
        REQUIRE(shell.wait_for_line("ready"));
        CHECK_FALSE(sh("pgrep -f '^sleep 61.25$'").empty());
        shell.signal(SIGTERM);
        CHECK(shell.wait() == 128 + SIGHUP);  // the shell left on the SIGHUP passed on first
    }
    CHECK(sh("pgrep -f '^sleep 61.25$'").empty());  // nothing of the command is left running
    CHECK(capture() == before);
}

TEST_CASE("wanlab shell refuses an unknown trial and a missing command before changing anything", "[root]") {
    if (skip_unless_root()) return;
    ExperimentFile file;
    auto before = capture();
    int status = 0;
    std::string out = sh(fmt::format("{} shell {} --trial 9 -- true 2>&1", WANLAB_BINARY, file.path.string()), &status);
    CHECK(status == 2);
    CHECK_THAT(out, Catch::Contains("--trial 9: the experiment has trials 1 to 1"));
    out = sh(fmt::format("{} shell {} -- wanlab-no-such-command 2>&1", WANLAB_BINARY, file.path.string()), &status);
    CHECK(status == 2);
    CHECK_THAT(out, Catch::Contains("wanlab-no-such-command: command not found"));
    CHECK(capture() == before);
}
