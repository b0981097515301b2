#!/bin/sh
# Regenerates tests/corpus/invalid/*.err from the current `wanlab` binary.
#
# Each .err holds what `wanlab validate NN-name.toml` prints on stderr (Diagnostics::render),
# without the final summary line ("wanlab: error: ... has N errors"). validate runs from
# inside invalid/ so the messages carry the bare file name. NN-name.set, if present, lists
# --set arguments (one KEY=VALUE a line), as tests/lab/corpus_test.cpp reads them.
#
# Files listed in pending-fixes.txt keep their hand-written .err (the output wanlab should
# print once a defect is fixed); for those the script only reports whether the binary
# matches yet. Pass --all to overwrite them too.
#
# Usage: tests/corpus/regenerate.sh [--all] [path/to/wanlab]    (default: build/wanlab)
# Review every changed .err (git diff) before committing: the files are the expected output.
set -eu
all=0
if [ "${1:-}" = "--all" ]; then
    all=1
    shift
fi
here=$(cd "$(dirname "$0")" && pwd)
wanlab=${1:-$here/../../build/wanlab}
wanlab=$(cd "$(dirname "$wanlab")" && pwd)/$(basename "$wanlab")
pending=$(sed -e 's/#.*//' -e 's/[[:space:]].*//' "$here/pending-fixes.txt" 2>/dev/null | grep . || true)
cd "$here/invalid"
# Profiles come only from the source tree: no user or $WANLAB_PROFILES directories, whose
# names would leak into "available: ..." notes.
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT
export XDG_CONFIG_HOME="$empty" HOME="$empty"
unset WANLAB_PROFILES
status=0
for toml in *.toml; do
    err=${toml%.toml}.err
    # NN-name.set, if present, holds one --set KEY=VALUE argument per line.
    set --
    if [ -f "${toml%.toml}.set" ]; then
        while IFS= read -r line; do
            [ -n "$line" ] && set -- "$@" --set "$line"
        done <"${toml%.toml}.set"
    fi
    rc=0
    "$wanlab" validate "$toml" "$@" 2>"$empty/out" >/dev/null || rc=$?
    # Drop the summary line; keep the rendered diagnostics exactly.
    if [ "$rc" -eq 2 ]; then sed '$d' "$empty/out" >"$empty/err"; else : >"$empty/err"; fi
    if [ "$all" -eq 0 ] && printf '%s\n' "$pending" | grep -qxF "$toml"; then
        if [ "$rc" -eq 2 ] && cmp -s "$empty/err" "$err"; then
            echo "regenerate: $toml now prints its expected .err: remove it from pending-fixes.txt" >&2
        else
            echo "regenerate: $toml: pending fix (exit $rc); $err kept" >&2
        fi
        continue
    fi
    if [ "$rc" -ne 2 ]; then
        # A crash or a file that validates: keep the expected .err as it is.
        echo "regenerate: $toml: expected exit 2, got $rc; $err left unchanged" >&2
        status=1
        continue
    fi
    cp "$empty/err" "$err"
done
exit $status
