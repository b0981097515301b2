// The run journal and its replay, in a temporary directory with recording undo functions;
// and the capability check. No root needed.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <fstream>

#include "lab/capabilities.h"
#include "lab/journal.h"

using namespace wanlab::lab;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "wanlab-journal-XXXXXX").string();
        path = ::mkdtemp(t.data());
    }
    ~TempDir() { fs::remove_all(path); }
};

Undo recording(std::vector<std::string>& log) {
    Undo u;
    u.netns = [&log](const std::string& n) { log.push_back("netns " + n); };
    u.link = [&log](const std::string& ns, const std::string& n) { log.push_back("link " + ns + " " + n); };
    u.sysctl = [&log](const std::string& ns, const std::string& k, const std::string& old) {
        log.push_back("sysctl " + ns + " " + k + "=" + old);
    };
    return u;
}

}  // namespace

TEST_CASE("a journal records entries in order and removes its file when the run ends cleanly") {
    TempDir dir;
    fs::path path;
    {
        Journal j(dir.path, "r1");
        path = j.path();
        j.record(netns_entry("wanlab-r1-client"));
        j.record(sysctl_entry("", "net.core.rmem_max", "4096\t8192"));
        auto back = read_journal(path);
        CHECK(back.run == "r1");
        CHECK(back.pid == ::getpid());
        CHECK(back.live());
        REQUIRE(back.entries.size() == 2);
        CHECK(back.entries[1]["old"] == "4096\t8192");
    }
    CHECK_FALSE(fs::exists(path));
}

TEST_CASE("a run killed but not yet reaped (a zombie) is not live: its journal can be restored", "[journal]") {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    JournalFile j;
    j.pid = child;
    // The start time is readable while the zombie lasts, so only its state tells it is dead.
    for (int i = 0; i < 200 && (j.start_time = process_start_time(child)) == 0; ++i) ::usleep(1000);
    REQUIRE(j.start_time != 0);
    for (int i = 0; i < 2000; ++i) {  // until the child has exited (state Z)
        std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
        std::string line;
        std::getline(stat, line);
        if (line.find(") Z") != std::string::npos) break;
        ::usleep(1000);
    }
    CHECK_FALSE(j.live());
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK_FALSE(j.live());
    j.pid = ::getpid();
    j.start_time = process_start_time(::getpid());
    CHECK(j.live());
}

TEST_CASE("a journal that was asked to keep its file leaves it for wanlab restore") {
    TempDir dir;
    {
        Journal j(dir.path, "r2");
        j.keep();
    }
    CHECK(fs::exists(dir.path / "r2.journal"));
}

TEST_CASE("a second journal for the same run is refused") {
    TempDir dir;
    Journal j(dir.path, "r3");
    CHECK_THROWS_WITH(Journal(dir.path, "r3"), Catch::Contains("creating journal") && Catch::Contains("File exists"));
}

TEST_CASE("replay undoes entries newest first and ignores a torn last line") {
    TempDir dir;
    {
        std::ofstream out(dir.path / "r4.journal");
        out << R"({"op":"begin","run":"r4","pid":1,"start_time":1,"version":1})"
            << "\n"
            << R"({"op":"netns","name":"wanlab-r4-client"})"
            << "\n"
            << R"({"op":"link","ns":"wanlab-r4-router","name":"wl-rc"})"
            << "\n"
            << R"({"op":"sysctl","ns":"","key":"net.core.rmem_max","old":"212992"})"
            << "\n"
            << R"({"op":"sysctl","ns":"","key":"net.core.wm)";
    }
    auto j = read_journal(dir.path / "r4.journal");
    CHECK_FALSE(j.live());
    std::vector<std::string> log;
    CHECK(replay(j, recording(log)).empty());
    CHECK(log == std::vector<std::string>{"sysctl  net.core.rmem_max=212992", "link wanlab-r4-router wl-rc",
                                          "netns wanlab-r4-client"});
}

TEST_CASE("replay reports entries it cannot undo and still undoes the rest") {
    TempDir dir;
    {
        std::ofstream out(dir.path / "r5.journal");
        out << R"({"op":"begin","run":"r5","pid":1,"start_time":1})"
            << "\n"
            << R"({"op":"netns","name":"a"})"
            << "\n"
            << R"({"op":"qdisc","dev":"wl-rs"})"
            << "\n";
    }
    std::vector<std::string> log;
    auto failures = replay(read_journal(dir.path / "r5.journal"), recording(log));
    CHECK(failures == std::vector<std::string>{R"(no way to undo journal entry {"dev":"wl-rs","op":"qdisc"})"});
    CHECK(log == std::vector<std::string>{"netns a"});
}

