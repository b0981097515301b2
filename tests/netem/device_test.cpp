// DeviceQdiscs against the recording fake: what is sent, what is read back, what is restored.
#include <catch2/catch.hpp>

#include <cstring>

#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include "core/error.h"
#include "netem/device.h"
#include "netem/queue.h"
#include "netem/readback.h"
#include "tests/support/load_helper.h"
#include "tests/support/recording_kernel.h"

using namespace wanlab::netem;
using wanlab::testing::up_of;

namespace {

std::uint16_t type_of(const Request& r) {
    nlmsghdr h;
    std::memcpy(&h, r.bytes.data(), sizeof h);
    return h.nlmsg_type;
}

TcObject* find(std::vector<TcObject>& list, std::uint32_t handle) {
    for (auto& o : list)
        if (o.handle == handle) return &o;
    return nullptr;
}
}  // namespace

TEST_CASE("applying a direction replaces the tree and reads it back", "[netem][device]") {
    RecordingKernel k;
    {
        DeviceQdiscs dev(k, "wl-rs");
        CHECK(dev.default_root());
        dev.apply(up_of("delay = \"20ms\"\nloss = \"1%\"\nrate = \"100mbit\"\nshaper = \"htb\"\nqdisc = \"bfifo\"\n"),
                  1500, Psched{});
        REQUIRE(k.sent.size() == 4);
        CHECK(k.sent[0].what == "replace netem 1: on wl-rs");
        CHECK(k.sent[1].what == "replace htb 2: on wl-rs");
        CHECK(k.sent[2].what == "replace htb class 2:1 on wl-rs");
        CHECK(k.sent[3].what == "replace bfifo 3: on wl-rs");
        for (const auto& r : k.sent) CHECK(type_of(r) != RTM_DELQDISC);  // never delete-then-add
        auto n = decode_netem(find(k.qdiscs[7], TreeLayout{}.netem)->options, Psched{});
        CHECK(n.delay == std::chrono::milliseconds(20));
        CHECK(n.loss.probability == Approx(0.01));
    }
    // Leaving scope restores the kernel default by deleting the root.
    REQUIRE(k.sent.size() == 5);
    CHECK(type_of(k.sent.back()) == RTM_DELQDISC);
    CHECK(k.sent.back().what == "delete root qdisc of wl-rs");
    CHECK(k.qdiscs[7].empty());
}

TEST_CASE("moving to the next trial replaces in place, with every netem field stated", "[netem][device]") {
    RecordingKernel k;
    DeviceQdiscs dev(k, "wl-rs");
    dev.apply(up_of("delay = \"20ms\"\ncorrupt = \"1%\"\nslot = { min_delay = \"1ms\" }\n"), 1500, Psched{});
    dev.apply(up_of("delay = \"40ms\"\n"), 1500, Psched{});
    REQUIRE(k.sent.size() == 2);
    auto n = decode_netem(find(k.qdiscs[7], TreeLayout{}.netem)->options, Psched{});
    CHECK(n.delay == std::chrono::milliseconds(40));
    CHECK(n.corrupt == 0);  // cleared, not kept from the first trial
    CHECK_FALSE(n.slot.has_value());
}

TEST_CASE("a read-back that differs from the request is an error naming the field and both values", "[netem][device]") {
    RecordingKernel k;
    auto d = up_of("delay = \"20ms\"\nlimit = 5000\n");
    int ifindex = k.ifindex("wl-rs");
    for (const auto& r : tree_requests(d, ifindex, "wl-rs", 1500, Psched{})) k.send(r);
    // The "kernel" changed limit and delay on its own.
    auto& opts = find(k.qdiscs[ifindex], TreeLayout{}.netem)->options;
    tc_netem_qopt q;
    std::memcpy(&q, opts.data(), sizeof q);
    q.limit = 1000;
    q.latency = Psched{}.ticks(std::chrono::milliseconds(10));
    std::memcpy(opts.data(), &q, sizeof q);
    auto m = verify_tree(k, ifindex, d, Psched{});
    CHECK(describe(m) == "delay: asked 20ms, the kernel has 10ms; limit: asked 5000, the kernel has 1000");
}

