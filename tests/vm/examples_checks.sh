#!/bin/sh
# Inside the micro-VM (real netem), as root: every runnable example of examples/ with short
# durations, and its headline effect checked for direction and rough size, not exact numbers
# (the emulated CPU is slower than real hardware). Writes one TAP-like line per check to
# OUT/results and the measured headline numbers to OUT/headlines.
# Usage: examples_checks.sh WANLAB SRC OUT
wanlab=$1 src=$2 out=$3
. "$src/tests/vm/checks_lib.sh"
# awk-evaluated comparison: holds 'expression' name=value...
holds() { expr=$1; shift; awk "$@" "BEGIN { exit !($expr) }" </dev/null; }

# m DB VARIANT PROBE METRIC [SWEEP-LIKE]: mean over the repeats, in base units.
m() {
    q "$1" "select avg(v.value) from metric_values v join trials t on t.run_id = v.run_id and t.idx = v.trial
            where v.variant = '$2' and v.probe = '$3' and v.metric = '$4' and t.sweep like '%${5:-}%'"
}
# ms SECONDS: milliseconds with one decimal, for messages.
ms() { awk -v s="$1" 'BEGIN { printf "%.1f", s * 1000 }'; }
mbit() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 1e6 }'; }
headline() { echo "$*" >>"$out/headlines"; }
all_done() { [ "${1:-0}" -ge 1 ] && [ "$2" = "$1" ]; }  # all_done TOTAL DONE

short="--set run.duration=2s --set run.repeats=2 --set run.warmup=0s --set run.cooldown=0s"

# run NAME [--set ...]: runs examples/NAME.toml; its exit status is the assert gate.
run() {
    name=$1; shift
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$wanlab" run "$src/examples/$name.toml" --no-vm --out "$out/$name" --run "$name" --quiet $short "$@" \
        >"$out/$name.stdout" 2>"$out/$name.stderr"
    rc=$? took=$(($(date +%s) - t0))
    check "$name runs and its asserts pass [rc=$rc, ${took} s]" [ "$rc" = 0 ]
    db=$out/$name/results.db
    total=$(q "$db" "select count(*) from trials")
    done_trials=$(q "$db" "select count(*) from trials where status = 'done'")
    check "$name: every trial done [$done_trials of $total]" all_done "$total" "$done_trials"
    # The delay must be in place (the effects below depend on it). The bounds are looser than
    # the emulation check's own: on a busy host the emulated CPU adds up to ~15 ms to a
    # handshake; rates are checked through each example's own throughput below.
    # The measured RTTs in the message: a failure says by how much, and which trial.
    rtts=$(q "$db" "select group_concat(variant || ' ' || printf('%.1f', 1000 * json_extract(emulation_check, '\$.rtt_measured'))
                     || '/' || printf('%g', 1000 * json_extract(emulation_check, '\$.rtt_configured')), ', ') from trials")
    check "$name: every trial's RTT within 95% and 110% + 15 ms of its configuration [$rtts ms]" \
        [ "$(q "$db" "select count(*) from trials where json_extract(emulation_check, '\$.checked') = 0 or
                      (json_extract(emulation_check, '\$.rtt_measured') between
                       0.95 * json_extract(emulation_check, '\$.rtt_configured') - 0.0002 and
                       1.1 * json_extract(emulation_check, '\$.rtt_configured') + 0.015)")" = "$total" ]
    q "$db" "select '$name trial ' || idx || ' ' || variant || ': ' || json_extract(emulation_check, '\$.note') from trials" >>"$out/headlines"
}

# delayed-ack: the ~40 ms stall with Nagle + split write, gone with either cure. The loaded
# probe runs 10 connections here, not the example's 100: the emulated CPU serves about
# 1,000-1,900 requests/s depending on the host, and 100 connections fill it with the stall
# or without (one run: 1,692/s stalled against 1,896/s cured, the cured p50 47.6 ms on a 1 ms
# path, all CPU queueing), so at 100 the comparison measured the host's speed. At 10, the
# stall's cap of 10 / 40 ms = 250/s sits far below the CPU's. The 100-connection result
# itself (44 ms, 2,300/s) is reproduced on the host kernel by probe-root.
run delayed-ack --set probe.loaded.connections=10
db=$out/delayed-ack/results.db
stall=$(m "$db" nagle-split-write single latency_p50)
nodelay=$(m "$db" server-nodelay single latency_p50)
quickack=$(m "$db" client-quickack single latency_p50)
headline "delayed-ack single p50: nagle-split-write $(ms "$stall") ms, server-nodelay $(ms "$nodelay") ms, client-quickack $(ms "$quickack") ms"
check "delayed-ack: Nagle + split write stalls 30-60 ms per transaction [$(ms "$stall") ms]" \
    holds 'x >= 0.030 && x <= 0.060' -v x="$stall"
