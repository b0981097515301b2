#!/usr/bin/env python3
"""Writes an LTE-like link trace in mahimahi's format (one line per 1500-byte delivery
opportunity, its millisecond; mahimahi and wanlab's `trace` read it).

The model is the one Winstein, Sivaraman and Balakrishnan fitted to their cellular traces
(the traces mahimahi ships): "Stochastic Forecasts Achieve High Throughput and Low Delay over
Cellular Networks", NSDI 2013, section 3.1 (Sprout). Packets are delivered as a Poisson
process whose rate lambda (packets per second) moves as Brownian motion with noise power
sigma = 200 packets/s per sqrt(s), between 0 and 1000 packets/s (12 Mbit/s at 1500 bytes),
with outages it escapes at rate 1 per second (a mean outage of 1 s). One change from the paper:
in Sprout an outage begins whenever lambda reaches 0; a walk that starts again from 0 comes back
to 0 at once, so over a minute that model spends most of its time in outage. Here the walk is
reflected at 0 and at the maximum, and outages begin on their own, at `--outages` per second
(default 1/30: one every 30 s on average). The
published traces themselves (Verizon, AT&T, T-Mobile LTE, 2013) are mahimahi's, under its
licence: get them from https://github.com/ravinet/mahimahi/tree/master/traces and replay one
with `wanlab run examples/lte-trace.toml --set link.down.trace=/path/to/TMobile-LTE-driving.down`.

Usage: sprout-model.py [--duration 60] [--seed 1] [--sigma 200] [--max 1000] > lte-like.trace
The same arguments write the same file (Python's Mersenne Twister, seeded).
"""
import argparse
import math
import random
import sys


def poisson(rng, mean):
    """Knuth's method: the means here are at most a packet per millisecond."""
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=60, help="seconds (default 60)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sigma", type=float, default=200, help="packets/s per sqrt(s) (default 200)")
    ap.add_argument("--max", type=float, default=1000, help="packets/s (default 1000)")
    ap.add_argument("--start", type=float, default=500, help="lambda at 0, packets/s (default 500)")
    ap.add_argument("--escape", type=float, default=1, help="outage escape rate, 1/s (default 1)")
    ap.add_argument("--outages", type=float, default=1 / 30, help="outages begun per second (default 1/30)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lam, out = a.start, sys.stdout
    step = 0.001  # one millisecond
    last, outage = 0, False
    for ms in range(1, int(a.duration * 1000) + 1):
        lam += rng.gauss(0, a.sigma * math.sqrt(step))
        lam = abs(lam)  # reflected at 0
        if lam > a.max:
            lam = 2 * a.max - lam  # and at the maximum
        if outage:
            outage = rng.random() >= a.escape * step
        else:
            outage = rng.random() < a.outages * step
        if outage:
            continue
        for _ in range(poisson(rng, lam * step)):
            out.write(f"{ms}\n")
            last = ms
    # mahimahi's trace lasts until its last line: end it at the duration.
    if last != int(a.duration * 1000):
        out.write(f"{int(a.duration * 1000)}\n")


if __name__ == "__main__":
    main()
