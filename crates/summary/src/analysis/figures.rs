//! The numbers of a summary, computed once from a [`ReportSet`] (the export
//! reuses them, so both print the same figures).
//!
//! Rates: on a fixed matrix a pair's rate is the mean of its rows; on a
//! layered one most pairs are idle most of the window, so rates come from the
//! host rows (time averages). Ratios (delivery, loss by leg) come from packet
//! counts over the same packets ([`super::aggregate`]), and the rates shown
//! beside them follow from the ratio, so that no figure passes 100% or
//! contradicts its parts.

use super::aggregate::{DiskAgg, DiskDirAgg, ReportSet, TxPair, max_opt, min_opt};
use super::spread::FlowSpread;
use mx_base::units::{Ip, wire_bits};
use mx_matrix::{DiskMode, Matrix};

/// What the summary knows besides the reports.
pub struct Context {
    pub layered: bool,
    pub tx_size: u32,
    pub rx_size: u32,
    pub matrix: Option<Matrix>,
    /// Each reported host's IP version (by report id), as its matrix says:
    /// IPv4 without a matrix, or for a host it does not hold.
    ips: Vec<Ip>,
}

impl Context {
    /// The disk mode of the run, as its matrix says; `None` when the matrix
    /// is missing or says `off` (then which disk I/O the RTT holds is unknown).
    pub fn disk_mode(&self) -> Option<DiskMode> {
        self.matrix
            .as_ref()
            .map(|m| m.config.disk)
            .filter(|d| d.is_on())
    }

    /// The class of a marked run, as its matrix says; `None` for the default
    /// class, or when the matrix is missing (the reports do not carry it).
    pub fn dscp(&self) -> Option<mx_matrix::Dscp> {
        self.matrix
            .as_ref()
            .map(|m| m.config.dscp)
            .filter(|d| !d.is_default())
    }
}

impl Context {
    /// Sizes from the reports, else the matrix, else the defaults (64/64).
    pub fn new(set: &ReportSet, matrix: Option<Matrix>) -> Context {
        let (tx_size, rx_size) = set.sizes.unwrap_or_else(|| {
            matrix
                .as_ref()
                .map_or((64, 64), |m| (m.config.tx_size, m.config.rx_size))
        });
        let layered = match &matrix {
            Some(m) => m.config.rotation.is_some(),
            None => set.any_layer,
        };
        let ips = set
            .names
            .iter()
            .map(|name| {
                matrix.as_ref().map_or(Ip::V4, |m| {
                    m.index_of(name)
                        .map_or(Ip::V4, |i| m.hosts()[i as usize].ip())
                })
            })
            .collect();
        Context {
            layered,
            tx_size,
            rx_size,
            matrix,
            ips,
        }
    }

    /// The IP version of reported host `id`'s flows.
    pub fn ip(&self, id: u32) -> Ip {
        self.ips.get(id as usize).copied().unwrap_or_default()
    }
}

/// Percent `part` of `whole`; 0 when `whole` is 0.
pub fn percent(part: f64, whole: f64) -> f64 {
    if whole == 0.0 {
        0.0
    } else {
        part / whole * 100.0
    }
}

/// Packets over the span: requests sent, the replies to them, and the
/// requests their receivers counted (`None`: no receiver reported at all).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Packets {
    pub sent: f64,
    pub back: f64,
    pub arrived: Option<f64>,
    /// Requests that arrived and were left unanswered by plan (their sender
    /// sent past its matrix rate at the receiver): left out of `sent` and
    /// `arrived`, so that no loss figure counts them; the rates of replies
    /// and arrivals count them ([`Packets::returned`], [`Packets::arrival`]).
    pub refused: f64,
}

