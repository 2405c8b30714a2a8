//! The load arithmetic behind `mx gen`'s summary, `mx check` and `mx hints`: what a
//! matrix asks of every host's NIC and CPU, before anything is sent.
//!
//! Per host, over paced flows: `out` = requests it sends per second (its row),
//! `in` = requests it receives (its column). Every request is answered, so the host
//! transmits `out` requests and `in` replies, and receives the mirror image:
//! - packets per direction = out + in;
//! - out on the wire = wire(out, tx_size) + wire(in, rx_size);
//! - in on the wire  = wire(in, tx_size) + wire(out, rx_size);
//!
//! each over the host's IP version (an IPv6 header is 20 bytes more than IPv4's;
//! a flow never crosses families, so a host's flows all share its own).
//!
//! A layered matrix is checked in every layer; a host's figure is its heaviest.
//! Unpaced (`max`) flows have no rate to add: they are left out of the sums, and
//! each host that sends or answers one is marked, since its real load is more.

use crate::matrix::schedule::Schedule;
use crate::matrix::{DiskMode, MIN_PACKET_BYTES, Matrix, Rate};
use crate::units::{Ip, wire_bits};

/// Requests one agent worker sends or answers per second, each an exchange of two
/// datagrams through that worker (request out + reply in, or request in + reply
/// out). Measured by `bench/agent_vs_ceiling.py` (README, Performance): one
/// worker per agent, 64-byte packets, loopback, 2-core VM: the highest loss-free
/// rate was 140.6 kpps per flow (median of 3 rounds) while also answering the
/// peer's 140.6 kpps, i.e. ~280,000 exchanges per second per worker. (The
/// original assumed 200,000 for a Python worker.) Real NICs add interrupt and
/// driver work, so treat it as a ceiling.
pub const WORKER_EXCHANGES_PER_SECOND: f64 = 280_000.0;

/// Worker threads a host needs to send `out_pps` requests and answer as many:
/// `floor(2 * out_pps / WORKER_EXCHANGES_PER_SECOND) + 1`.
pub fn workers_needed(out_pps: f64) -> u64 {
    (2.0 * out_pps / WORKER_EXCHANGES_PER_SECOND) as u64 + 1
}

/// The disk block: every disk read and write moves whole, aligned 4 KiB
/// blocks (O_DIRECT's unit), at random offsets.
pub const DISK_BLOCK: u64 = 4096;

/// Bytes of a packet's payload that go through a disk: all but the 32-byte
/// header, rounded up to whole blocks (0 for a header-only packet).
pub fn disk_bytes(size: u32) -> u64 {
    u64::from(size.saturating_sub(MIN_PACKET_BYTES)).div_ceil(DISK_BLOCK) * DISK_BLOCK
}

/// What a disk run asks of one host's disk, per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskLoad {
    pub read_iops: f64,
    pub read_bytes: f64,
    pub write_iops: f64,
    pub write_bytes: f64,
}

impl DiskLoad {
    /// The disk work of a host that sends `load.out_pps` requests and answers
    /// `load.in_pps` (facts.md 7): with `requests`, it reads the payload of
    /// every request it sends and writes the payload of every request it
    /// answers; with `replies`, it reads the payload of every reply it sends
    /// and writes the payload of every reply it gets back. A header-only
    /// payload costs nothing.
    pub fn of(mode: DiskMode, load: &HostLoad, tx_size: u32, rx_size: u32) -> DiskLoad {
        let mut disk = DiskLoad::default();
        let mut add = |bytes: u64, reads: f64, writes: f64| {
            if bytes > 0 {
                disk.read_iops += reads;
                disk.read_bytes += reads * bytes as f64;
                disk.write_iops += writes;
                disk.write_bytes += writes * bytes as f64;
            }
        };
        if mode.requests() {
            add(disk_bytes(tx_size), load.out_pps, load.in_pps);
        }
        if mode.replies() {
            add(disk_bytes(rx_size), load.in_pps, load.out_pps);
        }
        disk
    }

    pub fn ops(&self) -> f64 {
        self.read_iops + self.write_iops
    }
}

