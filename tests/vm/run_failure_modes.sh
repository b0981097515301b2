#!/usr/bin/env bash
# CTest "vm:timeout-and-errors": --timeout gives 124 and leaves nothing behind; a missing QEMU
# or kernel gives a message saying what to do. Usage: run_failure_modes.sh WANLAB
set -u
wanlab=$1
fail() { echo "FAIL: $*"; exit 1; }
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT

"$wanlab" vm run --timeout 2 -- sleep 60 >"$log" 2>&1
rc=$?
cat "$log"
[[ $rc -eq 124 ]] || fail "--timeout 2 -- sleep 60 exited $rc, expected 124"
grep -q 'ran over --timeout' "$log" || fail "no timeout message"
pgrep -f 'qemu-system-x86_64.*wanlab' >/dev/null && fail "a QEMU survived the timeout"

WANLAB_QEMU=/nonexistent/qemu "$wanlab" vm run -- true >"$log" 2>&1
rc=$?
cat "$log"
[[ $rc -eq 1 ]] || fail "missing QEMU exited $rc, expected 1"
grep -q 'install the Debian package qemu-system-x86' "$log" || fail "no package hint"

WANLAB_KERNEL_CACHE=/nonexistent/kernels "$wanlab" vm run -- true >"$log" 2>&1
rc=$?
cat "$log"
[[ $rc -eq 1 ]] || fail "missing kernel exited $rc, expected 1"
grep -q 'run `wanlab vm fetch`' "$log" || fail "no fetch-kernel hint"
echo "PASS"
