#!/usr/bin/env python3
"""bench/lib/fidelity.py RESULTS_DB LIMITS_JSON: the fidelity section's tables, as markdown.

Reads what `wanlab run --vm` stored for the experiments in bench/experiments/fidelity-*.toml
(the newest run of each in RESULTS_DB): the trials' configuration and emulation check
(run/check.cpp: RTT by 20 TCP handshakes, rate by a paced UDP stream counted in wire
bytes) and the probes' metrics. LIMITS_JSON is `wanlab plan --json` of fidelity-limit.toml
(the netem limit each trial got). Nothing is computed that the database does not hold, except
the derived columns each table explains (ratios, intervals, expected values).
"""
import json
import math
import sqlite3
import sys

WIRE = 1514            # bytes on the wire of a full 1500-byte packet: what netem's rate counts
TCP_PAYLOAD = 1448     # MSS with timestamps at MTU 1500
SQRT_2_3 = math.sqrt(2 / 3)


def newest_run(db, experiment):
    row = db.execute("SELECT id, status FROM runs WHERE experiment = ? ORDER BY started DESC, rowid DESC LIMIT 1",
                     (experiment,)).fetchone()
    return row if row else (None, None)


def trials(db, run):
    out = []
    for idx, variant, sweep, rtt, rate, loss, check, status in db.execute(
            "SELECT idx, variant, sweep, link_rtt, link_rate, link_loss, emulation_check, status FROM trials "
            "WHERE run_id = ? ORDER BY idx", (run,)):
        t = {"idx": idx, "variant": variant, "sweep": dict(json.loads(sweep)), "rtt": rtt, "rate": rate,
             "loss": loss, "check": json.loads(check), "status": status, "metrics": {}}
        out.append(t)
    by_idx = {t["idx"]: t for t in out}
    for trial, probe, repeat, metric, value in db.execute(
            "SELECT trial, probe, repeat, metric, value FROM metric_values WHERE run_id = ?", (run,)):
        by_idx[trial]["metrics"].setdefault(f"{probe}.{metric}", []).append(value)
    return out


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def metric(t, name):
    return median(t["metrics"].get(name, []))


def ms(s, digits=2):
    return "n/a" if s is None else f"{s * 1e3:.{digits}f} ms"


def mbit(bps):
    if bps is None:
        return "n/a"
    v = bps / 1e6
    return f"{v:.3f} Mbit/s" if v < 10 else f"{v:.1f} Mbit/s"


def pct(x, digits=2):
    return "n/a" if x is None else f"{x * 100:.{digits}f}%"


def ratio(measured, configured):
    if measured is None or not configured:
        return "n/a"
    return f"{measured / configured:.3f}"


def yes(ok):
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def missing(experiment, status):
    return f"*{experiment}: no results (run status: {status or 'not run'}); see the section's stderr.*"


# --- binomial intervals ------------------------------------------------------------------------

