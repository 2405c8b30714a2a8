#!/usr/bin/env bash
# A leaf-spine fabric on one machine: two leaves and two spines, each a
# network namespace routing with ECMP on the 5-tuple (as a switch hashes),
# and hosts behind each leaf with their own sshd (tests/lab/host.sh, as the
# flat lab's). Needs root.
#
#   tests/lab/fabric.sh up    <net 1-250> <hosts per leaf 1-61> <dir>
#   tests/lab/fabric.sh down  <net> <hosts per leaf> <dir>
#   tests/lab/fabric.sh drop  <dir> <router> <interface> in|out <pct>
#   tests/lab/fabric.sh heal  <dir>
#   tests/lab/fabric.sh links <dir>
#   tests/lab/fabric.sh shortcut <dir> up|down
#
#                 s1                 s2            spines
#        s1-l1 /     \ s1-l2  s2-l1 /     \ s2-l2
#        l1-s1         l2-s1  l1-s2         l2-s2
#                 l1                 l2            leaves
#            h1 .. hK             hK+1 .. h2K      hosts
#
# Every link is a veth pair named by its two ends (`l1-s2` on l1 faces s2);
# a fault goes on one directed link: `drop <dir> s2 s2-l1 in 10` drops 10%
# of what s2 receives from l1 (an nft rule on that interface, in the
# prerouting hook: as a bad cable drops, before any routing), `out` what it
# sends by it (postrouting). `heal` takes every fault away.
#
# `shortcut up` joins the leaves by a link of their own (`l1-l2`, /31 at
# .136), its routes to the other leaf's hosts more specific (two /27s)
# than the spines' /26: what crosses between the leaves takes it, one
# router fewer. `shortcut down` takes both its ends down, as a cut cable
# does: the kernel drops the routes by it, and the traffic goes back over
# the spines (a route change, one router longer).
#
# Addresses, all in 198.18.<net>.0/24 (RFC 2544's benchmarking range):
# l1's hosts 198.18.<net>.1-K (/26, l1 at .62), l2's 198.18.<net>.65-(64+K)
# (/26, l2 at .126), the four links /31s from 198.18.<net>.128. Each host
# also has a management interface on 198.19.<net>.0/24, where this (the
# root) namespace is .254: ssh goes that way, and the traffic through the
# fabric. <dir> gets servers.txt (h<i>=<fabric address>) and an ssh_config
# that takes each fabric address to the host's management address.
#
# Each router: forwarding on; fib_multipath_hash_policy 3 with fields
# 0x0037 (addresses, protocol, ports: a flow's 5-tuple always takes one
# path, as in a switch; policy 1 would follow each socket's random hash);
# ICMP errors from the interface the packet came in by (a TTL sweep then
# names the link), and never rate-limited (icmp_ratemask 0: neither the
# per-destination limit nor the global one; the hosts' either).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lab/host.sh
. "$here/host.sh"

cmd=${1:?up, down, drop, heal, links or shortcut}

router() { echo "mx${net}$1"; }
host_ns() { echo "mx${net}h$1"; }
mgmt_br() { echo "mxfm$net"; }
ROUTERS="l1 l2 s1 s2"
# Each link: its two ends and its /31's offset past .128.
LINKS="l1:s1:0 l1:s2:2 l2:s1:4 l2:s2:6"

down() {
    local r i
    for i in $(seq 1 $((2 * per_leaf))); do
        lab_kill_ns "$(host_ns "$i")"
        ip link del "mxf${net}m$i" 2>/dev/null || true
    done
    for r in $ROUTERS; do lab_kill_ns "$(router "$r")"; done
    ip link del "$(mgmt_br)" 2>/dev/null || true
    rm -rf "$dir"
}

router_up() {
    local n
    n=$(router "$1")
    ip netns add "$n"
    ip -n "$n" link set lo up
    for key in net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=3 \
        net.ipv4.fib_multipath_hash_fields=0x0037 \
        net.ipv4.icmp_errors_use_inbound_ifaddr=1 net.ipv4.icmp_ratelimit=0 \
        net.ipv4.icmp_ratemask=0; do
        ip netns exec "$n" sysctl -q -w "$key"
    done
}

