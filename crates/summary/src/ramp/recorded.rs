//! A ramp read back from its reports (`mx summarize` over a run of
//! `mx run --ramp`). Each step is summarized alone: one figure over the
//! whole run would average every step's rate into a rate no step ran.
//!
//! The steps are those the ramp kept beside the reports it judged them on
//! ([`RECORD_FILE`]): the same intervals, judged by the same function, so
//! the summary says what the ramp said. Reports without it (copied
//! elsewhere) read as the host rows' `rate_scale` shows them.

use std::path::Path;

use super::plan::{Kind, Plan};
use super::render::{Document, document};
use super::verdict::{MAX_TRIES, StepResult, Thresholds, step_figures, tried_again, verdict};
use crate::analysis::span::{Span, Step, Timeline, same_scale};
use mx_base::error::Result;

/// The file `mx run --ramp` keeps beside the reports it collects: one line
/// per step judged, `scale,kind,after,until` (the labels of the intervals
/// it was judged on: after `after`, up to `until`).
pub const RECORD_FILE: &str = "ramp.steps";
const RECORD_HEADER: &str = "scale,kind,after,until";

/// The record of `steps`.
pub fn record_text(steps: &[StepResult]) -> String {
    let mut text = format!("{RECORD_HEADER}\n");
    for s in steps {
        text.push_str(&format!(
            "{},{},{},{}\n",
            super::scale_text(s.scale),
            s.kind.word(),
            s.after,
            s.until
        ));
    }
    text
}

/// The steps a record holds, when they are these reports' (each step's
/// time holds a kept interval that every host ran at its scale): `None`
/// for a record that is not one, or another ramp's.
pub(crate) fn from_record(
    text: &str,
    timeline: &Timeline,
    span: &Span,
) -> Option<Vec<(Step, Kind)>> {
    let mut lines = text.lines();
    if lines.next()? != RECORD_HEADER {
        return None;
    }
    let steps: Vec<(Step, Kind)> = lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let [scale, kind, after, until] = cells[..] else {
                return None;
            };
            let step = Step {
                scale: scale.parse().ok()?,
                after: after.parse().ok()?,
                until: until.parse().ok()?,
            };
            Some((step, Kind::parse(kind)?))
        })
        .collect::<Option<_>>()?;
    let ran = |step: &Step| {
        span.keep.iter().any(|&ts| {
            ts > step.after
                && ts <= step.until
                && one_scale(timeline, ts).is_some_and(|s| same_scale(s, step.scale))
        })
    };
    (!steps.is_empty() && steps.iter().all(|(step, _)| ran(step))).then_some(steps)
}

/// The steps among the kept intervals of `span`, where no record says
/// them: each run of consecutive kept intervals that every host ran at one
/// scale, less its first (the interval a rate begins in settles, as the
/// ramp leaves it out). An interval whose hosts ran different scales (an
/// order that reached one host late) belongs to no step. Empty when no
/// host row carries a scale: not a ramp.
///
/// A step tried again (an agent short of CPU) ran on at the same scale, so
/// it reads back as one step over all its tries; a scale below the highest
/// before it is a bisection's.
pub fn steps(timeline: &Timeline, span: &Span) -> Vec<(Step, Kind)> {
    let mut steps: Vec<(Step, Kind)> = Vec::new();
    let mut highest = f64::NEG_INFINITY;
    for &ts in &span.keep {
        let Some(scale) = one_scale(timeline, ts) else {
            continue;
        };
        match steps.last_mut() {
            Some((step, _)) if same_scale(step.scale, scale) => step.until = ts,
            _ => {
                let kind = if scale < highest {
                    Kind::Bisect
                } else {
                    Kind::Climb
                };
                highest = highest.max(scale);
                // Its first interval settles: the step's time begins after it.
                let step = Step {
                    scale,
                    after: ts,
                    until: ts,
                };
                steps.push((step, kind));
            }
        }
    }
    steps
}

/// Each step's figures from the reports in `dir`, judged by `thresholds`.
/// Steps from the ramp's record are judged as the ramp judged them (a step
/// short of CPU tried again while it had tries left); steps read off the
/// rows alone as its last try (short of CPU fails, naming the host: the
/// reports cannot try it again).
pub fn judge(
    dir: &Path,
    steps: &[(Step, Kind)],
    thresholds: &Thresholds,
    recorded: bool,
) -> Result<Vec<StepResult>> {
    let mut results: Vec<StepResult> = Vec::new();
    for (step, kind) in steps {
        let figures = step_figures(dir, step)?;
        let tries = if recorded {
            tried_again(&results, step.scale)
        } else {
            MAX_TRIES - 1
        };
        results.push(StepResult {
            scale: step.scale,
            kind: *kind,
            after: step.after,
            until: step.until,
            verdict: verdict(&figures, thresholds, tries),
            figures,
        });
    }
    Ok(results)
}

