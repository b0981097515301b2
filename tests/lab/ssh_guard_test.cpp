// The SSH guard's pure parts: reading sessions from SSH_CONNECTION and /proc/net/tcp, sshd's
// listening ports from a fake /proc tree, the devices stacked on an interface from a fake
// sysfs tree, which host-mode sysctls could cut a session, and whether a filtered
// impairment spares a peer.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/address.h"
#include "core/error.h"
#include "lab/ssh_guard.h"

using namespace wanlab::lab;
using wanlab::addr::spared;
namespace fs = std::filesystem;

namespace {

/// A temporary directory tree, removed on destruction.
struct TempTree {
    fs::path root;
    TempTree() {
        char t[] = "/tmp/wanlab-ssh-guard-XXXXXX";
        REQUIRE(::mkdtemp(t));
        root = t;
    }
    ~TempTree() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    void file(const fs::path& rel, const std::string& text) const {
        fs::create_directories((root / rel).parent_path());
        std::ofstream(root / rel) << text;
    }
    void link(const fs::path& rel, const std::string& target) const {
        fs::create_directories((root / rel).parent_path());
        fs::create_symlink(target, root / rel);
    }
};

const char* const kTcpHeader =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

}  // namespace

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

TEST_CASE("ssh guard finds established sessions on any of sshd's ports, not only 22", "[lab][ssh]") {
    // 198.18.5.2:2222 <- 198.51.100.7:51234 and 198.18.5.2:22 <- 198.51.100.7:51235, established.
    std::string text = std::string(kTcpHeader) +
                       "   0: 020512C6:08AE 076433C6:C822 01 00000000:00000000 00:00000000 00000000 0 0 11 1\n"
                       "   1: 020512C6:0016 076433C6:C823 01 00000000:00000000 00:00000000 00000000 0 0 12 1\n";
    auto on_2222 = parse_proc_net_tcp(text, {2222});
    REQUIRE(on_2222.size() == 1);
    CHECK(on_2222[0].local_port == 2222);
    CHECK(on_2222[0].peer_port == 51234);
    CHECK(parse_proc_net_tcp(text, {22, 2222}).size() == 2);
    CHECK(parse_proc_net_tcp(text, {443}).empty());
}

TEST_CASE("ssh guard reads listening sockets and their inodes from /proc/net/tcp", "[lab][ssh]") {
    std::string text = std::string(kTcpHeader) +
                       "   0: 00000000:08AE 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 4001 1\n"
                       "   1: 020512C6:08AE 076433C6:C822 01 00000000:00000000 00:00000000 00000000 0 0 4002 1\n"
                       "   2: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 5000 1\n";
    auto listeners = parse_listeners(text);
    REQUIRE(listeners.size() == 2);
    CHECK(listeners[0].port == 2222);
    CHECK(listeners[0].inode == 4001);
    CHECK(listeners[1].port == 80);
    CHECK(listeners[1].inode == 5000);
}

TEST_CASE("ssh guard reads a socket inode only from a socket:[N] descriptor link", "[lab][ssh]") {
    CHECK(socket_inode("socket:[4001]") == 4001ul);
    CHECK_FALSE(socket_inode("pipe:[4001]"));
    CHECK_FALSE(socket_inode("socket:[]"));
    CHECK_FALSE(socket_inode("socket:[12a]"));
    CHECK_FALSE(socket_inode("/dev/null"));
}

TEST_CASE("ssh guard reads sshd_config Port lines, 22 when there are none", "[lab][ssh]") {
    CHECK(parse_sshd_config_ports("# Port 2200\nPermitRootLogin no\n") == std::set<std::uint16_t>{22});
    CHECK(parse_sshd_config_ports("Port 2200\n  port 443 # also https\nPort 99999\nPort x\n") ==
          std::set<std::uint16_t>{443, 2200});
}

