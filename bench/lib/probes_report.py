#!/usr/bin/env python3
"""Markdown for bench/sections/probes.sh from the runs it recorded.

usage: probes_report.py DIR

DIR/runs.tsv has one line per run: group, variant, tool, repetition, exit status, run number,
process-tree CPU (ns, or nan), system-wide busy time (USER_HZ ticks), wall time (s), ksoftirqd
CPU (USER_HZ ticks), context switches (all CPUs); DIR/run-N.json is that run's `wanlab probe
--json` output, DIR/run-N.err its stderr, and for throughput runs DIR/tcp-N.txt holds the
sending namespace's retransmitted and D-SACKed segments over the run. The section's settings
come in BENCH_* environment variables. Every number printed comes from these files; the prose
compares them and says who wins by how much.
"""
import json
import math
import os
import statistics
import sys

d = sys.argv[1]
env = os.environ
reps = int(env["BENCH_REPS"])
tput_s = float(env["BENCH_TPUT_S"])
http_s = float(env["BENCH_HTTP_S"])
rtt_count = int(env["BENCH_RTT_COUNT"])
rtt_ms = int(env["BENCH_RTT_INTERVAL_MS"])
rr_s = float(env["BENCH_RR_S"])
hz = os.sysconf("SC_CLK_TCK")
quick = env.get("BENCH_QUICK") == "1"

runs = []
with open(os.path.join(d, "runs.tsv")) as f:
    for line in f:
        group, variant, tool, rep, rc, n, cpu, busy, wall, ksoft, ctxt = line.rstrip("\n").split("\t")
        run = dict(group=group, variant=variant, tool=tool, rep=int(rep), rc=int(rc), n=int(n),
                   cpu=float(cpu) / 1e9 + int(ksoft) / hz if cpu not in ("", "nan") else math.nan,
                   busy=int(busy) / hz, wall=float(wall), ctxt=int(ctxt), retrans=math.nan, dsack=math.nan,
                   result=None, error="")
        try:
            with open(os.path.join(d, f"tcp-{n}.txt")) as t:
                run["retrans"], run["dsack"] = (float(x) for x in t.read().split())
        except (OSError, ValueError):
            pass
        try:
            with open(os.path.join(d, f"run-{n}.json")) as j:
                run["result"] = json.load(j)
        except (OSError, ValueError):
            pass
        if run["rc"] != 0 or run["result"] is None:
            with open(os.path.join(d, f"run-{n}.err"), errors="replace") as e:
                lines = [x.strip() for x in e.read().splitlines() if x.strip()]
            run["error"] = (lines[-1] if lines else f"exit status {rc}")[:200]
            run["result"] = None
        runs.append(run)


def ok(group, variant, tool):
    return [r for r in runs if r["group"] == group and r["variant"] == variant and r["tool"] == tool and r["result"]]


def failed(group, variant, tool):
    return [r for r in runs if r["group"] == group and r["variant"] == variant and r["tool"] == tool and not r["result"]]


def metric(r, name):
    v = r["result"].get("metrics", {}).get(name)
    return math.nan if v is None else float(v)


def values(rs, f):
    return [v for v in (f(r) for r in rs) if not math.isnan(v)]


def med(xs):
    return statistics.median(xs) if xs else math.nan


def cell(xs, fmt):
    """median (min-max) over the repetitions, in the unit `fmt` formats."""
    if not xs:
        return "-"
    if len(xs) == 1:
        return fmt(xs[0])
    return f"{fmt(med(xs))} ({fmt(min(xs))}–{fmt(max(xs))})"


def gbit(v):
    return f"{v / 1e9:.2f}"


def num2(v):
    return f"{v:.2f}"


def rps(v):
    return f"{v:,.0f}".replace(",", " ")


def us(v):
    """seconds as microseconds (or milliseconds from 10 ms up)"""
    if v >= 0.01:
        return f"{v * 1e3:.1f} ms"
    return f"{v * 1e6:.0f} us" if v >= 1e-4 else f"{v * 1e6:.1f} us"


def pct(a, b):
    """a relative to b, as a signed percentage"""
    return (a / b - 1) * 100 if b and not math.isnan(a) and not math.isnan(b) else math.nan


