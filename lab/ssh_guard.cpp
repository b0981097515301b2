#include "lab/ssh_guard.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <sched.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/address.h"
#include "core/error.h"
#include "core/sys.h"

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

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The socket lines of /proc/net/tcp{,6}: each one's whitespace-separated fields (sl,
// local_address, rem_address, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode, ...).
std::vector<std::vector<std::string>> socket_lines(const std::string& text) {
    std::vector<std::vector<std::string>> out;
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
        std::istringstream f(line);
        std::vector<std::string> fields;
        for (std::string field; f >> field;) fields.push_back(field);
        if (fields.size() >= 4) out.push_back(std::move(fields));
    }
    return out;
}

constexpr int kListen = 0x0A;  // TCP_LISTEN

std::string link_target(const std::filesystem::path& link) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(link, ec);
    return ec ? std::string() : target.filename().string();
}

// The devices the kernel stacks directly on `dev`: its master and its upper_* links.
std::vector<std::string> direct_uppers(const std::filesystem::path& root, const std::string& dev) {
    std::vector<std::string> out;
    if (auto master = link_target(root / dev / "master"); !master.empty()) out.push_back(master);
    std::error_code ec;
    std::vector<std::string> uppers;
    for (std::filesystem::directory_iterator it(root / dev, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (name.rfind("upper_", 0) == 0) uppers.push_back(name.substr(6));
    }
    std::sort(uppers.begin(), uppers.end());
    out.insert(out.end(), uppers.begin(), uppers.end());
    return out;
}

// /sys/class/net shows the devices of the namespace sysfs was mounted in, not the reading
// thread's: for another namespace, a thread enters it, takes a private mount namespace
// (slave, so nothing propagates back) and mounts a sysfs of its own there, as `ip netns
// exec` does. The mount goes away with the thread's mount namespace.
std::vector<std::string> uppers_in(const std::string& netns, const std::string& dev) {
    if (netns.empty()) return upper_devices("/sys/class/net", dev);
    std::vector<std::string> out;
    std::string failed;
    int err = 0;
    std::thread([&] {
        auto fail = [&](const char* step) {
            err = errno;
            failed = step;
        };
        try {
            sys::NetnsScope in(netns);
            if (::unshare(CLONE_NEWNS) != 0) return fail("unshare(CLONE_NEWNS)");
            if (::mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) return fail("making / a slave mount");
            ::umount2("/sys", MNT_DETACH);
            if (::mount(netns.c_str(), "/sys", "sysfs", 0, nullptr) != 0) return fail("mounting sysfs");
            out = upper_devices("/sys/class/net", dev);
        } catch (const std::exception& e) {
            failed = e.what();
        }
    }).join();
    if (!failed.empty())
        throw Error(fmt::format("finding the devices stacked on {} in namespace {}: {}{}", dev, netns, failed,
                                err ? fmt::format(": {}", std::strerror(err)) : ""));
    return out;
}

// Every (device, address) of namespace `netns`.
std::vector<std::pair<std::string, std::string>> all_addresses(const std::string& netns) {
    std::vector<std::pair<std::string, std::string>> out;
    std::thread([&] {
        sys::NetnsScope in(netns);
        ifaddrs* list = nullptr;
        if (::getifaddrs(&list) != 0) return;
        for (auto* a = list; a; a = a->ifa_next) {
            if (!a->ifa_addr) continue;
            char text[INET6_ADDRSTRLEN] = {};
            if (a->ifa_addr->sa_family == AF_INET)
                inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
            else if (a->ifa_addr->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, text, sizeof text);
            else
                continue;
            out.emplace_back(a->ifa_name, text);
        }
        ::freeifaddrs(list);
    }).join();
    return out;
}

bool is_ipv6(const std::string& address) { return address.find(':') != std::string::npos; }

// When a value of a cutting sysctl cuts.
enum class Cuts { any_change, nonzero, zero };

// One sysctl that can cut a session of its address family (net.ipv4.* or net.ipv6.*), by
// its last component: net.ipv4.conf.DEV.rp_filter, net.ipv4.ip_forward, ...
struct CuttingSysctl {
    const char* name;
    Cuts cuts;
    const char* why;
};

const CuttingSysctl kCuttingSysctls[] = {
    {"disable_ipv6", Cuts::nonzero, "turns IPv6 off, with the session's address"},
    {"forwarding", Cuts::any_change,
     "switches the interface between host and router (IPv6: router advertisements, and with them the default "
     "route, are ignored while forwarding)"},
    {"ip_forward", Cuts::any_change,
     "switches this machine between host and router, resetting its per-interface settings"},
    {"rp_filter", Cuts::nonzero, "drops packets that arrive on an interface the reply would not leave by"},
    {"arp_ignore", Cuts::nonzero, "stops answering ARP for addresses on other interfaces"},
    {"arp_filter", Cuts::nonzero, "answers ARP only on the interface the reply would leave by"},
    {"accept_ra", Cuts::zero, "ignores router advertisements: the IPv6 default route expires"},
    {"autoconf", Cuts::zero, "stops configuring addresses from router advertisements"},
};

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

std::vector<std::pair<unsigned long, SshSession>> parse_established(const std::string& text) {
    std::vector<std::pair<unsigned long, SshSession>> out;
    for (const auto& f : socket_lines(text)) {
        try {
            if (std::stoi(f[3], nullptr, 16) != kEstablished) continue;
            auto l = parse_endpoint(f[1]), r = parse_endpoint(f[2]);
            if (!l || !r) continue;
            out.push_back({f.size() >= 10 ? std::stoul(f[9]) : 0, {l->first, r->first, l->second, r->second}});
        } catch (const std::exception&) {
            continue;  // a line that is not a socket
        }
    }
    return out;
}

std::vector<SshSession> parse_proc_net_tcp(const std::string& text, const std::set<std::uint16_t>& ports) {
    std::vector<SshSession> out;
    for (auto& [inode, s] : parse_established(text))
        if (ports.count(s.local_port)) out.push_back(std::move(s));
    return out;
}

std::vector<Listener> parse_listeners(const std::string& text) {
    std::vector<Listener> out;
    for (const auto& f : socket_lines(text)) {
        try {
            if (f.size() < 10 || std::stoi(f[3], nullptr, 16) != kListen) continue;
            auto l = parse_endpoint(f[1]);
            if (l) out.push_back({l->second, std::stoul(f[9])});
        } catch (const std::exception&) {
            continue;
        }
    }
    return out;
}

std::optional<unsigned long> socket_inode(const std::string& link) {
    const std::string head = "socket:[";
    if (link.rfind(head, 0) != 0 || link.size() < head.size() + 2 || link.back() != ']') return std::nullopt;
    std::string digits = link.substr(head.size(), link.size() - head.size() - 1);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
    return std::stoul(digits);
}

std::set<std::uint16_t> parse_sshd_config_ports(const std::string& text) {
    std::set<std::uint16_t> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        line = line.substr(0, line.find('#'));
        std::istringstream f(line);
        std::string keyword, value;
        if (!(f >> keyword >> value)) continue;
        std::transform(keyword.begin(), keyword.end(), keyword.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        if (keyword != "port") continue;
        try {
            unsigned long port = std::stoul(value);
            if (port >= 1 && port <= 65535) out.insert(static_cast<std::uint16_t>(port));
        } catch (const std::exception&) {
            continue;  // sshd itself refuses such a file
        }
    }
    if (out.empty()) out.insert(22);
    return out;
}

std::set<std::uint16_t> sshd_ports(const std::filesystem::path& proc, const std::filesystem::path& sshd_config) {
    std::set<std::uint16_t> out;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(proc, ec), end; !ec && it != end; it.increment(ec)) {
        std::string pid = it->path().filename().string();
        if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
        std::string comm = read_file(it->path() / "comm");
        if (comm != "sshd\n" && comm != "sshd") continue;
        // A process may end while it is read: what is gone reads as empty.
        std::set<unsigned long> inodes;
        std::error_code fd_ec;
        for (std::filesystem::directory_iterator fd(it->path() / "fd", fd_ec), fd_end; !fd_ec && fd != fd_end;
             fd.increment(fd_ec))
            if (auto inode = socket_inode(link_target(fd->path()))) inodes.insert(*inode);
        // The process's own namespace: sshd may listen where wanlab does not run.
        for (const char* table : {"net/tcp", "net/tcp6"})
            for (const auto& l : parse_listeners(read_file(it->path() / table)))
                if (inodes.count(l.inode)) out.insert(l.port);
    }
    if (!out.empty()) return out;
    out = parse_sshd_config_ports(read_file(sshd_config));
    out.insert(22);
    return out;
}

