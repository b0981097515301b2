// Control-path benchmark: one trial's whole link configuration (netem with delay, jitter,
// loss and an htb rate limit with its queue, on both router devices) and its per-namespace
// sysctls (tcp_rmem, tcp_wmem, the congestion control) applied through wanlab's netlink and
// /proc/sys paths, against the same change made the way users script it: `tc` and
// `ip netns exec NS sysctl -w` commands. Same run, same devices, alternating between two trials so every apply is a
// real change. Needs root and a kernel with netem: run it in the micro-VM
// (bench/run does). Prints one JSON object.
//
// `apply_bench ROUNDS htb|tbf` measures the same on a kernel without netem (the host's): the
// trial is that shaper at the root with a pfifo below it, built by wanlab's own encoders
// (netem::shaper_requests) and read back by its decoders, against `tc` commands.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "experiment/experiment.h"
#include "experiment/plan.h"
#include "netem/device.h"
#include "netem/encode.h"
#include "netem/kernel.h"
#include "netem/readback.h"
#include "netem/tc_command.h"
#include "sysctl/proc_sys.h"

using namespace wanlab;
using Clock = std::chrono::steady_clock;

namespace {

netem::Direction direction(const std::string& link) {
    config::Documents docs;
    Diagnostics diag;
    auto exp = experiment::load_experiment("bench", "[link]\n" + link, {}, experiment::ProfileLibrary({}), docs, diag);
    if (!exp) {
        std::fputs(diag.render(docs.sources()).c_str(), stderr);
        std::exit(2);
    }
    return exp->trials[0].link.up;
}

// The trials' sysctls: per namespace, so the benchmark's namespace holds them all.
const std::vector<std::vector<std::pair<std::string, std::string>>> kSysctls{
    {{"net.ipv4.tcp_rmem", "4096\t131072\t6291456"},
     {"net.ipv4.tcp_wmem", "4096\t16384\t4194304"},
     {"net.ipv4.tcp_congestion_control", "cubic"}},
    {{"net.ipv4.tcp_rmem", "4096\t131072\t33554432"},
     {"net.ipv4.tcp_wmem", "4096\t16384\t33554432"},
     {"net.ipv4.tcp_congestion_control", "reno"}},
};

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Milliseconds per round, median, min and max, as "PREFIX_ms_median" ... in `out`.
void put(nlohmann::json& out, const std::string& prefix, const std::vector<double>& ms) {
    out[prefix + "_ms_median"] = median(ms);
    out[prefix + "_ms_min"] = *std::min_element(ms.begin(), ms.end());
    out[prefix + "_ms_max"] = *std::max_element(ms.begin(), ms.end());
}

// The tc command that builds what `r` asks of `dev` in `ns`, from the plan's own command list
// (netem::tc_commands) without its netem line: the shaper hangs at the root here.
std::vector<std::string> shaper_commands(const netem::Direction& d, const std::string& ns, const std::string& dev,
                                         bool first) {
    std::vector<std::string> out;
    for (auto c : netem::tc_commands(d, dev, "", 1500)) {
        if (c.find(" netem ") != std::string::npos) continue;
        if (!first && c.find(" htb default ") != std::string::npos) continue;  // as below: the class changes
        auto at = c.find("parent 1:1 ");
        if (at != std::string::npos) c.replace(at, 11, "root ");
        out.push_back("tc -n " + ns + c.substr(2));
    }
    return out;
}

// A kernel without netem: `shaper` (htb or tbf) at the root of both devices with a pfifo
// below, plus the sysctls, through wanlab's encoders and read-back, then through commands.
int host_bench(int rounds, const std::string& shaper, const std::string& ns,
               const std::vector<std::vector<std::pair<std::string, std::string>>>& sysctls) {
    std::vector<netem::Direction> trials{
        direction(fmt::format("rate = \"100mbit\"\nshaper = \"{}\"\nqdisc = \"pfifo\"\nqdisc_limit = 1000\n", shaper)),
        direction(fmt::format("rate = \"50mbit\"\nshaper = \"{}\"\nqdisc = \"pfifo\"\nqdisc_limit = 500\n", shaper)),
    };
    const char* devs[] = {"wl-rs", "wl-rc"};
    sysctl::RealProcSys proc;
    std::vector<double> netlink_ms, tc_ms;
    {
        netem::NetlinkKernel k(ns);
        auto psched = netem::Psched::from_proc();
        int ifindex[] = {k.ifindex(devs[0]), k.ifindex(devs[1])};
        for (int i = 0; i < rounds; ++i) {
            const auto& d = trials[i % 2];
            auto t0 = Clock::now();
            for (int j = 0; j < 2; ++j) {
                for (const auto& r : netem::shaper_requests(d, ifindex[j], devs[j], 0xffffffffu, 1500, psched))
                    if (i == 0 || r.what.find("replace htb 2:") == std::string::npos) k.send(r);
                // The read-back wanlab does after every change: the shaper's rate and the queue's limit.
                std::uint64_t rate = 0;
                std::uint32_t limit = 0;
                for (const auto& q : k.dump(ifindex[j], false)) {
                    if (q.kind == "tbf") rate = netem::decode_tbf_rate(q.options);
                    if (q.kind == "pfifo") limit = netem::decode_fifo_limit(q.options);
                }
                if (shaper == "htb")
                    for (const auto& c : k.dump(ifindex[j], true))
                        if (c.kind == "htb") rate = netem::decode_htb_class_rate(c.options);
                if (rate != d.rate_bps || limit != d.queue_limit) {
                    std::fprintf(stderr, "bench: %s read back rate %llu limit %u, asked %llu and %llu\n", devs[j],
                                 static_cast<unsigned long long>(rate), limit,
                                 static_cast<unsigned long long>(d.rate_bps),
                                 static_cast<unsigned long long>(d.queue_limit));
                    return 1;
                }
            }
            for (const auto& [key, value] : sysctls[i % 2]) proc.write(ns, key, value);
            netlink_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
    }
    for (const char* dev : devs) sh(fmt::format("tc -n {} qdisc del dev {} root", ns, dev));
    for (int i = 0; i < rounds; ++i) {
        const auto& d = trials[i % 2];
        std::vector<std::string> cmds;
        for (const char* dev : devs)
            for (auto& c : shaper_commands(d, ns, dev, i == 0)) cmds.push_back(std::move(c));
        std::string sc = "ip netns exec " + ns + " sysctl -q -w";
        for (const auto& [key, value] : sysctls[i % 2]) {
            auto v = value;
            std::replace(v.begin(), v.end(), '\t', ' ');
            sc += " " + key + "='" + v + "'";
        }
        cmds.push_back(sc);
        auto t0 = Clock::now();
        for (const auto& c : cmds)
            if (sh(c) != 0) {
                std::fprintf(stderr, "bench: `%s` failed\n", c.c_str());
                return 1;
            }
        for (const char* dev : devs) sh(fmt::format("tc -n {} qdisc show dev {}", ns, dev));
        if (shaper == "htb")
            for (const char* dev : devs) sh(fmt::format("tc -n {} class show dev {}", ns, dev));
        tc_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    sh("ip netns del " + ns);
    nlohmann::json out{{"rounds", rounds}, {"shaper", shaper}};
    put(out, "netlink", netlink_ms);
    put(out, "tc", tc_ms);
    std::puts(out.dump().c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
    const std::string host_shaper = argc > 2 ? argv[2] : "";
    const std::string ns = "wanlab-bench";
    sh("ip netns del " + ns);
    if (sh("ip netns add " + ns + " && ip -n " + ns + " link add wl-rs type veth peer name wl-rc") != 0) {
        std::fputs("bench: needs root (ip netns add)\n", stderr);
        return 1;
    }
    sh("ip -n " + ns + " link set wl-rs up && ip -n " + ns + " link set wl-rc up");
    if (!host_shaper.empty()) {
        // A namespace may choose only the congestion controls the host allows (here "reno bbr":
        // no cubic): alternate between the first two of them.
        auto sysctls = kSysctls;
        std::istringstream allowed(
            sysctl::RealProcSys().read("", "net.ipv4.tcp_allowed_congestion_control").value_or(""));
        std::vector<std::string> cc{std::istream_iterator<std::string>(allowed), {}};
        for (std::size_t i = 0; i < sysctls.size() && cc.size() >= 2; ++i) sysctls[i].back().second = cc[i % cc.size()];
        try {
            return host_bench(rounds, host_shaper, ns, sysctls);
        } catch (const std::exception& e) {
            sh("ip netns del " + ns);
            std::fprintf(stderr, "bench: %s\n", e.what());
            return 1;
        }
    }
    std::vector<netem::Direction> trials{
        direction("delay = \"20ms\"\njitter = \"2ms\"\nloss = \"0.5%\"\nrate = \"100mbit\"\nshaper = \"htb\"\nqdisc = "
                  "\"pfifo\"\nqdisc_limit = 1000\n"),
        direction("delay = \"40ms\"\njitter = \"4ms\"\nloss = \"1%\"\nrate = \"50mbit\"\nshaper = \"htb\"\nqdisc = "
                  "\"pfifo\"\nqdisc_limit = 500\n"),
    };
    const auto& sysctls = kSysctls;
    const char* devs[] = {"wl-rs", "wl-rc"};
    sysctl::RealProcSys proc;
    std::vector<double> netlink_ms, tc_ms;
    {
        netem::NetlinkKernel k(ns);
        netem::DeviceQdiscs a(k, devs[0]), b(k, devs[1]);
        auto psched = netem::Psched::from_proc();
        for (int i = 0; i < rounds; ++i) {
            const auto& d = trials[i % 2];
            auto t0 = Clock::now();
            a.apply(d, 1500, psched);  // includes the read-back of every field
            b.apply(d, 1500, psched);
            for (const auto& [key, value] : sysctls[i % 2]) proc.write(ns, key, value);
            netlink_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
    }
    for (int i = 0; i < rounds; ++i) {
        const auto& d = trials[i % 2];
        std::vector<std::string> cmds;
        for (const char* dev : devs)
            // `tc -n` (setns only), the cheapest way to run tc in a namespace.
            for (auto& c : netem::tc_commands(d, dev, "", 1500))
                // As with netlink, the kernel takes no change of an htb qdisc: after the first
                // round only its class changes.
                if (i == 0 || c.find(" htb default ") == std::string::npos) cmds.push_back("tc -n " + ns + c.substr(2));
        std::string sc = "ip netns exec " + ns + " sysctl -q -w";
        for (const auto& [key, value] : sysctls[i % 2]) {
            auto v = value;
            std::replace(v.begin(), v.end(), '\t', ' ');
            sc += " " + key + "='" + v + "'";
        }
        cmds.push_back(sc);
        auto t0 = Clock::now();
        for (const auto& c : cmds)
            if (sh(c) != 0) {
                std::fprintf(stderr, "bench: `%s` failed\n", c.c_str());
                return 1;
            }
        // tc prints nothing to compare with: a user checks with `tc qdisc show`, once per device.
        for (const char* dev : devs) sh(fmt::format("tc -n {} qdisc show dev {}", ns, dev));
        tc_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    sh("ip netns del " + ns);
    nlohmann::json out{{"rounds", rounds},
                       {"netlink_ms_median", median(netlink_ms)},
                       {"tc_ms_median", median(tc_ms)},
                       {"netlink_ms_min", *std::min_element(netlink_ms.begin(), netlink_ms.end())},
                       {"netlink_ms_max", *std::max_element(netlink_ms.begin(), netlink_ms.end())},
                       {"tc_ms_min", *std::min_element(tc_ms.begin(), tc_ms.end())},
                       {"tc_ms_max", *std::max_element(tc_ms.begin(), tc_ms.end())}};
    std::puts(out.dump().c_str());
    return 0;
}