def overlap(xs, ys):
    return bool(xs and ys) and min(xs) <= max(ys) and min(ys) <= max(xs)


def runs_note(rs_ok, rs_failed):
    n = len(rs_ok)
    text = "" if n == reps else f" ({n} of {reps} runs)"
    return text


out = []
p = out.append
label = "quick run: 2 repetitions of short runs, to check the harness, not for comparison" if quick else \
    f"{reps} repetitions"
p("## Probes: built-in against iperf3, wrk, ping and hping3")
p("")
p(f"Run {env.get('BENCH_DATE', '')} on the host ({os.cpu_count()} cores, kernel {os.uname().release}), {label}; "
  f"{env['BENCH_ELAPSED']} s of measuring, wanlab at {env.get('BENCH_COMMIT', 'unknown')}. Load average {env['BENCH_LOAD_BEFORE']} before, "
  f"{env['BENCH_LOAD_AFTER']} after (other work on the machine shows up in every figure, for both sides alike). "
  f"Tools: {env['BENCH_VERSIONS']}.")
p("")
p("Path: two network namespaces created for the section, joined by one veth pair (198.18.110.1/30 <-> "
  "198.18.110.2/30, MTU 1500, the kernel's default offloads), nothing else; no netem. Every figure is a "
  "`wanlab probe KIND [--tool T] --server-ns B --client-ns A --address 198.18.110.2 --json` run: the tools "
  "through wanlab's runners, which start them in the namespaces (`docs/probes.md`, \"External tools\"). Within "
  "each repetition the two sides run back to back, their order alternating between repetitions. Cells are "
  "**median (min–max) over the repetitions** of each run's own figure.")
p("")

# --- throughput ---
streams = sorted({int(r["variant"]) for r in runs if r["group"] == "throughput"})
cg = env.get("BENCH_CG", "none")
p("### Throughput: built-in vs iperf3")
p("")
p(f"`wanlab probe throughput --streams N --duration {tput_s:g}s [--tool iperf3]`, upload (client sends), "
  "autotuned buffers. Two CPU measures, each divided by the bytes the receiver counted "
  "(Gbit/s x duration):")
p("")
p("- **processes + ksoftirqd**: CPU time of the process tree (wanlab and the tools it started: iperf3 "
  f"server and client), the scheduler's run time from a {'cpuacct (cgroup v1)' if cg == 'v1' else 'cpu (cgroup v2)' if cg == 'v2' else 'no (none available)'} "
  "group per run, plus the time of the `ksoftirqd` threads over the run. A veth hands each packet to the "
  "receiving side's softirq on the sender's CPU, and the kernel runs that softirq in the sending process's "
  "own context (charged to it) unless it has been busy too long, when it defers the rest to `ksoftirqd`; "
  "the sum covers both.")
p("- **system-wide**: busy time of all CPUs from `/proc/stat` (user + nice + system + irq + softirq) over the "
  "run: everything the transfer caused, `ksoftirqd` included, but also whatever else ran on the machine "
  "meanwhile, so it compares the two sides of one run only, and means something only on a quiet machine "
  "(look at the load average above). Both measures span the whole invocation (setup and teardown, well under "
  "a second, included); the bytes are those counted in the measured window.")
p("")
p("Context switches are the machine's (`ctxt` in `/proc/stat`) over the run, per GB: each time a blocked "
  "thread of either side is woken to send or receive is one. Retransmits are the probe's own figure; the last "
  "column is how many of the segments the sender retransmitted the receiver reported back as duplicates it "
  "already had (D-SACK, `TcpExtTCPDSACKRecvSegs` against `TcpRetransSegs` in the client's namespace, summed "
  "over the runs): retransmissions that were not needed.")
p("")
p("| streams | tool | Gbit/s | CPU s/GB, processes + ksoftirqd | CPU s/GB, system-wide | context switches per GB | "
  "retransmits | of them D-SACKed |")
