//! The reporter: merges the workers' batches for one tick into report rows (one
//! per peer, whatever the worker and stream count), appends them to report.csv,
//! flushes, and prints the interval's status line.
//! The host row also says where the interval sat in the run (`phase`), and
//! what the host's kernel counted about packets the agent never saw.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::clock::{RunClock, phase_of};
use super::counters::{Batch, RxCounts, SocketDrops, Ttls};
use super::cpu::{CpuSampler, CpuShares};
use super::disk::stats::DiskStats;
use super::host_counters::{HostCounters, HostDelta};
use super::legs::LegCounts;
use super::metrics::Metrics;
use super::plan::AgentPlan;
use super::report_keep::{self, Keep};
use mx_base::units;
use mx_report::row::header_line;
use mx_report::rtt::MergedRtt;
use mx_report::streams::{self, StreamCounts};
use mx_report::{Dir, Phase, ReportRow};

/// One tx row in the making: a (peer, layer) group of flow sockets.
#[derive(Default)]
struct TxRow {
    layer: Option<u32>,
    target: f64,
    unpaced: bool,
    pps: f64,
    mbps: f64,
    rep_pps: f64,
    rep_mbps: f64,
    rtt_sum_ns: u64,
    rtt_count: u64,
    rtt: MergedRtt,
    rtt_max_ns: u64,
    rtt_min_ns: Option<u64>,
    jitter_sum_ns: u64,
    jitter_count: u64,
    dup: u64,
    ooo: u64,
    pkts: u64,
    rep_pkts: u64,
    late: u64,
    send_errors: u64,
    /// The TTLs its replies arrived with.
    ttls: Ttls,
    /// Both legs as the flows' replies told them; `None`: no flow could.
    legs: Option<LegCounts>,
    /// The same figures per stream (flow socket), for the `streams` cell.
    streams: Vec<StreamCounts>,
}

/// One rx row in the making.
#[derive(Default)]
struct RxRow {
    pps: f64,
    mbps: f64,
    rep_pps: f64,
    rep_mbps: f64,
    counts: RxCounts,
}

/// One tick's batches, merged: rows per peer, and what the host row sums.
#[derive(Default)]
struct Merged {
    tx: BTreeMap<(String, String), TxRow>,
    rx: BTreeMap<String, RxRow>,
    stray: u64,
    drops: SocketDrops,
    behind_ns: u64,
    busiest_worker: Option<f64>,
    layer: Option<u32>,
    /// Disk runs: the host's disk figures, summed over the workers.
    disk: Option<DiskFigures>,
    /// The rate scale every worker ran the interval at; `None` when none
    /// was scaled, or when they were not all at one (which no reader may
    /// take for either).
    rate_scale: Option<f64>,
    /// Datagrams sent and read in coalesced messages.
    gso_pkts: u64,
    gro_pkts: u64,
}

/// A host's disk in one interval: rates summed over the workers (each over
/// its own sending time, as its packet rates), latencies from the merged
/// work, and the busiest worker's share of its disk threads' time in I/O
/// (100%: every one of its `--disk-depth` operations always in flight, its
/// queue full).
#[derive(Default)]
struct DiskFigures {
    stats: DiskStats,
    read_iops: f64,
    read_mb_s: f64,
    write_iops: f64,
    write_mb_s: f64,
    busy_pct: f64,
}

impl DiskFigures {
    fn add(&mut self, stats: &DiskStats, elapsed: f64, depth: usize) {
        self.read_iops += stats.read.iops(elapsed);
        self.read_mb_s += stats.read.mb_s(elapsed);
        self.write_iops += stats.write.iops(elapsed);
        self.write_mb_s += stats.write.mb_s(elapsed);
        self.busy_pct = self
            .busy_pct
            .max(stats.busy_seconds() / (elapsed * depth.max(1) as f64) * 100.0)
            .min(100.0);
        self.stats.merge(stats);
    }
}

impl Merged {
    /// Requests left unanswered by plan, from every peer.
    fn over_plan(&self) -> u64 {
        self.rx.values().map(|r| r.counts.over_plan).sum()
    }
}

/// The tx rows' totals, for the host row.
#[derive(Default)]
struct Totals {
    sum: TxRow,
    rtt: MergedRtt,
    live_peers: usize,
}

