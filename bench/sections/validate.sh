#!/usr/bin/env bash
# bench section "validate": how `wanlab validate` grows with the file, for the shape that was
# quadratic (issue 40): K [sysctl] keys (unknown to wanlab's table, so each one is checked for
# a typo against it) times P sweep points, each point a trial that reads the table again.
# Wall time and peak memory (max RSS) for this tree's binary and, when BENCH_VALIDATE_BASE
# names another wanlab binary, for that one too, in the same run (the larger files are skipped
# for it above 60 s). Prints markdown on stdout. Environment: WANLAB_BIN, BENCH_VALIDATE_BASE,
# BENCH_QUICK=1 (the two smaller files only).
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
bench_wanlab validate
[[ -x /usr/bin/time ]] || { echo "bench: validate: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shapes=("300 30" "1000 100" "3000 300")
[[ ${BENCH_QUICK:-0} == 1 ]] && shapes=("300 30" "1000 100")

file() {  # K P -> path of the experiment file
  python3 - "$1" "$2" "$work/k$1-p$2.toml" <<'PY'
import sys
k, p, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lines = [f'name = "validate-{k}x{p}"', "[sysctl]"]
lines += [f'"net.ipv4.neigh.dev{i}.gc_stale_time" = 60' for i in range(k)]
lines += ["[sweep]", '"link.rtt" = [' + ", ".join(f'"{i + 1}ms"' for i in range(p)) + "]"]
lines += ["[[probe]]", 'kind = "rtt"']
open(path, "w").write("\n".join(lines) + "\n")
print(path)
PY
}

measure() {  # BINARY FILE -> "SECONDS KB", or "- -" past 60 s
  if /usr/bin/time -f "%e %M" -o "$work/t" timeout 60 "$1" validate -q "$2" >/dev/null 2>&1; then
    cat "$work/t"
  else
    echo "- -"
  fi
}

echo "| keys x sweep points | trials | this tree | peak memory |${BENCH_VALIDATE_BASE:+ base | base memory |}"
echo "|---|---|---|---|${BENCH_VALIDATE_BASE:+---|---|}"
for s in "${shapes[@]}"; do
  read -r k p <<<"$s"
  f=$(file "$k" "$p")
  read -r secs kb < <(measure "$wanlab" "$f")
  row="| $k x $p | $p | ${secs} s | $((kb / 1024)) MiB |"
  if [[ -n ${BENCH_VALIDATE_BASE:-} ]]; then
    read -r bs bkb < <(measure "$BENCH_VALIDATE_BASE" "$f")
    if [[ $bs == - ]]; then row+=" - | - |"; else row+=" ${bs} s | $((bkb / 1024)) MiB |"; fi
  fi
  echo "$row"
  echo "bench: validate: $k x $p done" >&2
done