/// Paced request rates through one host in one layer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostLoad {
    /// Requests this host sends per second.
    pub out_pps: f64,
    /// Requests this host receives (and answers) per second.
    pub in_pps: f64,
    /// It sends or answers an unpaced flow besides: its load is more than these
    /// figures, by whatever that flow's sender manages.
    pub unpaced: bool,
}

impl HostLoad {
    /// Packets per second in each direction: requests out + replies out.
    pub fn packets(&self) -> f64 {
        self.out_pps + self.in_pps
    }

    /// Bits per second this host transmits over `ip`: its requests and its replies.
    pub fn out_wire(&self, tx_size: u32, rx_size: u32, ip: Ip) -> f64 {
        wire_bits(self.out_pps, tx_size, ip) + wire_bits(self.in_pps, rx_size, ip)
    }

    /// Bits per second this host receives over `ip`: requests to it and replies to it.
    pub fn in_wire(&self, tx_size: u32, rx_size: u32, ip: Ip) -> f64 {
        wire_bits(self.in_pps, tx_size, ip) + wire_bits(self.out_pps, rx_size, ip)
    }
}

/// A host's heaviest figures across the layers of a matrix (each maximum taken on
/// its own, so a host is over a cap if any layer puts it over).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PeakLoad {
    pub packets: f64,
    pub out_wire: f64,
    pub in_wire: f64,
    pub out_pps: f64,
    /// Sends or answers an unpaced flow in some layer (see [`HostLoad::unpaced`]).
    pub unpaced: bool,
    /// What its disk is asked for (a disk matrix; zero otherwise).
    pub disk: DiskLoad,
}

/// What the whole matrix offers, for the summary lines.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixLoad {
    /// Per host, in matrix order.
    pub hosts: Vec<PeakLoad>,
    /// Paced requests per second of the whole fleet, in its heaviest layer.
    pub fleet_pps: f64,
}

/// Loads of every host of `matrix`, layer by layer (one layer for a fixed matrix).
pub fn matrix_load(matrix: &Matrix) -> MatrixLoad {
    let (tx, rx) = (matrix.config.tx_size, matrix.config.rx_size);
    let n = matrix.host_count();
    let schedule = Schedule::new(matrix);
    let mut peaks = vec![PeakLoad::default(); n];
    let mut fleet_pps: f64 = 0.0;
    let mut layer = vec![HostLoad::default(); n];
    for l in 0..schedule.layer_count() {
        fleet_pps = fleet_pps.max(fill_layer(&schedule, l, &mut layer));
        for ((peak, load), host) in peaks.iter_mut().zip(&layer).zip(matrix.hosts()) {
            let ip = host.ip();
            peak.packets = peak.packets.max(load.packets());
            peak.out_wire = peak.out_wire.max(load.out_wire(tx, rx, ip));
            peak.in_wire = peak.in_wire.max(load.in_wire(tx, rx, ip));
            peak.out_pps = peak.out_pps.max(load.out_pps);
            peak.unpaced |= load.unpaced;
            let disk = DiskLoad::of(matrix.config.disk, load, tx, rx);
            peak.disk = DiskLoad {
                read_iops: peak.disk.read_iops.max(disk.read_iops),
                read_bytes: peak.disk.read_bytes.max(disk.read_bytes),
                write_iops: peak.disk.write_iops.max(disk.write_iops),
                write_bytes: peak.disk.write_bytes.max(disk.write_bytes),
            };
        }
    }
    MatrixLoad {
        hosts: peaks,
        fleet_pps,
    }
}

/// Loads of every host of `matrix` in one `layer` (0 for a fixed matrix): what
/// `mx gen` prints for the NICs, from the same loop [`matrix_load`] runs per layer.
pub fn layer_loads(matrix: &Matrix, layer: usize) -> Vec<HostLoad> {
    let mut loads = vec![HostLoad::default(); matrix.host_count()];
    fill_layer(&Schedule::new(matrix), layer, &mut loads);
    loads
}

