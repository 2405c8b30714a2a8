//! A ramp written out: the steps' table, the answer under it (the highest
//! rate that held, where the limit lies and what set it), and the JSON
//! document of `mx run --ramp --json`.

use std::fmt::Write as _;

use serde::Serialize;

use super::plan::{Kind, Plan, scale_text};
use super::verdict::{
    ShortOfCpu, StepFigures, StepResult, Thresholds, Verdict, highest_held, limit_set_by,
    tried_again,
};
use crate::document::ro;
use mx_base::units::{micros, pps};

/// The `schema` of the ramp's JSON document.
pub const SCHEMA: &str = "mx.ramp/1";

/// The header of the steps' table.
pub fn table_header() -> String {
    format!(
        "  {:>4}  {:>10}  {:>11}  {:>11}  {:>9}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}  verdict\n",
        "step",
        "scale",
        "offered",
        "sent",
        "delivered",
        "fwd loss",
        "ret loss",
        "rtt p50",
        "rtt p99",
        "intervals"
    )
}

/// The steps' table, its legend, and the answer under it; `cut_short`: the
/// ramp ended at ctrl-c, before it found what it climbs to.
pub fn steps_text(steps: &[StepResult], cut_short: bool) -> String {
    let mut text = table_header();
    for (i, s) in steps.iter().enumerate() {
        text.push_str(&table_row(i + 1, s));
    }
    if steps.iter().any(|s| s.kind == Kind::Bisect) {
        text.push_str("  (b: a bisection step)\n");
    }
    if steps.iter().any(|s| s.kind == Kind::Again) {
        text.push_str("  (r: the step before, tried again: an agent was short of CPU in it)\n");
    }
    text.push('\n');
    let failed = steps
        .iter()
        .any(|s| matches!(s.verdict, Verdict::Failed(_)));
    // A limit found before ctrl-c stands.
    if !cut_short || failed {
        text.push_str(&conclusion(steps));
    } else if let Some(best) = highest_held(steps) {
        let last = steps.last().map_or(best.scale, |s| s.scale);
        let _ = writeln!(
            text,
            "cut short by ctrl-c at x{}: every step so far held, the highest x{} ({} offered) -- the limit was not reached",
            scale_text(last),
            scale_text(best.scale),
            best.figures.offered_pps.map_or("-".to_string(), pps)
        );
    } else {
        text.push_str("cut short by ctrl-c before a step was judged\n");
    }
    text
}

/// One step's row of the table (`n` counts from 1).
pub fn table_row(n: usize, s: &StepResult) -> String {
    let f = &s.figures;
    let rate = |v: Option<f64>| v.map_or("-".to_string(), pps);
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}%"));
    let scale = match s.kind {
        Kind::Climb => format!("x{}", scale_text(s.scale)),
        Kind::Bisect => format!("x{} b", scale_text(s.scale)),
        Kind::Again => format!("x{} r", scale_text(s.scale)),
    };
    format!(
        "  {n:>4}  {scale:>10}  {:>11}  {:>11}  {:>9}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}  {}\n",
        rate(f.offered_pps),
        rate(f.sent_pps),
        pct(f.delivered_pct),
        pct(f.forward_loss_pct),
        pct(f.return_loss_pct),
        micros(f.rtt_p50_us),
        micros(f.rtt_p99_us),
        f.intervals,
        s.verdict.text()
    )
}

