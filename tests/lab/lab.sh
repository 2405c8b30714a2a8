#!/usr/bin/env bash
# The test lab: N hosts on one machine, each a network namespace with its own
# sshd (Debian's openssh-server, key auth, root), its own /var/tmp, hostname
# and PID namespace (so one host's `mx stop` can never see another's agent),
# on a bridge in 198.18.<net>.0/24 (RFC 2544's benchmarking range), with a
# second interface per host on 198.19.<net>.0/24 for --bind. Needs root.
#
#   tests/lab/lab.sh up   <net 1-250> <hosts> <dir>   # prints nothing on success
#   tests/lab/lab.sh down <net> <hosts> <dir>
#
# <dir> receives the client's ssh_config and key, servers.txt (h<i>=<addr>)
# and per-host state. Host i is 198.18.<net>.<i>; the controller (this root
# namespace) is 198.18.<net>.254. Nothing outside <dir> and the namespaces,
# bridges and veths named mx<net>... is touched.
#
# With MX_LAB_IPV6=1, `up` builds the same lab over IPv6 as well: every
# interface also gets an address from fd00::/8 (host i: fd00:18:<net>::<i>
# on eth0 and fd00:19:<net>::<i> on eth1, /64; the controller fd00:18:<net>::fe
# and fd00:19:<net>::fe on the bridges), sshd listens on IPv6 alone
# (ListenAddress ::), and servers.txt holds h<i>=[fd00:18:<net>::<i>].
set -euo pipefail

cmd=${1:?up or down}
net=${2:?net}
hosts=${3:?hosts}
dir=${4:?dir}
br=mxbr$net
br2=mxbd$net
v6=${MX_LAB_IPV6:-0}

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lab/host.sh
. "$here/host.sh"

ns() { echo "mx${net}h$1"; }

down() {
    for i in $(seq 1 "$hosts"); do
        local n
        n=$(ns "$i")
        lab_kill_ns "$n"
        ip link del "mx${net}v$i" 2>/dev/null || true
        ip link del "mx${net}w$i" 2>/dev/null || true
    done
    # A fault a test put on the lab's bridge (tests/integration/lab_faults.rs).
    nft delete table bridge "mxfault$net" 2>/dev/null || true
    ip link del "$br" 2>/dev/null || true
    ip link del "$br2" 2>/dev/null || true
    rm -rf "$dir"
}

# The kernel's ARP and NDP tables are shared by every namespace and bounded
# by the root namespace's gc_thresh1/2/3 (128, 512, 1024 by default): past
# about 100 hosts new neighbours are never resolved ("neighbor table
# overflow"), and their datagrams read as lost. Raised, never lowered.
raise_neighbour_tables() {
    local family key want have
    for family in ipv4 ipv6; do
        for key in gc_thresh1:4096 gc_thresh2:16384 gc_thresh3:32768; do
            want=${key#*:}
            have=$(sysctl -n "net.$family.neigh.default.${key%%:*}")
            [ "$have" -ge "$want" ] || sysctl -q -w "net.$family.neigh.default.${key%%:*}=$want"
        done
    done
}

up() {
    down
    [ "$hosts" -le 60 ] || raise_neighbour_tables
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd -P)
    lab_keys "$dir"
    ip link add "$br" type bridge
    ip addr add "198.18.$net.254/24" dev "$br"
    ip link set "$br" up
    ip link add "$br2" type bridge
    ip addr add "198.19.$net.254/24" dev "$br2"
    ip link set "$br2" up
    if [ "$v6" = 1 ]; then
        # nodad: usable at once, not after duplicate address detection.
        ip addr add "fd00:18:$net::fe/64" dev "$br" nodad
        ip addr add "fd00:19:$net::fe/64" dev "$br2" nodad
    fi
    : > "$dir/servers.txt"
    for i in $(seq 1 "$hosts"); do
        local n h d
        n=$(ns "$i")
        h="h$i"
        d="$dir/$h"
        ip netns add "$n"
        ip link add "mx${net}v$i" type veth peer name eth0 netns "$n"
        ip link set "mx${net}v$i" master "$br" up
        ip link add "mx${net}w$i" type veth peer name eth1 netns "$n"
        ip link set "mx${net}w$i" master "$br2" up
        ip -n "$n" link set lo up
        ip -n "$n" addr add "198.18.$net.$i/24" dev eth0
        ip -n "$n" link set eth0 up
        ip -n "$n" addr add "198.19.$net.$i/24" dev eth1
        ip -n "$n" link set eth1 up
        local listen=0.0.0.0 addr="198.18.$net.$i" token="198.18.$net.$i"
        if [ "$v6" = 1 ]; then
            ip -n "$n" addr add "fd00:18:$net::$i/64" dev eth0 nodad
            ip -n "$n" addr add "fd00:19:$net::$i/64" dev eth1 nodad
            listen=:: addr="fd00:18:$net::$i" token="[fd00:18:$net::$i]"
        fi
        lab_sshd "$dir" "$h" "$n" "$listen"
        echo "$addr" > "$d/addr"
        echo "$h=$token" >> "$dir/servers.txt"
    done
    # Every sshd answers before we return, each within its own 20 s.
    for i in $(seq 1 "$hosts"); do
        lab_wait_ssh "$dir" "h$i" "$(cat "$dir/h$i/addr")" "$(ns "$i")"
    done
}

case "$cmd" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 up|down <net> <hosts> <dir>" >&2; exit 2 ;;
esac