/// The ramp's JSON document as its reports tell it: from the first
/// scale to the highest, stepping by the smallest rise between two
/// climbing steps, each step held for the intervals it ran
/// (`interval_s` each; the longest step's as `hold_s`).
pub fn recorded_document(
    steps: &[StepResult],
    thresholds: &Thresholds,
    interval_s: f64,
) -> Document {
    let climbs: Vec<f64> = steps
        .iter()
        .filter(|s| s.kind == Kind::Climb)
        .map(|s| s.scale)
        .collect();
    let plan = Plan {
        from: steps.first().map_or(0.0, |s| s.scale),
        to: steps.iter().map(|s| s.scale).fold(0.0, f64::max),
        step: climbs
            .windows(2)
            .map(|w| w[1] - w[0])
            .reduce(f64::min)
            .unwrap_or(0.0),
        bisect: steps.iter().any(|s| s.kind == Kind::Bisect),
    };
    let held = steps.iter().map(|s| s.figures.intervals).max().unwrap_or(0);
    document(
        &plan,
        thresholds,
        held as f64 * interval_s,
        interval_s,
        steps,
    )
}

/// The scale every host's row of interval `ts` gives, when they agree.
fn one_scale(timeline: &Timeline, ts: i64) -> Option<f64> {
    let mut scales = timeline
        .iter()
        .filter_map(|marks| marks.get(&ts))
        .filter(|m| m.host_row.is_some())
        .map(|m| m.rate_scale);
    let first = scales.next()??;
    scales
        .all(|s| s.is_some_and(|s| same_scale(s, first)))
        .then_some(first)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::analysis::span::Mark;

    /// Two hosts' marks: interval `ts` at `scales[i]` (a pair: each host's).
    fn timeline(scales: &[(i64, Option<f64>, Option<f64>)]) -> Timeline {
        let mut hosts = vec![BTreeMap::new(), BTreeMap::new()];
        for &(ts, a, b) in scales {
            for (host, scale) in [a, b].into_iter().enumerate() {
                let mark = Mark {
                    host_row: Some(None),
                    rate_scale: scale,
                    ..Mark::default()
                };
                hosts[host].insert(ts, mark);
            }
        }
        hosts
    }

    fn kept(labels: impl IntoIterator<Item = i64>) -> Span {
        Span {
            keep: labels.into_iter().collect(),
            ..Span::default()
        }
    }

    #[test]
    fn the_steps_are_the_runs_of_intervals_every_host_ran_at_one_scale() {
        let x = |s: f64| Some(s);
        let t = timeline(&[
            (10, x(1.0), x(1.0)),
            (11, x(1.0), x(1.0)),
            // The order reached the second host an interval late.
            (12, x(2.0), x(1.0)),
            (13, x(2.0), x(2.0)),
            (14, x(2.0), x(2.0)),
            (15, x(3.0), x(3.0)),
            (16, x(2.5), x(2.5)),
            (17, x(2.5), x(2.5)),
        ]);
        let got = steps(&t, &kept(10..=17));
        // Each from the interval after its first (the rate settles in it).
        let want = [
            (1.0, 10, 11, Kind::Climb),
            (2.0, 13, 14, Kind::Climb),
            (3.0, 15, 15, Kind::Climb),
            (2.5, 16, 17, Kind::Bisect),
        ];
        let got: Vec<(f64, i64, i64, Kind)> = got
            .iter()
            .map(|(s, k)| (s.scale, s.after, s.until, *k))
            .collect();
        assert_eq!(got, want);
        // Only the kept intervals count: the window's, the steady ones.
        let late: Vec<f64> = steps(&t, &kept(15..=17))
            .iter()
            .map(|(s, _)| s.scale)
            .collect();
        assert_eq!(late, [3.0, 2.5]);
    }

    #[test]
    fn the_ramp_s_record_gives_its_steps_when_the_reports_ran_them() {
        let x = |s: f64| Some(s);
        let t = timeline(&[
            (10, x(1.0), x(1.0)),
            (11, x(1.0), x(1.0)),
            (12, x(1.0), x(1.0)),
            (13, x(2.0), x(2.0)),
            (14, x(2.0), x(2.0)),
        ]);
        let record = "scale,kind,after,until\n1,climb,10,11\n2,climb,13,14\n";
        let got: Vec<(f64, i64, i64, Kind)> = from_record(record, &t, &kept(10..=14))
            .unwrap()
            .iter()
            .map(|(s, k)| (s.scale, s.after, s.until, *k))
            .collect();
        assert_eq!(
            got,
            [(1.0, 10, 11, Kind::Climb), (2.0, 13, 14, Kind::Climb)]
        );
        // Another ramp's (its scales are not these rows'), or not a record.
        let other = "scale,kind,after,until\n1.5,climb,10,11\n";
        assert_eq!(from_record(other, &t, &kept(10..=14)), None);
        assert_eq!(
            from_record("scale,kind\n1,climb\n", &t, &kept(10..=14)),
            None
        );
        assert_eq!(from_record(record, &t, &kept(20..=24)), None);
    }

    #[test]
    fn a_run_whose_rows_carry_no_scale_is_not_a_ramp() {
        let t = timeline(&[(10, None, None), (11, None, None)]);
        assert!(steps(&t, &kept(10..=11)).is_empty());
    }
}
