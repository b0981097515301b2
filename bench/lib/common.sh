# Sourced by bench/sections/*.sh: goes to the top of the tree and finds the wanlab binary.
# bench_wanlab NAME: sets `root` (the tree) and `wanlab` (WANLAB_BIN, default build/wanlab,
# made absolute) or exits 2 naming the section when there is no such binary.
bench_wanlab() {
  cd "$(dirname "${BASH_SOURCE[0]}")/../.."
  root=$PWD
  wanlab=${WANLAB_BIN:-build/wanlab}
  [[ $wanlab == /* ]] || wanlab=$root/$wanlab
  [[ -x $wanlab ]] || { echo "bench: $1: no wanlab binary at $wanlab (build it, or set WANLAB_BIN)" >&2; exit 2; }
}