/// Sums the paced flows of `layer` into `loads` (one per host, reset first) and
/// returns the fleet's paced requests per second in that layer.
fn fill_layer(schedule: &Schedule, layer: usize, loads: &mut [HostLoad]) -> f64 {
    loads.fill(HostLoad::default());
    let mut fleet = 0.0;
    for src in 0..loads.len() as u32 {
        for cell in schedule.layer_flows(src, layer) {
            match cell.rate.pps() {
                Some(pps) => {
                    loads[src as usize].out_pps += pps;
                    loads[cell.dst as usize].in_pps += pps;
                    fleet += pps;
                }
                None => {
                    loads[src as usize].unpaced = true;
                    loads[cell.dst as usize].unpaced = true;
                }
            }
        }
    }
    fleet
}

/// Per-host requests per second for a per-pair `rate` to `peers` peers.
pub fn per_host(rate: Rate, peers: usize) -> Option<f64> {
    rate.pps().map(|pps| pps * peers as f64)
}

/// Per-host request rate that fills `gbps` of wire with `tx_size`-byte requests over `ip`.
pub fn pps_for_gbps(gbps: f64, tx_size: u32, ip: Ip) -> f64 {
    gbps * 1e9 / wire_bits(1.0, tx_size, ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gbps_arithmetic_matches_facts_example() {
        // 1 Gb/s of 1400-byte requests is 85,266 pps per host; over 2 peers 42,633.
        let per_host = pps_for_gbps(1.0, 1400, Ip::V4);
        assert_eq!(per_host.floor(), 85266.0);
        assert_eq!((per_host / 2.0).round(), 42633.0);
        // Over IPv6 each packet carries 20 more header bytes: 1e9 / (1486 * 8).
        assert_eq!(pps_for_gbps(1.0, 1400, Ip::V6).floor(), 84118.0);
    }

    #[test]
    fn each_host_is_weighed_in_its_own_family() {
        // Two groups that never meet: a, b over IPv4 and c, d over IPv6.
        let m = Matrix::parse(
            b"src\\dst,a=10.0.0.1,b=10.0.0.2,c=[fd00::3]:5300,d=[fd00::4]:5300\na,,1000,,\nb,,,,\nc,,,,1000\nd,,,,\n",
            "m.csv",
        )
        .unwrap();
        let load = matrix_load(&m);
        let (v4, v6) = (&load.hosts[0], &load.hosts[2]);
        // 1000 requests of 64 bytes out: 130 or 150 bytes each on the wire.
        assert_eq!(v4.out_wire, 1000.0 * 130.0 * 8.0);
        assert_eq!(v6.out_wire, 1000.0 * 150.0 * 8.0);
        assert_eq!(load.hosts[3].in_wire, 1000.0 * 150.0 * 8.0);
    }

    #[test]
    fn workers_needed_uses_the_named_constant() {
        assert_eq!(workers_needed(0.0), 1);
        assert_eq!(workers_needed(WORKER_EXCHANGES_PER_SECOND / 2.0), 2);
        assert_eq!(workers_needed(WORKER_EXCHANGES_PER_SECOND * 10.0), 21);
    }

    #[test]
    fn unpaced_flows_are_left_out_and_their_hosts_marked() {
        let m = Matrix::parse(
            b"src\\dst,a,b,c,d\na,,100,,\nb,,,max,\nc,,,,\nd,,,,\n",
            "m.csv",
        )
        .unwrap();
        let load = matrix_load(&m);
        assert_eq!(load.fleet_pps, 100.0);
        let marked: Vec<bool> = load.hosts.iter().map(|h| h.unpaced).collect();
        assert_eq!(marked, [false, true, true, false]);
        assert_eq!(
            load.hosts[1].packets, 100.0,
            "b answers a; its max flow adds nothing"
        );
        assert_eq!(load.hosts[2].packets, 0.0);
        assert!(layer_loads(&m, 0)[2].unpaced);
    }

    #[test]
    fn host_load_directions() {
        let load = HostLoad {
            out_pps: 1000.0,
            in_pps: 2000.0,
            unpaced: false,
        };
        assert_eq!(load.packets(), 3000.0);
        assert_eq!(
            load.out_wire(64, 1000, Ip::V4),
            1000.0 * 130.0 * 8.0 + 2000.0 * 1066.0 * 8.0
        );
        assert_eq!(
            load.in_wire(64, 1000, Ip::V4),
            2000.0 * 130.0 * 8.0 + 1000.0 * 1066.0 * 8.0
        );
    }
}
