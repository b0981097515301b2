// IP addresses and prefixes as the target filter, the loader and the SSH guard read them:
// "203.0.113.7", "198.18.0.0/15", "2001:db8::/32". One parser, so what the loader accepts,
// what the u32 filter matches and what the guard thinks is impaired cannot drift apart.
// Pure; thread-safe.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>

namespace wanlab::addr {

struct Prefix {
    int family = 0;                ///< AF_INET or AF_INET6
    unsigned char bytes[16] = {};  ///< network order; the first 4 for AF_INET
    int length = 0;                ///< prefix length; 32 or 128 for a single address
    /// True when the prefix names one address (no length, or /32, /128).
    bool single() const { return length == (family == AF_INET ? 32 : 128); }
};

/// The address or prefix in `text`, or nullopt when it is neither (or its length is out of
/// range for its family).
std::optional<Prefix> parse_prefix(const std::string& text);

/// Whether `address` (an address, as text) lies inside `prefix`; false across families or
/// when either does not parse.
bool in_prefix(const std::string& address, const std::string& prefix);

/// Whether traffic to `peer`, whose end of the connection is port `peer_port`, escapes an
/// impairment limited to `prefix` ("" = all traffic, "198.18.0.0/15", "2001:db8::/32") and
/// `port` (0 = any): the target filter matches the port on the peer's side (destination port
/// out, source port in), so an SSH client's session escapes any port filter but its own port.
bool spared(const std::string& peer, const std::string& prefix, std::uint16_t port, std::uint16_t peer_port);

/// Why `ssh` cannot be handed to ssh as its destination (user@host, host, or an alias of
/// the user's ssh config), or "": empty, starting with '-' (ssh would read it as an option),
/// or holding whitespace or control characters.
std::string ssh_destination_problem(const std::string& ssh);

}  // namespace wanlab::addr