impl Packets {
    /// A pair's packets: its own counts, and the requests that arrived: what
    /// its receiver counted over the intervals both reported, and where the
    /// receiver wrote nothing, what came back (the loss put on the forward
    /// leg, so no return loss is made up). Reports without phase marks are
    /// read as the original reads them: the share the receiver counted where
    /// both reported speaks for the whole. Requests refused by plan are
    /// taken out of both legs.
    pub(crate) fn of_pair(set: &ReportSet, src: u32, dst: u32, p: &TxPair) -> Packets {
        let rx = set.rx.get(&(dst, src));
        let counted = rx.map_or(0.0, |rx| rx.arrived_seen);
        let arrived = if !set.span.marked && p.sent_seen > 0.0 {
            counted.min(p.sent_seen) / p.sent_seen * p.sent
        } else {
            counted.min(p.sent_seen) + (p.back - p.back_seen)
        };
        let refused = rx
            .map_or(0.0f64, |rx| rx.over_plan_seen)
            .min(arrived - p.back.min(arrived))
            .max(0.0);
        Packets {
            sent: p.sent - refused,
            back: p.back,
            arrived: Some(arrived - refused),
            refused,
        }
    }

    fn add(&mut self, o: Packets) {
        self.sent += o.sent;
        self.back += o.back;
        self.refused += o.refused;
        self.arrived = match (self.arrived, o.arrived) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }

    /// Replies back / requests sent, 0..=1 (None when nothing was sent).
    pub fn delivery(&self) -> Option<f64> {
        (self.sent > 0.0).then(|| (self.back / self.sent).min(1.0))
    }

    /// Requests arrived / requests sent, never below the round trip's.
    pub fn forward(&self) -> Option<f64> {
        let arrived = self.arrived?;
        let delivery = self.delivery()?;
        Some((arrived / self.sent).clamp(delivery, 1.0))
    }

    /// Replies back / every request sent, refused ones included, 0..=1:
    /// what a rate of replies follows from (None when nothing was sent).
    pub fn returned(&self) -> Option<f64> {
        let all = self.sent + self.refused;
        (all > 0.0).then(|| (self.back / all).min(1.0))
    }

    /// Requests arrived / every request sent, refused ones included (they
    /// arrived): what a rate of arrivals follows from.
    pub fn arrival(&self) -> Option<f64> {
        let all = self.sent + self.refused;
        let arrived = self.arrived? + self.refused;
        (all > 0.0).then(|| (arrived / all).clamp(self.returned().unwrap_or(0.0), 1.0))
    }
}

/// The fleet lines.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    pub requests: f64,
    /// Of `requests`, those IPv6 hosts sent (their headers are 20 bytes more).
    pub v6_requests: f64,
    pub request_payload: f64,
    pub replies: f64,
    pub reply_payload: f64,
    pub target: f64,
    /// Requests the receivers counted (the forward leg's truth); `None` when no
    /// receiver reported an rx row in the window (then the legs are unknown).
    pub delivered: Option<f64>,
    pub packets: Packets,
    pub rtt_avg: Option<f64>,
    /// Fleet-wide percentiles from merged histograms, when the reports carry them.
    pub exact: Option<(f64, f64, f64)>,
    /// The flow with the worst p99 (worst interval) and its p50/p99.
    pub worst_flow: Option<(u32, u32, Option<f64>, f64)>,
    pub rtt_max: Option<f64>,
    /// The smallest RTT of any reply, and the mean jitter over the replies
    /// (us; weighted as the average is).
    pub rtt_min: Option<f64>,
    pub jitter: Option<f64>,
    /// Replies and requests that arrived twice, and out of order (packets,
    /// over the span: the receivers' and the senders' counts).
    pub dup: f64,
    pub ooo: f64,
    /// The disks of a disk run (`None` when no host row has `disk_busy_pct`).
    pub disk: Option<FleetDisk>,
    /// Whether any host's report counts requests refused by plan (the
    /// `over_plan` column): else `packets.refused` is not measured.
    pub refused_counted: bool,
}

impl Fleet {
    /// Bits per second on the wire of `pps` of these flows' packets of
    /// `size` bytes: IPv4 and IPv6 in the shares the requests were sent.
    pub fn wire(&self, pps: f64, size: u32) -> f64 {
        let v6 = if self.requests > 0.0 {
            (self.v6_requests / self.requests).clamp(0.0, 1.0)
        } else {
            0.0
        };
        if v6 == 0.0 {
            wire_bits(pps, size, Ip::V4)
        } else if v6 == 1.0 {
            wire_bits(pps, size, Ip::V6)
        } else {
            wire_bits(pps * (1.0 - v6), size, Ip::V4) + wire_bits(pps * v6, size, Ip::V6)
        }
    }

