#!/usr/bin/env bash
# bench section "probes": wanlab's built-in probes against the tools users trust, side by side
# in one run over one path: two network namespaces joined by a veth pair (198.18.110.1/30 <->
# 198.18.110.2/30, kernel-default offloads), on the host kernel.
#   throughput  built-in vs iperf3 (`--tool iperf3`), 1/4/8 streams: Gbit/s, CPU s per GB,
#               context switches per GB, retransmits and how many of them were spurious
#   http        built-in load generator vs wrk, against nginx (Debian's, run here in the server
#               namespace with bench/lib/probes_nginx.conf) and against wanlab's built-in server
#   latency     rtt (tcp, icmp, udp) and rr vs ping and hping3
# Every measurement is a `wanlab probe ... --server-ns B --client-ns A` run (the tools through
# wanlab's runners, which start them in the namespaces), tools alternating within each
# repetition. Prints markdown on stdout (bench/run splices it into docs/performance.md),
# progress on stderr. BENCH_QUICK=1: 2 repetitions of shorter runs (5 of longer ones otherwise).
# WANLAB_BIN: the binary (default build/wanlab). BENCH_PROBES_RAW=DIR: keep every run's JSON there.
# Installs what is missing (iperf3, wrk, iputils-ping, hping3, nginx) with apt, with a temporary
# policy-rc.d so that nginx's package starts no service. Leaves nothing behind: the namespaces
# (and with them the veth pair), nginx, the cgroups it measures CPU with, that policy-rc.d and
# its temporary directory go on exit, also on errors and Ctrl-C.
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
bench_wanlab probes
[[ $(id -u) -eq 0 ]] || { echo "bench probes: needs root (namespaces)" >&2; exit 2; }

if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  reps=2 tput_s=2 http_s=2 rtt_count=100 rr_s=1 http_conns="10 100"
else
  reps=5 tput_s=5 http_s=5 rtt_count=300 rr_s=3 http_conns="10 100"
fi
rtt_interval_ms=10
streams_list="1 4 8"

tag="wlbench-probes-$$"
ns_a="$tag-a" ns_b="$tag-b"
ip_a=198.18.110.1 ip_b=198.18.110.2
nginx_port=8080
tmp=$(mktemp -d /tmp/wlbench-probes.XXXXXX)
chmod 755 "$tmp"  # nginx's worker runs as nobody (it reads nothing here, but may look at the paths)
nginx_pid="" made_policy="" cg_made=() running=""

cleanup() {
  local rc=$?
  set +e
  # A probe still running (Ctrl-C): timeout passes the signal on to wanlab, which unwinds.
  if [[ -n $running ]] && kill -0 "$running" 2>/dev/null; then
    kill -INT "$running" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$running" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$running" 2>/dev/null
    wait "$running" 2>/dev/null
  fi
  if [[ -n $nginx_pid ]] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -TERM "$nginx_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$nginx_pid" 2>/dev/null; then
      pkill -KILL -P "$nginx_pid" 2>/dev/null  # its worker, which outlives a killed master
      kill -KILL "$nginx_pid" 2>/dev/null
    fi
    wait "$nginx_pid" 2>/dev/null
  fi
  for cg in "${cg_made[@]}"; do [[ -d $cg ]] && rmdir "$cg" 2>/dev/null; done
  [[ -n $made_policy ]] && rm -f /usr/sbin/policy-rc.d
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "bench probes: $*" >&2; }

# --- tools ---------------------------------------------------------------------------------
need=()
for t in iperf3:iperf3 wrk:wrk ping:iputils-ping hping3:hping3 nginx:nginx; do
  command -v "${t%%:*}" >/dev/null 2>&1 || [[ -x /usr/sbin/${t%%:*} ]] || need+=("${t#*:}")
