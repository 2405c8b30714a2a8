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

ns() { echo "mx${net}h$1"; }

# The shell that mounts the CPU cgroup controller inside a host's namespace:
# the v1 `cpu` hierarchy where this machine has one, else cgroup2.
cgroup_mounts() {
    if [ -d /sys/fs/cgroup/cpu ] && grep -q ' /sys/fs/cgroup/cpu cgroup ' /proc/mounts; then
        echo "mount -t tmpfs mxcg /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu || true"
    else
        echo "mount -t cgroup2 none /sys/fs/cgroup || true"
    fi
}

down() {
    for i in $(seq 1 "$hosts"); do
        local n
        n=$(ns "$i")
        if ip netns list | grep -qw "$n"; then
            # Killing every process of the host's namespaces (sshd is PID 1 of
            # its own PID namespace, so its agents go with it).
            for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
            ip netns del "$n" 2>/dev/null || true
        fi
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
    mkdir -p "$dir" /run/sshd
    dir=$(cd "$dir" && pwd -P)
    ssh-keygen -q -t ed25519 -N '' -f "$dir/id" -C mx-lab
    cp "$dir/id.pub" "$dir/authorized_keys"
    cat > "$dir/ssh_config" <<EOF
Host *
    User root
    IdentityFile $dir/id
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    BatchMode yes
    LogLevel ERROR
    ConnectTimeout 8
EOF
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
        mkdir -p "$d/vartmp"
        chmod 1777 "$d/vartmp"
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
        echo "$addr" > "$d/addr"
        ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
        cat > "$d/sshd_config" <<EOF
ListenAddress $listen
HostKey $d/host_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile none
StrictModes no
AuthorizedKeysFile $dir/authorized_keys
Subsystem sftp /usr/lib/openssh/sftp-server
MaxStartups 200:30:400
MaxSessions 200
EOF
        # Own hostname, own /var/tmp, own PID namespace (and /proc), then sshd.
        # `ip netns exec` mounts a fresh /sys, which hides the cgroup mounts:
        # the CPU controller is mounted again, so that an agent can read its
        # own cgroup's throttling (the starved-agent test puts it in one).
        ip netns exec "$n" unshare --mount --uts --pid --fork --mount-proc \
            sh -c "hostname $h; mount --bind '$d/vartmp' /var/tmp; $(cgroup_mounts); exec /usr/sbin/sshd -D -f '$d/sshd_config'" \
            > "$d/sshd.log" 2>&1 < /dev/null &
        echo "$h=$token" >> "$dir/servers.txt"
    done
    # Every sshd answers before we return, each within 20 s of the one
    # before: a host whose packets vanish (a route or a firewall of the
    # machine's own taking 198.18.0.0/15 or fd00::/8) fails here in seconds,
    # saying what the machine does with the address, rather than hanging each
    # test until its timeout. (One deadline for all of them failed a 40-host
    # lab at h28 on a VM losing a fifth of its vCPUs, where each ssh took
    # ~0.7 s: the deadline was spent before h28 was asked.)
    for i in $(seq 1 "$hosts"); do
        local ok=0 err="" addr deadline=$((SECONDS + 20))
        addr=$(cat "$dir/h$i/addr")
        while [ "$SECONDS" -lt "$deadline" ]; do
            if err=$(timeout 5 ssh -F "$dir/ssh_config" -o ConnectTimeout=2 "$addr" true 2>&1); then
                ok=1
                break
            fi
            sleep 0.1
        done
        if [ "$ok" != 1 ]; then
            {
                echo "lab: h$i's sshd ($addr) did not answer in 20 s: ${err:-ssh timed out}"
                echo "lab: its log:"
                cat "$dir/h$i/sshd.log"
                echo "lab: the route to it: $(ip route get "$addr" 2>&1)"
                echo "lab: policy rules: $(ip rule 2>&1 | tr '\n' ';')"
                echo "lab: nftables tables: $(nft list tables 2>&1 | tr '\n' ';')"
                echo "lab: listening in its namespace: $(ip netns exec "$(ns "$i")" ss -ltn 2>&1 | tr '\n' ';')"
            } >&2
            exit 1
        fi
    done
}

case "$cmd" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 up|down <net> <hosts> <dir>" >&2; exit 2 ;;
esac