p("|---|---|---|---|---|---|---|---|")
tput = {}
spurious = {}
for s in streams:
    for tool in ("builtin", "iperf3"):
        rs = ok("throughput", str(s), tool)
        gigabytes = lambda r: metric(r, "throughput") / 8 * tput_s / 1e9
        g = values(rs, lambda r: metric(r, "throughput"))
        per_gb_p = values(rs, lambda r: r["cpu"] / gigabytes(r))
        per_gb_s = values(rs, lambda r: r["busy"] / gigabytes(r))
        per_gb_c = values(rs, lambda r: r["ctxt"] / gigabytes(r))
        retr = values(rs, lambda r: metric(r, "retransmits"))
        counted = [r for r in rs if not math.isnan(r["retrans"])]
        retrans_sum = sum(r["retrans"] for r in counted)
        dsack = sum(r["dsack"] for r in counted) / retrans_sum * 100 if retrans_sum else math.nan
        spurious[(s, tool)] = dsack
        tput[(s, tool)] = (g, per_gb_p, per_gb_s, per_gb_c)
        name = "built-in" if tool == "builtin" else "iperf3"
        fails = failed("throughput", str(s), tool)
        extra = f" ({len(fails)} of {len(fails) + len(rs)} runs failed)" if fails else ""
        p(f"| {s} | {name}{extra} | {cell(g, gbit)} | {cell(per_gb_p, num2)} | {cell(per_gb_s, num2)} | "
          f"{cell(per_gb_c, lambda v: f'{v:,.0f}'.replace(',', ' '))} | {cell(retr, lambda v: f'{v:.0f}')} | "
          f"{'-' if math.isnan(dsack) else f'{dsack:.0f}%'} |")
p("")
lines = []
for s in streams:
    gb, pb, sb, cb = tput[(s, "builtin")]
    gi, pi, si, ci = tput[(s, "iperf3")]
    if not gb or not gi:
        lines.append(f"- {s} stream(s): no comparison (runs failed, see the end of the section).")
        continue
    d = pct(med(gb), med(gi))
    who = "built-in faster" if d > 0 else "iperf3 faster"
    noise = " (the ranges overlap: within this run's noise)" if overlap(gb, gi) else ""
    lines.append(
        f"- {s} stream(s): {who} by {abs(d):.0f}%{noise}; per GB built-in vs iperf3: CPU {pct(med(pb), med(pi)):+.0f}% "
        f"(processes + ksoftirqd), {pct(med(sb), med(si)):+.0f}% (system-wide); context switches "
        f"{pct(med(cb), med(ci)):+.0f}%.")
p("Compared by median:")
p("")
out.extend(lines)
p("")
def losses(i, better_low):
    """stream counts where the built-in side's median is worse, each marked when the ranges overlap"""
    out = []
    for s in streams:
        b, x = tput[(s, "builtin")][i], tput[(s, "iperf3")][i]
        if not b or not x:
            out.append(f"{s} stream(s) (no data)")
        elif (med(b) > med(x)) if better_low else (med(b) < med(x)):
            out.append(f"{s} stream(s)" + (" (within the noise: the ranges overlap)" if overlap(b, x) else ""))
    return out


def verdict(i, better_low):
    lost = losses(i, better_low)
    return "met at every stream count" if not lost else "not met with " + ", ".join(lost)


# one stream: the built-in side's context switches per GB relative to iperf3's
one = pct(med(tput[(1, "builtin")][3]), med(tput[(1, "iperf3")][3])) if 1 in streams else math.nan
dsacked = [v for v in spurious.values() if not math.isnan(v)]
p(f"Goal (built-in at least as fast as iperf3, no more CPU per byte): speed {verdict(0, False)}; CPU per byte "
  f"{verdict(1, True)} by the processes + ksoftirqd measure, {verdict(2, True)} system-wide. "
  "Both move data with blocking `send()`/`recv()` of large buffers (the built-in probe 256 KiB per call, "
  "iperf3 128 KiB). On a veth the receiving side's softirq runs on the sending CPU, so with one stream that "
  "CPU does the sender's copy, both sides' TCP work and every wake-up of the receiver, and it is the limit. "
  "The built-in receiver sets a low watermark (`SO_RCVLOWAT`, 1 ms of data and at most 128 KiB: "
  "docs/probes.md), so the kernel wakes it once per batch rather than once per segment, which iperf3 does "
  "not do"
  + (f": with one stream the machine switched context {abs(one):.0f}% {'less' if one < 0 else 'more'} often "
     "per GB with the built-in probe than with iperf3." if not math.isnan(one) else ".")
  + " With more streams than cores the two also differ in threads: iperf3 3.12 runs all its "
  "streams in one thread per side (a `select()` loop), which cannot use more than one CPU per side, the "
  "built-in probe one sending and one receiving thread per stream, which the scheduler spreads over both "
  "CPUs."
  + (f" Retransmits on this path are almost all spurious ({min(dsacked):.0f}-{max(dsacked):.0f}% D-SACKed): "
     "segments sent from the sending thread and from ACK processing in "
     "the receiving CPU's softirq reach the receiver through the two CPUs' backlog queues, out of order, and "
     "the sender takes the reordering for loss." if dsacked and min(dsacked) >= 80 else
     f" {min(dsacked):.0f}-{max(dsacked):.0f}% of the retransmitted segments were D-SACKed." if dsacked else ""))
