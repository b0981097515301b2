// The run journal and its replay, in a temporary directory with recording undo functions;
// and the capability check. No root needed.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "core/sys.h"
#include "lab/capabilities.h"
#include "lab/journal.h"
#include "lab/restore.h"
#include "tests/support/fake_proc_sys.h"

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
    u.sysctl = [&log](const std::string& ns, const std::string& k, const std::string& old, const std::string& wrote) {
        log.push_back("sysctl " + ns + " " + k + "=" + old + (wrote.empty() ? "" : " (wrote " + wrote + ")"));
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
        j.record(sysctl_entry("", "net.core.rmem_max", "4096\t8192", "1"));
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
            << R"({"op":"netns","name":"wanlab-r5-a"})"
            << "\n"
            << R"({"op":"qdisc","ns":"wanlab-r5-router","dev":"wl-rs","snapshot":""})"
            << "\n";
    }
    std::vector<std::string> log;
    auto failures = replay(read_journal(dir.path / "r5.journal"), recording(log));
    CHECK(failures ==
          std::vector<std::string>{
              R"(no way to undo journal entry {"dev":"wl-rs","ns":"wanlab-r5-router","op":"qdisc","snapshot":""})"});
    CHECK(log == std::vector<std::string>{"netns wanlab-r5-a"});
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
        j.record(sysctl_entry("", "net.core.rmem_max", "212992", "4096"));
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

TEST_CASE("replay acts on no entry that wanlab could not have written", "[journal][security]") {
    TempDir dir;
    {
        std::ofstream out(dir.path / "r8.journal");
        out << R"({"op":"begin","run":"r8","pid":1,"start_time":1})"
            << "\n";
        for (const char* line : {
                 R"({"op":"netns","name":"../../etc/passwd"})",                         // a path, not a name
                 R"({"op":"netns","name":"wanlab-other-client"})",                      // another run's
                 R"({"op":"link","ns":"","name":"eth0"})",                              // the host's own NIC
                 R"({"op":"link","ns":"wanlab-r8-router","name":"wl-rs\nX"})",          // not a device name
                 R"({"op":"sysctl","ns":"","key":"kernel.core_pattern","old":"|/x"})",  // not net.*
                 R"({"op":"sysctl","ns":"","key":"net.core..rmem_max","old":"1"})",     // not canonical
                 R"({"op":"sysctl","ns":"","key":"net.core.rmem_max","old":"1\n2"})",   // two lines
                 R"({"op":"host","ns":"","dev":"eth0","ifb":"eth1","snapshot":""})",    // not wanlab's ifb
                 R"({"op":"reboot"})",
             })
            out << line << "\n";
        out << R"({"op":"netns","name":"wanlab-r8-client"})"
            << "\n";
    }
    std::vector<std::string> log;
    Undo u = recording(log);
    u.host = [&log](const std::string&, const wanlab::netem::HostUndo& h) { log.push_back("host " + h.dev); };
    auto failures = replay(read_journal(dir.path / "r8.journal"), u);
    CHECK(log == std::vector<std::string>{"netns wanlab-r8-client"});  // the one valid entry
    REQUIRE(failures.size() == 9);
    for (const auto& f : failures) CHECK_THAT(f, Catch::StartsWith("journal entry left alone"));
    CHECK_THAT(failures[0], Catch::Contains("unknown operation \"reboot\""));
    CHECK_THAT(failures[1], Catch::Contains("`ifb` = \"eth1\" is not a device wanlab makes"));
    CHECK_THAT(failures[3], Catch::Contains("`key` is not a canonical net.* sysctl name"));
    CHECK_THAT(failures[5], Catch::Contains("`name` contains U+000A (a line feed)"));
    CHECK_THAT(failures[6], Catch::Contains("`ns` is empty"));  // a device of the host: never
    CHECK_THAT(failures[7], Catch::Contains("`name` = \"wanlab-other-client\" is not one of run r8's namespaces"));
    CHECK_THAT(failures[8], Catch::Contains("`name` = \"../../etc/passwd\" is not one of run r8's namespaces"));
}

TEST_CASE("replay restores a sysctl with what the run wrote last, for the undo to compare", "[journal]") {
    TempDir dir;
    {
        Journal j(dir.path, "r9");
        j.record(sysctl_entry("", "net.core.rmem_max", "212992", "1000"));
        j.record(sysctl_write_entry("", "net.core.rmem_max", "2000"));
        j.keep();
    }
    std::vector<std::string> log;
    CHECK(replay(read_journal(dir.path / "r9.journal"), recording(log)).empty());
    CHECK(log == std::vector<std::string>{"sysctl  net.core.rmem_max=212992 (wrote 2000)"});
}

