# shellcheck shell=bash
# What the labs' hosts share (sourced by lab.sh and fabric.sh): the
# client's key and ssh_config, a host's sshd in its network namespace with
# its own hostname, /var/tmp and PID namespace, the wait for it to answer,
# and taking a namespace down. Needs root.

# The shell that mounts the CPU cgroup controller inside a host's namespace:
# the v1 `cpu` hierarchy where this machine has one, else cgroup2.
cgroup_mounts() {
    if [ -d /sys/fs/cgroup/cpu ] && grep -q ' /sys/fs/cgroup/cpu cgroup ' /proc/mounts; then
        echo "mount -t tmpfs mxcg /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu || true"
    else
        echo "mount -t cgroup2 none /sys/fs/cgroup || true"
    fi
}

# Kills every process of namespace `$1` and deletes it (sshd is PID 1 of
# its own PID namespace, so a host's agents go with it).
lab_kill_ns() {
    local n=$1 pid
    if ip netns list | grep -qw "$n"; then
        for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$n" 2>/dev/null || true
    fi
}

# The client's key (also the hosts' authorized key) and ssh_config in `$1`.
lab_keys() {
    local dir=$1
    mkdir -p /run/sshd
    ssh-keygen -q -t ed25519 -N '' -f "$dir/id" -C mx-lab
    cp "$dir/id.pub" "$dir/authorized_keys"
    printf '%s\n' \
        "Host *" \
        "    User root" \
        "    IdentityFile $dir/id" \
        "    IdentitiesOnly yes" \
        "    StrictHostKeyChecking no" \
        "    UserKnownHostsFile /dev/null" \
        "    BatchMode yes" \
        "    LogLevel ERROR" \
        "    ConnectTimeout 8" > "$dir/ssh_config"
}

# Starts host `$2`'s sshd (state in `$1/$2`) in namespace `$3`, listening on
# `$4`: its own hostname, /var/tmp, PID namespace (and /proc). With
# MX_LAB_OWN_HOME=1 (the benches), also its own home for root, as a fresh
# server has (/etc/skel's files): the machine's /root is this controller's,
# and its shell start-up files (a pyenv's, say) are neither a fleet's
# logins nor safe to share between hosts that log in at once (a rehash lock
# held by one host made the next wait a minute). The tests keep the shared
# /root: the timings of their injected faults were set against its logins.
lab_sshd() {
    local dir=$1 h=$2 n=$3 listen=$4 d="$1/$2" home=""
    mkdir -p "$d/vartmp"
    chmod 1777 "$d/vartmp"
    if [ "${MX_LAB_OWN_HOME:-0}" = 1 ]; then
        mkdir -p "$d/home"
        chmod 700 "$d/home"
        cp /etc/skel/.bashrc /etc/skel/.profile "$d/home/" 2>/dev/null || true
        home="mount --bind '$d/home' /root;"
    fi
    ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
    printf '%s\n' \
        "ListenAddress $listen" \
        "HostKey $d/host_key" \
        "PermitRootLogin prohibit-password" \
        "PasswordAuthentication no" \
        "KbdInteractiveAuthentication no" \
        "UsePAM no" \
        "PidFile none" \
        "StrictModes no" \
        "AuthorizedKeysFile $dir/authorized_keys" \
        "Subsystem sftp /usr/lib/openssh/sftp-server" \
        "MaxStartups 200:30:400" \
        "MaxSessions 200" > "$d/sshd_config"
    # `ip netns exec` mounts a fresh /sys, which hides the cgroup mounts:
    # the CPU controller is mounted again, so that an agent can read its
    # own cgroup's throttling (the starved-agent test puts it in one).
    ip netns exec "$n" unshare --mount --uts --pid --fork --mount-proc \
        sh -c "hostname $h; mount --bind '$d/vartmp' /var/tmp; $home $(cgroup_mounts); exec /usr/sbin/sshd -D -f '$d/sshd_config'" \
        > "$d/sshd.log" 2>&1 < /dev/null &
}

# Waits up to 20 s for host `$2`'s sshd to answer at `$3` (through
# `$1/ssh_config`); exits saying why when it does not. `$4`: its namespace.
# A host whose packets vanish (a route or a firewall of the machine's own
# taking 198.18.0.0/15 or fd00::/8) fails here in seconds, saying what the
# machine does with the address, rather than hanging each test until its
# timeout. (One deadline for all of a lab's hosts failed a 40-host lab at
# h28 on a VM losing a fifth of its vCPUs: each host gets its own.)
lab_wait_ssh() {
    local dir=$1 h=$2 addr=$3 n=$4 err="" deadline=$((SECONDS + 20))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if err=$(timeout 5 ssh -F "$dir/ssh_config" -o ConnectTimeout=2 "$addr" true 2>&1); then
            return 0
        fi
        sleep 0.1
    done
    {
        echo "lab: $h's sshd ($addr) did not answer in 20 s: ${err:-ssh timed out}"
        echo "lab: its log:"
        cat "$dir/$h/sshd.log"
        echo "lab: the route to it: $(ip route get "$addr" 2>&1)"
        echo "lab: policy rules: $(ip rule 2>&1 | tr '\n' ';')"
        echo "lab: nftables tables: $(nft list tables 2>&1 | tr '\n' ';')"
        echo "lab: listening in its namespace: $(ip netns exec "$n" ss -ltn 2>&1 | tr '\n' ';')"
    } >&2
    exit 1
}
