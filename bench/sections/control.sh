#!/usr/bin/env bash
# bench section "control": one trial's link configuration and sysctls, wanlab (netlink and
# /proc/sys) against tc and sysctl commands: with netem in the micro-VM, and without it
# (htb, tbf, pfifo) on the host kernel, in the same run.
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
# The same on the host kernel, for real: it has htb, tbf and pfifo (not netem), so the trial
# there is a shaper at the root with its queue, plus the same three sysctls.
echo "bench: control path on the host, $rounds rounds" >&2
host_htb=$(build/bench/apply_bench "$rounds" htb)
host_tbf=$(build/bench/apply_bench "$rounds" tbf)
hfield() { python3 -c "import json,sys; print(round(json.loads(sys.argv[1])[sys.argv[2]], 2))" "$1" "$2"; }
hratio() { python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(round(j['tc_ms_median'] / j['netlink_ms_median'], 1))" "$1"; }
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
per trial.

On the host kernel (no emulation, $(uname -r)), in the same run, $rounds rounds each. This
kernel has htb, tbf and pfifo but no netem, so the trial is a shaper at the root of both
devices with a pfifo below it (100 Mbit/s and 1000 packets, then 50 Mbit/s and 500), plus
the same three sysctls (the congestion control alternates between the two this host allows
namespaces to choose). wanlab builds it with the encoders its trees use
(\`netem::shaper_requests\`) and reads the rate and the limit back. The commands are
\`tc -n NS\` for the same tree, \`tc qdisc show\` (and \`tc class show\` for htb) per
device, and one \`ip netns exec NS sysctl -w\`.

| shaper | wanlab (netlink with read-back, /proc/sys) | tc + sysctl commands | ratio |
|---|---|---|---|
| htb + pfifo | $(hfield "$host_htb" netlink_ms_median) ms ($(hfield "$host_htb" netlink_ms_min)-$(hfield "$host_htb" netlink_ms_max)) | $(hfield "$host_htb" tc_ms_median) ms ($(hfield "$host_htb" tc_ms_min)-$(hfield "$host_htb" tc_ms_max)) | $(hratio "$host_htb")x |
| tbf + pfifo | $(hfield "$host_tbf" netlink_ms_median) ms ($(hfield "$host_tbf" netlink_ms_min)-$(hfield "$host_tbf" netlink_ms_max)) | $(hfield "$host_tbf" tc_ms_median) ms ($(hfield "$host_tbf" tc_ms_min)-$(hfield "$host_tbf" tc_ms_max)) | $(hratio "$host_tbf")x |

Medians, with the range over the rounds in brackets. The difference is what keeps the gap
between trials short in sweeps of thousands of trials (see the scale section).
DOC