    pub(crate) fn round_trip_loss(&self) -> f64 {
        self.packets.delivery().map_or(0.0, |d| (1.0 - d) * 100.0)
    }

    pub fn forward_loss(&self) -> Option<f64> {
        self.delivered?;
        Some((1.0 - self.packets.forward()?) * 100.0)
    }

    pub fn return_loss(&self) -> Option<f64> {
        Some((self.round_trip_loss() - self.forward_loss()?).max(0.0))
    }
}

pub fn fleet(set: &ReportSet, ctx: &Context) -> Fleet {
    let mut f = fleet_where(set, ctx, &|_, _| true);
    f.exact = set.fleet_rtt().and_then(|h| {
        Some((
            h.quantile_us(0.5)?,
            h.quantile_us(0.99)?,
            h.quantile_us(0.999)?,
        ))
    });
    f.disk = FleetDisk::of(set);
    f.refused_counted = set.hosts.values().any(|h| h.over_plan.is_some());
    f
}

/// The fleet lines over the pairs `keep` picks (src, dst): the same rules
/// as the whole fleet's. A layered run's rates come from the host rows, each
/// host's share of its sent packets that went to kept pairs. Percentiles
/// from histograms (`exact`) are the caller's: a host's histogram holds all
/// of its replies, kept or not.
fn fleet_where(set: &ReportSet, ctx: &Context, keep: &dyn Fn(u32, u32) -> bool) -> Fleet {
    let mut f = Fleet::default();
    let mut packets = Packets {
        arrived: Some(0.0),
        ..Packets::default()
    };
    let kept = || set.tx.iter().filter(|((src, dst), _)| keep(*src, *dst));
    for (&(src, dst), p) in kept() {
        packets.add(Packets::of_pair(set, src, dst, p));
    }
    f.packets = packets;
    if ctx.layered {
        for (&id, h) in &set.hosts {
            let (mut all, mut to_kept) = (0.0, 0.0);
            for (&(_, dst), p) in set.tx.range((id, 0)..=(id, u32::MAX)) {
                all += p.sent;
                if keep(id, dst) {
                    to_kept += p.sent;
                }
            }
            let share = if to_kept == all { 1.0 } else { to_kept / all };
            f.requests += h.pps.mean() * share;
            if ctx.ip(id) == Ip::V6 {
                f.v6_requests += h.pps.mean() * share;
            }
            f.request_payload += h.mbps.mean() * 1e6 * share;
            f.target += h.target.mean() * share;
        }
    } else {
        for (&(src, _), p) in kept() {
            f.requests += p.pps.mean();
            if ctx.ip(src) == Ip::V6 {
                f.v6_requests += p.pps.mean();
            }
            f.request_payload += p.mbps.mean() * 1e6;
            f.target += p.target.mean();
        }
    }
    // What came back and what arrived follow from the counts' ratios.
    f.replies = f.requests * packets.returned().unwrap_or(0.0);
    f.reply_payload = f.replies * f64::from(ctx.rx_size) * 8.0;
    f.delivered = (!set.rx.is_empty()).then(|| packets.arrival().map_or(0.0, |a| f.requests * a));
    let (mut weighted, mut weight) = (0.0, 0.0);
    let (mut jitter_weighted, mut jitter_weight) = (0.0, 0.0);
    for (&(src, dst), p) in kept() {
        weighted += p.rtt_weighted;
        weight += p.rtt_weight;
        jitter_weighted += p.jitter_weighted;
        jitter_weight += p.jitter_weight;
        f.rtt_min = min_opt(f.rtt_min, p.rtt_min);
        f.dup += p.dup;
        f.ooo += p.ooo;
        if let Some(rx) = set.rx.get(&(dst, src)) {
            f.dup += rx.dup;
            f.ooo += rx.ooo;
        }
        if let Some(p99) = p.p99
            && f.worst_flow.is_none_or(|w| p99 > w.3)
        {
            f.worst_flow = Some((src, dst, p.p50, p99));
        }
        f.rtt_max = max_opt(f.rtt_max, p.rtt_max);
    }
    f.rtt_avg = (weight > 0.0).then(|| weighted / weight);
    f.jitter = (jitter_weight > 0.0).then(|| jitter_weighted / jitter_weight);
    f
}

