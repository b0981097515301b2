#!/usr/bin/env python3
"""Checks of vm:schedule on one run's exported measurements (wanlab results show --export json).

Usage: schedule_series.py CHECK FILE. Prints what it measured; exits 0 when the check holds.
Series times are seconds from the start of the measurement; link.DIR.* are the configured
figures at the instants the kernel acknowledged each change (a step series).
"""
import json
import statistics
import sys


def load(path):
    ms = json.load(open(path))["measurements"]
    return ms[0]


def changes(series, name):
    """(time, value) of each change of a configured step series."""
    s = series[name]
    out, last = [], None
    for t, v in zip(s["t"], s["value"]):
        if v != last:
            out.append((t, v))
        last = v
    return out


def windows(series, name="throughput"):
    """(start, end, value) of each sampling window."""
    s = series[name]
    out, start = [], 0.0
    for t, v in zip(s["t"], s["value"]):
        out.append((start, t, v))
        start = t
    return out


def step(m):
    """What the link delivered (netem's sent bytes per 100 ms sample, the top of the tree), and
    what the application received."""
    s = m["series"]
    rate = changes(s, "link.up.rate")
    t_step = rate[1][0]
    # The 100 ms windows (the last sample, taken when the measurement ends, is shorter).
    link = [(a, b, v) for a, b, v in windows(s, "qdisc.up.netem.throughput") if b - a >= 0.09]
    before = [v for a, b, v in link if a >= 0.5 and b <= t_step]
    after = [v for a, b, v in link if a >= t_step + 0.1]
    first = [v for a, b, v in link if a >= t_step][0]
    peak = max(v for a, b, v in link)
    app = [v for a, b, v in windows(s) if a >= t_step + 0.5]
    print(f"step applied at {t_step:.4f} s; the link delivered a median {statistics.median(before)/1e6:.2f} Mbit/s "
          f"before, {statistics.median(after)/1e6:.2f} after (the first window after {first/1e6:.2f}, the largest "
          f"{max(after)/1e6:.2f}), largest of all {peak/1e6:.2f}; the application {statistics.mean(app)/1e6:.2f} "
          f"after")
    ok = statistics.median(before) >= 18e6 and statistics.median(after) >= 4.5e6
    ok = ok and max(after) <= 5e6 * 1.05 and peak <= 20e6 * 1.05 and 4.5e6 <= statistics.mean(app) <= 5e6 * 1.05
    return ok


def outage(m):
    s = m["series"]
    loss = changes(s, "link.up.loss")
    t_out, t_back = loss[1][0], loss[2][0]
    w = windows(s)
    # Every window inside the outage (after the timer's resolution, 5 ms) carries at most
    # the one packet netem may release at its first instant.
    inside = [(a, b, v * (b - a) / 8) for a, b, v in w if a >= t_out + 0.005 and b <= t_back]
    delivered = sum(x for _, _, x in inside)
    resumed = [a for a, b, v in w if a >= t_back and v > 1e6]
    late = m["counters"].get("schedule", {})
    print(f"outage from {t_out:.4f} to {t_back:.4f} s: {len(inside)} windows inside, {delivered:.0f} bytes "
          f"delivered; traffic again from {resumed[0] if resumed else None}; changes {late.get('changes')}, "
          f"lateness median {late.get('late_median', 0)*1e3:.3f} ms, p99 {late.get('late_p99', 0)*1e3:.3f} ms, "
          f"max {late.get('late_max', 0)*1e3:.3f} ms")
    return (len(inside) >= 25 and max(x for _, _, x in inside) <= 1514 and abs(t_back - t_out - 3) < 0.05
            and bool(resumed) and resumed[0] - t_back < 1.5 and late.get("changes") >= 2)


def delay(m):
    s = m["series"]
    d = changes(s, "link.up.delay")
    t_up, t_down = d[1][0], d[2][0]
    rtt = list(zip(s["rtt"]["t"], s["rtt"]["value"]))
    low = [v for t, v in rtt if 0.2 <= t <= t_up]
    high = [v for t, v in rtt if t_up + 0.15 <= t <= t_down]
    back = [v for t, v in rtt if t >= t_down + 0.15]
    print(f"delay up at {t_up:.4f} s, down at {t_down:.4f} s; RTT median {statistics.median(low)*1e3:.2f} ms, "
          f"then {statistics.median(high)*1e3:.2f} ms, then {statistics.median(back)*1e3:.2f} ms")
    return (abs(statistics.median(low) - 0.020) <= 0.003 and abs(statistics.median(high) - 0.100) <= 0.005
            and abs(statistics.median(back) - 0.020) <= 0.003)


def trace_rates(path, seconds):
    """The trace's own rate per whole second, read here from the file (mahimahi: each line a
    1514-byte frame's delivery opportunity at that millisecond, (k-1, k] in second k-1)."""
    per = [0] * seconds
    for line in open(path):
        line = line.strip()
        if line:
            k = (int(line) - 1) // 1000 if int(line) > 0 else 0
            if k < seconds:
                per[k] += 1
    return [n * 1514 * 8 for n in per]


def pearson(a, b):
    ma, mb = statistics.mean(a), statistics.mean(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    return cov / (va * vb) ** 0.5


def trace(m, trace_path):
    """The link's delivered rate per second (netem's sent bytes, the top of the tree, whose
    100 ms samples are summed over each whole second) against the trace's."""
    s = m["series"]["qdisc.up.netem.throughput"]
    samples = list(zip(s["t"], s["value"]))
    delivered, start = {}, 0.0
    for t, v in samples:
        # Each sample's bits, split over the seconds its window spans.
        a, b = start, t
        while a < b:
            k = int(a)
            edge = min(b, k + 1)
            delivered[k] = delivered.get(k, 0) + v * (edge - a)
            a = edge
        start = t
    seconds = int(samples[-1][0])
    got = [delivered.get(k, 0) for k in range(seconds)]
    want = trace_rates(trace_path, seconds)
    r = pearson(got, want)
    mean_got, mean_want = statistics.mean(got), statistics.mean(want)
    late = m["counters"].get("schedule", {})
    print(f"{seconds} s: per-second correlation {r:.4f}, delivered mean {mean_got/1e6:.3f} Mbit/s against the "
          f"trace's {mean_want/1e6:.3f} ({(mean_got/mean_want - 1)*100:+.1f}%); per second delivered/trace "
          + " ".join(f"{g/1e6:.1f}/{w/1e6:.1f}" for g, w in zip(got, want))
          + f"; changes {late.get('changes')}, lateness median {late.get('late_median', 0)*1e3:.3f} ms")
    return r >= 0.95 and abs(mean_got / mean_want - 1) <= 0.05


if __name__ == "__main__":
    check, path = sys.argv[1], sys.argv[2]
    if check == "trace":
        sys.exit(0 if trace(load(path), sys.argv[3]) else 1)
    sys.exit(0 if {"step": step, "outage": outage, "delay": delay}[check](load(path)) else 1)