std::vector<std::string> upper_devices(const std::filesystem::path& sys_class_net, const std::string& dev) {
    std::vector<std::string> out;
    std::set<std::string> seen{dev};
    std::deque<std::string> todo{dev};
    while (!todo.empty()) {
        std::string next = todo.front();
        todo.pop_front();
        for (auto& up : direct_uppers(sys_class_net, next))
            if (seen.insert(up).second) {
                out.push_back(up);
                todo.push_back(up);
            }
    }
    return out;
}

std::string sysctl_cuts_session(const std::string& key, const std::string& value, const SshSession& session,
                                const std::vector<std::string>& devices) {
    const bool v6 = key.rfind("net.ipv6.", 0) == 0;
    if (!v6 && key.rfind("net.ipv4.", 0) != 0) return "";
    if (v6 != is_ipv6(session.local)) return "";  // another family's traffic
    std::string name = key.substr(key.rfind('.') + 1);
    // net.ipv4.conf.DEV.NAME: DEV as the kernel spells it here, with '/' for each '.' of
    // the device name (eth0.100 -> eth0/100).
    const std::string conf = key.substr(0, 14);
    if (conf == "net.ipv4.conf." || conf == "net.ipv6.conf.") {
        auto last = key.rfind('.');
        if (last <= 14) return "";
        std::string dev = key.substr(14, last - 14);
        std::replace(dev.begin(), dev.end(), '/', '.');
        if (dev != "all" && std::find(devices.begin(), devices.end(), dev) == devices.end()) return "";
    } else if (key != "net.ipv4.ip_forward") {
        return "";
    }
    const bool zero = value.find_first_not_of("0 \t") == std::string::npos && !value.empty();
    for (const auto& c : kCuttingSysctls) {
        if (name != c.name) continue;
        bool cuts = c.cuts == Cuts::any_change || (c.cuts == Cuts::nonzero ? !zero : zero);
        return cuts ? c.why : "";
    }
    return "";
}

