//! Two streaming passes over a report set: the first finds the run's steady
//! span (which intervals count, [`super::span`]), the second accumulates
//! everything the summary, the grids and the export need over that span, per
//! pair, per host and per layer, in memory proportional to the fleet (pairs,
//! hosts and intervals), never to the rows.
//!
//! Ratios are taken over counts of the same packets: a pair's round trip is
//! the replies to the requests it sent over the requests sent, its forward
//! leg the requests its receiver counted over the requests sent, both over the
//! intervals in which both hosts reported (each agent counts a request in the
//! interval it was sent in, on both sides), so per interval `back <= arrived
//! <= sent` and no ratio passes 100%. Where the receiver wrote nothing for an
//! interval (a dead agent), what was lost there is put on the forward leg:
//! the requests did not reach a listening agent. Reports without the count
//! columns (the original's) are counted as rate x interval.
//!
//! Means use only non-blank cells: a blank is "not measured", and averaging it
//! as zero would poison the figure (a drain row's blank pps, a host that had
//! not started). Percentiles are never averaged: per flow the window's p50/p99
//! is its worst interval's (an upper bound, said as such); fleet-wide and
//! per-host percentiles come exactly from the host rows' RTT histograms when
//! every reporting host carries them. A disk run's host rows carry each
//! interval's disk figures: rates are averaged over the non-blank cells,
//! latency weighted by operations, and a host's disk p99 is its worst
//! interval's (the rows carry no disk histogram).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use super::routes::{Hops, Route};
use super::span::{self, Counted, Mark, Span, Timeline};
use mx_base::error::Result;
use mx_report::read::{RowView, for_each_row, report_files};
use mx_report::row::Dir;
use mx_report::rtt::MergedRtt;
use mx_report::streams::{self, StreamCounts};
use mx_report::{Column, Phase};

/// A mean over the non-blank cells of a column.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Mean {
    sum: f64,
    n: u64,
}

impl Mean {
    pub fn add(&mut self, value: Option<f64>) {
        if let Some(v) = value {
            self.sum += v;
            self.n += 1;
        }
    }

    /// The mean, or 0 when nothing was measured (for sums of means).
    pub fn mean(&self) -> f64 {
        self.get().unwrap_or(0.0)
    }

    /// The mean, `None` when nothing was measured.
    pub fn get(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// The smaller of two optional measurements (either alone, if only one was measured).
pub fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// A round trip's tail worth a word: its p99 at least [`TAIL_RATIO`] times
/// its p50, and over [`TAIL_FLOOR_US`] (a tail of a few hundred
/// microseconds is a host's scheduling, not a queue worth chasing).
pub fn is_tail(p50: f64, p99: f64) -> bool {
    p50 > 0.0 && p99 > TAIL_RATIO * p50 && p99 > TAIL_FLOOR_US
}

/// See [`is_tail`].
pub const TAIL_RATIO: f64 = 5.0;
pub const TAIL_FLOOR_US: f64 = 1000.0;

/// A flow's intervals by their p99, counted over doubling bounds from
/// [`P99Counts::FIRST_US`]: `over[k]` intervals had a p99 above
/// `FIRST_US x 2^k`. Enough to say, once the fleet's p50 is known, in how
/// many of a flow's intervals its round trips reached the fleet's tail,
/// in a few dozen bytes a flow whatever the run's length.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct P99Counts {
    pub intervals: u64,
    over: [u32; P99Counts::BOUNDS],
}

impl P99Counts {
    /// The lowest bound (us), and how many: 250 us to 4 s.
    pub const FIRST_US: f64 = 250.0;
    const BOUNDS: usize = 15;

    pub(crate) fn add(&mut self, p99: f64) {
        self.intervals += 1;
        for (k, n) in self.over.iter_mut().enumerate() {
            if p99 > Self::FIRST_US * f64::from(1u32 << k) {
                *n += 1;
            } else {
                break;
            }
        }
    }

    /// Intervals whose p99 was over `bound` us, counted at the first
    /// doubling bound at or above it (never more than were).
    pub fn over(&self, bound: f64) -> u64 {
        let k = (0..Self::BOUNDS).find(|&k| Self::FIRST_US * f64::from(1u32 << k) >= bound);
        k.map_or(0, |k| u64::from(self.over[k]))
    }
}

/// The larger of two optional measurements (either alone, if only one was measured).
pub(crate) fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// A tx pair (this host -> peer) over the window.
#[derive(Debug, Clone, Default)]
pub struct TxPair {
    pub pps: Mean,
    pub rep_pps: Mean,
    pub mbps: Mean,
    pub rep_mbps: Mean,
    pub target: Mean,
    /// Σ pps and Σ rep_pps over its rows, drains included (layered arithmetic).
    pub sum_pps: f64,
    pub sum_rep_pps: f64,
    /// Σ rtt_avg x rep_pps and Σ rep_pps of rows with an average: the exact
    /// mean RTT over replies (intervals are equal).
    pub rtt_weighted: f64,
    pub rtt_weight: f64,
    /// Worst interval's percentiles, and the largest RTT seen.
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub rtt_max: Option<f64>,
    /// The smallest RTT of its replies (us).
    pub rtt_min: Option<f64>,
    /// Σ jitter x rep_pps and Σ rep_pps of rows with a jitter: its mean
    /// jitter over the span, weighted as the RTT's mean is.
    pub jitter_weighted: f64,
    pub jitter_weight: f64,
    pub dup: f64,
    pub ooo: f64,
    pub layer: Option<u32>,
    /// Requests sent and replies back (packets) over the span, and the same
    /// over the intervals in which the receiver reported too.
    pub sent: f64,
    pub back: f64,
    pub sent_seen: f64,
    pub back_seen: f64,
    /// Replies that came back after their interval was written (counted
    /// there as lost): the round trip took longer than the report's hold.
    pub late: f64,
    /// Its streams over the span, by source port (`--streams`; a restarted
    /// agent's streams are new ports beside the old).
    pub streams: BTreeMap<u16, StreamCounts>,
}

impl TxPair {
    pub fn rtt_avg(&self) -> Option<f64> {
        (self.rtt_weight > 0.0).then(|| self.rtt_weighted / self.rtt_weight)
    }

