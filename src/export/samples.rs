//! The samples of an export: per host (the summary's figures), per host per
//! interval (`--raw`), per flow (`--peers`), and each host's state.

use std::path::Path;

use super::overlays::{self, Overlay};
use super::{Options, Sample, Value};
use crate::error::Result;
use crate::report::Column;
use crate::report::read::{for_each_row, report_files};
use crate::report::row::Dir;
use crate::summary::analysis::aggregate::ReportSet;
use crate::summary::analysis::figures::{Context, FlowFigures, HostDisk, HostFigures};
use crate::units::wire_bits;

pub struct Builder<'a> {
    pub samples: Vec<Sample>,
    pub target_of: &'a dyn Fn(&str) -> String,
    pub run: Option<&'a str>,
    /// The class of a marked run, on every sample after `run=`, so a
    /// dashboard holding two classes' runs can tell them apart.
    pub dscp: Option<crate::matrix::Dscp>,
}

impl Builder<'_> {
    /// The labels every sample ends with: `run=`, then `dscp=`.
    fn label(&self, extras: &mut Vec<(&'static str, String)>) {
        if let Some(run) = self.run {
            extras.push(("run", run.to_string()));
        }
        if let Some(dscp) = self.dscp {
            extras.push(("dscp", dscp.value().to_string()));
        }
    }

    pub fn push(
        &mut self,
        overlay: Overlay,
        host: &str,
        value: Option<f64>,
        mut extras: Vec<(&'static str, String)>,
    ) {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            return;
        };
        self.label(&mut extras);
        self.samples.push(Sample {
            overlay,
            target: (self.target_of)(host),
            value: Value::Number(v),
            extras,
        });
    }

    pub fn state(&mut self, host: &str, state: &'static str) {
        let mut extras = Vec::new();
        self.label(&mut extras);
        self.samples.push(Sample {
            overlay: overlays::STATE,
            target: (self.target_of)(host),
            value: Value::Text(state),
            extras,
        });
    }
}

/// A host's own overlays: the summary's per-host figures.
pub(crate) fn host_samples(
    b: &mut Builder<'_>,
    set: &ReportSet,
    ctx: &Context,
    opts: &Options,
    hosts: &[HostFigures],
    fold: bool,
) {
    let rtt = rtt_overlays(hosts);
    let senders: Vec<f64> = hosts.iter().map(|h| h.sent).filter(|&s| s > 0.0).collect();
    let median = crate::units::median(&senders);
    let nic_bits = opts.nic_gbps.map(|g| g * 1e9);
    for h in hosts {
        let name = set.name(h.id);
        if !opts.raw {
            summary_samples(b, set, h, rtt, fold);
        }
        if h.sent > 0.0 {
            let gbps = wire_bits(h.sent, ctx.tx_size, ctx.ip(h.id)) / 1e9;
            b.push(overlays::REQUEST_GBPS, name, Some(gbps), vec![]);
        }
        if senders.len() >= 2 {
            b.push(
                overlays::REL_MEDIAN,
                name,
                median.map(|m| h.sent / m * 100.0),
                vec![],
            );
        }
        if h.has_rx {
            responder_samples(b, name, h, nic_bits);
        }
        b.push(overlays::FORWARD_LOSS, name, h.forward_loss(), vec![]);
        b.push(overlays::RETURN_LOSS, name, h.return_loss(), vec![]);
        if ctx.layered
            && let Some(m) = &ctx.matrix
        {
            let covered = set.coverage.keys().filter(|(src, _)| *src == h.id).count();
            let pct = coverage_pct(covered, m.host_count());
            b.push(overlays::COVERAGE, name, Some(pct), vec![]);
        }
        b.push(overlays::PEERS, name, Some(h.peers as f64), vec![]);
        b.push(overlays::INTERVALS, name, Some(h.nticks as f64), vec![]);
        b.push(overlays::WORKERS, name, h.workers.map(f64::from), vec![]);
    }
}

