#!/usr/bin/env bash
# CTest "vm:examples": boots the micro-VM once and runs examples_checks.sh inside it: every
# runnable example of examples/ with short durations, its headline effect checked (direction
# and rough size). Fails (never skips) when the VM cannot run.
# Usage: examples_e2e.sh WANLAB SRC_DIR WORK_DIR
set -u
wanlab=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work/out" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
command -v sqlite3 >/dev/null || fail "'sqlite3' is not installed (run scripts/setup)"

start=$(date +%s)
"$wanlab" vm run --stats --timeout 900 --out "$work/out" -- \
    sh "$src/tests/vm/examples_checks.sh" "$wanlab" "$src" "$work/out" >"$work/stdout" 2>"$work/stderr"
rc=$?
echo "--- results ($(( $(date +%s) - start )) s in the VM)"; cat "$work/out/results" 2>/dev/null
echo "--- headlines"; cat "$work/out/headlines" 2>/dev/null
for f in "$work"/out/*.stdout "$work"/out/*.stderr; do
    [[ -s $f ]] && grep -q . "$f" && { echo "--- ${f##*/}"; tail -40 "$f"; }
done
echo "--- vm stderr"; tail -20 "$work/stderr"
[[ $rc -eq 0 ]] || fail "wanlab vm run exited $rc"
[[ -s $work/out/results ]] || fail "no results from inside the VM"
grep -q '^not ok' "$work/out/results" && fail "$(grep '^not ok' "$work/out/results")"
n=$(grep -c '^ok' "$work/out/results")
[[ $n -ge 29 ]] || fail "only $n checks passed; expected 29"
echo "PASS: $n checks of the examples inside the VM"
rm -rf "$work"