check "delayed-ack: TCP_NODELAY on the server takes it under 15 ms [$(ms "$nodelay") ms]" holds 'x < 0.015' -v x="$nodelay"
check "delayed-ack: TCP_QUICKACK on the client takes it under 15 ms [$(ms "$quickack") ms]" holds 'x < 0.015' -v x="$quickack"
lstall=$(m "$db" nagle-split-write loaded latency_p50)
lnodelay=$(m "$db" server-nodelay loaded latency_p50)
rstall=$(m "$db" nagle-split-write loaded requests_per_second)
rnodelay=$(m "$db" server-nodelay loaded requests_per_second)
headline "delayed-ack 10 connections: p50 $(ms "$lnodelay") -> $(ms "$lstall") ms, requests/s $rnodelay -> $rstall (server-nodelay -> nagle-split-write)"
check "delayed-ack, 10 connections: the stall holds p50 >= 30 ms [$(ms "$lstall") ms]" holds 'x >= 0.030' -v x="$lstall"
check "delayed-ack, 10 connections: Nagle keeps requests/s under 10 / 40 ms [$rstall]" holds 'x <= 270' -v x="$rstall"
check "delayed-ack, 10 connections: server-nodelay serves >= 2x the requests/s [$rnodelay vs $rstall]" \
    holds 'a >= 2 * b' -v a="$rnodelay" -v b="$rstall"

# nginx-delayed-ack: Debian's nginx as a [[service]], loaded by the http probe and wrk; the
# example's own asserts (a cure: >= 4x the requests/s, <= 1/4 of the mean latency) gate it.
run nginx-delayed-ack
db=$out/nginx-delayed-ack/results.db
for p in http wrk; do
    stall=$(m "$db" stall $p latency_mean)
    cured=$(m "$db" server-nodelay $p latency_mean)
    headline "nginx-delayed-ack $p mean latency: stall $(ms "$stall") ms, server-nodelay $(ms "$cured") ms, requests/s $(m "$db" stall $p requests_per_second) -> $(m "$db" server-nodelay $p requests_per_second)"
    check "nginx-delayed-ack, $p: the stall is the 40 ms timer plus the path, 40-70 ms [$(ms "$stall") ms]" \
        holds 'x >= 0.040 && x <= 0.070' -v x="$stall"
done
quick=$(m "$db" client-quickack wrk latency_mean)
check "nginx-delayed-ack: wrk, which cannot quick-ack, stays stalled in client-quickack [$(ms "$quick") ms]" \
    holds 'x >= 0.040' -v x="$quick"
started=$(grep -l 'start worker process' "$out/nginx-delayed-ack/nginx-delayed-ack"/trial-*/nginx.stderr 2>/dev/null | wc -l)
check "nginx-delayed-ack: nginx started in each of the 3 trials, its logs kept [$started]" [ "$started" = 3 ]
# The results share is 9p: nginx must serve from the staging folder under /tmp, never from
# the share (sendfile over 9p adds ~15 ms to every request and hides the cure).
served=$(sed -n 's/^ *root \(.*\);$/\1/p' "$out/nginx-delayed-ack/nginx-delayed-ack"/trial-1-*/nginx.conf)
case "$served" in /tmp/wanlab-trials-*) staged=yes ;; *) staged=no ;; esac
check "nginx-delayed-ack: nginx served from a staging folder, not the 9p share [$served]" [ "$staged" = yes ]
# Issue 18: the report names the cause from the client's counters (nginx's options are not
# wanlab's to see), in the stalled trial and in wrk's row of client-quickack, never where cured.
report=$out/nginx-delayed-ack.stdout
check "nginx-delayed-ack: the report names the delayed-ACK stall for http and wrk in the stall trial" \
    sh -c 'grep -q "^  http, stall: delayed-ACK stall" "$1" && grep -q "^  wrk, stall: delayed-ACK stall" "$1"' _ "$report"
check "nginx-delayed-ack: and never in server-nodelay, nor for the quick-acking http client" \
    sh -c '! grep -q -e "server-nodelay: delayed-ACK" -e "http, client-quickack: delayed-ACK" "$1"' _ "$report"
