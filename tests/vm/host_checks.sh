#!/bin/sh
# Inside the micro-VM (real netem), as root: host mode ([lab] mode = "host") end to end. The
# VM's "real interface" is a veth wlhost0 (198.18.9.1/24) whose peer lives in the namespace
# wl-far: the target 198.18.9.2, running iperf3 -s and an HTTP server, and 198.18.9.3, which
# the target filter must leave unimpaired. Writes one TAP-like line per check to OUT/results.
# Usage: host_checks.sh WANLAB SRC OUT
wanlab=$1 src=$2 out=$3
. "$src/tests/vm/checks_lib.sh"
between() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v + 0 >= lo && v + 0 <= hi) }'; }
# The smallest of N pings, in ms: the path's delay without the emulated CPU's hiccups.
min_ms() { ping -q -n -c "$2" -i 0.05 "$1" | sed -n 's|.*= \([0-9.]*\)/.*|\1|p'; }

ip netns add wl-far
ip link add wlhost0 type veth peer name far0 netns wl-far
ip addr add 198.18.9.1/24 dev wlhost0 && ip link set wlhost0 up
ip -n wl-far addr add 198.18.9.2/24 dev far0 && ip -n wl-far addr add 198.18.9.3/24 dev far0
ip -n wl-far link set far0 up && ip -n wl-far link set lo up
ip netns exec wl-far iperf3 -s -D -B 198.18.9.2 >/dev/null 2>&1
ip netns exec wl-far python3 -m http.server 8080 --bind 198.18.9.2 --directory "$src/tests/vm/run" >/dev/null 2>&1 &
http=$!
sleep 1

