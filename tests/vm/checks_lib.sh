# Sourced by the checks scripts that vm_checks.sh runs inside the micro-VM, after they set
# `out`: one TAP-like line per check in $out/results ("ok N - ..." / "not ok N - ...").
# Each line ends with the seconds since the script began ("(at N s)"), so every log shows where
# a suite's time went.
n=0
checks_began=$(date +%s)
at() { echo "(at $(($(date +%s) - checks_began)) s)"; }
ok() { n=$((n + 1)); echo "ok $n - $* $(at)" >>"$out/results"; }
notok() { n=$((n + 1)); echo "not ok $n - $* $(at)" >>"$out/results"; }
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() { desc=$1; shift; if "$@"; then ok "$desc"; else notok "$desc"; fi; }
# q DB SQL: one query against a results database.
q() { sqlite3 -batch -noheader "$1" "$2"; }
