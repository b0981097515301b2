#!/usr/bin/env bash
# CTest "vm:run-e2e": boots the micro-VM once and runs run_checks.sh inside it: `wanlab run`
# end to end with real netem (the main example's buffer effect, asserts and JUnit, kill -9 +
# restore, Ctrl-C). Fails (never skips) when the VM cannot run.
# Usage: run_e2e.sh WANLAB SRC_DIR WORK_DIR
set -u
wanlab=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work/out" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
command -v sqlite3 >/dev/null || fail "'sqlite3' is not installed (run scripts/setup)"

"$wanlab" vm run --stats --timeout 900 --out "$work/out" -- \
    sh "$src/tests/vm/run_checks.sh" "$wanlab" "$src" "$work/out" >"$work/stdout" 2>"$work/stderr"
rc=$?
echo "--- results"; cat "$work/out/results" 2>/dev/null
echo "--- main example report"; cat "$work/out/main.stdout" 2>/dev/null
for f in main.stderr guard.stderr auto.stdout asserts.stdout kill.stderr restore.out int.stdout int.stderr diff.main diff.kill diff.int; do
    [[ -s $work/out/$f ]] && { echo "--- $f"; tail -40 "$work/out/$f"; }
done
echo "--- vm stderr"; tail -20 "$work/stderr"
[[ $rc -eq 0 ]] || fail "wanlab vm run exited $rc"
[[ -s $work/out/results ]] || fail "no results from inside the VM"
grep -q '^not ok' "$work/out/results" && fail "$(grep '^not ok' "$work/out/results")"
n=$(grep -c '^ok' "$work/out/results")
[[ $n -ge 29 ]] || fail "only $n checks passed; expected 29"
echo "PASS: $n checks of wanlab run inside the VM"
rm -rf "$work"
