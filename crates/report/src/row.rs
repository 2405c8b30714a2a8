//! One report row and its formatting (the original tool's: rates 1 dp, Mbit/s
//! and loss 3 dp, microseconds 0 dp, CPU 1 dp; `None` is written as a blank
//! cell).

use std::fmt::Write as _;

use super::Column;

/// Which side of the exchange a row describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Tx,
    Rx,
    Host,
}

impl Dir {
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::Tx => "tx",
            Dir::Rx => "rx",
            Dir::Host => "host",
        }
    }

    /// The `dir` cell read back; `None` for anything else.
    pub fn parse(cell: &str) -> Option<Dir> {
        [Dir::Tx, Dir::Rx, Dir::Host]
            .into_iter()
            .find(|d| d.as_str() == cell)
    }
}

/// A row of report.csv. Every measured figure is an `Option`: blank when not measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportRow {
    pub ts: i64,
    pub host: String,
    pub dir: Option<Dir>,
    pub peer: String,
    pub size: u32,
    pub rep_size: u32,
    pub target_pps: Option<f64>,
    pub pps: Option<f64>,
    pub mbps: Option<f64>,
    pub rep_pps: Option<f64>,
    pub rep_mbps: Option<f64>,
    pub loss_pct: Option<f64>,
    pub rtt_avg_us: Option<f64>,
    pub rtt_p50_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    pub rtt_max_us: Option<f64>,
    pub cpu_pct: Option<f64>,
    pub cpu_max_pct: Option<f64>,
    pub agent_cpu_pct: Option<f64>,
    pub workers: Option<u32>,
    pub layer: Option<u32>,
    pub dup_pkts: Option<u64>,
    pub ooo_pkts: Option<u64>,
    pub rtt_p999_us: Option<f64>,
    pub stray_pkts: Option<u64>,
    pub send_errors: Option<u64>,
    pub pkts: Option<u64>,
    pub rep_pkts: Option<u64>,
    pub late_pkts: Option<u64>,
    pub phase: Option<&'static str>,
    pub req_drops: Option<u64>,
    pub rep_drops: Option<u64>,
    pub udp_rcvbuf_errors: Option<u64>,
    pub udp_in_errors: Option<u64>,
    pub udp_no_ports: Option<u64>,
    pub nic_rx_drops: Option<u64>,
    pub behind_ms: Option<f64>,
    pub throttled_ms: Option<f64>,
    pub rtt_hist: Option<String>,
    pub disk_rd_iops: Option<f64>,
    pub disk_rd_mb_s: Option<f64>,
    pub disk_rd_avg_us: Option<f64>,
    pub disk_rd_p99_us: Option<f64>,
    pub disk_wr_iops: Option<f64>,
    pub disk_wr_mb_s: Option<f64>,
    pub disk_wr_avg_us: Option<f64>,
    pub disk_wr_p99_us: Option<f64>,
    pub disk_busy_pct: Option<f64>,
    pub rate_scale: Option<f64>,
    pub nic: Option<String>,
    pub nic_tx_pkts: Option<u64>,
    pub nic_tx_bytes: Option<u64>,
    pub nic_rx_pkts: Option<u64>,
    pub nic_rx_bytes: Option<u64>,
    pub nic_tx_drops: Option<u64>,
    pub udp_sndbuf_errors: Option<u64>,
    pub gso_pkts: Option<u64>,
    pub gro_pkts: Option<u64>,
    pub steal_pct: Option<f64>,
    pub rtt_min_us: Option<f64>,
    pub jitter_us: Option<f64>,
    pub over_plan: Option<u64>,
    pub matrix_fp: Option<String>,
    pub began_by: Option<&'static str>,
    pub settled_pkts: Option<u64>,
    pub fwd_lost_pkts: Option<u64>,
    pub ret_lost_pkts: Option<u64>,
    /// The `streams` cell, written ([`crate::streams::write`]).
    pub streams: Option<String>,
    /// Host rows: the times the kernel's neighbour tables (ARP, NDP) were
    /// full, and the resolutions that got no answer, over the interval.
    pub neigh_table_fulls: Option<u64>,
    pub neigh_res_failed: Option<u64>,
    /// Per-peer rows: the fewest and the most routers the datagrams that
    /// came from the peer crossed (the replies on a tx row, the requests on
    /// an rx row), from the TTL each arrived with.
    pub hops: Option<u32>,
    pub hops_max: Option<u32>,
    /// Host rows of a disk run: the disk operations each worker kept in
    /// flight (`--disk-depth`).
    pub disk_depth: Option<u32>,
}

fn fixed(out: &mut String, value: Option<f64>, decimals: usize) {
    if let Some(v) = value {
        let _ = write!(out, "{v:.decimals$}");
    }
}