up() {
    down
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd -P)
    echo "$net" > "$dir/net"
    echo "$per_leaf" > "$dir/per_leaf"
    lab_keys "$dir"
    local p="198.18.$net" m="198.19.$net" r link a b off
    for r in $ROUTERS; do router_up "$r"; done
    for link in $LINKS; do
        IFS=: read -r a b off <<<"$link"
        ip link add "$a-$b" netns "$(router "$a")" type veth peer name "$b-$a" netns "$(router "$b")"
        ip -n "$(router "$a")" addr add "$p.$((128 + off))/31" dev "$a-$b"
        ip -n "$(router "$b")" addr add "$p.$((129 + off))/31" dev "$b-$a"
        ip -n "$(router "$a")" link set "$a-$b" up
        ip -n "$(router "$b")" link set "$b-$a" up
    done
    # Each leaf's hosts on a bridge in the leaf; each leaf reaches the
    # other's hosts over both spines (ECMP); each spine reaches each leaf's
    # hosts over its one link to it.
    ip -n "$(router l1)" link add hosts type bridge
    ip -n "$(router l1)" addr add "$p.62/26" dev hosts
    ip -n "$(router l1)" link set hosts up
    ip -n "$(router l2)" link add hosts type bridge
    ip -n "$(router l2)" addr add "$p.126/26" dev hosts
    ip -n "$(router l2)" link set hosts up
    ip -n "$(router l1)" route add "$p.64/26" nexthop via "$p.129" nexthop via "$p.131"
    ip -n "$(router l2)" route add "$p.0/26" nexthop via "$p.133" nexthop via "$p.135"
    ip -n "$(router s1)" route add "$p.0/26" via "$p.128"
    ip -n "$(router s1)" route add "$p.64/26" via "$p.132"
    ip -n "$(router s2)" route add "$p.0/26" via "$p.130"
    ip -n "$(router s2)" route add "$p.64/26" via "$p.134"
    # The management network: a bridge here, an interface on every host.
    ip link add "$(mgmt_br)" type bridge
    ip addr add "$m.254/24" dev "$(mgmt_br)"
    ip link set "$(mgmt_br)" up
    : > "$dir/servers.txt"
    local i leaf addr gw n
    for i in $(seq 1 $((2 * per_leaf))); do
        if [ "$i" -le "$per_leaf" ]; then
            leaf=l1 addr="$p.$i" gw="$p.62"
        else
            leaf=l2 addr="$p.$((64 + i - per_leaf))" gw="$p.126"
        fi
        n=$(host_ns "$i")
        ip netns add "$n"
        ip -n "$n" link set lo up
        ip netns exec "$n" sysctl -q -w net.ipv4.icmp_ratelimit=0 net.ipv4.icmp_ratemask=0
        ip link add eth0 netns "$n" type veth peer name "$leaf-h$i" netns "$(router "$leaf")"
        ip -n "$(router "$leaf")" link set "$leaf-h$i" master hosts up
        ip -n "$n" addr add "$addr/26" dev eth0
        ip -n "$n" link set eth0 up
        ip -n "$n" route add default via "$gw"
        ip link add "mxf${net}m$i" type veth peer name eth1 netns "$n"
        ip link set "mxf${net}m$i" master "$(mgmt_br)" up
        ip -n "$n" addr add "$m.$i/24" dev eth1
        ip -n "$n" link set eth1 up
        lab_sshd "$dir" "h$i" "$n" 0.0.0.0
        echo "$addr" > "$dir/h$i/addr"
        printf 'Host %s\n    HostName %s\n' "$addr" "$m.$i" >> "$dir/ssh_config"
        echo "h$i=$addr" >> "$dir/servers.txt"
    done
    for i in $(seq 1 $((2 * per_leaf))); do
        lab_wait_ssh "$dir" "h$i" "$(cat "$dir/h$i/addr")" "$(host_ns "$i")"
    done
}

