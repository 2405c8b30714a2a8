//! `mx compare A B`: did the change between two runs help?
//!
//! Two summary documents ([`super::document`]) side by side: the fleet's
//! figures, each pool direction's, each host's, and the flows that changed
//! most. Every change carries a 95% bootstrap interval taken from the runs
//! themselves ([`super::bootstrap`]): the fleet's from its intervals
//! (resampled independently in each run), a pool's or a host's from its
//! flows (paired: the same flow before and after). The verdict is better or
//! worse only when the interval leaves out zero *and* the change clears a
//! floor (1% of a rate, 0.1 points of loss, 10% of an RTT): two runs on one
//! fabric differ that much from run to run even when nothing changed
//! (paired-bench.md: a reference measured an hour apart is not a bar), and
//! the resampling of one run's intervals cannot see that.
//!
//! Runs of different shapes (hosts, flows, sizes, class, layering) are not
//! compared unless forced: their figures are not like for like.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::bootstrap::{self, Change};
use super::document::{Document, FlowDoc, IntervalDoc, loss, ro};
use crate::units::{micros, pps};

/// The `schema` of `compare --json`.
pub const SCHEMA: &str = "mx.compare/1";

/// Floors under which a change is noise, whatever its interval says.
pub const RATE_FLOOR_PCT: f64 = 1.0;
pub const LOSS_FLOOR_PTS: f64 = 0.1;
pub const RTT_FLOOR_PCT: f64 = 25.0;

/// What a figure measures: its unit, how its change is taken, which way is
/// better, and its floor.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Packets per second: relative change, higher is better.
    Rate,
    /// Percent lost: change in points, lower is better.
    Loss,
    /// Microseconds: relative change, lower is better.
    Rtt,
}

impl Kind {
    fn change(self, a: f64, b: f64) -> Option<f64> {
        match self {
            Kind::Loss => Some(b - a),
            Kind::Rate | Kind::Rtt => (a > 0.0).then(|| (b / a - 1.0) * 100.0),
        }
    }

    fn floor(self) -> f64 {
        match self {
            Kind::Rate => RATE_FLOOR_PCT,
            Kind::Loss => LOSS_FLOOR_PTS,
            Kind::Rtt => RTT_FLOOR_PCT,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Kind::Rate => "pps",
            Kind::Loss => "pct",
            Kind::Rtt => "us",
        }
    }

    fn change_unit(self) -> &'static str {
        match self {
            Kind::Loss => "pts",
            Kind::Rate | Kind::Rtt => "pct",
        }
    }

    fn verdict(self, c: &Change) -> Verdict {
        if c.spans_zero() || c.change.abs() < self.floor() {
            return Verdict::WithinNoise;
        }
        let up_is_better = self == Kind::Rate;
        if (c.change > 0.0) == up_is_better {
            Verdict::Better
        } else {
            Verdict::Worse
        }
    }

    fn value(self, v: Option<f64>) -> String {
        match (self, v) {
            (_, None) => "-".to_string(),
            (Kind::Rate, Some(v)) => pps(v),
            (Kind::Loss, Some(v)) => format!("{v:.2}%"),
            (Kind::Rtt, Some(v)) => micros(Some(v)),
        }
    }

    fn signed(self, v: f64) -> String {
        // A change that rounds to nothing is shown as +0, not -0.
        match self {
            Kind::Loss => format!("{:+.2} pts", if v.abs() < 0.005 { 0.0 } else { v }),
            Kind::Rate | Kind::Rtt => format!("{:+.1}%", if v.abs() < 0.05 { 0.0 } else { v }),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    WithinNoise,
    NotMeasured,
    /// Measured, but on too few intervals or flows for an interval.
    TooFew,
}

impl Verdict {
    fn text(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
            Verdict::NotMeasured => "not measured",
            Verdict::TooFew => "too few to judge",
        }
    }
}

/// One figure, before and after.
#[derive(Debug, Clone, Serialize)]
pub struct FigureChange {
    pub figure: &'static str,
    pub unit: &'static str,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B against A: percent for rates and RTT, points for loss.
    pub change: Option<f64>,
    pub change_unit: &'static str,
    /// The 95% bootstrap interval of the change.
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub verdict: Verdict,
    #[serde(skip)]
    kind: Kind,
}

impl FigureChange {
    /// A, B, the change with its 95% interval, and the verdict, as the
    /// text and the report page show them.
    pub fn cells(&self) -> [String; 4] {
        [
            self.kind.value(self.a),
            self.kind.value(self.b),
            interval_text(self),
            self.verdict.text().to_string(),
        ]
    }
}

