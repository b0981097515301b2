#!/usr/bin/env bash
# bench section "scale": what `wanlab run` itself costs per trial, for 10, 100 and 1,000
# trials, on the host (no link conditions, so no netem and no VM: `--no-vm`). Each trial
# changes one per-namespace sysctl (a sweep over tcp_rmem's maximum) and runs one rtt probe
# of a single TCP handshake, no warm-up, no cooldown, one repeat: nearly all of a trial's time
# is wanlab's (moving the lab, recording results). Reports wall time, peak memory (max RSS),
# time per trial outside the probes, whether it stays flat, and the results database's size.
# Prints markdown on stdout (bench/run splices it into docs/performance.md), progress on stderr.
# Environment: WANLAB_BIN (default build/wanlab), BENCH_QUICK=1 (10 and 100 trials only),
# BENCH_KEEP=1 (keep the experiment files, databases and time stamps).
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
bench_wanlab scale
[[ -x /usr/bin/time ]] || { echo "bench: scale: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
counts=(10 100 1000)
[[ ${BENCH_QUICK:-0} == 1 ]] && counts=(10 100)
# The results database lives where users keep it by default: on disk (./wanlab-results). A
# second series puts it on tmpfs (/dev/shm) to separate the database's syncs from the rest.
disk=$(mktemp -d /var/tmp/wanlab-bench-scale.XXXXXX)
shm=""
[[ -d /dev/shm && -w /dev/shm ]] && shm=$(mktemp -d /dev/shm/wanlab-bench-scale.XXXXXX)
# BENCH_KEEP=1 keeps the experiment files, databases and time stamps.
if [[ ${BENCH_KEEP:-0} == 1 ]]; then trap 'echo "bench: scale: kept $disk $shm" >&2' EXIT
else trap 'rm -rf "$disk" ${shm:+"$shm"}' EXIT; fi

experiment() {  # $1 trials -> the experiment file's text
  python3 - "$1" <<'PY'
import sys
n = int(sys.argv[1])
values = ", ".join(f"[4096, 131072, {6291456 + 4096 * i}]" for i in range(n))
print(f'''name = "scale-{n}"
description = "{n} trials: one sysctl each, one TCP handshake"

[[probe]]
name = "rtt"
kind = "rtt"
method = "tcp"
count = 1
interval = "1ms"

[sweep]
"sysctl.net.ipv4.tcp_rmem" = [{values}]

[run]
repeats = 1
warmup = 0
cooldown = 0
''')
PY
}

point() {  # $1 trials, $2 folder -> JSON of bench/lib/scale.py
  local n=$1 dir=$2/n$1
  mkdir -p "$dir"
  experiment "$n" > "$dir/scale.toml"
  echo "bench: scale: $n trials, results in $dir" >&2
  # The first stamped line marks the start; wanlab's progress lines follow, one per trial.
  ( while [[ ! -e $dir/ready ]]; do sleep 0.05; done
    echo "bench: start" >&2
    /usr/bin/time -f '%e %M' -o "$dir/time" "$wanlab" run --no-vm "$dir/scale.toml" --out "$dir/out" > "$dir/report"
  ) 2>&1 | bench/lib/stamp.py "$dir/ready" > "$dir/stamps" || {
    echo "bench: scale: wanlab run failed for $n trials:" >&2; tail -5 "$dir/stamps" >&2; return 1; }
  read -r wall rss < <(tail -1 "$dir/time")
  python3 bench/lib/scale.py "$dir/stamps" "$dir/out/results.db" "$wall" "$rss" > "$dir/point.json"
}

for n in "${counts[@]}"; do
  point "$n" "$disk" || true
  [[ -z $shm ]] || point "$n" "$shm" || true
done

# Where a trial's time goes: system calls of one 100-trial run, counted by strace (if any).
syscalls=""
if command -v strace >/dev/null; then
  dir=$disk/strace
  mkdir -p "$dir"
  experiment 100 > "$dir/scale.toml"
  echo "bench: scale: 100 trials under strace -c" >&2
  if strace -f -c -w -o "$dir/strace" "$wanlab" run --no-vm "$dir/scale.toml" --out "$dir/out" --quiet > /dev/null 2>&1; then
    syscalls=$(python3 - "$dir/strace" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) >= 5 and p[0][0].isdigit() and p[-1] not in ("total",):
        try:
            rows[p[-1]] = (float(p[1]), int(p[3]))
        except ValueError:
            pass
total = sum(s for s, _ in rows.values())
syncs = {k: v for k, v in rows.items() if k in ("fsync", "fdatasync")}
s = sum(v[0] for v in syncs.values()); c = sum(v[1] for v in syncs.values())
top = sorted(rows.items(), key=lambda kv: -kv[1][0])[:4]
print(f"a 100-trial run on disk made {c / 100:.1f} fsync/fdatasync calls per trial; of the time its threads spent in "
      f"system calls (strace -f -c -w), " + ", ".join(f"{k} {v[0] / total * 100:.0f}%" for k, v in top))
PY
)
  fi
fi

python3 - "$disk" "$shm" "${counts[*]}" "$syscalls" "${BENCH_QUICK:-0}" <<'PY'
import json, sys, datetime, os
def parse(folder):
    out = {}
    for n in sys.argv[3].split():
        path = os.path.join(folder, f"n{n}", "point.json") if folder else ""
        if path and os.path.exists(path) and os.path.getsize(path) > 0:
            out[int(n)] = json.load(open(path))
    return out
