// Validation of sysctl changes against a fake /proc/sys: every message is compared whole.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "sysctl/proc_sys.h"
#include "sysctl/validate.h"
#include "tests/support/fake_proc_sys.h"

using namespace wanlab::sysctl;

namespace {

const std::string kNs = "wanlab-r1-client";

// A host with Debian 12 defaults and one lab namespace.
FakeProcSys debian_host() {
    FakeProcSys p;
    p.namespaces.insert(kNs);
    p.set("", "net.core.rmem_max", "212992");
    p.set("", "net.ipv4.tcp_rmem", "4096\t131072\t6291456");
    p.set(kNs, "net.ipv4.tcp_rmem", "4096\t131072\t6291456");
    p.set("", "net.ipv4.tcp_congestion_control", "cubic");
    p.set(kNs, "net.ipv4.tcp_congestion_control", "cubic");
    p.set("", "net.ipv4.tcp_available_congestion_control", "reno cubic");
    p.set("", "net.ipv4.tcp_allowed_congestion_control", "reno cubic");
    p.set(kNs, "net.ipv4.ip_forward", "0");
    p.set(kNs, "net.ipv4.tcp_ecn", "2");
    p.set(kNs, "net.ipv4.ip_local_port_range", "32768\t60999");
    p.set(kNs, "net.ipv4.tcp_some_new_knob", "1\t2");
    return p;
}

bool nothing_loadable(const std::string&) { return false; }
bool bbr_loadable(const std::string& m) { return m == "tcp_bbr"; }

std::vector<std::string> check(FakeProcSys& p, std::vector<Change> changes,
                               const ModuleProbe& probe = nothing_loadable) {
    return validate(p, changes, probe);
}

}  // namespace

TEST_CASE("valid changes on the host and in a namespace pass validation") {
    auto p = debian_host();
    CHECK(check(p, {{"", "net.core.rmem_max", "67108864", Scope::global},
                    {kNs, "net.ipv4.tcp_rmem", "4096 131072 67108864", Scope::per_namespace},
                    {kNs, "net.ipv4.tcp_congestion_control", "reno", Scope::per_namespace},
                    {kNs, "net.ipv4.ip_local_port_range", "10000 20000", Scope::per_namespace}})
              .empty());
    CHECK(p.writes.empty());
}

TEST_CASE("a global key asked for inside a namespace is refused with the reason") {
    auto p = debian_host();
    CHECK(check(p, {{kNs, "net.core.rmem_max", "1000000", Scope::unknown}}) ==
          std::vector<std::string>{"net.core.rmem_max is global (one value for the whole machine): it is written once "
                                   "on the host, not in namespace wanlab-r1-client"});
}

TEST_CASE("a key the kernel does not have is named with the namespace it was looked up in") {
    auto p = debian_host();
    CHECK(check(p, {{kNs, "net.ipv4.tcp_rmme", "1 2 3", Scope::unknown}}) ==
          std::vector<std::string>{"net.ipv4.tcp_rmme does not exist in namespace wanlab-r1-client (wrong name, or a "
                                   "module that is not loaded?)"});
}

TEST_CASE("before the lab namespaces exist a per-namespace key is looked up on the host") {
    auto p = debian_host();
    CHECK(check(p, {{"wanlab-r1-server", "net.ipv4.tcp_rmem", "4096 131072 8388608", Scope::per_namespace}}).empty());
}

TEST_CASE("triplets must have three ordered values in range") {
    auto p = debian_host();
    CHECK(check(p, {{kNs, "net.ipv4.tcp_rmem", "4096 131072", Scope::per_namespace}}) ==
          std::vector<std::string>{"net.ipv4.tcp_rmem = \"4096 131072\" in namespace wanlab-r1-client: expected three "
                                   "byte counts (min default max), got 2 values"});
    CHECK(check(p, {{kNs, "net.ipv4.tcp_rmem", "8192 4096 65536", Scope::per_namespace}}) ==
          std::vector<std::string>{"net.ipv4.tcp_rmem = \"8192 4096 65536\" in namespace wanlab-r1-client: values must "
                                   "be in ascending order"});
    CHECK(check(p, {{kNs, "net.ipv4.tcp_rmem", "4096 131072 4294967296", Scope::per_namespace}}) ==
          std::vector<std::string>{"net.ipv4.tcp_rmem = \"4096 131072 4294967296\" in namespace wanlab-r1-client: "
                                   "4294967296 is out of range [1, 2147483647]"});
}