/// The answer under the table: the highest rate that held, and what that
/// means (the limit lies between it and the lowest that did not, or above
/// the ramp's end, or below its start).
pub fn conclusion(steps: &[StepResult]) -> String {
    let failed = steps
        .iter()
        .filter(|s| matches!(s.verdict, Verdict::Failed(_)))
        .min_by(|a, b| a.scale.total_cmp(&b.scale));
    let Some(best) = highest_held(steps) else {
        return match failed {
            Some(f) => format!(
                "no rate held: the first step (x{}, {} offered) already fell short -- start the ramp lower\n{}",
                scale_text(f.scale),
                f.figures.offered_pps.map_or("-".to_string(), pps),
                hosts_limit(steps, f)
            ),
            None => "no rate held: no step could be measured\n".to_string(),
        };
    };
    let offered = best.figures.offered_pps.unwrap_or(0.0);
    let mut text = format!(
        "highest rate that held: {offered:.0} pps ({} offered, x{} the matrix's rates)\n",
        pps(offered),
        scale_text(best.scale)
    );
    match failed {
        Some(f) => {
            let _ = writeln!(
                text,
                "the limit lies between x{} and x{} ({} offered fell short: {})",
                scale_text(best.scale),
                scale_text(f.scale),
                f.figures.offered_pps.map_or("-".to_string(), pps),
                f.verdict.text().trim_start_matches("FAILED: ")
            );
            match limit_set_by(f) {
                Some(place) => {
                    let _ = writeln!(
                        text,
                        "what set it: {place}, at about x{}",
                        scale_text(f.scale)
                    );
                }
                None => {
                    let _ = writeln!(
                        text,
                        "what set it: nothing the hosts counted names a place (no loss beyond the run's noise, no host held back): the tail or the senders' own pace"
                    );
                }
            }
            text.push_str(&hosts_limit(steps, f));
        }
        None => {
            let _ = writeln!(
                text,
                "every step held: the limit is above x{} -- ramp higher",
                scale_text(best.scale)
            );
        }
    }
    text
}

/// Under the answer, when the step that fell short had an agent short of
/// CPU in every try (not judged at once on the network's loss): the limit
/// found may be the hosts', and what to do.
fn hosts_limit(steps: &[StepResult], failed: &StepResult) -> String {
    let hosts: Vec<&str> = failed
        .figures
        .short_of_cpu
        .iter()
        .map(|h| h.host.as_str())
        .collect();
    let tries = 1 + tried_again(steps, failed.scale);
    if hosts.is_empty() || tries < 2 {
        return String::new();
    }
    format!(
        "at x{} the agents of {} were short of CPU in each of {tries} tries: the limit found may be those hosts', not the network's -- give their agents the CPU (a quieter host, fewer flows per host) and ramp again\n",
        scale_text(failed.scale),
        hosts.join(", ")
    )
}

