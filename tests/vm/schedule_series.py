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


if __name__ == "__main__":
    check, path = sys.argv[1], sys.argv[2]
    sys.exit(0 if {"step": step, "outage": outage, "delay": delay}[check](load(path)) else 1)
