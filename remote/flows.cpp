#include "remote/flows.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/sys.h"
#include "lab/ssh_guard.h"

namespace wanlab::remote {
namespace {

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::set<pid_t> with_descendants(pid_t root) {
    std::set<pid_t> out{root};
    std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
        auto name = it->path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        auto stat = slurp(it->path() / "stat");
        auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 1));
        std::string state;
        pid_t ppid = 0;
        if (rest >> state >> ppid) parent_of.emplace_back(std::stoi(name), ppid);
    }
    for (bool grew = true; grew;) {
        grew = false;
        for (const auto& [pid, ppid] : parent_of)
            if (out.count(ppid) && out.insert(pid).second) grew = true;
    }
    return out;
}

}  // namespace

std::vector<netem::Flow> tcp_flows_of(pid_t pid) {
    std::set<unsigned long> inodes;
    for (pid_t p : with_descendants(pid)) {
        std::error_code ec;
        auto fds = std::filesystem::path("/proc") / std::to_string(p) / "fd";
        for (std::filesystem::directory_iterator it(fds, ec), end; !ec && it != end; it.increment(ec)) {
            std::error_code link_ec;
            auto target = std::filesystem::read_symlink(it->path(), link_ec).string();
            if (auto inode = lab::socket_inode(target); inode && !link_ec) inodes.insert(*inode);
        }
    }
    std::vector<netem::Flow> out;
    auto net = std::filesystem::path("/proc") / std::to_string(pid) / "net";
    for (const char* table : {"tcp", "tcp6"})
        for (auto& [inode, s] : lab::parse_established(slurp(net / table)))
            if (inode && inodes.count(inode)) out.push_back({s.local, s.local_port, s.peer, s.peer_port});
    return out;
}

std::string route_device(const std::string& address) {
    sockaddr_storage to{};
    socklen_t to_len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&to);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&to);
    if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(9);  // discard; nothing is sent
        to_len = sizeof *v4;
    } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(9);
        to_len = sizeof *v6;
    } else {
        throw InputError(fmt::format("`{}` is not an IP address", address));
    }
    sys::Fd s(::socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) sys::fail_errno("a socket to look up the route");
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&to), to_len) != 0)
        sys::fail_errno(fmt::format("finding the route to {}", address));
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&from), &from_len) != 0)
        sys::fail_errno("reading the route's source address");
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) sys::fail_errno("listing this machine's addresses");
    std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, ::freeifaddrs);
    for (auto* a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != from.ss_family) continue;
        bool same = from.ss_family == AF_INET
                        ? reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr ==
                              reinterpret_cast<sockaddr_in*>(&from)->sin_addr.s_addr
                        : std::memcmp(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr,
                                      &reinterpret_cast<sockaddr_in6*>(&from)->sin6_addr, sizeof(in6_addr)) == 0;
        if (!same) continue;
        if (std::string(a->ifa_name) == "lo")
            throw InputError(
                fmt::format("{} is this machine itself (the route goes through lo): [link] conditions "
                            "need the server on another machine",
                            address));
        return a->ifa_name;
    }
    throw Error(
        fmt::format("no interface holds the source address of the route to {}; give [hosts.client] dev", address));
}

std::optional<netem::Flow> ssh_connection_flow(const char* value) {
    if (!value) return std::nullopt;
    std::istringstream in(value);
    std::string peer, local;
    unsigned peer_port = 0, local_port = 0;
    if (!(in >> peer >> peer_port >> local >> local_port) || peer_port > 65535 || local_port > 65535)
        return std::nullopt;
    // Both ends in one family (sshd reports an IPv4 peer of a dual-stack socket as IPv4).
    in6_addr a{}, b{};
    bool v4 = ::inet_pton(AF_INET, peer.c_str(), &a) == 1 && ::inet_pton(AF_INET, local.c_str(), &b) == 1;
    bool v6 = ::inet_pton(AF_INET6, peer.c_str(), &a) == 1 && ::inet_pton(AF_INET6, local.c_str(), &b) == 1;
    if (!v4 && !v6) return std::nullopt;
    return netem::Flow{local, static_cast<std::uint16_t>(local_port), peer, static_cast<std::uint16_t>(peer_port)};
}

}  // namespace wanlab::remote