TEST_CASE("a device whose root was not the default gets its exact tree back", "[netem][device]") {
    RecordingKernel k;
    // The device starts with a user's tbf at handle 5:.
    TcObject tbf;
    tbf.kind = "tbf";
    tbf.ifindex = 7;
    tbf.handle = 0x50000;
    tbf.parent = TC_H_ROOT;
    tbf.options = {1, 2, 3, 4};
    k.send(replay_request(tbf, false, "wl-rs"));
    k.sent.clear();
    {
        DeviceQdiscs dev(k, "wl-rs");
        CHECK_FALSE(dev.default_root());
        dev.apply(up_of("delay = \"5ms\"\n"), 1500, Psched{});
    }
    REQUIRE(k.sent.size() == 3);
    CHECK(type_of(k.sent[1]) == RTM_DELQDISC);
    CHECK(k.sent[2].what == "restore qdisc 5:0 (tbf) on wl-rs");
    REQUIRE(k.qdiscs[7].size() == 1);
    CHECK(k.qdiscs[7][0].kind == "tbf");
    CHECK(k.qdiscs[7][0].handle == 0x50000u);
    CHECK(k.qdiscs[7][0].options == tbf.options);
}

TEST_CASE("a snapshot survives serialization, so another process can restore it", "[netem][device]") {
    RecordingKernel k;
    TcObject tbf;
    tbf.kind = "tbf";
    tbf.ifindex = 7;
    tbf.handle = 0x50000;
    tbf.parent = TC_H_ROOT;
    tbf.options = {9, 8, 7};
    k.send(replay_request(tbf, false, "wl-rs"));
    std::string saved;
    {
        DeviceQdiscs dev(k, "wl-rs");
        saved = dev.serialize();
        dev.apply(up_of("delay = \"5ms\"\n"), 1500, Psched{});
        dev.release();  // this process ends without restoring
    }
    CHECK(k.qdiscs[7][0].kind == "netem");
    auto later = DeviceQdiscs::from_serialized(k, "wl-rs", saved);
    later.restore();
    REQUIRE(k.qdiscs[7].size() == 1);
    CHECK(k.qdiscs[7][0].kind == "tbf");
    CHECK(k.qdiscs[7][0].options == tbf.options);
}

TEST_CASE("a failed restore is reported, not thrown, from the destructor", "[netem][device]") {
    RecordingKernel k;
    {
        DeviceQdiscs dev(k, "wl-rs");
        dev.apply(up_of("delay = \"5ms\"\n"), 1500, Psched{});
        k.fail_next = "Device or resource busy";
    }  // must not throw
    CHECK(k.sent.back().what == "delete root qdisc of wl-rs");
}

TEST_CASE("an unknown device is a clear error", "[netem][device]") {
    RecordingKernel k;
    CHECK_THROWS_WITH(DeviceQdiscs(k, "eth9"), "no network device `eth9` here");
}

TEST_CASE("an htb already in place is kept and only its class replaced, as the kernel requires", "[netem][device]") {
    RecordingKernel k;
    DeviceQdiscs dev(k, "wl-rs");
    dev.apply(up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"htb\"\n"), 1500, Psched{});
    k.sent.clear();
    dev.apply(up_of("delay = \"40ms\"\nrate = \"50mbit\"\nshaper = \"htb\"\n"), 1500, Psched{});
    REQUIRE(k.sent.size() == 2);
    CHECK(k.sent[0].what == "replace netem 1: on wl-rs");
    CHECK(k.sent[1].what == "replace htb class 2:1 on wl-rs");
}

