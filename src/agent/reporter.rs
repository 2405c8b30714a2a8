//! The reporter: merges the workers' batches for one tick into report rows (one
//! per peer, whatever the worker and stream count), appends them to report.csv,
//! flushes, and prints the interval's status line (facts.md 3.7, 3.9, 3.13).
//! The host row also says where the interval sat in the run (`phase`), and
//! what the host's kernel counted about packets the agent never saw.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use super::clock::{RunClock, phase_of};
use super::counters::{Batch, RxCounts, SocketDrops};
use super::cpu::CpuSampler;
use super::host_counters::HostCounters;
use super::plan::AgentPlan;
use crate::report::row::header_line;
use crate::report::rtt::MergedRtt;
use crate::report::{Dir, Phase, ReportRow};
use crate::units;

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
    dup: u64,
    ooo: u64,
    pkts: u64,
    rep_pkts: u64,
    late: u64,
    send_errors: u64,
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

/// Rate per second and Mbit/s of payload for a count over `elapsed` seconds.
fn rates(packets: u64, bytes: u64, elapsed: f64) -> (f64, f64) {
    (packets as f64 / elapsed, bytes as f64 * 8.0 / elapsed / 1e6)
}

pub struct Reporter {
    host: String,
    size: u32,
    rep_size: u32,
    workers: usize,
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
}

/// Most report bytes held in memory while the disk refuses them (~1 million
/// rows): past this the newest interval's rows are dropped, and the log says so.
const MAX_UNWRITTEN: usize = 256 << 20;