p("")

# --- http ---
http_variants = []
for r in runs:
    if r["group"] == "http" and r["variant"] not in http_variants:
        http_variants.append(r["variant"])
p("### HTTP: built-in load generator vs wrk")
p("")
p(f"`wanlab probe http --connections C --threads 1 --duration {http_s:g}s [--tool wrk]`, closed loop "
  "(each connection sends its next request when the answer is in), keep-alive, 1024-byte body, 2 s timeout. "
  "Two servers in the server namespace, each with one thread: **nginx** (Debian's, one worker, a fixed body "
  "from memory via `return 200`, access log off, keep-alive without a request limit: "
  "`bench/lib/probes_nginx.conf`; the clients reach it in URL mode, `--url http://198.18.110.2:8080/`, and run "
  "in the client namespace) and wanlab's **built-in** server (`--server_threads 1 --response_size 1024`, "
  "TCP_NODELAY). With the built-in server, it and the built-in load generator are threads of one wanlab "
  "process; wrk is a separate process. Latency: from the request's send to its answer's last byte.")
p("")


def answer_sizes():
    """bytes per answer of each server, from the built-in client's byte count / requests"""
    per = {}
    for v in http_variants:
        server = v.split("/")[0]
        per.setdefault(server, []).extend(values(ok("http", v, "builtin"), lambda r: metric(r, "throughput") / 8 /
                                                 metric(r, "requests_per_second")))
    if not per.get("nginx") or not per.get("builtin"):
        return ""
    return (f" Bytes per answer (headers and the 1024-byte body, as the built-in client counted them): nginx "
            f"{med(per['nginx']):.0f} (it adds Date and Connection headers), built-in server {med(per['builtin']):.0f}.")


def cycle_note():
    """how much of each connection's cycle (connections / requests/s) the built-in latency covers"""
    if not coverage:
        return ""
    return (f" For the built-in client, mean latency x requests/s / connections is {min(coverage):.3f}-"
            f"{max(coverage):.3f} over its runs: its latency covers each connection's whole cycle, so nothing "
            "of it is spent in the client. wrk's mean cannot be checked this way, because it includes its "
            "correction samples.")


if env.get("BENCH_NGINX_OK") != "1":
    p("**nginx did not start in this run**, so its rows are missing (its error log tail is on stderr).")
    p("")
p("| server | connections | client | requests/s | p50 | p99 | mean | errors |")
p("|---|---|---|---|---|---|---|---|")
http = {}
coverage = []
for v in sorted(http_variants, key=lambda x: (x.split("/")[0] != "nginx", int(x.split("/")[1]))):
    server, conns = v.split("/")
    for tool in ("builtin", "wrk"):
        rs = ok("http", v, tool)
        q = values(rs, lambda r: metric(r, "requests_per_second"))
        p50 = values(rs, lambda r: metric(r, "latency_p50"))
        p99 = values(rs, lambda r: metric(r, "latency_p99"))
        err = values(rs, lambda r: metric(r, "errors"))
        mean = values(rs, lambda r: metric(r, "latency_mean"))
        # Closed loop: each connection's cycle is connections / (requests/s); the built-in
        # client's mean latency over it is the share of the cycle its latency covers.
        if tool == "builtin":
            coverage.extend(values(rs, lambda r: metric(r, "latency_mean") * metric(r, "requests_per_second") / int(conns)))
        http[(v, tool)] = (q, p50, p99)
        fails = failed("http", v, tool)
        extra = f" ({len(fails)} of {len(fails) + len(rs)} runs failed)" if fails else ""
        p(f"| {server} | {conns} | {'built-in' if tool == 'builtin' else 'wrk'}{extra} | {cell(q, rps)} | "
          f"{cell(p50, us)} | {cell(p99, us)} | {cell(mean, us)} | {cell(err, lambda x: f'{x:.0f}')} |")