left=$(for p in $(pgrep -x nginx); do [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] && echo "$p"; done)
check "nginx-delayed-ack: no nginx process left running [$left]" [ -z "$left" ]

# iperf3-buffers: an iperf3 server restarted per trial; only the server's tcp_rmem changes.
run iperf3-buffers --set run.duration=3s
db=$out/iperf3-buffers/results.db
small=$(m "$db" server-small bulk throughput)
raised=$(m "$db" server-raised bulk throughput)
headline "iperf3-buffers at 100 Mbit/s, 50 ms: server-small $(mbit "$small") Mbit/s, server-raised $(mbit "$raised") Mbit/s"
# 512 KiB of buffer advertises ~256 KiB of window: 256 KiB per ~51 ms is ~41 Mbit/s.
check "iperf3-buffers: server-small is window-bound near 41 Mbit/s (25-50) [$(mbit "$small")]" \
    holds 'x >= 25e6 && x <= 50e6' -v x="$small"
check "iperf3-buffers: server-raised carries >= 1.6x server-small [$(mbit "$raised") vs $(mbit "$small")]" \
    holds 'a >= 1.6 * b' -v a="$raised" -v b="$small"
check "iperf3-buffers: the advice names tcp_rmem on the server" \
    grep -q "below the BDP: net.ipv4.tcp_rmem max on server = 524288" "$out/iperf3-buffers.stdout"
check "iperf3-buffers: and not rmem_max, which cannot change an autotuned buffer" \
    sh -c "! grep -q 'set net.core.rmem_max' '$out/iperf3-buffers.stdout'"
listening=$(cat "$out/iperf3-buffers/iperf3-buffers"/trial-*/iperf3.stdout 2>/dev/null | grep -c 'Server listening on 5201')
check "iperf3-buffers: each trial had its own iperf3 -s (2 started) [$listening]" [ "$listening" -ge 2 ]

# cc-compare at 1% loss only (the largest effect): bbr keeps the rate, cubic and reno do not.
run cc-compare --set 'sweep."link.up.loss"=["1%"]' --set run.duration=4s
db=$out/cc-compare/results.db
cubic=$(m "$db" cubic bulk throughput)
bbr=$(m "$db" bbr bulk throughput)
reno=$(m "$db" reno bulk throughput)
headline "cc-compare at 1% loss, 100 ms, 50 Mbit/s: cubic $(mbit "$cubic"), bbr $(mbit "$bbr"), reno $(mbit "$reno") Mbit/s"
check "cc-compare: the sweep shrank to one loss rate (3 trials)" [ "$(q "$db" "select count(*) from trials")" = 3 ]
check "cc-compare at 1% loss: bbr carries >= 3x cubic [$(mbit "$bbr") vs $(mbit "$cubic") Mbit/s]" \
    holds 'a >= 3 * b' -v a="$bbr" -v b="$cubic"
check "cc-compare at 1% loss: bbr carries >= 3x reno [$(mbit "$bbr") vs $(mbit "$reno") Mbit/s]" \
    holds 'a >= 3 * b' -v a="$bbr" -v b="$reno"
check "cc-compare at 1% loss: cubic stays under 15 Mbit/s [$(mbit "$cubic")]" holds 'x < 15e6' -v x="$cubic"

# bufferbloat (issue 21): a group, `load` (4 streams) and `ping` at the same time, through
# 20 Mbit/s and 40 ms: the loaded RTT behind the 1000-packet FIFO is at least 3x fq_codel's.
# 10 s: cubic's growth after HyStart fills the 1000 packets late in a repeat (at 6 s the
# FIFO held ~330 ms at the end and ping's median over the repeat was 146 ms).
run bufferbloat --set run.duration=10s --set probe.idle.duration=1s
db=$out/bufferbloat/results.db
fifo=$(m "$db" deep-fifo ping rtt_p50)
codel=$(m "$db" fq-codel ping rtt_p50)
idle_fifo=$(m "$db" deep-fifo idle rtt_p50)
idle_codel=$(m "$db" fq-codel idle rtt_p50)
tfifo=$(m "$db" deep-fifo rrul throughput)
tcodel=$(m "$db" fq-codel rrul throughput)
fair=$(m "$db" fq-codel rrul fairness)
headline "bufferbloat at 20 Mbit/s, 40 ms: ping under load deep-fifo $(ms "$fifo") ms vs fq-codel $(ms "$codel") ms (idle $(ms "$idle_fifo"), $(ms "$idle_codel") ms); throughput $(mbit "$tfifo") vs $(mbit "$tcodel") Mbit/s; fq-codel fairness $fair"
check "bufferbloat: idle, both queues give the 40 ms path (38-60 ms) [$(ms "$idle_fifo"), $(ms "$idle_codel") ms]" \
    holds 'a >= 0.038 && a <= 0.060 && b >= 0.038 && b <= 0.060' -v a="$idle_fifo" -v b="$idle_codel"