TEST_CASE("ssh guard takes sshd's ports from the listening sockets an sshd process holds", "[lab][ssh]") {
    TempTree proc;
    // sshd (pid 100) listens on 2222 (inode 4001) and holds a session socket (4002); nginx
    // (pid 200) listens on 80 (inode 5000), which is no SSH port.
    std::string tcp = std::string(kTcpHeader) +
                      "   0: 00000000:08AE 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 4001 1\n"
                      "   1: 020512C6:08AE 076433C6:C822 01 00000000:00000000 00:00000000 00000000 0 0 4002 1\n"
                      "   2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 5000 1\n";
    proc.file("100/comm", "sshd\n");
    proc.link("100/fd/3", "socket:[4001]");
    proc.link("100/fd/4", "socket:[4002]");
    proc.link("100/fd/5", "/dev/null");
    proc.file("100/net/tcp", tcp);
    proc.file("100/net/tcp6", kTcpHeader);
    proc.file("200/comm", "nginx\n");
    proc.link("200/fd/3", "socket:[5000]");
    proc.file("200/net/tcp", tcp);
    proc.file("self/comm", "sshd\n");  // not a pid
    proc.file("sshd_config", "Port 2200\n");
    CHECK(sshd_ports(proc.root, proc.root / "sshd_config") == std::set<std::uint16_t>{2222});
}

TEST_CASE("ssh guard falls back to 22 and sshd_config's ports when no sshd socket can be read", "[lab][ssh]") {
    TempTree proc;
    proc.file("200/comm", "nginx\n");
    proc.file("sshd_config", "Port 2200\n");
    CHECK(sshd_ports(proc.root, proc.root / "sshd_config") == std::set<std::uint16_t>{22, 2200});
    CHECK(sshd_ports(proc.root, proc.root / "missing") == std::set<std::uint16_t>{22});
}

TEST_CASE("ssh guard follows master and upper links to every device stacked on an interface", "[lab][ssh]") {
    TempTree net;
    // eth0 is a port of bridge br0, which carries VLAN br0.100; eth1 has macvlan mv0 on top;
    // bond0 enslaves eth2 and eth3.
    for (const char* dev : {"eth0", "br0", "br0.100", "eth1", "mv0", "eth2", "eth3", "bond0"})
        fs::create_directories(net.root / dev);
    net.link("eth0/master", "../br0");
    net.link("eth0/upper_br0", "../br0");
    net.link("br0/upper_br0.100", "../br0.100");
    net.link("eth1/upper_mv0", "../mv0");
    net.link("eth2/master", "../bond0");
    net.link("eth3/master", "../bond0");
    net.link("bond0/upper_bond0.7", "../bond0.7");
    CHECK(upper_devices(net.root, "eth0") == std::vector<std::string>{"br0", "br0.100"});
    CHECK(upper_devices(net.root, "br0") == std::vector<std::string>{"br0.100"});
    CHECK(upper_devices(net.root, "eth1") == std::vector<std::string>{"mv0"});
    CHECK(upper_devices(net.root, "eth3") == std::vector<std::string>{"bond0", "bond0.7"});
    CHECK(upper_devices(net.root, "br0.100").empty());
    CHECK(upper_devices(net.root, "missing").empty());
}

TEST_CASE("ssh guard stops at a cycle of upper links", "[lab][ssh]") {
    TempTree net;
    fs::create_directories(net.root / "a");
    fs::create_directories(net.root / "b");
    net.link("a/upper_b", "../b");
    net.link("b/upper_a", "../a");
    CHECK(upper_devices(net.root, "a") == std::vector<std::string>{"b"});
}

