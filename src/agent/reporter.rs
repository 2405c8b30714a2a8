//! The reporter: merges the workers' batches for one tick into report rows (one
//! per peer, whatever the worker and stream count), appends them to report.csv,
//! flushes, and prints the interval's status line (facts.md 3.7, 3.9, 3.13).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use super::counters::{Batch, RxCounts};
use super::cpu::CpuSampler;
use super::plan::AgentPlan;
use super::rtt::MergedRtt;
use crate::report::row::header_line;
use crate::report::{Dir, ReportRow};
use crate::units;

/// One tx row in the making: a (peer, layer, draining) group of flow sockets.
#[derive(Default)]
struct TxRow {
    peer: u32,
    layer: Option<u32>,
    draining: bool,
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
    names: Vec<String>,
    file: File,
    cpu: CpuSampler,
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
    pub fn open(path: &Path, plan: &AgentPlan) -> io::Result<Reporter> {
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
            names: plan.matrix.hosts().iter().map(|h| h.name.clone()).collect(),
            file,
            cpu,
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

    /// Writes the rows of one tick. With `complete` (every worker reported) the
    /// host row is written and the status line returned; otherwise only the
    /// per-peer rows, and a line saying the interval was partial.
    pub fn write_tick(&mut self, ts: i64, batches: &[Batch], complete: bool) -> String {
        let mut tx: BTreeMap<(String, String, bool), TxRow> = BTreeMap::new();
        let mut rx: BTreeMap<String, RxRow> = BTreeMap::new();
        let mut host_rtt = MergedRtt::default();
        let mut stray = 0;
        let mut busiest_worker: Option<f64> = None;
        let mut layer = None;
        for batch in batches {
            let elapsed = batch.elapsed;
            stray += batch.stray;
            layer = layer.or(batch.layer);
            busiest_worker = Some(
                busiest_worker
                    .unwrap_or(0.0)
                    .max(batch.cpu / elapsed * 100.0),
            );
            for f in &batch.flows {
                let layer_text = f.layer.map_or(String::new(), |l| l.to_string());
                let key = (self.names[f.peer as usize].clone(), layer_text, f.draining);
                let row = tx.entry(key).or_default();
                row.peer = f.peer;
                row.layer = f.layer;
                row.draining = f.draining;
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
        for ((peer, _, _), row) in &tx {
            let mut r = self.row(ts, Dir::Tx, peer);
            r.layer = row.layer;
            if !row.draining {
                live_peers += 1;
                r.target_pps = (!row.unpaced).then_some(row.target);
                r.pps = Some(row.pps);
                r.mbps = Some(row.mbps);
                r.loss_pct = (row.pps > 0.0).then(|| 100.0 - row.rep_pps / row.pps * 100.0);
                total.pps += row.pps;
                total.mbps += row.mbps;
                total.target += row.target;
                total.unpaced |= row.unpaced;
            }
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
            r.write_csv(&mut out);
            total.rep_pps += row.rep_pps;
            total.rep_mbps += row.rep_mbps;
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
            r.write_csv(&mut out);
            serving += row.pps;
        }

        let cpu = self.cpu.sample();
        let status = if complete {
            let mut r = self.row(ts, Dir::Host, "*");
            // Blank target: some flow is unpaced and nothing is paced.
            r.target_pps = (!(total.unpaced && total.target == 0.0)).then_some(total.target);
            r.pps = Some(total.pps);
            r.mbps = Some(total.mbps);
            r.rep_pps = Some(total.rep_pps);
            r.rep_mbps = Some(total.rep_mbps);
            r.loss_pct = (total.pps > 0.0).then(|| 100.0 - total.rep_pps / total.pps * 100.0);
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
            line
        } else {
            format!(
                "ts={ts} partial interval: {} of {} workers reported -- per-peer rows written, host totals skipped",
                batches.len(),
                self.workers
            )
        };
        self.append(ts, out.as_bytes());
        status
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
