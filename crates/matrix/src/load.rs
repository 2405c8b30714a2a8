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
//! A datagram larger than the path MTU leaves as IP fragments ([`Datagram`]):
//! each fragment is a packet of its own at the NIC, with its own headers and
//! Ethernet framing, so packets count fragments and wire rates their headers.
//!
//! A layered matrix is checked in every layer; a host's figure is its heaviest.
//! Unpaced (`max`) flows have no rate to add: they are left out of the sums, and
//! each host that sends or answers one is marked, since its real load is more.

use crate::schedule::Schedule;
use crate::{DiskMode, MIN_PACKET_BYTES, Matrix, Rate};
use mx_base::units::{FRAMING_BYTES, Ip};

/// How far past its plan a source is still answered: a responder answers
/// each source at most the rate the matrix has it send there times
/// `1 + ANSWER_HEADROOM` (sustained; the agent's budget also holds a
/// second's burst). A quarter: never cut a clean run, and still cut a
/// tenfold flood to an eighth.
pub const ANSWER_HEADROOM: f64 = 0.25;

/// Requests one agent worker sends or answers per second, each an exchange of two
/// datagrams through that worker (request out + reply in, or request in + reply
/// out). Measured by `bench/agent_vs_ceiling.py` (docs/performance.md): one
/// worker per agent, 64-byte packets, loopback, 2-core VM: the highest loss-free
/// rate was 140.6 kpps per flow (median of 3 rounds) while also answering the
/// peer's 140.6 kpps, i.e. ~280,000 exchanges per second per worker. (The
/// original assumed 200,000 for a Python worker.) Real NICs add interrupt and
/// driver work, so treat it as a ceiling.
pub const WORKER_EXCHANGES_PER_SECOND: f64 = 280_000.0;

/// Worker threads a host needs to send `out_pps` requests and answer as many:
/// `floor(2 * out_pps / WORKER_EXCHANGES_PER_SECOND) + 1` (saturating: a
/// rate past any NIC is refused before it is weighed, never wrapped to 0).
pub fn workers_needed(out_pps: f64) -> u64 {
    ((2.0 * out_pps / WORKER_EXCHANGES_PER_SECOND) as u64).saturating_add(1)
}

/// The fastest Ethernet port there is, in Gb/s each way (1.6 Tb/s): a rate
/// beyond it is a typo, never a plan.
pub const FASTEST_NIC_GBPS: f64 = 1600.0;

/// Packets per second that port carries at most: its bits over the smallest
/// Ethernet frame on the wire (64 bytes, preamble and gap 20 more), about
/// 2.38 Gpps. A matrix cell or `--pps` beyond it is refused.
pub const FASTEST_NIC_PPS: f64 = FASTEST_NIC_GBPS * 1e9 / (84.0 * 8.0);

/// Why a packet rate written `rate` (as the user wrote it) cannot be: more
/// than any NIC carries.
pub fn beyond_any_nic(rate: &str) -> String {
    format!(
        "{rate} packets/s is beyond what any NIC carries (at most {:.1} Gpps: {} Gb/s of the smallest Ethernet frames)",
        FASTEST_NIC_PPS / 1e9,
        mx_base::units::g(FASTEST_NIC_GBPS)
    )
}

/// The disk block: every disk read and write moves whole, aligned 4 KiB
/// blocks (O_DIRECT's unit), at random offsets.
pub const DISK_BLOCK: u64 = 4096;