    /// The mean absolute difference of successive RTTs (us).
    pub fn jitter(&self) -> Option<f64> {
        (self.jitter_weight > 0.0).then(|| self.jitter_weighted / self.jitter_weight)
    }
}

/// An rx pair (this host served requests from peer) over the window.
#[derive(Debug, Clone, Default)]
pub struct RxPair {
    pub pps: Mean,
    pub rep_pps: Mean,
    pub sum_pps: f64,
    pub sum_rep_pps: f64,
    pub dup: f64,
    pub ooo: f64,
    /// Requests that arrived (packets), over the intervals in which their
    /// sender reported too.
    pub arrived_seen: f64,
    /// Requests read after their interval was written (an agent that could
    /// not keep up): arrived, but counted as lost in their interval.
    pub late: f64,
    /// Requests that arrived and were left unanswered by plan (their sender
    /// sent past its matrix rate here), over the intervals in which their
    /// sender reported too: part of `arrived_seen`, and never of the loss.
    pub over_plan_seen: f64,
}

/// One direction of a host's disk (reads or writes) over the span, from the
/// disk columns of its host rows (disk runs only; blank cells are skipped).
#[derive(Debug, Clone, Default)]
pub struct DiskDirAgg {
    pub iops: Mean,
    /// MB per second (10^6 bytes).
    pub mb_s: Mean,
    /// Σ avg_us x iops and Σ iops over rows with both: the exact mean latency
    /// over the operations (intervals are equal), as the RTT's over replies.
    lat_weighted: f64,
    lat_weight: f64,
    /// The worst interval's p99: a percentile is never averaged, and the rows
    /// carry no disk histogram to merge, so this is an upper bound.
    pub p99: Option<f64>,
}

impl DiskDirAgg {
    fn add(&mut self, row: &RowView<'_>, [iops, mb_s, avg, p99]: [Column; 4]) {
        let ops = row.num(iops);
        self.iops.add(ops);
        self.mb_s.add(row.num(mb_s));
        if let (Some(avg), Some(ops)) = (row.num(avg), ops)
            && ops > 0.0
        {
            self.lat_weighted += avg * ops;
            self.lat_weight += ops;
        }
        self.p99 = max_opt(self.p99, row.num(p99));
    }

    /// Mean latency per operation (us); `None` when no operation was timed.
    pub fn avg_us(&self) -> Option<f64> {
        (self.lat_weight > 0.0).then(|| self.lat_weighted / self.lat_weight)
    }

    /// Whether any of its cells was measured.
    pub fn measured(&self) -> bool {
        self.iops.get().is_some() || self.mb_s.get().is_some() || self.p99.is_some()
    }
}

/// A host's disk over the span: reads, writes, and the mean of
/// `disk_busy_pct` (each interval's busiest worker's share of time in I/O).
#[derive(Debug, Clone, Default)]
pub struct DiskAgg {
    pub read: DiskDirAgg,
    pub write: DiskDirAgg,
    pub busy: Mean,
    /// `disk_depth`: the operations each worker kept in flight (the
    /// newest row's; `None` in reports without the column).
    pub depth: Option<u32>,
}

impl DiskAgg {
    fn add(&mut self, row: &RowView<'_>) {
        use Column as C;
        let read = [C::DiskRdIops, C::DiskRdMbS, C::DiskRdAvgUs, C::DiskRdP99Us];
        let write = [C::DiskWrIops, C::DiskWrMbS, C::DiskWrAvgUs, C::DiskWrP99Us];
        self.read.add(row, read);
        self.write.add(row, write);
        self.busy.add(row.num(C::DiskBusyPct));
        self.depth = row.num(C::DiskDepth).map(|d| d as u32).or(self.depth);
    }

    /// Whether any disk cell of the host's rows was measured: without one
    /// the host has no disk figures at all (never zeros).
    pub fn measured(&self) -> bool {
        self.read.measured() || self.write.measured() || self.busy.get().is_some()
    }
}

/// A host's own rows over the window.
#[derive(Debug, Clone, Default)]
pub struct HostAgg {
    pub pps: Mean,
    pub rep_pps: Mean,
    pub mbps: Mean,
    pub rep_mbps: Mean,
    pub target: Mean,
    pub cpu: Mean,
    pub cpu_core: Mean,
    pub agent_cpu: Mean,
    /// Host rows with a measured pps (complete intervals).
    pub nticks: u64,
    pub host_rows: u64,
    pub workers: Option<u32>,
    pub stray: f64,
    /// Requests it left unanswered by plan, as a responder; `None` in
    /// reports that do not count them.
    pub over_plan: Option<f64>,
    /// Merged RTT histograms of its host rows, and how many rows had one.
    pub rtt: MergedRtt,
    pub rtt_rows: u64,
    pub layer: Option<u32>,
    /// The host's own evidence of loss, summed over the span (None: never
    /// reported): requests and replies the kernel dropped at the agent's full
    /// sockets, the host's UDP receive-buffer and input errors, its NIC's rx
    /// drops; the longest the agent was behind its send schedule, and the
    /// time its cgroup was throttled (ms).
    pub req_drops: Option<f64>,
    pub rep_drops: Option<f64>,
    /// Replies it owed and could not hand the kernel: its socket's send
    /// buffer was full (requests that arrived, less those answered and
    /// those refused by plan).
    pub unanswered: f64,
    pub rcvbuf_errors: Option<f64>,
    pub in_errors: Option<f64>,
    pub nic_rx_drops: Option<f64>,
    /// The kernel's neighbour tables: times full, resolutions failed (the
    /// machine's counts: hosts sharing a kernel report the same).
    pub neigh_table_fulls: Option<f64>,
    pub neigh_res_failed: Option<f64>,
    pub behind_ms: Option<f64>,
    pub throttled_ms: Option<f64>,
    /// Its disk, in a disk run (every cell blank otherwise).
    pub disk: DiskAgg,
    /// What its interface counted, beside what its agent handed the kernel
    /// and read.
    pub nic: NicAgg,
    /// The most of its CPU time its hypervisor took in one interval (%).
    pub steal_pct: Option<f64>,
    /// The smallest RTT of its replies (us), and Σ jitter x timed pairs
    /// over Σ timed pairs of its host rows: their mean jitter.
    pub rtt_min: Option<f64>,
    pub jitter: Mean,
}

/// A host's interface over the span, beside its agent's own counts over
/// the same intervals (those whose host row carries the interface's).
#[derive(Debug, Clone, Default)]
pub struct NicAgg {
    /// The interface's name (its host rows' `nic`).
    pub name: Option<String>,
    /// Host rows with the interface's counters, and the span's seconds they cover.
    pub intervals: u64,
    pub tx_pkts: f64,
    pub tx_bytes: f64,
    pub rx_pkts: f64,
    pub rx_bytes: f64,
    pub tx_drops: f64,
    /// Datagrams the host's kernel dropped on their way out (UDP
    /// SndbufErrors: a full qdisc), over every host row that counted them.
    pub sndbuf_errors: Option<f64>,
    /// Datagrams the agent handed the kernel (requests and replies) and
    /// datagrams it read (requests, replies, duplicates, late, stray), in
    /// the intervals counted by packet.
    pub handed: f64,
    pub read: f64,
    /// Intervals whose sends (`tx_intervals`) or reads (`rx_intervals`)
    /// went uncoalesced: the packet counts above sum those alone, since in
    /// the others a software interface counted per message, not datagram.
    pub tx_intervals: u64,
    pub rx_intervals: u64,
    /// The others: what was sent (`tx_coalesced`) and read
    /// (`rx_coalesced`) in intervals the agent did so coalesced, reckoned
    /// by payload bytes.
    pub tx_coalesced: Reckoning,
    pub rx_coalesced: Reckoning,
    /// Other hosts of the set reported the same loopback: hosts that share
    /// one machine (a demo, a test) and count each other's packets.
    pub shared: bool,
}

/// One direction of a host's interface, over the intervals its agent sent
/// (or read) coalesced, beside what its agent counted in them.
///
/// A software interface (veth, a bridge port, loopback) counts a GSO or
/// GRO message as one packet of all its bytes, with one set of headers, so
/// its packets cannot be set against datagrams. Its bytes can: less the
/// headers of the packets it counted, they are the datagrams' payload, and
/// mx knows each datagram's size. (A NIC counts every frame on the wire,
/// and its packets stay the count.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reckoning {
    pub intervals: u64,
    /// What the interface counted: packets, and their bytes (MAC header
    /// on, no preamble, FCS or gap).
    pub nic_pkts: f64,
    pub nic_bytes: f64,
    /// What the agent sent or read: datagrams, and their UDP payload bytes.
    pub datagrams: f64,
    pub payload: f64,
}

