// Host mode against the recording fake: what is built for a target, and what restore undoes.
#include <catch2/catch.hpp>

#include "netem/host.h"
#include "tests/lab/load_helper.h"

using namespace wanlab::netem;

namespace {
wanlab::netem::LinkSpec link_of(const std::string& link) {
    auto l = wanlab::testing::load("[lab]\nmode = \"host\"\ndev = \"eth0\"\ntarget = \"198.18.0.2\"\n[link]\n" + link);
    INFO(l.messages);
    REQUIRE(l.exp);
    return l.exp->trials[0].link;
}
}  // namespace

TEST_CASE("host mode impairs only the target's traffic, both ways, and undoes all of it", "[netem][host]") {
    RecordingKernel k;
    auto link = link_of("delay = \"30ms\"\n[link.down]\ndelay = \"20ms\"\n");
    {
        HostImpairment h(k, "eth0", Filter{"198.18.0.2", 0, false}, 10'000'000'000);
        h.apply(link.up, link.down, 1500, Psched{});
        std::vector<std::string> what;
        for (const auto& r : k.sent) what.push_back(r.what);
        CHECK(what == std::vector<std::string>{
                          "replace htb 1: on eth0",
                          "replace htb class 1:1 on eth0",
                          "replace htb class 1:2 on eth0",
                          "add target filter on eth0",
                          "replace netem 10: on eth0",
                          "restore qdisc ffff:0 (ingress) on eth0",
                          "add ingress redirect filter on eth0",
                          "replace netem 1: on wlifb-eth0",
                      });
        CHECK(k.link_log == std::vector<std::string>{"add ifb wlifb-eth0"});
        CHECK(k.filters[2].size() == 2);
        k.sent.clear();
        // The next trial replaces in place: only the netem qdiscs change.
        auto next = link_of("delay = \"60ms\"\n");
        h.apply(next.up, next.down, 1500, Psched{});
        CHECK(k.sent.size() == 2);
    }
    CHECK(k.sent.back().what == "delete ingress qdisc of eth0");
    CHECK(k.link_log.back() == "delete wlifb-eth0");
    CHECK(k.qdiscs[2].empty());
    CHECK(k.filters[2].empty());
}

TEST_CASE("the ifb name fits the kernel's 15 characters", "[netem][host]") {
    CHECK(ifb_name("eth0") == "wlifb-eth0");
    CHECK(ifb_name("enp0s31f6").size() <= 15);
    CHECK(ifb_name("a-very-long-interface-name").size() <= 15);
    CHECK(ifb_name("a-very-long-interface-name") != ifb_name("a-very-long-interface-nam2"));
}