/// Bytes of a packet's payload that go through a disk: all but the 32-byte
/// header, rounded up to whole blocks (0 for a header-only packet).
pub(crate) fn disk_bytes(size: u32) -> u64 {
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
    /// `load.in_pps`: with `requests`, it reads the payload of
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

/// Bytes of a UDP header.
const UDP_HEADER_BYTES: u32 = 8;
/// Bytes of the fragment header IPv6 puts after its own in every fragment
/// (IPv4 keeps its fragment fields in its fixed header).
const IPV6_FRAGMENT_HEADER_BYTES: u32 = 8;
/// Ethernet's share of [`FRAMING_BYTES`], paid by every IP packet, a fragment
/// as much as a whole datagram: preamble and start-of-frame 8, MAC header 14,
/// FCS 4, inter-frame gap 12.
const ETHERNET_BYTES: u32 = 38;
// A whole IPv4 datagram's framing is Ethernet's, the IPv4 header and UDP's.
const _: () = assert!(ETHERNET_BYTES + 20 + UDP_HEADER_BYTES == FRAMING_BYTES as u32);
/// The least IP packet an Ethernet frame carries (a 64-byte frame): a shorter
/// one, such as the tail fragment of a datagram just over the MTU, is padded
/// to it on the wire.
const ETHERNET_MIN_PACKET_BYTES: u32 = 46;

/// A path MTU: the largest IP packet, headers included, that crosses the path
/// in one piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mtu(u32);

impl Mtu {
    /// Ethernet's, assumed unless `--mtu` says otherwise.
    pub const DEFAULT: Mtu = Mtu(1500);
    /// The least: IPv4 hosts must take a 576-byte datagram (RFC 791).
    pub const MIN_IPV4: u32 = 576;
    /// The least MTU an IPv6 link may have (RFC 8200).
    pub(crate) const MIN_IPV6: u32 = 1280;
    /// The most: an IPv4 header states a packet's length in 16 bits.
    pub const MAX: u32 = 65535;

    /// `bytes` given for `what` (a flag), refused outside what an IP path can
    /// have, in the words the user sees.
    pub fn checked(what: &str, bytes: i64) -> Result<Mtu, String> {
        if (i64::from(Mtu::MIN_IPV4)..=i64::from(Mtu::MAX)).contains(&bytes) {
            Ok(Mtu(bytes as u32))
        } else {
            Err(format!(
                "{what} must be between {} and {} bytes (got {bytes})",
                Mtu::MIN_IPV4,
                Mtu::MAX
            ))
        }
    }

    /// This MTU for hosts of `ip`: refused below IPv6's minimum for IPv6 hosts.
    pub fn for_family(self, what: &str, ip: Ip) -> Result<Mtu, String> {
        if ip == Ip::V6 && self.0 < Mtu::MIN_IPV6 {
            Err(format!(
                "{what} must be at least {} bytes for IPv6 hosts, the least an IPv6 link carries (got {})",
                Mtu::MIN_IPV6,
                self.0
            ))
        } else {
            Ok(self)
        }
    }

    pub fn bytes(self) -> u32 {
        self.0
    }
}

/// One UDP datagram of `payload` bytes as it crosses a path of `mtu` over
/// `ip`: one IP packet when it fits, else the fragments the sender's kernel
/// cuts it into.
///
/// It fits when IP header + UDP header + payload <= MTU (P + 28 <= M over
/// IPv4, P + 48 <= M over IPv6). Otherwise the UDP header and payload
/// (P + 8 bytes) are cut into pieces of D bytes, all but the last a multiple
/// of 8 (the fragment offset counts 8-byte units), so D = the room an MTU-sized
/// packet leaves after its headers, rounded down to a multiple of 8:
/// - IPv4: D = floor((M - 20) / 8) * 8, each fragment with a 20-byte header;
/// - IPv6: D = floor((M - 48) / 8) * 8, each fragment with the 40-byte header
///   and an 8-byte fragment header;
///
/// and the datagram leaves as ceil((P + 8) / D) fragments, the last with
/// what remains. (M = 1500: D = 1480 over IPv4, 1448 over IPv6; an 8000-byte
/// payload is 6 fragments either way.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram {
    pub payload: u32,
    pub ip: Ip,
    pub mtu: Mtu,
}

impl Datagram {
    /// Bytes of the IP packet that would carry it whole: IP and UDP headers and payload.
    pub(crate) fn whole_packet_bytes(self) -> u32 {
        self.ip.header_bytes() + UDP_HEADER_BYTES + self.payload
    }

    /// Whether it leaves as more than one IP packet.
    pub fn fragmented(self) -> bool {
        self.whole_packet_bytes() > self.mtu.0
    }

    /// IP packets it leaves as: 1, or its fragments.
    pub fn fragments(self) -> u32 {
        if self.fragmented() {
            (self.payload + UDP_HEADER_BYTES).div_ceil(self.fragment_data_bytes())
        } else {
            1
        }
    }

    /// Headers of one fragment: the IP header, and IPv6's fragment header.
    fn fragment_header_bytes(self) -> u32 {
        match self.ip {
            Ip::V4 => self.ip.header_bytes(),
            Ip::V6 => self.ip.header_bytes() + IPV6_FRAGMENT_HEADER_BYTES,
        }
    }

    /// Bytes of the datagram (UDP header and payload) each fragment but the
    /// last carries: D above. At least 552 (IPv4, MTU 576) or 1232 (IPv6,
    /// 1280), never zero.
    fn fragment_data_bytes(self) -> u32 {
        (self.mtu.0 - self.fragment_header_bytes()) / 8 * 8
    }

