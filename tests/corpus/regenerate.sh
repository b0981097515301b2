#!/bin/sh
# Regenerates tests/corpus/invalid/*.err from the current `wanlab` binary.
#
# Each .err holds what `wanlab validate NN-name.toml` prints on stderr (Diagnostics::render),
# without the final summary line ("wanlab: error: ... has N errors"). validate runs from
# inside invalid/ so the messages carry the bare file name.
#
# Usage: tests/corpus/regenerate.sh [path/to/wanlab]    (default: build/wanlab)
# Review every changed .err (git diff) before committing: the files are the expected output.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
wanlab=${1:-$here/../../build/wanlab}
wanlab=$(cd "$(dirname "$wanlab")" && pwd)/$(basename "$wanlab")
cd "$here/invalid"
# Profiles come only from the source tree: no user or $WANLAB_PROFILES directories, whose
# names would leak into "available: ..." notes.
empty=$(mktemp -d)
trap 'rmdir "$empty"' EXIT
export XDG_CONFIG_HOME="$empty" HOME="$empty"
unset WANLAB_PROFILES
status=0
for toml in *.toml; do
    err=${toml%.toml}.err
    rc=0
    "$wanlab" validate "$toml" 2>"$err.tmp" >/dev/null || rc=$?
    if [ "$rc" -ne 2 ]; then
        # A crash or a file that validates: keep the expected .err as it is.
        echo "regenerate: $toml: expected exit 2, got $rc; $err left unchanged" >&2
        status=1
        rm -f "$err.tmp"
        continue
    fi
    # Drop the summary line; keep the rendered diagnostics exactly.
    sed '$d' "$err.tmp" >"$err"
    rm -f "$err.tmp"
done
exit $status
