// What else used the CPUs while a test measured: a sub-millisecond bound (an RTT over a bare
// veth) fails when another process or the hypervisor takes the cores, and the failure should
// say so instead of leaving a bare number. Read from /proc/stat and /proc/PID/stat.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace wanlab::testing {

class CpuWatch {
public:
    CpuWatch() { start(); }

    /// Starts a new window (the constructor starts the first).
    void start() {
        began_ = std::chrono::steady_clock::now();
        machine_ = machine_ticks();
        procs_ = process_ticks();
    }

    /// One line: how busy the machine was since start(), this process's share, the steal, and
    /// the busiest other processes.
    std::string describe() const {
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
        auto now = machine_ticks();
        auto procs = process_ticks();
        const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
        const double cores = static_cast<double>(::sysconf(_SC_NPROCESSORS_ONLN));
        auto pct = [&](double ticks) { return wall > 0 ? 100.0 * ticks / hz / wall : 0.0; };
        std::vector<std::pair<long long, std::string>> others;
        long long self = 0;
        const std::string me = std::to_string(::getpid());
        for (const auto& [pid, p] : procs) {
            auto was = procs_.find(pid);
            long long used = p.ticks - (was == procs_.end() ? 0 : was->second.ticks);
            if (pid == me)
                self = used;
            else if (used > 0)
                others.emplace_back(used, fmt::format("{} ({})", p.name, pid));
        }
        std::sort(others.rbegin(), others.rend());
        std::string top;
        for (std::size_t i = 0; i < others.size() && i < 3; ++i)
            top +=
                fmt::format("{}{} {:.0f}%", i ? ", " : "", others[i].second, pct(static_cast<double>(others[i].first)));
        return fmt::format(
            "over {:.2f} s the machine's {:.0f} cores were {:.0f}% busy (100% = one core): this test {:.0f}%, "
            "steal {:.0f}%; busiest others: {}",
            wall, cores, pct(static_cast<double>(now.busy - machine_.busy)), pct(static_cast<double>(self)),
            pct(static_cast<double>(now.steal - machine_.steal)), top.empty() ? "none" : top);
    }

private:
    struct Machine {
        long long busy = 0, steal = 0;
    };
    struct Proc {
        std::string name;
        long long ticks = 0;  // utime + stime of the whole process (its threads included)
    };

    static Machine machine_ticks() {
        std::ifstream in("/proc/stat");
        std::string cpu;
        long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
        in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
        return {user + nice + system + irq + softirq + steal, steal};
    }

    static std::map<std::string, Proc> process_ticks() {
        std::map<std::string, Proc> out;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
            auto pid = e.path().filename().string();
            if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
            std::ifstream in(e.path() / "stat");
            std::string line;
            if (!std::getline(in, line)) continue;
            auto open = line.find('('), close = line.rfind(')');
            if (open == std::string::npos || close == std::string::npos) continue;
            std::istringstream rest(line.substr(close + 2));
            std::string field;
            long long utime = 0, stime = 0;
            // After the name: state is field 3; utime and stime are fields 14 and 15.
            for (int i = 3; i <= 13 && rest >> field; ++i) {}
            rest >> utime >> stime;
            out[pid] = {line.substr(open + 1, close - open - 1), utime + stime};
        }
        return out;
    }

    std::chrono::steady_clock::time_point began_;
    Machine machine_;
    std::map<std::string, Proc> procs_;
};

}  // namespace wanlab::testing