TEST_CASE("byte counts and booleans reject words and out-of-range numbers") {
    auto p = debian_host();
    CHECK(check(p, {{"", "net.core.rmem_max", "64M", Scope::global}}) ==
          std::vector<std::string>{"net.core.rmem_max = \"64M\" on the host: `64M` is not a whole number"});
    CHECK(check(p, {{kNs, "net.ipv4.ip_forward", "2", Scope::per_namespace}}) ==
          std::vector<std::string>{
              "net.ipv4.ip_forward = \"2\" in namespace wanlab-r1-client: 2 is out of range [0, 1]"});
}

TEST_CASE("an unknown key must look like its current value") {
    auto p = debian_host();
    CHECK(check(p, {{kNs, "net.ipv4.tcp_some_new_knob", "3 4", Scope::unknown}}).empty());
    CHECK(check(p, {{kNs, "net.ipv4.tcp_some_new_knob", "3", Scope::unknown}}) ==
          std::vector<std::string>{"net.ipv4.tcp_some_new_knob = \"3\" in namespace wanlab-r1-client: expected whole "
                                   "numbers, as many as the current value has, got 1 value"});
}

TEST_CASE("a congestion control that is neither available nor loadable is refused") {
    auto p = debian_host();
    CHECK(check(p, {{"", "net.ipv4.tcp_congestion_control", "vegas", Scope::per_namespace}}) ==
          std::vector<std::string>{"net.ipv4.tcp_congestion_control = \"vegas\" on the host: not available (the kernel "
                                   "has: reno cubic) and no module tcp_vegas is installed"});
}

TEST_CASE("a loadable congestion control is accepted on the host") {
    auto p = debian_host();
    CHECK(check(p, {{"", "net.ipv4.tcp_congestion_control", "bbr", Scope::per_namespace}}, bbr_loadable).empty());
}

TEST_CASE("a namespace may only choose an allowed congestion control") {
    auto p = debian_host();
    CHECK(check(p, {{kNs, "net.ipv4.tcp_congestion_control", "bbr", Scope::per_namespace}}, bbr_loadable) ==
          std::vector<std::string>{
              "net.ipv4.tcp_congestion_control = \"bbr\" in namespace wanlab-r1-client: a namespace may only choose "
              "from net.ipv4.tcp_allowed_congestion_control (reno cubic); the kernel refuses others with EPERM. Add "
              "it on the host first: sysctl -w net.ipv4.tcp_allowed_congestion_control=\"reno cubic bbr\""});
}

TEST_CASE("the same key set twice to different values is reported once") {
    auto p = debian_host();
    CHECK(check(p,
                {{"", "net.core.rmem_max", "1000", Scope::global}, {"", "net.core.rmem_max", "2000", Scope::global}}) ==
          std::vector<std::string>{"net.core.rmem_max is set twice on the host: \"1000\" and \"2000\""});
}

TEST_CASE("validate_or_throw lists every problem and says nothing was changed") {
    auto p = debian_host();
    try {
        validate_or_throw(
            p, {{kNs, "net.core.rmem_max", "1", Scope::global}, {kNs, "net.ipv4.ip_forward", "x", Scope::unknown}},
            nothing_loadable);
        FAIL("no exception");
    } catch (const wanlab::InputError& e) {
        CHECK(std::string(e.what()) ==
              "2 sysctl problems, nothing was changed:\n"
              "  net.core.rmem_max is global (one value for the whole machine): it is written once on the host, not in "
              "namespace wanlab-r1-client\n"
              "  net.ipv4.ip_forward = \"x\" in namespace wanlab-r1-client: `x` is not a whole number");
        CHECK(e.exit_code() == 2);
    }
    CHECK(p.writes.empty());
}

TEST_CASE("sysctl keys map to /proc/sys paths") {
    CHECK(proc_path("net.ipv4.tcp_rmem") == "/proc/sys/net/ipv4/tcp_rmem");
    CHECK(proc_path("net.ipv4.conf.all.forwarding") == "/proc/sys/net/ipv4/conf/all/forwarding");
    CHECK(words("4096\t131072  6291456") == std::vector<std::string>{"4096", "131072", "6291456"});
}
