#!/bin/sh
# Inside the micro-VM (real netem), as root: links that change during a measurement
# ([[link.schedule]]). Writes one TAP-like line per check to OUT/results.
# Usage: schedule_checks.sh WANLAB SRC OUT
wanlab=$1 src=$2 out=$3
. "$src/tests/vm/checks_lib.sh"
series() { python3 "$src/tests/vm/schedule_series.py" "$@"; }
contains() { case "$1" in *"$2"*) return 0 ;; esac; return 1; }  # contains TEXT PART

state() {
    { ip netns list; ip -o link show | sed 's/^[0-9]*: //' | cut -d' ' -f1-2; tc qdisc show
      ls /run/wanlab/*.journal 2>/dev/null; } | sort
}
state >"$out/state.before"
same_state() { state | diff "$out/state.before" - >"$out/diff.$1"; }

# measured NAME FILE CHECK DESCRIPTION [ARGS...]: runs FILE as run NAME, exports its
# measurements and checks them with schedule_series.py CHECK (ARGS after the export's path).
# (check() sets `desc`: these names are the function's own.)
measured() {
    m_name=$1 m_file=$2 m_what=$3 m_desc=$4
    shift 4
    "$wanlab" run "$m_file" --no-vm --out "$out/$m_name" --run "$m_name" >"$out/$m_name.stdout" 2>"$out/$m_name.stderr"
    check "$m_name: the run exits 0" [ $? = 0 ]
    "$wanlab" results show "$m_name" --out "$out/$m_name" --export json >"$out/$m_name.json"
    check "$m_desc [$(series "$m_what" "$out/$m_name.json" "$@")]" series "$m_what" "$out/$m_name.json" "$@"
}

# 1. A rate step under one bulk transfer.
measured step "$src/tests/vm/schedule/step.toml" step \
    "rate step 20 -> 5 Mbit/s: the link delivers the new rate from the next 100 ms window, never above 105% of its rate"
check "rate step: the machine is as before" same_state step

# 2. An outage under one bulk transfer.
measured outage "$src/tests/vm/schedule/outage.toml" outage \
    "a 3 s outage delivers nothing inside it, and traffic comes back"
check "outage: the machine is as before" same_state outage

# 3. A delay schedule shows in the RTT series.
measured delay "$src/tests/vm/schedule/delay-steps.toml" delay "RTT follows the delay schedule 20 -> 100 -> 20 ms"

# 3b. A trace replayed: the generated LTE-like trace under a UDP stream faster than it.
measured trace "$src/tests/vm/schedule/trace.toml" trace \
    "the link follows the LTE-like trace second by second (correlation >= 0.95, mean within 5%)" \
    "$src/examples/traces/lte-like.trace"
held=$(q "$out/trace/results.db" "select json_extract(emulation_check, '\$.note') from trials")
check "trace: the emulation check compared each window with the trace, and it held [$held]" \
    contains "$held" "schedule held in its one measurement"
check "trace: the machine is as before" same_state trace

# 4. examples/outage-recovery.toml: its asserts are its check (a patient client loses no
# request to a 2 s outage, its slowest waited it out; an impatient one fails some).
"$wanlab" run "$src/examples/outage-recovery.toml" --no-vm --out "$out/recovery" --run recovery --quiet \
    --set run.repeats=1 --set run.cooldown=0s >"$out/recovery.stdout" 2>"$out/recovery.stderr"
rc=$?
check "outage-recovery runs and its asserts pass [rc=$rc; $(grep -E '^  (PASS|FAIL)' "$out/recovery.stdout" | tr -s ' ' | tr '\n' ';')]" [ "$rc" = 0 ]
check "outage-recovery: the machine is as before" same_state recovery

# 4b. examples/lte-trace.toml: its asserts are its check (fq_codel keeps the ping's RTT at most
# half the deep FIFO's under the trace; the download gets most of what the trace allows).
"$wanlab" run "$src/examples/lte-trace.toml" --no-vm --out "$out/lte" --run lte --quiet \
    --set run.repeats=1 --set run.duration=10s --set run.cooldown=0s >"$out/lte.stdout" 2>"$out/lte.stderr"
rc=$?
check "lte-trace runs and its asserts pass [rc=$rc; $(grep -E '^  (PASS|FAIL)' "$out/lte.stdout" | tr -s ' ' | tr '\n' ';')]" [ "$rc" = 0 ]
check "lte-trace: the machine is as before" same_state lte

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
