#include "core/proc.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace wanlab::sys {
namespace {

// /proc/PID/stat from field 3 (state) on, "" if there is no such process. Field 2 (comm)
// may contain spaces and parentheses, so the fields start after the last ')'.
std::string stat_after_comm(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat;
    if (!std::getline(in, stat)) return "";
    auto close = stat.rfind(')');
    return close == std::string::npos || close + 2 > stat.size() ? "" : stat.substr(close + 2);
}

// Field `n` (3 = state, 5 = pgrp, 22 = start time) of such a line, "" if it has none.
std::string field(const std::string& fields, int n) {
    std::istringstream rest(fields);
    std::string f;
    for (int i = 3; i <= n && rest >> f; ++i)
        if (i == n) return f;
    return "";
}

std::vector<pid_t> all_pids() {
    std::vector<pid_t> pids;
    DIR* d = ::opendir("/proc");
    if (!d) return pids;
    while (dirent* e = ::readdir(d)) {
        const char* n = e->d_name;
        if (*n &&
            std::all_of(n, n + std::strlen(n), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
            pids.push_back(static_cast<pid_t>(std::atol(n)));
    }
    ::closedir(d);
    return pids;
}

bool alive(pid_t pid) {
    auto f = stat_after_comm(pid);
    return !f.empty() && f[0] != 'Z' && f[0] != 'X';  // a zombie holds no resources: it is gone
}

}  // namespace

unsigned long long process_start_time(pid_t pid) {
    auto f = field(stat_after_comm(pid), 22);
    return f.empty() ? 0 : std::stoull(f);
}

bool process_running(pid_t pid, unsigned long long start_time) {
    auto f = stat_after_comm(pid);  // one read: start time and state of the same process
    auto start = field(f, 22);
    return !start.empty() && std::stoull(start) == start_time && f[0] != 'Z' && f[0] != 'X';
}

std::vector<pid_t> group_members(pid_t pgid) {
    std::vector<pid_t> members;
    auto want = std::to_string(pgid);
    for (pid_t p : all_pids()) {
        auto f = stat_after_comm(p);
        if (!f.empty() && field(f, 5) == want && f[0] != 'Z' && f[0] != 'X') members.push_back(p);
    }
    return members;
}

std::vector<pid_t> netns_processes(const std::string& netns_path) {
    std::vector<pid_t> found;
    struct stat ns {};
    if (::stat(netns_path.c_str(), &ns) != 0) return found;
    for (pid_t p : all_pids()) {
        struct stat st {};
        if (::stat(fmt::format("/proc/{}/ns/net", p).c_str(), &st) == 0 && st.st_ino == ns.st_ino &&
            st.st_dev == ns.st_dev && alive(p))
            found.push_back(p);
    }
    return found;
}

std::size_t kill_group(pid_t pgid, unsigned long long start_time) {
    if (pgid <= 1) return 0;
    auto leader = process_start_time(pgid);
    if (leader != 0 && leader != start_time) return 0;  // the pid is someone else's now
    auto members = group_members(pgid);
    if (members.empty()) return 0;
    ::kill(-pgid, SIGKILL);
    return members.size();
}

std::vector<pid_t> wait_gone(std::vector<pid_t> pids, int ms) {
    for (int waited = 0;; waited += 10) {
        std::erase_if(pids, [](pid_t p) { return !alive(p); });
        if (pids.empty() || waited >= ms) return pids;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

}  // namespace wanlab::sys