disk, shm = parse(sys.argv[1]), parse(sys.argv[2])
counts = [int(c) for c in sys.argv[3].split()]
syscalls, quick = sys.argv[4], sys.argv[5] == "1"

def f(v, d=1):
    return "n/a" if v is None else f"{v:,.{d}f}"

def rows(series, where):
    out = []
    for n in counts:
        p = series.get(n)
        if not p:
            continue
        out.append(f"| {n:,} | {where} | {f(p['wall_s'], 2)} s | {f(p['before_first_trial_s'], 2)} s | "
                   f"{f(p['probe_s'] * 1e3, 1)} ms | {f(p['overhead_ms_per_trial'], 1)} ms | {f(p['gap_median_ms'], 1)} ms | "
                   f"{f(p['gap_first_tenth_ms'], 1)} / {f(p['gap_last_tenth_ms'], 1)} ms | {f(p['maxrss_kb'] / 1024, 1)} MiB | "
                   f"{f(p['db_bytes'] / 1024, 0)} KiB |")
    return out

def flat(series):
    ns = [n for n in counts if series.get(n) and series[n]["gap_median_ms"] is not None]
    if len(ns) < 2:
        return "n/a"
    a, b = series[ns[0]]["gap_median_ms"], series[ns[-1]]["gap_median_ms"]
    return f"{b / a:.2f}x from {ns[0]:,} to {ns[-1]:,} trials ({a:.1f} -> {b:.1f} ms)"

big = max(disk) if disk else None

def rss_line():
    ns = sorted(disk)
    if len(ns) < 2:
        return ""
    a, b = disk[ns[0]], disk[ns[-1]]
    per = (b["maxrss_kb"] - a["maxrss_kb"]) / (ns[-1] - ns[0])
    return (f"Peak memory grows by about {per:.1f} KiB per trial ({a['maxrss_kb'] / 1024:.1f} MiB at {ns[0]:,} trials, "
            f"{b['maxrss_kb'] / 1024:.1f} MiB at {ns[-1]:,}): the run keeps its trials and measurements in memory for "
            "the report at the end.")
print(f"""## Scale: what `wanlab run` costs per trial

Run {datetime.date.today().isoformat()} on the host (no netem needed: the trials change only a sysctl), {os.cpu_count()} cores,
{'a quick run (BENCH_QUICK=1: 10 and 100 trials only)' if quick else 'a full run'}. Other work on the machine makes single numbers vary; compare within the table.

Each trial sets one per-namespace sysctl (a sweep over `net.ipv4.tcp_rmem`'s maximum; the
client and server namespaces each get it) and runs one rtt probe of a single TCP handshake,
no warm-up, no cooldown, one repeat (`bench/sections/scale.sh` writes the files). So nearly
all of a trial's time is wanlab's own: applying the trial, recording the trial and its
measurement, the progress line. Time in probes is what the results database says the
probes spent on the network (the handshakes' RTTs); the database keeps a measurement's start
only to the second, so the probe's own set-up (a listening socket, a thread) counts as
overhead. Per-trial time is from one trial's progress line to the next (stderr, time-stamped
as it arrives), minus that trial's probe time; "first / last tenth" are the medians over the
first and the last tenth of the trials, to see whether it stays flat within a run. "Before
the first trial" is from the start of the process (loading and checking the file, building
the namespace lab, recording the run) to the first trial's progress line.

| trials | results database on | wall time | before the first trial | in probes | overhead per trial: (wall - probes) / trials | per trial, median | first / last tenth | peak memory (max RSS) | database |
|---|---|---|---|---|---|---|---|---|---|""")
print("\n".join(rows(disk, "disk (ext4)") + rows(shm, "tmpfs")))
if big:
    print(f"""
Database size: {disk[big]['db_bytes'] / 1024 / 1024:.2f} MiB for {big:,} trials, {disk[big]['db_bytes_per_1000'] / 1024 / 1024:.2f} MiB per 1,000 trials of
this minimal kind (one measurement with 8 metrics and one sample each; a throughput probe's
per-interval samples and TCP_INFO add more).

Per-trial time, disk: {flat(disk)}; tmpfs: {flat(shm)}.
{rss_line()}
{('System calls: ' + syscalls + '.') if syscalls else ''}""")
PY
cat <<'DOC'

Where the time goes: every result is committed as it is taken (a killed run keeps what it
measured), and the database uses a rollback journal rather than WAL (it may sit on the
micro-VM's 9p share), so each commit is about four fsync/fdatasync calls (journal, journal
header, database, folder). A trial makes three commits (the trial with its emulation check,
the measurement, the trial's final status): the difference between the disk and the tmpfs
rows above (where a sync costs nothing) is what those syncs cost. While the database is
small each commit touches a few pages; as its tables and indexes (one of them on metric
names, where a measurement's metrics land on as many leaves) outgrow a few pages, a commit
rewrites more scattered pages, so on a disk the first trials of a run are cheaper than the
later ones until that settles. On a disk the per-trial time also depends on what else writes
to it at the same time.

Found and fixed while writing this section: `wanlab run` recorded the planned trials one
transaction each before the first trial, so a 1,000-trial run made 1,000 commits (about
4,000 syncs) before it measured anything, several seconds on a disk; they are now recorded
with the run in one transaction (`Store::begin_run`, results/store.cpp), which is what
"before the first trial" shows.
DOC