/// One direction of a pool-to-pool run: the fleet lines over its flows.
#[derive(Debug, Clone)]
pub struct PoolFigures {
    pub from: String,
    pub to: String,
    /// The pools' hosts, by name.
    pub from_hosts: Vec<String>,
    pub to_hosts: Vec<String>,
    pub senders: usize,
    pub receivers: usize,
    /// Pairs of the direction that reported in the span.
    pub flows: usize,
    /// Its figures; `exact` only when every sender's replies all came from
    /// the other pool (then the senders' histograms are this direction's).
    pub fleet: Fleet,
    /// Its flows' delivered rates, spread.
    pub spread: FlowSpread,
}

/// The directions of a pool-to-pool matrix (none otherwise).
pub fn pools(set: &ReportSet, ctx: &Context, flows: &[FlowFigures]) -> Vec<PoolFigures> {
    let Some(m) = &ctx.matrix else {
        return Vec::new();
    };
    let pools = m.pools();
    let ids = |pool: usize| -> std::collections::HashSet<u32> {
        pools.pools[pool]
            .members
            .iter()
            .filter_map(|&h| set.id_of(&m.hosts()[h as usize].name))
            .collect()
    };
    pools
        .directions()
        .into_iter()
        .map(|(from, to)| {
            let (senders, receivers) = (ids(from), ids(to));
            let keep = |s: u32, d: u32| senders.contains(&s) && receivers.contains(&d);
            let mut fleet = fleet_where(set, ctx, &keep);
            let only_across = senders.iter().all(|&s| {
                set.tx
                    .range((s, 0)..=(s, u32::MAX))
                    .all(|((_, d), _)| receivers.contains(d))
            });
            if only_across {
                fleet.exact = set.merged_rtt(|h| senders.contains(&h)).and_then(|h| {
                    Some((
                        h.quantile_us(0.5)?,
                        h.quantile_us(0.99)?,
                        h.quantile_us(0.999)?,
                    ))
                });
            }
            let names = |pool: usize| -> Vec<String> {
                pools.pools[pool]
                    .members
                    .iter()
                    .map(|&h| m.hosts()[h as usize].name.clone())
                    .collect()
            };
            PoolFigures {
                from: pools.pools[from].name.clone(),
                to: pools.pools[to].name.clone(),
                from_hosts: names(from),
                to_hosts: names(to),
                senders: pools.pools[from].members.len(),
                receivers: pools.pools[to].members.len(),
                flows: set.tx.keys().filter(|(s, d)| keep(*s, *d)).count(),
                fleet,
                spread: FlowSpread::of(
                    flows
                        .iter()
                        .filter(|f| keep(f.host, f.peer))
                        .map(|f| (f.arrived, f.back)),
                ),
            }
        })
        .collect()
}

/// One direction of a disk (reads or writes): bytes per second, operations
/// per second, mean latency per operation and p99 (us). `None`: not measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DiskDir {
    pub bytes_per_s: Option<f64>,
    pub iops: Option<f64>,
    pub avg_us: Option<f64>,
    /// A host's: its worst interval's p99; the fleet's: the worst host's.
    pub p99_us: Option<f64>,
}

impl DiskDir {
    fn of(a: &DiskDirAgg) -> DiskDir {
        DiskDir {
            bytes_per_s: a.mb_s.get().map(|mb| mb * 1e6),
            iops: a.iops.get(),
            avg_us: a.avg_us(),
            p99_us: a.p99,
        }
    }
}