fn int(out: &mut String, value: Option<u64>) {
    if let Some(v) = value {
        let _ = write!(out, "{v}");
    }
}

impl ReportRow {
    /// Appends the row's CSV line (CRLF-terminated) to `out`, one cell per
    /// column of the schema in its order. Host and peer names cannot hold a
    /// comma, quote or blank (the token grammar refuses them), so no field
    /// needs quoting.
    pub fn write_csv(&self, out: &mut String) {
        for (i, &column) in Column::ALL.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            self.write_cell(column, out);
        }
        out.push_str("\r\n");
    }

    /// One cell, in the column's format (the original tool's, for its columns).
    fn write_cell(&self, column: Column, out: &mut String) {
        use Column as C;
        match column {
            C::Ts => {
                let _ = write!(out, "{}", self.ts);
            }
            C::Host => out.push_str(&self.host),
            C::Dir => out.push_str(self.dir.map_or("", Dir::as_str)),
            C::Peer => out.push_str(&self.peer),
            C::Size => int(out, Some(u64::from(self.size))),
            C::RepSize => int(out, Some(u64::from(self.rep_size))),
            C::TargetPps => fixed(out, self.target_pps, 1),
            C::Pps => fixed(out, self.pps, 1),
            C::Mbps => fixed(out, self.mbps, 3),
            C::RepPps => fixed(out, self.rep_pps, 1),
            C::RepMbps => fixed(out, self.rep_mbps, 3),
            C::LossPct => fixed(out, self.loss_pct, 3),
            C::RttAvgUs => fixed(out, self.rtt_avg_us, 0),
            C::RttP50Us => fixed(out, self.rtt_p50_us, 0),
            C::RttP99Us => fixed(out, self.rtt_p99_us, 0),
            C::RttMaxUs => fixed(out, self.rtt_max_us, 0),
            C::CpuPct => fixed(out, self.cpu_pct, 1),
            C::CpuMaxPct => fixed(out, self.cpu_max_pct, 1),
            C::AgentCpuPct => fixed(out, self.agent_cpu_pct, 1),
            C::Workers => int(out, self.workers.map(u64::from)),
            C::Layer => int(out, self.layer.map(u64::from)),
            // Host rows of disk runs only: blank otherwise.
            C::DiskRdIops => fixed(out, self.disk_rd_iops, 1),
            C::DiskRdMbS => fixed(out, self.disk_rd_mb_s, 3),
            C::DiskRdAvgUs => fixed(out, self.disk_rd_avg_us, 0),
            C::DiskRdP99Us => fixed(out, self.disk_rd_p99_us, 0),
            C::DiskWrIops => fixed(out, self.disk_wr_iops, 1),
            C::DiskWrMbS => fixed(out, self.disk_wr_mb_s, 3),
            C::DiskWrAvgUs => fixed(out, self.disk_wr_avg_us, 0),
            C::DiskWrP99Us => fixed(out, self.disk_wr_p99_us, 0),
            C::DiskBusyPct => fixed(out, self.disk_busy_pct, 1),
            C::DupPkts => int(out, self.dup_pkts),
            C::OooPkts => int(out, self.ooo_pkts),
            C::RttP999Us => fixed(out, self.rtt_p999_us, 0),
            C::StrayPkts => int(out, self.stray_pkts),
            C::SendErrors => int(out, self.send_errors),
            C::Pkts => int(out, self.pkts),
            C::RepPkts => int(out, self.rep_pkts),
            C::LatePkts => int(out, self.late_pkts),
            C::Phase => out.push_str(self.phase.unwrap_or("")),
            C::ReqDrops => int(out, self.req_drops),
            C::RepDrops => int(out, self.rep_drops),
            C::UdpRcvbufErrors => int(out, self.udp_rcvbuf_errors),
            C::UdpInErrors => int(out, self.udp_in_errors),
            C::UdpNoPorts => int(out, self.udp_no_ports),
            C::NicRxDrops => int(out, self.nic_rx_drops),
            C::BehindMs => fixed(out, self.behind_ms, 1),
            C::ThrottledMs => fixed(out, self.throttled_ms, 1),
            C::RttHist => out.push_str(self.rtt_hist.as_deref().unwrap_or("")),
            C::RateScale => fixed(out, self.rate_scale, 4),
            C::Nic => out.push_str(self.nic.as_deref().unwrap_or("")),
            C::NicTxPkts => int(out, self.nic_tx_pkts),
            C::NicTxBytes => int(out, self.nic_tx_bytes),
            C::NicRxPkts => int(out, self.nic_rx_pkts),
            C::NicRxBytes => int(out, self.nic_rx_bytes),
            C::NicTxDrops => int(out, self.nic_tx_drops),
            C::UdpSndbufErrors => int(out, self.udp_sndbuf_errors),
            C::GsoPkts => int(out, self.gso_pkts),
            C::GroPkts => int(out, self.gro_pkts),
            C::StealPct => fixed(out, self.steal_pct, 1),
            C::RttMinUs => fixed(out, self.rtt_min_us, 0),
            C::JitterUs => fixed(out, self.jitter_us, 1),
            C::OverPlan => int(out, self.over_plan),
            C::MatrixFp => out.push_str(self.matrix_fp.as_deref().unwrap_or("")),
            C::BeganBy => out.push_str(self.began_by.unwrap_or("")),
            C::SettledPkts => int(out, self.settled_pkts),
            C::FwdLostPkts => int(out, self.fwd_lost_pkts),
            C::RetLostPkts => int(out, self.ret_lost_pkts),
            C::Streams => out.push_str(self.streams.as_deref().unwrap_or("")),
            C::NeighTableFulls => int(out, self.neigh_table_fulls),
            C::NeighResFailed => int(out, self.neigh_res_failed),
            C::Hops => int(out, self.hops.map(u64::from)),
            C::HopsMax => int(out, self.hops_max.map(u64::from)),
            C::DiskDepth => int(out, self.disk_depth.map(u64::from)),
        }
    }
}