impl Reckoning {
    fn count(&mut self, pkts: f64, bytes: f64) {
        self.intervals += 1;
        self.nic_pkts += pkts;
        self.nic_bytes += bytes;
    }

    fn agent(&mut self, datagrams: f64, size: f64) {
        self.datagrams += datagrams;
        self.payload += datagrams * size;
    }

    /// The datagrams the interface carried: its payload bytes (its bytes
    /// less `header` bytes for each packet it counted) over the mean size
    /// of the agent's. `None` where the agent counted none to size them by.
    pub fn nic_datagrams(&self, header: f64) -> Option<f64> {
        (self.intervals > 0 && self.datagrams > 0.0 && self.payload > 0.0).then(|| {
            let mean_size = self.payload / self.datagrams;
            ((self.nic_bytes - self.nic_pkts * header) / mean_size).max(0.0)
        })
    }
}

/// One direction of an interface's counts over an interval (`pkts`
/// packets of `bytes`) where the agent sent or read `coalesced` datagrams
/// coalesced: counted by packet, or kept to reckon by bytes (left out
/// without its bytes). Says which.
fn count_side(
    coalesced: f64,
    pkts: f64,
    bytes: Option<f64>,
    reckoning: &mut Reckoning,
    (intervals, by_packet): (&mut u64, &mut f64),
) -> Counted {
    let counted = Counted::of(true, coalesced);
    match (counted, bytes) {
        (Counted::Bytes, Some(bytes)) => reckoning.count(pkts, bytes),
        (Counted::Bytes, None) => {}
        _ => {
            *intervals += 1;
            *by_packet += pkts;
        }
    }
    counted
}

impl NicAgg {
    /// Whether the interface's counters were read, and are this host's alone.
    pub fn measured(&self) -> bool {
        self.intervals > 0 && !self.shared
    }

    /// A host row's interface counters (`tx` its packets sent), and the
    /// stray datagrams its agent read (of `stray_size` bytes, a guess).
    fn add(&mut self, row: &RowView<'_>, tx: f64, stray_size: f64) {
        self.name = Some(row.text(Column::Nic).to_string()).filter(|n| !n.is_empty());
        self.intervals += 1;
        let (tx_bytes, rx_bytes) = (row.num(Column::NicTxBytes), row.num(Column::NicRxBytes));
        self.tx_bytes += tx_bytes.unwrap_or(0.0);
        self.rx_bytes += rx_bytes.unwrap_or(0.0);
        self.tx_drops += row.num(Column::NicTxDrops).unwrap_or(0.0);
        let rx = row.num(Column::NicRxPkts).unwrap_or(0.0);
        let gso = row.num(Column::GsoPkts).unwrap_or(0.0);
        let tx_side = (&mut self.tx_intervals, &mut self.tx_pkts);
        count_side(gso, tx, tx_bytes, &mut self.tx_coalesced, tx_side);
        let gro = row.num(Column::GroPkts).unwrap_or(0.0);
        let rx_side = (&mut self.rx_intervals, &mut self.rx_pkts);
        let rx_counted = count_side(gro, rx, rx_bytes, &mut self.rx_coalesced, rx_side);
        // Stray datagrams come to the responder's port, and a software
        // interface counted them too.
        self.take(
            rx_counted,
            row.num(Column::StrayPkts).unwrap_or(0.0),
            stray_size,
        );
    }

    /// Datagrams the agent handed over (`n` of `size` bytes) in an
    /// interval its interface counted as `counted`.
    fn hand(&mut self, counted: Counted, n: f64, size: f64) {
        match counted {
            Counted::Packets => self.handed += n,
            Counted::Bytes => self.tx_coalesced.agent(n, size),
            Counted::No => {}
        }
    }

    /// Datagrams the agent read (`n` of `size` bytes), as [`hand`](Self::hand).
    fn take(&mut self, counted: Counted, n: f64, size: f64) {
        match counted {
            Counted::Packets => self.read += n,
            Counted::Bytes => self.rx_coalesced.agent(n, size),
            Counted::No => {}
        }
    }

    /// Datagrams the agent handed the kernel that the interface never sent
    /// (lost in the host's transmit path): by packet where the two count
    /// alike, by payload bytes where the agent sent coalesced. `header`:
    /// the bytes of headers the interface counts a packet besides its
    /// payload ([`mx_base::units::Ip::counted_header_bytes`]).
    pub(crate) fn tx_gap(&self, header: f64) -> Option<f64> {
        let by_packet = (self.tx_intervals > 0).then(|| (self.handed - self.tx_pkts).max(0.0));
        let by_bytes = self
            .tx_coalesced
            .nic_datagrams(header)
            .map(|sent| (self.tx_coalesced.datagrams - sent).max(0.0));
        self.gap(by_packet, by_bytes)
    }

