#!/usr/bin/env bash
# CTest "vm:netem-suite": boots the micro-VM ONCE and runs, inside it, netem_checks.sh and
# then netem/'s own root tests (netem_root_tests, with WANLAB_REQUIRE_NETEM=1 so that a
# missing netem fails them instead of skipping). Fails (never skips) when the VM cannot run.
# Usage: run_netem_suite.sh WANLAB SRC_DIR WORK_DIR [NETEM_ROOT_TESTS]
set -u
wanlab=$1 src=$2 work=$3 root_tests=${4:-}
rm -rf "$work" && mkdir -p "$work/out" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

for tool in tc ip ping; do
    command -v $tool >/dev/null ||
        fail "'$tool' is not installed (iproute2, iputils-ping: run scripts/setup)"
done

. "$(dirname "$0")/host_cpu.sh"
start=$(date +%s.%N) cpu=$(cpu_mark)
inner="sh '$src/netem_checks.sh' '$work/out'; rc=\$?"
if [[ -n $root_tests ]]; then
    inner+="; WANLAB_REQUIRE_NETEM=1 '$root_tests' '[root]' -r compact >'$work/out/root_tests.log' 2>&1"
    inner+="; echo \$? >'$work/out/root_tests.rc'"
fi
inner+="; exit \$rc"
"$wanlab" vm run --stats --timeout 420 --out "$work/out" -- sh -c "$inner" >"$work/stdout" 2>"$work/stderr"
rc=$?
end=$(date +%s.%N)
echo "--- stdout"; cat "$work/stdout"
echo "--- stderr"; cat "$work/stderr"
load=$(cpu_since "$cpu")
echo "--- wall time: $(echo "$end - $start" | bc) s; $load"

[[ $rc -eq 7 ]] || fail "wanlab vm run exited $rc; expected 7 (the checks script's status)"
[[ -s $work/out/results ]] || fail "no results in the --out share ($work/out/results)"
grep -q '^not ok' "$work/out/results" && fail "$(grep '^not ok' "$work/out/results") ($load)"
n=$(grep -c '^ok' "$work/out/results")
[[ $n -ge 12 ]] || fail "only $n checks passed; expected 12"
grep -q '^to-stderr$' "$work/stderr" || fail "the command's stderr did not reach our stderr"
grep -q 'to-stderr' "$work/stdout" && fail "the command's stderr leaked into stdout"
grep -Eq 'Linux version|wanlab-init|^\[ *[0-9]+\.[0-9]+\]' "$work/stdout" &&
    fail "console noise in stdout"
if [[ -n $root_tests ]]; then
    echo "--- netem_root_tests inside the VM"; cat "$work/out/root_tests.log" 2>/dev/null
    [[ -s $work/out/root_tests.rc ]] || fail "netem_root_tests did not run inside the VM"
    [[ $(cat "$work/out/root_tests.rc") == 0 ]] || fail "netem_root_tests failed inside the VM ($load)"
    grep -q "SKIPPED" "$work/out/root_tests.log" && fail "netem_root_tests skipped tests inside the VM"
fi
echo "PASS: $n checks inside the VM, exit status and streams came back${root_tests:+, netem root tests passed}"
rm -rf "$work"