/// The p50 and p99 round-trip overlays: exact where every host's reports
/// carry histograms (a host with no round trip measured does not count);
/// else each host's worst flow's worst interval, and labelled so.
fn rtt_overlays(hosts: &[HostFigures]) -> (Overlay, Overlay) {
    if hosts.iter().all(|h| h.rtt_exact || h.rtt_p99.is_none()) {
        (overlays::RTT_P50, overlays::RTT_P99)
    } else {
        (overlays::RTT_P50_WORST, overlays::RTT_P99_WORST)
    }
}

/// The summary table's figures of one host (all but `--raw`, which has its
/// own per interval). With the flows folded in (`fold`: `--peers` on a
/// fixed matrix), pps, loss and rtt_p99 come one sample per flow, so not
/// per host.
fn summary_samples(
    b: &mut Builder<'_>,
    set: &ReportSet,
    h: &HostFigures,
    (p50, p99): (Overlay, Overlay),
    fold: bool,
) {
    let name = set.name(h.id);
    let own = set.hosts.get(&h.id);
    let positive = |v: Option<f64>| v.filter(|&v| v > 0.0);
    if !fold {
        b.push(overlays::PPS_O, name, Some(h.sent), vec![]);
    }
    b.push(overlays::REP_PPS, name, Some(h.back), vec![]);
    if !fold && h.sent > 0.0 {
        b.push(overlays::LOSS, name, Some(h.loss), vec![]);
    }
    if h.target > 0.0 {
        b.push(
            overlays::ACHIEVED,
            name,
            Some(h.sent / h.target * 100.0),
            vec![],
        );
    }
    b.push(overlays::RTT_AVG, name, positive(h.rtt_avg), vec![]);
    b.push(p50, name, positive(h.rtt_p50), vec![]);
    if !fold {
        b.push(p99, name, positive(h.rtt_p99), vec![]);
    }
    b.push(overlays::RTT_MAX, name, positive(h.rtt_max), vec![]);
    b.push(overlays::CPU, name, own.and_then(|o| o.cpu.get()), vec![]);
    b.push(
        overlays::CPU_CORE,
        name,
        own.and_then(|o| o.cpu_core.get()),
        vec![],
    );
    b.push(
        overlays::AGENT_CPU,
        name,
        own.and_then(|o| o.agent_cpu.get()),
        vec![],
    );
    if let Some(d) = h.disk {
        disk_samples(b, name, &d);
    }
}

/// What a host that answered requests served: its rate, its egress, and
/// with the NIC's speed given (`nic_bits`, bits per second) its share of
/// the line.
fn responder_samples(b: &mut Builder<'_>, name: &str, h: &HostFigures, nic_bits: Option<f64>) {
    b.push(overlays::SERVED_PPS, name, Some(h.serving), vec![]);
    b.push(
        overlays::EGRESS_GBPS,
        name,
        Some(h.egress_bits / 1e9),
        vec![],
    );
    if let Some(nic) = nic_bits {
        b.push(
            overlays::LINE_UTIL,
            name,
            Some(h.egress_bits / nic * 100.0),
            vec![],
        );
    }
}

/// The share (%) of the other hosts a layered run has measured a host
/// sending to (a one-host matrix counts one other, so no division by 0).
fn coverage_pct(covered: usize, hosts: usize) -> f64 {
    let others = hosts.saturating_sub(1).max(1);
    covered as f64 / others as f64 * 100.0
}

/// A host's seven disk overlays, each only where measured (a blank disk
/// cell is not a zero; a non-disk run has none of them).
fn disk_samples(b: &mut Builder<'_>, name: &str, d: &HostDisk) {
    let mb = |v: Option<f64>| v.map(|bytes| bytes / 1e6);
    for (overlay, value) in [
        (overlays::DISK_READ_MBS, mb(d.read.bytes_per_s)),
        (overlays::DISK_WRITE_MBS, mb(d.write.bytes_per_s)),
        (overlays::DISK_READ_IOPS, d.read.iops),
        (overlays::DISK_WRITE_IOPS, d.write.iops),
        (overlays::DISK_READ_P99, d.read.p99_us),
        (overlays::DISK_WRITE_P99, d.write.p99_us),
        (overlays::DISK_BUSY, d.busy),
    ] {
        b.push(overlay, name, value, vec![]);
    }
}

