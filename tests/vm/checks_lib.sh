# Sourced by the checks scripts that vm_checks.sh runs inside the micro-VM, after they set
# `out`: one TAP-like line per check in $out/results ("ok N - ..." / "not ok N - ...").
n=0
ok() { n=$((n + 1)); echo "ok $n - $*" >>"$out/results"; }
notok() { n=$((n + 1)); echo "not ok $n - $*" >>"$out/results"; }
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() { desc=$1; shift; if "$@"; then ok "$desc"; else notok "$desc"; fi; }
# q DB SQL: one query against a results database.
q() { sqlite3 -batch -noheader "$1" "$2"; }
