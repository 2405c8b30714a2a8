//! `report.csv`: the per-interval rows every agent appends, one file per host.
//!
//! The original tool's 30 columns in its order and formats, then ours, appended
//! after them so that readers of the original format keep working:
//!
//! - `dup_pkts, ooo_pkts, rtt_p999_us, stray_pkts`; `send_errors` (tx and
//!   host rows): requests the kernel refused to send (a firewall's EPERM, an
//!   unreachable route), never counted as sent;
//! - `pkts, rep_pkts`: the interval's counts behind `pps` and `rep_pps` (tx:
//!   requests sent and the replies to them; rx: requests arrived and replies
//!   sent; host: the tx totals), so that every ratio is taken over the same
//!   packets; `late_pkts`: replies (tx) or requests (rx) that arrived after
//!   their interval was written, counted there as lost;
//! - `phase` (host rows): `start`, `steady`, `last` or `end`, where the
//!   interval sat in the run (agent::clock::Phase): summaries count only the
//!   steady part;
//! - the host's own evidence of loss (host rows): `req_drops` / `rep_drops`,
//!   requests and replies the kernel dropped at the agent's full sockets;
//!   `udp_rcvbuf_errors`, `udp_in_errors`, `udp_no_ports` (the host's UDP
//!   counters), `nic_rx_drops` (the rx drops of the interface that carries
//!   the traffic; of every interface where that one is not known),
//!   `behind_ms` (the longest the agent was behind its send schedule) and
//!   `throttled_ms` (its cgroup's CPU throttling);
//! - `rtt_hist`: on host rows, the interval's RTT histogram (`ns:count` per
//!   non-empty bucket, `;` between), from which summarize computes percentiles
//!   exactly instead of averaging them;
//! - `rate_scale` (tx and host rows): the factor the flows' matrix rates were
//!   scaled by in the interval (`mx run --ramp`), blank when nothing scaled
//!   them (and on a host row whose workers were not all at one scale);
//! - what left the host and what arrived, as its kernel counted (host rows):
//!   `nic` (the interface that carries the traffic), its `nic_tx_pkts`,
//!   `nic_tx_bytes`, `nic_rx_pkts`, `nic_rx_bytes` and `nic_tx_drops` over
//!   the interval, and `udp_sndbuf_errors` (datagrams the kernel dropped on
//!   their way out: a full qdisc or no buffer). Beside them the agent's own
//!   `gso_pkts` and `gro_pkts`, the datagrams it sent and read in coalesced
//!   (UDP GSO/GRO) messages: a software interface (veth, loopback) counts
//!   such a message as one packet, so its packet counts and the agent's
//!   compare only where these are 0, and its payload bytes (its bytes less
//!   each packet's headers) elsewhere. `steal_pct`: the share of the host's
//!   CPU time its hypervisor gave to others;
//! - `rtt_min_us` and `jitter_us` (tx and host rows): the smallest round trip
//!   of the interval, and the mean absolute difference between successive
//!   round trips of a flow socket (RFC 3550's measure, unsmoothed);
//! - `over_plan` (rx and host rows): requests that arrived and were left
//!   unanswered because their source sent past what the matrix plans for it
//!   here, and its headroom (agent::budget). They count in `pkts`, never in
//!   `rep_pkts`: refused by plan, not lost;
//! - `matrix_fp` (host rows): the print of the traffic this agent ran
//!   (`matrix::run_print`): a summary refuses reports whose print is not
//!   the matrix's beside them, another run's;
//! - `began_by` (the first host row an agent writes): the command whose
//!   start instant began its flows, `start` (`mx start`, `mx run`) or
//!   `reload`: a summary says "restarted by reload", not "came up late";
//!   `keep` on the first host row of a report cut to its newest rows
//!   (`--keep-report`, agent::report_keep);
//! - both legs as this host tells them from its own counts (tx rows): the
//!   responder's count each reply carries says how many of the requests up
//!   to it arrived (agent::legs). `settled_pkts`: requests whose fate became
//!   known while the interval was written (up to the newest reply's
//!   number); of them `fwd_lost_pkts` never reached the peer and
//!   `ret_lost_pkts` reached it and were never answered back. Settled when
//!   the row is written, not by the interval the requests were sent in;
//!   blank when the peer's replies carry no count (the original's agent) or
//!   none came back yet;
//! - `streams` (tx rows): the row's figures per stream (`--streams`), each
//!   by its source port: sent, replies, and both legs where told
//!   ([`streams`]).
//!
//! A blank cell means "not measured", never zero. Lines end in CRLF, as
//! Python's csv writer wrote them.
//!
//! Row kinds (`dir`): `tx`, this host as a client towards `peer` (requests sent,
//! replies back, RTT); `rx`, this host as a server for `peer` (requests arrived,
//! replies sent); `host`, one per interval with the totals and CPU numbers.

#![forbid(unsafe_code)]

pub mod paths;
pub mod read;
pub mod row;
pub mod rtt;
pub mod streams;

pub use row::{Dir, ReportRow};

/// How far behind its send schedule an agent may fall (the host row's
/// `behind_ms`, counted from the moment a batch was due, its tokens already
/// in) and lose no send: its pacer's bucket holds the epoll wait's
/// whole-millisecond rounding and 5 ms of lateness. Further behind, an
/// interval that ran short of its rate lost those sends to the agent's CPU,
/// not to the network. The one definition: the pacer, the ramp's verdict,
/// the tests and the benches read it from here.
pub const FORGIVEN_BEHIND_MS: f64 = 6.0;