/// Round-trip loss of a count: `None` when nothing was sent. Not clamped
/// (the original tool wrote a negative loss as it was), though with requests
/// and replies counted in the same interval it cannot go below 0.
fn loss_pct(sent: u64, back: u64) -> Option<f64> {
    (sent > 0).then(|| 100.0 - back as f64 / sent as f64 * 100.0)
}

/// The `hops` and `hops_max` cells of a row whose datagrams (replies on a
/// tx row, requests on an rx row: both came from the peer) arrived with
/// `ttls`; blank when none was read.
fn hops(ttls: &Ttls) -> (Option<u32>, Option<u32>) {
    ttls.hops().map_or((None, None), |(few, most)| {
        (Some(few.into()), Some(most.into()))
    })
}

/// A tick's key: its label in whole milliseconds (labels of sub-second
/// intervals are not whole seconds).
pub(crate) fn tick_key(tick: f64) -> i64 {
    (tick * 1000.0).round() as i64
}

/// The smaller of two optional minimums.
fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Mean absolute difference between successive RTTs, in us (`None`: no
/// reply had one before it).
fn jitter_us(sum_ns: u64, count: u64) -> Option<f64> {
    (count > 0).then(|| sum_ns as f64 / count as f64 / 1000.0)
}

/// Rate per second and Mbit/s of payload for a count over `elapsed` seconds.
fn rates(packets: u64, bytes: u64, elapsed: f64) -> (f64, f64) {
    (packets as f64 / elapsed, bytes as f64 * 8.0 / elapsed / 1e6)
}

/// The rate scale of every batch, when they agree (none scaled: `None`).
fn one_scale(batches: &[Batch]) -> Option<f64> {
    let first = batches.first()?.rate_scale;
    batches
        .iter()
        .all(|b| b.rate_scale == first)
        .then_some(first)
        .flatten()
}

pub(crate) struct Reporter {
    host: String,
    /// The print of this host's traffic (`matrix::run_print`), on every
    /// host row: what a summary checks the matrix beside it against.
    matrix_fp: String,
    size: u32,
    rep_size: u32,
    workers: usize,
    /// Disk operations each worker keeps in flight, in a disk run.
    disk_depth: Option<usize>,
    interval: f64,
    names: Vec<String>,
    file: File,
    cpu: CpuSampler,
    counters: HostCounters,
    clock: Arc<RunClock>,
    /// Whether a complete interval has been written yet (the first one is an
    /// edge unless the flows began exactly at its start).
    wrote_one: bool,
    /// Report bytes the disk has not taken yet (a full disk), oldest first.
    /// They go to the file before anything newer, so the report stays whole.
    unwritten: Vec<u8>,
    /// What the last write error was, while bytes are held.
    stalled: Option<String>,
    /// A line for the log about the report's state, once per change.
    news: Option<String>,
    /// Intervals dropped because too much was already held, since the last
    /// time the disk took everything.
    dropped: u64,
    /// `--metrics`: each interval's rows are published there too.
    metrics: Option<Arc<Metrics>>,
    /// The report's path, its bound (`--keep-report`), its size and the label of
    /// its oldest row.
    path: PathBuf,
    keep: Keep,
    report_bytes: u64,
    oldest: Option<i64>,
}

/// Most report bytes held in memory while the disk refuses them (~1 million
/// rows): past this the newest interval's rows are dropped, and the log says so.
const MAX_UNWRITTEN: usize = 256 << 20;

impl Reporter {
    /// Opens `path` for appending, writing the header if the file is new or empty.
    pub fn open(
        path: &Path,
        plan: &AgentPlan,
        clock: Arc<RunClock>,
        metrics: Option<Arc<Metrics>>,
        keep: Keep,
    ) -> io::Result<Reporter> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        if file.metadata()?.len() == 0 {
            file.write_all(header_line().as_bytes())?;
        }
        let mut cpu = CpuSampler::default();
        cpu.sample();
        Ok(Reporter {
            host: plan.matrix.hosts()[plan.me as usize].name.clone(),
            matrix_fp: mx_matrix::run_print::run_print(&plan.matrix, plan.me),
            size: plan.matrix.config.tx_size,
            rep_size: plan.matrix.config.rx_size,
            workers: plan.workers,
            disk_depth: plan.disk.as_ref().map(|d| d.depth),
            interval: plan.interval,
            names: plan.matrix.hosts().iter().map(|h| h.name.clone()).collect(),
            file,
            cpu,
            counters: HostCounters::start(super::identity::traffic_interface(
                plan.local_ip,
                &plan.peer_addrs,
            )),
            clock,
            wrote_one: false,
            unwritten: Vec::new(),
            stalled: None,
            news: None,
            dropped: 0,
            metrics,
            path: path.to_path_buf(),
            keep,
            report_bytes: file_size(path),
            oldest: report_keep::oldest_label(path),
        })
    }

    /// The interface whose counters the host rows carry.
    pub fn interface(&self) -> Option<&str> {
        self.counters.interface()
    }

    /// The flows begin now: the host's counters count from here.
    pub(crate) fn flows_begin(&mut self) {
        self.counters.rebase();
    }

    /// The interval ending at `tick` (wall-clock label) ends now: the host's
    /// counters are sampled for it.
    pub(crate) fn tick_now(&mut self, tick: f64) {
        self.counters.mark(tick_key(tick));
    }

    fn row(&self, ts: i64, dir: Dir, peer: &str) -> ReportRow {
        ReportRow {
            ts,
            host: self.host.clone(),
            dir: Some(dir),
            peer: peer.to_string(),
            size: self.size,
            rep_size: self.rep_size,
            ..ReportRow::default()
        }
    }

    /// Writes the rows of one tick (the batches of every worker that sent one
    /// for it). With `complete` (every worker reported) the host row is
    /// written and the status line returned; otherwise only the per-peer rows,
    /// and a line saying the interval was partial. An interval that began at
    /// or after the run's planned end is not written at all.
    pub(crate) fn write_tick(&mut self, batches: &[Batch], complete: bool) -> Option<String> {
        let tick = batches.first()?.tick;
        let ts = tick.floor() as i64;
        if self
            .clock
            .end_wall()
            .is_some_and(|end| tick - self.interval >= end - 0.001)
        {
            return None;
        }
        let merged = self.merge(batches);
        let mut out = String::new();
        let totals = self.write_tx_rows(ts, &merged, &mut out);
        let serving = self.write_rx_rows(ts, &merged, &mut out);
        let cpu = self.cpu.sample();
        let host = self.counters.sample(tick_key(tick));
        let status = if complete {
            let first = !self.wrote_one;
            let phase = phase_of(
                tick,
                self.interval,
                self.clock.started_wall().unwrap_or(tick - self.interval),
                self.clock.end_wall(),
                first,
            );
            self.wrote_one = true;
            let mut row = self.host_row(ts, &merged, &totals, cpu, host, phase);
            // The first host row says which command began the flows: a
            // summary tells a restart by `mx reload` from a late host by it.
            if first {
                row.began_by = self.clock.began_by();
            }
            if let Some(metrics) = &self.metrics {
                metrics.host_row(&row, &totals.rtt);
            }
            row.write_csv(&mut out);
            self.status_line(&row, &merged, &totals, serving, phase)
        } else {
            format!(
                "{} partial interval: {} of {} workers reported -- per-peer rows written, host totals skipped",
                units::log_stamp(ts),
                batches.len(),
                self.workers
            )
        };
        self.append(ts, out.as_bytes());
        if let Some(metrics) = &self.metrics {
            metrics.interval_written(tick);
        }
        self.keep_bound(ts);
        Some(status)
    }

    /// The workers' batches of one tick, merged per peer (and layer).
    fn merge(&self, batches: &[Batch]) -> Merged {
        // How far a peer's requests may widen an interval's span, either way.
        let interval_ns = (self.interval * 1e9) as u64;
        let mut m = Merged {
            rate_scale: one_scale(batches),
            ..Merged::default()
        };
        for batch in batches {
            let (elapsed, sending) = (batch.elapsed, batch.sending);
            m.stray += batch.stray;
            m.drops.requests += batch.drops.requests;
            m.drops.replies += batch.drops.replies;
            m.behind_ns = m.behind_ns.max(batch.behind_ns);
            m.gso_pkts += batch.gso_pkts;
            m.gro_pkts += batch.gro_pkts;
            m.layer = m.layer.or(batch.layer);
            if let Some(disk) = &batch.disk {
                // Over the seconds the flows sent, as the rows' packet rates
                // are: each payload read or written is one of their packets.
                let over = if sending > 0.0 { sending } else { elapsed };
                let depth = self.disk_depth.unwrap_or(1);
                m.disk.get_or_insert_default().add(disk, over, depth);
            }
            m.busiest_worker = Some(
                m.busiest_worker
                    .unwrap_or(0.0)
                    .max(batch.cpu / elapsed * 100.0),
            );
            for f in &batch.flows {
                let layer_text = f.layer.map_or(String::new(), |l| l.to_string());
                let key = (self.names[f.peer as usize].clone(), layer_text);
                let row = m.tx.entry(key).or_default();
                row.layer = f.layer;
                match f.target {
                    Some(rate) => row.target += rate,
                    None => row.unpaced = true,
                }
                let (pps, mbps) = rates(f.counts.sent, f.counts.sent_bytes, sending);
                let (rep_pps, rep_mbps) = rates(f.counts.replies, f.counts.reply_bytes, sending);
                row.pps += pps;
                row.mbps += mbps;
                row.rep_pps += rep_pps;
                row.rep_mbps += rep_mbps;
                row.pkts += f.counts.sent;
                row.rep_pkts += f.counts.replies;
                row.late += f.counts.late;
                row.send_errors += f.counts.send_errors;
                row.ttls.add(&f.counts.ttls);
                row.rtt_sum_ns += f.counts.rtt_sum_ns;
                row.rtt_count += f.counts.rtt_count;
                row.rtt.add(&f.rtt);
                row.rtt_max_ns = row.rtt_max_ns.max(f.rtt_max_ns);
                row.rtt_min_ns = min_opt(row.rtt_min_ns, f.rtt_min_ns);
                row.jitter_sum_ns += f.counts.jitter_sum_ns;
                row.jitter_count += f.counts.jitter_count;
                row.dup += f.counts.dup;
                row.ooo += f.counts.ooo;
                if let Some(legs) = &f.legs {
                    row.legs.get_or_insert_default().add(legs);
                }
                row.streams.push(StreamCounts {
                    sport: f.sport,
                    sent: f.counts.sent,
                    replies: f.counts.replies,
                    legs: f.legs,
                });
            }
            for (peer, counts) in &batch.rx {
                let row = m.rx.entry(self.names[*peer as usize].clone()).or_default();
                // Over the time they arrived in: each request is counted in
                // the interval its sender sent it in.
                let span = batch.span.seconds_arriving(&counts.arrivals, interval_ns);
                let (pps, mbps) = rates(counts.requests, counts.request_bytes, span);
                let (rep_pps, rep_mbps) = rates(counts.replies, counts.reply_bytes, span);
                row.pps += pps;
                row.mbps += mbps;
                row.rep_pps += rep_pps;
                row.rep_mbps += rep_mbps;
                row.counts.add(counts);
            }
        }
        for row in m.tx.values_mut() {
            row.streams.sort_unstable_by_key(|s| s.sport);
        }
        m
    }

    /// One tx row per peer (and layer); returns their totals.
    fn write_tx_rows(&self, ts: i64, m: &Merged, out: &mut String) -> Totals {
        let mut t = Totals::default();
        for ((peer, _), row) in &m.tx {
            let mut r = self.row(ts, Dir::Tx, peer);
            r.layer = row.layer;
            r.target_pps = (!row.unpaced).then_some(row.target);
            r.pps = Some(row.pps);
            r.mbps = Some(row.mbps);
            r.loss_pct = loss_pct(row.pkts, row.rep_pkts);
            r.rep_pps = Some(row.rep_pps);
            r.rep_mbps = Some(row.rep_mbps);
            if row.rtt_count > 0 {
                r.rtt_avg_us = Some(row.rtt_sum_ns as f64 / row.rtt_count as f64 / 1000.0);
            }
            r.rtt_p50_us = row.rtt.quantile_us(0.50);
            r.rtt_p99_us = row.rtt.quantile_us(0.99);
            r.rtt_p999_us = row.rtt.quantile_us(0.999);
            r.rtt_max_us = (row.rtt_count > 0).then(|| row.rtt_max_ns as f64 / 1000.0);
            r.rtt_min_us = row.rtt_min_ns.map(|ns| ns as f64 / 1000.0);
            r.jitter_us = jitter_us(row.jitter_sum_ns, row.jitter_count);
            r.dup_pkts = Some(row.dup);
            r.ooo_pkts = Some(row.ooo);
            r.pkts = Some(row.pkts);
            r.rep_pkts = Some(row.rep_pkts);
            r.late_pkts = Some(row.late);
            r.send_errors = Some(row.send_errors);
            (r.hops, r.hops_max) = hops(&row.ttls);
            r.rate_scale = m.rate_scale;
            if let Some(legs) = row.legs {
                r.settled_pkts = Some(legs.settled);
                r.fwd_lost_pkts = Some(legs.forward_lost);
                r.ret_lost_pkts = Some(legs.return_lost);
            }
            let mut cell = String::new();
            streams::write(&row.streams, &mut cell);
            r.streams = Some(cell);
            r.write_csv(out);
            if let Some(metrics) = &self.metrics {
                metrics.client_row(&r, &row.rtt);
            }
            t.live_peers += 1;
            t.sum.pps += row.pps;
            t.sum.mbps += row.mbps;
            t.sum.target += row.target;
            t.sum.unpaced |= row.unpaced;
            t.sum.rep_pps += row.rep_pps;
            t.sum.rep_mbps += row.rep_mbps;
            t.sum.pkts += row.pkts;
            t.sum.rep_pkts += row.rep_pkts;
            t.sum.late += row.late;
            t.sum.send_errors += row.send_errors;
            t.sum.rtt_min_ns = min_opt(t.sum.rtt_min_ns, row.rtt_min_ns);
            t.sum.jitter_sum_ns += row.jitter_sum_ns;
            t.sum.jitter_count += row.jitter_count;
            t.rtt.merge(&row.rtt);
        }
        t
    }

    /// One rx row per peer whose requests arrived; returns requests/s served.
    fn write_rx_rows(&self, ts: i64, m: &Merged, out: &mut String) -> f64 {
        let mut serving = 0.0;
        for (peer, row) in &m.rx {
            let mut r = self.row(ts, Dir::Rx, peer);
            r.pps = Some(row.pps);
            r.mbps = Some(row.mbps);
            r.rep_pps = Some(row.rep_pps);
            r.rep_mbps = Some(row.rep_mbps);
            r.dup_pkts = Some(row.counts.dup);
            r.ooo_pkts = Some(row.counts.ooo);
            r.pkts = Some(row.counts.requests);
            r.rep_pkts = Some(row.counts.replies);
            r.late_pkts = Some(row.counts.late);
            r.over_plan = Some(row.counts.over_plan);
            (r.hops, r.hops_max) = hops(&row.counts.ttls);
            r.write_csv(out);
            if let Some(metrics) = &self.metrics {
                metrics.server_row(&r);
            }
            serving += row.pps;
        }
        serving
    }

    /// The host row: totals, CPU, phase, and the host's own counts.
    fn host_row(
        &self,
        ts: i64,
        m: &Merged,
        t: &Totals,
        cpu: Option<CpuShares>,
        host: HostDelta,
        phase: Phase,
    ) -> ReportRow {
        let sum = &t.sum;
        let mut r = self.row(ts, Dir::Host, "*");
        r.matrix_fp = Some(self.matrix_fp.clone());
        // Blank target: some flow is unpaced and nothing is paced.
        r.target_pps = (!(sum.unpaced && sum.target == 0.0)).then_some(sum.target);
        r.pps = Some(sum.pps);
        r.mbps = Some(sum.mbps);
        r.rep_pps = Some(sum.rep_pps);
        r.rep_mbps = Some(sum.rep_mbps);
        r.loss_pct = loss_pct(sum.pkts, sum.rep_pkts);
        r.rtt_p50_us = t.rtt.quantile_us(0.50);
        r.rtt_p99_us = t.rtt.quantile_us(0.99);
        r.rtt_p999_us = t.rtt.quantile_us(0.999);
        r.rtt_hist = t.rtt.encode();
        r.cpu_pct = cpu.map(|c| c.box_pct);
        r.cpu_max_pct = cpu.map(|c| c.core_max_pct);
        r.steal_pct = cpu.and_then(|c| c.steal_pct);
        r.rtt_min_us = sum.rtt_min_ns.map(|ns| ns as f64 / 1000.0);
        r.jitter_us = jitter_us(sum.jitter_sum_ns, sum.jitter_count);
        r.agent_cpu_pct = m.busiest_worker;
        r.workers = Some(self.workers as u32);
        r.layer = m.layer;
        r.stray_pkts = Some(m.stray);
        r.over_plan = Some(m.over_plan());
        r.pkts = Some(sum.pkts);
        r.rep_pkts = Some(sum.rep_pkts);
        r.late_pkts = Some(sum.late);
        r.send_errors = Some(sum.send_errors);
        r.phase = Some(phase.as_str());
        r.req_drops = Some(m.drops.requests);
        r.rep_drops = Some(m.drops.replies);
        r.udp_rcvbuf_errors = host.rcvbuf_errors;
        r.udp_in_errors = host.in_errors;
        r.udp_no_ports = host.no_ports;
        r.nic_rx_drops = host.nic_rx_drops;
        r.udp_sndbuf_errors = host.sndbuf_errors;
        r.neigh_table_fulls = host.neigh_table_fulls;
        r.neigh_res_failed = host.neigh_res_failed;
        r.nic = self.counters.interface().map(str::to_string);
        if let Some(nic) = host.nic {
            r.nic_tx_pkts = Some(nic.tx_packets);
            r.nic_tx_bytes = Some(nic.tx_bytes);
            r.nic_rx_pkts = Some(nic.rx_packets);
            r.nic_rx_bytes = Some(nic.rx_bytes);
            r.nic_tx_drops = Some(nic.tx_dropped);
        }
        r.gso_pkts = Some(m.gso_pkts);
        r.gro_pkts = Some(m.gro_pkts);
        r.behind_ms = Some(m.behind_ns as f64 / 1e6);
        r.throttled_ms = host.throttled_ms;
        r.rate_scale = m.rate_scale;
        if let Some(d) = &m.disk {
            r.disk_rd_iops = Some(d.read_iops);
            r.disk_rd_mb_s = Some(d.read_mb_s);
            r.disk_rd_avg_us = d.stats.read.avg_us();
            r.disk_rd_p99_us = d.stats.read.p99_us();
            r.disk_wr_iops = Some(d.write_iops);
            r.disk_wr_mb_s = Some(d.write_mb_s);
            r.disk_wr_avg_us = d.stats.write.avg_us();
            r.disk_wr_p99_us = d.stats.write.p99_us();
            r.disk_busy_pct = Some(d.busy_pct);
            r.disk_depth = self.disk_depth.map(|n| n as u32);
        }
        r
    }

    /// The interval's status line: the original tool's, and what we add to it.
    fn status_line(
        &self,
        r: &ReportRow,
        m: &Merged,
        t: &Totals,
        serving: f64,
        phase: Phase,
    ) -> String {
        let sum = &t.sum;
        let target = if sum.unpaced {
            "max".to_string()
        } else {
            units::pps(sum.target)
        };
        let loss = r.loss_pct.unwrap_or(0.0).max(0.0);
        let cpu_text = match (r.cpu_pct, r.cpu_max_pct) {
            (Some(b), Some(c)) => format!("cpu={b:.0}%(max {c:.0}%)"),
            _ => "cpu=n/a".to_string(),
        };
        let mut line = format!(
            "{} tx={}/{target} rx={} serving={} loss={loss:.2}% rtt_p50={} rtt_p99={} {cpu_text} workers={} peers={}",
            units::log_stamp(r.ts),
            units::pps(sum.pps),
            units::pps(sum.rep_pps),
            units::pps(serving),
            units::micros(r.rtt_p50_us),
            units::micros(r.rtt_p99_us),
            self.workers,
            t.live_peers
        );
        if let Some(l) = m.layer {
            line.push_str(&format!(" layer={l}"));
        }
        if let Some(scale) = m.rate_scale {
            line.push_str(&format!(" rate=x{}", units::g(scale)));
        }
        if let Some(w) = m.busiest_worker {
            line.push_str(&format!(" busiest_worker={w:.0}% of a core"));
        }
        if m.stray > 0 {
            line.push_str(&format!(" stray={}", m.stray));
        }
        let over_plan = m.over_plan();
        if over_plan > 0 {
            line.push_str(&format!(" over_plan={over_plan}"));
        }
        if sum.send_errors > 0 {
            line.push_str(&format!(" send_errors={}", sum.send_errors));
        }
        if m.drops.requests + m.drops.replies > 0 {
            line.push_str(&format!(
                " dropped_here={}",
                m.drops.requests + m.drops.replies
            ));
        }
        if let Some(d) = &m.disk {
            line.push_str(&format!(
                " disk=rd {} ({:.0} iops) wr {} ({:.0} iops) busy={:.0}% depth={}",
                units::byte_rate(d.read_mb_s * 1e6),
                d.read_iops,
                units::byte_rate(d.write_mb_s * 1e6),
                d.write_iops,
                d.busy_pct,
                self.disk_depth.unwrap_or(1)
            ));
            if d.stats.errors > 0 {
                line.push_str(&format!(" errors={}", d.stats.errors));
            }
            if d.stats.skipped > 0 {
                line.push_str(&format!(" skipped={}", d.stats.skipped));
            }
            if d.stats.unanswered > 0 {
                line.push_str(&format!(" unanswered={}", d.stats.unanswered));
            }
        }
        if phase != Phase::Steady {
            line.push_str(&format!(" phase={}", phase.as_str()));
        }
        line
    }

    /// A line for the log when writing the report failed or recovered.
    pub(crate) fn take_news(&mut self) -> Option<String> {
        self.news.take()
    }

    /// Bytes held back by a refusing disk.
    pub fn unwritten(&self) -> usize {
        self.unwritten.len()
    }

    /// Appends `rows` after whatever is still held, writing as much as the disk
    /// takes. A short write leaves the rest held, to continue at the exact byte
    /// where the file stopped: no row is ever half-written for good.
    /// Past `--keep-report`, cuts the report to its newest rows (between ticks,
    /// and only with nothing held back for a refusing disk), and says so in
    /// the log. A cut that fails is said once, and the report grows on.
    fn keep_bound(&mut self, ts: i64) {
        if !self.unwritten.is_empty() {
            return;
        }
        let Some(from) = self.keep.cut(self.report_bytes, self.oldest, ts) else {
            return;
        };
        let cut = report_keep::cut(&self.path, from).and_then(|cut| {
            self.file = std::fs::OpenOptions::new().append(true).open(&self.path)?;
            Ok(cut)
        });
        self.news = Some(match cut {
            Ok(cut) => {
                self.report_bytes = cut.size;
                self.oldest = cut.oldest;
                format!(
                    "{} report: past --keep-report, its {} oldest rows were dropped; it keeps {} KiB, from the interval ending {}",
                    units::log_stamp(ts),
                    cut.dropped,
                    cut.size >> 10,
                    cut.oldest
                        .map_or("-".to_string(), |t| units::local_clock(t as f64))
                )
            }
            Err(e) => {
                self.keep = Keep::All;
                format!(
                    "{} report: cannot be cut to --keep-report ({e}): it grows on",
                    units::log_stamp(ts)
                )
            }
        });
    }

    fn append(&mut self, ts: i64, rows: &[u8]) {
        if self.unwritten.len() + rows.len() > MAX_UNWRITTEN {
            self.dropped += 1;
            self.news = Some(format!(
                "{} report: {} MiB already held for a refusing disk -- this interval's rows are dropped",
                units::log_stamp(ts),
                MAX_UNWRITTEN >> 20
            ));
        } else {
            self.unwritten.extend_from_slice(rows);
        }
        let mut written = 0;
        let error = loop {
            if written == self.unwritten.len() {
                break None;
            }
            match self.file.write(&self.unwritten[written..]) {
                Ok(0) => break Some(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some(e),
            }
        };
        self.unwritten.drain(..written);
        self.report_bytes += written as u64;
        if self.oldest.is_none() && written > 0 {
            self.oldest = Some(ts);
        }
        if self.unwritten.is_empty() && self.unwritten.capacity() > 1 << 20 {
            // A long stall is over: give the memory back.
            self.unwritten = Vec::new();
        }
        match (error, self.stalled.take()) {
            (Some(e), None) => {
                self.news = Some(format!(
                    "{} cannot write the report ({e}): its rows are held in memory and written when the disk takes them; the traffic goes on",
                    units::log_stamp(ts)
                ));
                self.stalled = Some(e.to_string());
            }
            (Some(_), Some(before)) => self.stalled = Some(before),
            (None, Some(_)) => {
                self.news = Some(match std::mem::take(&mut self.dropped) {
                    0 => format!(
                        "{} the report is being written again: nothing was lost",
                        units::log_stamp(ts)
                    ),
                    n => format!(
                        "{} the report is being written again: the rows of {n} interval(s) were dropped while it was held",
                        units::log_stamp(ts)
                    ),
                });
            }
            (None, None) => {}
        }
    }
}

/// The bytes of the file at `path` (0 when it cannot say).
fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
