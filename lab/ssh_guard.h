// The SSH guard: wanlab must not cut off the session that administers the machine. Before
// link conditions go on an interface, or host mode's sysctls go on this machine, find the
// SSH sessions they could cut; each is refused unless the session is spared (a filter that
// leaves the peer alone) or the user says --force.
//
// Contract: sessions come from $SSH_CONNECTION (the session wanlab runs in) and from the
// kernel's table of established TCP connections on sshd's real listening ports (/proc/net/tcp
// and tcp6, read inside the interface's namespace; this also finds the session when sudo has
// dropped SSH_CONNECTION). sshd's ports are those of the listening sockets a process named
// sshd holds (its /proc/PID/fd links "socket:[INODE]" matched against /proc/PID/net/tcp{,6});
// when none can be read, 22 and the `Port` lines of /etc/ssh/sshd_config. An interface
// carries a session when it, or a device stacked on it (bridge or bond master, VLAN or
// macvlan on top, followed transitively through /sys/class/net/DEV/master and upper_*),
// holds the session's local address. Host mode's sysctls that can cut a session (see
// kCuttingSysctls in ssh_guard.cpp: disable_ipv6, forwarding, rp_filter, arp_ignore,
// arp_filter, accept_ra, autoconf) are refused when they would change the value under a
// session of their address family. Pure parsing is separated from reading so it is tested
// on text and on fake /proc and sysfs trees. Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace wanlab::lab {

struct SshSession {
    std::string local, peer;  ///< addresses as text ("198.18.5.2", "2001:db8::1")
    std::uint16_t local_port = 0, peer_port = 0;
};

/// A listening TCP socket from /proc/net/tcp or tcp6.
struct Listener {
    std::uint16_t port = 0;
    unsigned long inode = 0;  ///< the socket's inode, as /proc/PID/fd links name it
};

/// "peer_ip peer_port local_ip local_port", as sshd sets SSH_CONNECTION; nullopt if malformed.
std::optional<SshSession> parse_ssh_connection(const std::string& value);
/// Established connections, with each socket's inode (0 if the line has none), from the text
/// of /proc/net/tcp or tcp6.
std::vector<std::pair<unsigned long, SshSession>> parse_established(const std::string& text);
/// Established connections whose local port is one of `ports`, from the text of
/// /proc/net/tcp or tcp6.
std::vector<SshSession> parse_proc_net_tcp(const std::string& text, const std::set<std::uint16_t>& ports = {22});
/// The listening sockets (state 0A) in the text of /proc/net/tcp or tcp6.
std::vector<Listener> parse_listeners(const std::string& text);
/// The inode of a /proc/PID/fd link target "socket:[12345]"; nullopt for anything else.
std::optional<unsigned long> socket_inode(const std::string& link);
/// The ports sshd listens on according to an sshd_config text: its `Port` lines (keyword in
/// any case, `#` comments), or 22, sshd's default, when there are none.
std::set<std::uint16_t> parse_sshd_config_ports(const std::string& text);

/// sshd's listening ports, read from the tree `proc` (normally /proc): for each process whose
/// comm is "sshd", the ports of the listening sockets among its descriptors; when that finds
/// none, 22 and the ports of `sshd_config`.
std::set<std::uint16_t> sshd_ports(const std::filesystem::path& proc = "/proc",
                                   const std::filesystem::path& sshd_config = "/etc/ssh/sshd_config");

/// The devices stacked on `dev` in the sysfs tree `sys_class_net` (normally
/// /sys/class/net): its master (bridge, bond) and upper devices (VLAN, macvlan), and theirs,
/// transitively, nearest first; each once.
std::vector<std::string> upper_devices(const std::filesystem::path& sys_class_net, const std::string& dev);

/// Why setting `key` to `value` in the namespace of `session` could cut it, or "" if it
/// cannot. `devices`: the interfaces holding the session's local address (a per-interface
/// key matters for them and for "all"; "default" only reaches interfaces made later).
std::string sysctl_cuts_session(const std::string& key, const std::string& value, const SshSession& session,
                                const std::vector<std::string>& devices);

/// The sessions visible from namespace `netns` ("" = wanlab's own; else a name).
std::vector<SshSession> ssh_sessions(const std::string& netns);

/// Throws wanlab::InputError (exit 2) naming the session, the device that carries it (`dev`
/// or one stacked on it) and the way out when impairing `dev` in `netns` with the given
/// filter would cut off an SSH session, unless `force`.
void refuse_if_ssh(const std::string& netns, const std::string& dev, const std::string& prefix, std::uint16_t port,
                   bool force);

/// One sysctl value about to be written in wanlab's own namespace, and the value it has now.
struct HostSysctl {
    std::string key, value, current;
};

/// Throws wanlab::InputError (exit 2) naming the key and the session when one of `changes`
/// (host mode's, each with a value other than its current one) could cut an SSH session
/// in wanlab's own namespace, unless `force`.
void refuse_sysctls_if_ssh(const std::vector<HostSysctl>& changes, bool force);

}  // namespace wanlab::lab
