#!/usr/bin/env bash
# Fleet commands at lab scale: a 40-host lab (network namespaces, one real sshd
# each; tests/lab/lab.sh) and the wall time of `mx start` and `mx status`,
# each run 3 times, interleaved with a baseline in the same run: one bare
# `ssh host true` round trip to every host, in parallel (the floor a fan-out
# over ssh can reach). Each timed mx command starts with no shared ssh
# connection open, as the floor does. Needs root. Prints medians and the ratio to the floor.
#
#   bench/lab_scale.sh [hosts]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
hosts=${1:-40}
net=90
lab=$(mktemp -d /tmp/mx-lab-scale.XXXXXX)
trap 'bash "$root/tests/lab/lab.sh" down $net $hosts "$lab"' EXIT
cargo build --release -q
mx=$PWD/target/x86_64-unknown-linux-gnu/release/mx
bash tests/lab/lab.sh up $net "$hosts" "$lab"
work=$(mktemp -d)
cd "$work"
cp "$lab/servers.txt" .
export MX_SSH="ssh -F $lab/ssh_config" MX_SCP="scp -F $lab/ssh_config"
"$mx" gen --pps 100 --peers 2 --seed 1 > /dev/null

seconds() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1 || true; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
floor() { xargs -P 64 -I{} ssh -F "$lab/ssh_config" {} true < <(cut -d= -f2 servers.txt); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# mx shares one ssh connection per host for 60 s (ControlPersist): close them
# before each timed command, so that it pays every handshake the floor does.
cold() { for s in /tmp/mx-ssh-"$(id -u)"/*; do [ -S "$s" ] && ssh -o ControlPath="$s" -O exit x 2>/dev/null; done; true; }

declare -a t_floor t_start t_status
for round in 1 2 3; do
    t_floor+=("$(seconds floor)")
    cold
    t_start+=("$(seconds "$mx" start --workers 1 --interval 1)")
    cold
    t_status+=("$(seconds "$mx" status)")
    "$mx" stop > /dev/null
done
"$mx" clean --yes > /dev/null
f=$(printf '%s\n' "${t_floor[@]}" | median)
s=$(printf '%s\n' "${t_start[@]}" | median)
q=$(printf '%s\n' "${t_status[@]}" | median)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $hosts lab hosts"
echo "| what | median of 3 | vs floor |"
echo "|---|---|---|"
echo "| floor: ssh true to every host, 64 in parallel | ${f}s | 1.00 |"
echo "| mx start (deploy 2 files + launch) | ${s}s | $(echo "scale=2; $s / $f" | bc) |"
echo "| mx status | ${q}s | $(echo "scale=2; $q / $f" | bc) |"
echo "rounds (s): floor ${t_floor[*]}; start ${t_start[*]} (the first copies the agent, later ones find it); status ${t_status[*]}"
