#!/usr/bin/env bash
# bench section "fidelity": configured against measured delay, jitter, loss and rate, in the
# micro-VM (real netem; the host kernel lacks it). Runs the experiments in bench/experiments/
# fidelity-*.toml with `wanlab run --vm` into one results database and tabulates what it holds
# (bench/lib/fidelity.py). Prints markdown on stdout (bench/run splices it into
# docs/performance.md), progress on stderr.
# Environment: WANLAB_BIN (default build/wanlab), BENCH_KEEP=1 (keep the results), BENCH_QUICK=1 (fewer probes, shorter runs:
# checks the harness, the numbers are not for the page).
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
bench_wanlab fidelity
quick=${BENCH_QUICK:-0}
exp=bench/experiments
out=$(mktemp -d /tmp/wanlab-bench-fidelity.XXXXXX)
# BENCH_KEEP=1 keeps the results database and the reports (for a look with sqlite3).
if [[ ${BENCH_KEEP:-0} == 1 ]]; then trap 'echo "bench: fidelity: kept $out" >&2' EXIT; else trap 'rm -rf "$out"' EXIT; fi
db=$out/results.db

# Per experiment: extra --set arguments. Quick: fewer probes (about 10 expected losses per loss
# row instead of 50), fewer rates, shorter TCP runs.
declare -A sets
if [[ $quick == 1 ]]; then
  sets[fidelity-rtt]='sweep."probe.rtt.count"=[100, 100, 100, 100, 100, 30, 15, 5000, 500, 100, 50]'
  sets[fidelity-jitter]='probe.rtt.count=150|sweep."link.jitter"=["0ms", "10ms"]'
  sets[fidelity-rate]='sweep."link.rtt"=["0ms", "0ms", "0ms", "100ms"]|sweep."link.rate"=["10mbit", "1000mbit", "10gbit", "10mbit"]|run.duration=3s'
  sets[fidelity-ceiling]='run.duration=3s|run.repeats=1'
  sets[fidelity-limit]='sweep."link.rtt"=["400ms"]|run.duration=6s|run.warmup=1s'
fi
set_args() {  # the --set arguments of experiment $1, one per line
  local IFS='|'
  for s in ${sets[$1]:-}; do printf -- '--set\n%s\n' "$s"; done
}

declare -A took status
total_start=$SECONDS
for name in fidelity-rtt fidelity-jitter fidelity-rate fidelity-ceiling fidelity-limit; do
  mapfile -t extra < <(set_args "$name")
  echo "bench: fidelity: $name in the micro-VM" >&2
  start=$SECONDS
  rc=0
  "$wanlab" run --vm "$exp/$name.toml" --out "$out" "${extra[@]}" > "$out/$name.report" || rc=$?
  took[$name]=$((SECONDS - start))
  status[$name]=$rc
  # 0: complete; 3 would be a failed assert (these files have none). Anything else is reported
  # in the section, and whatever the run committed is still tabulated.
  [[ $rc == 0 ]] || echo "bench: fidelity: $name exited with status $rc (see above)" >&2
done
total=$((SECONDS - total_start))
mapfile -t limit_sets < <(set_args fidelity-limit)
"$wanlab" plan --json "$exp/fidelity-limit.toml" "${limit_sets[@]}" > "$out/limit-plan.json" 2>/dev/null
python3 bench/lib/fidelity.py "$db" "$out/limit-plan.json" > "$out/tables.json"
get() { python3 -c "import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(v if v is not None else 'n/a')" "$out/tables.json" "$1"; }
# What "auto" gives the 1.1 Gbit/s x 200 ms path users report, from wanlab itself.
auto_11g=$(printf '[link]\nrtt = "200ms"\nrate = "1100mbit"\n' > "$out/auto.toml" &&
  "$wanlab" plan --json "$out/auto.toml" | python3 -c "import json,sys; print(f\"{json.load(sys.stdin)['trials'][0]['link']['up']['limit']:,}\")")
failed=""
for name in "${!status[@]}"; do
  [[ ${status[$name]} == 0 ]] || failed+=" \`$name\` (exit status ${status[$name]}, its rows may be missing or partial);"
done
mode="full"
[[ $quick == 1 ]] && mode="quick (BENCH_QUICK=1: fewer probes and rates, shorter TCP runs; not for the page)"
vm_cpus=$(( $(nproc) < 4 ? $(nproc) : 4 ))

cat <<DOC
## Fidelity: configured against measured link conditions

Run $(date -u +%Y-%m-%d), $mode, in the micro-VM (QEMU TCG, no KVM, ${vm_cpus} vCPUs, guest
kernel with real netem), ${total} s in all (delay and loss ${took[fidelity-rtt]} s, jitter
${took[fidelity-jitter]} s, rate ${took[fidelity-rate]} s, no-netem ceiling ${took[fidelity-ceiling]} s,
queue limit ${took[fidelity-limit]} s, each including a VM boot).${failed:+ Runs that did not complete:${failed}}