done
if ((${#need[@]})); then
  log "installing ${need[*]} (apt; no service is started)"
  # Debian starts nginx's service on installation unless policy-rc.d says no (101 = action
  # forbidden); a policy-rc.d already there is left as it is.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\n# temporary, from wanlab bench/sections/probes.sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >&2 ||
    log "apt-get install failed: the rows of what is missing will say so"
  if [[ -n $made_policy ]]; then rm -f /usr/sbin/policy-rc.d; made_policy=""; fi
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

# --- the path ------------------------------------------------------------------------------
ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add wlbp-a netns "$ns_a" type veth peer name wlbp-b netns "$ns_b"
ip -n "$ns_a" link set lo up
ip -n "$ns_b" link set lo up
ip -n "$ns_a" addr add "$ip_a/30" dev wlbp-a
ip -n "$ns_b" addr add "$ip_b/30" dev wlbp-b
ip -n "$ns_a" link set wlbp-a up
ip -n "$ns_b" link set wlbp-b up
ip netns exec "$ns_a" ping -c 1 -W 2 -q "$ip_b" >/dev/null || { log "the veth path does not answer ping"; exit 1; }
where=(--address "$ip_b" --server-ns "$ns_b" --client-ns "$ns_a" --client-address "$ip_a")
where_no_bind=(--address "$ip_b" --server-ns "$ns_b" --client-ns "$ns_a")

# --- CPU accounting: a cpuacct (cgroup v1) or cpu (v2) group per run -------------------------
cg_kind=""
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  cg_kind=v2 cg_parent=/sys/fs/cgroup
elif [[ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ]]; then
  cg_kind=v1 cg_parent=/sys/fs/cgroup/cpuacct
fi
cg_usage_ns() {  # CPU time (ns) of every process that was in group $1
  case $cg_kind in
    v1) cat "$1/cpuacct.usage" ;;
    v2) awk '$1 == "usage_usec" { printf "%d\n", $2 * 1000 }' "$1/cpu.stat" ;;
  esac
}
# user+nice+system+irq+softirq over all CPUs (USER_HZ ticks): everything the machine did,
# including the softirq work of the veth path that no process is charged for
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }
# user+system time (USER_HZ ticks) of the ksoftirqd threads: softirq work the kernel deferred
# from the processes' context to its own threads (not in the process tree's figure)
ksoftirqd_ticks() {
  local t=0 p f
  for p in $(pgrep -x 'ksoftirqd/[0-9]+'); do
    read -r -a f < "/proc/$p/stat" 2>/dev/null || continue
    t=$((t + f[13] + f[14]))
  done
  echo "$t"
}

# context switches since boot, all CPUs: every blocking wake-up of a probe's threads is one
ctxt() { awk '$1 == "ctxt" { print $2; exit }' /proc/stat; }
# the sending namespace's TCP counters: segments retransmitted, and those the receiver reported
# back as duplicates it already had (D-SACK: the retransmission was spurious)
tcp_counters() {
  ip netns exec "$ns_a" nstat -asz TcpRetransSegs TcpExtTCPDSACKRecvSegs 2>/dev/null |
    awk '$1 == "TcpRetransSegs" { r = $2 } $1 == "TcpExtTCPDSACKRecvSegs" { d = $2 } END { print r + 0, d + 0 }'
}

