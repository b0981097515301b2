// SysctlSnapshot against a fake /proc/sys: exact old values back, newest first, once.
#include <catch2/catch.hpp>

#include <cerrno>

#include "core/error.h"
#include "sysctl/proc_sys.h"
#include "sysctl/snapshot.h"
#include "tests/support/fake_proc_sys.h"

using namespace wanlab::sysctl;
using Write = FakeProcSys::Write;

namespace {

FakeProcSys host() {
    FakeProcSys p;
    p.namespaces.insert("ns1");
    p.set("", "net.core.rmem_max", "212992");
    p.set("ns1", "net.ipv4.tcp_rmem", "4096\t131072\t6291456");
    return p;
}

}  // namespace

TEST_CASE("a snapshot writes back the exact text each key held, newest first") {
    auto p = host();
    {
        SysctlSnapshot s(p);
        s.set("", "net.core.rmem_max", "67108864");
        s.set("ns1", "net.ipv4.tcp_rmem", "4096 131072 67108864");
        s.set("", "net.core.rmem_max", "33554432");  // second change: the first old value is kept
        REQUIRE(s.saved().size() == 2);
    }
    CHECK(p.writes == std::vector<Write>{{"", "net.core.rmem_max", "67108864"},
                                         {"ns1", "net.ipv4.tcp_rmem", "4096 131072 67108864"},
                                         {"", "net.core.rmem_max", "33554432"},
                                         {"ns1", "net.ipv4.tcp_rmem", "4096\t131072\t6291456"},
                                         {"", "net.core.rmem_max", "212992"}});
    CHECK(p.read("", "net.core.rmem_max") == "212992");
    CHECK(p.read("ns1", "net.ipv4.tcp_rmem") == "4096\t131072\t6291456");
}

TEST_CASE("the before-change hook sees the old value before the write happens") {
    auto p = host();
    std::vector<std::string> journal;
    SysctlSnapshot s(
        p, [&](const std::string& ns, const std::string& key, const std::string* old, const std::string& value) {
            journal.push_back(ns + "|" + key + "|" + (old ? *old : "-") + "|" + value + "|now=" + *p.read(ns, key));
        });
    s.set("", "net.core.rmem_max", "1000");
    s.set("", "net.core.rmem_max", "2000");
    CHECK(journal ==
          std::vector<std::string>{"|net.core.rmem_max|212992|1000|now=212992", "|net.core.rmem_max|-|2000|now=1000"});
}

TEST_CASE("a hook that throws stops the change before anything is written") {
    auto p = host();
    SysctlSnapshot s(p, [](const std::string&, const std::string&, const std::string*, const std::string&) {
        throw wanlab::Error("journal full");
    });
    CHECK_THROWS_WITH(s.set("", "net.core.rmem_max", "1000"), "journal full");
    CHECK(p.writes.empty());
    CHECK(s.saved().empty());
}

TEST_CASE("explicit restore empties the snapshot so the destructor writes nothing more") {
    auto p = host();
    {
        SysctlSnapshot s(p);
        s.set("", "net.core.rmem_max", "1000");
        s.restore();
        CHECK(s.saved().empty());
    }
    CHECK(p.writes.size() == 2);
}

TEST_CASE("keys in a namespace that is gone are skipped on restore") {
    auto p = host();
    {
        SysctlSnapshot s(p);
        s.set("ns1", "net.ipv4.tcp_rmem", "1 2 3");
        p.namespaces.erase("ns1");
    }
    CHECK(p.writes.size() == 1);
}

TEST_CASE("a refused restore is reported, the other keys are still restored, and the destructor does not throw") {
    auto p = host();
    bool failed = false;
    {
        SysctlSnapshot s(p, {}, [&] { failed = true; });
        s.set("", "net.core.rmem_max", "1000");
        s.set("ns1", "net.ipv4.tcp_rmem", "1 2 3");
        p.refuse[{"ns1", "net.ipv4.tcp_rmem"}] = EPERM;
    }
    CHECK(failed);
    CHECK(p.read("", "net.core.rmem_max") == "212992");
}

TEST_CASE("restore throws one error naming every key it could not write back") {
    auto p = host();
    SysctlSnapshot s(p);
    s.set("", "net.core.rmem_max", "1000");
    p.refuse[{"", "net.core.rmem_max"}] = EACCES;
    CHECK_THROWS_WITH(s.restore(),
                      "restoring sysctls failed:\n  setting net.core.rmem_max = \"212992\" on the host: "
                      "Permission denied");
}

TEST_CASE("a key that does not exist cannot be set and leaves nothing to restore") {
    auto p = host();
    SysctlSnapshot s(p);
    CHECK_THROWS_WITH(s.set("", "net.core.nope", "1"), "setting net.core.nope on the host: no such key");
    CHECK(s.saved().empty());
}

TEST_CASE("a value someone else set during the run is theirs: restore leaves it and says so", "[security]") {
    auto p = host();
    SysctlSnapshot s(p);
    s.set("", "net.core.rmem_max", "1000");
    s.set("ns1", "net.ipv4.tcp_rmem", "4096 131072 67108864");
    p.set("", "net.core.rmem_max", "5555");  // another tool, mid-run
    auto notes = s.restore();
    CHECK(notes == std::vector<std::string>{"net.core.rmem_max on the host was changed during the run (now \"5555\", "
                                            "wanlab wrote \"1000\"): left as it is, not restored to \"212992\""});
    CHECK(p.read("", "net.core.rmem_max") == "5555");
    // Still wanlab's, read back with the kernel's tabs: restored.
    CHECK(p.read("ns1", "net.ipv4.tcp_rmem") == "4096\t131072\t6291456");
}

TEST_CASE("values compare as the kernel prints them") {
    CHECK(same_value("4096 131072 6291456", "4096\t131072\t6291456"));
    CHECK(same_value("bbr", "bbr"));
    CHECK_FALSE(same_value("4096 131072", "4096 131072 6291456"));
    CHECK_FALSE(same_value("1", "10"));
}