def binom_cdf(k, n, p):
    """P(X <= k) for X ~ Bin(n, p), summed in log space (n up to millions)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
    return min(total, 1.0)


def clopper_pearson(k, n, alpha=0.05):
    """Exact (Clopper-Pearson) two-sided interval for a binomial proportion, by bisection."""
    lower = 0.0 if k == 0 else _lower(k, n, alpha)
    upper = 1.0 if k == n else _upper(k, n, alpha)
    return lower, upper


def _lower(k, n, alpha):
    # smallest p with P(X >= k | p) >= alpha/2; P(X >= k) increases with p
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1 - binom_cdf(k - 1, n, mid) < alpha / 2:
            lo = mid
        else:
            hi = mid
    return hi


def _upper(k, n, alpha):
    # largest p with P(X <= k | p) >= alpha/2; P(X <= k) decreases with p
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if binom_cdf(k, n, mid) >= alpha / 2:
            lo = mid
        else:
            hi = mid
    return lo


# --- the tables --------------------------------------------------------------------------------

def delay_and_loss(db):
    run, status = newest_run(db, "fidelity-rtt")
    if not run:
        return missing("fidelity-rtt", status), missing("fidelity-rtt", status), None, []
    ts = trials(db, run)
    delay_rows, loss_rows = [], []
    floor = None
    excess = []
    for t in ts:
        loss_cfg = float(t["sweep"].get("link.up.loss", "0%").rstrip("%")) / 100
        if loss_cfg == 0:
            cfg = t["rtt"] or 0.0
            p50, mn, p99 = metric(t, "rtt.rtt_p50"), metric(t, "rtt.rtt_min"), metric(t, "rtt.rtt_p99")
            chk = t["check"].get("rtt_measured") if t["check"].get("checked") else None
            held = t["check"].get("held") if t["check"].get("checked") else None
            if cfg == 0:
                floor = p50
                delay_rows.append(["0 (no netem: the VM's floor)", ms(p50, 3), ms(mn, 3), ms(p99, 3), "n/a", "n/a",
                                   "n/a", "n/a"])
                continue
            lo, hi = 0.95 * cfg - 0.0002, 1.05 * cfg + 0.005
            ok = None if p50 is None else lo <= p50 <= hi
            if p50 is not None and cfg >= 0.010:
                excess.append(p50 - cfg)
            delay_rows.append([ms(cfg, 1), ms(p50, 3), ms(mn, 3), ms(p99, 3),
                               ms(chk, 2) + ("" if held is None else (" (held)" if held else " (did not hold)")),
                               ratio(p50, cfg),
                               f"{ms(lo, 2)} .. {ms(hi, 2)}", yes(ok)])
        else:
            sent = metric(t, "rtt.sent")
            lost_frac = metric(t, "rtt.loss")
            if sent is None or lost_frac is None:
                loss_rows.append([pct(loss_cfg, 1), "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"])
                continue
            n = int(round(sent))
            k = int(round(lost_frac * n))
            lo, hi = clopper_pearson(k, n)
            ok = lo <= loss_cfg <= hi
            loss_rows.append([pct(loss_cfg, 1), f"{n:,}", f"{k:,}", pct(k / n, 3), ratio(k / n, loss_cfg),
                              f"{pct(lo, 3)} .. {pct(hi, 3)}", yes(ok)])
    delay = table(["configured RTT", "measured p50", "min", "p99", "emulation check (TCP, p50)",
                   "p50 / configured", "tolerance (the check's)", "inside"], delay_rows)
    loss = table(["configured loss (client -> server)", "probes sent", "lost", "measured", "measured / configured",
                  "95% interval of the measurement (Clopper-Pearson)", "configured inside"], loss_rows)
    return delay, loss, floor, excess


def samples(db, run, trial, name="rtt"):
    return [v for (v,) in db.execute(
        "SELECT s.value FROM samples s JOIN measurements m ON m.id = s.measurement_id "
        "WHERE m.run_id = ? AND m.trial = ? AND s.name = ? AND s.value IS NOT NULL", (run, trial, name))]


def quantile(sorted_values, q):
    if not sorted_values:
        return None
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def iqr(values):
    v = sorted(values)
    return None if len(v) < 4 else quantile(v, 0.75) - quantile(v, 0.25)


def expected_iqr(noise, jitter, draws=200000, seed=1):
    """IQR of (the VM's own RTT, as measured without jitter) + (the round trip's jitter: the sum
    of two independent uniform draws in [-jitter, +jitter], netem's default distribution)."""
    import random
    rnd = random.Random(seed)
    base = sorted(noise)
    mid = quantile(base, 0.5)
    total = [base[rnd.randrange(len(base))] - mid + rnd.uniform(-jitter, jitter) + rnd.uniform(-jitter, jitter)
             for _ in range(draws)]
    return iqr(total)


def jitter(db):
    run, status = newest_run(db, "fidelity-jitter")
    if not run:
        return missing("fidelity-jitter", status)
    ts = trials(db, run)
    noise = []
    for t in ts:
        if t["sweep"].get("link.jitter") in ("0ms", "0"):
            noise = samples(db, run, t["idx"])
    rows = []
    for t in ts:
        jv = t["sweep"].get("link.jitter", "0ms")
        j = float(jv[:-2]) / 1e3 if jv.endswith("ms") else float(jv)
        x = samples(db, run, t["idx"])
        measured, p50, sd = iqr(x), metric(t, "rtt.rtt_p50"), metric(t, "rtt.rtt_mdev")
        if j == 0:
            rows.append(["0 (the VM's own spread)", f"{len(x):,}", ms(p50, 2), ms(sd, 3), "0", ms(measured, 3), "n/a",
                         "n/a", "n/a"])
            continue
        alone = 4 * j * (1 - 1 / math.sqrt(2))  # IQR of the triangular sum of two uniforms
        expected = expected_iqr(noise, j) if len(noise) >= 4 else None
        ok = None if measured is None or expected is None else 0.8 * expected <= measured <= 1.2 * expected
        rows.append([ms(j, 1), f"{len(x):,}", ms(p50, 2), ms(sd, 3), ms(alone, 3), ms(measured, 3), ms(expected, 3),
                     ratio(measured, expected), yes(ok) + " (0.80 .. 1.20)"])
    return table(["configured jitter (each way)", "probes answered", "median RTT (40 ms configured)", "RTT std. dev.",
                  "expected RTT IQR, netem alone", "measured RTT IQR", "expected IQR with the VM's spread",
                  "measured / expected", "inside (tolerance)"], rows)


def tcp_tolerance(rate):
    return 0.85 * rate * TCP_PAYLOAD / WIRE, rate


def rate(db):
    run, status = newest_run(db, "fidelity-rate")
    if not run:
        return missing("fidelity-rate", status), None
    ts = trials(db, run)
    rows = []
    udp_ceiling = []
    for t in sorted(ts, key=lambda t: (t["rtt"] or 0, t["rate"] or 0)):
        cfg, rtt = t["rate"], t["rtt"] or 0.0
        c = t["check"]
        udp = c.get("rate_measured") if c.get("checked") else None
        ok = None if udp is None else 0.85 * cfg <= udp <= 1.05 * cfg
        rows.append([mbit(cfg), ms(rtt, 0), "UDP, wire bytes (emulation check)", mbit(udp), ratio(udp, cfg),
                     "0.85 .. 1.05", yes(ok)])
        tcp = metric(t, "tcp.throughput")
        lo, hi = tcp_tolerance(cfg)
        ok = None if tcp is None else lo <= tcp <= hi
        rows.append(["", "", "TCP goodput, 1 stream", mbit(tcp), ratio(tcp, cfg), f"{lo / cfg:.2f} .. 1.00",
                     yes(ok)])
        if cfg >= 1e9:
            udp_ceiling.append(f"{cfg / 1e9:g} Gbit/s at {rtt * 1e3:g} ms RTT: UDP {mbit(udp)}, TCP {mbit(tcp)}")
    run_c, status_c = newest_run(db, "fidelity-ceiling")
    ceiling = None
    if run_c:
        tc = trials(db, run_c)
        ceiling = metric(tc[0], "tcp.throughput") if tc else None
        rows.append(["none (no netem)", "0 ms", "TCP goodput, 1 stream", mbit(ceiling), "n/a", "n/a", "n/a"])
    head = ["configured rate", "RTT", "measured by", "measured", "measured / configured", "tolerance", "inside"]
    return table(head, rows), {"tcp_no_netem": ceiling, "high": udp_ceiling}


def limits(db, plan):
    run, status = newest_run(db, "fidelity-limit")
    if not run:
        return missing("fidelity-limit", status)
    planned = {t["index"]: t for t in plan["trials"]}
    rows = []
    for t in trials(db, run):
        p = planned.get(t["idx"], {})
        up = p.get("link", {}).get("up", {})
        limit = up.get("limit")
        delay = up.get("delay")
        cfg = t["rate"]
        cap = None
        if limit and delay:
            cap = min(cfg, limit * WIRE * 8 / delay)
        c = t["check"]
        udp = c.get("rate_measured") if c.get("checked") else None
        tcp = metric(t, "tcp.throughput")
        rows.append([ms(t["rtt"], 0), t["variant"], f"{limit:,}" if limit else "n/a",
                     f"{math.ceil(cfg * delay / 8 / WIRE):,}" if delay else "n/a", mbit(cap), mbit(udp),
                     ratio(udp, cfg), mbit(tcp), ratio(tcp, cfg)])
    return table(["RTT", "variant", "netem limit (packets)", "packets in one direction's delay line",
                  "cap: min(rate, limit x 1514 B x 8 / one-way delay)", "UDP, wire (check)", "UDP / 100 Mbit/s",
                  "TCP goodput", "TCP / 100 Mbit/s"], rows)


def main():
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    plan = json.load(open(sys.argv[2]))
    delay, loss, floor, excess = delay_and_loss(db)
    rate_table, ceilings = rate(db)
    out = {
        "delay": delay, "loss": loss, "jitter": jitter(db), "rate": rate_table, "limit": limits(db, plan),
        "floor_ms": None if floor is None else round(floor * 1e3, 3),
        "tcp_no_netem_mbit": None if not ceilings or ceilings["tcp_no_netem"] is None
        else round(ceilings["tcp_no_netem"] / 1e6, 1),
        "high_rates": "; ".join((ceilings or {}).get("high", [])) or "n/a",
        "excess_ms": "n/a" if not excess else f"{min(excess) * 1e3:.2f} to {max(excess) * 1e3:.2f} ms",
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
