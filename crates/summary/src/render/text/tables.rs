//! The per-host table (worst delivery first; its optional columns only
//! when some host has something in them, a `disk` column in disk runs only;
//! the hosts outside the span named with why) and the worst flows.

use std::fmt::Write as _;

use crate::analysis::aggregate::{self, ReportSet};
use crate::analysis::diagnosis;
use crate::analysis::figures::{self, percent};
use mx_base::units::{self, bits, micros, pps};

/// What each column of the per-host table says, in its order (the ones
/// after `agent` only where some host has something to show): the man
/// pages print it, and the README holds the same words (a test checks).
pub const HOST_COLUMNS: &[(&str, &str)] = &[
    ("host", "the host, worst delivery first"),
    ("sent", "requests it sent per second, over the steady span"),
    ("back", "replies that came back to it per second"),
    (
        "serving",
        "requests it received from its peers per second, and answered",
    ),
    (
        "egress",
        "bits per second out of its interface, by the interface's byte counter (else the wire rate of what its agent sent)",
    ),
    ("loss", "its round trips lost, either leg: 1 - back / sent"),
    ("rtt p99", "the 99th percentile of its round trips"),
    ("cpu", "the host's CPU busy, all cores together"),
    ("1 core", "its busiest core's busy share"),
    (
        "agent",
        "its busiest agent worker's CPU, in % of one core: near 100%, the agent is the limit, not the network",
    ),
    ("disk", "its disk's busy share (disk runs)"),
    ("dup", "requests and replies that arrived twice"),
    ("reorder", "packets that arrived out of order"),
    (
        "stray",
        "datagrams no flow of the run sent, left unanswered",
    ),
    (
        "refused",
        "requests left unanswered because their source sent past its plan",
    ),
    (
        "dropped",
        "datagrams its kernel dropped at the agent's full sockets",
    ),
    (
        "unsent",
        "packets its agent handed the kernel that its interface never sent",
    ),
    (
        "unread",
        "packets its interface received that its agent never read",
    ),
];

/// The per-host table: worst delivery first, `top` rows, then the hosts
/// outside the span and the notes its columns need.
pub(crate) fn host_table(
    t: &mut String,
    set: &ReportSet,
    hosts: &[figures::HostFigures],
    top: usize,
) {
    let width = hosts
        .iter()
        .map(|h| set.name(h.id).len() + 2)
        .max()
        .unwrap_or(0)
        .max(20);
    let columns = Columns::of(hosts);
    host_header(t, &columns, width);
    for h in hosts.iter().take(top) {
        host_row(t, set, h, &columns, width);
    }
    if hosts.len() > top {
        let _ = writeln!(
            t,
            "  ... {} more hosts (raise --top-hosts)",
            hosts.len() - top
        );
    }
    outside_span(t, set, hosts, width);
    host_notes(t, hosts, &columns);
    t.push('\n');
}

/// The host table's optional columns: each is shown only when some host
/// has something to say in it.
struct Columns {
    /// A `disk` column in disk runs only: any host measured its disk's busy
    /// time.
    disk: bool,
    dup: bool,
    ooo: bool,
    stray: bool,
    refused: bool,
    dropped: bool,
    /// Lost inside a host, between its agent and its interface: worth a
    /// column when some host lost a few packets that way.
    unsent: bool,
    unread: bool,
}

impl Columns {
    fn of(hosts: &[figures::HostFigures]) -> Columns {
        let counted = |v: Option<f64>| v.is_some_and(|n| n >= diagnosis::cells::MIN_LOST);
        Columns {
            disk: hosts
                .iter()
                .any(|h| h.disk.is_some_and(|d| d.busy.is_some())),
            dup: hosts.iter().any(|h| h.dup > 0.0),
            ooo: hosts.iter().any(|h| h.ooo > 0.0),
            stray: hosts.iter().any(|h| h.stray > 0.0),
            refused: hosts.iter().any(|h| h.over_plan.is_some_and(|n| n > 0.0)),
            dropped: hosts.iter().any(|h| h.dropped.is_some_and(|d| d > 0.0)),
            unsent: hosts.iter().any(|h| counted(h.tx_unsent)),
            unread: hosts.iter().any(|h| counted(h.rx_unread)),
        }
    }

    /// Whether each of [`COUNT_COLUMNS`] is shown.
    fn shown(&self) -> [bool; 7] {
        [
            self.dup,
            self.ooo,
            self.stray,
            self.refused,
            self.dropped,
            self.unsent,
            self.unread,
        ]
    }
}

/// The counting columns after the fixed ones, in order.
const COUNT_COLUMNS: [&str; 7] = [
    "dup", "reorder", "stray", "refused", "dropped", "unsent", "unread",
];

/// `h`'s counts in [`COUNT_COLUMNS`] (`None`: not measured).
fn counts(h: &figures::HostFigures) -> [Option<f64>; 7] {
    [
        Some(h.dup),
        Some(h.ooo),
        Some(h.stray),
        h.over_plan,
        Some(h.dropped.unwrap_or(0.0)),
        h.tx_unsent,
        h.rx_unread,
    ]
}