    /// Datagrams the interface received that the agent never read (lost in
    /// the host's receive path, after its NIC), as [`tx_gap`](Self::tx_gap).
    pub(crate) fn rx_gap(&self, header: f64) -> Option<f64> {
        let by_packet = (self.rx_intervals > 0).then(|| (self.rx_pkts - self.read).max(0.0));
        let by_bytes = self
            .rx_coalesced
            .nic_datagrams(header)
            .map(|arrived| (arrived - self.rx_coalesced.datagrams).max(0.0));
        self.gap(by_packet, by_bytes)
    }

    fn gap(&self, by_packet: Option<f64>, by_bytes: Option<f64>) -> Option<f64> {
        if !self.measured() || (by_packet.is_none() && by_bytes.is_none()) {
            return None;
        }
        Some(by_packet.unwrap_or(0.0) + by_bytes.unwrap_or(0.0))
    }

    /// The share of the counted intervals that [`tx_gap`](Self::tx_gap)
    /// (`tx`) or [`rx_gap`](Self::rx_gap) leaves out: those neither
    /// counted by packet nor reckoned by bytes (the agent counted nothing
    /// coalesced to size them by).
    pub(crate) fn left_out(&self, tx: bool, header: f64) -> f64 {
        let (by_packet, coalesced) = if tx {
            (self.tx_intervals, &self.tx_coalesced)
        } else {
            (self.rx_intervals, &self.rx_coalesced)
        };
        if self.intervals == 0 {
            return 0.0;
        }
        let reckoned = coalesced
            .nic_datagrams(header)
            .map_or(0, |_| coalesced.intervals);
        1.0 - (by_packet + reckoned) as f64 / self.intervals as f64
    }
}

/// Why a host's flows stop counting before the run's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Its report ends early, with no end marked: its agent stopped.
    Stopped,
    /// Its report could not be collected (ssh could not reach it): what
    /// is known of it is an earlier copy, or its peers' rows alone.
    Unreachable,
    /// It is in the matrix and wrote no report (none was found).
    Silent,
}

/// A host that went away, and from when its flows are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub why: Gone,
    /// Its last interval (ts): flows to and from it after this are left
    /// out, never counted as loss. `None`: nothing of it was ever seen.
    pub last: Option<i64>,
    /// Flow-intervals left out for it.
    pub left_out: u64,
}

/// The hosts a report set is read against: the matrix's, and those whose
/// report could not be collected just now.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roster {
    pub hosts: Vec<String>,
    pub unreachable: Vec<String>,
}

/// A layer over the window (layered runs).
#[derive(Debug, Clone, Default)]
pub struct LayerAgg {
    pub pairs: BTreeSet<(u32, u32)>,
    pub ticks: BTreeSet<i64>,
    pub sum_pps: f64,
    pub sum_rep_pps: f64,
    pub worst_p99: Option<f64>,
}

/// The whole fleet in one interval of the span: the packets of its tx and
/// rx rows, and (when asked for) the RTT buckets of its host rows, so that a
/// figure can be computed per interval (compare's resampling unit).
#[derive(Debug, Clone, Default)]
pub struct IntervalAgg {
    /// Requests sent and replies back (packets).
    pub sent: f64,
    pub back: f64,
    /// Requests the same flows were asked to send (their target rate over
    /// the interval); 0 when unpaced. A host gone is out of both, so
    /// `sent / target` does not dip when one goes.
    pub target: f64,
    /// Requests the receivers counted from senders that reported the same
    /// interval; `None` when no rx row was written for it.
    pub arrived: Option<f64>,
    /// The host rows' histogram buckets, (ns, count), unmerged: a few hundred
    /// per host row, where a merged histogram would cost 38 KB per interval.
    pub rtt: Vec<(u64, u64)>,
}

/// How short of CPU an agent was.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Starvation {
    pub behind_ms: f64,
    pub throttled_ms: f64,
}

/// A trace of the run whose newest interval is `latest`: one traced after
/// it (`mx trace` runs once the agents have ended). One traced before it
/// is an earlier run's, and its paths are not this run's.
fn of_this_run(
    traced: Option<mx_report::paths::Traced>,
    latest: i64,
) -> Option<mx_report::paths::Traced> {
    traced.filter(|t| t.traced_at >= latest)
}

/// Everything summarize and export need from a report set.
#[derive(Debug, Default)]
pub struct ReportSet {
    /// Host names, interned: pairs are keyed by index into this.
    pub names: Vec<String>,
    ids: HashMap<String, u32>,
    pub latest: i64,
    pub earliest_in_window: Option<i64>,
    /// First timestamp kept (inclusive); `i64::MIN` for the whole history.
    pub start: i64,
    /// The intervals kept: the steady part of the run, within the window.
    pub span: Span,
    /// Every host's intervals, by interval label: who reported when.
    timeline: Timeline,
    /// Whole history, per host: how far behind its schedule its agent fell
    /// at worst, and how long its cgroup throttled it (what a host that went
    /// quiet said last).
    pub history: BTreeMap<u32, Starvation>,
    pub tx: BTreeMap<(u32, u32), TxPair>,
    pub rx: BTreeMap<(u32, u32), RxPair>,
    pub hosts: BTreeMap<u32, HostAgg>,
    pub layers: BTreeMap<u32, LayerAgg>,
    /// Whole history: intervals in which each ordered pair was measured (pps > 0).
    pub coverage: BTreeMap<(u32, u32), u64>,
    /// Whole history: the newest timestamp of each host.
    pub last_seen: BTreeMap<u32, i64>,
    /// The report interval in seconds: the smallest step between one host's
    /// consecutive timestamps (None with a single tick).
    pub interval: Option<i64>,
    /// Whole history: each layer first seen per pair (export's `layer=`).
    pub sizes: Option<(u32, u32)>,
    pub any_layer: bool,
    pub rows_in_window: u64,
    pub files: usize,
    /// The span's intervals, fleet-wide (counts always; RTT buckets only
    /// when [`ReportSet::read`] was asked for the series).
    pub intervals: BTreeMap<i64, IntervalAgg>,
    /// Every interval any host reported, the edges included (the time
    /// axis of the report's series: what lies outside the span is an edge).
    pub all_ts: BTreeSet<i64>,
    /// With the series: each host's packets per interval of the span, (sent,
    /// back), and the layer each interval ran (layered runs).
    pub host_intervals: BTreeMap<(u32, i64), (f64, f64)>,
    pub interval_layer: BTreeMap<i64, u32>,
    /// Hosts that went away before the run's end (a stopped agent, an
    /// unreachable host, one that never reported): their flows after
    /// their last interval are left out.
    pub gone: BTreeMap<u32, Departure>,
    /// Whole history: the newest interval in which each host was heard
    /// from by a peer (a reply back from it, a request from it).
    heard: BTreeMap<u32, i64>,
    /// Per flow (sender, receiver), over the span: its intervals by their
    /// p99, so that the diagnosis can say how steady a tail was, interval
    /// by interval, and whose flows it sat on.
    pub rtt_tails: BTreeMap<(u32, u32), P99Counts>,
    /// The streams' paths as `mx trace` swept them after these reports'
    /// newest interval (`paths.trace` beside them); `None` when there is
    /// none, or it is older (another run's).
    pub traced: Option<mx_report::paths::Traced>,
    /// Per way (from, to), over the span: how many routers its datagrams
    /// crossed, interval by interval, as the receiver's rows say.
    pub routes: BTreeMap<(u32, u32), Route>,
    series: bool,
}

