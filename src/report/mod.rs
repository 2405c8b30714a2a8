//! `report.csv`: the per-interval rows every agent appends, one file per host.
//!
//! The original's 30 columns in its order and formats (facts.md 3.9), then ours,
//! appended so that readers of the original format keep working (design.md):
//! `dup_pkts, ooo_pkts, rtt_p999_us, stray_pkts`, and `rtt_hist`: on host rows,
//! the interval's RTT histogram (`ns:count` per non-empty bucket, `;` between),
//! from which summarize computes fleet-wide percentiles exactly instead of
//! averaging percentiles. A blank cell means "not measured", never zero. Lines
//! end in CRLF, as Python's csv writer wrote them.
//!
//! Row kinds (`dir`): `tx`, this host as a client towards `peer` (requests sent,
//! replies back, RTT); `rx`, this host as a server for `peer` (requests arrived,
//! replies sent); `host`, one per interval with the totals and CPU numbers.

pub mod read;
pub mod row;

pub use row::{Dir, ReportRow};

/// The columns, in order.
pub const COLUMNS: [&str; 35] = [
    "ts",
    "host",
    "dir",
    "peer",
    "size",
    "rep_size",
    "target_pps",
    "pps",
    "mbps",
    "rep_pps",
    "rep_mbps",
    "loss_pct",
    "rtt_avg_us",
    "rtt_p50_us",
    "rtt_p99_us",
    "rtt_max_us",
    "cpu_pct",
    "cpu_max_pct",
    "agent_cpu_pct",
    "workers",
    "layer",
    "disk_rd_iops",
    "disk_rd_mb_s",
    "disk_rd_avg_us",
    "disk_rd_p99_us",
    "disk_wr_iops",
    "disk_wr_mb_s",
    "disk_wr_avg_us",
    "disk_wr_p99_us",
    "disk_busy_pct",
    "dup_pkts",
    "ooo_pkts",
    "rtt_p999_us",
    "stray_pkts",
    "rtt_hist",
];

/// Columns of the original tool's reports (ours add the rest).
pub const ORIGINAL_COLUMNS: usize = 30;
