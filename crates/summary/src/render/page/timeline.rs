//! The page's pictures over time: what the fleet sent and got back against
//! its target, its loss by leg, the worst hosts' loss apart from the fleet's,
//! and RTT, interval by interval.
//!
//! An interval that is not whole is left out of every line and shaded with
//! why: the summary's edges (hosts starting or stopping), an interval in
//! which a host went (its agent stopped, it fell out of reach), and one some
//! host had not written yet (a report collected mid-run). Drawn, each would
//! be a dip that no network made. Rates are drawn as a share of the target
//! of the same flows, so a host that went takes its target with it.

use super::Picture;
use super::series::{Fit, Line, TimeAxis, over_time};
use crate::Summary;
use crate::analysis::aggregate::ReportSet;
use crate::document::{Document, IntervalDoc, loss};
use crate::render::words::name_list;
use mx_base::units::{micros, pps};

/// Hosts drawn in the hosts' loss chart: the worst few.
const WORST_HOSTS: usize = 3;
/// The rates chart is at least this many percentage points tall: a 2%
/// shortfall is then a good part of its height.
const RATE_SPAN_PCT: f64 = 5.0;

/// Why interval `ts` of the span is not whole, if it is not: a host went
/// in it, or a host still up had not written it.
fn partial(set: &ReportSet, ts: i64, interval_s: i64) -> Option<String> {
    let went: Vec<&str> = set
        .gone
        .iter()
        .filter(|(_, d)| d.last.is_some_and(|l| ts > l && ts <= l + interval_s))
        .map(|(&h, _)| set.name(h))
        .collect();
    if !went.is_empty() {
        return Some(format!("{} went in it (partial)", name_list(&went)));
    }
    let missing: Vec<&str> = set
        .window_hosts()
        .into_iter()
        .filter(|&h| !set.gone_at(h, ts) && !set.reported(h, ts))
        .map(|h| set.name(h))
        .collect();
    (!missing.is_empty()).then(|| format!("{} had not written it (partial)", name_list(&missing)))
}

/// The intervals left out of the lines, and why: the summary's edges and
/// the span's partial intervals.
fn left_out(set: &ReportSet, interval_s: i64) -> Vec<(i64, String)> {
    set.all_ts
        .iter()
        .filter_map(|&ts| {
            if !set.span.contains(ts) {
                return Some((ts, "the summary's edge (hosts starting or stopping)".into()));
            }
            partial(set, ts, interval_s).map(|why| (ts, why))
        })
        .collect()
}

/// The fleet's whole intervals, each with its figure (`None`: a gap).
struct Whole<'a> {
    intervals: &'a [IntervalDoc],
    left_out: &'a [(i64, String)],
}

impl Whole<'_> {
    fn points(&self, f: &dyn Fn(&IntervalDoc) -> Option<f64>) -> Vec<(i64, Option<f64>)> {
        self.intervals
            .iter()
            .map(|i| {
                let out = self.left_out.iter().any(|(ts, _)| *ts == i.ts);
                (i.ts, if out { None } else { f(i) })
            })
            .collect()
    }
}

fn line(name: &str, colour: &'static str, width: f64, points: Vec<(i64, Option<f64>)>) -> Line {
    Line {
        name: name.to_string(),
        colour,
        width,
        points,
    }
}

fn percent(v: f64) -> String {
    format!("{v:.1}%")
}

/// Requests sent and replies back: as % of their target when the flows
/// were paced, else in packets per second; on an axis around the values.
fn rates(set: &ReportSet, whole: &Whole<'_>, time: &TimeAxis<'_>) -> Picture {
    let target = |i: &IntervalDoc| {
        let t = set.intervals.get(&i.ts)?.target;
        (t > 0.0).then_some(t)
    };
    let paced = whole.intervals.iter().any(|i| target(i).is_some());
    let (title, svg) = if paced {
        let lines = [
            line(
                "target",
                "#969696",
                1.0,
                whole.points(&|i| target(i).map(|_| 100.0)),
            ),
            line(
                "requests sent",
                "#08519c",
                2.0,
                whole.points(&|i| Some(i.requests / target(i)? * 100.0)),
            ),
            line(
                "replies back",
                "#31a354",
                2.0,
                whole.points(&|i| Some(i.replies / target(i)? * 100.0)),
            ),
        ];
        let title = "Sent and back, % of the target, fleet";
        let fit = Fit::Around(RATE_SPAN_PCT);
        (title, over_time(title, &lines, time, fit, &percent))
    } else {
        let secs = time.interval_s as f64;
        let lines = [
            line(
                "requests sent",
                "#08519c",
                2.0,
                whole.points(&|i| Some(i.requests / secs)),
            ),
            line(
                "replies back",
                "#31a354",
                2.0,
                whole.points(&|i| Some(i.replies / secs)),
            ),
        ];
        let top = whole
            .intervals
            .iter()
            .map(|i| i.requests / secs)
            .fold(0.0, f64::max);
        let title = "Packets per second, fleet (unpaced: no target)";
        let fit = Fit::Around(top * RATE_SPAN_PCT / 100.0);
        (title, over_time(title, &lines, time, fit, &pps))
    };
    Picture {
        file: "packets_over_time.svg".into(),
        title: title.into(),
        svg,
        note: None,
    }
}