/// A pool direction's or a host's figures, paired over its flows.
#[derive(Debug, Clone, Serialize)]
pub struct GroupChange {
    pub name: String,
    /// Flows measured in both runs that the figures are over.
    pub flows: usize,
    pub figures: Vec<FigureChange>,
}

impl GroupChange {
    fn changed(&self) -> bool {
        self.figures
            .iter()
            .any(|f| matches!(f.verdict, Verdict::Better | Verdict::Worse))
    }
}

/// A flow that changed: its loss and its replies back, before and after.
#[derive(Debug, Clone, Serialize)]
pub struct FlowChange {
    pub src: String,
    pub dst: String,
    pub loss_a_pct: f64,
    pub loss_b_pct: f64,
    pub back_a_pps: f64,
    pub back_b_pps: f64,
}

impl FlowChange {
    fn loss_change(&self) -> f64 {
        self.loss_b_pct - self.loss_a_pct
    }

    fn back_change_pct(&self) -> Option<f64> {
        Kind::Rate.change(self.back_a_pps, self.back_b_pps)
    }

    /// Whether it changed past a floor.
    fn changed(&self) -> bool {
        self.loss_change().abs() >= LOSS_FLOOR_PTS
            || self
                .back_change_pct()
                .is_some_and(|c| c.abs() >= RATE_FLOOR_PCT)
    }
}

/// A run as the comparison names it.
#[derive(Debug, Clone, Serialize)]
pub struct RunLabel {
    pub source: String,
    pub intervals: usize,
    pub interval_s: i64,
    pub hosts: usize,
    pub flows: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub a: RunLabel,
    pub b: RunLabel,
    /// How the runs' shapes differ (empty: the same shape).
    pub shape_differences: Vec<String>,
    pub fleet: Vec<FigureChange>,
    pub pools: Vec<GroupChange>,
    /// Every host, most changed first.
    pub hosts: Vec<GroupChange>,
    /// The flows that changed past a floor, most changed first.
    pub flows: Vec<FlowChange>,
    pub floors: Floors,
}

#[derive(Debug, Clone, Serialize)]
pub struct Floors {
    pub rate_pct: f64,
    pub loss_pts: f64,
    pub rtt_pct: f64,
}

/// How two runs' shapes differ, one phrase each (empty: the same).
pub fn shape_differences(a: &Document, b: &Document) -> Vec<String> {
    let mut out = Vec::new();
    let (ra, rb) = (&a.run, &b.run);
    if (ra.request_bytes, ra.reply_bytes) != (rb.request_bytes, rb.reply_bytes) {
        out.push(format!(
            "sizes {} -> {} bytes in A, {} -> {} in B",
            ra.request_bytes, ra.reply_bytes, rb.request_bytes, rb.reply_bytes
        ));
    }
    if ra.layered != rb.layered {
        let say = |l: bool| if l { "layered" } else { "fixed" };
        out.push(format!(
            "A is {}, B is {}",
            say(ra.layered),
            say(rb.layered)
        ));
    }
    if ra.dscp != rb.dscp {
        let say = |d: &Option<String>| d.clone().unwrap_or_else(|| "the default class".into());
        out.push(format!(
            "class {} in A, {} in B",
            say(&ra.dscp),
            say(&rb.dscp)
        ));
    }
    let hosts = |d: &Document| -> Vec<String> { d.hosts.iter().map(|h| h.host.clone()).collect() };
    only_in(&mut out, "host", &hosts(a), &hosts(b));
    let flows = |d: &Document| -> Vec<String> {
        d.flows
            .iter()
            .map(|f| format!("{} -> {}", f.src, f.dst))
            .collect()
    };
    only_in(&mut out, "flow", &flows(a), &flows(b));
    out
}

/// Says which of `a`'s and `b`'s items only one of them has (a few named).
fn only_in(out: &mut Vec<String>, what: &str, a: &[String], b: &[String]) {
    for (items, others, run) in [(a, b, "A"), (b, a, "B")] {
        let only: Vec<&String> = items.iter().filter(|i| !others.contains(i)).collect();
        if only.is_empty() {
            continue;
        }
        let shown: Vec<&str> = only.iter().take(3).map(|s| s.as_str()).collect();
        let more = if only.len() > 3 {
            format!(" and {} more", only.len() - 3)
        } else {
            String::new()
        };
        let plural = if only.len() == 1 { "" } else { "s" };
        out.push(format!(
            "{} {what}{plural} only in {run} ({}{more})",
            only.len(),
            shown.join(", ")
        ));
    }
}