/// The ramp as one JSON document (`mx run --ramp --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Document {
    pub schema: &'static str,
    pub mx_version: &'static str,
    pub ramp: RampDoc,
    pub steps: Vec<StepDoc>,
    /// The step with the highest rate that held; null when none did.
    pub highest_held: Option<HeldDoc>,
    /// The lowest scale that fell short; null when every step held.
    pub lowest_failed_scale: Option<f64>,
    /// The ramp ended at ctrl-c (`mx run --ramp` exits 130).
    pub cut_short: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RampDoc {
    pub from: f64,
    pub to: f64,
    pub step: f64,
    pub bisect: bool,
    pub hold_s: f64,
    pub interval_s: f64,
    pub min_delivered_pct: f64,
    /// Null when the tail is not judged.
    pub max_p99_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepDoc {
    pub step: usize,
    pub scale: f64,
    pub kind: Kind,
    /// The interval labels (ends) of its time: after `after_ts`, up to `until_ts`.
    pub after_ts: i64,
    pub until_ts: i64,
    #[serde(flatten)]
    pub figures: StepFigures,
    pub verdict: &'static str,
    /// Why it fell short (empty when it held).
    pub why: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeldDoc {
    pub scale: f64,
    pub offered_pps: Option<f64>,
}

/// The document of a ramp's `steps`.
pub fn document(
    plan: &Plan,
    t: &Thresholds,
    hold_s: f64,
    interval_s: f64,
    steps: &[StepResult],
) -> Document {
    let rounded = |f: &StepFigures| StepFigures {
        offered_pps: ro(f.offered_pps),
        sent_pps: ro(f.sent_pps),
        back_pps: ro(f.back_pps),
        delivered_pct: ro(f.delivered_pct),
        loss_pct: ro(f.loss_pct),
        forward_loss_pct: ro(f.forward_loss_pct),
        return_loss_pct: ro(f.return_loss_pct),
        wire_loss_pct: ro(f.wire_loss_pct),
        rtt_p50_us: ro(f.rtt_p50_us),
        rtt_p99_us: ro(f.rtt_p99_us),
        short_of_cpu: f
            .short_of_cpu
            .iter()
            .map(|h| ShortOfCpu {
                sent_pct: ro(h.sent_pct),
                ..h.clone()
            })
            .collect(),
        ..f.clone()
    };
    Document {
        schema: SCHEMA,
        mx_version: env!("CARGO_PKG_VERSION"),
        ramp: RampDoc {
            from: plan.from,
            to: plan.to,
            step: plan.step,
            bisect: plan.bisect,
            hold_s,
            interval_s,
            min_delivered_pct: t.min_delivered_pct,
            max_p99_us: t.max_p99_us,
        },
        steps: steps
            .iter()
            .enumerate()
            .map(|(i, s)| StepDoc {
                step: i + 1,
                scale: s.scale,
                kind: s.kind,
                after_ts: s.after,
                until_ts: s.until,
                figures: rounded(&s.figures),
                verdict: s.verdict.word(),
                why: match &s.verdict {
                    Verdict::Failed(why) | Verdict::Again(why) => why.clone(),
                    _ => Vec::new(),
                },
            })
            .collect(),
        highest_held: highest_held(steps).map(|s| HeldDoc {
            scale: s.scale,
            offered_pps: ro(s.figures.offered_pps),
        }),
        lowest_failed_scale: steps
            .iter()
            .filter(|s| matches!(s.verdict, Verdict::Failed(_)))
            .map(|s| s.scale)
            .reduce(f64::min),
        cut_short: false,
    }
}

/// The document as pretty JSON, newline-terminated.
pub fn to_json(doc: &Document) -> String {
    let mut text = serde_json::to_string_pretty(doc).expect("a ramp document serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{figures, plan, short_with_h2_starved, step_result};
    use super::super::verdict::{MAX_TRIES, verdict};
    use super::*;

    #[test]
    fn a_step_short_with_an_agent_short_of_cpu_is_tried_again_then_judged_naming_it() {
        let (t, f) = short_with_h2_starved();
        let why = vec![
            "delivered 95.49% < 97%".to_string(),
            "h2's agent was short of CPU (sent 96.1% of its rate, up to 14 ms behind its send schedule)"
                .to_string(),
        ];
        for tries in 0..MAX_TRIES - 1 {
            assert_eq!(verdict(&f, &t, tries), Verdict::Again(why.clone()));
        }
        assert_eq!(verdict(&f, &t, MAX_TRIES - 1), Verdict::Failed(why));
        assert!(
            verdict(&f, &t, 0)
                .text()
                .starts_with("not judged, tried again: delivered 95.49% < 97%, h2's agent")
        );
        // A step that held with an agent short of CPU held: what it offered
        // came back.
        let held = StepFigures {
            short_of_cpu: f.short_of_cpu.clone(),
            ..figures(99.0, 800.0)
        };
        assert_eq!(verdict(&held, &t, 0), Verdict::Held);
        // The network lost too much by itself: judged at once, the agents
        // short of CPU named beside it.
        let lossy = StepFigures {
            wire_loss_pct: Some(3.5),
            ..f.clone()
        };
        assert!(matches!(verdict(&lossy, &t, 0), Verdict::Failed(w) if w.len() == 2));
        let some_loss = StepFigures {
            wire_loss_pct: Some(2.5),
            ..f.clone()
        };
        assert!(matches!(verdict(&some_loss, &t, 0), Verdict::Again(_)));
        // Short with every agent at its rate and on time: judged at once.
        assert!(matches!(
            verdict(&figures(95.49, 800.0), &t, 0),
            Verdict::Failed(_)
        ));

        // The table marks the try again; the answer names the hosts whose
        // agents were short of CPU in every try of the step that fell short.
        let result = |scale, kind, figures: &StepFigures, tries| {
            step_result(&t, scale, kind, figures, tries)
        };
        let ok = figures(99.9, 800.0);
        let steps = vec![
            result(1.0, Kind::Climb, &ok, 0),
            result(2.0, Kind::Climb, &f, 0),
            result(2.0, Kind::Again, &f, 1),
            result(2.0, Kind::Again, &f, 2),
        ];
        assert!(
            table_row(3, &steps[2]).contains("  x2 r  "),
            "{}",
            table_row(3, &steps[2])
        );
        let answer = conclusion(&steps);
        assert!(
            answer.starts_with("highest rate that held: 1000 pps")
                && answer.contains("the limit lies between x1 and x2 (2.0 kpps offered fell short: delivered 95.49% < 97%, h2's agent was short of CPU (")
                && answer.contains("at x2 the agents of h2 were short of CPU in each of 3 tries: the limit found may be those hosts', not the network's"),
            "{answer}"
        );
        let doc = document(&plan(1.0, 2.0, 1.0, false), &t, 4.0, 1.0, &steps);
        let v: serde_json::Value = serde_json::from_str(&to_json(&doc)).unwrap();
        assert_eq!(v["steps"][1]["verdict"], "tried_again");
        assert_eq!(v["steps"][2]["kind"], "again");
        assert_eq!(v["steps"][3]["verdict"], "failed");
        assert_eq!(v["steps"][3]["short_of_cpu"][0]["host"], "h2");
        assert_eq!(v["steps"][3]["short_of_cpu"][0]["behind_ms"], 14.2);
        assert_eq!(v["lowest_failed_scale"], 2.0);
        // A try again is not the step that fell short: one that holds after
        // it leaves no bracket.
        let recovered = vec![
            result(1.0, Kind::Climb, &ok, 0),
            result(2.0, Kind::Climb, &f, 0),
            result(2.0, Kind::Again, &ok, 1),
        ];
        assert!(conclusion(&recovered).contains("every step held: the limit is above x2"));
        // Judged at once on the network's loss: the agents are named in its
        // reasons, with no word of tries.
        let lossy_steps = vec![
            result(1.0, Kind::Climb, &ok, 0),
            result(2.0, Kind::Climb, &lossy, 0),
        ];
        let answer = conclusion(&lossy_steps);
        assert!(
            answer.contains("fell short: delivered 95.49% < 97%, h2's agent was short of CPU (")
                && !answer.contains("tries"),
            "{answer}"
        );
    }

    #[test]
    fn the_conclusion_names_the_highest_rate_that_held_and_the_bracket() {
        let step = |scale, delivered| {
            let f = StepFigures {
                offered_pps: Some(6000.0 * scale),
                ..figures(delivered, 100.0)
            };
            let t = Thresholds {
                min_delivered_pct: 99.0,
                max_p99_us: None,
            };
            StepResult {
                scale,
                kind: Kind::Climb,
                after: 0,
                until: 4,
                verdict: verdict(&f, &t, 0),
                figures: f,
            }
        };
        let steps = vec![step(1.0, 100.0), step(1.5, 99.9), step(2.0, 91.0)];
        assert_eq!(
            conclusion(&steps),
            "highest rate that held: 9000 pps (9.0 kpps offered, x1.5 the matrix's rates)\n\
             the limit lies between x1.5 and x2 (12.0 kpps offered fell short: delivered 91.00% < 99%)\n\
             what set it: nothing the hosts counted names a place (no loss beyond the run's noise, no host held back): the tail or the senders' own pace\n"
        );
        assert!(conclusion(&steps[..2]).contains("every step held: the limit is above x1.5"));
        assert!(
            conclusion(&steps[2..])
                .starts_with("no rate held: the first step (x2, 12.0 kpps offered)")
        );
        let doc = document(
            &plan(1.0, 2.0, 0.5, false),
            &Thresholds {
                min_delivered_pct: 99.0,
                max_p99_us: None,
            },
            4.0,
            1.0,
            &steps,
        );
        let json = to_json(&doc);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["schema"], "mx.ramp/1");
        assert_eq!(v["steps"][2]["verdict"], "failed");
        assert_eq!(v["steps"][2]["why"][0], "delivered 91.00% < 99%");
        assert_eq!(v["steps"][0]["kind"], "climb");
        assert_eq!(v["steps"][0]["offered_pps"], 6000.0);
        // Not measured is null, never 0.
        assert!(v["steps"][0]["rtt_p50_us"].is_null());
        assert_eq!(v["highest_held"]["scale"], 1.5);
        assert_eq!(v["lowest_failed_scale"], 2.0);
        assert!(v["ramp"]["max_p99_us"].is_null());
    }
}
