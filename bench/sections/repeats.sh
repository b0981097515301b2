#!/usr/bin/env bash
# bench section "repeats": what adaptive repeats ([run] repeats = "auto") save and settle
# against the fixed three, in the same run: the main example (examples/buffer-sweep.toml,
# in the micro-VM: it needs netem) and a noisy sweep (bench/experiments/noisy-sweep.toml, one
# stream over bare veths, on the host). Each is run three ways back to back (3 repeats, 10,
# auto); reported are
# the wall time of the run, the measurements taken, the comparisons that end significant, and
# the cells that stopped at max_repeats still wider than +-5%.
# Prints markdown on stdout (bench/run splices it into docs/performance.md), progress on stderr.
# Environment: WANLAB_BIN (default build/wanlab), BENCH_QUICK=1 (run.duration=3s for both).
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
bench_wanlab repeats
out=$(mktemp -d /var/tmp/wanlab-bench-repeats.XXXXXX)
trap 'rm -rf "$out"' EXIT
quick=()
[[ ${BENCH_QUICK:-0} == 1 ]] && quick=(--set run.duration=3s)

# measure NAME FILE RULE [--no-vm]: one run into $out/NAME-RULE, its wall time in seconds.
measure() {
  local name=$1 file=$2 rule=$3
  shift 3
  local dir=$out/$name-$rule start end
  echo "bench: repeats: $name, repeats = $rule ($(date -u +%H:%M:%S))" >&2
  start=$(date +%s.%N)
  "$wanlab" run "$file" --out "$dir" --quiet --set "run.repeats=$rule" ${quick[@]+"${quick[@]}"} "$@" >/dev/null
  end=$(date +%s.%N)
  "$wanlab" results show --out "$dir" --format json > "$dir/report.json"
  python3 -c "print($end - $start)" > "$dir/seconds"
}

# Fixed 3 (the default), fixed 10 (what settles every cell without the rule: its maximum),
# and auto.
for rule in 3 10 auto; do measure main examples/buffer-sweep.toml $rule; done
for rule in 3 10 auto; do measure noisy bench/experiments/noisy-sweep.toml $rule --no-vm; done
load=$(cut -d' ' -f1-3 /proc/loadavg)
python3 "$root/bench/lib/repeats.py" "$out" "$load" "$(git -C "$root" rev-parse --short HEAD)"
