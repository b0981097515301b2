#!/usr/bin/env bash
# CTest "docs:man-page": the man page documents every sub-command `wanlab --help` lists, and
# renders without warnings. Usage: man_check.sh WANLAB MANPAGE
set -u
wanlab=$1 page=$2
missing=()
for cmd in $("$wanlab" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
    grep -q "^\.B wanlab $cmd\b" "$page" || missing+=("$cmd")
done
((${#missing[@]} == 0)) || { echo "FAIL: $page does not document: ${missing[*]}"; exit 1; }
if command -v groff >/dev/null; then
    warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
    [[ -z $warnings ]] || { echo "FAIL: groff warns:"; echo "$warnings"; exit 1; }
fi
echo "PASS: every sub-command is in $page"
