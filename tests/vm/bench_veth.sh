#!/bin/sh
# Measurements for docs/microvm.md (not a test): per-command costs and iperf3 over a veth pair
# between two namespaces, with and without 20 ms of netem. Runs the same way on the host and
# inside the VM:  sh tests/vm/bench_veth.sh   /   build/wanlab vm run -- sh tests/vm/bench_veth.sh
# Creates namespaces wl-bench-a/b with 198.18.1.1-2/30 and deletes them at the end.
set -u
a=wl-bench-a b=wl-bench-b
cleanup() { ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; }
trap cleanup EXIT
cleanup

now() { date +%s.%N; }
per_op_ms() { echo "$1 $2 $3" | awk '{ printf "%.2f", ($2 - $1) * 1000 / $3 }'; }

t0=$(now); i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i + 1)); done; t1=$(now)
echo "exec /bin/true: $(per_op_ms "$t0" "$t1" 100) ms each (100 runs)"

ip netns add $a && ip netns add $b
ip link add wl-ba netns $a type veth peer name wl-bb netns $b
ip -n $a addr add 198.18.1.1/30 dev wl-ba && ip -n $b addr add 198.18.1.2/30 dev wl-bb
ip -n $a link set wl-ba up && ip -n $b link set wl-bb up
ip -n $a link set lo up && ip -n $b link set lo up

t0=$(now); i=0
while [ $i -lt 100 ]; do
    tc -n $a qdisc replace dev wl-ba root pfifo limit $((100 + i)); i=$((i + 1))
done
t1=$(now)
echo "tc qdisc replace: $(per_op_ms "$t0" "$t1" 100) ms each (100 runs)"
tc -n $a qdisc del dev wl-ba root

ip netns exec $b iperf3 -s -1 -D -B 198.18.1.2 >/dev/null
sleep 1
echo "iperf3 bare veth: $(ip netns exec $a iperf3 -c 198.18.1.2 -t 5 -f m |
    awk '/receiver/ { print $7, $8 }')"
ip netns exec $a ping -n -q -c 5 -i 0.2 198.18.1.2 | sed -n 's/^rtt/ping bare veth: rtt/p'

if tc -n $a qdisc add dev wl-ba root netem delay 20ms 2>/dev/null; then
    ip netns exec $b iperf3 -s -1 -D -B 198.18.1.2 >/dev/null
    sleep 1
    echo "iperf3 veth + netem 20ms one way: $(ip netns exec $a iperf3 -c 198.18.1.2 -t 5 -f m |
        awk '/receiver/ { print $7, $8 }')"
else
    echo "iperf3 veth + netem 20ms one way: n/a (this kernel has no sch_netem)"
fi
