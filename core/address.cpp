#include "core/address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace wanlab::addr {

std::optional<Prefix> parse_prefix(const std::string& text) {
    Prefix p;
    auto slash = text.find('/');
    std::string address = text.substr(0, slash);
    if (inet_pton(AF_INET, address.c_str(), p.bytes) == 1)
        p.family = AF_INET, p.length = 32;
    else if (inet_pton(AF_INET6, address.c_str(), p.bytes) == 1)
        p.family = AF_INET6, p.length = 128;
    else
        return std::nullopt;
    if (slash == std::string::npos) return p;
    auto len = text.substr(slash + 1);
    if (len.empty() || len.size() > 3 ||
        !std::all_of(len.begin(), len.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        return std::nullopt;
    int n = std::stoi(len);
    if (n > p.length) return std::nullopt;
    p.length = n;
    return p;
}

bool in_prefix(const std::string& address, const std::string& prefix) {
    auto a = parse_prefix(address), n = parse_prefix(prefix);
    if (!a || !n || a->family != n->family) return false;
    int bits = n->length;
    for (int i = 0; bits > 0; ++i, bits -= 8) {
        auto mask = static_cast<unsigned char>(bits >= 8 ? 0xff : 0xff << (8 - bits));
        if ((a->bytes[i] & mask) != (n->bytes[i] & mask)) return false;
    }
    return true;
}

bool spared(const std::string& peer, const std::string& prefix, std::uint16_t port, std::uint16_t peer_port) {
    if (port != 0 && port != peer_port) return true;  // only another port's traffic is impaired
    if (prefix.empty()) return false;
    return !in_prefix(peer, prefix);
}

std::string ssh_destination_problem(const std::string& ssh) {
    if (ssh.empty()) return "it is empty";
    if (ssh.front() == '-') return "it starts with '-', which ssh would read as an option";
    for (unsigned char c : ssh)
        if (c <= ' ' || c == 0x7f) return "it holds whitespace or a control character";
    return "";
}

}  // namespace wanlab::addr