runs="$tmp/runs.tsv"
: > "$runs"
n=0
# measure GROUP VARIANT TOOL REP -- COMMAND...: runs one probe, records its JSON, exit status,
# wall time, process-tree CPU, system-wide busy time and context switches; for throughput, also
# the sender's retransmitted and D-SACKed segments (tcp-N.txt).
measure() {
  local group=$1 variant=$2 tool=$3 rep=$4
  shift 5
  n=$((n + 1))
  local out="$tmp/run-$n.json" err="$tmp/run-$n.err" cg="" rc=0
  if [[ -n $cg_kind ]]; then
    cg="$cg_parent/$tag-$n"
    mkdir "$cg" && cg_made+=("$cg") || cg=""
  fi
  local b0 t0 b1 t1 k0 k1 c0 c1 tcp0="" cpu="nan"
  [[ $group == throughput ]] && tcp0=$(tcp_counters)
  k0=$(ksoftirqd_ticks) b0=$(busy_ticks) c0=$(ctxt) t0=$(date +%s.%N)
  # In the background and waited for, so that a signal to this script is handled at once.
  (
    [[ -n $cg ]] && echo "$BASHPID" > "$cg/cgroup.procs"
    exec timeout -s INT -k 10 300 "$@"
  ) > "$out" 2> "$err" < /dev/null &
  running=$!
  wait "$running" || rc=$?
  running=""
  t1=$(date +%s.%N) c1=$(ctxt) b1=$(busy_ticks) k1=$(ksoftirqd_ticks)
  if [[ -n $tcp0 ]]; then
    local tcp1
    tcp1=$(tcp_counters)
    awk -v a="$tcp0" -v b="$tcp1" 'BEGIN { split(a, x, " "); split(b, y, " "); print y[1] - x[1], y[2] - x[2] }' \
      > "$tmp/tcp-$n.txt"
  fi
  if [[ -n $cg ]]; then
    cpu=$(cg_usage_ns "$cg")
    rmdir "$cg" 2>/dev/null || true
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$group" "$variant" "$tool" "$rep" "$rc" "$n" "$cpu" \
    "$((b1 - b0))" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "$((k1 - k0))" "$((c1 - c0))" >> "$runs"
  if ((rc != 0)); then
    log "  $group $variant $tool (rep $rep) failed, status $rc: $(tail -n 2 "$err" | tr '\n' ' ')"
  fi
  return 0
}

start_nginx() {
  local body
  [[ -x $nginx_bin ]] || { log "nginx is not installed"; return 1; }
  body=$(head -c 1024 /dev/zero | tr '\0' 'x')
  sed -e "s|@DIR@|$tmp|g" -e "s|@LISTEN@|$ip_b:$nginx_port|" -e "s|@BODY@|$body|" \
    bench/lib/probes_nginx.conf > "$tmp/nginx.conf"
  ip netns exec "$ns_b" "$nginx_bin" -t -q -c "$tmp/nginx.conf" -e "$tmp/nginx-error.log" >&2
  ip netns exec "$ns_b" "$nginx_bin" -c "$tmp/nginx.conf" -e "$tmp/nginx-error.log" </dev/null >&2 &
  nginx_pid=$!
  for _ in $(seq 50); do
    ip netns exec "$ns_a" bash -c "exec 3<>/dev/tcp/$ip_b/$nginx_port" 2>/dev/null && return 0
    kill -0 "$nginx_pid" 2>/dev/null || break
    sleep 0.1
  done
  log "nginx did not start: $(tail -n 3 "$tmp/nginx-error.log" 2>/dev/null)"
  return 1
}

uptime_load() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(uptime_load)
t_start=$(date +%s)
log "$reps repetitions; path $ns_a ($ip_a) <-> $ns_b ($ip_b); load average $load_before"

# --- throughput ----------------------------------------------------------------------------
for rep in $(seq "$reps"); do
  for s in $streams_list; do
    tools=(builtin iperf3)
    ((rep % 2 == 0)) && tools=(iperf3 builtin)
    for tool in "${tools[@]}"; do
      log "throughput, $s stream(s), $tool, repetition $rep/$reps"
      measure throughput "$s" "$tool" "$rep" -- "$wanlab" probe throughput --tool "$tool" --streams "$s" \
        --duration "${tput_s}s" "${where[@]}" --json
    done
  done
done

# --- http ----------------------------------------------------------------------------------
nginx_ok=1
start_nginx || nginx_ok=0
for rep in $(seq "$reps"); do
  for c in $http_conns; do
    tools=(builtin wrk)
    ((rep % 2 == 0)) && tools=(wrk builtin)
    for server in nginx builtin; do
      [[ $server == nginx && $nginx_ok == 0 ]] && continue
      for tool in "${tools[@]}"; do
        log "http, $c connections, $tool against $server, repetition $rep/$reps"
        if [[ $server == nginx ]]; then
          measure http "$server/$c" "$tool" "$rep" -- "$wanlab" probe http --tool "$tool" --connections "$c" --threads 1 \
            --duration "${http_s}s" --url "http://$ip_b:$nginx_port/" "${where_no_bind[@]}" --json
        else
          measure http "$server/$c" "$tool" "$rep" -- "$wanlab" probe http --tool "$tool" --connections "$c" --threads 1 \
            --server_threads 1 --response_size 1024 --duration "${http_s}s" "${where_no_bind[@]}" --json
        fi
      done
    done
  done