/// A host's disk over the span (means of its host rows).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostDisk {
    pub read: DiskDir,
    pub write: DiskDir,
    /// Mean `disk_busy_pct`: the busiest worker's share of time in disk I/O.
    pub busy: Option<f64>,
    /// Disk operations each worker kept in flight (`--disk-depth`); `None`
    /// in reports that do not say (one each, before the flag).
    pub depth: Option<u32>,
}

impl HostDisk {
    /// `None` when none of the host's disk cells was measured: a host
    /// without disk figures has none, never zeros.
    pub fn of(a: &DiskAgg) -> Option<HostDisk> {
        a.measured().then(|| HostDisk {
            read: DiskDir::of(&a.read),
            write: DiskDir::of(&a.write),
            busy: a.busy.get(),
            depth: a.depth,
        })
    }
}

/// The fleet's disks: Σ of the host means, the IOPS-weighted mean of their
/// latencies, the worst host's p99 (percentiles are not averaged), and the
/// busiest host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetDisk {
    pub read: DiskDir,
    pub write: DiskDir,
    /// The hosts whose p99 the fleet's is.
    pub read_p99_host: Option<u32>,
    pub write_p99_host: Option<u32>,
    /// The host with the highest mean `disk_busy_pct`, and that mean.
    pub busiest: (u32, f64),
}

/// Σ and weighted means of one direction over the hosts that measured it.
fn fleet_dir(hosts: &[(u32, HostDisk)], side: fn(&HostDisk) -> DiskDir) -> (DiskDir, Option<u32>) {
    let mut d = DiskDir::default();
    let (mut weighted, mut weight, mut worst) = (0.0, 0.0, None);
    let sum = |total: &mut Option<f64>, v: Option<f64>| {
        if let Some(v) = v {
            *total = Some(total.unwrap_or(0.0) + v);
        }
    };
    for (id, h) in hosts {
        let s = side(h);
        sum(&mut d.bytes_per_s, s.bytes_per_s);
        sum(&mut d.iops, s.iops);
        if let (Some(avg), Some(ops)) = (s.avg_us, s.iops) {
            weighted += avg * ops;
            weight += ops;
        }
        if let Some(p99) = s.p99_us
            && d.p99_us.is_none_or(|w| p99 > w)
        {
            d.p99_us = Some(p99);
            worst = Some(*id);
        }
    }
    d.avg_us = (weight > 0.0).then(|| weighted / weight);
    (d, worst)
}

impl FleetDisk {
    /// `None` unless some host row has `disk_busy_pct` (a disk run).
    fn of(set: &ReportSet) -> Option<FleetDisk> {
        let hosts: Vec<(u32, HostDisk)> = set
            .hosts
            .iter()
            .filter_map(|(&id, h)| HostDisk::of(&h.disk).map(|d| (id, d)))
            .collect();
        // The busiest host; of equals, the first by name.
        let busiest = hosts
            .iter()
            .filter_map(|(id, h)| h.busy.map(|b| (*id, b)))
            .fold(None, |best: Option<(u32, f64)>, (id, b)| match best {
                Some((bid, bb)) if bb > b || (bb == b && set.name(bid) < set.name(id)) => best,
                _ => Some((id, b)),
            })?;
        let (read, read_p99_host) = fleet_dir(&hosts, |h| h.read);
        let (write, write_p99_host) = fleet_dir(&hosts, |h| h.write);
        Some(FleetDisk {
            read,
            write,
            read_p99_host,
            write_p99_host,
            busiest,
        })
    }
}

