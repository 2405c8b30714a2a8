//! The overlay catalogue of `mx export`: for each overlay its
//! unit, palette direction, pinned scale, preset aggregation, decimals, short
//! name and label, so that every overlay arrives in the floor-plan viewer ready
//! to read.

/// How an overlay reads in the viewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlay {
    pub name: &'static str,
    pub unit: Option<&'static str>,
    /// `good` or `bad` for higher values; `None` for `state`.
    pub higher: Option<&'static str>,
    pub palette: Option<&'static str>,
    /// A pinned scale (min, max), where the value is a share of something.
    pub scale: Option<(&'static str, &'static str)>,
    pub agg: Option<&'static str>,
    pub decimals: Option<u8>,
    pub short: &'static str,
    pub label: &'static str,
}

const fn overlay(
    name: &'static str,
    unit: Option<&'static str>,
    higher: Option<&'static str>,
    decimals: Option<u8>,
    short: &'static str,
    label: &'static str,
) -> Overlay {
    Overlay {
        name,
        unit,
        higher,
        palette: None,
        scale: None,
        agg: None,
        decimals,
        short,
        label,
    }
}

const fn pinned(mut o: Overlay, min: &'static str, max: &'static str) -> Overlay {
    o.scale = Some((min, max));
    o
}

const fn agg(mut o: Overlay, agg: &'static str) -> Overlay {
    o.agg = Some(agg);
    o
}

const fn rdbu(mut o: Overlay) -> Overlay {
    o.palette = Some("rdbu");
    o
}

const PPS: Option<&str> = Some("pps");
const PCT: Option<&str> = Some("%");
const US: Option<&str> = Some("us");
const GBPS: Option<&str> = Some("Gb/s");
const GOOD: Option<&str> = Some("good");
const BAD: Option<&str> = Some("bad");

pub(crate) const PPS_O: Overlay = overlay("pps", PPS, GOOD, Some(0), "PPS", "Requests sent");
pub(crate) const REP_PPS: Overlay =
    overlay("rep_pps", PPS, GOOD, Some(0), "REP", "Replies received");
pub(crate) const SERVED_PPS: Overlay = overlay(
    "served_pps",
    PPS,
    GOOD,
    Some(0),
    "SRV",
    "Requests arriving here",
);
pub(crate) const REQUEST_GBPS: Overlay = overlay(
    "request_gbps",
    GBPS,
    GOOD,
    Some(2),
    "REQ",
    "Requests on the wire",
);
pub(crate) const EGRESS_GBPS: Overlay = overlay(
    "egress_gbps",
    GBPS,
    GOOD,
    Some(2),
    "EGR",
    "Egress on the wire",
);
pub(crate) const LINE_UTIL: Overlay = agg(
    pinned(
        overlay(
            "line_util",
            PCT,
            GOOD,
            Some(0),
            "UTIL",
            "Egress vs NIC line rate",
        ),
        "0",
        "100",
    ),
    "median",
);
pub(crate) const REL_MEDIAN: Overlay = agg(
    pinned(
        rdbu(overlay(
            "rel_median",
            PCT,
            GOOD,
            Some(0),
            "REL",
            "Packet rate vs fleet median",
        )),
        "0",
        "200",
    ),
    "median",
);
pub const LOSS: Overlay = overlay("loss", PCT, BAD, Some(2), "LOSS", "Round-trip loss");
pub(crate) const FORWARD_LOSS: Overlay = overlay(
    "forward_loss",
    PCT,
    BAD,
    Some(2),
    "FWD",
    "Requests lost on the way out",
);
pub(crate) const RETURN_LOSS: Overlay = overlay(
    "return_loss",
    PCT,
    BAD,
    Some(2),
    "RET",
    "Replies lost on the way back",
);
pub(crate) const ACHIEVED: Overlay = agg(
    pinned(
        rdbu(overlay(
            "achieved",
            PCT,
            GOOD,
            Some(0),
            "ACHV",
            "Rate achieved vs target",
        )),
        "0",
        "200",
    ),
    "median",
);
pub const COVERAGE: Overlay = agg(
    pinned(
        overlay(
            "coverage",
            PCT,
            GOOD,
            Some(0),
            "COV",
            "Peers measured so far",
        ),
        "0",
        "100",
    ),
    "min",
);
pub(crate) const RTT_AVG: Overlay = overlay(
    "rtt_avg",
    US,
    BAD,
    Some(0),
    "AVG",
    "RTT mean over this host's flows",
);
/// Percentiles of every reply a host got: exact, from its reports' histograms.
pub(crate) const RTT_P50: Overlay = overlay(
    "rtt_p50",
    US,
    BAD,
    Some(0),
    "P50",
    "RTT p50 of this host's replies",
);
pub(crate) const RTT_P99: Overlay = agg(
    overlay(
        "rtt_p99",
        US,
        BAD,
        Some(0),
        "P99",
        "RTT p99 of this host's replies",
    ),
    "max",
);
/// The same overlays where the reports carry no histograms (the original's):
/// the worst flow's worst interval, an upper bound, and labelled as one.
pub(crate) const RTT_P50_WORST: Overlay = overlay(
    "rtt_p50",
    US,
    BAD,
    Some(0),
    "P50",
    "RTT p50, worst flow's worst interval",
);
pub(crate) const RTT_P99_WORST: Overlay = agg(
    overlay(
        "rtt_p99",
        US,
        BAD,
        Some(0),
        "P99",
        "RTT p99, worst flow's worst interval",
    ),
    "max",
);
/// `--peers` folded into rtt_p99: one sample per flow, its worst interval.
pub(crate) const RTT_P99_FLOWS: Overlay = agg(
    overlay(
        "rtt_p99",
        US,
        BAD,
        Some(0),
        "P99",
        "RTT p99, each flow's worst interval",
    ),
    "max",
);
pub(crate) const RTT_MAX: Overlay = agg(
    overlay("rtt_max", US, BAD, Some(0), "MAX", "RTT max, worst peer"),
    "max",
);
pub const CPU: Overlay = pinned(
    overlay("cpu", PCT, BAD, Some(0), "CPU", "Host CPU"),
    "0",
    "100",
);
pub(crate) const CPU_CORE: Overlay = agg(
    pinned(
        overlay("cpu_core", PCT, BAD, Some(0), "CORE", "Busiest core"),
        "0",
        "100",
    ),
    "max",
);
pub(crate) const AGENT_CPU: Overlay = agg(
    overlay(
        "agent_cpu",
        PCT,
        BAD,
        Some(0),
        "ACPU",
        "Busiest mx worker, share of a core",
    ),
    "max",
);
const MBS: Option<&str> = Some("MB/s");
const IOPS: Option<&str> = Some("IOPS");

