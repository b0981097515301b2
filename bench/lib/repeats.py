#!/usr/bin/env python3
"""bench/lib/repeats.py OUT LOAD COMMIT: the "repeats" section's markdown from the runs that
bench/sections/repeats.sh left in OUT/{main,noisy}-{3,auto}/ (report.json, seconds)."""
import datetime
import json
import statistics
import sys

out, load, commit = sys.argv[1:4]
T975 = [None, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262]  # t(0.975, df), df 1-9
NAMES = {"main": "main example (buffer-sweep, micro-VM)", "noisy": "noisy sweep (bare veths, host)"}


def settled(values, adaptive, precision=0.05):
    """Whether the mean's 95% interval is within +-precision of the median: Student's on all
    the repeats for a fixed count, Stein's (the first 3 repeats' spread) for an adaptive one."""
    first = values[:3] if adaptive else values
    if len(first) < 2:
        return False
    half = T975[len(first) - 1] * statistics.stdev(first) / len(values) ** 0.5
    return half <= precision * abs(statistics.median(values))


def figures(name, rule):
    d = f"{out}/{name}-{rule}"
    report = json.load(open(f"{d}/report.json"))
    seconds = float(open(f"{d}/seconds").read())
    # The headline metric the rule settles: throughput, the first metric of each probe.
    cells = [c for c in report["cells"] if c["metric"] == "throughput"]
    comparisons = [c for c in report["comparisons"] if c["metric"] == "throughput"]
    return {
        "seconds": seconds,
        "measurements": sum(c["n"] for c in cells),
        "cells": len(cells),
        "significant": sum(1 for c in comparisons if c["significant"]),
        "comparisons": len(comparisons),
        "unsettled": sum(1 for c in cells if c.get("settled") is False),
        "settled": sum(1 for c in cells if settled(c["values"], rule == "auto")),
    }


def minutes(s):
    return f"{int(s // 60)}m{int(s % 60):02d}s"


print("## Adaptive repeats: time to a settled answer\n")
print(f"Run {datetime.date.today()}, wanlab at {commit}; load average {load} after.\n")
print("Each experiment ran three times, back to back: `--set run.repeats=3` (the fixed default),")
print("`--set run.repeats=10` (a fixed count high enough to settle every cell: the rule's maximum)")
print("and `--set run.repeats=auto` (3 first, then Stein's rule until the mean's 95% interval is")
print("within +-5% of the median, at most 10). Significant: throughput comparisons against the")
print("baseline at 5% (Welch's test; after adaptive repeats with the first-stage variances).")
print("Within +-5%: throughput cells whose mean's 95% interval is within 5% of the median")
print("(Student's interval on the 3 repeats for the fixed run, Stein's for the adaptive one).\n")
print("| experiment | repeats | wall time | measurements | significant comparisons | within +-5% | stopped at 10 unsettled |")
print("|---|---|---|---|---|---|---|")
rows = {}
for name in ("main", "noisy"):
    for rule in ("3", "10", "auto"):
        f = figures(name, rule)
        rows[name, rule] = f
        print(f"| {NAMES[name]} | {rule} | {minutes(f['seconds'])} | {f['measurements']} in {f['cells']} cells | "
              f"{f['significant']} of {f['comparisons']} | {f['settled']} of {f['cells']} | "
              f"{f['unsettled'] if rule == 'auto' else '-'} |")
print()
for name in ("main", "noisy"):
    f3, f10, auto = rows[name, "3"], rows[name, "10"], rows[name, "auto"]

    def against(fixed):
        return f"{(auto['seconds'] - fixed['seconds']) / fixed['seconds'] * 100:+.0f}%"

    print(f"- {NAMES[name]}: adaptive took {minutes(auto['seconds'])}, {against(f3)} against 3 fixed repeats "
          f"and {against(f10)} against 10; cells within +-5%: {f3['settled']} (3), {f10['settled']} (10), "
          f"{auto['settled']} (auto) of {auto['cells']}; significant comparisons {f3['significant']}, "
          f"{f10['significant']}, {auto['significant']} of {auto['comparisons']}.")