impl ReportSet {
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    /// Every host's intervals, by label: who reported when, and how.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    pub fn id_of(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Reads every report in `dir`, keeping the rows of the run's steady span
    /// (its newest `window` seconds; 0 = all of it), and the coverage of the
    /// whole history; `series` keeps each interval's RTT buckets and each
    /// host's packets per interval too (what a picture over time needs).
    pub fn read(dir: &Path, window: f64, series: bool) -> Result<ReportSet> {
        ReportSet::read_in(dir, window, series, None, &Roster::default())
    }

    /// [`ReportSet::read`], keeping only the intervals of the span that
    /// belong to one ramp step, when `step` is given ([`span::step_span`]).
    /// The `roster` names the matrix's hosts (one without a report is
    /// silent) and those that could not be reached to collect theirs.
    pub(crate) fn read_in(
        dir: &Path,
        window: f64,
        series: bool,
        step: Option<&span::Step>,
        roster: &Roster,
    ) -> Result<ReportSet> {
        let files = report_files(dir)?;
        let mut set = ReportSet {
            files: files.len(),
            series,
            ..ReportSet::default()
        };
        // 1. Who reported which interval, and how.
        for file in &files {
            for_each_row(file, |row| set.mark(row))?;
        }
        if set.timeline.iter().all(BTreeMap::is_empty) {
            return Err(mx_base::error::Error::refused(
                "reports are empty -- give the agents an interval or two, then retry",
            ));
        }
        set.span = span::span(&set.timeline, window);
        if let Some(step) = step {
            set.span = span::step_span(std::mem::take(&mut set.span), &set.timeline, step);
        }
        set.start = set.span.first().unwrap_or(i64::MAX);
        set.gone = set.departures(roster);
        // 2. The figures, over the span.
        for file in &files {
            for_each_row(file, |row| set.add(row))?;
        }
        set.routes.values_mut().for_each(Route::close);
        // Hosts on one machine's loopback count each other's packets there.
        let on_lo = set
            .hosts
            .values()
            .filter(|h| h.nic.name.as_deref() == Some("lo"))
            .count();
        if on_lo > 1 {
            for h in set.hosts.values_mut() {
                h.nic.shared |= h.nic.name.as_deref() == Some("lo");
            }
        }
        set.traced = of_this_run(
            mx_report::paths::read(&dir.join(mx_report::paths::FILE))?,
            set.latest,
        );
        Ok(set)
    }

    /// Pass 1: notes what `row` says of its host's interval.
    fn mark(&mut self, row: &RowView<'_>) {
        let Some(dir) = row.dir() else {
            return;
        };
        let host = self.id(row.host()) as usize;
        if self.timeline.len() <= host {
            self.timeline.resize_with(host + 1, BTreeMap::new);
        }
        let seen = self.last_seen.entry(host as u32).or_insert(row.ts);
        if row.ts > *seen {
            let step = row.ts - *seen;
            self.interval = Some(self.interval.map_or(step, |i| i.min(step)));
        }
        *seen = (*seen).max(row.ts);
        self.latest = self.latest.max(row.ts);
        self.all_ts.insert(row.ts);
        let mark: &mut Mark = self.timeline[host].entry(row.ts).or_default();
        match dir {
            Dir::Host if row.num(Column::Pps).is_some() => {
                mark.host_row = Some(Phase::parse(row.text(Column::Phase)));
                mark.rate_scale = row.num(Column::RateScale);
                let began_by = row.text(Column::BeganBy);
                mark.reloaded = began_by == "reload";
                mark.cut = began_by == "keep";
                let nic = row.num(Column::NicTxPkts).is_some();
                mark.nic_tx = Counted::of(nic, row.num(Column::GsoPkts).unwrap_or(0.0));
                mark.nic_rx = Counted::of(nic, row.num(Column::GroPkts).unwrap_or(0.0));
                let s = self.history.entry(host as u32).or_default();
                s.behind_ms = s.behind_ms.max(row.num(Column::BehindMs).unwrap_or(0.0));
                s.throttled_ms += row.num(Column::ThrottledMs).unwrap_or(0.0);
            }
            Dir::Tx | Dir::Rx => mark.flows = true,
            _ => {}
        }
        // A reply back from a peer, or a request from it: the peer was alive.
        let from_peer = match dir {
            Dir::Tx => row.num(Column::RepPkts).or(row.num(Column::RepPps)),
            Dir::Rx => row.num(Column::Pkts).or(row.num(Column::Pps)),
            Dir::Host => None,
        };
        if from_peer.is_some_and(|n| n > 0.0) {
            let peer = self.id(row.peer());
            let heard = self.heard.entry(peer).or_insert(row.ts);
            *heard = (*heard).max(row.ts);
        }
    }