/// `--raw`: every windowed host row's own figures, tagged `ts=`.
pub(crate) fn raw_samples(b: &mut Builder<'_>, dir: &Path, set: &ReportSet) -> Result<()> {
    for file in report_files(dir)? {
        for_each_row(&file, |row| {
            if row.dir() != Some(Dir::Host) || !set.span.contains(row.ts) {
                return;
            }
            let host = row.host().to_string();
            let ts = vec![("ts", row.ts.to_string())];
            for (overlay, column) in [
                (overlays::PPS_O, Column::Pps),
                (overlays::REP_PPS, Column::RepPps),
                (overlays::LOSS, Column::LossPct),
                (overlays::RTT_P50, Column::RttP50Us),
                (overlays::RTT_P99, Column::RttP99Us),
                (overlays::CPU, Column::CpuPct),
                (overlays::CPU_CORE, Column::CpuMaxPct),
                (overlays::AGENT_CPU, Column::AgentCpuPct),
                (overlays::DISK_READ_MBS, Column::DiskRdMbS),
                (overlays::DISK_WRITE_MBS, Column::DiskWrMbS),
                (overlays::DISK_READ_IOPS, Column::DiskRdIops),
                (overlays::DISK_WRITE_IOPS, Column::DiskWrIops),
                (overlays::DISK_READ_P99, Column::DiskRdP99Us),
                (overlays::DISK_WRITE_P99, Column::DiskWrP99Us),
                (overlays::DISK_BUSY, Column::DiskBusyPct),
            ] {
                let value = row.num(column).map(|v| {
                    if column == Column::LossPct {
                        v.max(0.0)
                    } else {
                        v
                    }
                });
                b.push(overlay, &host, value, ts.clone());
            }
            if let (Some(pps), Some(target)) = (row.num(Column::Pps), row.num(Column::TargetPps))
                && target != 0.0
            {
                b.push(
                    overlays::ACHIEVED,
                    &host,
                    Some(pps / target * 100.0),
                    ts.clone(),
                );
            }
        })?;
    }
    Ok(())
}

/// `--peers`: one sample per flow, tagged `peer=` (and `layer=`).
pub(crate) fn peer_samples(
    b: &mut Builder<'_>,
    set: &ReportSet,
    flows: &[FlowFigures],
    fold: bool,
) {
    let (pps, loss, p99) = if fold {
        (overlays::PPS_O, overlays::LOSS, overlays::RTT_P99_FLOWS)
    } else {
        (
            overlays::PEER_PPS,
            overlays::PEER_LOSS,
            overlays::PEER_RTT_P99,
        )
    };
    for f in flows {
        let host = set.name(f.host).to_string();
        let mut extras = vec![("peer", (b.target_of)(set.name(f.peer)))];
        if let Some(layer) = f.layer {
            extras.push(("layer", layer.to_string()));
        }
        b.push(pps, &host, Some(f.sent), extras.clone());
        b.push(loss, &host, Some(f.loss), extras.clone());
        b.push(p99, &host, f.p99.filter(|&v| v > 0.0), extras);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(rtt_exact: bool, rtt_p99: Option<f64>) -> HostFigures {
        HostFigures {
            rtt_exact,
            rtt_p99,
            ..HostFigures::default()
        }
    }

    #[test]
    fn round_trips_are_exact_only_when_every_measured_host_is() {
        let exact = (overlays::RTT_P50, overlays::RTT_P99);
        let worst = (overlays::RTT_P50_WORST, overlays::RTT_P99_WORST);
        assert_eq!(rtt_overlays(&[]), exact);
        assert_eq!(
            rtt_overlays(&[host(true, Some(90.0)), host(false, None)]),
            exact
        );
        assert_eq!(
            rtt_overlays(&[host(true, Some(90.0)), host(false, Some(80.0))]),
            worst
        );
    }

    #[test]
    fn coverage_counts_the_other_hosts_and_never_divides_by_zero() {
        assert_eq!(coverage_pct(2, 5), 50.0);
        assert_eq!(coverage_pct(0, 1), 0.0);
        assert_eq!(coverage_pct(0, 0), 0.0);
    }
}