check "bufferbloat: the loaded RTT behind the FIFO is >= 3x fq_codel's [$(ms "$fifo") vs $(ms "$codel") ms]" \
    holds 'a >= 3 * b' -v a="$fifo" -v b="$codel"
check "bufferbloat: the FIFO's loaded RTT is a queue of >= 100 ms over the idle path [$(ms "$fifo") ms]" \
    holds 'a >= b + 0.100' -v a="$fifo" -v b="$idle_fifo"
# The group measured its members at the same time, on its clock: ping's answers and load's
# intervals (from its first interval's start to its last point; load's clock starts once its
# 4 streams are connected, 0.3-0.5 s after the release here) overlap by >= 7 of the 10 s.
# One after the other, they would not overlap at all.
overlap=$(q "$db" "select count(*) from (select
                     (select min(t) - 1 from series where measurement_id = m.id and name = 'load.throughput') as a,
                     (select max(t) from series where measurement_id = m.id and name = 'load.throughput') as b,
                     (select min(t) from series where measurement_id = m.id and name = 'ping.rtt') as c,
                     (select max(t) from series where measurement_id = m.id and name = 'ping.rtt') as d
                   from measurements m where m.probe = 'rrul') where min(b, d) - max(a, c) >= 7")
check "bufferbloat: in every repeat ping measured while load ran (>= 7 s together) [$overlap of 4]" [ "$overlap" = 4 ]
# The tbf needs its 4 ms bucket to keep up with the VM's late timers (docs/netem.md).
check "bufferbloat: both queues carry most of the 20 Mbit/s (>= 10) [$(mbit "$tfifo"), $(mbit "$tcodel")]" \
    holds 'a >= 10e6 && b >= 10e6' -v a="$tfifo" -v b="$tcodel"
check "bufferbloat: fq_codel shares the link fairly between the 4 streams (Jain >= 0.9) [$fair]" \
    holds 'x >= 0.9' -v x="$fair"
report=$out/bufferbloat.stdout
check "bufferbloat: the report names bufferbloat for ping behind the FIFO, never behind fq_codel" \
    sh -c 'grep -q "^  ping, deep-fifo: bufferbloat: RTT under load" "$1" && ! grep -q "ping, fq-codel: bufferbloat" "$1"' _ "$report"
# fq_codel's drops are its AQM at work, not an overflow of the tbf above it (the queue is
# grafted at its second handle in the second trial; its statistics must still be the queue's).
check "bufferbloat: fq_codel's drops are not called a queue overflow" \
    sh -c '! grep -q "fq-codel: queue overflow" "$1"' _ "$report"

# udp-loss (issue 21): a 10 Mbit/s UDP stream through 2% netem loss. The loss's 99% interval
# (Wilson) over both repeats' datagrams of the built-in stream holds the configured 2%.
run udp-loss --set run.duration=4s
db=$out/udp-loss/results.db
# s VARIANT PROBE METRIC: the sum over the repeats.
s() { q "$db" "select sum(value) from metric_values where variant = '$1' and probe = '$2' and metric = '$3'"; }
sent=$(s loss stream sent) got=$(s loss stream received)
sent=${sent%.*} got=${got%.*}
sent=${sent:-0} got=${got:-0}  # no run, no numbers: the checks below fail, the script goes on
wilson() {  # wilson LOST N SIGN: an end of the 99% Wilson interval
    awk -v k="$1" -v n="$2" -v sign="$3" 'BEGIN { z = 2.5758293; p = k / n; z2 = z * z;
        c = p + z2 / (2 * n); w = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)); printf "%.5f", (c + sign * w) / (1 + z2 / n) }'
}
lost=$((sent - got))
low=$(wilson "$lost" "$sent" -1) high=$(wilson "$lost" "$sent" 1)
headline "udp-loss at 10 Mbit/s through 2% loss: $lost of $sent lost, 99% interval $low-$high; iperf3 loss $(m "$db" loss iperf3 loss); jitter $(ms "$(m "$db" loss stream jitter)") ms, with netem jitter $(ms "$(m "$db" loss-jitter stream jitter)") ms; one-way delay p50 $(ms "$(m "$db" loss stream delay_p50)") ms"
check "udp-loss: 10 Mbit/s of 1460-byte datagrams is ~856/s: 2 x 4 s sent 6,850 (+-1%) [$sent]" \
    holds 'x >= 6780 && x <= 6920' -v x="$sent"