    /// Who went away before the run's end, and from when. A host whose
    /// report ends before the others', with no end marked, stopped (or,
    /// named in `roster.unreachable`, could not be reached); a matrix host
    /// without a report is known by what its peers heard from it, its last
    /// interval heard taken as cut short. Before the run's planned end
    /// (reports collected mid-run) a host one interval behind the newest is
    /// only collected a moment before its next row: two intervals behind
    /// is gone.
    fn departures(&self, roster: &Roster) -> BTreeMap<u32, Departure> {
        // Reports without phase marks read as the original reads them: a
        // host that went quiet is the loss its peers counted.
        if !self.span.marked {
            return BTreeMap::new();
        }
        let interval = self.interval.unwrap_or(1).max(1);
        let unreachable = |name: &str| roster.unreachable.iter().any(|u| u == name);
        let ended = |marks: &BTreeMap<i64, Mark>| {
            marks
                .values()
                .any(|m| matches!(m.host_row, Some(Some(Phase::Last | Phase::End))))
        };
        let run_ended = self.timeline.iter().any(ended);
        let behind_by = if run_ended { 1 } else { 2 } * interval;
        let mut gone = BTreeMap::new();
        for (id, marks) in self.timeline.iter().enumerate() {
            let Some((&last, _)) = marks.last_key_value() else {
                continue;
            };
            let name = self.name(id as u32);
            if !ended(marks) && last + behind_by <= self.latest {
                let why = if unreachable(name) {
                    Gone::Unreachable
                } else {
                    Gone::Stopped
                };
                gone.insert(
                    id as u32,
                    Departure {
                        why,
                        last: Some(last),
                        left_out: 0,
                    },
                );
            }
        }
        for name in &roster.hosts {
            let wrote = self
                .id_of(name)
                .and_then(|id| self.timeline.get(id as usize))
                .is_some_and(|m| !m.is_empty());
            if wrote {
                continue;
            }
            let Some(id) = self.id_of(name) else {
                continue;
            };
            let last = match self.heard.get(&id) {
                // Heard to the end: alive, only its report is missing.
                Some(&t) if t >= self.latest => continue,
                Some(&t) => Some(t - interval),
                None => None,
            };
            let why = if unreachable(name) {
                Gone::Unreachable
            } else {
                Gone::Silent
            };
            gone.insert(
                id,
                Departure {
                    why,
                    last,
                    left_out: 0,
                },
            );
        }
        gone
    }

    /// Whether `host` was gone by interval `ts` (its flows there are left out).
    pub(crate) fn gone_at(&self, host: u32, ts: i64) -> bool {
        self.gone
            .get(&host)
            .is_some_and(|d| d.last.is_none_or(|last| ts > last))
    }

    /// Counts flow (a, b)'s interval `ts` left out, for its gone end.
    fn leave_out(&mut self, a: u32, b: u32, ts: i64) {
        if let Some(h) = [a, b].into_iter().find(|&h| self.gone_at(h, ts))
            && let Some(d) = self.gone.get_mut(&h)
        {
            d.left_out += 1;
        }
    }

    /// How `host`'s interface counted what it sent and what it read in
    /// interval `ts`: its agent's own counts go beside them alike.
    fn nic_counted(&self, host: u32, ts: i64) -> (Counted, Counted) {
        self.timeline
            .get(host as usize)
            .and_then(|m| m.get(&ts))
            .map_or((Counted::No, Counted::No), |m| (m.nic_tx, m.nic_rx))
    }

    /// Whether `host` wrote any rx row in the span (it counts what arrives).
    pub(crate) fn wrote_rx_rows(&self, host: u32) -> bool {
        self.rx.range((host, 0)..=(host, u32::MAX)).next().is_some()
    }

    /// Whether `host` wrote anything for interval `ts`.
    pub fn reported(&self, host: u32, ts: i64) -> bool {
        self.timeline
            .get(host as usize)
            .is_some_and(|m| m.contains_key(&ts))
    }

    /// Pass 2: adds `row` to its flow or host, if it lies in the span.
    fn add(&mut self, row: &RowView<'_>) {
        let Some(dir) = row.dir() else {
            return;
        };
        let host = self.id(row.host());
        let layer = row.num(Column::Layer).map(|l| l as u32);
        self.any_layer |= layer.is_some();
        if dir == Dir::Tx && row.num(Column::Pps).is_some_and(|p| p > 0.0) {
            let peer = self.id(row.peer());
            *self.coverage.entry((host, peer)).or_default() += 1;
        }
        if !self.span.contains(row.ts) {
            return;
        }
        if dir != Dir::Host {
            let peer = self.id(row.peer());
            if self.gone_at(host, row.ts) || self.gone_at(peer, row.ts) {
                if dir == Dir::Tx {
                    self.leave_out(host, peer, row.ts);
                }
                return;
            }
        }
        self.rows_in_window += 1;
        self.earliest_in_window = Some(self.earliest_in_window.map_or(row.ts, |e| e.min(row.ts)));
        if self.sizes.is_none()
            && let (Some(size), Some(rep)) = (row.num(Column::Size), row.num(Column::RepSize))
        {
            self.sizes = Some((size as u32, rep as u32));
        }
        match dir {
            Dir::Tx => self.add_tx(row, host, layer),
            Dir::Rx => self.add_rx(row, host),
            Dir::Host => self.add_host(row, host, layer),
        }
        if dir != Dir::Host
            && let Some(fewest) = row.num(Column::Hops)
        {
            // Replies (tx) and requests (rx) alike came from the peer.
            let most = row.num(Column::HopsMax).unwrap_or(fewest);
            let peer = self.id(row.peer());
            let hops = Hops {
                fewest: fewest as u32,
                most: most as u32,
            };
            self.routes
                .entry((peer, host))
                .or_default()
                .saw(row.ts, hops);
        }
    }

    /// Packets of a row: its count column, or (the original's reports, which
    /// have none) its rate times the interval.
    fn packets(&self, row: &RowView<'_>, count: Column, rate: Column) -> f64 {
        let interval = self.interval.unwrap_or(1) as f64;
        row.num(count)
            .or_else(|| row.num(rate).map(|r| r * interval))
            .unwrap_or(0.0)
    }