/// A host's line of the per-host table (and its export overlays).
#[derive(Debug, Clone, Default)]
pub struct HostFigures {
    pub id: u32,
    pub sent: f64,
    pub back: f64,
    pub serving: f64,
    /// Replies this host sent to the requests it served.
    pub served_replies: f64,
    pub egress_bits: f64,
    pub loss: f64,
    /// RTT p99 of every reply this host received in the span: exact, from its
    /// host rows' histograms (`rtt_exact`), else its worst flow's worst interval.
    pub rtt_p99: Option<f64>,
    pub rtt_exact: bool,
    pub rtt_p50: Option<f64>,
    pub rtt_avg: Option<f64>,
    pub rtt_max: Option<f64>,
    pub cpu: Option<f64>,
    pub cpu_core: Option<f64>,
    pub agent_cpu: Option<f64>,
    pub target: f64,
    pub workers: Option<u32>,
    /// Tx pairs in the window.
    pub peers: usize,
    pub nticks: u64,
    pub has_rx: bool,
    /// Requests this host's peers counted arriving from it, when every peer
    /// reported (the forward leg); `None` when some peer did not.
    pub arrived: Option<f64>,
    /// The peers that left `arrived` unknown: they wrote no rx row about
    /// this host (empty when it is known).
    pub forward_gaps: Vec<u32>,
    pub packets: Packets,
    pub dup: f64,
    pub ooo: f64,
    pub stray: f64,
    /// Requests it left unanswered by plan, as a responder (`None`: its
    /// report does not count them).
    pub over_plan: Option<f64>,
    /// Datagrams the kernel dropped at this host's full sockets over the span
    /// (requests and replies; `None` in reports that do not count them).
    pub dropped: Option<f64>,
    /// Its disk, in a disk run (`None`: its disk cells are blank).
    pub disk: Option<HostDisk>,
    /// Bits per second its interface sent (its byte counter: frames without
    /// preamble, FCS and gap), where measured.
    pub nic_egress_bits: Option<f64>,
    /// Packets its agent handed the kernel that its interface never sent,
    /// and packets its interface received that its agent never read, over
    /// the span (`None`: not measured, or coalesced traffic the interface
    /// counts per message).
    pub tx_unsent: Option<f64>,
    pub rx_unread: Option<f64>,
    /// Its replies' smallest RTT, and their mean jitter (us).
    pub rtt_min: Option<f64>,
    pub jitter: Option<f64>,
}

impl HostFigures {
    /// Delivery (back/sent %) for sorting; a host that sent nothing sorts last.
    pub fn delivery(&self) -> f64 {
        self.packets.delivery().map_or(100.0, |d| d * 100.0)
    }

    pub fn forward_loss(&self) -> Option<f64> {
        self.arrived?;
        (self.sent > 0.0).then(|| (1.0 - self.packets.forward().unwrap_or(1.0)) * 100.0)
    }

    pub fn return_loss(&self) -> Option<f64> {
        self.arrived?;
        (self.sent > 0.0).then(|| {
            let forward = self.packets.forward().unwrap_or(1.0);
            let delivery = self.packets.delivery().unwrap_or(1.0);
            ((forward - delivery) * 100.0).max(0.0)
        })
    }
}

/// Every host of the window, worst delivery first (ties by name).
pub fn hosts(set: &ReportSet, ctx: &Context) -> Vec<HostFigures> {
    let mut out: Vec<HostFigures> = set
        .window_hosts()
        .into_iter()
        .map(|id| host(set, ctx, id))
        .collect();
    out.sort_by(|a, b| {
        a.delivery()
            .total_cmp(&b.delivery())
            .then_with(|| set.name(a.id).cmp(set.name(b.id)))
    });
    out
}

