//! What the host's kernel counted this interval about packets that never
//! reached the agent, and about the agent not getting the CPU: the evidence
//! that tells a loss in this host from a loss on the wire.
//!
//! - UDP `RcvbufErrors`, `InErrors` and `NoPorts` from /proc/net/snmp and
//!   /proc/net/snmp6 (per network namespace, so per host in the lab): a
//!   datagram dropped because a socket's buffer was full, or sent to a port
//!   nobody listened on;
//! - UDP `SndbufErrors`: a datagram the kernel dropped on its way out (a
//!   qdisc that was full, a rate cap's queue, no buffer): the application's
//!   send succeeded, and the packet never left;
//! - the interface that carries the traffic, from its line of
//!   /proc/net/dev (one consistent read of all its counters): packets and bytes it sent and received,
//!   and its drops. What left the host is what it sent; what the agent handed
//!   the kernel beside it tells a loss in the host's transmit path, and what
//!   it received beside what the agent read, one in its receive path. Its rx
//!   drops (where the interface is not known: the rx `drop` column of
//!   /proc/net/dev summed over every interface) are what the NIC or its
//!   driver dropped before the stack saw them;
//! - the kernel's neighbour tables (ARP and NDP, [`crate::neigh_table`]):
//!   the times one was full, and the resolutions that got no answer. A
//!   host that cannot resolve its peers drops what it sends them, counted
//!   in UDP `SndbufErrors` as a full qdisc's drops are;
//! - the agent's own cgroup's CPU throttling (cgroup v2 `cpu.stat`
//!   `throttled_usec`, or v1 `throttled_time`): time the agent was ready to
//!   run and held off by a CPU quota.
//!
//! Sampled by the reporter at each tick (the instant an interval ends), so
//! that an interval's counts cover the same time as its rows, whose packets
//! are counted by when they were sent: sampled when the rows are written,
//! half an interval later, a run's last interval read mid-run would count
//! half an interval more than its agent did. Each figure is the increase
//! since the previous sample, `None` (a blank cell) where it cannot be read.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::neigh_table::NeighTable;

/// The statistics of one interface (cumulative, as the kernel keeps them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NicTotals {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_dropped: u64,
    pub rx_dropped: u64,
}

impl NicTotals {
    /// Reads `name`'s line of /proc/net/dev; `None` when the interface is
    /// gone or its counters cannot be read.
    ///
    /// One read of /proc/net/dev takes every counter of an interface from one
    /// call into the driver, so they agree with each other: read file by file
    /// from /sys/class/net/<if>/statistics, each counter is a separate call,
    /// and on a busy interface the packets sent between two reads are in one
    /// counter and not the other (loopback, whose driver reports one count as
    /// both sent and received, read 3801 sent and 3805 received). It is also
    /// the namespace of this process, where /sys shows the one it was mounted
    /// in.
    fn read(name: &str) -> Option<NicTotals> {
        Self::from_proc_net_dev(&read("/proc/net/dev"), name)
    }

    /// The counters of `name` in a /proc/net/dev text. Its columns are the
    /// receive side (bytes packets errs drop fifo frame compressed multicast)
    /// then the transmit side (bytes packets errs drop fifo colls carrier
    /// compressed); the rx drop column is the driver's drops and its misses.
    fn from_proc_net_dev(dev: &str, name: &str) -> Option<NicTotals> {
        let counters = dev.lines().find_map(|line| {
            let (interface, counters) = line.split_once(':')?;
            (interface.trim() == name).then_some(counters)
        })?;
        let mut column = [0u64; 16];
        let mut values = counters.split_whitespace();
        for slot in &mut column {
            *slot = values.next()?.parse().ok()?;
        }
        Some(NicTotals {
            rx_bytes: column[0],
            rx_packets: column[1],
            rx_dropped: column[3],
            tx_bytes: column[8],
            tx_packets: column[9],
            tx_dropped: column[11],
        })
    }

    /// The increase since `then`: `None` where a counter went backwards (the
    /// interface was replaced, or a 32-bit counter wrapped).
    fn since(&self, then: &NicTotals) -> Option<NicTotals> {
        Some(NicTotals {
            tx_packets: self.tx_packets.checked_sub(then.tx_packets)?,
            tx_bytes: self.tx_bytes.checked_sub(then.tx_bytes)?,
            rx_packets: self.rx_packets.checked_sub(then.rx_packets)?,
            rx_bytes: self.rx_bytes.checked_sub(then.rx_bytes)?,
            tx_dropped: self.tx_dropped.checked_sub(then.tx_dropped)?,
            rx_dropped: self.rx_dropped.checked_sub(then.rx_dropped)?,
        })
    }
}

