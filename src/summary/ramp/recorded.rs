//! A ramp read back from its reports (`mx summarize` over a run of
//! `mx run --ramp`): its steps as the host rows' `rate_scale` shows them.
//! Each step is summarized alone: one figure over the whole run would
//! average every step's rate into a rate no step ran.

use std::path::Path;

use super::plan::{Kind, Plan};
use super::render::{Document, document};
use super::verdict::{MAX_TRIES, StepResult, Thresholds, step_figures, verdict};
use crate::error::Result;
use crate::summary::analysis::span::{Span, Step, Timeline, same_scale};

/// The steps among the kept intervals of `span`: each run of consecutive
/// kept intervals that every host ran at one scale. An interval whose hosts
/// ran different scales (an order that reached one host late) belongs to
/// no step. Empty when no host row carries a scale: not a ramp.
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
                // Labels are whole seconds, one per interval: the step's
                // time begins just before its first.
                let step = Step {
                    scale,
                    after: ts - 1,
                    until: ts,
                };
                steps.push((step, kind));
            }
        }
    }
    steps
}

/// Each step's figures from the reports in `dir`, judged by `thresholds`
/// as the ramp judged its last try: a step short with an agent short of
/// CPU fails, naming it (the reports cannot try it again).
pub fn judge(
    dir: &Path,
    steps: &[(Step, Kind)],
    thresholds: &Thresholds,
) -> Result<Vec<StepResult>> {
    steps
        .iter()
        .map(|(step, kind)| {
            let figures = step_figures(dir, step)?;
            Ok(StepResult {
                scale: step.scale,
                kind: *kind,
                after: step.after,
                until: step.until,
                verdict: verdict(&figures, thresholds, MAX_TRIES - 1),
                figures,
            })
        })
        .collect()
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
    use crate::summary::analysis::span::Mark;

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
        let want = [
            (1.0, 9, 11, Kind::Climb),
            (2.0, 12, 14, Kind::Climb),
            (3.0, 14, 15, Kind::Climb),
            (2.5, 15, 17, Kind::Bisect),
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
    fn a_run_whose_rows_carry_no_scale_is_not_a_ramp() {
        let t = timeline(&[(10, None, None), (11, None, None)]);
        assert!(steps(&t, &kept(10..=11)).is_empty());
    }
}
