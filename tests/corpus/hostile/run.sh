#!/bin/bash
# The hostile corpus: input an attacker, or an unlucky user, hands wanlab. Every case must end
# with its exact exit status and message, quickly, touching nothing.
#
#   NN-name.toml     the file; NN-name.args the sub-command and flags (default: validate)
#   NN-name.expect   line 1 "exit N", then the exact stderr (or, for plan, stdout)
# The cases that need a special file (a directory, a FIFO, /dev/zero, 50 MB, deep nesting,
# thousands of keys) are generated below, each with its status and the message it must say.
#
# Usage: run.sh WANLAB [--regenerate]
set -u
wanlab=$(realpath "$1")
regenerate=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/wanlab-hostile-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# One run, bounded so that a hang fails the case instead of the whole test run (a bound on
# hanging, not a speed assertion: every case finishes in well under a second).
run() {
    timeout 120 "$wanlab" "$@"
}

# ---- the files ---------------------------------------------------------------------------
cd "$here" || exit 1
for toml in [0-9]*.toml; do
    base=${toml%.toml}
    read -r -a args < <(cat "$base.args" 2>/dev/null || echo validate)
    out=$(run "${args[@]}" "$toml" 2>&1 >/dev/null)
    status=$?
    [ "${args[0]}" = plan ] && out=$(run "${args[@]}" "$toml" 2>/dev/null)
    if [ "$regenerate" = --regenerate ]; then
        printf 'exit %s\n%s\n' "$status" "$out" > "$base.expect"
        continue
    fi
    expected=$(tail -n +2 "$base.expect")
    want_status=$(head -1 "$base.expect" | cut -d' ' -f2)
    [ "$status" = "$want_status" ] || fail "$toml: exit $status, expected $want_status"
    [ "$out" = "$expected" ] || fail "$toml: output differs:$(diff <(echo "$expected") <(echo "$out"))"
done

# Pasting what plan prints runs exactly that command: the value reaches sysctl as one word,
# and nothing in it is executed.
rm -f /tmp/wanlab-hostile-pwned
line=$(run plan 12-plan-shell-substitution.toml 2>/dev/null | grep 'sysctl -w' | head -1)
[ -n "$line" ] || fail "plan printed no sysctl command"
words=$(
    ip() { shift 3; "$@"; }  # ip netns exec NAME COMMAND...
    sysctl() { printf '<%s>\n' "$@"; }
    eval "$line"
)
expected_words='<-w>
<net.unix.max_dgram_qlen=10 $(touch /tmp/wanlab-hostile-pwned); `touch /tmp/wanlab-hostile-pwned`>'
[ "$words" = "$expected_words" ] || fail "plan's sysctl command pastes as: $words"
[ -e /tmp/wanlab-hostile-pwned ] && fail "pasting plan's command ran the substitution"
rm -f /tmp/wanlab-hostile-pwned

# ---- the generated cases -----------------------------------------------------------------
cd "$work" || exit 1
# expect STATUS MESSAGE-PART -- ARGS...: the command exits with STATUS and says MESSAGE-PART.
expect() {
    local want=$1 part=$2
    shift 3
    local out status
    out=$(run "$@" 2>&1 >/dev/null)
    status=$?
    [ "$status" = "$want" ] || fail "wanlab $(echo "$@" | cut -c1-80): exit $status, expected $want"
    case "$out" in
    *"$part"*) ;;
    *) fail "wanlab $(echo "$@" | cut -c1-80): said $(echo "$out" | head -3 | cut -c1-300), expected \"$part\"" ;;
    esac
}

minimal='name = "m"
[[probe]]
name = "r"
kind = "rtt"'

# ~9,000 nested table headers: 24 KB that used to overflow the stack.
{
    echo "$minimal"
    printf '[a'
    for _ in $(seq 9000); do printf '.a'; done
    echo ']'
} > deep-headers.toml
expect 2 "nested more than 32 levels deep" -- validate deep-headers.toml
expect 2 "nested more than 32 levels deep" -- plan deep-headers.toml

# Dotted keys and inline arrays and tables, as deep.
{ echo "$minimal"; printf 'x'; for _ in $(seq 5000); do printf '.x'; done; echo ' = 1'; } > deep-keys.toml
expect 2 "nested more than 32 levels deep" -- validate deep-keys.toml
{ echo "$minimal"; printf 'x = '; for _ in $(seq 5000); do printf '['; done; for _ in $(seq 5000); do printf ']'; done; echo; } > deep-arrays.toml
expect 2 "nested more than 32 levels deep" -- validate deep-arrays.toml
{ echo "$minimal"; printf 'x = '; for _ in $(seq 5000); do printf '{a='; done; printf 1; for _ in $(seq 5000); do printf '}'; done; echo; } > deep-tables.toml
expect 2 "nested more than 32 levels deep" -- validate deep-tables.toml

# A deep --set key.
echo "$minimal" > ok.toml
key=$(printf 'link'; for _ in $(seq 9000); do printf '.a'; done)
expect 2 "nested more than 32 levels deep" -- validate ok.toml --set "$key=1"

# Not files: a directory, a FIFO (which must not hang), a device that never ends.
mkdir dir.toml
expect 2 "experiment file dir.toml: is a directory, not a file" -- validate dir.toml
mkfifo fifo.toml
expect 2 "experiment file fifo.toml: is not a regular file" -- validate fifo.toml
expect 2 "experiment file /dev/zero: is not a regular file" -- validate /dev/zero
expect 2 "experiment file missing.toml: No such file or directory" -- validate missing.toml

# A file far larger than any experiment.
{ echo "$minimal"; head -c 50000000 /dev/zero | tr '\0' '#'; } > big.toml
expect 2 "experiment file big.toml: is larger than 4 MiB, the most wanlab reads" -- validate big.toml

# 3,000 unknown keys under a 300-point sweep: each key reported once, the rest counted.
{
    echo "$minimal"
    printf '[sweep]\n"link.rtt" = ['
    for i in $(seq 300); do printf '"%sms",' "$i"; done
    echo ']'
    echo '[link]'
    for i in $(seq 3000); do echo "unknown_$i = 1"; done
} > many-keys.toml
expect 2 "more diagnostics not shown" -- validate many-keys.toml
expect 2 "unknown key \`unknown_1\` in [link]" -- validate many-keys.toml

if [ "$failures" -ne 0 ]; then
    echo "$failures hostile case(s) failed" >&2
    exit 1
fi
echo "hostile corpus: every case refused as expected"