/// The fleet's loss by leg: forward, and on the way back (points of the
/// requests sent, as the summary's LOSS line splits the round trip).
fn fleet_loss(whole: &Whole<'_>, time: &TimeAxis<'_>) -> Picture {
    let lines = [
        line(
            "forward (requests)",
            "#cb181d",
            2.5,
            whole.points(&|i| i.forward_loss_pct()),
        ),
        line(
            "on the way back (replies)",
            "#fd8d3c",
            2.5,
            whole.points(&|i| Some((i.loss_pct()? - i.forward_loss_pct()?).max(0.0))),
        ),
    ];
    let title = "Loss by leg, fleet";
    Picture {
        file: "loss_over_time.svg".into(),
        title: title.into(),
        svg: over_time(title, &lines, time, Fit::FromZero, &percent),
        note: None,
    }
}

/// The worst hosts' loss, each its flows' round trip, apart from the
/// fleet's legs (`None` when no host lost anything).
fn host_loss(summary: &Summary, whole: &Whole<'_>, time: &TimeAxis<'_>) -> Option<Picture> {
    let set = &summary.set;
    let colours = ["#54278f", "#737373", "#2171b5"];
    let lines: Vec<Line> = summary
        .figs
        .hosts
        .iter()
        .filter(|h| h.loss > 0.0)
        .take(WORST_HOSTS)
        .zip(colours)
        .map(|(h, colour)| {
            let own = |i: &IntervalDoc| {
                let &(sent, back) = set.host_intervals.get(&(h.id, i.ts))?;
                loss(sent, back)
            };
            line(set.name(h.id), colour, 1.5, whole.points(&own))
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let title = "Loss of the worst hosts: round trip of the flows each sends";
    Some(Picture {
        file: "host_loss_over_time.svg".into(),
        title: title.into(),
        svg: over_time(title, &lines, time, Fit::FromZero, &percent),
        note: None,
    })
}

fn rtt(whole: &Whole<'_>, time: &TimeAxis<'_>) -> Option<Picture> {
    if !whole.intervals.iter().any(|i| i.rtt_p50_us.is_some()) {
        return None;
    }
    let lines = [
        line("p50", "#08519c", 2.0, whole.points(&|i| i.rtt_p50_us)),
        line("p99", "#cb181d", 2.0, whole.points(&|i| i.rtt_p99_us)),
    ];
    let title = "RTT p50 and p99, fleet (exact per interval)";
    Some(Picture {
        file: "rtt_over_time.svg".into(),
        title: title.into(),
        svg: over_time(title, &lines, time, Fit::FromZero, &|v| micros(Some(v))),
        note: None,
    })
}

/// Interval ends at which a new layer began (layered runs).
fn switches(set: &ReportSet) -> Vec<i64> {
    let mut out = Vec::new();
    let mut last_layer = None;
    for (&ts, &layer) in &set.interval_layer {
        if last_layer.is_some_and(|l| l != layer) {
            out.push(ts);
        }
        last_layer = Some(layer);
    }
    out
}

/// The pictures over time, in the page's order.
pub fn pictures(summary: &Summary, doc: &Document) -> Vec<Picture> {
    let set = &summary.set;
    let interval_s = doc.span.interval_s.max(1);
    let all: Vec<i64> = set.all_ts.iter().copied().collect();
    let left_out = left_out(set, interval_s);
    let switches = switches(set);
    let time = TimeAxis {
        all: &all,
        left_out: &left_out,
        switches: &switches,
        interval_s,
    };
    let whole = Whole {
        intervals: &doc.intervals,
        left_out: &left_out,
    };
    let mut out = vec![rates(set, &whole, &time), fleet_loss(&whole, &time)];
    out.extend(host_loss(summary, &whole, &time));
    out.extend(rtt(&whole, &time));
    out.retain(|p| !p.svg.is_empty());
    out
}
