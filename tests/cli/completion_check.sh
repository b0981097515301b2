#!/usr/bin/env bash
# CTest "cli:completion": the bash completion the build generated is valid bash and completes
# sub-commands, nested sub-commands and dashed options; the zsh one is checked with zsh -n
# (scripts/setup --tests installs zsh). Usage: completion_check.sh COMPLETIONS_DIR
set -u
dir=$1
fail() { echo "FAIL: $*"; exit 1; }
bash -n "$dir/wanlab" || fail "$dir/wanlab is not valid bash"
complete() { :; }  # the script registers itself; not needed here
# shellcheck source=/dev/null
. "$dir/wanlab"
completes() {  # completes WORD... -- EXPECTED: the last word completes to include EXPECTED
    local expected=${*: -1}
    COMP_WORDS=("${@:1:$#-2}")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _wanlab
    [[ " ${COMPREPLY[*]} " == *" $expected "* ]] || fail "'${COMP_WORDS[*]}' offers '${COMPREPLY[*]}', not $expected"
}
completes wanlab res -- results
completes wanlab results s -- show
completes wanlab results show --ex -- --export
completes wanlab probe --server-s -- --server-split-write
completes wanlab link apply --packet -- --packet-overhead
completes wanlab run --auto -- --auto-restore
completes wanlab run --quiet --o -- --out  # a flag takes no value: options follow it
# After an option that takes a value nothing is offered (bash then completes file names).
COMP_WORDS=(wanlab run --out "") COMP_CWORD=3 COMPREPLY=()
_wanlab
((${#COMPREPLY[@]} == 0)) || fail "a value of --out offers '${COMPREPLY[*]}'"
grep -q -- '--server_split_write' "$dir/wanlab" && fail "the underscore aliases are offered"
command -v zsh >/dev/null || fail "zsh is not installed (scripts/setup --tests installs it): the zsh completion is unchecked"
zsh -n "$dir/_wanlab" || fail "$dir/_wanlab is not valid zsh"
echo "PASS: $dir/wanlab completes commands and options"