    /// Bytes on the wire for one datagram: every packet it leaves as, with its
    /// headers and Ethernet's framing (a whole datagram costs its payload and
    /// [`Ip::framing`], as [`mx_base::units::wire_bits`] counts it).
    pub(crate) fn wire_bytes(self) -> f64 {
        let frame =
            |ip_packet: u32| f64::from(ip_packet.max(ETHERNET_MIN_PACKET_BYTES) + ETHERNET_BYTES);
        if !self.fragmented() {
            return frame(self.whole_packet_bytes());
        }
        let n = self.fragments();
        let data = self.fragment_data_bytes();
        let last = self.payload + UDP_HEADER_BYTES - (n - 1) * data;
        let headers = self.fragment_header_bytes();
        f64::from(n - 1) * frame(headers + data) + frame(headers + last)
    }

    /// IP packets per second for `pps` datagrams a second.
    pub fn packets(self, pps: f64) -> f64 {
        pps * f64::from(self.fragments())
    }

    /// Bits per second on the wire for `pps` datagrams a second.
    pub fn wire_bits(self, pps: f64) -> f64 {
        pps * self.wire_bytes() * 8.0
    }
}

/// A request and its reply as one host's NIC sees them: the matrix's sizes
/// over the host's IP version and the path MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub request: Datagram,
    pub reply: Datagram,
}

