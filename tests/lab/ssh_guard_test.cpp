// The SSH guard's pure parts: reading sessions from SSH_CONNECTION and /proc/net/tcp, and
// whether a filtered impairment spares a peer.
#include <catch2/catch.hpp>

#include "core/address.h"
#include "lab/ssh_guard.h"

using namespace wanlab::lab;
using wanlab::addr::spared;

TEST_CASE("ssh guard reads SSH_CONNECTION as peer, peer port, local address, local port", "[lab][ssh]") {
    auto s = parse_ssh_connection("198.51.100.7 51234 198.18.5.2 22");
    REQUIRE(s);
    CHECK(s->peer == "198.51.100.7");
    CHECK(s->peer_port == 51234);
    CHECK(s->local == "198.18.5.2");
    CHECK(s->local_port == 22);
    CHECK_FALSE(parse_ssh_connection("198.51.100.7 51234"));
    CHECK_FALSE(parse_ssh_connection("a 99999 b 22"));
}

TEST_CASE("ssh guard finds established connections to local port 22 in /proc/net/tcp", "[lab][ssh]") {
    // Captured layout: local 198.18.5.2:22 <- 198.51.100.7:51234 established (01), a listener
    // on 22 (0A), and an established connection on another port.
    const char* text =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 020512C6:0016 076433C6:C822 01 00000000:00000000 02:0009B1A3 00000000     0        0 1 1\n"
        "   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1\n"
        "   2: 020512C6:01BB 076433C6:C823 01 00000000:00000000 00:00000000 00000000     0        0 3 1\n";
    // /proc prints each address as one host-order word: 198.51.100.7 reads 076433C6.
    auto sessions = parse_proc_net_tcp(text);
    REQUIRE(sessions.size() == 1);
    CHECK(sessions[0].local == "198.18.5.2");
    CHECK(sessions[0].peer == "198.51.100.7");
    CHECK(sessions[0].local_port == 22);
    CHECK(sessions[0].peer_port == 0xC822);
}

TEST_CASE("ssh guard reads IPv4 sessions on dual-stack sockets from /proc/net/tcp6", "[lab][ssh]") {
    // ::ffff:198.18.5.2 port 22 <- ::ffff:198.51.100.7, established.
    const char* text =
        "  sl  local_address                         remote_address                        st\n"
        "   0: 0000000000000000FFFF0000020512C6:0016 0000000000000000FFFF0000076433C6:C822 01 0 0 0\n";
    auto sessions = parse_proc_net_tcp(text);
    REQUIRE(sessions.size() == 1);
    CHECK(sessions[0].local == "198.18.5.2");
    CHECK(sessions[0].peer == "198.51.100.7");
}

TEST_CASE("an impairment spares an SSH peer outside its prefix or on another port", "[lab][ssh]") {
    CHECK_FALSE(spared("198.51.100.7", "", 0, 22));                 // everything impaired
    CHECK_FALSE(spared("198.51.100.7", "198.51.100.0/24", 0, 22));  // the peer is in the target
    CHECK(spared("198.51.100.7", "203.0.113.0/24", 0, 22));         // another target
    CHECK(spared("198.51.100.7", "198.51.100.8", 0, 22));           // another host
    CHECK(spared("198.51.100.7", "198.51.100.0/24", 443, 22));      // only port 443 impaired
    CHECK_FALSE(spared("198.51.100.7", "198.51.100.0/24", 22, 22));
    // The port filter matches the peer's end: an SSH client on port 51234 escapes `port = 22`.
    CHECK(spared("198.51.100.7", "198.51.100.0/24", 22, 51234));
    CHECK_FALSE(spared("198.51.100.7", "198.51.100.0/24", 51234, 51234));
    // IPv6: a real prefix match, whatever the spelling.
    CHECK_FALSE(spared("2001:db8::10", "2001:db8::/32", 0, 51234));
    CHECK_FALSE(spared("2001:DB8::5", "2001:db8::5", 0, 51234));
    CHECK(spared("2001:db9::10", "2001:db8::/32", 0, 51234));
    CHECK(spared("2001:db8:0:1::10", "2001:db8::/64", 0, 51234));
    CHECK(spared("198.51.100.7", "2001:db8::/32", 0, 51234));  // another family: not filtered
}