check "udp-loss: the loss's 99% interval over both repeats holds 2% [$low, $high]" \
    holds 'a <= 0.02 && b >= 0.02' -v a="$low" -v b="$high"
iloss=$(m "$db" loss iperf3 loss)
check "udp-loss: iperf3 -u measures the same loss, 1-3% [$iloss]" holds 'x >= 0.01 && x <= 0.03' -v x="$iloss"
check "udp-loss: goodput is the rate less the loss, 9.3-10.1 Mbit/s, for both tools [$(mbit "$(m "$db" loss stream throughput)"), $(mbit "$(m "$db" loss iperf3 throughput)")]" \
    holds 'a >= 9.3e6 && a <= 10.1e6 && b >= 9.3e6 && b <= 10.1e6' -v a="$(m "$db" loss stream throughput)" -v b="$(m "$db" loss iperf3 throughput)"
check "udp-loss: the one-way delay is the 20 ms of the way up (20-35 ms) [$(ms "$(m "$db" loss stream delay_p50)")]" \
    holds 'x >= 0.020 && x <= 0.035' -v x="$(m "$db" loss stream delay_p50)"
# Without netem jitter a few datagrams in 10,000 still overtake (measured 3 of 6,700: the
# sender's thread moves between the VM's two CPUs, each with its own backlog); 5 ms of
# jitter on datagrams 1.2 ms apart reorders about half.
check "udp-loss: netem jitter reorders datagrams (>= 10x, >= 10%) and shows in RFC 3550 jitter (> 1 ms) [$(m "$db" loss-jitter stream reordered), $(m "$db" loss stream reordered)]" \
    holds 'a >= 0.1 && a >= 10 * b && j > 0.001 && k < j' -v a="$(m "$db" loss-jitter stream reordered)" -v b="$(m "$db" loss stream reordered)" \
    -v j="$(m "$db" loss-jitter stream jitter)" -v k="$(m "$db" loss stream jitter)"

# ipv6 (issue 21): a dual-stack lab, 80 ms and 20 Mbit/s. The IPv6 round trip is the
# configured one within 5% (76-84 ms), as is IPv4's; each family's goodput is the 20 Mbit/s
# less its headers (IPv6's 40-byte header: 1428 of 1514 bytes on the wire are data).
# The example's 1 s cooldown stays: without it the packets bulk4 left in netem's queue (up to
# 1000, 600 ms at 20 Mbit/s) reach the server during bulk6 (measured: 357 IPv4 packets).
run ipv6 --set run.duration=4s --set run.repeats=1 --set run.cooldown=1s
db=$out/ipv6/results.db
p4=$(m "$db" default ping4 rtt_p50) p6=$(m "$db" default ping6 rtt_p50) h6=$(m "$db" default handshake6 rtt_p50)
b4=$(m "$db" default bulk4 throughput) b6=$(m "$db" default bulk6 throughput)
headline "ipv6 at 80 ms, 20 Mbit/s: ICMP p50 $(ms "$p4") ms over IPv4, $(ms "$p6") ms over IPv6; TCP handshake over IPv6 $(ms "$h6") ms; goodput $(mbit "$b4") Mbit/s over IPv4, $(mbit "$b6") over IPv6"
check "ipv6: an IPv6 ICMP round trip is the configured 80 ms within 5% [$(ms "$p6") ms]" \
    holds 'x >= 0.076 && x <= 0.084' -v x="$p6"
# A handshake also waits for the client's thread to wake, which the emulated CPU can delay.
check "ipv6: an IPv6 TCP handshake takes the 80 ms round trip, within 95-110% [$(ms "$h6") ms]" \
    holds 'x >= 0.076 && x <= 0.088' -v x="$h6"
check "ipv6: and the IPv4 round trip through the same router [$(ms "$p4") ms]" holds 'x >= 0.076 && x <= 0.084' -v x="$p4"
check "ipv6: each family carries 80-100% of the 20 Mbit/s [$(mbit "$b4"), $(mbit "$b6") Mbit/s]" \
    holds 'a >= 16e6 && a <= 20e6 && b >= 16e6 && b <= 20e6' -v a="$b4" -v b="$b6"