done
if ((nginx_ok)); then
  kill -TERM "$nginx_pid" 2>/dev/null || true
  wait "$nginx_pid" 2>/dev/null || true
  nginx_pid=""
fi

# --- latency -------------------------------------------------------------------------------
rtt_dur_ms=$((rtt_count * rtt_interval_ms + 2000))
for rep in $(seq "$reps"); do
  for pair in "tcp builtin" "tcp hping3" "icmp builtin" "icmp ping" "udp builtin"; do
    set -- $pair
    log "rtt, $1, $2, repetition $rep/$reps"
    if [[ $2 == hping3 ]]; then
      # hping3 cannot bind the client's address (wanlab refuses --client-address for it)
      w=("${where_no_bind[@]}")
    else
      w=("${where[@]}")
    fi
    measure rtt "$1" "$2" "$rep" -- "$wanlab" probe rtt --tool "$2" --method "$1" --count "$rtt_count" \
      --interval "${rtt_interval_ms}ms" --duration "${rtt_dur_ms}ms" "${w[@]}" --json
  done
  log "rr, 1 connection, repetition $rep/$reps"
  measure rr 1 builtin "$rep" -- "$wanlab" probe rr --connections 1 --duration "${rr_s}s" "${where[@]}" --json
done

elapsed=$(( $(date +%s) - t_start ))
log "measured in ${elapsed}s; load average now $(uptime_load)"

# --- the page ------------------------------------------------------------------------------
export BENCH_REPS=$reps BENCH_TPUT_S=$tput_s BENCH_HTTP_S=$http_s BENCH_RTT_COUNT=$rtt_count \
  BENCH_RTT_INTERVAL_MS=$rtt_interval_ms BENCH_RR_S=$rr_s BENCH_LOAD_BEFORE="$load_before" \
  BENCH_LOAD_AFTER="$(uptime_load)" BENCH_DATE="$(date -u +%Y-%m-%d)" BENCH_ELAPSED=$elapsed BENCH_CG="${cg_kind:-none}" \
  BENCH_NGINX_OK=$nginx_ok BENCH_QUICK=${BENCH_QUICK:-0} \
  BENCH_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- probes cli 2>/dev/null || echo ', with uncommitted changes in probes/ or cli/')" \
  BENCH_VERSIONS="$(
    printf 'iperf3 %s; ' "$(iperf3 --version | head -1 | awk '{print $2}')"
    printf 'wrk %s; ' "$(wrk -v 2>&1 | head -1 | awk '{print $2}')"
    printf 'nginx %s; ' "$("$nginx_bin" -v 2>&1 | sed 's|.*nginx/||')"
    printf 'ping (iputils) %s; ' "$(ping -V | head -1 | awk '{print $NF}')"
    printf 'hping3 %s' "$(hping3 -v 2>&1 | head -1 | awk '{print $3}')"
  )"
if [[ -n ${BENCH_PROBES_RAW:-} ]]; then  # keep the raw runs (JSON, stderr, runs.tsv, settings) for a look
  mkdir -p "$BENCH_PROBES_RAW"
  cp "$tmp"/runs.tsv "$tmp"/run-* "$BENCH_PROBES_RAW"/
  cp "$tmp"/tcp-* "$BENCH_PROBES_RAW"/ 2>/dev/null || true  # throughput runs only
  env | grep '^BENCH_' > "$BENCH_PROBES_RAW/settings.env"
fi
python3 bench/lib/probes_report.py "$tmp"
