//! Two runs' summary documents judged side by side: each figure's change
//! and its 95% interval ([`crate::analysis::bootstrap`]), and the
//! verdict, for the fleet (over its intervals), each pool direction and
//! each host (over their flows, paired), and the flows that changed most.
//! What the verdicts mean and why the floors: [`super`].

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::bootstrap::{self, Change};
use crate::document::{Document, FlowDoc, IntervalDoc, loss, ro};

/// The `schema` of `compare --json`.
pub const SCHEMA: &str = "mx.compare/1";

/// Floors under which a change is noise, whatever its interval says.
pub const RATE_FLOOR_PCT: f64 = 1.0;
pub const LOSS_FLOOR_PTS: f64 = 0.1;
pub const RTT_FLOOR_PCT: f64 = 25.0;

/// What a figure measures: its unit, how its change is taken, which way is
/// better, and its floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
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
    /// The 95% interval of the change.
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub verdict: Verdict,
    /// With `too_few`: what the runs had (`1 interval of 5s in A`, `1 flow`).
    pub too_few: Option<String>,
    /// With `too_few` on the fleet's intervals: the shortest run that gives
    /// the figure an interval, in seconds.
    pub run_at_least_s: Option<i64>,
    /// That run's command.
    #[serde(skip)]
    pub(super) rerun: Option<String>,
    #[serde(skip)]
    pub(super) kind: Kind,
}

/// A pool direction's or a host's figures, paired over its flows.
#[derive(Debug, Clone, Serialize)]
pub struct GroupChange {
    pub name: String,
    /// Flows measured in both runs that the figures are over (a host's:
    /// the flows it sends).
    pub flows: usize,
    /// A host's flows into it measured in both runs, which its `loss into
    /// it` is over (absent for a pool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows_into: Option<usize>,
    pub figures: Vec<FigureChange>,
}