TEST_CASE("host-mode sysctls that can cut a session are named for sessions of their family", "[lab][ssh]") {
    SshSession v4{"198.18.5.2", "198.51.100.7", 22, 51234};
    SshSession v6{"2001:db8::2", "2001:db8::7", 2222, 51234};
    std::vector<std::string> on_eth0{"eth0"};
    // IPv6 off cuts an IPv6 session, on its interface or everywhere, not an IPv4 one.
    CHECK_THAT(sysctl_cuts_session("net.ipv6.conf.all.disable_ipv6", "1", v6, on_eth0), Catch::Contains("IPv6 off"));
    CHECK_FALSE(sysctl_cuts_session("net.ipv6.conf.eth0.disable_ipv6", "1", v6, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv6.conf.eth0.disable_ipv6", "0", v6, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv6.conf.all.disable_ipv6", "1", v4, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv6.conf.eth1.disable_ipv6", "1", v6, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv6.conf.default.disable_ipv6", "1", v6, on_eth0).empty());
    // Forwarding, either way.
    CHECK_FALSE(sysctl_cuts_session("net.ipv4.ip_forward", "1", v4, on_eth0).empty());
    CHECK_FALSE(sysctl_cuts_session("net.ipv4.conf.all.forwarding", "0", v4, on_eth0).empty());
    CHECK_FALSE(sysctl_cuts_session("net.ipv6.conf.eth0.forwarding", "1", v6, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv6.conf.all.forwarding", "1", v4, on_eth0).empty());
    // Reverse-path and ARP filters when switched on; router advertisements when switched off.
    CHECK_FALSE(sysctl_cuts_session("net.ipv4.conf.eth0.rp_filter", "1", v4, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv4.conf.eth0.rp_filter", "0", v4, on_eth0).empty());
    CHECK_FALSE(sysctl_cuts_session("net.ipv4.conf.all.arp_ignore", "2", v4, on_eth0).empty());
    CHECK_FALSE(sysctl_cuts_session("net.ipv4.conf.all.arp_filter", "1", v4, on_eth0).empty());
    CHECK_FALSE(sysctl_cuts_session("net.ipv6.conf.eth0.accept_ra", "0", v6, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv6.conf.eth0.accept_ra", "2", v6, on_eth0).empty());
    // A VLAN device's key spells its dot as '/'.
    CHECK_FALSE(sysctl_cuts_session("net.ipv4.conf.eth0/100.rp_filter", "1", v4, {"eth0.100"}).empty());
    // Keys that never cut a session.
    CHECK(sysctl_cuts_session("net.core.rmem_max", "1", v4, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv4.tcp_congestion_control", "bbr", v4, on_eth0).empty());
    CHECK(sysctl_cuts_session("net.ipv4.conf.eth0.log_martians", "1", v4, on_eth0).empty());
}

TEST_CASE("host mode refuses a sysctl that could cut the session wanlab runs in unless forced", "[lab][ssh]") {
    const char* saved = std::getenv("SSH_CONNECTION");
    std::string old = saved ? saved : "";
    ::setenv("SSH_CONNECTION", "198.51.100.7 51234 192.0.2.77 2222", 1);
    std::vector<HostSysctl> rp{{"net.ipv4.conf.all.rp_filter", "1", "0"}};
    std::string message;
    try {
        refuse_sysctls_if_ssh(rp, false);
    } catch (const wanlab::InputError& e) {
        message = e.what();
    }
    CHECK(message ==
          "host mode sets net.ipv4.conf.all.rp_filter = \"1\" (now \"0\") on this machine itself, which drops packets "
          "that arrive on an interface the reply would not leave by: it could cut the SSH session from 198.51.100.7 "
          "(to 192.0.2.77 port 2222). Leave the key out, or give --force (and consider --auto-restore SECONDS, which "
          "undoes the change even if you lose the session)");
    CHECK_NOTHROW(refuse_sysctls_if_ssh(rp, true));
    CHECK_NOTHROW(refuse_sysctls_if_ssh({{"net.ipv4.conf.all.rp_filter", "1", "1"}}, false));  // no change
    if (saved)
        ::setenv("SSH_CONNECTION", old.c_str(), 1);
    else
        ::unsetenv("SSH_CONNECTION");
}