How: the experiments \`bench/experiments/fidelity-*.toml\`, each run with \`wanlab run --vm\`
into one results database, which \`bench/lib/fidelity.py\` reads: the probes' metrics and the
emulation check wanlab stores with every trial (\`run/check.cpp\`: RTT by 20 TCP handshakes,
median; rate by a UDP stream paced at 125% of the rate for 1 s, counted in wire bytes at the
receiver, the better of two tries). The netem tree sits on the router between the client and
server namespaces, one qdisc per direction, so an RTT of R is R/2 of delay each way.

### Delay

The rtt probe (\`method = "udp"\`: echo through wanlab's server, receive time stamped by the
kernel), 300 probes 10 ms apart (60 at 100 ms, 30 at 300 ms: each probe waits for its answer).
The tolerance is the emulation check's: [95% of configured - 0.2 ms, 105% + 5 ms], 5 ms being
the TCG timing noise allowance.

$(get delay)

Under TCG the path without netem already takes $(get floor_ms) ms (median): a round trip
through two veth pairs and the router costs emulated CPU, and the guest's timers are coarse.
That floor adds to every configured delay, so sub-millisecond RTTs cannot be reproduced in the
VM (their ratio is the floor's, not netem's). From 10 ms up the median exceeded the
configured RTT by $(get excess_ms), against the check's allowance of 5% + 5 ms. The
emulation check column is wanlab's own check of each trial (20 TCP handshakes timed in user
space), as stored with the trial; a "did not hold" there with the echo inside means the
check's few samples caught the VM's noise.

### Jitter

netem without a \`distribution\` draws each packet's delay uniformly from [delay - jitter,
delay + jitter], independently per direction, so the round trip varies by the sum of two such
draws: a triangular distribution whose interquartile range (IQR) is 4 x jitter x (1 - 1/sqrt(2)),
1.17 x jitter. 40 ms RTT, $( [[ $quick == 1 ]] && echo 150 || echo 500 ) UDP echo probes per row. The VM adds its own spread (the
0 ms row), with rare spikes of tens of milliseconds under TCG that would dominate a standard
deviation, so the comparison uses the IQR, and the expected IQR is that of the configured
jitter added to the VM's own RTTs as measured in the 0 ms row (convolved by drawing from
both, fixed seed). Tolerance: measured IQR within 20% of that (the IQR of a few hundred
samples is itself uncertain by several percent).

$(get jitter)

### Loss

Random loss on the client -> server direction only, so a lost echo is a lost packet of the
configured loss; UDP echo probes 1 ms apart (each lost probe waits 1 s for its answer), sized
for about $( [[ $quick == 1 ]] && echo 5 || echo 20-30 ) expected losses per row. The interval is the exact 95% binomial
(Clopper-Pearson) interval of the measured fraction for that many probes; the row is inside
when the configured loss lies in it. With k losses the interval is roughly
k ± 2·sqrt(k): about ±45% of the value at 20 losses, ±90% at 5.

$(get loss)

### Rate

Rate limit by netem (\`shaper = "netem"\`, the default), without delay and with 100 ms RTT
(10 Gbit/s, a control for the VM's ceiling, without delay only),
\`limit = "auto"\`, socket buffer maxima of 64 MiB. Two measurements per configuration: the
emulation check's UDP stream (wire bytes, what netem counts; tolerance 85-105%, the check's)
and the throughput probe, one TCP stream for $( [[ $quick == 1 ]] && echo 3 || echo 8 ) s after a 1 s warm-up (goodput:
payload only, so at most 1448/1514 = 95.6% of the rate; tolerance 85% of that to 100%). The last
row is the same TCP probe on the same path with no netem at all.

$(get rate)

Where the 1000 mbit rows (and the 10 gbit control) fall short, it is the emulated machine,
not netem's rate: measured at the highest rates, $(get high_rates). A ten times larger
configured rate does not raise what arrives, so the rate limit is not what binds. The same
TCP probe through no qdisc at all carried $(get tcp_no_netem_mbit) Mbit/s; where that is higher than through
netem, the difference is what netem's own per-packet work (its timer and queue) costs on an
emulated CPU. Under TCG every packet costs emulated CPU in the sender, the router's
forwarding and the receiver (the lab turns offloads off so that netem sees real 1500-byte
packets), and the host's other load moves these ceilings from run to run. On a host kernel
with netem (or a KVM guest) the 1 Gbit/s rows are expected to hold; these rows say nothing
about that.

### The queue limit at a high bandwidth-delay product

netem keeps every packet it delays in its own queue, so \`limit\` bounds not only the backlog
but the packets in flight in that direction: one direction carries at most
limit x packet size / one-way delay. 100 Mbit/s, limit 1000 (tc's default) against
\`limit = "auto"\` (1.5 x rate x (delay + jitter) / MTU, at least 1000), measured by the
emulation check's UDP stream and one TCP stream with BBR ($( [[ $quick == 1 ]] && echo 6 || echo 20 ) s after a warm-up).
BBR rather than the default CUBIC because at these RTTs CUBIC's slow start overshoots a deep
queue and then spends the run in loss recovery, which says more about CUBIC than about the
queue; the UDP stream is the direct measurement of what the queue lets through.

$(get limit)

### Compared with what users report of other set-ups

- A common report with plain \`tc qdisc add ... netem delay 100ms rate 1100mbit\`: a path
  that carries 1.1 Gbit/s falls to about 100 Mbit/s at 200 ms RTT. That is this effect: with
  tc's default of 1000 packets, one direction holds at most 1000 x 1514 B x 8 / 100 ms =
  121 Mbit/s, whatever the rate, where about 9,100 packets are in flight at 1.1 Gbit/s. wanlab's
  \`limit = "auto"\` gives that path ${auto_11g} packets (1.5 x rate x one-way delay / MTU), and
  \`wanlab validate\` warns when an explicit \`limit\` is below it, with the cap it implies.
- Emulators that put netem on the sending host itself (rather than a router between
  namespaces) see TCP Small Queues and the sender's own qdisc interact with the delay; wanlab
  impairs on the router's egress (docs/netem.md).
- Delay accuracy in this VM is bounded by TCG (a floor of $(get floor_ms) ms and millisecond
  timer noise), so the sub-millisecond rows above show the VM's limit, not netem's.
DOC
