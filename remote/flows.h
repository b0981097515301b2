// The way to the other machines of a run, as this one sees it: the TCP connections a process
// holds, read from /proc (the controller's ssh connections, which the client's link
// conditions exempt, so the control path is never impaired: remote/hosts.h), and the
// interface that routes to an address (where those link conditions go).
//
// Contract: reads /proc and asks the kernel's routing table; changes nothing. A process that exits meanwhile, or a
// socket that closes, is simply not in the answer. Thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "netem/tc_command.h"

namespace wanlab::remote {

/// The established TCP connections of process `pid` and its descendants (ssh, and the
/// process of a ProxyCommand that holds the connection for it), in `pid`'s network namespace
/// (the sockets matched by inode against /proc/PID/net/tcp{,6}: lab/ssh_guard.h's parser).
std::vector<netem::Flow> tcp_flows_of(pid_t pid);

/// The connection sshd serves this process over, from its environment's SSH_CONNECTION
/// ("PEER PEER_PORT LOCAL LOCAL_PORT"), as this machine sees it; nullopt without one, or when
/// the two addresses are not one family's. `value` is the variable's text or null.
std::optional<netem::Flow> ssh_connection_flow(const char* value);

/// The interface this machine sends to `address` (an IPv4 or IPv6 address) through, as its
/// routing table says: a UDP socket connected there (which sends nothing) names the source
/// address, and the interface holding that address is the one. Throws wanlab::Error when
/// no route leads there.
std::string route_device(const std::string& address);

}  // namespace wanlab::remote
