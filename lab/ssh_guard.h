// The SSH guard: wanlab must not cut off the session that administers the machine. Before
// link conditions go on an interface, find the SSH sessions it carries; impairing it is
// refused unless every such session is spared (a filter that leaves the peer alone) or the
// user says --force.
//
// Contract: sessions come from $SSH_CONNECTION (the session wanlab runs in) and from the
// kernel's table of established TCP connections whose local port is 22 (/proc/net/tcp and
// tcp6, read inside the interface's namespace; this also finds the session when sudo has
// dropped SSH_CONNECTION). An interface carries a session when it holds the session's local
// address. Pure parsing is separated from reading so it is tested on text. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wanlab::lab {

struct SshSession {
    std::string local, peer;  ///< addresses as text ("198.18.5.2", "2001:db8::1")
    std::uint16_t local_port = 0, peer_port = 0;
};

/// "peer_ip peer_port local_ip local_port", as sshd sets SSH_CONNECTION; nullopt if malformed.
std::optional<SshSession> parse_ssh_connection(const std::string& value);
/// Established connections with local port `port` from the text of /proc/net/tcp or tcp6.
std::vector<SshSession> parse_proc_net_tcp(const std::string& text, std::uint16_t port = 22);

/// The sessions visible from namespace `netns` ("" = wanlab's own; else a name).
std::vector<SshSession> ssh_sessions(const std::string& netns);
/// The addresses `dev` holds in namespace `netns`.
std::vector<std::string> interface_addresses(const std::string& netns, const std::string& dev);

/// Throws wanlab::InputError (exit 2) naming the session and the way out when impairing `dev`
/// in `netns` with the given filter would cut off an SSH session, unless `force`.
void refuse_if_ssh(const std::string& netns, const std::string& dev, const std::string& prefix, std::uint16_t port,
                   bool force);

}  // namespace wanlab::lab