/// The comparison of run `a` with run `b` (labelled `sources`).
pub fn compare(a: &Document, b: &Document, sources: (&str, &str)) -> Comparison {
    let label = |d: &Document, source: &str| RunLabel {
        source: source.to_string(),
        intervals: d.intervals.len(),
        interval_s: d.span.interval_s,
        hosts: d.hosts.len(),
        flows: d.flows.len(),
    };
    let pairs = flow_pairs(a, b);
    let pools = a
        .pools
        .iter()
        .filter(|p| b.pools.iter().any(|q| q.from == p.from && q.to == p.to))
        .map(|p| {
            let inside: Vec<&(&FlowDoc, &FlowDoc)> = pairs
                .iter()
                .filter(|(f, _)| p.from_hosts.contains(&f.src) && p.to_hosts.contains(&f.dst))
                .collect();
            group(format!("{} -> {}", p.from, p.to), &inside)
        })
        .collect();
    let mut hosts: Vec<GroupChange> = a
        .hosts
        .iter()
        .map(|h| {
            let own: Vec<&(&FlowDoc, &FlowDoc)> =
                pairs.iter().filter(|(f, _)| f.src == h.host).collect();
            group(h.host.clone(), &own)
        })
        .filter(|g| g.flows > 0)
        .collect();
    // Most changed first: by the loss change's size, then the name.
    let loss_moved = |g: &GroupChange| {
        g.figures
            .iter()
            .find(|f| f.kind == Kind::Loss)
            .and_then(|f| f.change)
            .map_or(0.0, f64::abs)
    };
    hosts.sort_by(|x, y| {
        y.changed()
            .cmp(&x.changed())
            .then(loss_moved(y).total_cmp(&loss_moved(x)))
            .then(x.name.cmp(&y.name))
    });
    let mut flows: Vec<FlowChange> = pairs
        .iter()
        .map(|(fa, fb)| FlowChange {
            src: fa.src.clone(),
            dst: fa.dst.clone(),
            loss_a_pct: fa.loss_pct,
            loss_b_pct: fb.loss_pct,
            back_a_pps: fa.back_pps,
            back_b_pps: fb.back_pps,
        })
        .filter(FlowChange::changed)
        .collect();
    flows.sort_by(|x, y| {
        y.loss_change()
            .abs()
            .total_cmp(&x.loss_change().abs())
            .then(
                y.back_change_pct()
                    .unwrap_or(0.0)
                    .abs()
                    .total_cmp(&x.back_change_pct().unwrap_or(0.0).abs()),
            )
    });
    Comparison {
        schema: SCHEMA,
        a: label(a, sources.0),
        b: label(b, sources.1),
        shape_differences: shape_differences(a, b),
        fleet: fleet(a, b),
        pools,
        hosts,
        flows,
        floors: Floors {
            rate_pct: RATE_FLOOR_PCT,
            loss_pts: LOSS_FLOOR_PTS,
            rtt_pct: RTT_FLOOR_PCT,
        },
    }
}

/// The flows measured in both runs, paired (A's order).
fn flow_pairs<'a>(a: &'a Document, b: &'a Document) -> Vec<(&'a FlowDoc, &'a FlowDoc)> {
    let in_b: BTreeMap<(&str, &str), &FlowDoc> = b
        .flows
        .iter()
        .map(|f| ((f.src.as_str(), f.dst.as_str()), f))
        .collect();
    a.flows
        .iter()
        .filter_map(|f| Some((f, *in_b.get(&(f.src.as_str(), f.dst.as_str()))?)))
        .collect()
}

/// A figure of two runs from its change interval (`None`: not measured).
fn figure(
    name: &'static str,
    kind: Kind,
    a: Option<f64>,
    b: Option<f64>,
    change: Option<Change>,
) -> FigureChange {
    FigureChange {
        figure: name,
        unit: kind.unit(),
        a: ro(a),
        b: ro(b),
        change: ro(change.map(|c| c.change)),
        change_unit: kind.change_unit(),
        low: ro(change.map(|c| c.low)),
        high: ro(change.map(|c| c.high)),
        verdict: match (change, a, b) {
            (Some(c), _, _) => kind.verdict(&c),
            (None, Some(_), Some(_)) => Verdict::TooFew,
            (None, _, _) => Verdict::NotMeasured,
        },
        kind,
    }
}

/// A figure of the fleet, computed over a sample of a run's intervals.
type IntervalStat = fn(&[&IntervalDoc], f64) -> Option<f64>;

