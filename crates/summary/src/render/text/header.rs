//! The summary's first lines: what was covered (hosts, flows, sizes), the
//! span and what it left out and why, the class the agents marked with, and
//! a layered run's rotation.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::Options;
use crate::analysis::aggregate::{self, ReportSet};
use crate::analysis::figures::{Context, Figures};
use crate::analysis::span::Reloaded;
use mx_base::units;

/// The first line (what was covered, hosts, flows, sizes), the span line,
/// and the layered line.
pub(crate) fn header_lines(
    t: &mut String,
    set: &ReportSet,
    ctx: &Context,
    figs: &Figures,
    opts: &Options,
) {
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
    line.push_str(&reload_words(set, &span.reloaded, interval));
    if !span.cut.is_empty() {
        let names: Vec<&str> = span.cut.iter().map(|&h| set.name(h)).collect();
        let _ = write!(
            line,
            "; the reports of {} keep only their newest rows (cut to the agents' --keep-report): the span begins where every host's report does",
            units::names_list(&names, 5)
        );
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
/// `; h1, h2 restarted by reload at 12:00:03; h4 started by reload at
/// 12:00:03 (...)`: the agents `mx reload` began, by instant (the start of
/// each one's first interval, `interval` seconds before its label).
fn reload_words(set: &ReportSet, reloaded: &[Reloaded], interval: i64) -> String {
    let mut by_instant: BTreeMap<(i64, bool), Vec<&str>> = BTreeMap::new();
    for r in reloaded {
        by_instant
            .entry((r.ts, !r.restarted))
            .or_default()
            .push(set.name(r.host));
    }
    let mut words = String::new();
    for ((ts, started), hosts) in &by_instant {
        let _ = write!(
            words,
            "; {} {} by reload at {}",
            units::names_list(hosts, 5),
            if *started { "started" } else { "restarted" },
            units::local_clock((ts - interval) as f64)
        );
    }
    if !words.is_empty() {
        words.push_str(" (the reload's edges are left out, not counted as loss)");
    }
    words
}

fn gone_what(name: &str, gone: &aggregate::Departure) -> String {
    match gone.why {
        aggregate::Gone::Stopped => format!("{name}'s agent stopped"),
        aggregate::Gone::Unreachable => format!("{name} was out of reach"),
        aggregate::Gone::Silent => format!("{name} wrote no report"),
    }
}