/// One sample of the cumulative counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Totals {
    rcvbuf_errors: Option<u64>,
    sndbuf_errors: Option<u64>,
    in_errors: Option<u64>,
    no_ports: Option<u64>,
    nic_rx_drops: Option<u64>,
    nic: Option<NicTotals>,
    neigh: Option<NeighTotals>,
    throttled_us: Option<u64>,
    /// The cpu.stat the throttling was read from: a change of cgroup makes
    /// the next increase meaningless.
    cgroup: Option<PathBuf>,
}

/// The neighbour tables' counters, both families added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct NeighTotals {
    table_fulls: u64,
    res_failed: u64,
}

impl NeighTotals {
    /// Both tables, where rtnetlink answers for at least one.
    fn read() -> Option<NeighTotals> {
        let tables = [libc::AF_INET, libc::AF_INET6].map(NeighTable::read);
        tables.iter().any(Option::is_some).then(|| {
            tables
                .iter()
                .flatten()
                .fold(NeighTotals::default(), |sum, t| NeighTotals {
                    table_fulls: sum.table_fulls + t.table_fulls,
                    res_failed: sum.res_failed + t.res_failed,
                })
        })
    }
}

/// The increase of each counter over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct HostDelta {
    pub rcvbuf_errors: Option<u64>,
    pub sndbuf_errors: Option<u64>,
    pub in_errors: Option<u64>,
    pub no_ports: Option<u64>,
    pub nic_rx_drops: Option<u64>,
    /// The traffic's interface over the interval (`None`: not known, or
    /// its counters could not be read).
    pub nic: Option<NicTotals>,
    /// Milliseconds the agent's cgroup was throttled.
    pub throttled_ms: Option<f64>,
    /// The neighbour tables: times full, resolutions failed.
    pub neigh_table_fulls: Option<u64>,
    pub neigh_res_failed: Option<u64>,
}

/// Adds the named fields of the `Udp:` table of /proc/net/snmp (a header line
/// of names, then a line of values) and the `Udp6<Name>` lines of snmp6.
fn udp_counter(snmp: &str, snmp6: &str, name: &str) -> Option<u64> {
    let mut lines = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let v4 = match (lines.next(), lines.next()) {
        (Some(names), Some(values)) => names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.parse::<u64>().ok()),
        _ => None,
    };
    let key = format!("Udp6{name}");
    let v6 = snmp6.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some(key.as_str())).then(|| words.next()?.parse::<u64>().ok())?
    });
    match (v4, v6) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

/// The rx `drop` column of /proc/net/dev, summed over every interface.
fn nic_rx_drops(dev: &str) -> Option<u64> {
    let mut total = None;
    for line in dev.lines() {
        let Some((_, counters)) = line.split_once(':') else {
            continue;
        };
        // rx: bytes packets errs drop ...
        if let Some(drop) = counters
            .split_whitespace()
            .nth(3)
            .and_then(|v| v.parse::<u64>().ok())
        {
            total = Some(total.unwrap_or(0) + drop);
        }
    }
    total
}

/// The cpu.stat files this process's cgroup may have, most likely first: the
/// v1 hierarchy that holds the `cpu` controller, then v2 (`0::/path`), at
/// /sys/fs/cgroup itself or (hybrid layouts) at /sys/fs/cgroup/unified.
fn cpu_stat_paths(proc_cgroup: &str) -> Vec<PathBuf> {
    let mut v1 = Vec::new();
    let mut v2 = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2.push(PathBuf::from(format!("/sys/fs/cgroup{path}/cpu.stat")));
            v2.push(PathBuf::from(format!(
                "/sys/fs/cgroup/unified{path}/cpu.stat"
            )));
        } else if controllers.split(',').any(|c| c == "cpu") {
            v1.push(PathBuf::from(format!(
                "/sys/fs/cgroup/{controllers}{path}/cpu.stat"
            )));
        }
    }
    v1.extend(v2);
    v1
}

/// Throttled time from a cpu.stat text, in microseconds.
fn throttled_us(cpu_stat: &str) -> Option<u64> {
    cpu_stat.lines().find_map(|l| {
        let (key, value) = l.split_once(' ')?;
        let value = value.trim().parse::<u64>().ok()?;
        match key {
            "throttled_usec" => Some(value),
            "throttled_time" => Some(value / 1000),
            _ => None,
        }
    })
}

