#!/usr/bin/env bash
# One micro-VM boot for a checks script: runs CHECKS (a POSIX sh script, called as
# `CHECKS WANLAB SRC OUT`) inside the VM as root, where it writes one "ok N - ..." or
# "not ok N - ..." line per check to OUT/results and whatever it wants shown to OUT/*.stdout,
# *.stderr, diff.*. Passes when the VM ran, no check failed and at least MIN checks passed;
# fails (never skips) when the VM cannot run. What the script leaves in OUT/keep is moved to
# WORK_DIR.keep when it passes (vm:run-e2e keeps its main run for browser:report-page).
# Used by vm:run-e2e, vm:examples, vm:host-mode, vm:schedule.
# Usage: vm_checks.sh NAME WANLAB SRC_DIR WORK_DIR CHECKS MIN
set -u
name=$1 wanlab=$2 src=$3 work=$4 checks=$5 min=$6
rm -rf "$work" "$work.keep" && mkdir -p "$work/out" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
command -v sqlite3 >/dev/null || fail "'sqlite3' is not installed (run scripts/setup --tests)"

. "$(dirname "$0")/host_cpu.sh"
start=$(date +%s) cpu=$(cpu_mark)
"$wanlab" vm run --stats --timeout 900 --out "$work/out" -- \
    sh "$checks" "$wanlab" "$src" "$work/out" >"$work/stdout" 2>"$work/stderr"
rc=$?
load=$(cpu_since "$cpu")
echo "--- results ($(( $(date +%s) - start )) s in the VM; $load)"; cat "$work/out/results" 2>/dev/null
for f in "$work"/out/*.stdout "$work"/out/*.stderr "$work"/out/*.out "$work"/out/diff.* "$work"/out/headlines; do
    [[ -s $f ]] && grep -q . "$f" && { echo "--- ${f##*/}"; tail -40 "$f"; }
done
echo "--- vm stderr"; tail -20 "$work/stderr"
[[ $rc -eq 0 ]] || fail "wanlab vm run exited $rc"
[[ -s $work/out/results ]] || fail "no results from inside the VM"
grep -q '^not ok' "$work/out/results" && fail "$(grep '^not ok' "$work/out/results") ($load)"
n=$(grep -c '^ok' "$work/out/results")
[[ $n -ge $min ]] || fail "only $n checks passed; expected $min"
echo "PASS: $n checks of $name inside the VM ($load)"
# What a checks script left in OUT/keep for another test (a fixture) outlives the folder.
[[ -d $work/out/keep ]] && mv "$work/out/keep" "$work.keep"
rm -rf "$work"
