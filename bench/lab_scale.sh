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
cold() { for s in /tmp/mx-ssh-"$(id -u)"/*; do [ -S "$s" ] && { ssh -o ControlPath="$s" -O exit x 2>/dev/null || true; }; done; true; }

commands=(start status stop collect summarize clean)
declare -A took
for round in $(seq "$rounds"); do
    took[floor]+="$(seconds floor) "
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
f=$(tr ' ' '\n' <<<"${took[floor]}" | grep . | median)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $hosts lab hosts, $rounds rounds"
echo "| what | median | vs floor |"
echo "|---|---|---|"
echo "| floor: ssh true to every host, 64 in parallel | ${f} s | 1.00 |"
for c in "${commands[@]}"; do
    m=$(tr ' ' '\n' <<<"${took[$c]}" | grep . | median)
    echo "| mx $c | ${m} s | $(echo "scale=2; $m / $f" | bc) |"
done
for what in floor "${commands[@]}"; do echo "rounds (s) $what: ${took[$what]}"; done