impl Reporter {
    /// Opens `path` for appending, writing the header if the file is new or empty.
    pub fn open(path: &Path, plan: &AgentPlan, clock: Arc<RunClock>) -> io::Result<Reporter> {
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
            size: plan.matrix.config.tx_size,
            rep_size: plan.matrix.config.rx_size,
            workers: plan.workers,
            interval: plan.interval,
            names: plan.matrix.hosts().iter().map(|h| h.name.clone()).collect(),
            file,
            cpu,
            counters: HostCounters::start(),
            clock,
            wrote_one: false,
            unwritten: Vec::new(),
            stalled: None,
            news: None,
            dropped: 0,
        })
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
    pub fn write_tick(&mut self, batches: &[Batch], complete: bool) -> Option<String> {
        let tick = batches.first()?.tick;
        let ts = tick.floor() as i64;
        if self
            .clock
            .end_wall()
            .is_some_and(|end| tick - self.interval >= end - 0.001)
        {
            return None;
        }
        let mut tx: BTreeMap<(String, String), TxRow> = BTreeMap::new();
        let mut rx: BTreeMap<String, RxRow> = BTreeMap::new();
        let mut host_rtt = MergedRtt::default();
        let mut stray = 0;
        let mut drops = SocketDrops::default();
        let mut behind_ns = 0;
        let mut busiest_worker: Option<f64> = None;
        let mut layer = None;
        for batch in batches {
            let elapsed = batch.elapsed;
            stray += batch.stray;
            drops.requests += batch.drops.requests;
            drops.replies += batch.drops.replies;
            behind_ns = behind_ns.max(batch.behind_ns);
            layer = layer.or(batch.layer);
            busiest_worker = Some(
                busiest_worker
                    .unwrap_or(0.0)
                    .max(batch.cpu / elapsed * 100.0),
            );
            for f in &batch.flows {
                let layer_text = f.layer.map_or(String::new(), |l| l.to_string());
                let key = (self.names[f.peer as usize].clone(), layer_text);
                let row = tx.entry(key).or_default();
                row.layer = f.layer;
                match f.target {
                    Some(rate) => row.target += rate,
                    None => row.unpaced = true,
                }
                let (pps, mbps) = rates(f.counts.sent, f.counts.sent_bytes, elapsed);
                let (rep_pps, rep_mbps) = rates(f.counts.replies, f.counts.reply_bytes, elapsed);
                row.pps += pps;
                row.mbps += mbps;
                row.rep_pps += rep_pps;
                row.rep_mbps += rep_mbps;
                row.pkts += f.counts.sent;
                row.rep_pkts += f.counts.replies;
                row.late += f.counts.late;
                row.send_errors += f.counts.send_errors;
                row.rtt_sum_ns += f.counts.rtt_sum_ns;
                row.rtt_count += f.counts.rtt_count;
                row.rtt.add(&f.rtt);
                row.rtt_max_ns = row.rtt_max_ns.max(f.rtt_max_ns);
                row.dup += f.counts.dup;
                row.ooo += f.counts.ooo;
            }
            for (peer, counts) in &batch.rx {
                let row = rx.entry(self.names[*peer as usize].clone()).or_default();
                let (pps, mbps) = rates(counts.requests, counts.request_bytes, elapsed);
                let (rep_pps, rep_mbps) = rates(counts.replies, counts.reply_bytes, elapsed);
                row.pps += pps;
                row.mbps += mbps;
                row.rep_pps += rep_pps;
                row.rep_mbps += rep_mbps;
                row.counts.add(counts);
            }
        }

        let mut out = String::new();
        let mut total = TxRow::default();
        let mut live_peers = 0;
        for ((peer, _), row) in &tx {
            let mut r = self.row(ts, Dir::Tx, peer);
            r.layer = row.layer;
            live_peers += 1;
            r.target_pps = (!row.unpaced).then_some(row.target);
            r.pps = Some(row.pps);
            r.mbps = Some(row.mbps);
            r.loss_pct =
                (row.pkts > 0).then(|| 100.0 - row.rep_pkts as f64 / row.pkts as f64 * 100.0);
            r.rep_pps = Some(row.rep_pps);
            r.rep_mbps = Some(row.rep_mbps);
            if row.rtt_count > 0 {
                r.rtt_avg_us = Some(row.rtt_sum_ns as f64 / row.rtt_count as f64 / 1000.0);
            }
            r.rtt_p50_us = row.rtt.quantile_us(0.50);
            r.rtt_p99_us = row.rtt.quantile_us(0.99);
            r.rtt_p999_us = row.rtt.quantile_us(0.999);
            r.rtt_max_us = (row.rtt_count > 0).then(|| row.rtt_max_ns as f64 / 1000.0);
            r.dup_pkts = Some(row.dup);
            r.ooo_pkts = Some(row.ooo);
            r.pkts = Some(row.pkts);
            r.rep_pkts = Some(row.rep_pkts);
            r.late_pkts = Some(row.late);
            r.send_errors = Some(row.send_errors);
            r.write_csv(&mut out);
            total.pps += row.pps;
            total.mbps += row.mbps;
            total.target += row.target;
            total.unpaced |= row.unpaced;
            total.rep_pps += row.rep_pps;
            total.rep_mbps += row.rep_mbps;
            total.pkts += row.pkts;
            total.rep_pkts += row.rep_pkts;
            total.late += row.late;
            total.send_errors += row.send_errors;
            host_rtt.merge(&row.rtt);
        }
        let mut serving = 0.0;
        for (peer, row) in &rx {
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
            r.write_csv(&mut out);
            serving += row.pps;
        }

        let cpu = self.cpu.sample();
        let host = self.counters.sample();
        let status = if complete {
            let phase = phase_of(
                tick,
                self.interval,
                self.clock.started_wall().unwrap_or(tick - self.interval),
                self.clock.end_wall(),
                !self.wrote_one,
            );
            self.wrote_one = true;
            let mut r = self.row(ts, Dir::Host, "*");
            // Blank target: some flow is unpaced and nothing is paced.
            r.target_pps = (!(total.unpaced && total.target == 0.0)).then_some(total.target);
            r.pps = Some(total.pps);
            r.mbps = Some(total.mbps);
            r.rep_pps = Some(total.rep_pps);
            r.rep_mbps = Some(total.rep_mbps);
            r.loss_pct =
                (total.pkts > 0).then(|| 100.0 - total.rep_pkts as f64 / total.pkts as f64 * 100.0);
            r.rtt_p50_us = host_rtt.quantile_us(0.50);
            r.rtt_p99_us = host_rtt.quantile_us(0.99);
            r.rtt_p999_us = host_rtt.quantile_us(0.999);
            r.rtt_hist = host_rtt.encode();
            r.cpu_pct = cpu.map(|c| c.0);
            r.cpu_max_pct = cpu.map(|c| c.1);
            r.agent_cpu_pct = busiest_worker;
            r.workers = Some(self.workers as u32);
            r.layer = layer;
            r.stray_pkts = Some(stray);
            r.pkts = Some(total.pkts);
            r.rep_pkts = Some(total.rep_pkts);
            r.late_pkts = Some(total.late);
            r.send_errors = Some(total.send_errors);
            r.phase = Some(phase.as_str());
            r.req_drops = Some(drops.requests);
            r.rep_drops = Some(drops.replies);
            r.udp_rcvbuf_errors = host.rcvbuf_errors;
            r.udp_in_errors = host.in_errors;
            r.udp_no_ports = host.no_ports;
            r.nic_rx_drops = host.nic_rx_drops;
            r.behind_ms = Some(behind_ns as f64 / 1e6);
            r.throttled_ms = host.throttled_ms;
            r.write_csv(&mut out);
            let target = if total.unpaced {
                "max".to_string()
            } else {
                units::pps(total.target)
            };
            let loss = r.loss_pct.unwrap_or(0.0).max(0.0);
            let cpu_text = cpu.map_or("cpu=n/a".to_string(), |(b, c)| {
                format!("cpu={b:.0}%(max {c:.0}%)")
            });
            let mut line = format!(
                "ts={ts} tx={}/{target} rx={} serving={} loss={loss:.2}% rtt_p50={} rtt_p99={} {cpu_text} workers={} peers={live_peers}",
                units::pps(total.pps),
                units::pps(total.rep_pps),
                units::pps(serving),
                units::micros(r.rtt_p50_us),
                units::micros(r.rtt_p99_us),
                self.workers
            );
            if let Some(l) = layer {
                line.push_str(&format!(" layer={l}"));
            }
            if let Some(w) = busiest_worker {
                line.push_str(&format!(" busiest_worker={w:.0}% of a core"));
            }
            if stray > 0 {
                line.push_str(&format!(" stray={stray}"));
            }
            if total.send_errors > 0 {
                line.push_str(&format!(" send_errors={}", total.send_errors));
            }
            if drops.requests + drops.replies > 0 {
                line.push_str(&format!(" dropped_here={}", drops.requests + drops.replies));
            }
            if phase != Phase::Steady {
                line.push_str(&format!(" phase={}", phase.as_str()));
            }
            line
        } else {
            format!(
                "ts={ts} partial interval: {} of {} workers reported -- per-peer rows written, host totals skipped",
                batches.len(),
                self.workers
            )
        };
        self.append(ts, out.as_bytes());
        Some(status)
    }

    /// A line for the log when writing the report failed or recovered.
    pub fn take_news(&mut self) -> Option<String> {
        self.news.take()
    }

    /// Bytes held back by a refusing disk.
    pub fn unwritten(&self) -> usize {
        self.unwritten.len()
    }

    /// Appends `rows` after whatever is still held, writing as much as the disk
    /// takes. A short write leaves the rest held, to continue at the exact byte
    /// where the file stopped: no row is ever half-written for good.
    fn append(&mut self, ts: i64, rows: &[u8]) {
        if self.unwritten.len() + rows.len() > MAX_UNWRITTEN {
            self.dropped += 1;
            self.news = Some(format!(
                "ts={ts} report: {} MiB already held for a refusing disk -- this interval's rows are dropped",
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
        if self.unwritten.is_empty() && self.unwritten.capacity() > 1 << 20 {
            // A long stall is over: give the memory back.
            self.unwritten = Vec::new();
        }
        match (error, self.stalled.take()) {
            (Some(e), None) => {
                self.news = Some(format!(
                    "ts={ts} cannot write the report ({e}): its rows are held in memory and written when the disk takes them; the traffic goes on"
                ));
                self.stalled = Some(e.to_string());
            }
            (Some(_), Some(before)) => self.stalled = Some(before),
            (None, Some(_)) => {
                self.news = Some(match std::mem::take(&mut self.dropped) {
                    0 => format!("ts={ts} the report is being written again: nothing was lost"),
                    n => format!(
                        "ts={ts} the report is being written again: the rows of {n} interval(s) were dropped while it was held"
                    ),
                });
            }
            (None, None) => {}
        }
    }
}