/// The table's header line: the fixed columns, then those shown.
fn host_header(t: &mut String, columns: &Columns, width: usize) {
    let _ = write!(
        t,
        "  {:<width$}{:>12}{:>12}{:>12}{:>11}{:>9}{:>10}{:>6}{:>8}{:>7}",
        "host", "sent", "back", "serving", "egress", "loss", "rtt p99", "cpu", "1 core", "agent"
    );
    if columns.disk {
        let _ = write!(t, "{:>6}", "disk");
    }
    for (on, name) in columns.shown().into_iter().zip(COUNT_COLUMNS) {
        if on {
            let _ = write!(t, "{name:>9}");
        }
    }
    t.push('\n');
}

/// One host's row.
fn host_row(
    t: &mut String,
    set: &ReportSet,
    h: &figures::HostFigures,
    columns: &Columns,
    width: usize,
) {
    let percent_or_dash = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}%"));
    let _ = write!(
        t,
        "  {:<width$}{:>12}{:>12}{:>12}{:>11}{:>9}{:>10}{:>6}{:>8}{:>7}",
        set.name(h.id),
        pps(h.sent),
        pps(h.back),
        pps(h.serving),
        bits(h.nic_egress_bits.unwrap_or(h.egress_bits)),
        format!("{:.2}%", h.loss),
        micros(h.rtt_p99),
        percent_or_dash(h.cpu),
        percent_or_dash(h.cpu_core),
        percent_or_dash(h.agent_cpu)
    );
    if columns.disk {
        // Blank cells are "not measured": `-`, never 0%.
        let busy = h.disk.and_then(|d| d.busy);
        let _ = write!(t, "{:>6}", percent_or_dash(busy));
    }
    for (on, value) in columns.shown().into_iter().zip(counts(h)) {
        if on {
            let cell = value.map_or("-".to_string(), |v| (v as u64).to_string());
            let _ = write!(t, "{cell:>9}");
        }
    }
    t.push('\n');
}

/// The notes under the host table, each when its column or cells need it.
fn host_notes(t: &mut String, hosts: &[figures::HostFigures], columns: &Columns) {
    if hosts.iter().any(|h| h.nic_egress_bits.is_some()) {
        let _ = writeln!(
            t,
            "  (egress: what the host's interface sent, by its byte counter; where that is not known, the wire rate of what its agent sent)"
        );
    }
    if columns.refused {
        let _ = writeln!(
            t,
            "  (refused: requests the host left unanswered because their source sent past what the matrix plans for it there, +{:.0}%: refused by plan, not lost)",
            mx_matrix::load::ANSWER_HEADROOM * 100.0
        );
    }
    if columns.unsent || columns.unread {
        let _ = writeln!(
            t,
            "  (unsent: packets the agent handed its kernel that its interface never sent; unread: packets its interface received that the agent never read)"
        );
    }
    if hosts.iter().any(|h| h.rtt_p99.is_some() && !h.rtt_exact) {
        let _ = writeln!(
            t,
            "  (rtt p99: exact over each host's replies where its report carries histograms; else its worst flow's worst interval)"
        );
    }
}

/// The hosts that reported but have no figures in the span, each with why:
/// no host vanishes from the table.
fn outside_span(t: &mut String, set: &ReportSet, hosts: &[figures::HostFigures], width: usize) {
    for id in 0..set.names.len() as u32 {
        if hosts.iter().any(|h| h.id == id) {
            continue;
        }
        let why = match set.gone.get(&id) {
            Some(gone) => {
                let what = match gone.why {
                    aggregate::Gone::Stopped => "its agent stopped",
                    aggregate::Gone::Unreachable => "it was out of reach",
                    aggregate::Gone::Silent => "it wrote no report",
                };
                match gone.last {
                    Some(last) => format!("{what} at {}", units::local_clock(last as f64)),
                    None => what.to_string(),
                }
            }
            None => "it was starting or stopping in every interval it wrote".to_string(),
        };
        let _ = writeln!(t, "  {:<width$}not in the span: {why}", set.name(id));
    }
}

pub(crate) fn worst_flows(
    t: &mut String,
    set: &ReportSet,
    flows: &[figures::FlowFigures],
    top: usize,
) {
    let _ = writeln!(
        t,
        "  WORST FLOWS (of {}; delivery = replies back / requests sent; p99 of the flow's worst interval)",
        flows.len()
    );
    let lossy: Vec<&figures::FlowFigures> = flows.iter().filter(|f| f.delivery < 0.995).collect();
    if lossy.is_empty() {
        let _ = writeln!(t, "  every flow is delivering >= 99.5% of its replies");
    }
    for f in lossy.iter().take(top) {
        let forward = f.arrived.map_or(String::new(), |a| {
            format!("  forward {:.1}%", percent(a, f.sent))
        });
        let _ = writeln!(
            t,
            "    {} -> {}: {} sent, {} back ({:.1}%){forward}  p99 {}",
            set.name(f.host),
            set.name(f.peer),
            pps(f.sent),
            pps(f.back),
            f.delivery * 100.0,
            micros(f.p99)
        );
    }
    if lossy.len() > top {
        let _ = writeln!(
            t,
            "    ... {} more lossy flows (raise --top)",
            lossy.len() - top
        );
    }
    t.push('\n');
}