/// The fleet's figures, each from the runs' intervals.
fn fleet(a: &Document, b: &Document) -> Vec<FigureChange> {
    let stats: [(&'static str, Kind, IntervalStat); 7] = [
        ("requests", Kind::Rate, |s, secs| {
            mean(s.iter().map(|i| i.requests / secs))
        }),
        ("replies back", Kind::Rate, |s, secs| {
            mean(s.iter().map(|i| i.replies / secs))
        }),
        ("loss", Kind::Loss, |s, _| {
            let sent: f64 = s.iter().map(|i| i.requests).sum();
            loss(sent, s.iter().map(|i| i.replies).sum())
        }),
        ("forward loss", Kind::Loss, |s, _| {
            let counted: Vec<&&IntervalDoc> = s.iter().filter(|i| i.delivered.is_some()).collect();
            let sent: f64 = counted.iter().map(|i| i.requests).sum();
            let arrived = counted
                .iter()
                .map(|i| i.delivered.unwrap_or(0.0).max(i.replies))
                .sum();
            (!counted.is_empty()).then(|| loss(sent, arrived)).flatten()
        }),
        ("return loss", Kind::Loss, |s, _| {
            let counted: Vec<&&IntervalDoc> = s.iter().filter(|i| i.delivered.is_some()).collect();
            let sent: f64 = counted.iter().map(|i| i.requests).sum();
            let lost_back: f64 = counted
                .iter()
                .map(|i| (i.delivered.unwrap_or(0.0).min(i.requests) - i.replies).max(0.0))
                .sum();
            (!counted.is_empty() && sent > 0.0).then(|| lost_back / sent * 100.0)
        }),
        ("rtt p50", Kind::Rtt, |s, _| {
            median(s.iter().filter_map(|i| i.rtt_p50_us))
        }),
        ("rtt p99", Kind::Rtt, |s, _| {
            median(s.iter().filter_map(|i| i.rtt_p99_us))
        }),
    ];
    let secs = |d: &Document| d.span.interval_s.max(1) as f64;
    stats
        .into_iter()
        .map(|(name, kind, stat)| {
            let over = |d: &Document, idx: &[usize]| {
                let sample: Vec<&IntervalDoc> = idx.iter().map(|&i| &d.intervals[i]).collect();
                stat(&sample, secs(d))
            };
            let whole = |d: &Document| over(d, &(0..d.intervals.len()).collect::<Vec<_>>());
            let change = bootstrap::two_samples(
                a.intervals.len(),
                b.intervals.len(),
                |idx| over(a, idx),
                |idx| over(b, idx),
                |x, y| kind.change(x, y),
            );
            figure(name, kind, whole(a), whole(b), change)
        })
        .collect()
}

/// A group of flows' figures (a pool direction, a host), paired per flow.
fn group(name: String, pairs: &[&(&FlowDoc, &FlowDoc)]) -> GroupChange {
    type FlowStat = fn(&[&FlowDoc]) -> Option<f64>;
    let stats: [(&'static str, Kind, FlowStat); 3] = [
        ("replies back", Kind::Rate, |f| {
            Some(f.iter().map(|f| f.back_pps).sum())
        }),
        ("loss", Kind::Loss, |f| {
            loss(
                f.iter().map(|f| f.sent_pps).sum(),
                f.iter().map(|f| f.back_pps).sum(),
            )
        }),
        ("rtt p99", Kind::Rtt, |f| {
            median(f.iter().filter_map(|f| f.rtt_p99_us))
        }),
    ];
    let figures = stats
        .into_iter()
        .map(|(figure_name, kind, stat)| {
            // The figure over the flows `idx` in run A (`after` false) or B.
            let side = |idx: &[usize], after: bool| {
                let flows: Vec<&FlowDoc> = idx
                    .iter()
                    .map(|&i| if after { pairs[i].1 } else { pairs[i].0 })
                    .collect();
                stat(&flows)
            };
            let all: Vec<usize> = (0..pairs.len()).collect();
            let change = bootstrap::paired(
                pairs.len(),
                |idx| Some((side(idx, false)?, side(idx, true)?)),
                |x, y| kind.change(x, y),
            );
            figure(
                figure_name,
                kind,
                side(&all, false),
                side(&all, true),
                change,
            )
        })
        .collect();
    GroupChange {
        name,
        flows: pairs.len(),
        figures,
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values {
        sum += v;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    crate::units::median(&values.collect::<Vec<f64>>())
}

/// The comparison as text: the fleet, the pools, the hosts and flows that
/// changed, and the floors.
pub fn render(c: &Comparison, top: usize) -> String {
    let mut t = String::new();
    let run = |r: &RunLabel| {
        format!(
            "{} ({} intervals of {}s)",
            r.source, r.intervals, r.interval_s
        )
    };
    let _ = writeln!(t, "mx compare -- A: {}, B: {}", run(&c.a), run(&c.b));
    if c.shape_differences.is_empty() {
        let _ = writeln!(t, "same shape: {} hosts, {} flows", c.a.hosts, c.a.flows);
    } else {
        let _ = writeln!(
            t,
            "shapes differ (compared anyway, --force): {}",
            c.shape_differences.join("; ")
        );
    }
    t.push('\n');
    figure_table(&mut t, "FLEET", "(intervals resampled)", &c.fleet);
    for pool in &c.pools {
        t.push('\n');
        figure_table(
            &mut t,
            &format!("POOL {}", pool.name),
            &format!("(paired over its {} flows)", pool.flows),
            &pool.figures,
        );
    }
    t.push('\n');
    let changed: Vec<&GroupChange> = c.hosts.iter().filter(|h| h.changed()).collect();
    let judged = c
        .hosts
        .iter()
        .filter(|h| h.figures.iter().any(|f| f.low.is_some()))
        .count();
    if judged == 0 {
        let _ = writeln!(
            t,
            "  HOSTS     none judged: a host's figures are paired over the flows it sent, and none sent {} or more",
            bootstrap::MIN_ITEMS
        );
    } else if changed.is_empty() {
        let _ = writeln!(
            t,
            "  HOSTS     every host within noise (each paired over the flows it sent)"
        );
    } else {
        let _ = writeln!(
            t,
            "  HOSTS THAT CHANGED ({} of {}; each paired over the flows it sent)",
            changed.len(),
            c.hosts.len()
        );
        for h in changed.iter().take(top) {
            let said: Vec<String> = h
                .figures
                .iter()
                .filter(|f| matches!(f.verdict, Verdict::Better | Verdict::Worse))
                .map(|f| {
                    format!(
                        "{} {} -> {} ({}) {}",
                        f.figure,
                        f.kind.value(f.a),
                        f.kind.value(f.b),
                        interval_text(f),
                        f.verdict.text()
                    )
                })
                .collect();
            let _ = writeln!(t, "    {:<12}{}", h.name, said.join("; "));
        }
    }
    t.push('\n');
    if c.flows.is_empty() {
        let _ = writeln!(
            t,
            "  FLOWS     no flow changed by {LOSS_FLOOR_PTS} points of loss or {RATE_FLOOR_PCT}% of its replies or more"
        );
    } else {
        let _ = writeln!(
            t,
            "  FLOWS THAT CHANGED MOST ({} changed by {LOSS_FLOOR_PTS} points of loss or {RATE_FLOOR_PCT}% of its replies or more)",
            c.flows.len()
        );
        for f in c.flows.iter().take(top) {
            let back = f
                .back_change_pct()
                .map_or(String::new(), |p| format!(" ({p:+.1}%)"));
            let _ = writeln!(
                t,
                "    {} -> {}: loss {:.2}% -> {:.2}% ({:+.2} pts), replies back {} -> {}{back}",
                f.src,
                f.dst,
                f.loss_a_pct,
                f.loss_b_pct,
                f.loss_change(),
                pps(f.back_a_pps),
                pps(f.back_b_pps)
            );
        }
    }
    let _ = writeln!(
        t,
        "\n  A change is better or worse only when its 95% interval leaves out zero and it is at least {RATE_FLOOR_PCT}% of a rate, {LOSS_FLOOR_PTS} points of loss or {RTT_FLOOR_PCT}% of an RTT: two runs of one fabric differ that much with nothing changed."
    );
    t
}

fn interval_text(f: &FigureChange) -> String {
    match (f.change, f.low, f.high) {
        (Some(c), Some(low), Some(high)) => format!(
            "{}, 95% {} .. {}",
            f.kind.signed(c),
            f.kind.signed(low),
            f.kind.signed(high)
        ),
        _ => "-".to_string(),
    }
}

fn figure_table(t: &mut String, title: &str, note: &str, figures: &[FigureChange]) {
    let _ = writeln!(
        t,
        "  {title} {note}\n  {:<16}{:>12}{:>12}   {:<42}verdict",
        "", "A", "B", "change, 95% interval"
    );
    for f in figures {
        let [a, b, change, verdict] = f.cells();
        let _ = writeln!(
            t,
            "  {:<16}{a:>12}{b:>12}   {change:<42}{verdict}",
            f.figure
        );
    }
}
