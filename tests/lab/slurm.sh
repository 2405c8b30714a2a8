#!/usr/bin/env bash
# A real Slurm cluster on the test lab: lab.sh's hosts (network namespaces on
# 198.18.<net>.0/24), each also running a slurmd as node<i>, and slurmctld on
# the controller (this machine's root network namespace, 198.18.<net>.254),
# all sharing the machine's munged. Debian 12's Slurm 22.05; needs root.
#
#   tests/lab/slurm.sh up   <net> <hosts> <dir>   # prints nothing on success
#   tests/lab/slurm.sh down <net> <hosts> <dir>
#
# After `up`, <dir>/slurm.conf is the cluster's: with SLURM_CONF set to it,
# `salloc -N <hosts>`, `srun` and `sbcast` work from the controller. Node i
# is node<i> at 198.18.<net>.<i> (host h<i> of lab.sh), with its own
# hostname, /var/tmp (the same one its sshd sees) and slurmd spool.
#
# The catch: `ip netns exec` mounts a fresh /sys, which hides
# the cgroup mounts, and slurmd will not start without its cgroup plugin; so
# each node mounts the v1 hierarchies again inside its own mount namespace.
#
# Only one Slurm lab runs at a time on a machine (slurmctld's port is the
# cluster's). munged is the machine's: started here if none answers (and
# then stopped by `down`), left alone otherwise.
set -euo pipefail

cmd=${1:?up or down}
net=${2:?net}
hosts=${3:?hosts}
dir=${4:?dir}
here=$(cd "$(dirname "$0")" && pwd -P)
controller=mxctl$net

node() { echo "node$1"; }

pids_of() {
    local file=$1
    [ -f "$file" ] && cat "$file" 2>/dev/null || true
}

down() {
    if [ -d "$dir" ]; then
        # The controller first (no job is rescheduled), then each node: the
        # lab's own down kills everything in the host's namespaces.
        for pid in $(pids_of "$dir/slurmctld.pids"); do kill -KILL "$pid" 2>/dev/null || true; done
        for pid in $(pids_of "$dir/munged.pid"); do kill -TERM "$pid" 2>/dev/null || true; done
    fi
    bash "$here/lab.sh" down "$net" "$hosts" "$dir"
    # The nodes' cgroups (proctrack/cgroup makes slurm_node<i> in the
    # machine's own v1 hierarchies, which the nodes mount again): gone once
    # their processes are.
    for i in $(seq 1 "$hosts"); do
        for c in freezer cpuset memory devices cpuacct cpu; do
            [ -d "/sys/fs/cgroup/$c/slurm_$(node "$i")" ] || continue
            find "/sys/fs/cgroup/$c/slurm_$(node "$i")" -depth -type d -exec rmdir {} + 2>/dev/null || true
        done
    done
}

# The shell that mounts the cgroup v1 hierarchies slurmd's cgroup plugin
# wants, inside a node's own mount namespace.
cgroup_mounts() {
    local m="mount -t tmpfs mxcg /sys/fs/cgroup"
    for c in freezer cpuset memory devices cpuacct cpu; do
        m="$m && mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c"
    done
    echo "$m"
}

# munged answers, or is started (as the munge user) and its pid kept.
munge_up() {
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 0755 /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/mx-lab-munged.pid
    cp /run/munge/mx-lab-munged.pid "$dir/munged.pid"
    local deadline=$((SECONDS + 10))
    until munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "slurm lab: munged did not answer in 10 s" >&2
            exit 1
        fi
        sleep 0.1
    done
}

write_conf() {
    local last=$hosts
    cat > "$dir/slurm.conf" <<EOF
ClusterName=mxlab$net
SlurmctldHost=$controller(198.18.$net.254)
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$dir/slurmctld
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdSpoolDir=/var/spool/slurmd
SlurmdPidFile=/var/spool/slurmd/slurmd.pid
SlurmdLogFile=/var/spool/slurmd/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=10
NodeName=node[1-$last] NodeAddr=198.18.$net.[1-$last] CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=lab Nodes=node[1-$last] Default=YES MaxTime=INFINITE State=UP
EOF
    cat > "$dir/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupAutomount=no
EOF
}

up() {
    down
    bash "$here/lab.sh" up "$net" "$hosts" "$dir"
    dir=$(cd "$dir" && pwd -P)
    export SLURM_CONF="$dir/slurm.conf"
    mkdir -p "$dir/slurmctld"
    write_conf
    munge_up
    # slurmctld in a UTS namespace named as SlurmctldHost says: otherwise it
    # refuses to be the controller.
    unshare --uts sh -c "hostname $controller; exec /usr/sbin/slurmctld -D -i" \
        > "$dir/slurmctld.out" 2>&1 < /dev/null &
    echo $! > "$dir/slurmctld.pids"
    for i in $(seq 1 "$hosts"); do
        local n d
        n="mx${net}h$i"
        d="$dir/h$i"
        mkdir -p "$d/spool"
        # Own hostname (slurmd's NodeName), own spool and /var/tmp (the one
        # lab.sh gave this host's sshd), own PID namespace and /proc.
        ip netns exec "$n" unshare --mount --uts --pid --fork --mount-proc \
            sh -c "hostname $(node "$i"); mount --bind '$d/vartmp' /var/tmp; mkdir -p /var/spool/slurmd; mount --bind '$d/spool' /var/spool/slurmd; $(cgroup_mounts); /usr/sbin/slurmd -D & wait" \
            > "$d/slurmd.out" 2>&1 < /dev/null &
    done
    # Every node idle within 30 s, or say what each daemon said.
    local deadline=$((SECONDS + 30)) idle=0
    while [ "$SECONDS" -lt "$deadline" ]; do
        idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l || true)
        [ "$idle" = "$hosts" ] && return 0
        sleep 0.2
    done
    {
        echo "slurm lab: $idle of $hosts nodes idle after 30 s"
        sinfo -N 2>&1 || true
        echo "slurm lab: slurmctld said:"
        tail -n 20 "$dir/slurmctld.log" "$dir/slurmctld.out" 2>&1 || true
        for i in $(seq 1 "$hosts"); do
            echo "slurm lab: $(node "$i") said:"
            tail -n 20 "$dir/h$i/slurmd.out" "$dir/h$i/spool/slurmd.log" 2>&1 || true
        done
    } >&2
    exit 1
}

case "$cmd" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 up|down <net> <hosts> <dir>" >&2; exit 2 ;;
esac