impl GroupChange {
    pub(super) fn changed(&self) -> bool {
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
    pub(super) fn loss_change(&self) -> f64 {
        self.loss_b_pct - self.loss_a_pct
    }

    pub(super) fn back_change_pct(&self) -> Option<f64> {
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
            let inside: Vec<&Pair> = pairs
                .iter()
                .filter(|(f, _)| p.from_hosts.contains(&f.src) && p.to_hosts.contains(&f.dst))
                .collect();
            group(format!("{} -> {}", p.from, p.to), &inside)
        })
        .collect();
    let (mut sent, mut into): (Sides, Sides) = (BTreeMap::new(), BTreeMap::new());
    for pair in &pairs {
        sent.entry(pair.0.src.as_str()).or_default().push(pair);
        into.entry(pair.0.dst.as_str()).or_default().push(pair);
    }
    let mut hosts: Vec<GroupChange> = a
        .hosts
        .iter()
        .map(|h| {
            let none = Vec::new();
            let own = sent.get(h.host.as_str()).unwrap_or(&none);
            let served = into.get(h.host.as_str()).unwrap_or(&none);
            host(h.host.clone(), own, served)
        })
        .filter(|g| g.flows > 0 || g.flows_into.is_some_and(|n| n > 0))
        .collect();
    // Most changed first: by the larger loss change's size, then the name.
    let loss_moved = |g: &GroupChange| {
        g.figures
            .iter()
            .filter(|f| f.kind == Kind::Loss)
            .filter_map(|f| f.change)
            .map(f64::abs)
            .fold(0.0, f64::max)
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

/// What a figure without an interval had, and what would give it one.
#[derive(Debug, Clone, Default)]
struct Shortfall {
    /// What the runs had: `1 interval of 5s in A`, `1 flow`.
    had: Option<String>,
    /// The shortest run that gives an interval: its seconds, and the command.
    rerun: Option<(i64, String)>,
}

/// A figure of two runs from its change interval (`None`: not measured, or
/// `short` of units).
fn figure(
    name: &'static str,
    kind: Kind,
    a: Option<f64>,
    b: Option<f64>,
    change: Option<Change>,
    short: &Shortfall,
) -> FigureChange {
    let verdict = match (change, a, b) {
        (Some(c), _, _) => kind.verdict(&c),
        (None, Some(_), Some(_)) => Verdict::TooFew,
        (None, _, _) => Verdict::NotMeasured,
    };
    let short = (verdict == Verdict::TooFew).then_some(short);
    let rerun = short.and_then(|s| s.rerun.as_ref());
    FigureChange {
        figure: name,
        unit: kind.unit(),
        a: ro(a),
        b: ro(b),
        change: ro(change.map(|c| c.change)),
        change_unit: kind.change_unit(),
        low: ro(change.map(|c| c.low)),
        high: ro(change.map(|c| c.high)),
        verdict,
        too_few: short.and_then(|s| s.had.clone()),
        run_at_least_s: rerun.map(|r| r.0),
        rerun: rerun.map(|r| r.1.clone()),
        kind,
    }
}

/// `mx run`'s own report interval, seconds (its `--interval` default).
const RUN_INTERVAL_S: i64 = 5;

/// Why the fleet's figures have no interval, when a run holds fewer than
/// [`bootstrap::MIN_ITEMS`] intervals, and the run that would: `mx run
/// --for S` starts on an interval's boundary and holds S / interval whole
/// intervals.
fn fleet_shortfall(a: &Document, b: &Document) -> Shortfall {
    let short: Vec<(&str, &Document)> = [("A", a), ("B", b)]
        .into_iter()
        .filter(|(_, d)| d.intervals.len() < bootstrap::MIN_ITEMS)
        .collect();
    let had = |d: &Document| {
        let n = d.intervals.len();
        let plural = if n == 1 { "" } else { "s" };
        format!("{n} interval{plural} of {}s", d.span.interval_s)
    };
    let text = match short.as_slice() {
        [] => return Shortfall::default(),
        [(run, d)] => format!("{} in {run}", had(d)),
        [(_, x), (_, y)] if had(x) == had(y) => format!("{} in each", had(x)),
        [(_, x), (_, y), ..] => format!("{} in A, {} in B", had(x), had(y)),
    };
    let interval_s = short
        .iter()
        .map(|(_, d)| d.span.interval_s.max(1))
        .max()
        .unwrap_or(RUN_INTERVAL_S);
    let seconds = bootstrap::MIN_ITEMS as i64 * interval_s;
    let command = if interval_s == RUN_INTERVAL_S {
        format!("mx run --for {seconds}")
    } else {
        format!("mx run --for {seconds} --interval {interval_s}")
    };
    Shortfall {
        had: Some(text),
        rerun: Some((seconds, command)),
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
    let short = fleet_shortfall(a, b);
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
            figure(name, kind, whole(a), whole(b), change, &short)
        })
        .collect()
}

/// A flow before and after.
type Pair<'a> = (&'a FlowDoc, &'a FlowDoc);

/// Each host's flows on one side (those it sends, or those into it).
type Sides<'a, 'b> = BTreeMap<&'a str, Vec<&'b Pair<'a>>>;

/// A figure of a group of flows, computed over some of them.
type FlowStat = fn(&[&FlowDoc]) -> Option<f64>;

fn replies_back(flows: &[&FlowDoc]) -> Option<f64> {
    Some(flows.iter().map(|f| f.back_pps).sum())
}

fn round_trip_loss(flows: &[&FlowDoc]) -> Option<f64> {
    loss(
        flows.iter().map(|f| f.sent_pps).sum(),
        flows.iter().map(|f| f.back_pps).sum(),
    )
}

/// The flows' typical tail: the median of their worst intervals' p99.
fn rtt_p99(flows: &[&FlowDoc]) -> Option<f64> {
    median(flows.iter().filter_map(|f| f.rtt_p99_us))
}

/// A pool direction's figures, each paired per flow.
fn group(name: String, pairs: &[&Pair]) -> GroupChange {
    let stats: [(&'static str, Kind, FlowStat); 3] = [
        ("replies back", Kind::Rate, replies_back),
        ("loss", Kind::Loss, round_trip_loss),
        ("rtt p99", Kind::Rtt, rtt_p99),
    ];
    GroupChange {
        name,
        flows: pairs.len(),
        flows_into: None,
        figures: stats
            .into_iter()
            .map(|(figure_name, kind, stat)| over_flows(figure_name, kind, stat, pairs))
            .collect(),
    }
}

/// A host's figures: a pool's over the flows it sends, and the loss of the
/// flows into it, apart (a host that drops what it receives moves every
/// flow into it and none of its own: pooled, its own flows would dilute
/// the change to half of them, and pairing would read that as noise).
fn host(name: String, sent: &[&Pair], into: &[&Pair]) -> GroupChange {
    let mut own = group(name, sent);
    let loss_into = over_flows("loss into it", Kind::Loss, round_trip_loss, into);
    // Beside its own loss, before the RTT.
    let at = own.figures.len() - 1;
    own.figures.insert(at, loss_into);
    own.flows_into = Some(into.len());
    own
}

/// One figure of a group of flows, paired per flow: `stat` over the flows
/// before and after, the change's interval from the flows resampled
/// together.
fn over_flows(name: &'static str, kind: Kind, stat: FlowStat, pairs: &[&Pair]) -> FigureChange {
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
    // More flows come from more peers, not a longer run.
    let short = Shortfall {
        had: (pairs.len() < bootstrap::MIN_ITEMS).then(|| {
            let plural = if pairs.len() == 1 { "" } else { "s" };
            format!("{} flow{plural}", pairs.len())
        }),
        rerun: None,
    };
    figure(
        name,
        kind,
        side(&all, false),
        side(&all, true),
        change,
        &short,
    )
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
    mx_base::units::median(&values.collect::<Vec<f64>>())
}

#[cfg(test)]
mod tests {
    use super::super::render::render;
    use super::*;

    /// Requests each flow sends per interval: 5 kpps for 5 s.
    const SENT: f64 = 25_000.0;

    /// A full mesh of `hosts` hosts (h1, h2, ...) over `intervals` intervals
    /// of `interval_s`: flow src -> dst in interval i loses `lost(src, dst,
    /// i)` of its requests on the way there and `back(src, dst, i)` of them
    /// on the way back (fractions).
    fn run(
        hosts: usize,
        intervals: usize,
        interval_s: i64,
        lost: impl Fn(usize, usize, usize) -> f64,
        back: impl Fn(usize, usize, usize) -> f64,
    ) -> Document {
        let names: Vec<String> = (1..=hosts).map(|i| format!("h{i}")).collect();
        let secs = (intervals as i64 * interval_s) as f64;
        let (mut flows, mut series) = (Vec::new(), vec![(0.0, 0.0, 0.0); intervals]);
        for src in 1..=hosts {
            for dst in (1..=hosts).filter(|&d| d != src) {
                let (mut arrived, mut replies) = (0.0, 0.0);
                for (i, cell) in series.iter_mut().enumerate() {
                    let there = (SENT * (1.0 - lost(src, dst, i))).round();
                    let home = (there - SENT * back(src, dst, i)).round();
                    *cell = (cell.0 + SENT, cell.1 + home, cell.2 + there);
                    arrived += there;
                    replies += home;
                }
                let sent = SENT * intervals as f64;
                flows.push(serde_json::json!({
                    "src": names[src - 1], "dst": names[dst - 1],
                    "sent_pps": sent / secs, "back_pps": replies / secs,
                    "delivered_pps": arrived / secs,
                    "loss_pct": loss(sent, replies).unwrap(),
                    "rtt_p99_us": 400.0 + (src * 7 + dst) as f64,
                }));
            }
        }
        let rtt = serde_json::json!({"exact": true});
        let fleet = serde_json::json!({
            "requests_pps": 0.0, "requests_wire_bps": 0.0, "requests_payload_bps": 0.0,
            "replies_pps": 0.0, "replies_wire_bps": 0.0, "replies_payload_bps": 0.0,
            "rtt": rtt,
        });
        let host_docs: Vec<serde_json::Value> = names
            .iter()
            .map(|h| {
                serde_json::json!({
                    "host": h, "sent_pps": 0.0, "back_pps": 0.0, "serving_pps": 0.0,
                    "egress_wire_bps": 0.0, "rtt_exact": true,
                })
            })
            .collect();
        let interval_docs: Vec<serde_json::Value> = series
            .iter()
            .enumerate()
            .map(|(i, (requests, replies, delivered))| {
                serde_json::json!({
                    "ts": 1000 + (i as i64 + 1) * interval_s,
                    "requests": requests, "replies": replies, "delivered": delivered,
                    "rtt_p50_us": 150.0 + (i % 3) as f64, "rtt_p99_us": 400.0 + (i % 2) as f64,
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema": "mx.summary/1", "mx_version": "test",
            "span": {"intervals": intervals, "interval_s": interval_s, "left_out": 0, "steady": true},
            "run": {"hosts": hosts, "flows": flows.len(), "request_bytes": 64, "reply_bytes": 64, "layered": false},
            "fleet": fleet,
            "spread": {"flows": flows.len()},
            "pools": [], "hosts": host_docs, "flows": flows, "intervals": interval_docs, "advice": [],
        }))
        .unwrap()
    }

    /// The lab's own noise: a few requests in 100k lost now and then, a
    /// different few in each run (`seed`).
    fn lab_noise(seed: usize) -> impl Fn(usize, usize, usize) -> f64 {
        move |src, dst, i| ((src * 31 + dst * 17 + i * 7 + seed * 13) % 5) as f64 * 2e-5
    }

    /// 5% of every packet towards host 2 dropped: its requests (the flows
    /// into it) and its replies (the flows it sends), on top of `noise`.
    fn towards_h2(
        noise: impl Fn(usize, usize, usize) -> f64,
        leg_into: bool,
    ) -> impl Fn(usize, usize, usize) -> f64 {
        move |src, dst, i| {
            let dropped = if leg_into { dst == 2 } else { src == 2 };
            noise(src, dst, i) + if dropped { 0.05 } else { 0.0 }
        }
    }

    fn fleet_figure<'a>(c: &'a Comparison, name: &str) -> &'a FigureChange {
        c.fleet.iter().find(|f| f.figure == name).unwrap()
    }

    fn host_figure<'a>(c: &'a Comparison, host: &str, name: &str) -> &'a FigureChange {
        let h = c.hosts.iter().find(|h| h.name == host).unwrap();
        h.figures.iter().find(|f| f.figure == name).unwrap()
    }

    #[test]
    fn four_intervals_judge_the_fleet() {
        // Two `mx run --for 20` (four intervals of 5 s) of 4 hosts, the
        // second with 5% of the packets towards h2 dropped: 6 flows of 12
        // lose 5%, 2.5 points of the fleet's loss.
        let clean = run(4, 4, 5, lab_noise(1), lab_noise(2));
        let dropped = run(
            4,
            4,
            5,
            towards_h2(lab_noise(3), true),
            towards_h2(lab_noise(4), false),
        );
        let c = compare(&clean, &dropped, ("a", "b"));
        for name in ["loss", "forward loss", "return loss"] {
            let f = fleet_figure(&c, name);
            assert_eq!(f.verdict, Verdict::Worse, "{name}: {f:?}");
            assert!(f.low.unwrap() > LOSS_FLOOR_PTS, "{name}: {f:?}");
        }
        let loss = fleet_figure(&c, "loss");
        assert!((loss.change.unwrap() - 2.5).abs() < 0.01, "{loss:?}");
        assert_eq!(fleet_figure(&c, "requests").verdict, Verdict::WithinNoise);

        // Two clean runs: nothing to judge but noise.
        let again = run(4, 4, 5, lab_noise(5), lab_noise(6));
        let c = compare(&clean, &again, ("a", "b"));
        for f in &c.fleet {
            assert_eq!(f.verdict, Verdict::WithinNoise, "{f:?}");
        }
        for h in &c.hosts {
            assert!(!h.changed(), "{h:?}");
        }
    }

    #[test]
    fn a_host_of_four_is_judged_on_each_side_of_its_flows() {
        let clean = run(4, 4, 5, lab_noise(1), lab_noise(2));
        // Every packet towards h2: the flows into it lose requests, its own
        // lose replies. h2 alone changed; h1 has one flow of three on each
        // side moved, its peer's doing.
        let dropped = run(
            4,
            4,
            5,
            towards_h2(lab_noise(3), true),
            towards_h2(lab_noise(4), false),
        );
        let c = compare(&clean, &dropped, ("a", "b"));
        assert_eq!((c.hosts[0].name.as_str(), c.hosts[0].flows), ("h2", 3));
        assert_eq!(c.hosts[0].flows_into, Some(3));
        for name in ["loss", "loss into it"] {
            let f = host_figure(&c, "h2", name);
            assert_eq!(f.verdict, Verdict::Worse, "{name}: {f:?}");
            assert!((f.change.unwrap() - 5.0).abs() < 0.01, "{f:?}");
        }
        for other in ["h1", "h3", "h4"] {
            let h = c.hosts.iter().find(|h| h.name == other).unwrap();
            assert!(!h.changed(), "{h:?}");
        }
        let text = render(&c, 10);
        assert!(text.contains("HOSTS THAT CHANGED (1 of 4;"), "{text}");
        let line = text.lines().find(|l| l.starts_with("    h2 ")).unwrap();
        assert!(
            line.contains("; loss 0.01% -> 5.01% (+5.00 pts, 95% +5.00 pts .. +5.0")
                && line.contains("; loss into it 0.01% -> 5.01% (+5.00 pts, 95%"),
            "{line}"
        );

        // A sick receiver: only the requests into h2 dropped. Pooled with
        // its own clean flows, half of its flows would have moved and
        // pairing would call it noise; apart, the flows into it all did.
        let sick = run(4, 4, 5, towards_h2(lab_noise(3), true), lab_noise(4));
        let c = compare(&clean, &sick, ("a", "b"));
        assert_eq!(c.hosts[0].name, "h2");
        assert_eq!(
            host_figure(&c, "h2", "loss into it").verdict,
            Verdict::Worse
        );
        assert_eq!(host_figure(&c, "h2", "loss").verdict, Verdict::WithinNoise);
        // 3 of 12 flows: the fleet's loss moved 1.25 points.
        assert_eq!(fleet_figure(&c, "forward loss").verdict, Verdict::Worse);
    }

    #[test]
    fn one_interval_says_how_long_to_run() {
        let short = run(4, 1, 5, lab_noise(1), lab_noise(2));
        let long = run(4, 4, 5, towards_h2(lab_noise(3), true), lab_noise(4));
        let c = compare(&short, &long, ("a", "b"));
        let f = fleet_figure(&c, "loss");
        assert_eq!(f.verdict, Verdict::TooFew);
        assert_eq!(f.too_few.as_deref(), Some("1 interval of 5s in A"));
        assert_eq!(f.run_at_least_s, Some(10));
        let text = render(&c, 10);
        assert!(text.contains("A: a (1 interval of 5s)"), "{text}");
        assert!(
            text.contains(
                "too few to judge: 1 interval of 5s in A; run at least 10s (mx run --for 10)"
            ),
            "{text}"
        );
        // The JSON says it too.
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["fleet"][2]["too_few"], "1 interval of 5s in A");
        assert_eq!(json["fleet"][2]["run_at_least_s"], 10);

        // Runs of 1 s intervals are told so.
        let (a, b) = (
            run(3, 1, 1, lab_noise(1), lab_noise(2)),
            run(3, 1, 1, lab_noise(3), lab_noise(4)),
        );
        let text = render(&compare(&a, &b, ("a", "b")), 10);
        assert!(
            text.contains("too few to judge: 1 interval of 1s in each; run at least 2s (mx run --for 2 --interval 1)"),
            "{text}"
        );
    }

    #[test]
    fn a_host_with_one_flow_a_side_is_not_judged_and_says_why() {
        let a = run(2, 4, 5, lab_noise(1), lab_noise(2));
        let b = run(2, 4, 5, towards_h2(lab_noise(3), true), lab_noise(4));
        let c = compare(&a, &b, ("a", "b"));
        let f = host_figure(&c, "h2", "loss into it");
        assert_eq!(
            (f.verdict, f.too_few.as_deref()),
            (Verdict::TooFew, Some("1 flow"))
        );
        assert_eq!(f.run_at_least_s, None);
        let text = render(&c, 10);
        assert!(text.contains("HOSTS     none judged"), "{text}");
        // The fleet's intervals still judge it.
        assert_eq!(fleet_figure(&c, "loss").verdict, Verdict::Worse);
    }
}
