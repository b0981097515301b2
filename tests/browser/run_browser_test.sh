#!/usr/bin/env bash
# browser:report-page: the HTML report of real runs, in headless Chromium. Checks
#  1. the main example's page from `wanlab run --html`: vm:run-e2e ran the example in the
#     micro-VM (this kernel has no netem) and kept its page and results.db in KEPT (the
#     fixture vm-main-run): the sweep, before/after bars, time series, the emulation check;
#  2. a run on this kernel of tests/browser/latency.toml and its page from `wanlab results
#     show --format html`: latency distributions of rr, http and rtt; a probe group's series
#     together (a bulk flow and a udp stream);
#  3. `wanlab compare --format html` of the main run with itself;
# each in Chromium (report_page_test.mjs), and keeps the screenshots in WORK.
# Usage: run_browser_test.sh WANLAB SRC WORK KEPT
set -u
wanlab=$1 src=$2 work=$3 kept=$4
rm -rf "$work/out" && mkdir -p "$work/out" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
[[ -x /usr/bin/chromium ]] || fail "/usr/bin/chromium is missing (run scripts/setup --tests)"
[[ -d $src/tests/browser/node_modules/playwright-core ]] || fail "playwright-core is missing (run scripts/setup)"
[[ -s $kept/main.html && -s $kept/results.db ]] ||
    fail "no main run in $kept: vm:run-e2e makes it (ctest runs it first, as this test's fixture)"
test_page() {  # PAGE NAME EXPECT
    echo "--- $2"
    node "$src/tests/browser/report_page_test.mjs" "$1" "$work/$2.png" "$3" || failed=1
}
failed=0

# The main run's results: the latency run below adds to a copy, and compare reads it.
cp "$kept/main.html" "$work/main.html" && cp "$kept/results.db" "$work/out/results.db" || fail "copying $kept"
test_page "$work/main.html" report-main '{
  "pivot-0": {"data": "pivot", "field": "series", "has": ["default-buffers", "large-buffers"], "count": 2},
  "bars-bulk-throughput": {"data": "cells", "field": "variant", "has": ["default-buffers", "large-buffers"]},
  "series-bulk": {"data": "series", "field": "series", "has": ["throughput (", "cwnd, stream 1 (", "srtt, stream 1 ("]},
  "emulation": {"data": "rtt", "field": "trial", "count": 6}
}'

"$wanlab" run "$src/tests/browser/latency.toml" --no-vm --out "$work/out" --run page-latency --quiet \
    >"$work/latency.stdout" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { tail -30 "$work/latency.stdout"; fail "wanlab run of latency.toml exited $rc"; }
"$wanlab" results show page-latency --out "$work/out" --format html >"$work/latency.html" || fail "results show --format html"
test_page "$work/latency.html" report-latency '{
  "latency-reqs": {"data": "quantiles", "field": "variant", "has": ["nagle", "nodelay"], "count": 2},
  "latency-web": {"data": "quantiles", "field": "variant", "has": ["nagle", "nodelay"]},
  "latency-ping": {"data": "quantiles", "field": "variant", "has": ["nagle", "nodelay"]},
  "series-web": {"data": "series", "field": "series", "has": ["requests_per_second (", "latency_mean ("]},
  "bars-reqs-latency_p50": {"data": "cells", "field": "point", "has": ["probe.reqs.connections=1", "probe.reqs.connections=4"]},
  "series-voice": {"data": "series", "field": "series", "has": ["throughput (", "jitter ("]},
  "series-load": {"data": "series", "field": "series", "has": ["bulk.throughput (", "voice.throughput (", "voice.jitter ("]},
  "bars-load-throughput": {"data": "cells", "field": "variant", "has": ["nagle", "nodelay"]}
}'

"$wanlab" compare main1 main1 --out "$work/out" --format html >"$work/compare.html" || fail "compare --format html"
test_page "$work/compare.html" report-compare '{
  "compare-bulk-throughput": {"data": "sides", "field": "run", "has": ["A", "B"], "count": 2}
}'
[[ $failed -eq 0 ]] || fail "a page failed its checks (above)"
echo "PASS: three pages drawn in Chromium; screenshots in $work"