TEST_CASE("a shaper of another kind is grafted at the other handle, and a dropped one removed", "[netem][device]") {
    RecordingKernel k;
    DeviceQdiscs dev(k, "wl-rs");
    dev.apply(up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"htb\"\n"), 1500, Psched{});
    k.sent.clear();
    dev.apply(up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\n"), 1500, Psched{});
    REQUIRE(k.sent.size() == 2);
    CHECK(k.sent[1].what == "replace tbf 6: on wl-rs");
    k.sent.clear();
    dev.apply(up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\n"), 1500, Psched{});
    CHECK(k.sent[1].what == "replace tbf 6: on wl-rs");  // the same kind stays where it is
    k.sent.clear();
    dev.apply(up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"htb\"\n"), 1500, Psched{});
    CHECK(k.sent[1].what == "replace htb 2: on wl-rs");
    k.sent.clear();
    dev.apply(up_of("delay = \"20ms\"\n"), 1500, Psched{});
    REQUIRE(k.sent.size() == 2);
    CHECK(k.sent[1].what == "remove htb below netem on wl-rs");
}

TEST_CASE("a queue is always grafted whole at the other handle, and none brings a fresh shaper", "[netem][device]") {
    RecordingKernel k;
    DeviceQdiscs dev(k, "wl-rs");
    const std::string base = "delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"htb\"\n";
    dev.apply(up_of(base + "qdisc = \"pfifo\"\nqdisc_limit = 100\n"), 1500, Psched{});
    k.sent.clear();
    // The kernel refuses a pfifo changed into fq_codel at its own handle ("Invalid qdisc name").
    dev.apply(up_of(base + "qdisc = \"fq_codel\"\n"), 1500, Psched{});
    REQUIRE(k.sent.size() == 3);
    CHECK(k.sent[1].what == "replace htb class 2:1 on wl-rs");
    CHECK(k.sent[2].what == "replace fq_codel 7: on wl-rs");
    CHECK(find(k.qdiscs[7], 0x00030000) == nullptr);  // the pfifo went with the graft
    k.sent.clear();
    // The same kind is grafted whole too: a change in place would keep the target of the
    // trial before, where this one leaves it at the kernel's default.
    dev.apply(up_of(base + "qdisc = { kind = \"fq_codel\", target = \"10ms\", flows = 256 }\n"), 1500, Psched{});
    CHECK(k.sent.back().what == "replace fq_codel 3: on wl-rs");
    CHECK(find(k.qdiscs[7], 0x00070000) == nullptr);
    k.sent.clear();
    dev.apply(up_of(base + "qdisc = \"fq_codel\"\n"), 1500, Psched{});
    CHECK(k.sent.back().what == "replace fq_codel 7: on wl-rs");
    CHECK(decode_queue("fq_codel", find(k.qdiscs[7], 0x00070000)->options).count("target") == 0);
    k.sent.clear();
    dev.apply(up_of(base + "qdisc = \"pfifo\"\nqdisc_limit = 50\n"), 1500, Psched{});
    CHECK(k.sent.back().what == "replace pfifo 3: on wl-rs");
    CHECK(decode_fifo_limit(find(k.qdiscs[7], 0x00030000)->options) == 50);
    k.sent.clear();
    // Back to the shaper's own queue: a new htb at the other handle, with no queue of ours.
    dev.apply(up_of(base), 1500, Psched{});
    REQUIRE(k.sent.size() == 3);
    CHECK(k.sent[1].what == "replace htb 6: on wl-rs");
    CHECK(k.sent[2].what == "replace htb class 6:1 on wl-rs");
    CHECK(find(k.qdiscs[7], 0x00030000) == nullptr);
    CHECK(find(k.qdiscs[7], 0x00020000) == nullptr);
    k.sent.clear();
    // A queue again, below the shaper where it now is.
    dev.apply(up_of(base + "qdisc = \"bfifo\"\nqdisc_limit = 30000\n"), 1500, Psched{});
    CHECK(k.sent.back().what == "replace bfifo 7: on wl-rs");
}

TEST_CASE("the recording kernel refuses a kind change in place, as the kernel does", "[netem][device]") {
    RecordingKernel k;
    DeviceQdiscs dev(k, "wl-rs");
    dev.apply(up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\nqdisc = \"pfifo\"\n"), 1500, Psched{});
    auto requests =
        tree_requests(up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\nqdisc = \"fq_codel\"\n"), 7,
                      "wl-rs", 1500, Psched{});
    CHECK_THROWS_WITH(dev.apply_requests(requests), Catch::Contains("Invalid qdisc name"));
}
