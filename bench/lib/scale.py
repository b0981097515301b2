#!/usr/bin/env python3
"""bench/lib/scale.py STAMPS RESULTS_DB WALL_S MAXRSS_KB: one point of the scale section, as JSON.

STAMPS: `wanlab run`'s stderr with each line prefixed by CLOCK_MONOTONIC seconds
(bench/lib/stamp.py), the first line stamped when the run started. RESULTS_DB: the run's
database (one run in it). WALL_S, MAXRSS_KB: from /usr/bin/time.

Per trial, "time in probes" is what the database says the probes spent on the network: each
rtt measurement's round trips (its `rtt` samples) plus its pacing ((sent - 1) x interval).
The database stores a measurement's start only to the second, so the probes' own set-up (a
listening socket, a thread) is not in it and counts as overhead here. The stamps give each
trial's wall time: from one trial's progress line to the next ("[i/N] ...").
"""
import json
import os
import re
import sqlite3
import statistics
import sys


def main():
    stamps_path, db_path, wall, maxrss = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    first_line = None
    lines = []
    trial_at = {}
    for line in open(stamps_path, errors="replace"):
        t, _, rest = line.partition(" ")
        try:
            t = float(t)
        except ValueError:
            continue
        if first_line is None:
            first_line = t
        lines.append((t, rest))
        m = re.search(r"\[(\d+)/(\d+)\]", rest)
        if m and int(m.group(1)) not in trial_at:
            trial_at[int(m.group(1))] = t
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    run, status, planned = db.execute("SELECT id, status, planned_trials FROM runs ORDER BY started DESC LIMIT 1").fetchone()
    trials = db.execute("SELECT count(*) FROM trials WHERE run_id = ? AND status = 'done'", (run,)).fetchone()[0]
    interval = {}
    text = db.execute("SELECT text FROM runs WHERE id = ?", (run,)).fetchone()[0]
    m = re.search(r'interval\s*=\s*"(\d+(?:\.\d+)?)ms"', text)
    interval_s = float(m.group(1)) / 1e3 if m else 0.0
    # Per trial: the probe's network time.
    probe_s = {}
    for trial, mid in db.execute("SELECT trial, id FROM measurements WHERE run_id = ?", (run,)):
        rtts = [v for (v,) in db.execute("SELECT value FROM samples WHERE measurement_id = ? AND name = 'rtt'", (mid,))
                if v is not None]
        sent = db.execute("SELECT value FROM metrics WHERE measurement_id = ? AND name = 'sent'", (mid,)).fetchone()
        sent = int(sent[0]) if sent and sent[0] is not None else len(rtts)
        probe_s[trial] = probe_s.get(trial, 0.0) + sum(rtts) + max(0, sent - 1) * interval_s
    total_probe = sum(probe_s.values())
    n = planned
    # Each trial's wall time: from its progress line to the next trial's (the last trial has none).
    gaps = []
    for i in range(1, n):
        if i in trial_at and i + 1 in trial_at:
            gaps.append((trial_at[i + 1] - trial_at[i]) - probe_s.get(i, 0.0))
    tenth = max(1, len(gaps) // 10)
    first_trial = trial_at.get(1)
    last_trial = trial_at.get(n)
    size = os.path.getsize(db_path)
    out = {
        "trials": n,
        "done": trials,
        "status": status,
        "wall_s": wall,
        "maxrss_kb": maxrss,
        "probe_s": total_probe,
        "overhead_ms_per_trial": (wall - total_probe) / n * 1e3,
        "before_first_trial_s": None if first_trial is None or first_line is None else first_trial - first_line,
        "after_last_trial_s": None if last_trial is None or first_line is None else (first_line + wall) - last_trial,
        "gap_median_ms": statistics.median(gaps) * 1e3 if gaps else None,
        "gap_first_tenth_ms": statistics.median(gaps[:tenth]) * 1e3 if gaps else None,
        "gap_last_tenth_ms": statistics.median(gaps[-tenth:]) * 1e3 if gaps else None,
        "db_bytes": size,
        "db_bytes_per_1000": size / n * 1000,
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