# The nft table of faults in router `r`.
FAULTS=mxfabric

drop() {
    local r=${1:?router} ifname=${2:?interface} way=${3:?in or out} pct=${4:?pct}
    case " $ROUTERS " in *" $r "*) ;; *) echo "fabric: no router '$r' (routers: $ROUTERS)" >&2; exit 2 ;; esac
    ip -n "$(router "$r")" link show "$ifname" > /dev/null 2>&1 || {
        echo "fabric: $r has no interface '$ifname' (fabric.sh links $dir)" >&2
        exit 2
    }
    # At the port, as a bad cable or optic drops: what comes in by it before
    # the router routes it (prerouting: probes that expire here too), what
    # goes out by it after (postrouting: the router's own ICMP too).
    local match hook share
    case $way in
        in) match=iifname hook=prerouting ;;
        out) match=oifname hook=postrouting ;;
        *) echo "fabric: in or out, not '$way'" >&2; exit 2 ;;
    esac
    # In hundredths of a percent (0.5 is 50 in 10,000); all of it is a plain
    # drop (nft holds the constant to the range numgen draws from).
    share=$(awk -v p="$pct" 'BEGIN { if (p !~ /^[0-9]+([.][0-9]+)?$/ || p > 100) exit 1; printf "%d", p * 100 }') || {
        echo "fabric: a share from 0 to 100, not '$pct'" >&2
        exit 2
    }
    local rule="numgen random mod 10000 < $share drop"
    [ "$share" -lt 10000 ] || rule=drop
    ip netns exec "$(router "$r")" nft -f - <<EOF
table inet $FAULTS {
    chain $hook {
        type filter hook $hook priority 0;
        $match "$ifname" $rule
    }
}
EOF
}

heal() {
    local r
    for r in $ROUTERS; do
        ip netns exec "$(router "$r")" nft delete table inet "$FAULTS" 2>/dev/null || true
    done
}

links() {
    local r
    for r in $ROUTERS; do
        echo "$r: $(ip -n "$(router "$r")" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -v '^lo$' | tr '\n' ' ')"
    done
}

shortcut() {
    local way=${1:?up or down} p="198.18.$net" l1 l2
    l1=$(router l1) l2=$(router l2)
    case $way in
        up)
            if ! ip -n "$l1" link show l1-l2 > /dev/null 2>&1; then
                ip link add l1-l2 netns "$l1" type veth peer name l2-l1 netns "$l2"
                ip -n "$l1" addr add "$p.136/31" dev l1-l2
                ip -n "$l2" addr add "$p.137/31" dev l2-l1
            fi
            ip -n "$l1" link set l1-l2 up
            ip -n "$l2" link set l2-l1 up
            local half
            for half in 64 96; do
                ip -n "$l1" route replace "$p.$half/27" via "$p.137" dev l1-l2
            done
            for half in 0 32; do
                ip -n "$l2" route replace "$p.$half/27" via "$p.136" dev l2-l1
            done
            ;;
        down)
            ip -n "$l1" link set l1-l2 down
            ip -n "$l2" link set l2-l1 down
            ;;
        *) echo "fabric: shortcut up or down, not '$way'" >&2; exit 2 ;;
    esac
}

usage() {
    sed -n '7,12p' "$0" | sed 's/^# *//' >&2
    exit 2
}

case "$cmd" in
    up | down)
        net=${2:?net} per_leaf=${3:?hosts per leaf} dir=${4:?dir}
        [ "$per_leaf" -ge 1 ] && [ "$per_leaf" -le 61 ] || usage
        "$cmd"
        ;;
    drop | heal | links | shortcut)
        dir=${2:?dir}
        net=$(cat "$dir/net") per_leaf=$(cat "$dir/per_leaf")
        shift 2
        "$cmd" "$@"
        ;;
    *) usage ;;
esac