p("")
p("Compared by median:")
p("")
http_fast, http_slow, p50_agree = [], [], []
for v in sorted(http_variants, key=lambda x: (x.split("/")[0] != "nginx", int(x.split("/")[1]))):
    server, conns = v.split("/")
    qb, b50, b99 = http[(v, "builtin")]
    qw, w50, w99 = http[(v, "wrk")]
    if not qb or not qw:
        p(f"- {server}, {conns} connections: no comparison (runs failed).")
        continue
    d = pct(med(qb), med(qw))
    p50_agree.append((f"{server} server, {conns} connections", abs(pct(med(b50), med(w50))) <= 10))
    if d >= 0:
        http_fast.append(f"{server} server, {conns} connections")
    else:
        http_slow.append(f"{server} server, {conns} connections" +
                         (" (within the noise: the ranges overlap)" if overlap(qb, qw) else ""))
    noise = " (the ranges overlap)" if overlap(qb, qw) else ""
    p(f"- {server}, {conns} connections: built-in {'more' if d >= 0 else 'fewer'} requests/s by {abs(d):.0f}%{noise}; "
      f"p50 built-in {us(med(b50))} vs wrk {us(med(w50))} ({pct(med(b50), med(w50)):+.0f}%), "
      f"p99 {us(med(b99))} vs {us(med(w99))} ({pct(med(b99), med(w99)):+.0f}%).")
p("")
p("Goal (at least as many requests/s as wrk, latency percentiles that agree): requests/s "
  + ("met everywhere" if not http_slow else f"met for {', '.join(http_fast) or 'none'}; not for {', '.join(http_slow)}")
  + "; p50 within 10% of wrk's: "
  + ("in every case." if p50_agree and all(a for _, a in p50_agree) else
     f"in {sum(1 for _, a in p50_agree if a)} of {len(p50_agree)} cases"
     + (f" (not: {'; '.join(n for n, a in p50_agree if not a)})." if p50_agree else "."))
  + " Both clients are one epoll thread with one request in flight per connection and a prebuilt request, "
  "so requests/s is connections / (latency + the client's own turn-around). They differ in the turn-around: "
  "the built-in load generator sends the next request on a connection as soon as it has read the answer "
  "(one `send()`, one `recv()` per request; it asks for `EPOLLOUT` only when a send would block), while wrk "
  "4.1 registers the socket for writing when the answer is complete and writes the next request on a later "
  "pass of its event loop, after it has handled the rest of that batch of answers, then unregisters it (two "
  "`epoll_ctl()` calls and part of an `epoll_wait()` pass per request). That is why the built-in one can reach "
  "more requests/s from the same server, and also why its p50 can be *higher* against a server that answers in batches: wrk's "
  "latency clock starts only when it writes, so the time a request waits in wrk's own loop is in neither "
  "figure, and the server receives wrk's requests in bunches, while the built-in client's requests trickle in "
  "one by one and each one's latency includes its wait behind the others at the server. Latency is from the "
  "send to the last byte of the answer in both. wrk's percentiles also include samples its `stats_correct()` "
  "adds for answers slower than twice the mean interval (a coordinated-omission correction), while the "
  "built-in one records every request in a histogram (0.8% resolution) without correction, so p99 differs "
  "where a run had stalls; on a loaded host the p99s are the scheduler's."
  + cycle_note() + answer_sizes())
p("")

# --- latency ---
p("### Latency: rtt and rr against ping and hping3")
p("")
p(f"`wanlab probe rtt --method M --count {rtt_count} --interval {rtt_ms}ms [--tool ping|hping3]` and "
  f"`wanlab probe rr --connections 1 --duration {rr_s:g}s` (100-byte request, 200-byte response). Per run: "
  "the median and the 99th percentile of its probes; the cells are the median (min–max) of those over the "
  "repetitions.")