    fn add_tx(&mut self, row: &RowView<'_>, host: u32, layer: Option<u32>) {
        let peer = self.id(row.peer());
        let receiver_reported = self.reported(peer, row.ts);
        let sent = self.packets(row, Column::Pkts, Column::Pps);
        let back = self.packets(row, Column::RepPkts, Column::RepPps);
        let (pps, rep_pps) = (row.num(Column::Pps), row.num(Column::RepPps));
        let p99 = row.num(Column::RttP99Us);
        let target = row.num(Column::TargetPps).filter(|t| t.is_finite());
        let interval = self.interval.unwrap_or(1) as f64;
        let fleet = self.intervals.entry(row.ts).or_default();
        fleet.sent += sent;
        fleet.back += back;
        fleet.target += target.map_or(0.0, |t| t * interval);
        if self.series {
            let own = self.host_intervals.entry((host, row.ts)).or_default();
            own.0 += sent;
            own.1 += back;
            if let Some(l) = layer {
                self.interval_layer.entry(row.ts).or_insert(l);
            }
        }
        let p = self.tx.entry((host, peer)).or_default();
        p.sent += sent;
        p.back += back;
        if receiver_reported {
            p.sent_seen += sent;
            p.back_seen += back;
        }
        let late = row.num(Column::LatePkts).unwrap_or(0.0);
        let dup = row.num(Column::DupPkts).unwrap_or(0.0);
        p.late += late;
        p.pps.add(pps);
        p.rep_pps.add(rep_pps);
        p.mbps.add(row.num(Column::Mbps));
        p.rep_mbps.add(row.num(Column::RepMbps));
        p.target.add(row.num(Column::TargetPps));
        p.sum_pps += pps.unwrap_or(0.0);
        p.sum_rep_pps += rep_pps.unwrap_or(0.0);
        if let (Some(avg), Some(rep)) = (row.num(Column::RttAvgUs), rep_pps)
            && rep > 0.0
        {
            p.rtt_weighted += avg * rep;
            p.rtt_weight += rep;
        }
        let p50 = row.num(Column::RttP50Us);
        if let Some(p99) = p99 {
            self.rtt_tails.entry((host, peer)).or_default().add(p99);
        }
        let p = self.tx.get_mut(&(host, peer)).expect("entered above");
        p.p50 = max_opt(p.p50, p50);
        p.p99 = max_opt(p.p99, p99);
        p.p999 = max_opt(p.p999, row.num(Column::RttP999Us));
        p.rtt_max = max_opt(p.rtt_max, row.num(Column::RttMaxUs));
        p.rtt_min = min_opt(p.rtt_min, row.num(Column::RttMinUs));
        if let (Some(jitter), Some(rep)) = (row.num(Column::JitterUs), rep_pps) {
            p.jitter_weighted += jitter * rep;
            p.jitter_weight += rep;
        }
        p.dup += dup;
        p.ooo += row.num(Column::OooPkts).unwrap_or(0.0);
        p.layer = p.layer.or(layer);
        // A cell that does not read counts no stream: the row's own
        // figures stand.
        for s in streams::parse(row.text(Column::Streams)).unwrap_or_default() {
            p.streams
                .entry(s.sport)
                .or_insert(StreamCounts {
                    sport: s.sport,
                    ..Default::default()
                })
                .add(&s);
        }
        let (tx, rx) = self.nic_counted(host, row.ts);
        let (size, rep_size) = self.sizes_of(row);
        let nic = &mut self.hosts.entry(host).or_default().nic;
        nic.hand(tx, sent, size);
        nic.take(rx, back + dup + late, rep_size);
        if let Some(l) = layer {
            let agg = self.layers.entry(l).or_default();
            agg.sum_pps += pps.unwrap_or(0.0);
            agg.sum_rep_pps += rep_pps.unwrap_or(0.0);
            agg.worst_p99 = max_opt(agg.worst_p99, p99);
            if pps.is_some() {
                agg.pairs.insert((host, peer));
                agg.ticks.insert(row.ts);
            }
        }
    }

    fn add_rx(&mut self, row: &RowView<'_>, host: u32) {
        let peer = self.id(row.peer());
        let sender_reported = self.reported(peer, row.ts);
        let arrived = self.packets(row, Column::Pkts, Column::Pps);
        let (pps, rep_pps) = (row.num(Column::Pps), row.num(Column::RepPps));
        if sender_reported {
            let fleet = self.intervals.entry(row.ts).or_default();
            fleet.arrived = Some(fleet.arrived.unwrap_or(0.0) + arrived);
        }
        let p = self.rx.entry((host, peer)).or_default();
        if sender_reported {
            p.arrived_seen += arrived;
            p.over_plan_seen += row.num(Column::OverPlan).unwrap_or(0.0);
        }
        let late = row.num(Column::LatePkts).unwrap_or(0.0);
        let dup = row.num(Column::DupPkts).unwrap_or(0.0);
        p.late += late;
        p.pps.add(pps);
        p.rep_pps.add(rep_pps);
        p.sum_pps += pps.unwrap_or(0.0);
        p.sum_rep_pps += rep_pps.unwrap_or(0.0);
        p.dup += dup;
        p.ooo += row.num(Column::OooPkts).unwrap_or(0.0);
        let (tx, rx) = self.nic_counted(host, row.ts);
        let replied = self.packets(row, Column::RepPkts, Column::RepPps);
        let refused = row.num(Column::OverPlan).unwrap_or(0.0);
        let (size, rep_size) = self.sizes_of(row);
        let h = self.hosts.entry(host).or_default();
        h.unanswered += (arrived - replied - refused).max(0.0);
        h.nic.hand(tx, replied, rep_size);
        h.nic.take(rx, arrived + dup + late, size);
    }

    fn add_host(&mut self, row: &RowView<'_>, host: u32, layer: Option<u32>) {
        let pps = row.num(Column::Pps);
        let h = self.hosts.entry(host).or_default();
        h.host_rows += 1;
        if pps.is_some() {
            h.nticks += 1;
        }
        h.pps.add(pps);
        h.rep_pps.add(row.num(Column::RepPps));
        h.mbps.add(row.num(Column::Mbps));
        h.rep_mbps.add(row.num(Column::RepMbps));
        h.target.add(row.num(Column::TargetPps));
        h.cpu.add(row.num(Column::CpuPct));
        h.cpu_core.add(row.num(Column::CpuMaxPct));
        h.agent_cpu.add(row.num(Column::AgentCpuPct));
        h.workers = row.num(Column::Workers).map(|w| w as u32).or(h.workers);
        h.stray += row.num(Column::StrayPkts).unwrap_or(0.0);
        if let Some(n) = row.num(Column::OverPlan) {
            h.over_plan = Some(h.over_plan.unwrap_or(0.0) + n);
        }
        h.layer = layer.or(h.layer);
        h.disk.add(row);
        let hist = row.text(Column::RttHist);
        if !hist.is_empty() && h.rtt.add_encoded(hist).is_ok() {
            h.rtt_rows += 1;
            if self.series {
                let fleet = self.intervals.entry(row.ts).or_default();
                // Already parsed once above: a bad bucket cannot get here.
                let _ = mx_report::rtt::decode_into(hist, &mut fleet.rtt);
            }
        }
        // Host-counted drops: summed, blank (not measured) until a row has one.
        let add = |total: &mut Option<f64>, column: Column| {
            if let Some(v) = row.num(column) {
                *total = Some(total.unwrap_or(0.0) + v);
            }
        };
        add(&mut h.req_drops, Column::ReqDrops);
        add(&mut h.rep_drops, Column::RepDrops);
        add(&mut h.rcvbuf_errors, Column::UdpRcvbufErrors);
        add(&mut h.in_errors, Column::UdpInErrors);
        add(&mut h.nic_rx_drops, Column::NicRxDrops);
        add(&mut h.neigh_table_fulls, Column::NeighTableFulls);
        add(&mut h.neigh_res_failed, Column::NeighResFailed);
        add(&mut h.throttled_ms, Column::ThrottledMs);
        if let Some(v) = row.num(Column::BehindMs) {
            h.behind_ms = Some(h.behind_ms.unwrap_or(0.0).max(v));
        }
        h.steal_pct = max_opt(h.steal_pct, row.num(Column::StealPct));
        h.rtt_min = min_opt(h.rtt_min, row.num(Column::RttMinUs));
        h.jitter.add(row.num(Column::JitterUs));
        let stray_size = self.sizes.map_or(0.0, |(size, _)| f64::from(size));
        let h = self.hosts.entry(host).or_default();
        if let Some(tx) = row.num(Column::NicTxPkts) {
            h.nic.add(row, tx, stray_size);
        }
        add(&mut h.nic.sndbuf_errors, Column::UdpSndbufErrors);
    }

