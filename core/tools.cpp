#include "core/tools.h"

namespace wanlab::sys {
namespace {

const KnownTool kTools[] = {
    {"iperf3", "iperf3", "--version", "external throughput probe (tool = \"iperf3\")"},
    {"ping", "iputils-ping", "-V", "external rtt probe (tool = \"ping\")"},
    {"hping3", "hping3", "--version", "external rtt probe (tool = \"hping3\")"},
    {"wrk", "wrk", "-v", "external http probe (tool = \"wrk\")"},
    {"curl", "curl", "--version", "external transfer probe (tool = \"curl\")"},
    {"nginx", "nginx", "-v", "a real server for the examples' [[service]]s and the benchmarks"},
    {"ssh", "openssh-client", "-V", "experiments across machines ([lab] mode = \"hosts\")"},
    {"tc", "iproute2", "-V", "cross-checks in tests (wanlab itself uses netlink)"},
    {"qemu-system-x86_64", "qemu-system-x86", "--version", "wanlab vm: a stock kernel with netem"},
    {"busybox", "busybox-static", "", "wanlab vm: the micro-VM's init"},
    // What `wanlab vm fetch` runs to get the kernel.
    {"apt-cache", "apt", "", ""},
    {"apt-get", "apt", "", ""},
    {"dpkg-deb", "dpkg", "", ""},
    {"depmod", "kmod", "", ""},
};

}  // namespace

std::span<const KnownTool> known_tools() { return kTools; }

const KnownTool* known_tool(const std::string& name) {
    for (const auto& t : kTools)
        if (name == t.name) return &t;
    return nullptr;
}

std::string debian_package(const std::string& tool) {
    const auto* t = known_tool(tool);
    return t ? t->package : tool;
}

}  // namespace wanlab::sys
