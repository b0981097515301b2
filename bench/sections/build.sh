#!/usr/bin/env bash
# bench section "build": a cold build of the `wanlab` target, before and after the build
# changes of issue 37 (BENCH_BUILD_BASE, default e44ebfc, against this tree), in the same run:
# wall time, the CPU time per library, the slowest translation units, and what the heaviest
# third-party headers cost a translation unit on their own and how many units include them.
# Every build is cold: a new build tree, no ccache. Needs scripts/setup --tests (clang is not
# needed; ninja and lld are). Prints markdown (bench/run splices it into docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
base=${BENCH_BUILD_BASE:-e44ebfc}
work=$(mktemp -d)
cleanup() {
  git -C "$root" worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
jobs=$(nproc)

# The tree before: a worktree of BASE, with the npm packages its build embeds.
git worktree add --detach "$work/base-src" "$base" >/dev/null 2>&1
ln -s "$root/report/assets/node_modules" "$work/base-src/report/assets/node_modules"

# cold SRC BUILD GENERATOR [CMAKE ARGS]: configures a new tree and builds `wanlab`; prints the
# wall seconds.
cold() {
  local src=$1 tree=$2 gen=$3 start
  shift 3
  rm -rf "$tree"
  cmake -S "$src" -B "$tree" -G "$gen" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  sync
  start=$(date +%s.%N)
  cmake --build "$tree" -j"$jobs" --target wanlab >"$tree.log" 2>&1 || { tail -20 "$tree.log" >&2; exit 1; }
  python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$(date +%s.%N)"
}

echo "bench: build: $base with make (as its scripts/build did)" >&2
t_make=$(cold "$work/base-src" "$work/base-make" "Unix Makefiles")
echo "bench: build: $base with Ninja" >&2
t_base=$(cold "$work/base-src" "$work/base" Ninja)
echo "bench: build: this tree without unity batches (precompiled headers and lld only)" >&2
t_pch=$(cold "$root" "$work/pch" Ninja -DWANLAB_UNITY=OFF)
echo "bench: build: this tree with full debug information (-g, as before issue 38)" >&2
t_full=$(cold "$root" "$work/full" Ninja -DWANLAB_DEBUG_INFO=full)
echo "bench: build: this tree (Ninja, precompiled headers, unity batches, lld, line tables only)" >&2
t_now=$(cold "$root" "$work/now" Ninja)

# What one header costs a translation unit by itself, with the build's own flags.
echo "bench: build: header costs" >&2
headers=("fmt/format.h" "nlohmann/json.hpp" "toml++/toml.h" "CLI/CLI.hpp" "catch2/catch.hpp" "boost/process.hpp" "filesystem" "string")
for h in "${headers[@]}"; do
  printf '#include <%s>\n' "$h" >"$work/h.cpp"
  s=$(date +%s.%N)
  c++ -std=c++20 -O2 -g -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 -c "$work/h.cpp" -o "$work/h.o"
  echo "$h $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 2))" "$s" "$(date +%s.%N)")"
done >"$work/headers.txt"
# Where the time of the slowest unit of the tree before goes, by GCC's own phases.
slowest=$(awk 'NR>1 && $4 ~ /\.o$/ {print $2-$1, $4}' "$work/base/.ninja_log" | sort -n | tail -1 | cut -d' ' -f2)
python3 - "$work/base/compile_commands.json" "$slowest" >"$work/slowest.sh" <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e["command"].split(" -o ")[1].split()[0] == sys.argv[2]:
        print("cd", e["directory"], "&&", e["command"], "-ftime-report -o /dev/null")
PY
bash "$work/slowest.sh" 2>"$work/slowest.report" >/dev/null || true

python3 bench/lib/build_report.py "$work" "$base" "$t_make" "$t_base" "$t_pch" "$t_now" "$jobs" "$slowest" "$t_full"
