#include "lab/capabilities.h"

#include <fstream>
#include <linux/capability.h>

#include <fmt/format.h>

#include "core/error.h"

namespace wanlab::lab {

std::vector<std::string> missing_capabilities(std::uint64_t cap_eff) {
    std::vector<std::string> out;
    if (!(cap_eff & (1ULL << CAP_NET_ADMIN))) out.emplace_back("CAP_NET_ADMIN");
    if (!(cap_eff & (1ULL << CAP_SYS_ADMIN))) out.emplace_back("CAP_SYS_ADMIN");
    return out;
}

std::uint64_t effective_capabilities() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("CapEff:")) return std::stoull(line.substr(7), nullptr, 16);
    return 0;
}

void require_capabilities(const std::string& action) {
    auto missing = missing_capabilities(effective_capabilities());
    if (missing.empty()) return;
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : " and ") + m;
    throw Error(fmt::format("`{}` changes the machine's network and needs CAP_NET_ADMIN and CAP_SYS_ADMIN; "
                            "missing {}. Nothing was changed. Run it as root (sudo).",
                            action, list));
}

}  // namespace wanlab::lab
