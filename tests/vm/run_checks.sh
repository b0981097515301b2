#!/bin/sh
# Inside the micro-VM (real netem), as root: `wanlab run` end to end. Writes one TAP-like line
# per check to OUT/results ("ok N - ..." / "not ok N - ..."). Usage: run_checks.sh WANLAB SRC OUT
wanlab=$1 src=$2 out=$3
. "$src/tests/vm/checks_lib.sh"

# The machine as wanlab must give it back.
state() {
    { ip netns list; ip -o link show | sed 's/^[0-9]*: //' | cut -d' ' -f1-2; tc qdisc show
      for k in net.core.rmem_max net.core.wmem_max net.ipv4.tcp_rmem net.ipv4.tcp_wmem; do sysctl -n $k; done
      ls /run/wanlab/*.journal 2>/dev/null; } | sort
}
state >"$out/state.before"
same_state() { state | diff "$out/state.before" - >"$out/diff.$1"; }

# 1. The main example, short: larger buffers raise throughput on the long path. Its page and
# results are kept (OUT/keep, which vm_checks.sh moves beside the suite's folder) for
# browser:report-page, which checks them in Chromium rather than run the same sweep again.
db=$out/main/results.db
mkdir -p "$out/keep"
"$wanlab" run "$src/examples/buffer-sweep.toml" --no-vm --out "$out/main" --run main1 --html "$out/keep/main.html" \
    --set run.duration=3s --set run.repeats=2 --set run.warmup=1s --set run.cooldown=0s \
    >"$out/main.stdout" 2>"$out/main.stderr"
rc=$?
cp "$db" "$out/keep/results.db"
check "main example exits 0 (its min_gain assert passes) [rc=$rc]" [ "$rc" = 0 ]
check "main example wrote its page (--html)" [ -s "$out/keep/main.html" ]
check "main example: 6 trials done" [ "$(q "$db" "select count(*) from trials where run_id='main1' and status='done'")" = 6 ]
check "main example: every trial's emulation held" \
    [ "$(q "$db" "select count(*) from trials where run_id='main1' and json_extract(emulation_check,'\$.held')=1 and json_extract(emulation_check,'\$.checked')=1")" = 6 ]
for rtt in 40ms 80ms 160ms; do
    ratio=$(q "$db" "select (select avg(value) from metric_values v join trials t on t.run_id=v.run_id and t.idx=v.trial
                             where v.run_id='main1' and v.metric='throughput' and v.variant='large-buffers' and t.sweep like '%$rtt%')
                          / (select avg(value) from metric_values v join trials t on t.run_id=v.run_id and t.idx=v.trial
                             where v.run_id='main1' and v.metric='throughput' and v.variant='default-buffers' and t.sweep like '%$rtt%')")
    check "main example at $rtt: large buffers move >= 1.2x the default's throughput [ratio=$ratio]" \
        awk -v r="$ratio" 'BEGIN { exit !(r + 0 >= 1.2) }'
done
check "main example's report has the before/after table" grep -q "large-buffers" "$out/main.stdout"
check "main example restored the machine" same_state main

# The stored run reads back: list, report as JSON, every measurement as CSV, a comparison.
check "results list names the run" sh -c "'$wanlab' results list --out '$out/main' | grep -q '^main1 .*complete'"
check "results show --format json is JSON with the report's sections" \
    sh -c "'$wanlab' results show main1 --out '$out/main' --format json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(not {\"cells\",\"pivot\",\"asserts\"} <= d.keys())'"
check "results show --export csv has one row per (measurement, metric)" \
    [ "$("$wanlab" results show main1 --out "$out/main" --export csv | grep -Ec ',throughput,,[-0-9.e+]+,bit/s$')" = "$(q "$db" "select count(*) from metric_values where run_id='main1' and metric='throughput'")" ]
check "compare of a run with itself shows zero deltas" sh -c "'$wanlab' compare main1 main1 --out '$out/main' | grep -q '+0.0%'"

# 2. CI gates: a passing and a failing assert give exit 3 and a JUnit report saying so.
"$wanlab" run "$src/tests/vm/run/asserts.toml" --no-vm --out "$out/asserts" --quiet --junit "$out/junit.xml" \
    >"$out/asserts.stdout" 2>"$out/asserts.stderr"
rc=$?
check "a failed assert makes the exit status 3 [rc=$rc]" [ "$rc" = 3 ]
check "the report prints PASS and FAIL with measured values" sh -c "grep -q PASS '$out/asserts.stdout' && grep -q FAIL '$out/asserts.stdout'"
check "the JUnit report has 2 tests and 1 failure" sh -c "grep -q 'tests=\"2\"' '$out/junit.xml' && grep -q 'failures=\"1\"' '$out/junit.xml'"

# 3. kill -9 mid-run, then `wanlab restore`: the machine is as before.
wait_for_measurement() {  # db run: until the run has a measurement (at most 60 s)
    i=0
    while [ $i -lt 600 ]; do
        [ "$(q "$1" "select count(*) from measurements where run_id='$2'" 2>/dev/null)" -ge 1 ] 2>/dev/null && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
"$wanlab" run "$src/tests/vm/run/long.toml" --no-vm --out "$out/kill" --run kill1 --quiet >/dev/null 2>"$out/kill.stderr" &
pid=$!
check "the long run records a measurement" wait_for_measurement "$out/kill/results.db" kill1
check "mid-run, the run's sysctl is in force" [ "$(sysctl -n net.core.rmem_max)" = 1234567 ]
kill -9 $pid; wait $pid 2>/dev/null
check "after kill -9 the journal is left for restore" sh -c "ls /run/wanlab/kill1.journal >/dev/null"
"$wanlab" restore >"$out/restore.out" 2>&1
rc=$?
check "wanlab restore exits 0 [rc=$rc]" [ "$rc" = 0 ]
check "after kill -9 + restore: namespaces, links, qdiscs, sysctls as before" same_state kill

# 4. Ctrl-C mid-run: exit 130, machine restored, partial results kept.
"$wanlab" run "$src/tests/vm/run/long.toml" --no-vm --out "$out/int" --run int1 >"$out/int.stdout" 2>"$out/int.stderr" &
pid=$!
wait_for_measurement "$out/int/results.db" int1
kill -INT $pid; wait $pid
rc=$?
check "SIGINT mid-run exits 130 [rc=$rc]" [ "$rc" = 130 ]
check "the interrupted run is recorded as interrupted" [ "$(q "$out/int/results.db" "select status from runs where id='int1'")" = interrupted ]
check "its measurements are kept" [ "$(q "$out/int/results.db" "select count(*) from measurements where run_id='int1'")" -ge 1 ]
check "the partial report is printed" grep -q "interrupted" "$out/int.stdout"
check "after SIGINT: machine as before" same_state int

# 5. wanlab link on an interface: the SSH guard refuses to cut off a session, and
#    --auto-restore gives the device back by itself.
ip netns add wl-guard && ip -n wl-guard link add g0 type veth peer name g1 &&
    ip -n wl-guard addr add 198.18.7.1/30 dev g0 && ip -n wl-guard link set g0 up
SSH_CONNECTION="198.18.7.2 50000 198.18.7.1 22" ip netns exec wl-guard "$wanlab" link apply --dev g0 --delay 10ms \
    >/dev/null 2>"$out/guard.stderr"
rc=$?
check "link apply refuses the interface that carries an SSH session [rc=$rc]" \
    sh -c "[ $rc = 2 ] && grep -q 'carries the SSH session from 198.18.7.2' '$out/guard.stderr'"
check "the refused device is untouched" sh -c "! ip netns exec wl-guard tc qdisc show dev g0 | grep -q netem"
"$wanlab" link apply --netns wl-guard --dev g0 --delay 10ms --auto-restore 2 >"$out/auto.stdout" 2>&1
check "link apply --auto-restore applies netem and arms the watchdog" \
    sh -c "ip netns exec wl-guard tc qdisc show dev g0 | grep -q 'netem.*delay 10ms' && grep -q 'auto-restore in 2 s' '$out/auto.stdout'"
sleep 4
check "after --auto-restore's delay the device has its default qdisc back" \
    sh -c "! ip netns exec wl-guard tc qdisc show dev g0 | grep -q netem"
ip netns del wl-guard

# 6. wanlab shell: the user's own command in the client namespace, on the emulated path; its
#    exit status is wanlab's, and the machine is given back.
cat >"$out/shell.toml" <<'TOML'
name = "shell"
[link]
rtt = "40ms"
[[probe]]
name = "r"
kind = "rtt"
TOML
"$wanlab" shell "$out/shell.toml" --run shell1 -- sh -c 'ping -c 5 -i 0.2 -q "$WANLAB_SERVER"; exit 5' \
    >"$out/shell.stdout" 2>"$out/shell.stderr"
rc=$?
# The fastest of the pings: the path itself, least of the emulated CPU's own delay (bounded as
# the emulation check's 110% + 15 ms).
fastest=$(sed -n 's|.*= \([0-9.]*\)/[0-9.]*/.*|\1|p' "$out/shell.stdout")
check "wanlab shell returns the command's exit status [rc=$rc]" [ "$rc" = 5 ]
check "the command's pings cross the emulated 40 ms path [min ${fastest:-?} ms]" \
    awk -v a="${fastest:-0}" 'BEGIN { exit !(a >= 40 && a <= 59) }'
check "after wanlab shell: machine as before" same_state shell

# 7. The evidence beside the numbers: the link's qdisc statistics, time series, captures, and
#    the verdicts they carry (queue overflow; rate-bound with no buffer advice).
db=$out/evidence/results.db
"$wanlab" run "$src/tests/vm/run/evidence.toml" --no-vm --out "$out/evidence" --run ev1 \
    >"$out/evidence.stdout" 2>"$out/evidence.stderr"
rc=$?
check "evidence run exits 0 [rc=$rc]" [ "$rc" = 0 ]
# The counters' names hold dots: the JSON path quotes them.
cnt() { q "$db" "select json_extract(counters, '\$.qdisc.\"$2\"') from measurements where run_id='ev1' and trial=$1 and repeat=1"; }
drops=$(cnt 1 up.netem.drops) peak=$(cnt 1 up.netem.qlen_peak) limit=$(cnt 1 up.netem.limit)
check "netem at a 20-packet limit dropped packets and was seen full [drops=$drops peak=$peak limit=$limit]" \
    awk -v d="${drops:-0}" -v p="${peak:-0}" -v l="${limit:-0}" 'BEGIN { exit !(d >= 5 && l == 20 && p >= 18) }'
drops=$(cnt 2 up.netem.drops) sent=$(cnt 2 up.netem.sent_packets) limit=$(cnt 2 up.netem.limit)
check "netem at a 10000-packet limit dropped nothing of the packets it sent [drops=$drops sent=$sent limit=$limit]" \
    awk -v d="${drops:-1}" -v s="${sent:-0}" -v l="${limit:-0}" 'BEGIN { exit !(d == 0 && s > 1000 && l == 10000) }'
qd=$(cnt 3 up.queue.drops) sd=$(cnt 3 up.shaper.drops) nd=$(cnt 3 up.netem.drops) ql=$(cnt 3 up.queue.limit)
check "the 10-packet pfifo below the tbf dropped, counted again by its parents [queue=$qd tbf=$sd netem=$nd limit=$ql]" \
    awk -v q="${qd:-0}" -v s="${sd:-0}" -v n="${nd:-0}" -v l="${ql:-0}" 'BEGIN { exit !(q >= 1 && s == q && n >= q && l == 10) }'
check "the short limit's trial is diagnosed as a queue overflow with the limit to set" \
    grep -q "bulk, short-limit: queue overflow (up): netem dropped .*Raise \[link\] limit above" "$out/evidence.stdout"
check "the small fifo's trial is diagnosed as a queue overflow of the bottleneck queue" \
    grep -q "bulk, small-fifo: queue overflow (up): the bottleneck queue (qdisc, limit 10 packets) dropped" "$out/evidence.stdout"
check "the deep limit's trial has no queue overflow" sh -c "! grep -q 'deep-limit: queue overflow' '$out/evidence.stdout'"
pts=$(q "$db" "select count(*) from series s join measurements m on m.id=s.measurement_id where m.run_id='ev1' and m.trial=2 and m.repeat=1 and s.name='stream1.cwnd'")
check "TCP_INFO per 200 ms interval of a 4 s repeat [cwnd points=$pts]" \
    awk -v n="${pts:-0}" 'BEGIN { exit !(n >= 18 && n <= 21) }'
bl=$(q "$db" "select max(value) from series s join measurements m on m.id=s.measurement_id where m.run_id='ev1' and m.trial=2 and s.name='qdisc.up.netem.backlog'")
check "the netem queue's backlog over time, up to a BDP and more behind the deep limit [max=$bl bytes]" \
    awk -v b="${bl:-0}" 'BEGIN { exit !(b >= 100000) }'
pcaps=$(ls "$out"/evidence/ev1/trial-*/capture-bulk-*.pcap 2>/dev/null | wc -l)
check "a capture per trial and lab host, moved from the VM's staging folder [files=$pcaps]" [ "$pcaps" = 6 ]
check "results show lists the captures" sh -c "'$wanlab' results show ev1 --out '$out/evidence' | grep -q 'capture-bulk-server.pcap: 2000 packets'"
check "after the evidence run: machine as before" same_state evidence

"$wanlab" run "$src/tests/vm/run/rate-bound.toml" --no-vm --out "$out/ratebound" --run rb1 \
    >"$out/ratebound.stdout" 2>"$out/ratebound.stderr"
rc=$?
check "rate-bound run exits 0 [rc=$rc]" [ "$rc" = 0 ]
# What each trial measured, in the check's line: a failure says whether the rate fell short or
# a repeat failed.
rbdb=$out/ratebound/results.db
measured=$(q "$rbdb" "select group_concat(variant || ' ' || printf('%.2f', value / 1e6), ', ') from metric_values
                      where run_id='rb1' and metric='throughput'")
retx=$(q "$rbdb" "select group_concat(variant || ' ' || value, ', ') from metric_values
                  where run_id='rb1' and metric='retransmits'")
errors=$(q "$rbdb" "select group_concat(notes, ' ') from measurements where run_id='rb1' and notes like '%error%'")
check "iperf3 autotuned at 10 Mbit/s over 45 ms is rate-bound with either rmem_max [Mbit/s: $measured; retransmits: $retx${errors:+; $errors}]" \
    [ "$(grep -c 'iperf3, .*rmem-max: rate-bound' "$out/ratebound.stdout")" = 2 ]
check "and gets no buffer advice" sh -c "! grep -q 'bandwidth-delay product' '$out/ratebound.stdout'"

# wanlab tune on a lossy long path: the congestion control to change is the answer, bbr,
# confirmed against the machine's cubic, each stage a run of the results database.
"$wanlab" tune "$src/tests/vm/run/tune-lossy.toml" --no-vm --out "$out/tune" --format json \
    --write-sysctl "$out/tune.conf" >"$out/tune.json" 2>"$out/tune.stderr"
rc=$?
check "tune exits 0 [rc=$rc]" [ "$rc" = 0 ]
answer=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
p = j["paths"][0] if j["paths"] else {}
print("recommended %s, changes %s, beats %s; baseline %.2f Mbit/s -> %.2f, p %.4f; %.0f s measured in %d stages" % (
    j["recommended"].get("probe.bulk.congestion_control"), ",".join(j["changes"]), j["beats_baseline"],
    (p.get("baseline") or 0) / 1e6, (p.get("recommended") or 0) / 1e6, p.get("p_value") or 1,
    j["measured_seconds"], len(j["stages"])))' "$out/tune.json" 2>&1)
check "tune on 100 ms with 1% loss recommends bbr, the one change, better than cubic [$answer]" \
    sh -c "echo '$answer' | grep -q '^recommended bbr, changes probe.bulk.congestion_control, beats True'"
check "its sysctl drop-in sets bbr on the sender" grep -q '^net.ipv4.tcp_congestion_control = bbr$' "$out/tune.conf"
tune_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["id"])' "$out/tune.json" 2>/dev/null)
check "each stage is a run of the results database [$tune_id]" \
    [ "$(q "$out/tune/results.db" "select count(*) from runs where id like '$tune_id-s%' and status = 'complete'")" -ge 2 ]
check "after tune: machine as before" same_state tune
exit 0