    /// The request and reply sizes of `row`'s flows (bytes of UDP
    /// payload): its own columns, else the run's.
    fn sizes_of(&self, row: &RowView<'_>) -> (f64, f64) {
        match (row.num(Column::Size), row.num(Column::RepSize)) {
            (Some(size), Some(rep)) => (size, rep),
            _ => self
                .sizes
                .map_or((0.0, 0.0), |(size, rep)| (f64::from(size), f64::from(rep))),
        }
    }

    /// Hosts with any row in the window, by name.
    pub(crate) fn window_hosts(&self) -> Vec<u32> {
        let mut hosts: BTreeSet<u32> = self.hosts.keys().copied().collect();
        hosts.extend(self.tx.keys().map(|k| k.0));
        hosts.extend(self.rx.keys().map(|k| k.0));
        let mut v: Vec<u32> = hosts.into_iter().collect();
        v.sort_by(|a, b| self.name(*a).cmp(self.name(*b)));
        v
    }

    /// Fleet-wide RTT histogram, when every host that measured RTTs in the
    /// window carries histograms on its host rows (reports of this mx); `None`
    /// for reports of the original, which carry only percentiles.
    pub(crate) fn fleet_rtt(&self) -> Option<MergedRtt> {
        self.merged_rtt(|_| true)
    }

    /// The RTT histogram of the hosts `include` picks, merged; `None` when
    /// one of them measured replies but wrote no histogram.
    pub(crate) fn merged_rtt(&self, include: impl Fn(u32) -> bool) -> Option<MergedRtt> {
        let mut merged = MergedRtt::default();
        let mut any = false;
        for (id, h) in self.hosts.iter().filter(|(id, _)| include(**id)) {
            let measured = self
                .tx
                .iter()
                .any(|((src, _), p)| src == id && p.p50.is_some());
            if measured && h.rtt_rows == 0 {
                return None;
            }
            if h.rtt_rows > 0 {
                merged.merge(&h.rtt);
                any = true;
            }
        }
        any.then_some(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_base::units::Ip;

    #[test]
    fn a_trace_is_this_run_s_only_when_traced_after_its_newest_interval() {
        let traced = |at| mx_report::paths::Traced {
            traced_at: at,
            paths: Vec::new(),
        };
        assert_eq!(of_this_run(Some(traced(1_000)), 999), Some(traced(1_000)));
        assert_eq!(of_this_run(Some(traced(1_000)), 1_000), Some(traced(1_000)));
        // Traced before this run's last interval: an earlier run's.
        assert_eq!(of_this_run(Some(traced(998)), 999), None);
        assert_eq!(of_this_run(None, 999), None);
    }

    #[test]
    fn a_coalesced_interfaces_datagrams_are_its_payload_bytes_in_the_agents_sizes() {
        // 1,000 requests of 64 bytes and 1,000 replies of 1,000 bytes left
        // as 40 GSO messages over IPv4: the interface counted 40 packets of
        // 1,064,000 payload bytes and 40 headers of 42.
        let header = Ip::V4.counted_header_bytes();
        let mut sent = Reckoning::default();
        sent.count(40.0, 1_064_000.0 + 40.0 * header);
        sent.agent(1_000.0, 64.0);
        sent.agent(1_000.0, 1_000.0);
        assert_eq!(sent.nic_datagrams(header), Some(2_000.0));
        // 10% of the messages dropped before the interface counted them:
        // 200 datagrams short, whatever the packets.
        let mut short = Reckoning::default();
        short.count(36.0, 0.9 * 1_064_000.0 + 36.0 * header);
        short.agent(1_000.0, 64.0);
        short.agent(1_000.0, 1_000.0);
        assert_eq!(short.nic_datagrams(header).map(f64::round), Some(1_800.0));
        // Over IPv6 a packet's headers are 62 bytes.
        assert_eq!(Ip::V6.counted_header_bytes(), 62.0);
        // Nothing the agent counted to size them by: not reckoned.
        let mut unmeasured = Reckoning::default();
        unmeasured.count(40.0, 50_000.0);
        assert_eq!(unmeasured.nic_datagrams(header), None);
    }

    #[test]
    fn an_interfaces_gap_sums_its_intervals_by_packet_and_by_bytes() {
        let header = Ip::V4.counted_header_bytes();
        let mut nic = NicAgg {
            intervals: 2,
            ..NicAgg::default()
        };
        // One interval counted by packet: 1,000 handed, 950 sent.
        nic.tx_intervals = 1;
        nic.hand(Counted::Packets, 1_000.0, 64.0);
        nic.tx_pkts = 950.0;
        // One coalesced: 1,000 handed, 900 sent in 30 messages.
        nic.hand(Counted::Bytes, 1_000.0, 64.0);
        nic.tx_coalesced.count(30.0, 900.0 * 64.0 + 30.0 * header);
        assert_eq!(nic.tx_gap(header), Some(150.0));
        assert_eq!(nic.left_out(true, header), 0.0);
        // Nothing to reckon the coalesced one by: it is left out.
        nic.tx_coalesced = Reckoning::default();
        assert_eq!(nic.tx_gap(header), Some(50.0));
        assert_eq!(nic.left_out(true, header), 0.5);
    }

    #[test]
    fn a_flows_intervals_are_counted_over_doubling_bounds() {
        let mut c = P99Counts::default();
        for p99 in [100.0, 900.0, 2_400.0, 9_000.0, 150_000.0] {
            c.add(p99);
        }
        assert_eq!(c.intervals, 5);
        // Over 1 ms: 2.4, 9 and 150 ms.
        assert_eq!(c.over(1_000.0), 3);
        // A bound between two doublings is taken at the next one up (2 ms):
        // never more intervals than were over it.
        assert_eq!(c.over(1_500.0), 3);
        assert_eq!(c.over(5_000.0), 2);
        assert_eq!(c.over(100_000.0), 1);
        // Past the last bound (4 s): none counted.
        assert_eq!(c.over(10_000_000.0), 0);
    }
}
