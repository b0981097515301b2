# Sourced by the VM suites: what the host's CPUs did while a suite ran, so a timing failure
# says whether the machine was quiet. `cpu_mark` reads /proc/stat; `cpu_since` prints
# "host CPUs during the suite: busy B%, stolen S% (by the hypervisor), idle I%". Steal is
# time this machine's vCPUs were runnable but another guest of the hypervisor ran: the
# micro-VM's TCG threads lose it too, and its timers fire late by as much.
cpu_mark() { read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
             echo "$user $nice $system $idle $iowait $irq $softirq $steal"; }
cpu_since() {
    set -- $1 $(cpu_mark)
    awk -v a="$1 $2 $3 $4 $5 $6 $7 $8" -v b="$9 ${10} ${11} ${12} ${13} ${14} ${15} ${16}" 'BEGIN {
        split(a, x); split(b, y); for (i = 1; i <= 8; i++) { d[i] = y[i] - x[i]; t += d[i] }
        if (t <= 0) { print "host CPUs during the suite: not measured"; exit }
        printf "host CPUs during the suite: busy %.0f%%, stolen %.1f%% (by the hypervisor), idle %.0f%%\n",
               100 * (d[1] + d[2] + d[3] + d[6] + d[7]) / t, 100 * d[8] / t, 100 * (d[4] + d[5]) / t }'
}
