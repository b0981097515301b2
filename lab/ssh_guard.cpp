#include "lab/ssh_guard.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/address.h"
#include "core/error.h"
#include "probes/sys.h"

namespace wanlab::lab {
namespace {

constexpr int kEstablished = 1;  // TCP_ESTABLISHED in /proc/net/tcp's "st" column

// "0100007F:0016" (IPv4, host byte order words) or 32 hex digits (IPv6, four host-order words).
std::optional<std::pair<std::string, std::uint16_t>> parse_endpoint(const std::string& s) {
    auto colon = s.find(':');
    if (colon == std::string::npos) return std::nullopt;
    std::string hex = s.substr(0, colon);
    auto port = static_cast<std::uint16_t>(std::stoul(s.substr(colon + 1), nullptr, 16));
    char text[INET6_ADDRSTRLEN] = {};
    if (hex.size() == 8) {
        in_addr a{};
        a.s_addr = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
        inet_ntop(AF_INET, &a, text, sizeof text);
    } else if (hex.size() == 32) {
        in6_addr a{};
        for (int w = 0; w < 4; ++w) {
            auto word =
                static_cast<std::uint32_t>(std::stoul(hex.substr(static_cast<std::size_t>(w) * 8, 8), nullptr, 16));
            std::memcpy(&a.s6_addr[w * 4], &word, 4);
        }
        inet_ntop(AF_INET6, &a, text, sizeof text);
        // An IPv4 session on a dual-stack socket: report the IPv4 address.
        if (std::strncmp(text, "::ffff:", 7) == 0 && std::strchr(text + 7, '.'))
            std::memmove(text, text + 7, std::strlen(text + 7) + 1);
    } else {
        return std::nullopt;
    }
    return std::make_pair(std::string(text), port);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

std::optional<SshSession> parse_ssh_connection(const std::string& value) {
    std::istringstream in(value);
    SshSession s;
    unsigned peer_port = 0, local_port = 0;
    if (!(in >> s.peer >> peer_port >> s.local >> local_port) || peer_port > 65535 || local_port > 65535)
        return std::nullopt;
    s.peer_port = static_cast<std::uint16_t>(peer_port);
    s.local_port = static_cast<std::uint16_t>(local_port);
    return s;
}

std::vector<SshSession> parse_proc_net_tcp(const std::string& text, std::uint16_t port) {
    std::vector<SshSession> out;
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
        std::istringstream f(line);
        std::string slot, local, remote, state;
        if (!(f >> slot >> local >> remote >> state)) continue;
        try {
            if (std::stoi(state, nullptr, 16) != kEstablished) continue;
            auto l = parse_endpoint(local), r = parse_endpoint(remote);
            if (!l || !r || l->second != port) continue;
            out.push_back({l->first, r->first, l->second, r->second});
        } catch (const std::exception&) {
            continue;  // a line that is not a socket
        }
    }
    return out;
}

std::vector<SshSession> ssh_sessions(const std::string& netns) {
    std::vector<SshSession> out;
    if (netns.empty())
        if (const char* env = std::getenv("SSH_CONNECTION"))
            if (auto s = parse_ssh_connection(env)) out.push_back(*s);
    // /proc/net is the namespace of the reading thread: read it from inside `netns`.
    std::string tcp4, tcp6;
    std::thread([&] {
        sys::NetnsScope in(netns);
        tcp4 = read_file("/proc/net/tcp");
        tcp6 = read_file("/proc/net/tcp6");
    }).join();
    for (const auto* text : {&tcp4, &tcp6})
        for (auto& s : parse_proc_net_tcp(*text)) out.push_back(std::move(s));
    return out;
}

std::vector<std::string> interface_addresses(const std::string& netns, const std::string& dev) {
    std::vector<std::string> out;
    std::thread([&] {
        sys::NetnsScope in(netns);
        ifaddrs* list = nullptr;
        if (::getifaddrs(&list) != 0) return;
        for (auto* a = list; a; a = a->ifa_next) {
            if (!a->ifa_addr || dev != a->ifa_name) continue;
            char text[INET6_ADDRSTRLEN] = {};
            if (a->ifa_addr->sa_family == AF_INET)
                inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
            else if (a->ifa_addr->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, text, sizeof text);
            else
                continue;
            out.emplace_back(text);
        }
        ::freeifaddrs(list);
    }).join();
    return out;
}

void refuse_if_ssh(const std::string& netns, const std::string& dev, const std::string& prefix, std::uint16_t port,
                   bool force) {
    if (force) return;
    auto addresses = interface_addresses(netns, dev);
    for (const auto& s : ssh_sessions(netns)) {
        bool here = std::find(addresses.begin(), addresses.end(), s.local) != addresses.end();
        // A port filter matches the peer's side of the connection: destination port on the
        // way out, source port on the way in.
        if (!here || addr::spared(s.peer, prefix, port, s.peer_port)) continue;
        throw InputError(fmt::format(
            "{} carries the SSH session from {} (to {} port {}): impairing it could cut you off. Impair "
            "another interface, use host mode with a [lab] target that spares {}, or give --force (and consider "
            "--auto-restore SECONDS, which undoes the change even if you lose the session)",
            dev, s.peer, s.local, s.local_port, s.peer));
    }
}

}  // namespace wanlab::lab