# The machine as wanlab must give it back: the interface's qdiscs and filters, both ways.
state() {
    { ip -o link show | sed 's/^[0-9]*: //' | cut -d' ' -f1-2; tc qdisc show; tc filter show dev wlhost0
      tc filter show dev wlhost0 ingress; sysctl -n net.core.rmem_max; ls /run/wanlab/*.journal 2>/dev/null; } | sort
}
state >"$out/state.before"
same_state() { state | diff "$out/state.before" - >"$out/diff.$1"; }
bare=$(min_ms 198.18.9.2 10)
ok "bare path: ping 198.18.9.2 min $bare ms"

# 1. A host-mode run: probes from here against the target's own servers, through the filter.
db=$out/host/results.db
"$wanlab" run "$src/tests/vm/run/host.toml" --out "$out/host" --run host1 >"$out/host.stdout" 2>"$out/host.stderr"
rc=$?
check "host-mode run exits 0 [rc=$rc]" [ "$rc" = 0 ]
metric() { q "$db" "select avg(value) from metric_values where run_id='host1' and trial=$1 and probe='$2' and metric='$3'"; }
p50=$(metric 1 icmp rtt_p50)
check "trial 1: ICMP RTT to the target is bare + 40 ms (20 ms each way) [p50=$p50 s, bare $bare ms]" \
    between "$p50" 0.040 $(awk -v b="$bare" 'BEGIN { print 0.045 + b / 1000 }')
p50=$(metric 2 icmp rtt_p50)
check "trial 2 (delay taken away mid-run): RTT back near the bare path [p50=$p50 s]" between "$p50" 0 0.005
tp=$(metric 1 bulk throughput)
check "iperf3 against the target's iperf3 -s measured through the filter [throughput=$tp bit/s]" between "$tp" 1e6 1e12
req=$(metric 1 web requests) err=$(metric 1 web errors)
check "http load against the target's own server [requests=$req errors=$err]" sh -c "between() { awk -v v=\"\$1\" 'BEGIN { exit !(v + 0 >= 1) }'; }; between '$req' && [ '$err' = 0.0 -o '$err' = 0 ]"
check "the emulation check says host mode" \
    [ "$(q "$db" "select count(*) from trials where run_id='host1' and emulation_check like '%host mode%'")" = 2 ]
check "host-mode run restored the interface (qdiscs, filters, no ifb left)" same_state run

# 1b. A schedule in host mode: the player changes the filtered tree in place, both ways.
"$wanlab" run "$src/tests/vm/run/host-schedule.toml" --out "$out/hsched" --run hsched \
    >"$out/hsched.stdout" 2>"$out/hsched.stderr"
rc=$?
check "host mode with a schedule exits 0 [rc=$rc]" [ "$rc" = 0 ]
"$wanlab" results show hsched --out "$out/hsched" --export json >"$out/hsched.json"
steps=$(python3 -c '
import json, statistics, sys
m = json.load(open(sys.argv[1]))["measurements"][0]["series"]
d = list(zip(m["link.up.delay"]["t"], m["link.up.delay"]["value"]))
t = [a for a, v in d if v > 0.03][0]
r = list(zip(m["rtt"]["t"], m["rtt"]["value"]))
lo = statistics.median(v for a, v in r if 0.2 <= a < t)
hi = statistics.median(v for a, v in r if a >= t + 0.15)
print(f"{lo*1e3:.1f} {hi*1e3:.1f} {t:.4f}")' "$out/hsched.json")
set -- $steps
check "host mode: the RTT to the target steps from 20 to 80 ms at the scheduled change [median $1 ms, then $2 ms, change at $3 s]" \
    sh -c "awk -v a='$1' -v b='$2' -v bare='$bare' 'BEGIN { exit !(a >= 20 && a <= 25 + bare && b >= 80 && b <= 85 + bare) }'"
check "host mode with a schedule restored the interface" same_state hsched

# 2. lab up: only the target's traffic is impaired; kill -9, then `wanlab restore`.
"$wanlab" lab up "$src/tests/vm/run/host.toml" --run hup >"$out/labup.stdout" 2>"$out/labup.stderr" &
pid=$!
i=0; while [ $i -lt 100 ] && ! grep -q "is up" "$out/labup.stdout"; do sleep 0.1; i=$((i + 1)); done
check "lab up in host mode comes up" grep -q "is up" "$out/labup.stdout"
target=$(min_ms 198.18.9.2 10) other=$(min_ms 198.18.9.3 10)
check "the target's pings take 40 ms more [min $target ms, bare $bare ms]" between "$target" 40 $(awk -v b="$bare" 'BEGIN { print 45 + b }')
check "another address on the same interface is spared [min $other ms]" between "$other" 0 5
kill -9 $pid; wait $pid 2>/dev/null
check "after kill -9 the interface is still impaired and the journal is left" \
    sh -c "tc qdisc show dev wlhost0 | grep -q netem && ls /run/wanlab/hup.journal >/dev/null"
"$wanlab" restore >"$out/restore.out" 2>&1
rc=$?
check "wanlab restore exits 0 [rc=$rc]" [ "$rc" = 0 ]
check "after kill -9 + restore: the interface as before" same_state kill

# 3. The SSH guard: a session whose peer is the target is refused, one the filter spares is not.
SSH_CONNECTION="198.18.9.2 50000 198.18.9.1 22" "$wanlab" run "$src/tests/vm/run/host.toml" --out "$out/guard" \
    --run guard1 >/dev/null 2>"$out/guard.stderr"
rc=$?
check "a run that would impair the SSH session's peer is refused [rc=$rc]" \
    sh -c "[ $rc = 2 ] && grep -q 'carries the SSH session from 198.18.9.2' '$out/guard.stderr'"
check "the refused run changed nothing" same_state guard
SSH_CONNECTION="198.18.9.3 50000 198.18.9.1 22" "$wanlab" run "$src/tests/vm/run/host-long.toml" --out "$out/spared" \
    --run spared1 --quiet --set run.repeats=1 >/dev/null 2>"$out/spared.stderr"
rc=$?
check "a session the target filter spares does not stop the run [rc=$rc]" [ "$rc" = 0 ]
check "... and it restored the interface" same_state spared

# 4. --auto-restore: the watchdog ends a run that outlives its deadline, and restores at once
#    after a kill -9 without anyone running `wanlab restore`.
start=$(date +%s)
"$wanlab" run "$src/tests/vm/run/host-long.toml" --out "$out/auto" --run auto1 --auto-restore 4 --quiet \
    >"$out/auto.stdout" 2>"$out/auto.stderr"
rc=$? took=$(( $(date +%s) - start ))
check "the watchdog ended the run at its deadline by SIGTERM [rc=$rc, ${took} s]" sh -c "[ $rc = 130 ] && [ $took -lt 30 ]"
check "the run is recorded as interrupted" [ "$(q "$out/auto/results.db" "select status from runs where id='auto1'")" = interrupted ]
sleep 1
check "after the watchdog's deadline: the interface and sysctl as before" same_state auto
"$wanlab" run "$src/tests/vm/run/host-long.toml" --out "$out/auto9" --run auto9 --auto-restore 600 --quiet \
    >/dev/null 2>"$out/auto9.stderr" &
pid=$!
i=0; while [ $i -lt 100 ] && ! tc qdisc show dev wlhost0 | grep -q netem; do sleep 0.1; i=$((i + 1)); done
check "the long run impaired the interface" sh -c "tc qdisc show dev wlhost0 | grep -q netem"
kill -9 $pid; wait $pid 2>/dev/null
i=0; while [ $i -lt 100 ] && [ -e /run/wanlab/auto9.journal ]; do sleep 0.1; i=$((i + 1)); done
check "after kill -9 the watchdog restored by itself: the interface and sysctl as before" same_state auto9
check "the watchdog's log shows the restore" grep -q "the machine is back as it was" /run/wanlab/auto9.watchdog.log

# 5. An interface with a root tree and filters of the user's: a run that would replace the
#    root is refused before anything changes; one that impairs only the way in leaves them.
tc qdisc add dev wlhost0 root handle 5: htb default 1 && tc class add dev wlhost0 parent 5: classid 5:1 htb rate 1gbit &&
    tc filter add dev wlhost0 parent 5: protocol ip prio 3 u32 match ip dst 198.18.9.77/32 flowid 5:1 &&
    tc qdisc add dev wlhost0 ingress &&
    tc filter add dev wlhost0 parent ffff: protocol ip prio 1 u32 match ip src 198.18.9.77/32 flowid 1:1
state >"$out/state.user"
"$wanlab" run "$src/tests/vm/run/host.toml" --out "$out/user" --run user1 --quiet >/dev/null 2>"$out/user.stderr"
rc=$?
check "a root tree with the user's filters is refused with exit 2 [rc=$rc]" \
    sh -c "[ $rc = 2 ] && grep -q 'root qdisc tree has 1 filter of its own' '$out/user.stderr'"
state | diff "$out/state.user" - >"$out/diff.user-refused"
check "the refused run left the user's tree and filters as they were" [ $? = 0 ]
"$wanlab" run "$src/tests/vm/run/host-down.toml" --out "$out/down" --run down1 --quiet >/dev/null 2>"$out/down.stderr"
rc=$?
p50=$(q "$out/down/results.db" "select avg(value) from metric_values where run_id='down1' and metric='rtt_p50'")
check "the way in alone is impaired next to the user's ingress filter [rc=$rc, p50=$p50 s]" \
    sh -c "[ $rc = 0 ] && awk -v v='$p50' 'BEGIN { exit !(v >= 0.020 && v <= 0.026) }'"
state | diff "$out/state.user" - >"$out/diff.user-down"
check "... and the user's root tree, its filter and the ingress filter are as they were" [ $? = 0 ]
tc qdisc del dev wlhost0 root; tc qdisc del dev wlhost0 ingress

# 6. Nobody reads the progress any more (a pipe closed early): the run still gives the
#    machine back instead of dying of SIGPIPE.
"$wanlab" run "$src/tests/vm/run/host-long.toml" --out "$out/pipe" --run pipe1 --set run.repeats=2 2>&1 | true
i=0; while [ $i -lt 100 ] && [ -e /run/wanlab/pipe1.journal ]; do sleep 0.1; i=$((i + 1)); done
check "with its output pipe closed, the run still restored the interface and sysctl" same_state pipe

# 7. Two machines ([lab] mode = "hosts"): the target is a machine with its own sshd, which
#    the run reaches as ssh reaches any host. The link conditions go on this machine's way to
#    it (wlhost0, found from the routing table) and spare the run's own ssh connection: the
#    netem queues carry exactly the probe's packets, though the controller pings the far
#    agent every 5 s of the 6 s probe.
keys=$out/ssh
mkdir -p "$keys" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$keys/host_key" && ssh-keygen -q -t ed25519 -N '' -f "$keys/key" &&
    cp "$keys/key.pub" "$keys/authorized_keys"
printf '%s\n' "Port 22" "ListenAddress 198.18.9.2" "HostKey $keys/host_key" "AuthorizedKeysFile $keys/authorized_keys" \
    "PermitRootLogin prohibit-password" "StrictModes no" "PasswordAuthentication no" \
    "KbdInteractiveAuthentication no" "UsePAM no" "PidFile $keys/sshd.pid" >"$keys/sshd_config"
printf '%s\n' "Host far" "  HostName 198.18.9.2" "  User root" "  IdentityFile $keys/key" "  IdentitiesOnly yes" \
    "  UserKnownHostsFile /dev/null" "  StrictHostKeyChecking no" "  LogLevel ERROR" >"$keys/ssh_config"
ip netns exec wl-far /usr/sbin/sshd -f "$keys/sshd_config" -E "$keys/sshd.log"
check "the far machine's sshd answers" sh -c "ssh -F '$keys/ssh_config' -o BatchMode=yes far echo up | grep -q up"
printf '%s\n' 'name = "hosts-link"' '[lab]' 'mode = "hosts"' '[hosts]' "ssh_config = \"$keys/ssh_config\"" \
    '[hosts.client]' 'ssh = "local"' '[hosts.server]' 'ssh = "far"' 'address = "198.18.9.2"' "wanlab = \"$wanlab\"" \
    '[link]' 'rtt = "40ms"' '[[probe]]' 'name = "icmp"' 'kind = "rtt"' 'method = "icmp"' 'count = 60' \
    'interval = "100ms"' '[run]' 'repeats = 1' 'warmup = "0s"' 'cooldown = "0s"' >"$out/hosts-link.toml"
db=$out/hostslink/results.db
"$wanlab" run "$out/hosts-link.toml" --out "$out/hostslink" --run hl1 >"$out/hostslink.stdout" 2>"$out/hostslink.stderr"
rc=$?
check "a hosts-mode run with link conditions exits 0 [rc=$rc]" [ "$rc" = 0 ]
p50=$(q "$db" "select avg(value) * 1000 from metric_values where run_id='hl1' and metric='rtt_p50'")
check "its ICMP RTT to the far machine is bare + 40 ms (20 ms each way) [p50=$p50 ms, bare $bare ms]" \
    between "$p50" "$(echo "40 + $bare" | bc -l)" "$(echo "40 + $bare + 4" | bc -l)"
cnt() { q "$db" "select json_extract(counters, '\$.qdisc.\"$1\"') from measurements where run_id='hl1'"; }
up=$(cnt up.netem.sent_packets) down=$(cnt down.netem.sent_packets)
check "netem each way carried the 60 echoes and nothing of ssh's [up=$up down=$down]" \
    [ "${up%.0}" = 60 -a "${down%.0}" = 60 ]
check "after the hosts-mode run: machine as before" same_state hostslink
# The buffer result across the two machines (examples/two-hosts.toml): the far machine's
# agent sets its own tcp_rmem and runs the built-in throughput probe's receiver under it.
tp() { q "$db" "select avg(value) from metric_values where run_id = 'th1' and variant = '$1' and metric = '$2'"; }
db=$out/twohosts/results.db
far_rmem=$(ip netns exec wl-far sysctl -n net.ipv4.tcp_rmem)
"$wanlab" run "$src/examples/two-hosts.toml" --set hosts.server.ssh=far --set hosts.server.address=198.18.9.2 \
    --set "hosts.ssh_config=$keys/ssh_config" --set "hosts.server.wanlab=$wanlab" --set run.repeats=1 \
    --set run.warmup=0s --set run.cooldown=0s --set probe.bulk.duration=4s --out "$out/twohosts" --run th1 \
    >"$out/twohosts.stdout" 2>"$out/twohosts.stderr"
rc=$?
check "examples/two-hosts.toml against the far machine exits 0 [rc=$rc]" [ "$rc" = 0 ]
small=$(tp server-small throughput) raised=$(tp server-raised throughput)
granted=$(tp server-small rcvbuf_granted)
check "two-hosts: server-small is window-bound near 41 Mbit/s (25-50) [$small bit/s]" between "$small" 25e6 50e6
check "two-hosts: server-raised carries >= 1.6x server-small [$raised vs $small bit/s]" \
    awk -v a="$raised" -v b="$small" 'BEGIN { exit !(a + 0 >= 1.6 * b && b > 0) }'
check "two-hosts: the receiver's buffer was granted on the far machine, within its 512 KiB tcp_rmem [$granted]" \
    between "$granted" 1 524288
check "two-hosts: the advice names tcp_rmem on the server" \
    grep -q "net.ipv4.tcp_rmem max on server = 524288" "$out/twohosts.stdout"
check "two-hosts: the far machine's tcp_rmem is given back [$(ip netns exec wl-far sysctl -n net.ipv4.tcp_rmem)]" \
    [ "$(ip netns exec wl-far sysctl -n net.ipv4.tcp_rmem)" = "$far_rmem" ]
check "after the two-hosts run: machine as before" same_state twohosts
for p in $(ip netns pids wl-far); do [ "$(cat /proc/"$p"/comm)" = sshd ] && kill "$p"; done

# 8. With a middle box ([hosts.router]): client (here) -> wl-mid (forwarding) -> wl-end, each
#    a machine with its own sshd. The router's agent finds its interface toward the server
#    (mid1) and impairs it both ways, sparing the controller's ssh to the server, which
#    crosses it. A command probe after the rtt probe reads the router's netem queues.
ip netns add wl-mid && ip netns add wl-end
ip link add wlmid0 type veth peer name mid0 netns wl-mid
ip -n wl-mid link add mid1 type veth peer name end0 netns wl-end
ip addr add 198.18.10.1/30 dev wlmid0 && ip link set wlmid0 up && ip route add 198.18.10.4/30 via 198.18.10.2
ip -n wl-mid addr add 198.18.10.2/30 dev mid0 && ip -n wl-mid addr add 198.18.10.5/30 dev mid1
ip -n wl-mid link set mid0 up && ip -n wl-mid link set mid1 up && ip -n wl-mid link set lo up
ip netns exec wl-mid sysctl -qw net.ipv4.ip_forward=1
ip -n wl-end addr add 198.18.10.6/30 dev end0 && ip -n wl-end link set end0 up && ip -n wl-end link set lo up
ip -n wl-end route add default via 198.18.10.5
for m in mid:198.18.10.2 end:198.18.10.6; do
    name=${m%%:*} at=${m#*:}
    sed -e "s/^ListenAddress .*/ListenAddress $at/" -e "s|^PidFile .*|PidFile $keys/sshd-$name.pid|" \
        "$keys/sshd_config" >"$keys/sshd_config.$name"
    printf '%s\n' "Host $name" "  HostName $at" "  User root" "  IdentityFile $keys/key" "  IdentitiesOnly yes" \
        "  UserKnownHostsFile /dev/null" "  StrictHostKeyChecking no" "  LogLevel ERROR" >>"$keys/ssh_config"
    ip netns exec "wl-$name" /usr/sbin/sshd -f "$keys/sshd_config.$name" -E "$keys/sshd-$name.log"
done
state >"$out/state.router"  # this machine with the way to the router added
bare2=$(min_ms 198.18.10.6 10)
check "the server behind the router answers ssh [bare $bare2 ms]" \
    sh -c "ssh -F '$keys/ssh_config' -o BatchMode=yes end echo up | grep -q up"
printf '%s\n' 'name = "hosts-router"' '[lab]' 'mode = "hosts"' '[hosts]' "ssh_config = \"$keys/ssh_config\"" \
    '[hosts.client]' 'ssh = "local"' '[hosts.router]' 'ssh = "mid"' "wanlab = \"$wanlab\"" \
    '[hosts.server]' 'ssh = "end"' 'address = "198.18.10.6"' "wanlab = \"$wanlab\"" '[link]' 'rtt = "40ms"' \
    '[[probe]]' 'name = "icmp"' 'kind = "rtt"' 'method = "icmp"' 'count = 60' 'interval = "100ms"' \
    '[[probe]]' 'name = "queues"' 'kind = "command"' \
    "command = [\"sh\", \"-c\", \"ip netns exec wl-mid tc -s qdisc show >$out/mid-qdiscs.txt\"]" \
    '[run]' 'repeats = 1' 'warmup = "0s"' 'cooldown = "0s"' >"$out/hosts-router.toml"
db=$out/hostsrouter/results.db
"$wanlab" run "$out/hosts-router.toml" --out "$out/hostsrouter" --run hr1 >"$out/hostsrouter.stdout" \
    2>"$out/hostsrouter.stderr"
rc=$?
check "a hosts-mode run through a router exits 0 [rc=$rc]" [ "$rc" = 0 ]
p50=$(q "$db" "select avg(value) * 1000 from metric_values where run_id='hr1' and metric='rtt_p50'")
check "its ICMP RTT through the router is bare + 40 ms [p50=$p50 ms, bare $bare2 ms]" \
    between "$p50" "$(echo "40 + $bare2" | bc -l)" "$(echo "40 + $bare2 + 4" | bc -l)"
# "qdisc netem 10: dev mid1 parent 1:2 ..." then " Sent B bytes N pkt ...": N of each netem.
sent() { awk -v q="$1" '$1 == "qdisc" && $2 == "netem" && index($0, q) { getline; print $4 }' "$out/mid-qdiscs.txt"; }
up=$(sent "dev mid1 ") down=$(sent "dev wlifb-mid1 ")
check "the router's netem each way carried the 60 echoes and none of the controller's ssh to the server [up=$up down=$down]" \
    [ "$up" = 60 -a "$down" = 60 ]
check "the router is given back: no qdisc of wanlab's, no ifb, no journal" \
    sh -c "! ip netns exec wl-mid tc qdisc show | grep -q 'netem\|htb' && ! ip -n wl-mid link show wlifb-mid1 2>/dev/null && ! ls /run/wanlab/hr1-*.journal 2>/dev/null"
state | diff "$out/state.router" - >"$out/diff.hostsrouter"
check "after the run through the router: this machine as before" [ $? = 0 ]
ip netns pids wl-mid | xargs -r kill; ip netns pids wl-end | xargs -r kill
ip link del wlmid0 2>/dev/null; ip netns del wl-mid; ip netns del wl-end

# 9. Host mode toward an IPv6 target (issue 21): the target filter matches IPv6 addresses
#    both ways, the probes connect over IPv6, and another IPv6 address is spared.
ip addr add 2001:2::9:1/112 dev wlhost0 nodad
ip -n wl-far addr add 2001:2::9:2/112 dev far0 nodad && ip -n wl-far addr add 2001:2::9:3/112 dev far0 nodad
ip netns exec wl-far python3 -m http.server 8081 --bind 2001:2::9:2 --directory "$src/tests/vm/run" >/dev/null 2>&1 &
http6=$!
sleep 1
state >"$out/state.before"  # the interface as it is now, for same_state
bare6=$(min_ms 2001:2::9:2 10)
printf '%s\n' 'name = "host-ipv6"' '[lab]' 'mode = "host"' 'dev = "wlhost0"' 'target = "2001:2::9:2"' '[link]' \
    'rtt = "40ms"' '[[probe]]' 'name = "icmp"' 'kind = "rtt"' 'method = "icmp"' 'count = 40' 'interval = "25ms"' \
    '[[probe]]' 'name = "web"' 'kind = "http"' 'url = "http://[2001:2::9:2]:8081/"' 'connections = 2' \
    '[run]' 'repeats = 1' 'duration = "2s"' 'warmup = "0s"' 'cooldown = "0s"' >"$out/host6.toml"
db=$out/host6/results.db
"$wanlab" run "$out/host6.toml" --out "$out/host6" --run host6 >"$out/host6.stdout" 2>"$out/host6.stderr"
rc=$?
check "host mode toward an IPv6 target exits 0 [rc=$rc]" [ "$rc" = 0 ]
p50=$(q "$db" "select avg(value) from metric_values where run_id='host6' and probe='icmp' and metric='rtt_p50'")
check "its ICMPv6 RTT to the target is bare + 40 ms [p50=$p50 s, bare $bare6 ms]" \
    between "$p50" 0.040 $(awk -v b="$bare6" 'BEGIN { print 0.045 + b / 1000 }')
req=$(q "$db" "select value from metric_values where run_id='host6' and probe='web' and metric='requests'")
err=$(q "$db" "select value from metric_values where run_id='host6' and probe='web' and metric='errors'")
check "http load over IPv6 against the target's own server [requests=$req errors=$err]" \
    awk -v r="$req" -v e="$err" 'BEGIN { exit !(r + 0 >= 1 && e == 0 && e != "") }'
check "after the IPv6 host-mode run: the interface as before" same_state host6
"$wanlab" lab up "$out/host6.toml" --run hup6 >"$out/labup6.stdout" 2>"$out/labup6.stderr" &
pid=$!
i=0; while [ $i -lt 100 ] && ! grep -q "is up" "$out/labup6.stdout"; do sleep 0.1; i=$((i + 1)); done
target=$(min_ms 2001:2::9:2 10) other=$(min_ms 2001:2::9:3 10)
check "lab up toward the IPv6 target: its pings take 40 ms more, another IPv6 address's do not [min $target ms, $other ms]" \
    sh -c "awk -v t='$target' -v o='$other' -v b='$bare6' 'BEGIN { exit !(t >= 40 && t <= 45 + b && o + 0 < 5 && o != \"\") }'"
"$wanlab" lab down hup6 >/dev/null 2>&1
wait $pid 2>/dev/null
check "after lab down: the interface as before" same_state hup6
kill $http6 2>/dev/null

kill $http 2>/dev/null
pkill -f "iperf3 -s -D -B 198.18.9.2" 2>/dev/null
ip link del wlhost0 2>/dev/null
ip netns del wl-far
exit 0
