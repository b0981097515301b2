// `wanlab doctor [--json]`: everything wanlab needs from this machine, checked without
// changing it: kernel, qdiscs and devices (tried in a scratch namespace), congestion
// controls, capabilities, and the external tools probes and tests can use.
#include <sys/utsname.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "lab/capabilities.h"
#include "netem/preflight.h"

namespace wanlab::cli {
namespace {

std::string read_line(const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

std::string which(const std::string& tool) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        std::string candidate = dir + "/" + tool;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return {};
}

struct Tool {
    const char* name;
    const char* package;
    const char* use;
};

const Tool kTools[] = {
    {"iperf3", "iperf3", "external throughput probe (tool = \"iperf3\")"},
    {"ping", "iputils-ping", "external rtt probe (tool = \"ping\")"},
    {"hping3", "hping3", "external rtt probe (tool = \"hping3\")"},
    {"wrk", "wrk", "external http probe (tool = \"wrk\")"},
    {"nginx", "nginx", "a real server for the http probe and benchmarks"},
    {"tc", "iproute2", "cross-checks in tests (wanlab itself uses netlink)"},
    {"qemu-system-x86_64", "qemu-system-x86", "wanlab vm: a stock kernel with netem"},
    {"busybox", "busybox-static", "wanlab vm: the micro-VM's init"},
};

}  // namespace

Runner setup_doctor(CLI::App& sub) {
    auto json = std::make_shared<bool>(false);
    sub.add_flag("--json", *json, "JSON instead of text");
    return [json] {
        utsname u{};
        uname(&u);
        auto missing = lab::missing_capabilities(lab::effective_capabilities());
        auto has = [&](const char* cap) { return std::find(missing.begin(), missing.end(), cap) == missing.end(); };
        bool net_admin = has("CAP_NET_ADMIN"), sys_admin = has("CAP_SYS_ADMIN");
        nlohmann::json report{{"kernel", fmt::format("{} {}", u.sysname, u.release)},
                              {"capabilities", {{"CAP_NET_ADMIN", net_admin}, {"CAP_SYS_ADMIN", sys_admin}}},
                              {"congestion_control",
                               {{"available", read_line("/proc/sys/net/ipv4/tcp_available_congestion_control")},
                                {"allowed", read_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control")},
                                {"default", read_line("/proc/sys/net/ipv4/tcp_congestion_control")}}}};
        std::vector<netem::Feature> features;
        std::string probe_error;
        if (net_admin && sys_admin) {
            try {
                features = netem::probe_kernel_features();
            } catch (const Error& e) {
                probe_error = e.what();
            }
        } else {
            probe_error = "not checked: trying qdiscs needs CAP_NET_ADMIN and CAP_SYS_ADMIN (run as root)";
        }
        nlohmann::json feats = nlohmann::json::object();
        for (const auto& f : features)
            feats[f.name] = {{"available", f.available},
                             {"detail", f.detail},
                             {"advice", f.available ? "" : netem::advice_for(f.name)}};
        report["kernel_features"] = feats;
        if (!probe_error.empty()) report["kernel_features_error"] = probe_error;
        nlohmann::json tools = nlohmann::json::object();
        for (const auto& t : kTools) tools[t.name] = {{"path", which(t.name)}, {"package", t.package}, {"use", t.use}};
        report["tools"] = tools;
        if (*json) {
            std::puts(report.dump(2).c_str());
            return 0;
        }
        std::printf("kernel        %s\n", report["kernel"].get<std::string>().c_str());
        std::printf("capabilities  CAP_NET_ADMIN %s, CAP_SYS_ADMIN %s\n", net_admin ? "yes" : "NO",
                    sys_admin ? "yes" : "NO");
        std::printf("congestion    available: %s; allowed in namespaces: %s; default: %s\n",
                    report["congestion_control"]["available"].get<std::string>().c_str(),
                    report["congestion_control"]["allowed"].get<std::string>().c_str(),
                    report["congestion_control"]["default"].get<std::string>().c_str());
        std::printf("qdiscs and devices (tried in a scratch namespace):\n");
        if (!probe_error.empty()) std::printf("  %s\n", probe_error.c_str());
        for (const auto& f : features) {
            std::printf("  %-10s %s%s\n", f.name.c_str(), f.available ? "yes" : "NO",
                        f.detail.empty() ? "" : fmt::format("  ({})", f.detail).c_str());
            if (!f.available && !netem::advice_for(f.name).empty())
                std::printf("             %s\n", netem::advice_for(f.name).c_str());
        }
        std::printf("tools:\n");
        for (const auto& t : kTools) {
            std::string path = which(t.name);
            std::printf("  %-19s %s\n", t.name,
                        path.empty() ? fmt::format("missing (apt-get install {}) - {}", t.package, t.use).c_str()
                                     : path.c_str());
        }
        return 0;
    };
}

}  // namespace wanlab::cli