TEST_CASE("a journal that is a symlink, too large or has no begin entry is not trusted", "[journal][security]") {
    TempDir dir;
    std::ofstream(dir.path / "elsewhere") << R"({"op":"begin","run":"s1","pid":1,"start_time":1})"
                                          << "\n";
    fs::create_symlink(dir.path / "elsewhere", dir.path / "s1.journal");
    std::ofstream(dir.path / "s2.journal") << R"({"op":"netns","name":"wanlab-s2-a"})"
                                           << "\n";
    std::ofstream(dir.path / "s3.journal") << R"({"op":"begin","run":"other","pid":1,"start_time":1})"
                                           << "\n";
    auto js = find_journals(dir.path);
    REQUIRE(js.size() == 3);
    CHECK_THAT(js[0].problem, Catch::Contains("is a symbolic link"));
    CHECK_THAT(js[1].problem, Catch::Contains("has no begin entry"));
    CHECK_THAT(js[2].problem, Catch::Contains("names run \"other\""));
    std::vector<std::string> log;
    for (const auto& j : js) CHECK(replay(j, recording(log)) == std::vector<std::string>{j.problem});
    CHECK(log.empty());
}

TEST_CASE("the journal directory must be a private directory of this user", "[journal][security]") {
    TempDir dir;
    fs::path run = dir.path / "run";
    check_run_dir(run);  // made 0700
    CHECK((fs::status(run).permissions() & fs::perms::all) == fs::perms::owner_all);
    fs::permissions(run, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
    Journal j(run, "p1");  // an older wanlab's 0755 is tightened on use
    CHECK((fs::status(run).permissions() & fs::perms::all) == fs::perms::owner_all);
    fs::create_symlink(run, dir.path / "link");
    CHECK_THROWS_WITH(check_run_dir(dir.path / "link"),
                      Catch::Contains("is a symbolic link, not a directory of wanlab's"));
    CHECK_THROWS_WITH(Journal(dir.path / "link", "p2"), Catch::Contains("is a symbolic link"));
    CHECK_THROWS_WITH(FileLock(dir.path / "link" / "lock", false, "x"), Catch::Contains("is a symbolic link"));
    CHECK_FALSE(fs::exists(run / "p2.journal"));
    CHECK_FALSE(fs::exists(run / "lock"));
    // A lock file planted as a symlink is not followed.
    std::ofstream(dir.path / "target") << "keep";
    fs::create_symlink(dir.path / "target", run / "planted.lock");
    CHECK_THROWS(FileLock(run / "planted.lock", false, "x"));
    if (::geteuid() == 0) {
        fs::path foreign = dir.path / "foreign";
        check_run_dir(foreign);
        REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);
        CHECK_THROWS_WITH(check_run_dir(foreign), Catch::Contains("belongs to uid 65534"));
    }
}

TEST_CASE("restore removes a run's folder under /tmp, never a path elsewhere nor through a symlink",
          "[journal][security]") {
    TempDir dir;
    auto made = wanlab::sys::make_service_dir("wanlab-agent-r1", "a test");
    std::ofstream(made + "/web.stderr") << "what the service said";
    fs::create_directories(dir.path / "keep");
    std::ofstream(dir.path / "keep" / "f") << "x";
    auto planted = wanlab::sys::make_service_dir("wanlab-planted", "a test");
    fs::remove(planted);
    fs::create_directory_symlink(dir.path / "keep", planted);  // named like a run's folder, a symlink
    {
        Journal j(dir.path, "r1");
        j.record(folder_entry(made));
        j.record(folder_entry((dir.path / "keep").string()));
        j.record(folder_entry("/tmp/wanlab-x/../../etc"));
        j.record(folder_entry(planted));
        j.keep();
    }
    auto journals = find_journals(dir.path);
    REQUIRE(journals.size() == 1);
    wanlab::sysctl::FakeProcSys proc;
    std::vector<std::string> said;
    auto failures = replay(journals.front(), machine_undo(proc, [&said](const std::string& s) { said.push_back(s); }));
    CHECK_FALSE(fs::exists(made));
    CHECK(std::find(said.begin(), said.end(), "removed the run's folder " + made) != said.end());
    CHECK(fs::exists(dir.path / "keep" / "f"));  // neither named nor reached through the symlink
    CHECK(fs::is_symlink(planted));
    REQUIRE(failures.size() == 2);
    CHECK_THAT(failures[0], Catch::Contains("is not a folder wanlab makes (/tmp/wanlab-...)"));
    fs::remove(planted);
}