fn host(set: &ReportSet, ctx: &Context, id: u32) -> HostFigures {
    let own = set.hosts.get(&id);
    let ticks = own.map_or(0, |h| h.nticks);
    let mut h = HostFigures {
        id,
        nticks: ticks,
        workers: own.and_then(|h| h.workers),
        cpu: own.and_then(|h| h.cpu.get()),
        cpu_core: own.and_then(|h| h.cpu_core.get()),
        agent_cpu: own.and_then(|h| h.agent_cpu.get()),
        stray: own.map_or(0.0, |h| h.stray),
        over_plan: own.and_then(|h| h.over_plan),
        dropped: own.and_then(|h| match (h.req_drops, h.rep_drops) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        }),
        disk: own.and_then(|h| HostDisk::of(&h.disk)),
        nic_egress_bits: own.filter(|h| h.nic.measured()).and_then(|h| {
            let seconds = h.nic.intervals as f64 * set.interval.unwrap_or(1).max(1) as f64;
            (seconds > 0.0).then(|| h.nic.tx_bytes * 8.0 / seconds)
        }),
        tx_unsent: own.and_then(|h| h.nic.tx_gap(ctx.ip(id).counted_header_bytes())),
        rx_unread: own.and_then(|h| h.nic.rx_gap(ctx.ip(id).counted_header_bytes())),
        rtt_min: own.and_then(|h| h.rtt_min),
        jitter: own.and_then(|h| h.jitter.get()),
        ..HostFigures::default()
    };
    let tx: Vec<(&(u32, u32), &TxPair)> = set.tx.range((id, 0)..=(id, u32::MAX)).collect();
    h.peers = tx.len();
    let (mut weighted, mut weight) = (0.0, 0.0);
    let mut packets = Packets {
        arrived: Some(0.0),
        ..Packets::default()
    };
    let mut worst_p99 = None;
    for &(&(_, peer), p) in &tx {
        if !ctx.layered {
            h.sent += p.pps.mean();
            h.target += p.target.mean();
        }
        packets.add(Packets::of_pair(set, id, peer, p));
        worst_p99 = max_opt(worst_p99, p.p99);
        h.rtt_p50 = max_opt(h.rtt_p50, p.p50);
        h.rtt_max = max_opt(h.rtt_max, p.rtt_max);
        weighted += p.rtt_weighted;
        weight += p.rtt_weight;
        h.dup += p.dup;
        h.ooo += p.ooo;
    }
    h.packets = packets;
    h.rtt_avg = (weight > 0.0).then(|| weighted / weight);
    // Exact, from the host's histograms, when its rows carry them.
    match own.filter(|o| o.rtt_rows > 0) {
        Some(o) => {
            h.rtt_p99 = o.rtt.quantile_us(0.99);
            h.rtt_p50 = o.rtt.quantile_us(0.5);
            h.rtt_exact = true;
        }
        None => h.rtt_p99 = worst_p99,
    }
    if ctx.layered
        && let Some(own) = own
    {
        h.sent = own.pps.mean();
        h.target = own.target.mean();
    }
    h.back = h.sent * packets.returned().unwrap_or(0.0);
    for (_, p) in set.rx.range((id, 0)..=(id, u32::MAX)) {
        h.has_rx = true;
        if ctx.layered {
            if ticks > 0 {
                h.serving += p.sum_pps / ticks as f64;
                h.served_replies += p.sum_rep_pps / ticks as f64;
            }
        } else {
            h.serving += p.pps.mean();
            h.served_replies += p.rep_pps.mean();
        }
        h.dup += p.dup;
        h.ooo += p.ooo;
    }
    let ip = ctx.ip(id);
    h.egress_bits =
        wire_bits(h.sent, ctx.tx_size, ip) + wire_bits(h.served_replies, ctx.rx_size, ip);
    h.loss = packets.delivery().map_or(0.0, |d| (1.0 - d) * 100.0);
    // The forward leg is known when every peer it sent to counted what
    // arrived from it (an rx row about it).
    for &(&(_, peer), _) in &tx {
        if !set.rx.contains_key(&(peer, id)) {
            h.forward_gaps.push(peer);
        }
    }
    let known = !tx.is_empty() && h.forward_gaps.is_empty();
    h.arrived = known.then(|| h.sent * packets.forward().unwrap_or(1.0));
    h
}

/// A flow of the worst-flows list.
#[derive(Debug, Clone)]
pub struct FlowFigures {
    pub host: u32,
    pub peer: u32,
    pub sent: f64,
    pub back: f64,
    /// Replies back / requests sent, 0..=1.
    pub delivery: f64,
    /// Requests the peer counted arriving, when it reported.
    pub arrived: Option<f64>,
    pub p99: Option<f64>,
    pub p50: Option<f64>,
    pub layer: Option<u32>,
    pub loss: f64,
    /// Its packets over the span: what the rates and ratios come from.
    pub packets: Packets,
    /// Its smallest RTT and its mean jitter (us).
    pub rtt_min: Option<f64>,
    pub jitter: Option<f64>,
    pub dup: f64,
    pub ooo: f64,
    /// Its streams over the span, in order of source port.
    pub streams: Vec<mx_report::streams::StreamCounts>,
}

