//! The summary as text, as `mx summarize` prints it. The text is the
//! original tool's, line for line: the header and span lines, the fleet
//! lines (and in a disk run the DISK lines), the per-host table (worst
//! delivery first; a `disk` column in disk runs only), the worst flows, the
//! layered sections, and WHAT TO DO NEXT.

use std::fmt::Write as _;

use crate::matrix::DiskMode;
use crate::summary::Options;
use crate::summary::analysis::aggregate::{self, ReportSet};
use crate::summary::analysis::coverage::{coverage, cycle_pairs, pair_measured};
use crate::summary::analysis::diagnosis::{self, Finding};
use crate::summary::analysis::figures::{self, Context, Figures, percent};
use crate::summary::analysis::spread;
use crate::units::{self, bits, byte_rate, micros, pps};

/// WHAT TO DO NEXT and its advice: each finding wrapped as a bullet.
pub fn what_to_do_next(findings: &[Finding]) -> String {
    let mut text = String::from("  WHAT TO DO NEXT\n");
    for finding in findings {
        text.push_str(&wrap(&finding.text));
    }
    text
}

/// Wraps `text` to 78 columns: `    * ` before the first line, 6 spaces before the rest.
pub fn wrap(text: &str) -> String {
    const WIDTH: usize = 78;
    let mut out = String::new();
    let mut line = String::from("    * ");
    let mut fresh = true;
    for word in text.split_whitespace() {
        if !fresh && line.len() + 1 + word.len() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from("      ");
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// What the summary covers: the first header line's duration, and a line
/// saying which span that was, what was left out and why.
fn span_lines(set: &ReportSet, opts: &Options) -> (String, String) {
    let span = &set.span;
    let interval = set.interval.unwrap_or(1).max(1);
    let count = span.keep.len() as i64;
    if span.no_steady {
        let window = if opts.window > 0.0 {
            format!("no steady interval in the last {}s", units::g(opts.window))
        } else {
            "no steady interval in the whole history".to_string()
        };
        return (
            window,
            "span: no interval yet had every host sending; what is there is summarized as it is (the run's edges included)".to_string(),
        );
    }
    let (Some(first), Some(last)) = (span.first(), span.last()) else {
        return (String::new(), String::new());
    };
    let seconds = count * interval;
    if !span.marked {
        return (
            format!("{seconds}s"),
            format!(
                "span: {} to {}, {count} interval(s) of {interval}s, every one in the window: these reports carry no phase marks (the original's agents, or written by hand), so the run's edges are counted as they are",
                units::local_clock((first - interval) as f64),
                units::local_clock(last as f64),
            ),
        );
    }
    let mut line = format!(
        "span: {} to {}, {count} interval(s) of {interval}s in which every host {} sending",
        units::local_clock((first - interval) as f64),
        units::local_clock(last as f64),
        if set.gone.is_empty() {
            "was"
        } else {
            "still up was"
        }
    );
    if last - first + interval > seconds {
        line.push_str(" (with gaps)");
    }
    match span.left_out {
        0 => {}
        n => {
            let _ = write!(
                line,
                "; {n} edge interval(s) left out (hosts starting or stopping{})",
                if span.planned_end { ", the end" } else { "" }
            );
        }
    }
    for &(host, behind) in &span.late {
        let _ = write!(
            line,
            "; {} began sending {behind}s after the others (it came up late: its lateness is left out, not counted as loss)",
            set.name(host)
        );
    }
    for (&host, gone) in &set.gone {
        let what = gone_what(set.name(host), gone);
        let _ = match gone.last {
            Some(last) => write!(
                line,
                "; {what} after {}: its flows since are left out, not counted as loss",
                units::local_clock(last as f64)
            ),
            None => write!(
                line,
                "; {what}, and nothing was heard from it: its flows are left out"
            ),
        };
    }
    (format!("{seconds}s steady"), line)
}

/// What became of a host that went: `<name>'s agent stopped`, `<name> was
/// out of reach` or `<name> wrote no report`.
fn gone_what(name: &str, gone: &aggregate::Departure) -> String {
    match gone.why {
        aggregate::Gone::Stopped => format!("{name}'s agent stopped"),
        aggregate::Gone::Unreachable => format!("{name} was out of reach"),
        aggregate::Gone::Silent => format!("{name} wrote no report"),
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

/// The summary's text above WHAT TO DO NEXT: the header, the fleet lines,
/// the host table, the worst flows, the layered sections.
pub fn render(set: &ReportSet, ctx: &Context, figs: &Figures, opts: &Options) -> String {
    let mut t = String::new();
    header_lines(&mut t, set, ctx, figs, opts);
    t.push('\n');
    fleet_lines(&mut t, ctx, &figs.fleet);
    refused_line(&mut t, set, &figs.fleet);
    let _ = writeln!(t, "  {:<10}{}", "RTT", rtt_text(set, &figs.fleet));
    extra_rtt_lines(&mut t, &figs.fleet);
    spread_lines(&mut t, "  ", ctx, &figs.fleet, &figs.spread);
    pool_lines(&mut t, set, ctx, &figs.pools);
    if let Some(disk) = &figs.fleet.disk {
        disk_lines(&mut t, set, ctx, disk);
    }
    t.push('\n');
    host_table(&mut t, set, &figs.hosts, opts.top_hosts);
    worst_flows(&mut t, set, &figs.flows, opts.top);
    if ctx.layered {
        layered_sections(&mut t, set, ctx);
    }
    t
}

/// The first line (what was covered, hosts, flows, sizes), the span line,
/// and the layered line.
fn header_lines(t: &mut String, set: &ReportSet, ctx: &Context, figs: &Figures, opts: &Options) {
    let (covered, span_line) = span_lines(set, opts);
    let _ = writeln!(
        t,
        "mx summarize -- {covered}, {} hosts, {} flows, {} bytes out -> {} bytes back",
        figs.hosts.len(),
        set.tx.len(),
        ctx.tx_size,
        ctx.rx_size
    );
    if !span_line.is_empty() {
        let _ = writeln!(t, "{span_line}");
    }
    // The class the agents marked with, from the run's matrix: what was sent.
    // Nothing here checks the class packets arrived with (a network may
    // re-mark them).
    if let Some(dscp) = ctx.dscp() {
        let _ = writeln!(
            t,
            "class -- {} on every request and reply, as the agents sent them (the class on arrival is not checked)",
            dscp.label()
        );
    }
    if ctx.layered {
        match ctx
            .matrix
            .as_ref()
            .and_then(|m| Some((m.config.shuffle?, m.config.rotation?)))
        {
            Some((key, r)) => {
                let _ = writeln!(
                    t,
                    "layered -- {} layers of {} peers rotating every {}s; rates are time averages over the window",
                    r.layers,
                    key.peers,
                    units::g(r.dwell)
                );
            }
            None => {
                let _ = writeln!(t, "layered -- rates are time averages over the window");
            }
        }
    }
}

/// REQUESTS, DELIVERED, REPLIES, TARGET, TOTAL and LOSS.
fn fleet_lines(t: &mut String, ctx: &Context, fleet: &figures::Fleet) {
    let (req_wire, rep_wire) = figures::wire(fleet, ctx);
    let _ = writeln!(
        t,
        "  {:<10}{:>14}{:>16} wire{:>16} payload",
        "REQUESTS",
        pps(fleet.requests),
        bits(req_wire),
        bits(fleet.request_payload)
    );
    match fleet.delivered {
        Some(delivered) => {
            let share = if fleet.requests > 0.0 {
                format!("{:.2}%", percent(delivered, fleet.requests))
            } else {
                "-".to_string()
            };
            let _ = writeln!(
                t,
                "  {:<10}{:>14}{share:>9} of what was sent",
                "DELIVERED",
                pps(delivered)
            );
        }
        None => {
            let _ = writeln!(
                t,
                "  {:<10}{:>14}   not reported: no receiver wrote rx rows",
                "DELIVERED", "-"
            );
        }
    }
    let _ = writeln!(
        t,
        "  {:<10}{:>14}{:>16} wire{:>16} payload",
        "REPLIES",
        pps(fleet.replies),
        bits(rep_wire),
        bits(fleet.reply_payload)
    );
    if fleet.target > 0.0 {
        let _ = writeln!(
            t,
            "  {:<10}{:>14}{:>9} achieved",
            "TARGET",
            pps(fleet.target),
            format!("{:.1}%", percent(fleet.requests, fleet.target))
        );
    }
    let _ = writeln!(
        t,
        "  {:<10}{:>14}{:>16} wire, both directions",
        "TOTAL",
        pps(fleet.requests + fleet.replies),
        bits(req_wire + rep_wire)
    );
    let legs = match (fleet.forward_loss(), fleet.return_loss()) {
        (Some(fwd), Some(back)) => format!("({fwd:.2}% forward, {back:.2}% on the way back)"),
        _ => "(forward/return split unknown: no receiver reported)".to_string(),
    };
    let _ = writeln!(
        t,
        "  {:<10}{:>13}   round trip {legs}",
        "LOSS",
        format!("{:.2}%", fleet.round_trip_loss())
    );
}

/// Requests the receivers left unanswered by plan, when some were: how many,
/// and the pairs that sent them (most first): refused, not lost.
fn refused_line(t: &mut String, set: &ReportSet, fleet: &figures::Fleet) {
    if fleet.packets.refused <= 0.0 {
        return;
    }
    let mut pairs: Vec<(f64, u32, u32)> = set
        .rx
        .iter()
        .filter(|(_, rx)| rx.over_plan_seen > 0.0)
        .map(|(&(dst, src), rx)| (rx.over_plan_seen, src, dst))
        .collect();
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let named: Vec<String> = pairs
        .iter()
        .take(3)
        .map(|&(n, src, dst)| format!("{} -> {} {}", set.name(src), set.name(dst), units::ops(n)))
        .collect();
    let more = if pairs.len() > 3 {
        format!(" and {} more pairs", pairs.len() - 3)
    } else {
        String::new()
    };
    let _ = writeln!(
        t,
        "  {:<10}{:>13}   requests refused by plan, not lost: sent past the receiver's matrix rate +{:.0}% ({}{more})",
        "REFUSED",
        units::ops(fleet.packets.refused),
        crate::plan::ANSWER_HEADROOM * 100.0,
        named.join(", ")
    );
}

/// A pool-to-pool run's directions, each the fleet lines' figures over its
/// flows: what the senders' pool sent, what reached the other pool (and at
/// what wire rate: a capped uplink shows here), loss by leg, and RTT.
fn pool_lines(t: &mut String, set: &ReportSet, ctx: &Context, pools: &[figures::PoolFigures]) {
    for pool in pools {
        let f = &pool.fleet;
        let _ = writeln!(
            t,
            "  POOL {} -> {} and back: {} flows, {} sending to {} answering",
            pool.from,
            pool.to,
            pool.flows,
            hosts_count(pool.senders),
            hosts_count(pool.receivers)
        );
        let (req_wire, _) = figures::wire(f, ctx);
        let _ = writeln!(
            t,
            "    {:<10}{:>14}{:>16} wire",
            "REQUESTS",
            pps(f.requests),
            bits(req_wire)
        );
        match f.delivered {
            Some(delivered) => {
                let share = if f.requests > 0.0 {
                    format!("{:.2}%", percent(delivered, f.requests))
                } else {
                    "-".to_string()
                };
                let _ = writeln!(
                    t,
                    "    {:<10}{:>14}{:>16} wire{share:>9} of what was sent reached {}",
                    "DELIVERED",
                    pps(delivered),
                    bits(f.wire(delivered, ctx.tx_size)),
                    pool.to
                );
            }
            None => {
                let _ = writeln!(
                    t,
                    "    {:<10}{:>14}   not reported: no receiver wrote rx rows",
                    "DELIVERED", "-"
                );
            }
        }
        let legs = match (f.forward_loss(), f.return_loss()) {
            (Some(fwd), Some(back)) => format!(
                "({fwd:.2}% on the way to {}, {back:.2}% on the way back)",
                pool.to
            ),
            _ => "(forward/return split unknown: no receiver reported)".to_string(),
        };
        let _ = writeln!(
            t,
            "    {:<10}{:>13}   round trip {legs}",
            "LOSS",
            format!("{:.2}%", f.round_trip_loss())
        );
        let rtt = match f.exact {
            Some((p50, p99, p999)) => format!(
                "p50 {}  p99 {}  p99.9 {} (exact, from the {} hosts' histograms)",
                micros(Some(p50)),
                micros(Some(p99)),
                micros(Some(p999)),
                pool.from
            ),
            None => rtt_text(set, f),
        };
        let _ = writeln!(t, "    {:<10}{rtt}", "RTT");
        spread_lines(t, "    ", ctx, f, &pool.spread);
    }
}

/// SPREAD: per flow, the delivered rates across the flows (mean, standard
/// deviation, min, median, max, Jain's index), in pps and wire bits, for
/// the requests that reached their receivers and the replies back.
fn spread_lines(
    t: &mut String,
    indent: &str,
    ctx: &Context,
    fleet: &figures::Fleet,
    spread: &spread::FlowSpread,
) {
    if spread.flows < 2 {
        // One flow has no spread to speak of.
        return;
    }
    let _ = writeln!(
        t,
        "{indent}{:<10}{:<24}{:>11}{:>11}{:>11}{:>11}{:>11}  Jain's index",
        "SPREAD",
        format!("across {} flows", spread.flows),
        "mean",
        "sd",
        "min",
        "median",
        "max"
    );
    let rows = [
        ("requests delivered", spread.delivered, ctx.tx_size),
        ("replies back", spread.back, ctx.rx_size),
    ];
    for (what, s, size) in rows {
        let Some(s) = s else {
            let _ = writeln!(
                t,
                "{indent}  {what:<32}-   not reported: no receiver wrote rx rows"
            );
            continue;
        };
        let label = if s.flows < spread.flows {
            format!("{what} ({} of {})", s.flows, spread.flows)
        } else {
            what.to_string()
        };
        let jain = s.jain.map_or("-".to_string(), |j| format!("{j:.4}"));
        let cells = |s: &spread::Spread, f: fn(f64) -> String| {
            [s.mean, s.sd, s.min, s.median, s.max]
                .map(|v| format!("{:>11}", f(v)))
                .concat()
        };
        let _ = writeln!(t, "{indent}  {label:<32}{}  {jain}", cells(&s, pps));
        let wire = s.scaled(fleet.wire(1.0, size));
        let _ = writeln!(t, "{indent}  {:<32}{}  wire", "", cells(&wire, bits));
    }
    if spread.delivered.is_some_and(|s| s.flows < spread.flows) {
        let _ = writeln!(
            t,
            "{indent}  (requests delivered: the other flows' receivers wrote no rx rows, so what reached them is not known)"
        );
    }
}

fn hosts_count(n: usize) -> String {
    if n == 1 {
        "1 host".to_string()
    } else {
        format!("{n} hosts")
    }
}

/// The RTT line: exact fleet-wide percentiles when every host sent its
/// histogram, else the worst flow's worst interval, said to be.
fn rtt_text(set: &ReportSet, fleet: &figures::Fleet) -> String {
    let avg = fleet.rtt_avg.map_or("avg -".to_string(), |a| {
        format!("avg {} over all replies", micros(Some(a)))
    });
    let max = micros(fleet.rtt_max);
    match (fleet.exact, fleet.worst_flow) {
        (Some((p50, p99, p999)), _) => format!(
            "{avg}; p50 {}  p99 {}  p99.9 {} fleet-wide (exact, from every host's histogram); max {max}",
            micros(Some(p50)),
            micros(Some(p99)),
            micros(Some(p999))
        ),
        (None, Some((src, dst, p50, p99))) => format!(
            "{avg}; worst flow p50 {}  p99 {} ({} -> {}, its worst interval); max {max}",
            micros(p50),
            micros(Some(p99)),
            set.name(src),
            set.name(dst)
        ),
        (None, None) => "not measured: no reply came back in the window".to_string(),
    }
}

/// The smallest round trip and the jitter under the RTT line, and the
/// packets that arrived twice or out of order, when any did.
fn extra_rtt_lines(t: &mut String, fleet: &figures::Fleet) {
    if fleet.rtt_min.is_some() || fleet.jitter.is_some() {
        let _ = writeln!(
            t,
            "  {:<10}min {}, jitter {} (the mean difference between a flow's successive round trips)",
            "",
            micros(fleet.rtt_min),
            fleet
                .jitter
                .map_or("-".to_string(), |j| format!("{j:.1}us"))
        );
    }
    if fleet.dup > 0.0 || fleet.ooo > 0.0 {
        let _ = writeln!(
            t,
            "  {:<10}{} packets arrived twice, {} out of order (requests and replies, over the span)",
            "ORDER",
            diagnosis::count(fleet.dup),
            diagnosis::count(fleet.ooo)
        );
    }
}

/// DISK READ, DISK WRITE and DISK BUSY, the lines of a disk run, and which
/// disk I/O the RTT holds: a disk run's responder answers only once its disk
/// has done its part, so the round trip is a storage client's, not the
/// network's alone.
fn disk_lines(t: &mut String, set: &ReportSet, ctx: &Context, disk: &figures::FleetDisk) {
    for (label, d, host) in [
        ("DISK READ", disk.read, disk.read_p99_host),
        ("DISK WRITE", disk.write, disk.write_p99_host),
    ] {
        // A direction no host measured has no line (not a line of zeros).
        let Some(iops) = d.iops else {
            continue;
        };
        // The rows carry each interval's p99, not a histogram: the worst
        // host's is its worst interval's, and said to be.
        let worst = host.map_or(String::new(), |h| {
            format!(" ({}, its worst interval)", set.name(h))
        });
        let _ = writeln!(
            t,
            "  {label:<11}{}   {} IOPS   avg {}, worst host p99 {}{worst}",
            byte_rate(d.bytes_per_s.unwrap_or(0.0)),
            units::ops(iops),
            micros(d.avg_us),
            micros(d.p99_us)
        );
    }
    let (host, busy) = disk.busiest;
    let _ = writeln!(
        t,
        "  DISK BUSY {busy:.0}%   of the busiest worker's time, on {}",
        set.name(host)
    );
    let _ = writeln!(t, "            {}", rtt_disk_sentence(ctx.disk_mode()));
}

/// Which of the responder's disk I/O a disk run's RTT includes (its mode,
/// from the matrix): the requester's own I/O is outside the RTT (a request's
/// read comes before its stamp, a reply's write after its timing).
fn rtt_disk_sentence(mode: Option<DiskMode>) -> &'static str {
    match mode {
        Some(DiskMode::Replies) => {
            "RTT includes the responder's disk read: each reply waits for its payload to be read from the responder's disk, as a storage read would"
        }
        Some(DiskMode::Requests) => {
            "RTT includes the responder's disk write: each reply waits for the request's payload to be written to the responder's disk, as a storage write would"
        }
        Some(DiskMode::Both) => {
            "RTT includes the responder's disk write and read: each reply waits for the request's payload to be written and its own to be read, as storage would"
        }
        Some(DiskMode::Off) | None => {
            "RTT includes the responder's disk I/O: which (read, write or both) is in the run's matrix, not found here"
        }
    }
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

/// The per-host table: worst delivery first, `top` rows, then the hosts
/// outside the span and the notes its columns need.
fn host_table(t: &mut String, set: &ReportSet, hosts: &[figures::HostFigures], top: usize) {
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
            crate::plan::ANSWER_HEADROOM * 100.0
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

fn worst_flows(t: &mut String, set: &ReportSet, flows: &[figures::FlowFigures], top: usize) {
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

fn layered_sections(t: &mut String, set: &ReportSet, ctx: &Context) {
    if let (Some((measured, total, cycle)), Some(m)) = (coverage(set, ctx), ctx.matrix.as_ref()) {
        let rotation = m.config.rotation.expect("coverage needs a rotation");
        let _ = writeln!(
            t,
            "  COVERAGE  {measured} of {total} {} measured so far ({:.1}%)",
            if m.pools().between.is_some() {
                "cross-pool pairs"
            } else {
                "ordered pairs"
            },
            percent(measured as f64, total as f64)
        );
        let _ = writeln!(
            t,
            "            {} layers x {}s dwell = one full cycle every {}",
            rotation.layers,
            units::g(rotation.dwell),
            units::duration(cycle)
        );
        if measured < total {
            let name = |h: u32| &m.hosts()[h as usize].name;
            let missing: Vec<String> = cycle_pairs(m)
                .filter(|&pair| !pair_measured(set, m, pair))
                .map(|(s, d)| format!("{}->{}", name(s), name(d)))
                .collect();
            let shown = missing
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            let more = if missing.len() > 4 {
                format!(" (+{} more)", missing.len() - 4)
            } else {
                String::new()
            };
            let _ = writeln!(t, "            still unmeasured: {shown}{more}");
        }
        t.push('\n');
    }
    let total_layers = ctx
        .matrix
        .as_ref()
        .and_then(|m| m.config.rotation)
        .map_or(set.layers.len(), |r| r.layers as usize);
    let _ = writeln!(
        t,
        "  LAYERS in the window: {} of {total_layers}",
        set.layers.len()
    );
    let _ = writeln!(t, "    layer    pairs         sent   delivery  worst p99");
    let shown = if set.layers.len() > 11 {
        10
    } else {
        set.layers.len()
    };
    for (layer, agg) in set.layers.iter().take(shown) {
        let ticks = agg.ticks.len().max(1) as f64;
        // (Capped: in the original's reports a drain row can carry replies to
        // requests sent before the window; ours count them with their requests.)
        let delivery = if agg.sum_pps > 0.0 {
            format!("{:.2}%", (agg.sum_rep_pps / agg.sum_pps * 100.0).min(100.0))
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            t,
            "    {layer:>5}{:>9}{:>13}{delivery:>11}{:>11}",
            agg.pairs.len(),
            pps(agg.sum_pps / ticks),
            micros(agg.worst_p99)
        );
    }
    if set.layers.len() > shown {
        let _ = writeln!(t, "  ... {} more layers", set.layers.len() - shown);
    }
    t.push('\n');
}