std::vector<SshSession> ssh_sessions(const std::string& netns) {
    std::vector<SshSession> out;
    if (netns.empty())
        if (const char* env = std::getenv("SSH_CONNECTION"))
            if (auto s = parse_ssh_connection(env)) out.push_back(*s);
    auto ports = sshd_ports();
    // /proc/net is /proc/self/net, the namespace of the process's main thread: a thread
    // inside `netns` reads its own, /proc/thread-self/net.
    std::string tcp4, tcp6;
    std::thread([&] {
        sys::NetnsScope in(netns);
        tcp4 = read_file("/proc/thread-self/net/tcp");
        tcp6 = read_file("/proc/thread-self/net/tcp6");
    }).join();
    for (const auto* text : {&tcp4, &tcp6})
        for (auto& s : parse_proc_net_tcp(*text, ports)) out.push_back(std::move(s));
    return out;
}

void refuse_if_ssh(const std::string& netns, const std::string& dev, const std::string& prefix, std::uint16_t port,
                   bool force) {
    if (force) return;
    // The device, then each one stacked on it: a session on a bridge, bond or VLAN above
    // `dev` leaves through `dev` too.
    std::vector<std::string> carriers{dev};
    for (auto& up : uppers_in(netns, dev)) carriers.push_back(std::move(up));
    auto addresses = all_addresses(netns);
    auto carrier_of = [&](const std::string& local) -> std::optional<std::string> {
        for (const auto& c : carriers)
            for (const auto& [name, address] : addresses)
                if (name == c && address == local) return c;
        return std::nullopt;
    };
    for (const auto& s : ssh_sessions(netns)) {
        auto carrier = carrier_of(s.local);
        // A port filter matches the peer's side of the connection: destination port on the
        // way out, source port on the way in.
        if (!carrier || addr::spared(s.peer, prefix, port, s.peer_port)) continue;
        std::string through = *carrier == dev ? "" : fmt::format(" through {}, which is stacked on it", *carrier);
        throw InputError(fmt::format(
            "{} carries the SSH session from {} (to {} port {}){}: impairing it could cut you off. Impair "
            "another interface, use host mode with a [lab] target that spares {}, or give --force (and consider "
            "--auto-restore SECONDS, which undoes the change even if you lose the session)",
            dev, s.peer, s.local, s.local_port, through, s.peer));
    }
}

void refuse_sysctls_if_ssh(const std::vector<HostSysctl>& changes, bool force) {
    if (force || changes.empty()) return;
    auto addresses = all_addresses("");
    for (const auto& s : ssh_sessions("")) {
        std::vector<std::string> devices;
        for (const auto& [name, address] : addresses)
            if (address == s.local) devices.push_back(name);
        for (const auto& c : changes) {
            if (c.value == c.current) continue;
            auto why = sysctl_cuts_session(c.key, c.value, s, devices);
            if (why.empty()) continue;
            throw InputError(fmt::format(
                "host mode sets {} = \"{}\" (now \"{}\") on this machine itself, which {}: it could cut the SSH "
                "session from {} (to {} port {}{}). Leave the key out, or give --force (and consider "
                "--auto-restore SECONDS, which undoes the change even if you lose the session)",
                c.key, c.value, c.current, why, s.peer, s.local, s.local_port,
                devices.empty() ? "" : " on " + devices.front()));
        }
    }
}

}  // namespace wanlab::lab