p("")
p("| measures | tool | p50 | p99 | min | loss |")
p("|---|---|---|---|---|---|")
lat = {}
rows = [("rtt", "tcp", "builtin", "TCP handshake (SYN -> SYN-ACK)", "built-in `rtt --method tcp`"),
        ("rtt", "tcp", "hping3", "TCP handshake (SYN -> SYN-ACK)", "hping3 -S (`--tool hping3`)"),
        ("rtt", "icmp", "builtin", "ICMP echo", "built-in `rtt --method icmp`"),
        ("rtt", "icmp", "ping", "ICMP echo", "ping (`--tool ping`)"),
        ("rtt", "udp", "builtin", "UDP echo (user-space echo server)", "built-in `rtt --method udp`"),
        ("rr", "1", "builtin", "TCP request/response (100 B / 200 B)", "built-in `rr`")]
for group, v, tool, what, name in rows:
    rs = ok(group, v, tool)
    if group == "rtt":
        p50 = values(rs, lambda r: metric(r, "rtt_p50"))
        p99 = values(rs, lambda r: metric(r, "rtt_p99"))
        mins = values(rs, lambda r: metric(r, "rtt_min"))
        loss = values(rs, lambda r: metric(r, "loss"))
        loss_cell = cell(loss, lambda x: f"{x * 100:.1f}%")
    else:
        p50 = values(rs, lambda r: metric(r, "latency_p50"))
        p99 = values(rs, lambda r: metric(r, "latency_p99"))
        errs = values(rs, lambda r: metric(r, "errors"))
        mins = []
        loss_cell = f"{cell(errs, lambda x: f'{x:.0f}')} errors"
    lat[(group, v, tool)] = (p50, p99)
    fails = failed(group, v, tool)
    extra = f" ({len(fails)} of {len(fails) + len(rs)} runs failed)" if fails else ""
    p(f"| {what} | {name}{extra} | {cell(p50, us)} | {cell(p99, us)} | {cell(mins, us)} | {loss_cell} |")
p("")


def cmp(a, b, an, bn):
    x, y = lat[a][0], lat[b][0]
    if not x or not y:
        return f"{an} vs {bn}: no comparison (runs failed)", math.nan
    d = pct(med(x), med(y))
    noise = ", the ranges overlap" if overlap(x, y) else ""
    return f"{an} {us(med(x))} vs {bn} {us(med(y))}: {d:+.0f}%{noise}", d


def hping_spread():
    """where hping3's readings lie, from every sample of this run's hping3 runs"""
    xs = sorted(x for r in ok("rtt", "tcp", "hping3") for x in r["result"].get("samples", {}).get("rtt", []))
    if not xs:
        return ""
    q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]
    within = sum(1 for x in xs if x <= 0.00115) / len(xs)
    return (f" (in this run {within * 100:.0f}% of its {len(xs)} readings are at most 1.1 ms; quartiles "
            f"{q(0.25) * 1e3:.1f} / {q(0.5) * 1e3:.1f} / {q(0.75) * 1e3:.1f} ms)")


icmp_text, icmp_d = cmp(("rtt", "icmp", "builtin"), ("rtt", "icmp", "ping"), "built-in ICMP", "ping")
tcp_text, tcp_d = cmp(("rtt", "tcp", "builtin"), ("rtt", "tcp", "hping3"), "built-in TCP handshake", "hping3")
udp_text, udp_d = cmp(("rtt", "udp", "builtin"), ("rtt", "icmp", "builtin"), "built-in UDP echo", "built-in ICMP echo")
raw = any("raw socket" in n for r in runs if r["group"] == "rtt" and r["variant"] == "icmp" and r["result"]
          and r["tool"] == "builtin" for n in r["result"].get("notes", []))


def quantiles(group, v, tool):
    """p10, p50 and the count over every reading of these runs"""
    xs = sorted(x for r in ok(group, v, tool) for x in r["result"].get("samples", {}).get("rtt", []))
    if not xs:
        return None
    return xs[int(0.1 * (len(xs) - 1))], xs[int(0.5 * (len(xs) - 1))], xs[0], len(xs)