/// The header line, CRLF-terminated.
pub fn header_line() -> String {
    let mut line = super::COLUMNS.join(",");
    line.push_str("\r\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_has_every_column_and_blanks_for_the_unmeasured() {
        let row = ReportRow {
            ts: 1_796_003_020,
            host: "alpha".into(),
            dir: Some(Dir::Tx),
            peer: "beta".into(),
            size: 64,
            rep_size: 512,
            target_pps: Some(1000.0),
            pps: Some(999.96),
            mbps: Some(0.5119795),
            rep_pps: Some(999.0),
            rep_mbps: Some(4.0919),
            loss_pct: Some(0.096),
            rtt_avg_us: Some(41.6),
            rtt_p50_us: Some(40.2),
            rtt_p99_us: Some(88.5),
            rtt_max_us: Some(120.0),
            dup_pkts: Some(0),
            ooo_pkts: Some(2),
            rtt_p999_us: Some(110.4),
            pkts: Some(1000),
            rep_pkts: Some(999),
            hops: Some(3),
            hops_max: Some(4),
            ..ReportRow::default()
        };
        let mut line = String::new();
        row.write_csv(&mut line);
        assert_eq!(
            line,
            "1796003020,alpha,tx,beta,64,512,1000.0,1000.0,0.512,999.0,4.092,0.096,42,40,88,120,,,,,,,,,,,,,,,0,2,110,,,1000,999,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,3,4,\r\n"
        );
        assert_eq!(
            line.trim_end().split(',').count(),
            super::super::COLUMNS.len()
        );
        assert_eq!(header_line().trim_end().split(',').count(), 73);
    }

    #[test]
    fn the_reader_finds_each_cell_under_the_column_the_writer_put_it() {
        use crate::read::for_each_row;
        let row = ReportRow {
            ts: 1_796_003_020,
            host: "alpha".into(),
            dir: Some(Dir::Host),
            peer: "*".into(),
            size: 64,
            rep_size: 512,
            pps: Some(7.0),
            pkts: Some(11),
            late_pkts: Some(13),
            phase: Some("last"),
            req_drops: Some(17),
            behind_ms: Some(19.5),
            rtt_hist: Some("1000:2".into()),
            over_plan: Some(23),
            ..ReportRow::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.csv");
        let mut text = header_line();
        row.write_csv(&mut text);
        std::fs::write(&path, &text).unwrap();
        let mut seen = 0;
        for_each_row(&path, |r| {
            seen += 1;
            assert_eq!(r.num(Column::Pps), Some(7.0));
            assert_eq!(r.num(Column::Pkts), Some(11.0));
            assert_eq!(r.num(Column::LatePkts), Some(13.0));
            assert_eq!(r.text(Column::Phase), "last");
            assert_eq!(r.num(Column::ReqDrops), Some(17.0));
            assert_eq!(r.num(Column::BehindMs), Some(19.5));
            assert_eq!(r.text(Column::RttHist), "1000:2");
            assert_eq!(r.num(Column::RepSize), Some(512.0));
            assert_eq!(r.num(Column::DiskBusyPct), None);
            assert_eq!(r.num(Column::OverPlan), Some(23.0));
        })
        .unwrap();
        assert_eq!(seen, 1);
    }
}
