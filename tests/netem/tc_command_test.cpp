#include <catch2/catch.hpp>

#include "netem/tc_command.h"
#include "tests/support/load_helper.h"

using namespace wanlab::netem;
using wanlab::testing::up_of;
using namespace std::chrono_literals;

TEST_CASE("netem arguments use tc's words and order", "[netem][tc]") {
    CHECK(netem_arguments(
              up_of("delay = \"20ms\"\njitter = \"2ms\"\ncorrelation = \"25%\"\ndistribution = \"normal\"\n").netem) ==
          "limit 27500 delay 20ms 2ms 25% distribution normal");
    CHECK(netem_arguments(up_of("loss = \"1%\"\nloss_correlation = \"10%\"\n").netem) ==
          "limit 1000 loss random 1% 10%");
    CHECK(
        netem_arguments(
            up_of(
                "loss = { model = \"gemodel\", p = \"1%\", r = \"10%\", 1-h = \"70%\", 1-k = \"0.1%\" }\necn = true\n")
                .netem) == "limit 1000 loss gemodel 1% 10% 70% 0.1% ecn");
    CHECK(netem_arguments(up_of("loss = { model = \"gemodel\", p = \"1%\" }\n").netem) ==
          "limit 1000 loss gemodel 1% 99% 100% 0%");
    CHECK(netem_arguments(up_of("loss = { model = \"state\", p13 = \"1%\", p31 = \"90%\", p32 = \"5%\", p23 = \"8%\", "
                                "p14 = \"0.1%\" }\n")
                              .netem) == "limit 1000 loss state 1% 90% 5% 8% 0.1%");
    CHECK(
        netem_arguments(up_of("delay = \"10ms\"\nreorder = \"25%\"\nreorder_correlation = \"50%\"\ngap = 5\n").netem) ==
        "limit 12500 delay 10ms reorder 25% 50% gap 5");
    CHECK(netem_arguments(up_of("duplicate = \"1%\"\ncorrupt = \"0.1%\"\n").netem) ==
          "limit 1000 corrupt 0.1% duplicate 1%");
    CHECK(
        netem_arguments(up_of("rate = \"10mbit\"\npacket_overhead = 14\ncell_size = 53\ncell_overhead = 5\n").netem) ==
        "limit 1000 rate 10mbit 14 53 5");
    CHECK(netem_arguments(up_of("slot = { min_delay = \"1ms\", max_delay = \"4ms\", packets = 32 }\n").netem) ==
          "limit 1000 slot 1ms 4ms packets 32");
    CHECK(
        netem_arguments(
            up_of("slot = { distribution = \"pareto\", delay = \"2ms\", jitter = \"1ms\", bytes = 65536 }\n").netem) ==
        "limit 1000 slot distribution pareto 2ms 1ms bytes 65536");
    CHECK(netem_arguments(up_of("delay = \"1ms\"\nlimit = 50000\n").netem) == "limit 50000 delay 1ms");
}

TEST_CASE("tbf's bucket holds 4 ms of tokens at the rate, and never less than two frames", "[netem][tc]") {
    CHECK(tbf_burst(100'000'000, 1500) == 50'000);
    CHECK(tbf_burst(20'000'000, 1500) == 10'000);
    CHECK(tbf_burst(1'000'000, 1500) == 3'028);  // 500 B of tokens: two 1514-byte frames instead
    CHECK(tbf_burst(1'000'000, 9000) == 18'028);
}

TEST_CASE("a tbf shaper hangs below netem and the bottleneck queue below the shaper", "[netem][tc]") {
    auto d = up_of("delay = \"20ms\"\nrate = \"100mbit\"\nshaper = \"tbf\"\nqdisc = \"pfifo\"\nqdisc_limit = 500\n");
    CHECK(tc_commands(d, "wl-rs", "", 1500) ==
          std::vector<std::string>{
              "tc qdisc replace dev wl-rs root handle 1: netem limit 1000 delay 20ms",
              "tc qdisc replace dev wl-rs parent 1:1 handle 2: tbf rate 100mbit burst 50000 latency 50ms",
              "tc qdisc replace dev wl-rs parent 2:1 handle 3: pfifo limit 500",
          });
}

TEST_CASE("an htb shaper gets a class at the configured rate and a bfifo sized in bytes", "[netem][tc]") {
    auto d = up_of("delay = \"5ms\"\nrate = \"1gbit\"\nshaper = \"htb\"\nqdisc = \"bfifo\"\nqdisc_limit = \"256K\"\n");
    CHECK(tc_commands(d, "x", "ip netns exec r ", 1500) ==
          std::vector<std::string>{
              "ip netns exec r tc qdisc replace dev x root handle 1: netem limit 1000 delay 5ms",
              "ip netns exec r tc qdisc replace dev x parent 1:1 handle 2: htb default 1",
              "ip netns exec r tc class replace dev x parent 2: classid 2:1 htb rate 1gbit ceil 1gbit burst 500000 "
              "cburst "
              "500000",
              "ip netns exec r tc qdisc replace dev x parent 2:1 handle 3: bfifo limit 262144",
          });
}

TEST_CASE("a filter sends only matching traffic to the impaired htb class", "[netem][tc]") {
    auto d = up_of("delay = \"50ms\"\n");
    Filter f{"198.18.0.0/15", 443, false, 1'000'000'000};
    CHECK(tc_commands(d, "eth0", "", 1500, f) ==
          std::vector<std::string>{
              "tc qdisc replace dev eth0 root handle 1: htb default 1",
              "tc class replace dev eth0 parent 1: classid 1:1 htb rate 1gbit ceil 1gbit",
              "tc class replace dev eth0 parent 1: classid 1:2 htb rate 1gbit ceil 1gbit",
              "tc filter replace dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.0.0/15 match ip dport "
              "443 0xffff flowid 1:2",
              "tc qdisc replace dev eth0 parent 1:2 handle 10: netem limit 62500 delay 50ms",
          });
}

TEST_CASE("auto limit covers the bandwidth-delay product with half again of headroom", "[netem][limit]") {
    CHECK(auto_limit(1'000'000'000, 100ms, 0ms, 1500) == 12500u);
    CHECK(auto_limit(10'000'000, 20ms, 0ms, 1500) == 1000u);  // tc's default is the floor
    CHECK(auto_limit(10'000'000'000, 200ms, 50ms, 1500) == 312500u);
    CHECK(auto_limit(100'000'000, 40ms, 10ms, 9000) == 1000u);
}
