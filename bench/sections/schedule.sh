#!/usr/bin/env bash
# bench section "schedule": how late a [[link.schedule]]'s changes reach the kernel: wanlab's
# player (a timer thread, netlink on the qdiscs in place) against `tc qdisc change` at the same
# instants, on the host kernel (tbf at the root) and in the micro-VM (netem with tbf below).
# Prints markdown (bench/run splices it into docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "bench: schedule lateness on the host" >&2
host=$(build/bench/schedule_bench host)
echo "bench: schedule lateness in the micro-VM" >&2
build/wanlab vm run --timeout 600 --out "$out" -- sh -c "'$PWD/build/bench/schedule_bench' netem > '$out/vm.json'" >&2
vm=$(cat "$out/vm.json")
f() { python3 -c "import json,sys; print(round(json.loads(sys.argv[1])[sys.argv[2]][sys.argv[3]]))" "$1" "$2" "$3"; }
row() {  # row JSON WHO LABEL
  echo "| $3 | $(f "$1" "$2" median_us) us | $(f "$1" "$2" p99_us) us | $(f "$1" "$2" max_us) us |"
}
cat <<DOC
## Schedules: how late a link's changes are

Run $(date -u +%Y-%m-%d), $(python3 -c "import json,sys; print(json.loads(sys.argv[1])['wanlab']['changes'])" "$host") changes each, one every 20 ms (a rate alternating between 20 and
5 Mbit/s). Lateness is from the instant the schedule names to the kernel's acknowledgement
(wanlab's player, \`netem/player.h\`: a timer thread with a 1 ns timer slack, the requests built
before the instant, one netlink request on the qdisc already there) or to the exit of \`tc qdisc
change\` run at the same instants (how transperf and tcconfig change a link). Same run, same
device. \`bench/schedule_bench\`.

On the host kernel ($(uname -r), no emulation; a tbf at the root of a veth):

| who | median | p99 | max |
|---|---|---|---|
$(row "$host" wanlab "wanlab (netlink, in place)")
$(row "$host" tc "tc qdisc change")

In the micro-VM (TCG: an emulated CPU, docs/microvm.md; netem with a tbf below it, as a lab's
router has):

| who | median | p99 | max |
|---|---|---|---|
$(row "$vm" wanlab "wanlab (netlink, in place)")
$(row "$vm" tc "tc qdisc change")

$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); print('Here one \`tc\` run takes longer than the 20 ms between changes (a process start under TCG costs tens of milliseconds), so tc falls further behind with every change: its lateness grows through the run.' if j['tc']['median_us'] > 20000 else '')" "$vm")

The micro-VM's numbers are those its tests run with: vm:schedule's step, outage and delay
checks read the instants the kernel acknowledged (the \`link.*\` series), not the planned
ones, so a late change moves the comparison with it.
DOC
