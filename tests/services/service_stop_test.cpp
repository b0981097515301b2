// A running Service's end, without root (in wanlab's own namespace): one that died during
// its trial is stopped at once, not after stop_timeout of SIGTERM to a group it no longer
// leads, and what it left running in its group is stopped with it.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "services/service.h"
#include "tests/support/temp_folder.h"

using namespace wanlab;
using Catch::Matchers::Contains;

namespace {

struct Folder : testing::TempFolder {
    Folder() : TempFolder("wanlab-svcstop") {}
};

/// Calls check_running until it throws (the service exited), at most 10 s.
std::string death_of(services::Service& s) {
    for (int i = 0; i < 1000; ++i) {
        try {
            s.check_running();
        } catch (const services::ServiceFailure& e) {
            return e.what();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "";
}

pid_t read_pid(const std::filesystem::path& p) {
    for (int i = 0; i < 500; ++i) {
        std::ifstream in(p);
        pid_t pid = 0;
        if (in >> pid && pid > 0) return pid;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
}

/// No such process, or only its zombie (reparented, its reaper not yet come by).
bool gone(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

TEST_CASE("a service that died during its trial is stopped as it ended, with what it left in its group", "[services]") {
    Folder f;
    services::ServiceSpec spec;
    spec.name = "leaver";
    // Leaves a child in its process group (as a daemonizing server does) and exits 3.
    spec.command = {"sh", "-c", "sleep 60 & echo $! > {dir}/child; exit 3"};
    spec.stop_timeout = std::chrono::seconds(30);
    pid_t group = -1;
    services::Service s(spec, services::Placement{}, {{"dir", f.dir.string()}}, f.dir, [&](pid_t g) { group = g; });
    auto died = death_of(s);
    CHECK_THAT(died, Contains("service `leaver` exited with status 3 while its trial ran"));
    pid_t child = read_pid(f.dir / "child");
    REQUIRE(child > 0);
    CHECK(::getpgid(child) == group);
    // The leader was reaped by check_running: stop() must still see the group's leftover and
    // end it with SIGTERM, and report the leader's own end, not a SIGKILL after 30 s.
    auto how = s.stop();
    CHECK(how == "exited with status 3");
    CHECK(gone(child));
}
