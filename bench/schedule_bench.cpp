// Schedule benchmark: how late a [[link.schedule]]'s changes reach the kernel. One link
// changes its rate every 20 ms (alternately 20 and 5 Mbit/s), through wanlab's player
// (netem/player.h: a timer thread, each change a netlink request on the qdiscs already there),
// against the way such schedules are scripted (google/transperf, tcconfig): `tc qdisc change`
// run at each instant. Lateness is from the scheduled instant to the kernel's ACK (the
// player) or to tc's exit. Nothing else runs; nothing is asserted.
//
// `schedule_bench host`: on a kernel without netem (the host's), a tbf at the root of a veth
// in a namespace of its own. `schedule_bench netem`: netem with tbf below it, as a lab's
// router has (the micro-VM). Needs root. Prints one JSON object.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "experiment/experiment.h"
#include "netem/device.h"
#include "netem/encode.h"
#include "netem/kernel.h"
#include "netem/player.h"

using namespace wanlab;

namespace {

constexpr int kChanges = 200;
constexpr std::chrono::milliseconds kEvery{20};
const std::string kNs = "wl-bench-schedule";

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

experiment::Trial trial(bool with_netem) {
    std::string text =
        fmt::format("[link]\n{}rate = \"20mbit\"\nshaper = \"tbf\"\n", with_netem ? "delay = \"5ms\"\n" : "");
    for (int i = 1; i <= kChanges; ++i)
        text +=
            fmt::format("[[link.schedule]]\nat = \"{}ms\"\nrate = \"{}mbit\"\n", i * kEvery.count(), i % 2 ? 5 : 20);
    config::Documents docs;
    Diagnostics diag;
    auto exp = experiment::load_experiment("bench", text, {}, experiment::ProfileLibrary({}), docs, diag);
    if (!exp) {
        std::fputs(diag.render(docs.sources()).c_str(), stderr);
        std::exit(2);
    }
    return exp->trials[0];
}

nlohmann::json summary(std::vector<double> late_us) {
    std::sort(late_us.begin(), late_us.end());
    auto at = [&](double q) { return late_us[static_cast<std::size_t>(q * static_cast<double>(late_us.size() - 1))]; };
    return {{"changes", late_us.size()}, {"median_us", at(0.5)}, {"p99_us", at(0.99)}, {"max_us", late_us.back()}};
}

timespec plus(timespec t, std::chrono::nanoseconds d) {
    auto ns = t.tv_nsec + d.count();
    t.tv_sec += ns / 1'000'000'000;
    t.tv_nsec = ns % 1'000'000'000;
    return t;
}

double since_us(const timespec& from) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<double>(now.tv_sec - from.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec - from.tv_nsec) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
    const bool with_netem = argc > 1 && std::string(argv[1]) == "netem";
    sh("ip netns del " + kNs);
    if (sh("ip netns add " + kNs + " && ip -n " + kNs + " link add wl-rs type veth peer name wl-rc && ip -n " + kNs +
           " link set wl-rs up && ip -n " + kNs + " link set wl-rc up") != 0) {
        std::fputs("bench: needs root (ip netns add)\n", stderr);
        return 1;
    }
    auto t = trial(with_netem);
    auto psched = netem::Psched::from_proc();
    nlohmann::json out{{"kernel", with_netem ? "netem + tbf" : "tbf at the root"}, {"every_ms", kEvery.count()}};
    {
        netem::NetlinkKernel k(kNs);
        int ifindex = k.ifindex("wl-rs");
        std::vector<netem::Request> tree =
            with_netem ? netem::tree_requests(t.link.up, ifindex, "wl-rs", 1500, psched)
                       : netem::shaper_requests(t.link.up, ifindex, "wl-rs", 0xffffffffu, 1500, psched);
        for (const auto& r : tree) k.send(r);
    }
    // wanlab's player: the whole schedule, one change per step.
    {
        std::vector<netem::PlayerSite> sites;
        sites.push_back({"up", std::make_unique<netem::NetlinkKernel>(kNs), "wl-rs", {}});
        auto sched = t.schedule;
        for (auto& s : sched.steps) {  // one device: the up direction
            s.down = sched.steps.front().down;
            s.down.scheduled = false;
        }
        netem::SchedulePlayer player(sched, std::move(sites), 1500, psched);
        player.start();
        timespec end{};
        clock_gettime(CLOCK_MONOTONIC, &end);
        end = plus(end, kEvery * (kChanges + 1));
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, nullptr);
        auto log = player.finish();
        std::vector<double> late;
        for (const auto& c : log.changes) late.push_back((c.applied - c.scheduled) * 1e6);
        out["wanlab"] = summary(late);
        if (!log.error.empty()) out["wanlab_error"] = log.error;
    }
    // tc at the same instants, as a script would run it.
    {
        std::vector<double> late;
        timespec start{};
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (int i = 1; i <= kChanges; ++i) {
            timespec when = plus(start, kEvery * i);
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &when, nullptr);
            std::string cmd = with_netem ? fmt::format(
                                               "tc -n {} qdisc change dev wl-rs parent 1:1 handle 2: tbf rate {}mbit "
                                               "burst 10000 latency 50ms",
                                               kNs, i % 2 ? 5 : 20)
                                         : fmt::format(
                                               "tc -n {} qdisc change dev wl-rs root handle 2: tbf rate {}mbit burst "
                                               "10000 latency 50ms",
                                               kNs, i % 2 ? 5 : 20);
            int rc = sh(cmd);
            late.push_back(since_us(when));
            if (rc != 0) out["tc_error"] = cmd;
        }
        out["tc"] = summary(late);
    }
    sh("ip netns del " + kNs);
    std::puts(out.dump().c_str());
    return 0;
}
