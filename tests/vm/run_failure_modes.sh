#!/usr/bin/env bash
# CTest "vm:timeout-and-errors": --timeout gives 124 and leaves nothing behind; a missing QEMU
# or kernel gives a message saying what to do; `wanlab probe` with link conditions on a kernel
# without netem (and `wanlab shell FILE -- CMD`) moves into the micro-VM by itself, measures
# the path there, keeps its exit status and folder and gives 130 on Ctrl-C, with root or
# without. Usage: run_failure_modes.sh WANLAB
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
[[ $rc -eq 1 ]] || fail "a WANLAB_QEMU naming nothing exited $rc, expected 1"
grep -q 'WANLAB_QEMU=/nonexistent/qemu is not a program wanlab can run' "$log" || fail "WANLAB_QEMU not named"
PATH=/nonexistent "$wanlab" vm run -- true >"$log" 2>&1
rc=$?
cat "$log"
[[ $rc -eq 1 ]] || fail "missing QEMU exited $rc, expected 1"
grep -q 'install the Debian package qemu-system-x86' "$log" || fail "no package hint"

WANLAB_KERNEL_CACHE=/nonexistent/kernels "$wanlab" vm run -- true >"$log" 2>&1
rc=$?
cat "$log"
[[ $rc -eq 1 ]] || fail "missing kernel exited $rc, expected 1"
grep -q 'run `wanlab vm fetch`' "$log" || fail "no fetch-kernel hint"
# A probe's --json rtt_p50 in FILE, in ms; whether VALUE lies in [LOW, HIGH].
p50_ms() { awk -F': ' '/"rtt_p50": [0-9]/ { gsub(/,/, "", $2); print $2 * 1000; exit }' "$1"; }
within() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; }
# WANLAB ARGS... as the user nobody, with the kernel this machine fetched (bound where nobody
# can read it, in a mount namespace of this test's own) and a cache of nobody's own in
# $user_dir; in FOLDER (the first argument).
as_nobody() {
  local dir=$1
  shift
  unshare -m sh -c "mount --bind '$kernels' '$user_dir/kernel' && cd '$dir' && setpriv --reuid=nobody --regid=nogroup \
      --clear-groups env HOME='$user_dir' XDG_CACHE_HOME='$user_dir/cache' WANLAB_KERNEL_CACHE='$user_dir/kernel' \
      '$wanlab' $*"
}

# The lab wherever the user stands: this kernel has no netem, so the probe moves into the VM.
if ! modinfo sch_netem >/dev/null 2>&1; then  # no netem here, as on this project's machines
  "$wanlab" probe rtt --rtt 80ms --count 20 --interval 50ms --json >"$log" 2>"$log.err"
  rc=$?
  cat "$log.err"
  [[ $rc -eq 0 ]] || fail "probe rtt --rtt 80ms exited $rc, expected 0"
  grep -q 'this kernel has no netem: running this in the micro-VM' "$log.err" || fail "the probe did not say it moved into the micro-VM"
  p50=$(p50_ms "$log")
  within "$p50" 80 86 || fail "probe rtt p50 $p50 ms for an 80 ms rtt"
  echo "probe rtt --rtt 80ms in the micro-VM: p50 $p50 ms"
  "$wanlab" probe rtt --rtt 80ms --count 600 --interval 100ms >"$log" 2>"$log.err" &
  pid=$!
  for _ in $(seq 600); do grep -q 'path: up' "$log.err" && break; sleep 0.1; done
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [[ $rc -eq 130 ]] || fail "Ctrl-C on a probe in the micro-VM exited $rc, expected 130"
  sleep 1
  pgrep -f 'qemu-system-x86_64.*wanlab' >/dev/null && fail "a QEMU survived Ctrl-C"
  rm -f "$log.err"
  # shell, likewise, around the user's own command, in the user's folder, with its exit status;
  # an interactive shell without a terminal is refused with the command line that works (from a
  # terminal it goes there with it: vm:terminal).
  here=$(mktemp -d /tmp/wanlab-shell-cwd-XXXXXX)
  (cd "$here" && "$wanlab" shell buffer-sweep -- sh -c 'pwd; ping -c 2 -q "$WANLAB_SERVER" >/dev/null && exit 7') \
    >"$log" 2>"$log.err"
  rc=$?
  cat "$log" "$log.err"
  [[ $rc -eq 7 ]] || fail "shell -- sh -c '... exit 7' in the micro-VM exited $rc, expected 7"
  grep -qx "$here" "$log" || fail "the command in the micro-VM did not start in $here"
  (cd "$here" && "$wanlab" shell buffer-sweep </dev/null) >"$log" 2>&1
  rc=$?
  rmdir "$here"
  [[ $rc -eq 2 ]] || fail "an interactive shell where the kernel lacks netem exited $rc, expected 2"
  grep -q 'not one; run it from a terminal, or give a command: wanlab shell .*buffer-sweep.toml -- COMMAND' "$log" ||
    fail "no command line to give: $(cat "$log")"
  # Without root: the micro-VM is the isolation. An ordinary user measures the same path.
  kernels=${WANLAB_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wanlab/kernel}
  user_dir=$(mktemp -d /tmp/wanlab-noroot-vm-XXXXXX)
  mkdir -p "$user_dir/kernel" "$user_dir/cache" "$user_dir/out" && chown -R nobody "$user_dir/cache" "$user_dir/out"
  chmod 755 "$user_dir"
  as_nobody /tmp probe rtt --rtt 40ms --count 10 --interval 50ms --json >"$log" 2>"$log.err"
  rc=$?
  cat "$log.err"
  [[ $rc -eq 0 ]] || fail "probe rtt --rtt 40ms as nobody exited $rc, expected 0"
  grep -q 'no root here, and the micro-VM needs none: running this in the micro-VM' "$log.err" || fail "nobody's probe did not move into the VM"
  p50=$(p50_ms "$log")
  within "$p50" 40 46 || fail "nobody's probe rtt p50 $p50 ms for a 40 ms rtt"
  echo "probe rtt --rtt 40ms as nobody, in the micro-VM: p50 $p50 ms"
  # A whole run as nobody: in the micro-VM, its results owned by nobody.
  printf '%s\n' 'name = "noroot"' '[link]' 'rtt = "30ms"' '[[probe]]' 'name = "p"' 'kind = "rtt"' 'count = 10' \
    'interval = "50ms"' '[run]' 'repeats = 1' 'warmup = "0s"' 'cooldown = "0s"' >"$user_dir/noroot.toml"
  chmod 644 "$user_dir/noroot.toml"
  as_nobody "$user_dir/out" run "$user_dir/noroot.toml" --out "$user_dir/out/r" --quiet >"$log" 2>"$log.err"
  rc=$?
  cat "$log.err"
  owner=$(stat -c %U "$user_dir/out/r/results.db" 2>/dev/null)
  rm -rf "$user_dir"
  [[ $rc -eq 0 ]] || fail "wanlab run as nobody exited $rc, expected 0"
  grep -q 'no root here, and the micro-VM needs none: running the experiment there' "$log.err" ||
    fail "nobody's run did not say it moved into the micro-VM"
  grep -q ' p\.rtt_' "$log" || fail "nobody's run printed no report: $(cat "$log")"
  [[ $owner == nobody ]] || fail "nobody's results.db belongs to '$owner'"
  echo "wanlab run as nobody, in the micro-VM: results owned by $owner"
  rm -f "$log.err"
fi
echo "PASS"
