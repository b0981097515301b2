#!/usr/bin/env bash
# bench section "control": one trial's link configuration and sysctls, wanlab (netlink and
# /proc/sys) against tc and sysctl commands, in the micro-VM (the host kernel lacks netem).
# Prints markdown (bench/run splices it into docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=50
[[ ${BENCH_QUICK:-0} == 1 ]] && rounds=6
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "bench: control path, $rounds rounds, in the micro-VM" >&2
build/wanlab vm run --timeout 900 --out "$out" -- sh -c "'$PWD/build/bench/apply_bench' $rounds > '$out/apply.json'" >&2
apply=$(cat "$out/apply.json")
field() { python3 -c "import json,sys; print(round(json.loads(sys.argv[1])[sys.argv[2]], 2))" "$apply" "$1"; }
nl_med=$(field netlink_ms_median) nl_min=$(field netlink_ms_min) nl_max=$(field netlink_ms_max)
tc_med=$(field tc_ms_median) tc_min=$(field tc_ms_min) tc_max=$(field tc_ms_max)
ratio=$(python3 -c "print(round($tc_med / $nl_med, 1))")
# What one process start costs on this host, to translate the VM's ratio to bare metal.
host_tc=$(python3 - <<'PY'
import subprocess, time
t = time.perf_counter()
for _ in range(50):
    subprocess.run(["tc", "qdisc", "show", "dev", "lo"], stdout=subprocess.DEVNULL, check=True)
print(round((time.perf_counter() - t) / 50 * 1000, 2))
PY
)
cat <<DOC
## Control path: applying one trial's link configuration and sysctls

Run $(date -u +%Y-%m-%d) in the micro-VM (TCG, no KVM), $rounds rounds each.

What is measured: one trial's whole change, alternating between two trials so that every
apply is a real change: on both router devices netem (delay, jitter, loss), an htb rate
limit and a pfifo queue below it, plus three per-namespace sysctls (\`tcp_rmem\`,
\`tcp_wmem\`, the congestion control). wanlab sends its netlink requests, reads every field
back from the kernel and writes /proc/sys inside the namespace; the alternative is the same
change made the way users script it: \`tc -n NS\` commands, one \`tc qdisc show\` per device
to look at the result, and one \`ip netns exec NS sysctl -w\` with the three keys.

| path | median per trial | min | max |
|---|---|---|---|
| wanlab (netlink with read-back, /proc/sys) | ${nl_med} ms | ${nl_min} ms | ${nl_max} ms |
| tc + sysctl commands | ${tc_med} ms | ${tc_min} ms | ${tc_max} ms |

wanlab is ${ratio}x faster here. The VM inflates the ratio: under TCG each process start
costs tens of milliseconds (docs/microvm.md) and the command path starts 10-12 processes
per trial. On this host (no emulation) one \`tc qdisc show\` process costs ${host_tc} ms, so
the same trial through commands would cost roughly 12 x ${host_tc} ms there (an estimate:
the host kernel has no netem to run the whole comparison on), while wanlab's path took
${nl_med} ms even under TCG. The difference is what keeps the gap between trials short in
sweeps of thousands of trials (see the scale section).
DOC