impl Exchange {
    pub fn new(tx_size: u32, rx_size: u32, ip: Ip, mtu: Mtu) -> Exchange {
        let datagram = |payload| Datagram { payload, ip, mtu };
        Exchange {
            request: datagram(tx_size),
            reply: datagram(rx_size),
        }
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
    /// Datagrams per second each way: requests out and replies out, or
    /// requests in and replies in.
    pub fn datagrams(&self) -> f64 {
        self.out_pps + self.in_pps
    }

    /// IP packets per second this host transmits, every fragment counted: its
    /// requests and its replies.
    pub(crate) fn packets_out(&self, x: &Exchange) -> f64 {
        x.request.packets(self.out_pps) + x.reply.packets(self.in_pps)
    }

    /// IP packets per second this host receives, every fragment counted:
    /// requests to it and replies to it.
    pub(crate) fn packets_in(&self, x: &Exchange) -> f64 {
        x.request.packets(self.in_pps) + x.reply.packets(self.out_pps)
    }

    /// IP packets per second through its NIC in the busier direction (each way
    /// alike, out + in, when nothing is fragmented).
    pub fn packets(&self, x: &Exchange) -> f64 {
        self.packets_out(x).max(self.packets_in(x))
    }

    /// Bits per second this host transmits: its requests and its replies.
    pub fn out_wire(&self, x: &Exchange) -> f64 {
        x.request.wire_bits(self.out_pps) + x.reply.wire_bits(self.in_pps)
    }

    /// Bits per second this host receives: requests to it and replies to it.
    pub fn in_wire(&self, x: &Exchange) -> f64 {
        x.request.wire_bits(self.in_pps) + x.reply.wire_bits(self.out_pps)
    }
}

/// A host's heaviest figures across the layers of a matrix (each maximum taken on
/// its own, so a host is over a cap if any layer puts it over).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PeakLoad {
    /// IP packets per second in the busier direction, fragments counted.
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

/// Loads of every host of `matrix` over a path of `mtu`, layer by layer (one
/// layer for a fixed matrix).
pub fn matrix_load(matrix: &Matrix, mtu: Mtu) -> MatrixLoad {
    let (tx, rx) = (matrix.config.tx_size, matrix.config.rx_size);
    let n = matrix.host_count();
    let schedule = Schedule::new(matrix);
    let mut peaks = vec![PeakLoad::default(); n];
    let mut fleet_pps: f64 = 0.0;
    let mut layer = vec![HostLoad::default(); n];
    for l in 0..schedule.layer_count() {
        fleet_pps = fleet_pps.max(fill_layer(&schedule, l, &mut layer));
        for ((peak, load), host) in peaks.iter_mut().zip(&layer).zip(matrix.hosts()) {
            let x = Exchange::new(tx, rx, host.ip(), mtu);
            peak.packets = peak.packets.max(load.packets(&x));
            peak.out_wire = peak.out_wire.max(load.out_wire(&x));
            peak.in_wire = peak.in_wire.max(load.in_wire(&x));
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

/// Per-host request rate that fills `gbps` of wire with `request`s, one
/// frame's framing per datagram: the original's `G·1e9 / ((size + 66)·8)`,
/// kept so that a matrix generated by either tool holds the same rates. A
/// datagram over the MTU is called out apart; its fragments' extra headers
/// are not taken from the budget.
pub fn pps_for_gbps(gbps: f64, request: Datagram) -> f64 {
    gbps * 1e9 / mx_base::units::wire_bits(1.0, request.payload, request.ip)
}

/// The line that calls out `what` (`requests`, `replies`) of `size` bytes
/// where they are larger than the path MTU over any of the IP versions `ips`,
/// in the words gen, check and hints share; `None` when they leave whole over
/// every one. A datagram under the MTU on its own that its headers take over
/// it says so, with the bytes they make.
pub fn fragments_line(what: &str, size: u32, mtu: Mtu, ips: &[Ip]) -> Option<String> {
    let cut: Vec<Datagram> = ips
        .iter()
        .map(|&ip| Datagram {
            payload: size,
            ip,
            mtu,
        })
        .filter(|d| d.fragmented())
        .collect();
    if cut.is_empty() {
        return None;
    }
    let headers = if size <= mtu.bytes() {
        let with: Vec<String> = cut
            .iter()
            .map(|d| {
                format!(
                    "{} with the {} and UDP headers",
                    d.whole_packet_bytes(),
                    d.ip.name()
                )
            })
            .collect();
        format!(" ({})", with.join(", "))
    } else {
        String::new()
    };
    let pieces: Vec<String> = cut
        .iter()
        .map(|d| format!("{} {} fragments", d.fragments(), d.ip.name()))
        .collect();
    Some(format!(
        "{what} of {size} bytes{headers} exceed the {}-byte MTU: each leaves as {} (a lost fragment loses the datagram)",
        mtu.bytes(),
        pieces.join(" or ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_base::units::wire_bits;

    fn datagram(payload: u32, ip: Ip, mtu: u32) -> Datagram {
        Datagram {
            payload,
            ip,
            mtu: Mtu::checked("--mtu", i64::from(mtu)).unwrap(),
        }
    }

    #[test]
    fn gbps_arithmetic_matches_facts_example() {
        // 1 Gb/s of 1400-byte requests is 85,266 pps per host; over 2 peers 42,633.
        let per_host = pps_for_gbps(1.0, datagram(1400, Ip::V4, 1500));
        assert_eq!(per_host.floor(), 85266.0);
        assert_eq!((per_host / 2.0).round(), 42633.0);
        // Over IPv6 each packet carries 20 more header bytes: 1e9 / (1486 * 8).
        assert_eq!(
            pps_for_gbps(1.0, datagram(1400, Ip::V6, 1500)).floor(),
            84118.0
        );
    }

    #[test]
    fn a_gbps_budget_is_the_originals_one_frame_per_datagram() {
        // The original's G·1e9 / ((size + 66)·8), whatever the MTU: a matrix
        // of either tool holds the same rates.
        for mtu in [1500, 9000] {
            assert_eq!(
                pps_for_gbps(1.0, datagram(8000, Ip::V4, mtu)),
                1e9 / (8066.0 * 8.0)
            );
        }
    }

    #[test]
    fn an_ipv4_datagram_fits_up_to_mtu_less_28_bytes() {
        // 1472 + 8 (UDP) + 20 (IPv4) = 1500: one packet, 66 bytes of framing.
        let fits = datagram(1472, Ip::V4, 1500);
        assert!(!fits.fragmented());
        assert_eq!(fits.fragments(), 1);
        assert_eq!(fits.wire_bytes(), 1472.0 + 66.0);
        // One byte more: 1480 bytes of UDP in the first fragment, 1 in the
        // second, whose 21-byte packet is padded to Ethernet's 46.
        let over = datagram(1473, Ip::V4, 1500);
        assert!(over.fragmented());
        assert_eq!(over.fragments(), 2);
        assert_eq!(over.wire_bytes(), (1500.0 + 38.0) + (46.0 + 38.0));
        assert_eq!(over.packets(1000.0), 2000.0);
    }

    #[test]
    fn an_ipv4_datagram_is_cut_in_multiples_of_8_bytes() {
        // 8000 + 8 bytes in pieces of 1480: 5 full fragments and 608 bytes.
        let big = datagram(8000, Ip::V4, 1500);
        assert_eq!(big.fragments(), 6);
        assert_eq!(big.wire_bytes(), 5.0 * 1538.0 + (20.0 + 608.0 + 38.0));
        // MTU 1006 leaves 986 bytes after the header, 984 of them usable: 1972
        // bytes of UDP are 3 fragments, not the 2 that 986-byte pieces would make.
        assert_eq!(datagram(1964, Ip::V4, 1006).fragments(), 3);
        // The largest datagram fits a 65535-byte MTU whole, and a 9000-byte
        // MTU in 8 pieces of 8976.
        assert_eq!(datagram(65507, Ip::V4, 65535).fragments(), 1);
        assert_eq!(datagram(65507, Ip::V4, 9000).fragments(), 8);
        assert_eq!(datagram(8000, Ip::V4, 9000).fragments(), 1);
    }

    #[test]
    fn an_ipv6_datagram_fits_up_to_mtu_less_48_and_its_fragments_carry_8_more() {
        // 1452 + 8 (UDP) + 40 (IPv6) = 1500: one packet, 86 bytes of framing.
        let fits = datagram(1452, Ip::V6, 1500);
        assert_eq!(fits.fragments(), 1);
        assert_eq!(fits.wire_bytes(), 1452.0 + 86.0);
        // One byte more: 1452 bytes are left after the 40-byte header and the
        // 8-byte fragment header, 1448 of them usable; 1461 bytes of UDP are
        // 1448 + 13.
        let over = datagram(1453, Ip::V6, 1500);
        assert_eq!(over.fragments(), 2);
        assert_eq!(
            over.wire_bytes(),
            (48.0 + 1448.0 + 38.0) + (48.0 + 13.0 + 38.0)
        );
        let big = datagram(8000, Ip::V6, 1500);
        assert_eq!(big.fragments(), 6);
        assert_eq!(big.wire_bytes(), 5.0 * 1534.0 + (48.0 + 768.0 + 38.0));
        // IPv6's least MTU: 1232 bytes a fragment.
        assert_eq!(datagram(1232, Ip::V6, 1280).fragments(), 1);
        assert_eq!(datagram(1233, Ip::V6, 1280).fragments(), 2);
        assert_eq!(datagram(1232 * 3 - 8, Ip::V6, 1280).fragments(), 3);
        assert_eq!(datagram(1232 * 3 - 7, Ip::V6, 1280).fragments(), 4);
        // An IPv6 packet of the largest payload is over 65535 bytes.
        assert_eq!(datagram(65507, Ip::V6, 65535).fragments(), 2);
    }

    #[test]
    fn a_whole_datagram_costs_what_wire_bits_counts() {
        for (ip, sizes) in [
            (Ip::V4, [32, 64, 1400, 1472]),
            (Ip::V6, [32, 64, 1400, 1452]),
        ] {
            for size in sizes {
                assert_eq!(
                    datagram(size, ip, 1500).wire_bits(3000.0),
                    wire_bits(3000.0, size, ip),
                    "{size} bytes over {ip:?}"
                );
            }
        }
    }

    #[test]
    fn mtus_outside_an_ip_paths_range_are_refused() {
        for bytes in [576, 1500, 9000, 65535] {
            assert_eq!(Mtu::checked("--mtu", bytes).unwrap().bytes(), bytes as u32);
        }
        for bytes in [-1, 0, 575, 65536, i64::MAX] {
            assert_eq!(
                Mtu::checked("--mtu", bytes),
                Err(format!(
                    "--mtu must be between 576 and 65535 bytes (got {bytes})"
                ))
            );
        }
        let small = Mtu::checked("--mtu", 1279).unwrap();
        assert_eq!(small.for_family("--mtu", Ip::V4), Ok(small));
        assert_eq!(
            small.for_family("--mtu", Ip::V6),
            Err("--mtu must be at least 1280 bytes for IPv6 hosts, the least an IPv6 link carries (got 1279)".to_string())
        );
        let least = Mtu::checked("--mtu", 1280).unwrap();
        assert_eq!(least.for_family("--mtu", Ip::V6), Ok(least));
    }

    #[test]
    fn each_host_is_weighed_in_its_own_family() {
        // Two groups that never meet: a, b over IPv4 and c, d over IPv6.
        let m = Matrix::parse(
            b"src\\dst,a=10.0.0.1,b=10.0.0.2,c=[fd00::3]:5300,d=[fd00::4]:5300\na,,1000,,\nb,,,,\nc,,,,1000\nd,,,,\n",
            "m.csv",
        )
        .unwrap();
        let load = matrix_load(&m, Mtu::DEFAULT);
        let (v4, v6) = (&load.hosts[0], &load.hosts[2]);
        // 1000 requests of 64 bytes out: 130 or 150 bytes each on the wire.
        assert_eq!(v4.out_wire, 1000.0 * 130.0 * 8.0);
        assert_eq!(v6.out_wire, 1000.0 * 150.0 * 8.0);
        assert_eq!(load.hosts[3].in_wire, 1000.0 * 150.0 * 8.0);
    }

    #[test]
    fn a_fragmenting_matrix_counts_fragments_at_the_nic() {
        let m = Matrix::parse(
            b"# tx_size=8000 rx_size=64 port=5300\nsrc\\dst,a,b,c\na,,1000,1000\nb,1000,,1000\nc,1000,1000,\n",
            "m.csv",
        )
        .unwrap();
        // Each host sends 2,000 requests of 6 fragments and 2,000 replies of
        // one, and receives as many: 14,000 packets each way.
        let load = matrix_load(&m, Mtu::DEFAULT);
        assert_eq!(load.hosts[0].packets, 14_000.0);
        assert_eq!(load.hosts[0].out_wire, 2000.0 * (8356.0 + 130.0) * 8.0);
        assert_eq!(load.fleet_pps, 6000.0, "requests, not fragments");
        // A 9000-byte MTU carries them whole.
        let jumbo = matrix_load(&m, Mtu::checked("--mtu", 9000).unwrap());
        assert_eq!(jumbo.hosts[0].packets, 4000.0);
        assert_eq!(jumbo.hosts[0].out_wire, 2000.0 * (8066.0 + 130.0) * 8.0);
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
        let load = matrix_load(&m, Mtu::DEFAULT);
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
        let x = Exchange::new(64, 1000, Ip::V4, Mtu::DEFAULT);
        assert_eq!(load.datagrams(), 3000.0);
        assert_eq!(load.packets_out(&x), 3000.0);
        assert_eq!(load.packets_in(&x), 3000.0);
        assert_eq!(
            load.out_wire(&x),
            1000.0 * 130.0 * 8.0 + 2000.0 * 1066.0 * 8.0
        );
        assert_eq!(
            load.in_wire(&x),
            2000.0 * 130.0 * 8.0 + 1000.0 * 1066.0 * 8.0
        );
        // 8000-byte requests, 6 fragments each: the direction that carries
        // more requests carries more packets.
        let x = Exchange::new(8000, 64, Ip::V4, Mtu::DEFAULT);
        assert_eq!(load.packets_out(&x), 1000.0 * 6.0 + 2000.0);
        assert_eq!(load.packets_in(&x), 2000.0 * 6.0 + 1000.0);
        assert_eq!(load.packets(&x), 13_000.0);
    }

    #[test]
    fn fragments_are_called_out_per_family_with_the_headers_that_tip_them_over() {
        let mtu = |bytes| Mtu::checked("--mtu", bytes).unwrap();
        let v4 = [Ip::V4];
        assert_eq!(fragments_line("requests", 1472, Mtu::DEFAULT, &v4), None);
        assert_eq!(
            fragments_line("requests", 8000, Mtu::DEFAULT, &v4).unwrap(),
            "requests of 8000 bytes exceed the 1500-byte MTU: each leaves as 6 IPv4 fragments (a lost fragment loses the datagram)"
        );
        assert_eq!(fragments_line("requests", 8000, mtu(9000), &v4), None);
        // 1460 bytes fit over IPv4 (1488) but not over IPv6 (1508).
        let both = [Ip::V4, Ip::V6];
        assert_eq!(
            fragments_line("replies", 1460, Mtu::DEFAULT, &both).unwrap(),
            "replies of 1460 bytes (1508 with the IPv6 and UDP headers) exceed the 1500-byte MTU: each leaves as 2 IPv6 fragments (a lost fragment loses the datagram)"
        );
        assert_eq!(
            fragments_line("replies", 1480, Mtu::DEFAULT, &both).unwrap(),
            "replies of 1480 bytes (1508 with the IPv4 and UDP headers, 1528 with the IPv6 and UDP headers) exceed the 1500-byte MTU: each leaves as 2 IPv4 fragments or 2 IPv6 fragments (a lost fragment loses the datagram)"
        );
        assert_eq!(
            fragments_line("requests", 9000, Mtu::DEFAULT, &both).unwrap(),
            "requests of 9000 bytes exceed the 1500-byte MTU: each leaves as 7 IPv4 fragments or 7 IPv6 fragments (a lost fragment loses the datagram)"
        );
    }
}