qb, qp = quantiles("rtt", "icmp", "builtin"), quantiles("rtt", "icmp", "ping")
icmp_detail = ""
if qb and qp and not abs(pct(med(lat[("rtt", "icmp", "builtin")][0]), med(lat[("rtt", "icmp", "ping")][0]))) <= 10:
    icmp_detail = (
        f" Over all readings of the run (built-in {qb[3]}, ping {qp[3]}): p10 {us(qb[0])} vs {us(qp[0])}, "
        f"minimum {us(qb[2])} vs {us(qp[2])}. A few microseconds is what the whole exchange costs when the "
        "kernel answers the echo within the `sendto()` call (on a veth the request is handed to the server "
        "namespace's softirq on the same CPU, and the reply comes back the same way; the receive stamp is "
        "taken when the reply is queued); tens of microseconds means the kernel handled the packets later. "
        "Both programs send a 72-byte echo from a raw socket, take the send time just before `sendto()` "
        "(iputils' `ping4_send_probe()`) and use the kernel's receive stamp, so where the two distributions "
        "are apart, it is in when the kernel got to the packets of each program; this section does not pin "
        "down why.")
p("Medians compared:")
p("")
p(f"- Same protocol, same packets: {icmp_text}. Goal (medians within 10%): "
  f"{'met' if abs(icmp_d) <= 10 else 'not met in this run' + (' (but within its noise)' if overlap(lat[('rtt', 'icmp', 'builtin')][0], lat[('rtt', 'icmp', 'ping')][0]) else '')}. Both take the receive time from the kernel "
  f"(`SO_TIMESTAMPNS`) and the kernel answers the echo in softirq; the built-in probe used "
  f"{'a raw ICMP socket (the new namespace forbids ping sockets: `ping_group_range` is `1 0`)' if raw else 'a ping socket'}, as ping does."
  + icmp_detail)
p(f"- {tcp_text}. Goal: {'met' if abs(tcp_d) <= 10 else 'not met, for a reason in hping3'}: hping3 reads the "
  "SYN-ACK through libpcap, which it opens with a 1 ms read timeout and, on Linux, without immediate mode "
  "(`pcap_open_live(ifname, 99999, 0, 1, ...)` in its `open_pcap()`), so libpcap may hold a captured reply "
  "for up to that millisecond before handing it over: on a veth, hping3's readings spread over the first "
  f"millisecond{hping_spread()} instead of sitting at the round trip of tens of microseconds. hping3 also takes "
  "the time in user space and prints it in 0.1 ms steps. The built-in probe times a non-blocking `connect()` "
  "until the socket is writable (one wake-up of its own thread). hping3 cross-checks loss and delays of "
  "milliseconds (netem), not a bare veth's tens of microseconds.")
p(f"- {udp_text}: the UDP echo is answered by wanlab's echo server thread in the server namespace (a "
  "wake-up and two system calls in user space), the ICMP echo by the kernel in softirq; both take the "
  "receive time from the kernel, so the difference is what an application round trip costs over the "
  "kernel's.")
rr50 = lat[("rr", "1", "builtin")][0]
icmp50 = lat[("rtt", "icmp", "builtin")][0]
if rr50 and icmp50:
    p(f"- rr {us(med(rr50))} against the paced ICMP probe's {us(med(icmp50))}: rr does more per transaction (TCP, "
      "a user-space server, a 200-byte answer) but runs its transactions back to back, so its threads never "
      "sleep and the CPUs stay awake with warm caches; the rtt probes send one probe every "
      f"{rtt_ms} ms, and each one pays the machine's wake-up (CPU idle exit, scheduler, cold caches) "
      "on top of the path. ping and hping3 are paced the same way, so the rtt rows compare with each other, "
      "not with rr.")
p("")
p("The probes are paced (one every "
  f"{rtt_ms} ms), so each one finds the CPUs idle or busy with other work: p99 is the wake-up latency of the "
  "machine more than the path, and it varies between runs on a shared host.")
p("")

# --- failures ---
fails = [r for r in runs if not r["result"]]
if fails:
    p("### Runs that failed")
    p("")
    for r in fails:
        p(f"- {r['group']} {r['variant']} {r['tool']} (repetition {r['rep']}): {r['error']}")
    p("")
print("\n".join(out).rstrip("\n"))
