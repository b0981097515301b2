// Host mode against the recording fake: what is built for a target, and what restore undoes.
#include <catch2/catch.hpp>

#include "netem/host.h"
#include "tests/support/load_helper.h"
#include "tests/support/recording_kernel.h"

using namespace wanlab::netem;

namespace {
wanlab::netem::LinkSpec link_of(const std::string& link) {
    auto l = wanlab::testing::load("[lab]\nmode = \"host\"\ndev = \"eth0\"\ntarget = \"198.18.0.2\"\n[link]\n" + link);
    INFO(l.messages);
    REQUIRE(l.exp);
    return l.exp->trials[0].link;
}
// The user's own qdisc `kind` on eth0 at `parent`, with a u32 filter at priority 1 that
// classifies into `classid` (or, with 0, redirects).
void add_users(RecordingKernel& k, const char* kind, std::uint32_t parent, std::uint32_t handle, const Filter& f,
               std::uint32_t classid) {
    TcObject q;
    q.kind = kind;
    q.ifindex = 2;
    q.parent = parent;
    q.handle = handle;
    k.send(replay_request(q, false, "eth0"));
    k.send(target_filter(2, "eth0", handle, f, classid, classid ? 0 : 100, 1));
    k.sent.clear();
}

// The user's own: an ingress qdisc on eth0 with a u32 filter at priority 1.
void add_users_ingress(RecordingKernel& k) {
    add_users(k, "ingress", 0xfffffff1 /* TC_H_INGRESS */, 0xffff0000, Filter{"198.18.9.0/24", 0, true}, 0);
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
    std::vector<std::string> undo;
    for (auto i = k.sent.end() - 2; i != k.sent.end(); ++i) undo.push_back(i->what);
    CHECK(undo == std::vector<std::string>{"delete ingress qdisc of eth0", "delete root qdisc of eth0"});
    CHECK(k.link_log.back() == "delete wlifb-eth0");
    CHECK(k.qdiscs[2].empty());
    CHECK(k.filters[2].empty());
}

TEST_CASE("wanlab's own connections pass untouched: their filters come before the target's, both ways",
          "[netem][host]") {
    RecordingKernel k;
    auto link = link_of("delay = \"30ms\"\n");
    Filter f{"198.18.0.2", 0, false};
    // The second is IPv6: it can never match an IPv4 target's filter, and gets none.
    f.exempt = {{"198.18.0.1", 40022, "198.18.0.2", 22}, {"2001:2::1", 40023, "2001:2::2", 22}};
    {
        HostImpairment h(k, "eth0", f, 10'000'000'000);
        h.apply(link.up, link.down, 1500, Psched{});
        std::vector<std::string> what;
        for (const auto& r : k.sent) what.push_back(r.what);
        CHECK(what == std::vector<std::string>{
                          "replace htb 1: on eth0",
                          "replace htb class 1:1 on eth0",
                          "replace htb class 1:2 on eth0",
                          "add exemption filter for 198.18.0.1:40022 - 198.18.0.2:22 on eth0",
                          "add target filter on eth0",
                          "replace netem 10: on eth0",
                          "restore qdisc ffff:0 (ingress) on eth0",
                          "add exemption filter for 198.18.0.1:40022 - 198.18.0.2:22 on eth0",
                          "add ingress redirect filter on eth0",
                          "replace netem 1: on wlifb-eth0",
                      });
        // Egress: the exemption at priority 1 before the target's at 2; ingress: one priority,
        // the exemption added first.
        std::vector<std::pair<std::uint32_t, std::uint32_t>> at;  // (parent, priority)
        for (const auto& o : k.filters[2]) at.emplace_back(o.parent, o.info >> 16);
        CHECK(at == std::vector<std::pair<std::uint32_t, std::uint32_t>>{
                        {0x10000, 1}, {0x10000, 2}, {0xffff0000, 1}, {0xffff0000, 1}});
    }
    CHECK(k.filters[2].empty());
    CHECK(k.qdiscs[2].empty());
}

TEST_CASE("the ifb name fits the kernel's 15 characters", "[netem][host]") {
    CHECK(ifb_name("eth0") == "wlifb-eth0");
    CHECK(ifb_name("enp0s31f6").size() <= 15);
    CHECK(ifb_name("a-very-long-interface-name").size() <= 15);
    CHECK(ifb_name("a-very-long-interface-name") != ifb_name("a-very-long-interface-nam2"));
}

TEST_CASE(
    "a user's ingress qdisc and filters are kept: wanlab adds its filter at a free priority and removes only that",
    "[netem][host]") {
    RecordingKernel k;
    add_users_ingress(k);
    auto link = link_of("[link.down]\ndelay = \"20ms\"\n");
    {
        HostImpairment h(k, "eth0", Filter{"198.18.0.2", 0, false}, 10'000'000'000);
        h.apply(link.up, link.down, 1500, Psched{});
        std::vector<std::string> what;
        for (const auto& r : k.sent) what.push_back(r.what);
        CHECK(what ==
              std::vector<std::string>{"add ingress redirect filter on eth0", "replace netem 1: on wlifb-eth0"});
        REQUIRE(k.filters[2].size() == 2);
        CHECK((k.filters[2][1].info >> 16) == 2);  // the next free priority
    }
    CHECK(k.sent.back().what == "delete filter priority 2 on eth0");
    REQUIRE(k.filters[2].size() == 1);
    CHECK((k.filters[2][0].info >> 16) == 1);  // the user's filter
    bool kept = false;
    for (const auto& q : k.qdiscs[2]) kept = kept || q.kind == "ingress";
    CHECK(kept);
    CHECK(k.link_log.back() == "delete wlifb-eth0");
}

TEST_CASE("undo_host, from the plan alone, undoes what a killed run left and is idempotent", "[netem][host]") {
    for (bool users_ingress : {false, true}) {
        INFO("the user has an ingress qdisc: " << users_ingress);
        RecordingKernel k;
        if (users_ingress) add_users_ingress(k);
        auto before_qdiscs = k.qdiscs[2].size();
        auto before_filters = k.filters[2].size();
        auto link = link_of("delay = \"30ms\"\n[link.down]\ndelay = \"20ms\"\n");
        RecordingKernel killed;
        HostUndo plan;
        {
            HostImpairment h(k, "eth0", Filter{"198.18.0.2", 0, false}, 10'000'000'000);
            plan = h.undo_plan();
            CHECK(plan.ingress_created == !users_ingress);
            CHECK(plan.filter_prio == (users_ingress ? 2 : 1));
            CHECK(plan.ifb == "wlifb-eth0");
            h.apply(link.up, link.down, 1500, Psched{});
            killed = k;  // the machine as a SIGKILL would leave it
        }
        REQUIRE(killed.qdiscs[2].size() > before_qdiscs);
        killed.sent.clear();
        undo_host(killed, plan);
        CHECK(killed.qdiscs[2].size() == before_qdiscs);
        CHECK(killed.filters[2].size() == before_filters);
        CHECK(killed.link_log.back() == "delete wlifb-eth0");
        CHECK(killed.devices.count("wlifb-eth0") == 0);
        auto sent = killed.sent.size();
        undo_host(killed, plan);  // again: nothing left to do, nothing sent
        CHECK(killed.sent.size() == sent);
    }
}

TEST_CASE("a user's root tree with filters is refused before anything changes, and the way in alone leaves it",
          "[netem][host]") {
    RecordingKernel k;
    // The user's: an htb root 5: with a filter on it.
    add_users(k, "htb", 0xffffffff /* TC_H_ROOT */, 0x50000, Filter{"198.18.9.0/24", 0, false}, 0x50001);
    HostImpairment h(k, "eth0", Filter{"198.18.0.2", 0, false}, 10'000'000'000);
    CHECK_THROWS_WITH(h.check(true, false), Catch::Contains("root qdisc tree has 1 filter of its own"));
    CHECK_NOTHROW(h.check(false, true));
    CHECK(k.sent.empty());
    auto down = link_of("[link.down]\ndelay = \"20ms\"\n");
    h.apply(down.up, down.down, 1500, Psched{});
    h.restore();
    // The root was never touched, so the undo leaves it (and its filter) alone.
    for (const auto& r : k.sent) CHECK(r.what.find("root") == std::string::npos);
    CHECK(k.filters[2].size() == 1);
    CHECK(k.qdiscs[2].size() == 1);
}

TEST_CASE("replay after a kill leaves an ingress hook that is no longer wanlab's alone", "[netem][host][security]") {
    constexpr std::uint32_t kIngress = 0xfffffff1, kClsactIngress = 0xfffffff2;
    for (int meanwhile : {0, 1}) {
        INFO((meanwhile == 0 ? "a CNI replaced wanlab's ingress with its clsact"
                             : "a CNI added its own filter to wanlab's ingress"));
        RecordingKernel k;
        auto link = link_of("[link.down]\ndelay = \"20ms\"\n");
        RecordingKernel killed;
        HostUndo plan;
        {
            HostImpairment h(k, "eth0", Filter{"198.18.0.2", 0, false}, 10'000'000'000);
            plan = h.undo_plan();
            REQUIRE(plan.ingress_created);
            h.apply(link.up, link.down, 1500, Psched{});
            killed = k;  // SIGKILL: nothing undone
        }
        if (meanwhile == 0) {
            killed.send(delete_qdisc(2, kIngress, 0, "the CNI deletes wanlab's ingress"));
            add_users(killed, "clsact", kIngress, 0xffff0000, Filter{"198.18.9.0/24", 0, true}, 0);
            // add_users hung its filter at the qdisc's handle; a clsact's ingress filters
            // hang at ffff:fff2, where wanlab's priority 1 is the CNI's.
            for (auto& f : killed.filters[2]) f.parent = kClsactIngress;
        } else {
            killed.send(target_filter(2, "eth0", 0xffff0000, Filter{"198.18.9.0/24", 0, true}, 0, 100, 7));
        }
        killed.sent.clear();
        undo_host(killed, plan);
        bool hook = false;
        for (const auto& q : killed.qdiscs[2]) hook = hook || q.parent == kIngress;
        CHECK(hook);  // the qdisc stays
        REQUIRE(killed.filters[2].size() == 1);
        CHECK((killed.filters[2][0].info >> 16) == (meanwhile == 0 ? 1u : 7u));  // the CNI's filter stays
        CHECK(killed.devices.count("wlifb-eth0") == 0);                          // wanlab's ifb goes
    }
}
