#!/usr/bin/env bash
# Fleet commands at lab scale: a lab of N hosts (network namespaces, one real
# sshd each; tests/lab/lab.sh) and the wall time of a fresh `mx start` (no mx
# on the hosts: the agent and each host's slice of the matrix copied), then
# `status`, `stop`, `collect`, `summarize` and `clean`, each against a
# baseline measured in the same round: one bare `ssh host true` to every
# host, 64 in parallel (the floor a fan-out over ssh can reach). Each timed
# command starts with no shared ssh connection open, as the floor does, so
# it pays every handshake the floor pays. Rounds interleave floor and
# commands (A B A B); medians and ratios to the floor's median. Needs root.
#
#   bench/lab_scale.sh [hosts] [rounds]     # 40 hosts, 3 rounds by default
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
hosts=${1:-40}
rounds=${2:-3}
net=90
lab=$(mktemp -d /tmp/mx-lab-scale.XXXXXX)
# The controller's own CPU: mx and the ssh clients it runs, in a cgroup of
# their own (the lab's sshd and everything on its hosts are outside it): on
# this machine the hosts share the controller's cores, so the wall time
# pays for their work too; a real fleet's hosts do theirs on their own.
if [ -d /sys/fs/cgroup/cpuacct ]; then
    cg=/sys/fs/cgroup/cpuacct/mx-lab-scale-$$
    mkdir "$cg"
    usage() { awk '{printf "%.3f\n", $1 / 1e9}' "$cg/cpuacct.usage"; }
    tasks=tasks
else
    cg=/sys/fs/cgroup/mx-lab-scale-$$
    mkdir "$cg"
    usage() { awk '/usage_usec/ {printf "%.3f\n", $2 / 1e6}' "$cg/cpu.stat"; }
    tasks=cgroup.procs
fi
trap 'bash "$root/tests/lab/lab.sh" down $net $hosts "$lab"; rmdir "$cg" 2>/dev/null || true' EXIT
cargo build --release -q
mx=$PWD/target/x86_64-unknown-linux-gnu/release/mx
# Each host logs in to a home of its own, as a fleet's hosts do: the floor
# is a plain login, not this machine's shell start-up files.
MX_LAB_OWN_HOME=1 bash tests/lab/lab.sh up $net "$hosts" "$lab"
work=$(mktemp -d)
cd "$work"
cp "$lab/servers.txt" .
export MX_SSH="ssh -F $lab/ssh_config" MX_SCP="scp -F $lab/ssh_config"
"$mx" gen --pps 100 --peers 2 --seed 1 > /dev/null

# Wall seconds and controller CPU-seconds of a command, as "wall/cpu".
seconds() {
    local t0 t1 c0 c1
    c0=$(usage); t0=$(date +%s.%N)
    bash -c 'echo $$ > "$0"; exec "$@"' "$cg/$tasks" "$@" > /dev/null 2>&1 || true
    t1=$(date +%s.%N); c1=$(usage)
    echo "$(echo "$t1 - $t0" | bc)/$(echo "$c1 - $c0" | bc)"
}
floor() { xargs -P 64 -I{} ssh -F "$lab/ssh_config" {} true < <(cut -d= -f2 servers.txt); }
export -f floor
export lab
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# mx shares one ssh connection per host for 60 s (ControlPersist): close them
# before each timed command, so that it pays every handshake the floor does.
cold() { for s in /tmp/mx-ssh-"$(id -u)"/*; do [ -S "$s" ] && { ssh -o ControlPath="$s" -O exit x 2>/dev/null || true; }; done; true; }

commands=(start status stop collect summarize clean)
declare -A took
for round in $(seq "$rounds"); do
    took[floor]+="$(seconds bash -c floor) "
    for c in "${commands[@]}"; do
        cold
        case $c in
            start) args=(start --workers 1 --interval 1) ;;
            clean) args=(clean --yes) ;;
            *) args=("$c") ;;
        esac
        took[$c]+="$(seconds "$mx" "${args[@]}") "
    done
done
# Each round's "wall/cpu": the wall seconds, or with cpu the controller's.
field() { tr ' ' '\n' <<<"${took[$1]}" | grep . | cut -d/ -f"$2"; }
f=$(field floor 1 | median)
fc=$(field floor 2 | median)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $hosts lab hosts, $rounds rounds"
echo "| what | median | vs floor | controller CPU | vs floor |"
echo "|---|---|---|---|---|"
row() { awk -v w="$2" -v c="$3" -v f="$f" -v fc="$fc" -v what="$1" \
    'BEGIN {printf "| %s | %.2f s | %.2f | %.2f s | %.2f |\n", what, w, w / f, c, c / fc}'; }
row "floor: ssh true to every host, 64 in parallel" "$f" "$fc"
for c in "${commands[@]}"; do
    row "mx $c" "$(field "$c" 1 | median)" "$(field "$c" 2 | median)"
done
for what in floor "${commands[@]}"; do echo "rounds (wall/cpu s) $what: ${took[$what]}"; done
