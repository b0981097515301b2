#!/bin/sh
# Inside the micro-VM (real netem), as root: links that change during a measurement
# ([[link.schedule]]). Writes one TAP-like line per check to OUT/results.
# Usage: schedule_checks.sh WANLAB SRC OUT
wanlab=$1 src=$2 out=$3
. "$src/tests/vm/checks_lib.sh"
series() { python3 "$src/tests/vm/schedule_series.py" "$@"; }

state() {
    { ip netns list; ip -o link show | sed 's/^[0-9]*: //' | cut -d' ' -f1-2; tc qdisc show
      ls /run/wanlab/*.journal 2>/dev/null; } | sort
}
state >"$out/state.before"
same_state() { state | diff "$out/state.before" - >"$out/diff.$1"; }

# 1. A rate step under one bulk transfer.
"$wanlab" run "$src/tests/vm/schedule/step.toml" --no-vm --out "$out/step" --run step \
    >"$out/step.stdout" 2>"$out/step.stderr"
check "rate step: the run exits 0" [ $? = 0 ]
"$wanlab" results show step --out "$out/step" --export json >"$out/step.json"
check "rate step 20 -> 5 Mbit/s: the link delivers the new rate from the next 100 ms window, never above 105% of its rate [$(series step "$out/step.json")]" \
    series step "$out/step.json"
check "rate step: the machine is as before" same_state step

# 2. An outage under one bulk transfer.
"$wanlab" run "$src/tests/vm/schedule/outage.toml" --no-vm --out "$out/outage" --run outage \
    >"$out/outage.stdout" 2>"$out/outage.stderr"
check "outage: the run exits 0" [ $? = 0 ]
"$wanlab" results show outage --out "$out/outage" --export json >"$out/outage.json"
check "a 3 s outage delivers nothing inside it, and traffic comes back [$(series outage "$out/outage.json")]" \
    series outage "$out/outage.json"
check "outage: the machine is as before" same_state outage

# 3. A delay schedule shows in the RTT series.
"$wanlab" run "$src/tests/vm/schedule/delay-steps.toml" --no-vm --out "$out/delay" --run delay \
    >"$out/delay.stdout" 2>"$out/delay.stderr"
check "delay schedule: the run exits 0" [ $? = 0 ]
"$wanlab" results show delay --out "$out/delay" --export json >"$out/delay.json"
check "RTT follows the delay schedule 20 -> 100 -> 20 ms [$(series delay "$out/delay.json")]" \
    series delay "$out/delay.json"

# 4. examples/outage-recovery.toml: its asserts are its check (a patient client loses no
# request to a 2 s outage, its slowest waited it out; an impatient one fails some).
"$wanlab" run "$src/examples/outage-recovery.toml" --no-vm --out "$out/recovery" --run recovery --quiet \
    --set run.repeats=1 --set run.cooldown=0s >"$out/recovery.stdout" 2>"$out/recovery.stderr"
rc=$?
check "outage-recovery runs and its asserts pass [rc=$rc; $(grep -E '^  (PASS|FAIL)' "$out/recovery.stdout" | tr -s ' ' | tr '\n' ';')]" [ "$rc" = 0 ]
check "outage-recovery: the machine is as before" same_state recovery

# 5. A kill in the middle of an outage: `wanlab restore` gives the machine back exactly.
"$wanlab" run "$src/tests/vm/schedule/outage.toml" --no-vm --out "$out/kill" --run kill \
    >"$out/kill.stdout" 2>"$out/kill.stderr" &
pid=$!
sleep 8  # the start and the emulation check (about 4 s), then 4 s into the transfer: inside the outage
kill -9 $pid
wait $pid 2>/dev/null
check "killed mid-outage: the lab is still there before restore" sh -c "ip netns list | grep -q wanlab-kill"
"$wanlab" restore >"$out/restore.out" 2>&1
check "killed mid-outage: wanlab restore gives the machine back exactly" same_state kill