TEST_CASE("a qdisc entry carries the device's snapshot to the undo function") {
    TempDir dir;
    {
        Journal j(dir.path, "r6");
        j.record(link_entry("wanlab-r6-router", "wl-rs"));
        j.record(qdisc_entry("wanlab-r6-router", "wl-rs", "device wl-rs\nqdisc 2400\n"));
        j.keep();
    }
    std::vector<std::string> log;
    Undo u = recording(log);
    u.qdisc = [&log](const std::string& ns, const std::string& dev, const std::string& snapshot) {
        log.push_back("qdisc " + ns + " " + dev + " " + snapshot);
    };
    CHECK(replay(read_journal(dir.path / "r6.journal"), u).empty());
    CHECK(log == std::vector<std::string>{"qdisc wanlab-r6-router wl-rs device wl-rs\nqdisc 2400\n",
                                          "link wanlab-r6-router wl-rs"});
}

TEST_CASE("a host entry carries everything undoing host mode takes", "[journal][host]") {
    TempDir dir;
    wanlab::netem::HostUndo plan;
    plan.dev = "eth0";
    plan.root_snapshot = "device eth0\nqdisc 2400\n";
    plan.ifb = "wlifb-eth0";
    plan.ingress_created = false;
    plan.filter_parent = 0xffff0000;
    plan.filter_prio = 3;
    plan.v6 = true;
    {
        Journal j(dir.path, "r7");
        j.record(sysctl_entry("", "net.core.rmem_max", "212992"));
        j.record(host_entry("", plan));
        j.keep();
    }
    std::vector<std::string> log;
    Undo u = recording(log);
    wanlab::netem::HostUndo got;
    u.host = [&](const std::string& ns, const wanlab::netem::HostUndo& h) {
        log.push_back("host [" + ns + "] " + h.dev);
        got = h;
    };
    CHECK(replay(read_journal(dir.path / "r7.journal"), u).empty());
    REQUIRE(log.size() == 2);
    CHECK(log[0] == "host [] eth0");  // newest first: the interface before the sysctl
    CHECK(got.root_snapshot == plan.root_snapshot);
    CHECK(got.ifb == "wlifb-eth0");
    CHECK(!got.ingress_created);
    CHECK(got.filter_parent == 0xffff0000u);
    CHECK(got.filter_prio == 3);
    CHECK(got.v6);
    // An entry without a device cannot be undone: said, not ignored.
    auto bad = host_entry("", plan);
    bad.erase("dev");
    CHECK_THROWS_WITH(host_undo_of(bad), Catch::Contains("without a device"));
}

TEST_CASE("find_journals lists only journal files") {
    TempDir dir;
    std::ofstream(dir.path / "lock");
    std::ofstream(dir.path / "b.journal") << R"({"op":"begin","run":"b","pid":1,"start_time":1})"
                                          << "\n";
    std::ofstream(dir.path / "a.journal") << R"({"op":"begin","run":"a","pid":1,"start_time":1})"
                                          << "\n";
    auto js = find_journals(dir.path);
    REQUIRE(js.size() == 2);
    CHECK(js[0].run == "a");
    CHECK(js[1].run == "b");
}

TEST_CASE("a second holder of a lock is refused with the name of what is locked") {
    TempDir dir;
    FileLock first(dir.path / "sysctl-net.core.rmem_max.lock", false, "net.core.rmem_max");
    CHECK_THROWS_WITH(FileLock(dir.path / "sysctl-net.core.rmem_max.lock", false, "net.core.rmem_max"),
                      Catch::StartsWith("another wanlab run is changing net.core.rmem_max"));
}

TEST_CASE("missing capabilities are named one by one") {
    CHECK(missing_capabilities(0) == std::vector<std::string>{"CAP_NET_ADMIN", "CAP_SYS_ADMIN"});
    CHECK(missing_capabilities(1ULL << 12) == std::vector<std::string>{"CAP_SYS_ADMIN"});
    CHECK(missing_capabilities(1ULL << 21) == std::vector<std::string>{"CAP_NET_ADMIN"});
    CHECK(missing_capabilities((1ULL << 12) | (1ULL << 21)).empty());
}