impl FlowFigures {
    /// A flow from `host` to `peer` with these streams and no other figure
    /// (the tests of what is read from the streams alone).
    #[cfg(test)]
    pub(crate) fn of_streams(
        host: u32,
        peer: u32,
        streams: Vec<mx_report::streams::StreamCounts>,
    ) -> FlowFigures {
        FlowFigures {
            host,
            peer,
            sent: 0.0,
            back: 0.0,
            delivery: 0.0,
            arrived: None,
            p99: None,
            p50: None,
            layer: None,
            loss: 0.0,
            packets: Packets::default(),
            rtt_min: None,
            jitter: None,
            dup: 0.0,
            ooo: 0.0,
            streams,
        }
    }

    /// Percent of its requests that never reached the receiver (`None`:
    /// the receiver wrote no rx rows).
    pub fn forward_loss(&self) -> Option<f64> {
        self.arrived?;
        Some((1.0 - self.packets.forward()?) * 100.0)
    }

    /// Percent of the requests that arrived whose replies never came back.
    pub fn return_loss(&self) -> Option<f64> {
        self.arrived?;
        let p = &self.packets;
        let arrived = p.arrived?.clamp(p.back.min(p.sent), p.sent);
        (arrived > 0.0).then(|| (1.0 - p.back.min(arrived) / arrived) * 100.0)
    }
}

/// Every flow that sent in the window, worst delivery first.
pub fn flows(set: &ReportSet, _ctx: &Context) -> Vec<FlowFigures> {
    let mut out = Vec::new();
    for (&(host, peer), p) in &set.tx {
        let sent = p.pps.mean();
        if sent <= 0.0 {
            continue;
        }
        let packets = Packets::of_pair(set, host, peer, p);
        let delivery = packets.delivery().unwrap_or(0.0);
        let reported = set.wrote_rx_rows(peer);
        let arrived = reported
            .then(|| packets.arrival())
            .flatten()
            .map(|a| sent * a);
        out.push(FlowFigures {
            host,
            peer,
            sent,
            back: sent * packets.returned().unwrap_or(0.0),
            delivery,
            arrived,
            p99: p.p99,
            p50: p.p50,
            layer: p.layer,
            loss: (100.0 - delivery * 100.0).max(0.0),
            packets,
            rtt_min: p.rtt_min,
            jitter: p.jitter(),
            // Replies that came back twice, and requests that arrived twice.
            dup: p.dup + set.rx.get(&(peer, host)).map_or(0.0, |r| r.dup),
            ooo: p.ooo + set.rx.get(&(peer, host)).map_or(0.0, |r| r.ooo),
            streams: p.streams.values().copied().collect(),
        });
    }
    out.sort_by(|a, b| {
        a.delivery
            .total_cmp(&b.delivery)
            .then_with(|| set.name(a.host).cmp(set.name(b.host)))
            .then_with(|| set.name(a.peer).cmp(set.name(b.peer)))
    });
    out
}

/// Every figure of one summary, computed once: the fleet's, each host's and
/// each flow's. The text, the advice and the export read these.
pub struct Figures {
    pub fleet: Fleet,
    pub hosts: Vec<HostFigures>,
    pub flows: Vec<FlowFigures>,
    /// A pool-to-pool run's directions (empty otherwise).
    pub pools: Vec<PoolFigures>,
    /// Every flow's delivered rate, spread.
    pub spread: FlowSpread,
}

impl Figures {
    pub fn compute(set: &ReportSet, ctx: &Context) -> Figures {
        let flows = flows(set, ctx);
        Figures {
            fleet: fleet(set, ctx),
            hosts: hosts(set, ctx),
            pools: pools(set, ctx, &flows),
            spread: FlowSpread::of(flows.iter().map(|f| (f.arrived, f.back))),
            flows,
        }
    }
}

/// Wire rates of the fleet lines, in bits per second.
pub fn wire(fleet: &Fleet, ctx: &Context) -> (f64, f64) {
    (
        fleet.wire(fleet.requests, ctx.tx_size),
        fleet.wire(fleet.replies, ctx.rx_size),
    )
}
