#!/bin/sh
# Real netem checks, run INSIDE the wanlab micro-VM by run_netem_suite.sh (one boot for all).
# Usage: netem_checks.sh OUT_DIR. Writes one TAP-like line per check to stdout and to
# OUT_DIR/results (the writable --out share); prints "to-stderr" on stderr (the driver checks
# the streams stay apart); exits 7 when every check ran (the driver checks that the status
# comes back), whatever their outcome: the verdict is in the results file.
out=${1:?usage: netem_checks.sh OUT_DIR}
: >"$out/results"
note() { echo "$*"; echo "$*" >>"$out/results"; }
check() {
    desc=$1; shift
    if "$@"; then note "ok - $desc"; else note "not ok - $desc"; fi
}

# 1. netem on lo: the qdisc the host kernel cannot create.
check "tc qdisc add dev lo root netem delay 5ms" tc qdisc add dev lo root netem delay 5ms
check "tc qdisc show dev lo prints netem" sh -c 'tc qdisc show dev lo | grep -q "netem.*delay 5ms"'
tc qdisc del dev lo root 2>/dev/null

# 2. A veth pair between two namespaces, 20 ms of netem one way: RTT 20-25 ms.
ip netns add wl-a && ip netns add wl-b &&
ip link add wl-va netns wl-a type veth peer name wl-vb netns wl-b &&
ip -n wl-a addr add 198.18.0.1/30 dev wl-va && ip -n wl-b addr add 198.18.0.2/30 dev wl-vb &&
ip -n wl-a link set wl-va up && ip -n wl-b link set wl-vb up
check "veth pair between two namespaces" sh -c "ip -n wl-a link show wl-va >/dev/null"
check "netem delay 20ms on one end" tc -n wl-a qdisc add dev wl-va root netem delay 20ms
ip netns exec wl-a ping -n -q -c 1 -W 2 198.18.0.2 >/dev/null  # ARP first, outside the sample
rtt=$(ip netns exec wl-a ping -n -q -c 10 -i 0.2 -W 2 198.18.0.2 |
      sed -n 's|^rtt .* = [0-9.]*/\([0-9.]*\)/.*|\1|p')
note "# ping RTT avg over 10 pings with 20 ms netem one way: ${rtt:-none} ms"
check "ping RTT within 20-25 ms (measured ${rtt:-none})" \
    awk -v r="${rtt:-0}" 'BEGIN { exit !(r >= 20 && r <= 25) }'

# 3. The other qdiscs and modules the lab relies on.
check "tbf qdisc" tc -n wl-b qdisc add dev wl-vb root tbf rate 10mbit burst 32kbit latency 50ms
check "htb qdisc" tc -n wl-a qdisc add dev lo root handle 1: htb default 10
check "ifb device" ip -n wl-a link add wl-ifb0 type ifb
check "ingress + matchall + mirred to ifb" sh -c '
    tc -n wl-b qdisc add dev wl-vb handle ffff: ingress &&
    ip -n wl-b link add wl-ifb1 type ifb && ip -n wl-b link set wl-ifb1 up &&
    tc -n wl-b filter add dev wl-vb parent ffff: matchall \
        action mirred egress redirect dev wl-ifb1'
check "bbr congestion control" sh -c \
    'sysctl -qw net.ipv4.tcp_congestion_control=bbr &&
     grep -qw bbr /proc/sys/net/ipv4/tcp_congestion_control'

# 4. The VM's file system contract.
check "/tmp is writable" sh -c 'echo x >/tmp/wanlab-check && rm /tmp/wanlab-check'
check "the host's / is read-only" sh -c '! touch /usr/wanlab-check 2>/dev/null'

ip netns del wl-a 2>/dev/null
ip netns del wl-b 2>/dev/null
echo to-stderr >&2
note "# done"
exit 7