/// How far behind its send schedule (`behind_ms`) an agent is taken to
/// have been starved of the CPU it needed: its sends ran late and it
/// answered late, so every round trip to and from it carries its delay.
/// The one definition: the summary's diagnosis, the ramp's verdict and
/// the monitor's alerts read it from here.
pub const STARVED_BEHIND_MS: f64 = 20.0;

/// How long after its tick an interval's rows are written: the replies to
/// its last requests, and the requests of peers whose clocks run a little
/// behind, have this long to arrive and be counted in it. Half an interval,
/// at most 0.5 s. Hosts' clocks must agree to better than this.
pub fn hold_seconds(interval: f64) -> f64 {
    (interval / 2.0).min(0.5)
}

/// Where an interval sat in its host's run: the host row's `phase` column.
/// Summaries count only `steady` and `last` intervals of every host (the
/// fleet's edges, and a host's own start or end, are left out, and said).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The flows began during this interval (a late start, a restart).
    Start,
    /// The flows sent for the whole interval.
    Steady,
    /// The whole interval, and the run's planned end came at its close.
    Last,
    /// The planned end came within this interval.
    End,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Steady => "steady",
            Phase::Last => "last",
            Phase::End => "end",
        }
    }

    pub fn parse(text: &str) -> Option<Phase> {
        match text {
            "start" => Some(Phase::Start),
            "steady" => Some(Phase::Steady),
            "last" => Some(Phase::Last),
            "end" => Some(Phase::End),
            _ => None,
        }
    }

    /// The flows sent for the whole interval.
    pub fn is_whole(self) -> bool {
        matches!(self, Phase::Steady | Phase::Last)
    }
}

/// Declares the report's columns once: the enum the writer and every reader
/// use (a misspelt column is a compile error, not a blank that reads as "not
/// measured"), the order in the file, and the names in its header.
macro_rules! columns {
    ($($variant:ident = $name:literal,)*) => {
        /// A column of report.csv.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Column {
            $($variant,)*
        }

        impl Column {
            /// Every column, in file order.
            pub const ALL: &[Column] = &[$(Column::$variant,)*];

            /// The column's name in the header.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Column::$variant => $name,)*
                }
            }
        }

        /// The header's names, in file order.
        pub const COLUMNS: &[&str] = &[$($name,)*];
    };
}

columns! {
    Ts = "ts",
    Host = "host",
    Dir = "dir",
    Peer = "peer",
    Size = "size",
    RepSize = "rep_size",
    TargetPps = "target_pps",
    Pps = "pps",
    Mbps = "mbps",
    RepPps = "rep_pps",
    RepMbps = "rep_mbps",
    LossPct = "loss_pct",
    RttAvgUs = "rtt_avg_us",
    RttP50Us = "rtt_p50_us",
    RttP99Us = "rtt_p99_us",
    RttMaxUs = "rtt_max_us",
    CpuPct = "cpu_pct",
    CpuMaxPct = "cpu_max_pct",
    AgentCpuPct = "agent_cpu_pct",
    Workers = "workers",
    Layer = "layer",
    DiskRdIops = "disk_rd_iops",
    DiskRdMbS = "disk_rd_mb_s",
    DiskRdAvgUs = "disk_rd_avg_us",
    DiskRdP99Us = "disk_rd_p99_us",
    DiskWrIops = "disk_wr_iops",
    DiskWrMbS = "disk_wr_mb_s",
    DiskWrAvgUs = "disk_wr_avg_us",
    DiskWrP99Us = "disk_wr_p99_us",
    DiskBusyPct = "disk_busy_pct",
    DupPkts = "dup_pkts",
    OooPkts = "ooo_pkts",
    RttP999Us = "rtt_p999_us",
    StrayPkts = "stray_pkts",
    SendErrors = "send_errors",
    Pkts = "pkts",
    RepPkts = "rep_pkts",
    LatePkts = "late_pkts",
    Phase = "phase",
    ReqDrops = "req_drops",
    RepDrops = "rep_drops",
    UdpRcvbufErrors = "udp_rcvbuf_errors",
    UdpInErrors = "udp_in_errors",
    UdpNoPorts = "udp_no_ports",
    NicRxDrops = "nic_rx_drops",
    BehindMs = "behind_ms",
    ThrottledMs = "throttled_ms",
    RttHist = "rtt_hist",
    RateScale = "rate_scale",
    Nic = "nic",
    NicTxPkts = "nic_tx_pkts",
    NicTxBytes = "nic_tx_bytes",
    NicRxPkts = "nic_rx_pkts",
    NicRxBytes = "nic_rx_bytes",
    NicTxDrops = "nic_tx_drops",
    UdpSndbufErrors = "udp_sndbuf_errors",
    GsoPkts = "gso_pkts",
    GroPkts = "gro_pkts",
    StealPct = "steal_pct",
    RttMinUs = "rtt_min_us",
    JitterUs = "jitter_us",
    OverPlan = "over_plan",
    MatrixFp = "matrix_fp",
    BeganBy = "began_by",
    SettledPkts = "settled_pkts",
    FwdLostPkts = "fwd_lost_pkts",
    RetLostPkts = "ret_lost_pkts",
    Streams = "streams",
    NeighTableFulls = "neigh_table_fulls",
    NeighResFailed = "neigh_res_failed",
    Hops = "hops",
    HopsMax = "hops_max",
    DiskDepth = "disk_depth",
}
