// Helpers for tests that change the machine as root: skip without root, run commands,
// capture the machine's network state, drive `wanlab` as a child process, clean up.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace wanlab::root_testing {

/// True (after a WARN that CTest maps to "Skipped") when the test cannot run here.
inline bool skip_unless_root() {
    if (::geteuid() == 0) return false;
    WARN("SKIPPED: needs root (creates namespaces, devices and sysctls)");
    return true;
}

/// Runs a shell command; returns its stdout.
inline std::string sh(const std::string& cmd, int* status = nullptr) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return out;
    std::array<char, 4096> buf{};
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    int st = ::pclose(p);
    if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return out;
}

inline std::string read_sysctl(const std::string& key) {
    std::string path = "/proc/sys/" + key;
    for (auto i = path.begin() + 10; i != path.end(); ++i)
        if (*i == '.') *i = '/';
    std::ifstream in(path);
    std::string v;
    std::getline(in, v);
    return v;
}

/// Everything a run may change, as text that must be identical before and after.
struct MachineState {
    std::string links, netns, qdiscs, journals;
    std::vector<std::string> sysctls;
    bool operator==(const MachineState&) const = default;
};

inline const std::vector<std::string> kTouchedSysctls{"net.core.rmem_max", "net.core.wmem_max",
                                                      "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem",
                                                      "net.ipv4.ip_forward"};

inline MachineState capture() {
    MachineState s;
    s.links = sh("ip -j link");
    s.netns = sh("ip netns list");
    s.qdiscs = sh("tc -j qdisc show");
    s.journals = sh("ls /run/wanlab/*.journal 2>/dev/null");
    for (const auto& k : kTouchedSysctls) s.sysctls.push_back(k + "=" + read_sysctl(k));
    return s;
}

/// A temporary experiment file whose sysctls differ from the machine's current values.
struct ExperimentFile {
    std::filesystem::path path;
    std::string rmem_max, wmem_max;
    explicit ExperimentFile(const std::string& extra_lab = "", const std::string& client_cc = "reno") {
        rmem_max = std::to_string(std::stoll(read_sysctl("net.core.rmem_max")) + 4096);
        wmem_max = std::to_string(std::stoll(read_sysctl("net.core.wmem_max")) + 8192);
        char t[] = "/tmp/wanlab-root-XXXXXX.toml";
        int fd = ::mkstemps(t, 5);
        ::close(fd);
        path = t;
        std::ofstream(path) << fmt::format(R"(name = "root-test"
[lab]
mtu = 1400
queue_length = 500
{}
[sysctl]
"net.core.rmem_max" = {}
"net.core.wmem_max" = {}
"net.ipv4.tcp_rmem" = [4096, 65536, 4194304]
[sysctl.client]
"net.ipv4.tcp_congestion_control" = "{}"
[[probe]]
name = "p"
kind = "rtt"
)",
                                           extra_lab, rmem_max, wmem_max, client_cc);
    }
    ~ExperimentFile() { std::filesystem::remove(path); }
};

/// `wanlab ARGS...` as a child with its stdout on a pipe.
class Wanlab {
public:
    /// `binary`: another copy of wanlab to run (a test that replaces the file under it).
    explicit Wanlab(const std::vector<std::string>& args, const std::string& binary = WANLAB_BINARY) {
        int fds[2];
        REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::dup2(fds[1], 1);
            std::vector<char*> argv{const_cast<char*>(binary.c_str())};
            for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            ::execv(binary.c_str(), argv.data());
            ::_exit(127);
        }
        ::close(fds[1]);
        out_ = fds[0];
    }
    ~Wanlab() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            wait();
        }
        ::close(out_);
    }
    /// Reads stdout until a line equal to `line` arrives (true) or `timeout` passes / EOF.
    bool wait_for_line(const std::string& line, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
        auto end = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            for (std::size_t nl; (nl = buf_.find('\n')) != std::string::npos;) {
                std::string l = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                seen_ += l + "\n";
                if (l == line) return true;
            }
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0) return false;
            pollfd p{out_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
            char b[512];
            ssize_t n = ::read(out_, b, sizeof b);
            if (n <= 0) return false;
            buf_.append(b, static_cast<std::size_t>(n));
        }
    }
    void signal(int s) { ::kill(pid_, s); }
    pid_t pid() const { return pid_; }
    /// Waits for the child; returns the exit status, or 128 + signal.
    int wait() {
        int st = 0;
        while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {}
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    const std::string& seen() const { return seen_; }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buf_, seen_;
};

/// Gives the machine back whatever a test did, even when it fails half-way.
struct Cleanup {
    std::string run;
    std::string rmem_max = read_sysctl("net.core.rmem_max"), wmem_max = read_sysctl("net.core.wmem_max");
    explicit Cleanup(std::string r) : run(std::move(r)) {}
    ~Cleanup() {
        std::ofstream("/proc/sys/net/core/rmem_max") << rmem_max;
        std::ofstream("/proc/sys/net/core/wmem_max") << wmem_max;
        sh(fmt::format("{} restore {} >/dev/null 2>&1", WANLAB_BINARY, run));
        for (const char* h : {"client", "router", "server"})
            sh(fmt::format("ip netns del wanlab-{}-{} 2>/dev/null", run, h));
    }
};

/// True while process `pid` runs (a zombie nobody has reaped yet does not count).
inline bool alive(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat;
    if (!std::getline(in, stat)) return false;
    auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

/// Polls `done` every 100 ms for up to `timeout`; true once it holds.
template <typename Done>
bool eventually(Done done, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
        if (done()) return true;
        ::usleep(100'000);
    }
    return done();
}

}  // namespace wanlab::root_testing
