//! One report row and its formatting (facts.md 3.9: rates 1 dp, Mbit/s and loss
//! 3 dp, microseconds 0 dp, CPU 1 dp; `None` is written as a blank cell).

use std::fmt::Write as _;

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
}

fn fixed(out: &mut String, value: Option<f64>, decimals: usize) {
    if let Some(v) = value {
        let _ = write!(out, "{v:.decimals$}");
    }
    out.push(',');
}

fn int(out: &mut String, value: Option<u64>) {
    if let Some(v) = value {
        let _ = write!(out, "{v}");
    }
    out.push(',');
}

impl ReportRow {
    /// Appends the row's CSV line (CRLF-terminated) to `out`. Host and peer
    /// names cannot hold a comma, quote or blank (the token grammar refuses
    /// them), so no field needs quoting.
    pub fn write_csv(&self, out: &mut String) {
        let _ = write!(
            out,
            "{},{},{},{},{},{},",
            self.ts,
            self.host,
            self.dir.map_or("", Dir::as_str),
            self.peer,
            self.size,
            self.rep_size
        );
        fixed(out, self.target_pps, 1);
        fixed(out, self.pps, 1);
        fixed(out, self.mbps, 3);
        fixed(out, self.rep_pps, 1);
        fixed(out, self.rep_mbps, 3);
        fixed(out, self.loss_pct, 3);
        fixed(out, self.rtt_avg_us, 0);
        fixed(out, self.rtt_p50_us, 0);
        fixed(out, self.rtt_p99_us, 0);
        fixed(out, self.rtt_max_us, 0);
        fixed(out, self.cpu_pct, 1);
        fixed(out, self.cpu_max_pct, 1);
        fixed(out, self.agent_cpu_pct, 1);
        int(out, self.workers.map(u64::from));
        int(out, self.layer.map(u64::from));
        // The original's nine disk columns: this mx has no --disk mode.
        out.push_str(",,,,,,,,,");
        int(out, self.dup_pkts);
        int(out, self.ooo_pkts);
        fixed(out, self.rtt_p999_us, 0);
        int(out, self.stray_pkts);
        int(out, self.pkts);
        int(out, self.rep_pkts);
        int(out, self.late_pkts);
        out.push_str(self.phase.unwrap_or(""));
        out.push(',');
        int(out, self.req_drops);
        int(out, self.rep_drops);
        int(out, self.udp_rcvbuf_errors);
        int(out, self.udp_in_errors);
        int(out, self.udp_no_ports);
        int(out, self.nic_rx_drops);
        fixed(out, self.behind_ms, 1);
        fixed(out, self.throttled_ms, 1);
        if let Some(hist) = &self.rtt_hist {
            out.push_str(hist);
        }
        out.push_str("\r\n");
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
            ..ReportRow::default()
        };
        let mut line = String::new();
        row.write_csv(&mut line);
        assert_eq!(
            line,
            "1796003020,alpha,tx,beta,64,512,1000.0,1000.0,0.512,999.0,4.092,0.096,42,40,88,120,,,,,,,,,,,,,,,0,2,110,,1000,999,,,,,,,,,,,\r\n"
        );
        assert_eq!(
            line.trim_end().split(',').count(),
            super::super::COLUMNS.len()
        );
        assert_eq!(header_line().trim_end().split(',').count(), 47);
    }
}