# The packets were IPv6: each measurement records the server namespace's /proc/net/snmp and
# snmp6 counters; bulk6's segments arrived as IPv6 and bulk4's as IPv4.
c() { q "$db" "select coalesce(json_extract(counters, '\$.server.\"$2\"'), 0) from measurements where probe = '$1'"; }
in6=$(c bulk6 Ip6.InReceives) in4=$(c bulk6 Ip.InReceives) four=$(c bulk4 Ip.InReceives)
check "ipv6: bulk6's server received its thousands of packets over IPv6, bulk4's over IPv4 [$in6 IPv6, $in4 IPv4; bulk4 $four IPv4]" \
    holds 'a > 1000 && b < a / 100 && f > 1000' -v a="$in6" -v b="$in4" -v f="$four"

# wan-repro through the transatlantic profile only: latency ~ one RTT, requests/s ~ 20 / RTT.
run wan-repro --set 'sweep."link.profile"=["transatlantic"]' --set run.duration=3s
db=$out/wan-repro/results.db
p50=$(m "$db" default web latency_p50)
rps=$(m "$db" default web requests_per_second)
headline "wan-repro transatlantic (72 ms): http p50 $(ms "$p50") ms, $rps requests/s on 20 connections"
# One round trip per request (two would be >= 144 ms); the emulated CPU adds ~10-20 ms.
check "wan-repro: p50 is one transatlantic round trip, 70-110 ms [$(ms "$p50") ms]" holds 'x >= 0.070 && x <= 0.110' -v x="$p50"
check "wan-repro: requests/s is connections / latency within 25% [$rps]" \
    holds 'r >= 0.75 * 20 / p && r <= 1.25 * 20 / p' -v r="$rps" -v p="$p50"

# mobile-api (issue 39): 1 MiB responses on fresh connections over 150 ms, 20 Mbit/s and 1%
# loss on the way down. bbr's goodput (every response's bytes over the time they took) at
# least 1.5x cubic's: one full run 2.9x, short runs 1.9-2.8x. Cubic's median alone rests on
# the few responses of a 5 s repeat and moved from 1.55 to 3.4 s between repeats of one run,
# so it is checked for its direction only. No response timed out or failed; the report
# compares the zipped buffer sweep as one factor. A cubic response still running at the end
# of a repeat finishes (its p99 was 11 s).
run mobile-api --set run.duration=5s --set run.repeats=2 --set run.cooldown=0s
db=$out/mobile-api/results.db
cubic=$(m "$db" cubic api completion_p50) bbr=$(m "$db" bbr api completion_p50)
gcubic=$(m "$db" cubic api goodput) gbbr=$(m "$db" bbr api goodput)
failed=$(q "$db" "select sum(value) from metric_values where probe = 'api' and metric = 'failed'")
headline "mobile-api at 150 ms, 1% loss down: 1 MiB on a fresh connection, p50 cubic $(ms "$cubic") ms, bbr $(ms "$bbr") ms; goodput cubic $(mbit "$gcubic"), bbr $(mbit "$gbbr") Mbit/s; $failed failed"
check "mobile-api: bbr's goodput is >= 1.5x cubic's [$(mbit "$gbbr") vs $(mbit "$gcubic") Mbit/s]" \
    holds 'b >= 1.5 * c' -v b="$gbbr" -v c="$gcubic"
check "mobile-api: bbr's median response is under cubic's [$(ms "$bbr") vs $(ms "$cubic") ms]" \
    holds 'b < c' -v b="$bbr" -v c="$cubic"
# Two round trips (handshake, request) and 1 MiB at 20 Mbit/s: 0.72 s is the floor.
check "mobile-api: bbr's median response takes at least 2 RTT + 1 MiB at 20 Mbit/s [$(ms "$bbr") ms]" \
    holds 'b >= 0.72' -v b="$bbr"
check "mobile-api: no response failed or timed out within 30 s [$failed]" holds 'x == 0' -v x="$failed"
check "mobile-api: the report compares the two buffer maxima, moved together, as one factor" \
    grep -q "sysctl.net.ipv4.tcp_wmem + sysctl.net.ipv4.tcp_rmem large against default" "$out/mobile-api.stdout"

# host-mode is documented, not run: it must still validate.
check "host-mode validates" "$wanlab" validate -q "$src/examples/host-mode.toml"
check "no run left a namespace behind" [ -z "$(ip netns list)" ]
exit 0
