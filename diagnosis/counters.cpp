#include "diagnosis/counters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/sys.h"
#include "core/text.h"

namespace wanlab::diagnosis {
namespace {

std::string read_or_empty(const std::string& path) {
    try {
        return sys::read_file(path, 1 << 20, "reading counters");
    } catch (const Error&) {
        return {};
    }
}

// Values that are levels, not counts: their difference means nothing.
const std::set<std::string> kGauges = {"Tcp.RtoAlgorithm", "Tcp.RtoMin",    "Tcp.RtoMax",   "Tcp.MaxConn",
                                       "Tcp.CurrEstab",    "Ip.Forwarding", "Ip.DefaultTTL"};

}  // namespace

Counters parse_counters(std::string_view text) {
    Counters out;
    std::istringstream in{std::string(text)};
    std::string header, values;
    while (std::getline(in, header) && std::getline(in, values)) {
        auto names = text::words(header), numbers = text::words(values);
        if (names.empty() || names.size() != numbers.size() || names[0] != numbers[0] || names[0].back() != ':')
            continue;
        auto group = names[0].substr(0, names[0].size() - 1);
        for (std::size_t i = 1; i < names.size(); ++i) {
            char* end = nullptr;
            double v = std::strtod(numbers[i].c_str(), &end);
            if (end != nullptr && *end == '\0') out[group + "." + names[i]] = v;
        }
    }
    return out;
}

Counters parse_snmp6(std::string_view text) {
    Counters out;
    std::istringstream in{std::string(text)};
    for (std::string line; std::getline(in, line);) {
        auto w = text::words(line);
        if (w.size() != 2) continue;
        // Longest group first: "UdpLite6InDatagrams" is not Udp6's.
        for (std::string_view group : {"UdpLite6", "Icmp6", "Udp6", "Ip6"}) {
            if (!w[0].starts_with(group) || w[0].size() == group.size()) continue;
            char* end = nullptr;
            double v = std::strtod(w[1].c_str(), &end);
            if (end != nullptr && *end == '\0') out[std::string(group) + "." + w[0].substr(group.size())] = v;
            break;
        }
    }
    return out;
}

Counters read_counters(const std::string& netns) {
    try {
        return sys::in_netns_result(netns, [] {
            auto c = parse_counters(read_or_empty("/proc/thread-self/net/netstat"));
            c.merge(parse_counters(read_or_empty("/proc/thread-self/net/snmp")));
            c.merge(parse_snmp6(read_or_empty("/proc/thread-self/net/snmp6")));
            return c;
        });
    } catch (const Error&) {
        return {};  // the namespace is gone: no evidence, not a failed measurement
    }
}

Counters counter_delta(const Counters& before, const Counters& after) {
    Counters out;
    for (const auto& [name, value] : after) {
        if (kGauges.count(name)) continue;
        auto it = before.find(name);
        if (it == before.end()) continue;
        if (double d = value - it->second; d != 0) out[name] = d;
    }
    return out;
}

CpuTimes parse_cpu_times(std::string_view proc_stat) {
    CpuTimes out;
    std::istringstream in{std::string(proc_stat)};
    for (std::string line; std::getline(in, line);) {
        auto w = text::words(line);
        // "cpu0 user nice system idle iowait irq softirq steal ..."; the "cpu" total is skipped.
        if (w.size() < 5 || !w[0].starts_with("cpu") || w[0] == "cpu") continue;
        double total = 0, idle = 0;
        for (std::size_t i = 1; i < w.size() && i <= 8; ++i) {
            double v = std::strtod(w[i].c_str(), nullptr);
            total += v;
            if (i == 4 || i == 5) idle += v;  // idle and iowait
        }
        out.emplace_back(total - idle, total);
    }
    return out;
}

CpuTimes read_cpu_times() { return parse_cpu_times(read_or_empty("/proc/stat")); }

double busiest_cpu(const CpuTimes& before, const CpuTimes& after) {
    if (before.empty() || before.size() != after.size()) return std::nan("");
    double best = std::nan("");
    for (std::size_t i = 0; i < before.size(); ++i) {
        double total = after[i].second - before[i].second, busy = after[i].first - before[i].first;
        if (total <= 0) continue;
        double share = std::clamp(busy / total, 0.0, 1.0);
        if (!(share <= best)) best = share;
    }
    return best;
}

std::vector<std::pair<std::string, std::string>> counted_hosts(const probes::Endpoints& where) {
    std::vector<std::pair<std::string, std::string>> hosts{{"client", where.client.netns}};
    if (!where.server.remote && where.server.netns != where.client.netns)
        hosts.emplace_back("server", where.server.netns);
    return hosts;
}

Snapshot::Snapshot(std::vector<std::pair<std::string, std::string>> hosts, bool cpu) : hosts_(std::move(hosts)) {
    for (const auto& h : hosts_) before_.push_back(read_counters(h.second));
    if (cpu) cpu_ = read_cpu_times();
}

nlohmann::json Snapshot::delta() const {
    auto out = nlohmann::json::object();
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
        if (before_[i].empty()) continue;
        auto after = read_counters(hosts_[i].second);
        if (after.empty()) continue;
        out[hosts_[i].first] = counter_delta(before_[i], after);
    }
    if (cpu_.empty()) return out;
    if (double busy = busiest_cpu(cpu_, read_cpu_times()); std::isfinite(busy)) out["cpu_busiest"] = busy;
    return out;
}

void add_machine_deltas(nlohmann::json& delta, const nlohmann::json& before, const nlohmann::json& after) {
    if (!before.is_object() || !after.is_object()) return;
    for (const auto& [role, now] : after.items()) {
        if (!before.contains(role)) continue;
        const auto& then = before.at(role);
        try {
            delta[role] = counter_delta(then.at("counters").get<Counters>(), now.at("counters").get<Counters>());
            auto cpu = [](const nlohmann::json& j) {
                CpuTimes out;
                for (const auto& c : j.at("cpu")) out.emplace_back(c.at(0).get<double>(), c.at(1).get<double>());
                return out;
            };
            double busy = busiest_cpu(cpu(then), cpu(now));
            if (!std::isfinite(busy)) continue;
            if (!delta.contains("cpu_busiest") || delta["cpu_busiest"].get<double>() < busy) {
                delta["cpu_busiest"] = busy;
                delta["cpu_busiest_machine"] = role;
            }
        } catch (const nlohmann::json::exception&) {
            // an agent's reading this wanlab cannot read is left out, never guessed
        }
    }
}

}  // namespace wanlab::diagnosis