// A host's disk in a disk run: rates are host means, summed
// over a rack; p99 is the host's worst interval's.
pub(crate) const DISK_READ_MBS: Overlay = agg(
    overlay("disk_read_mbs", MBS, GOOD, Some(1), "DRD", "Disk read"),
    "sum",
);
pub(crate) const DISK_WRITE_MBS: Overlay = agg(
    overlay("disk_write_mbs", MBS, GOOD, Some(1), "DWR", "Disk write"),
    "sum",
);
pub(crate) const DISK_READ_IOPS: Overlay = agg(
    overlay(
        "disk_read_iops",
        IOPS,
        GOOD,
        Some(0),
        "RIOP",
        "Disk read operations",
    ),
    "sum",
);
pub(crate) const DISK_WRITE_IOPS: Overlay = agg(
    overlay(
        "disk_write_iops",
        IOPS,
        GOOD,
        Some(0),
        "WIOP",
        "Disk write operations",
    ),
    "sum",
);
pub(crate) const DISK_READ_P99: Overlay = agg(
    overlay("disk_read_p99", US, BAD, Some(0), "DRP99", "Disk read p99"),
    "max",
);
pub(crate) const DISK_WRITE_P99: Overlay = agg(
    overlay(
        "disk_write_p99",
        US,
        BAD,
        Some(0),
        "DWP99",
        "Disk write p99",
    ),
    "max",
);
pub(crate) const DISK_BUSY: Overlay = agg(
    pinned(
        overlay(
            "disk_busy",
            PCT,
            BAD,
            Some(0),
            "DISK",
            "Busiest mx worker, time blocked on disk",
        ),
        "0",
        "100",
    ),
    "max",
);

pub(crate) const PEERS: Overlay = agg(
    overlay(
        "peers",
        None,
        GOOD,
        Some(0),
        "PEER",
        "Flows this host sends",
    ),
    "min",
);
pub(crate) const WORKERS: Overlay = agg(
    overlay(
        "workers",
        None,
        GOOD,
        Some(0),
        "WRK",
        "Agent worker threads",
    ),
    "min",
);
pub(crate) const INTERVALS: Overlay = agg(
    overlay(
        "intervals",
        None,
        GOOD,
        Some(0),
        "IVL",
        "Report intervals in the window",
    ),
    "min",
);
pub(crate) const STATE: Overlay = agg(
    overlay("state", None, None, None, "STATE", "Did this host report?"),
    "last",
);
pub(crate) const PEER_PPS: Overlay = agg(
    overlay(
        "peer_pps",
        PPS,
        GOOD,
        Some(0),
        "PPS",
        "Requests sent to one peer",
    ),
    "mean",
);
pub(crate) const PEER_LOSS: Overlay = agg(
    overlay(
        "peer_loss",
        PCT,
        BAD,
        Some(2),
        "LOSS",
        "Round-trip loss, worst peer",
    ),
    "max",
);
pub(crate) const PEER_RTT_P99: Overlay = agg(
    overlay(
        "peer_rtt_p99",
        US,
        BAD,
        Some(0),
        "P99",
        "RTT p99, the flow's worst interval",
    ),
    "max",
);

impl Overlay {
    /// The meta keys in the viewer's order: unit, higher, palette, min, max,
    /// agg, decimals, short, label (double-quoted). `nic_max` pins a Gb/s overlay.
    pub fn meta(&self, nic_max: Option<&str>, folded_sum: bool) -> Vec<(&'static str, String)> {
        let mut m = Vec::new();
        if let Some(u) = self.unit {
            m.push(("unit", u.to_string()));
        }
        if let Some(h) = self.higher {
            m.push(("higher", h.to_string()));
        }
        if let Some(p) = self.palette {
            m.push(("palette", p.to_string()));
        }
        if let Some((min, max)) = self.scale {
            m.push(("min", min.to_string()));
            m.push(("max", max.to_string()));
        }
        if let Some(agg) = self.agg {
            m.push(("agg", agg.to_string()));
        }
        if let Some(d) = self.decimals {
            m.push(("decimals", d.to_string()));
        }
        m.push(("short", self.short.to_string()));
        m.push(("label", format!("\"{}\"", self.label)));
        if let Some(max) = nic_max {
            m.push(("min", "0".to_string()));
            m.push(("max", max.to_string()));
        }
        if folded_sum {
            m.push(("agg", "sum".to_string()));
        }
        m
    }
}