/// Keeps the previous sample to take increases against, and the samples
/// taken at ticks whose rows are not written yet.
#[derive(Debug, Default)]
pub(crate) struct HostCounters {
    /// The interface that carries the traffic, when known.
    interface: Option<String>,
    last: Totals,
    /// Samples taken at tick instants, by the tick's key (its label in ms).
    at_ticks: BTreeMap<i64, Totals>,
}

/// Samples held for ticks not written yet, at most: a reporter that is
/// this far behind has lost the alignment anyway.
const HELD_TICKS: usize = 64;

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl HostCounters {
    /// Takes the first sample (the baseline of the first interval);
    /// `interface` carries the traffic (`None`: not known).
    pub fn start(interface: Option<String>) -> HostCounters {
        let last = Self::totals(interface.as_deref());
        HostCounters {
            interface,
            last,
            at_ticks: BTreeMap::new(),
        }
    }

    /// Takes the baseline now: the flows begin, and the first interval's
    /// increase counts from here.
    pub(crate) fn rebase(&mut self) {
        self.last = Self::totals(self.interface.as_deref());
        self.at_ticks.clear();
    }

    /// Samples the counters now, the instant of the tick whose key is `tick`.
    pub fn mark(&mut self, tick: i64) {
        if self.at_ticks.len() >= HELD_TICKS {
            self.at_ticks.pop_first();
        }
        let now = Self::totals(self.interface.as_deref());
        self.at_ticks.insert(tick, now);
    }

    /// The interface whose counters the host row carries.
    pub fn interface(&self) -> Option<&str> {
        self.interface.as_deref()
    }

    /// The throttling counter of the cgroup this process is in now (it may be
    /// moved into one mid-run), from the first cpu.stat that holds one.
    fn throttled() -> Option<(PathBuf, u64)> {
        cpu_stat_paths(&read("/proc/self/cgroup"))
            .into_iter()
            .find_map(|p| {
                let us = throttled_us(&std::fs::read_to_string(&p).ok()?)?;
                Some((p, us))
            })
    }

    fn totals(interface: Option<&str>) -> Totals {
        let (snmp, snmp6) = (read("/proc/net/snmp"), read("/proc/net/snmp6"));
        let throttled = Self::throttled();
        let nic = interface.and_then(NicTotals::read);
        Totals {
            rcvbuf_errors: udp_counter(&snmp, &snmp6, "RcvbufErrors"),
            sndbuf_errors: udp_counter(&snmp, &snmp6, "SndbufErrors"),
            in_errors: udp_counter(&snmp, &snmp6, "InErrors"),
            no_ports: udp_counter(&snmp, &snmp6, "NoPorts"),
            nic_rx_drops: match nic {
                Some(n) => Some(n.rx_dropped),
                None => nic_rx_drops(&read("/proc/net/dev")),
            },
            nic,
            neigh: NeighTotals::read(),
            throttled_us: throttled.as_ref().map(|t| t.1),
            cgroup: throttled.map(|t| t.0),
        }
    }

    /// The increases over the interval that ends at tick `tick`: from the
    /// previous sample to the one taken at the tick (now, when none was).
    pub fn sample(&mut self, tick: i64) -> HostDelta {
        let now = self
            .at_ticks
            .remove(&tick)
            .unwrap_or_else(|| Self::totals(self.interface.as_deref()));
        self.at_ticks.retain(|&t, _| t > tick);
        let then = std::mem::replace(&mut self.last, now.clone());
        let delta = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        HostDelta {
            rcvbuf_errors: delta(now.rcvbuf_errors, then.rcvbuf_errors),
            sndbuf_errors: delta(now.sndbuf_errors, then.sndbuf_errors),
            in_errors: delta(now.in_errors, then.in_errors),
            no_ports: delta(now.no_ports, then.no_ports),
            nic_rx_drops: delta(now.nic_rx_drops, then.nic_rx_drops),
            nic: now.nic.zip(then.nic).and_then(|(n, t)| n.since(&t)),
            throttled_ms: (now.cgroup == then.cgroup)
                .then(|| delta(now.throttled_us, then.throttled_us))
                .flatten()
                .map(|us| us as f64 / 1000.0),
            neigh_table_fulls: delta(
                now.neigh.map(|n| n.table_fulls),
                then.neigh.map(|n| n.table_fulls),
            ),
            neigh_res_failed: delta(
                now.neigh.map(|n| n.res_failed),
                then.neigh.map(|n| n.res_failed),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
        Udp: 1000 7 12 990 11 0 0 0 0\n\
        UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
        UdpLite: 0 0 0 0 0 0 0 0 0\n";
    const SNMP6: &str = "Udp6InDatagrams                 \t50\nUdp6NoPorts \t1\nUdp6InErrors\t3\nUdp6RcvbufErrors\t2\n";

    #[test]
    fn udp_counters_add_both_families() {
        assert_eq!(udp_counter(SNMP, SNMP6, "RcvbufErrors"), Some(13));
        assert_eq!(udp_counter(SNMP, SNMP6, "InErrors"), Some(15));
        assert_eq!(udp_counter(SNMP, "", "NoPorts"), Some(7));
        assert_eq!(udp_counter("", "", "NoPorts"), None);
    }

    #[test]
    fn an_interfaces_counters_are_read_and_taken_as_increases() {
        let lo = NicTotals::read("lo").expect("every Linux has lo");
        let later = NicTotals {
            tx_packets: lo.tx_packets + 10,
            tx_bytes: lo.tx_bytes + 640,
            ..lo
        };
        let delta = later.since(&lo).unwrap();
        assert_eq!(
            (delta.tx_packets, delta.tx_bytes, delta.rx_packets),
            (10, 640, 0)
        );
        // A counter that went back (the interface was replaced): no figure.
        assert_eq!(lo.since(&later), None);
        assert_eq!(NicTotals::read("no-such-nic0"), None);
    }

    /// /proc/net/dev as the kernel writes it: two header lines, then a line
    /// an interface (eth0 dropped 17 packets received and 5 sent).
    const PROC_NET_DEV: &str = "Inter-|   Receive                                                |  Transmit\n \
        face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
        lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\n  \
        eth0: 52000 400 1 17 0 0 0 0 9000 80 0 5 0 0 0 0\n";

    #[test]
    fn an_interfaces_counters_are_its_line_of_proc_net_dev() {
        assert_eq!(
            NicTotals::from_proc_net_dev(PROC_NET_DEV, "eth0"),
            Some(NicTotals {
                rx_bytes: 52000,
                rx_packets: 400,
                rx_dropped: 17,
                tx_bytes: 9000,
                tx_packets: 80,
                tx_dropped: 5,
            })
        );
        // "eth" is not "eth0", and a line cut short gives no figure.
        assert_eq!(NicTotals::from_proc_net_dev(PROC_NET_DEV, "eth"), None);
        assert_eq!(NicTotals::from_proc_net_dev("lo: 1 2 3\n", "lo"), None);
    }

    /// Loopback's driver counts each packet once and reports the count as
    /// both sent and received: read in one piece, the two agree exactly
    /// while packets cross it, which counters read one by one do not.
    #[test]
    fn a_busy_interfaces_counters_are_read_at_one_instant() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = sink.local_addr().unwrap();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let sender = {
            let done = done.clone();
            std::thread::spawn(move || {
                let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                sink.set_nonblocking(true).unwrap();
                let mut buf = [0u8; 64];
                let mut sent = 0u64;
                while !done.load(Ordering::Relaxed) {
                    if socket.send_to(&[0u8; 32], to).is_ok() {
                        sent += 1;
                    }
                    while sink.recv_from(&mut buf).is_ok() {}
                }
                sent
            })
        };
        let reads: Vec<NicTotals> = (0..300)
            .map(|_| NicTotals::read("lo").expect("every Linux has lo"))
            .collect();
        done.store(true, Ordering::Relaxed);
        let sent = sender.join().unwrap();
        assert!(sent > 0);
        // The packets crossed lo while it was read (at least some of them).
        assert!(reads.last().unwrap().tx_packets > reads[0].tx_packets);
        for r in &reads {
            assert_eq!((r.tx_packets, r.tx_bytes), (r.rx_packets, r.rx_bytes));
        }
    }

    #[test]
    fn nic_drops_are_the_rx_drop_column() {
        assert_eq!(nic_rx_drops(PROC_NET_DEV), Some(17));
        assert_eq!(nic_rx_drops(""), None);
    }

    #[test]
    fn the_cgroup_throttling_counter_is_found() {
        assert_eq!(
            cpu_stat_paths("0::/mxstarve\n"),
            [
                PathBuf::from("/sys/fs/cgroup/mxstarve/cpu.stat"),
                PathBuf::from("/sys/fs/cgroup/unified/mxstarve/cpu.stat")
            ]
        );
        assert_eq!(
            cpu_stat_paths("12:memory:/x\n4:cpu,cpuacct:/user.slice\n0::/\n")[0],
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.stat")
        );
        assert_eq!(
            throttled_us("usage_usec 10\nnr_throttled 4\nthrottled_usec 2500\n"),
            Some(2500)
        );
        assert_eq!(
            throttled_us("nr_throttled 4\nthrottled_time 7000000\n"),
            Some(7000)
        );
    }
}
