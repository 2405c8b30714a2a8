//! Judging one step of a ramp: its figures from its own whole intervals
//! ([`step_figures`], the summary's span and aggregate code over the
//! intervals entirely at the step's scale), whether it held by the
//! [`Thresholds`] ([`verdict`]), and, when an agent was short of CPU in it,
//! whether it is tried again rather than judged.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::plan::Kind;
use crate::analysis::aggregate::ReportSet;
use crate::analysis::diagnosis::{self, Finding};
use crate::analysis::figures::{self, Context, Figures, percent};
use crate::analysis::span::Step;
use mx_base::error::Result;
use mx_base::units::{self, micros};

/// `--min-delivered` when not given.
pub const DEFAULT_MIN_DELIVERED: f64 = 99.9;
/// Tries a scale gets at most while an agent is short of CPU in them: a
/// loaded box or a stolen vCPU starves an agent for a few seconds, and a
/// step judged then would put the host's hiccup where the limit goes.
pub const MAX_TRIES: usize = 3;
/// How far behind its send schedule an agent falls and loses no sends (from
/// ~400 pps a flow up; more below, where the bucket holds two packets): an
/// agent further behind than this, that sent short of its rate, lost those
/// sends to its CPU.
const BUCKET_FORGIVES_MS: f64 = mx_report::FORGIVEN_BEHIND_MS;
/// A host that sent under this share of its target was short of its rate
/// (over whole intervals the pacing is exact to 0.02%).
const SHORT_OF_RATE: f64 = 0.995;

/// When a step holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// The least share of the requests offered (the flows' targets) whose
    /// replies came back, in percent.
    pub min_delivered_pct: f64,
    /// The most the fleet's p99 RTT may be, in microseconds; `None`: the
    /// tail is not judged.
    pub max_p99_us: Option<f64>,
}

impl Thresholds {
    /// `--min-delivered` and `--max-p99` as given, checked.
    pub fn parse(
        min_delivered: Option<&str>,
        max_p99: Option<&str>,
    ) -> std::result::Result<Thresholds, String> {
        let min_delivered_pct = match min_delivered {
            None => DEFAULT_MIN_DELIVERED,
            Some(text) => match text.trim().trim_end_matches('%').parse::<f64>() {
                Ok(v) if v > 0.0 && v <= 100.0 => v,
                _ => {
                    return Err(format!(
                        "--min-delivered '{text}': want a percentage above 0 and at most 100 (of the requests offered whose replies came back)"
                    ));
                }
            },
        };
        let max_p99_us = match max_p99 {
            None => None,
            Some(text) => Some(parse_micros(text).ok_or_else(|| {
                format!(
                    "--max-p99 '{text}': want a positive duration with its unit: 800us, 5ms, 0.2s"
                )
            })?),
        };
        Ok(Thresholds {
            min_delivered_pct,
            max_p99_us,
        })
    }

    /// `delivered >= 99.9%` and `p99 <= 5ms`, for the header.
    pub fn text(&self) -> String {
        let mut text = format!("delivered >= {}%", units::g(self.min_delivered_pct));
        if let Some(p99) = self.max_p99_us {
            let _ = write!(text, " and p99 <= {}", micros(Some(p99)));
        }
        text
    }
}

/// A duration with its unit (`us`, `ms`, `s`) in microseconds; `None` when
/// it is not one, or not positive.
pub fn parse_micros(text: &str) -> Option<f64> {
    let t = text.trim();
    let (number, unit) = [("us", 1.0), ("µs", 1.0), ("ms", 1e3), ("s", 1e6)]
        .into_iter()
        .find_map(|(suffix, unit)| Some((t.strip_suffix(suffix)?, unit)))?;
    let v = number.trim().parse::<f64>().ok()?;
    (v.is_finite() && v > 0.0).then_some(v * unit)
}

/// One step's figures, from its whole intervals only.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepFigures {
    /// Whole intervals entirely at the step's scale, every host sending.
    pub intervals: usize,
    /// The flows' targets (the matrix's rates times the scale), as the
    /// agents reported them.
    pub offered_pps: Option<f64>,
    pub sent_pps: Option<f64>,
    pub back_pps: Option<f64>,
    /// Replies back over requests offered, percent: short when the network
    /// lost them or the senders could not send them.
    pub delivered_pct: Option<f64>,
    pub loss_pct: Option<f64>,
    pub forward_loss_pct: Option<f64>,
    pub return_loss_pct: Option<f64>,
    /// The round trip's loss less what the diagnosis puts inside the hosts
    /// by their own counts (their sockets' drops, their agents' late reads,
    /// their receive and transmit paths: [`diagnosis::lost_in_hosts`]),
    /// percent of the requests sent: the network's part.
    pub wire_loss_pct: Option<f64>,
    pub rtt_p50_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    /// True when the percentiles are exact (the hosts' histograms), false
    /// when they are the worst flow's worst interval.
    pub rtt_exact: bool,
    /// The hosts whose agents were short of CPU in the step's intervals.
    pub short_of_cpu: Vec<ShortOfCpu>,
    /// What the summary's diagnosis finds in the step's intervals: where
    /// its loss was, which host fell short of its rate and why, its tail.
    #[serde(serialize_with = "crate::render::findings::serialize_docs")]
    pub findings: Vec<Finding>,
}

/// A host whose agent did not get the CPU it needed in a step: its cgroup
/// throttled it, it fell far behind its send schedule, or it fell behind by
/// more than its bucket forgives and sent short of its rate. Its shortfall,
/// and the replies it read or wrote late, are the host's, not the network's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShortOfCpu {
    pub host: String,
    /// What it sent, percent of its target (`None`: it had none).
    pub sent_pct: Option<f64>,
    /// The longest it was behind its send schedule (ms), and the time its
    /// cgroup throttled it (ms), over the step's intervals.
    pub behind_ms: f64,
    pub throttled_ms: f64,
}

impl ShortOfCpu {
    /// The hosts of `set` (over its span) whose agents were short of CPU.
    fn of(set: &ReportSet) -> Vec<ShortOfCpu> {
        set.hosts
            .iter()
            .filter_map(|(&id, h)| {
                let behind_ms = h.behind_ms.unwrap_or(0.0);
                let throttled_ms = h.throttled_ms.unwrap_or(0.0);
                let target = h.target.mean();
                let sent_pct = (target > 0.0).then(|| percent(h.pps.mean(), target));
                let host = ShortOfCpu {
                    host: set.name(id).to_string(),
                    sent_pct,
                    behind_ms,
                    throttled_ms,
                };
                host.starved().then_some(host)
            })
            .collect()
    }

    /// Its cgroup throttled it, it fell far behind its schedule, or it fell
    /// behind by more than its bucket forgives and sent short of its rate.
    fn starved(&self) -> bool {
        let short = self.sent_pct.is_some_and(|p| p < SHORT_OF_RATE * 100.0);
        self.throttled_ms > 0.0
            || self.behind_ms >= diagnosis::place::STARVED_BEHIND_MS
            || (short && self.behind_ms > BUCKET_FORGIVES_MS)
    }

    /// `h2's agent was short of CPU (sent 96.1% of its rate, up to 14 ms
    /// behind its send schedule)`.
    fn text(&self) -> String {
        let mut what = Vec::new();
        if let Some(p) = self.sent_pct {
            what.push(format!("sent {p:.1}% of its rate"));
        }
        if self.behind_ms > 0.0 {
            what.push(format!(
                "up to {:.0} ms behind its send schedule",
                self.behind_ms
            ));
        }
        if self.throttled_ms > 0.0 {
            what.push(format!(
                "throttled {:.0} ms by its cgroup's CPU quota",
                self.throttled_ms
            ));
        }
        format!(
            "{}'s agent was short of CPU ({})",
            self.host,
            what.join(", ")
        )
    }
}

/// The figures of `step` from the reports in `dir`: the summary's span and
/// aggregate over the step's intervals
/// ([`crate::analysis::span::step_span`]), its fleet figures. No
/// interval at all: every figure `None`.
pub fn step_figures(dir: &Path, step: &Step) -> Result<StepFigures> {
    let set = ReportSet::read_in(dir, 0.0, false, Some(step), &Default::default())?;
    if set.span.keep.is_empty() || set.tx.is_empty() {
        return Ok(StepFigures::default());
    }
    let ctx = Context::new(&set, None);
    let fleet = figures::fleet(&set, &ctx);
    let offered = (fleet.target > 0.0).then_some(fleet.target);
    let (p50, p99, exact) = match (fleet.exact, fleet.worst_flow) {
        (Some((p50, p99, _)), _) => (Some(p50), Some(p99), true),
        (None, Some((_, _, p50, p99))) => (p50, Some(p99), false),
        (None, None) => (None, None, false),
    };
    let sent = fleet.packets.sent > 0.0;
    let figs = Figures::compute(&set, &ctx);
    let mut findings = diagnosis::diagnose(&set, &ctx, &figs, None);
    findings.retain(|f| !f.blames.is_empty());
    let counted = diagnosis::lost_in_hosts(&findings);
    let wire_loss = fleet.round_trip_loss() - percent(counted, fleet.packets.sent);
    Ok(StepFigures {
        intervals: set.span.keep.len(),
        offered_pps: offered,
        sent_pps: Some(fleet.requests),
        back_pps: Some(fleet.replies),
        delivered_pct: offered.map(|o| percent(fleet.replies, o).min(100.0)),
        loss_pct: sent.then(|| fleet.round_trip_loss()),
        forward_loss_pct: fleet.forward_loss().filter(|_| sent),
        return_loss_pct: fleet.return_loss().filter(|_| sent),
        wire_loss_pct: sent.then_some(wire_loss.max(0.0)),
        rtt_p50_us: p50,
        rtt_p99_us: p99,
        rtt_exact: exact,
        short_of_cpu: ShortOfCpu::of(&set),
        findings,
    })
}

/// Whether a step held.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Held,
    /// It fell short: why, one phrase per threshold crossed, then one per
    /// host whose agent was short of CPU.
    Failed(Vec<String>),
    /// It fell short while an agent was short of CPU, and the scale is
    /// tried again (at most [`MAX_TRIES`] times): not judged. Why, as
    /// `Failed`'s.
    Again(Vec<String>),
    /// No whole interval ran entirely at its rate: nothing to judge.
    NotMeasured,
}

impl Verdict {
    pub fn held(&self) -> bool {
        *self == Verdict::Held
    }

    /// `held`, `failed`, `not_measured` (the JSON's words).
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Held => "held",
            Verdict::Failed(_) => "failed",
            Verdict::Again(_) => "tried_again",
            Verdict::NotMeasured => "not_measured",
        }
    }

    /// The table's cell.
    pub fn text(&self) -> String {
        match self {
            Verdict::Held => "held".to_string(),
            Verdict::Failed(why) => format!("FAILED: {}", why.join(", ")),
            Verdict::Again(why) => format!("not judged, tried again: {}", why.join(", ")),
            Verdict::NotMeasured => "not measured: no whole interval at this rate".to_string(),
        }
    }
}

/// Whether `f` held by `t`: enough of what it offered came back, and (when
/// judged) its p99 stayed low enough. A step that fell short while an agent
/// was short of CPU is tried again, unless the network's loss alone fails
/// it, or its scale has had `tries` of [`MAX_TRIES`] already (the tries just
/// before it at the same scale).
pub fn verdict(f: &StepFigures, t: &Thresholds, tries: usize) -> Verdict {
    if f.intervals == 0 {
        return Verdict::NotMeasured;
    }
    let mut why = Vec::new();
    match f.delivered_pct {
        Some(d) if d >= t.min_delivered_pct => {}
        Some(d) => why.push(format!(
            "delivered {d:.2}% < {}%",
            units::g(t.min_delivered_pct)
        )),
        None => why.push("nothing offered".to_string()),
    }
    if let Some(max) = t.max_p99_us {
        match f.rtt_p99_us {
            Some(p99) if p99 <= max => {}
            Some(p99) => why.push(format!("p99 {} > {}", micros(Some(p99)), micros(Some(max)))),
            None => why.push("no RTT measured".to_string()),
        }
    }
    if why.is_empty() {
        return Verdict::Held;
    }
    let senders_short = senders_shortfall(f, t);
    why.extend(f.short_of_cpu.iter().map(ShortOfCpu::text));
    why.extend(senders_short.clone());
    why.extend(places(f, t));
    let wire_fails = f
        .wire_loss_pct
        .is_some_and(|w| 100.0 - w < t.min_delivered_pct);
    let hosts_short = !f.short_of_cpu.is_empty() || senders_short.is_some();
    if hosts_short && !wire_fails && tries + 1 < MAX_TRIES {
        Verdict::Again(why)
    } else {
        Verdict::Failed(why)
    }
}

/// When what failed the step is only that the senders sent short of what
/// they offered (its tail within its bound, its round trip's loss alone
/// within the delivery bar, and nothing but a CPU named as holding a host
/// back): `the senders sent 99.79% of the rate offered, and 0.00% of it was
/// lost`. The shortfall is then the hosts' (a moment's scheduling, an agent
/// a few packets behind), not the network's. A link that pushes back on its
/// senders' sockets (a capped egress) is named by the diagnosis, and judged.
fn senders_shortfall(f: &StepFigures, t: &Thresholds) -> Option<String> {
    use diagnosis::{Kind as Of, Place};
    let held_back = f.findings.iter().any(|finding| {
        finding.kind == Of::Rate && finding.blames.iter().any(|b| b.place != Place::Cpu)
    });
    if held_back {
        return None;
    }
    let tail_ok = match (t.max_p99_us, f.rtt_p99_us) {
        (Some(max), Some(p99)) => p99 <= max,
        (Some(_), None) => false,
        (None, _) => true,
    };
    let (offered, sent, loss) = (f.offered_pps?, f.sent_pps?, f.loss_pct?);
    let sent_pct = percent(sent, offered);
    (tail_ok && sent_pct < t.min_delivered_pct && 100.0 - loss >= t.min_delivered_pct).then(|| {
        format!(
            "the senders sent {sent_pct:.2}% of the rate offered, and {loss:.2}% of it was lost"
        )
    })
}

/// Where the step's diagnosis puts what failed it: its losses and hosts
/// gone, a host held back by anything but its CPU (the starved ones are
/// named already), and, when the tail failed it, the tail's place.
fn places(f: &StepFigures, t: &Thresholds) -> Vec<String> {
    use diagnosis::{Kind as Of, Place};
    let tail_failed = matches!((t.max_p99_us, f.rtt_p99_us), (Some(max), Some(p99)) if p99 > max);
    f.findings
        .iter()
        .filter_map(|finding| {
            let brief = crate::render::findings::brief(finding)?;
            match finding.kind {
                Of::Loss => Some(format!("lost: {brief}")),
                Of::Agent => Some(brief),
                Of::Rate if finding.blames.iter().any(|b| b.place != Place::Cpu) => {
                    Some(format!("held back: {brief}"))
                }
                Of::Latency if tail_failed => Some(format!("the tail: {brief}")),
                _ => None,
            }
        })
        .collect()
}

/// What set the limit, by the diagnosis of the lowest step that fell short:
/// its largest loss, else the host held back, else the tail.
pub(super) fn limit_set_by(failed: &StepResult) -> Option<String> {
    use diagnosis::Kind as Of;
    let findings = &failed.figures.findings;
    [Of::Loss, Of::Agent, Of::Rate, Of::Latency]
        .iter()
        .find_map(|kind| crate::render::findings::brief(findings.iter().find(|f| f.kind == *kind)?))
}

/// One step as tried.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    pub scale: f64,
    pub kind: Kind,
    /// Its time: the labels of the intervals after `after` up to `until`.
    pub after: i64,
    pub until: i64,
    pub figures: StepFigures,
    pub verdict: Verdict,
}

/// The step with the highest rate that held, if any.
pub fn highest_held(steps: &[StepResult]) -> Option<&StepResult> {
    steps
        .iter()
        .filter(|s| s.verdict.held())
        .max_by(|a, b| a.scale.total_cmp(&b.scale))
}

/// How many times `scale` was tried and left unjudged in `steps` (an agent
/// short of CPU): a scale is tried again only right after itself, and a
/// ramp comes back to no scale, so these are the tries before its last.
pub fn tried_again(steps: &[StepResult], scale: f64) -> usize {
    steps
        .iter()
        .filter(|s| s.scale == scale && matches!(s.verdict, Verdict::Again(_)))
        .count()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{figures, starved};
    use super::*;

    #[test]
    fn a_step_holds_while_delivery_and_the_tail_stay_within_their_thresholds() {
        let t = Thresholds {
            min_delivered_pct: 99.0,
            max_p99_us: Some(5000.0),
        };
        assert_eq!(verdict(&figures(99.5, 800.0), &t, 0), Verdict::Held);
        // At the threshold exactly: held.
        assert_eq!(verdict(&figures(99.0, 5000.0), &t, 0), Verdict::Held);
        assert_eq!(
            verdict(&figures(97.25, 800.0), &t, 0),
            Verdict::Failed(vec!["delivered 97.25% < 99%".to_string()])
        );
        assert_eq!(
            verdict(&figures(98.0, 12_000.0), &t, 0),
            Verdict::Failed(vec![
                "delivered 98.00% < 99%".to_string(),
                "p99 12.0ms > 5.0ms".to_string()
            ])
        );
        // The tail is judged only when asked.
        let lax = Thresholds {
            max_p99_us: None,
            ..t
        };
        assert!(verdict(&figures(99.5, 1e9), &lax, 0).held());
        // No whole interval at the rate: nothing to judge, never a pass.
        let none = StepFigures::default();
        assert_eq!(verdict(&none, &t, 0), Verdict::NotMeasured);
        assert!(!verdict(&none, &t, 0).held());
    }

    #[test]
    fn a_step_short_by_its_senders_alone_is_tried_again_then_judged() {
        let t = Thresholds {
            min_delivered_pct: 99.9,
            max_p99_us: None,
        };
        // Sent 99.79% of the offer, none of it lost.
        let short = StepFigures {
            sent_pps: Some(997.9),
            loss_pct: Some(0.0),
            wire_loss_pct: Some(0.0),
            ..figures(99.79, 800.0)
        };
        let why = vec![
            "delivered 99.79% < 99.9%".to_string(),
            "the senders sent 99.79% of the rate offered, and 0.00% of it was lost".to_string(),
        ];
        for tries in 0..MAX_TRIES - 1 {
            assert_eq!(verdict(&short, &t, tries), Verdict::Again(why.clone()));
        }
        assert_eq!(verdict(&short, &t, MAX_TRIES - 1), Verdict::Failed(why));
        // Sent all it offered and lost 0.21%: the network's, judged at once.
        let lost = StepFigures {
            loss_pct: Some(0.21),
            wire_loss_pct: Some(0.21),
            ..figures(99.79, 800.0)
        };
        assert_eq!(
            verdict(&lost, &t, 0),
            Verdict::Failed(vec!["delivered 99.79% < 99.9%".to_string()])
        );
        // Sent short, and lost more than the bar by itself: judged at once.
        let both = StepFigures {
            loss_pct: Some(0.15),
            wire_loss_pct: Some(0.15),
            ..short.clone()
        };
        assert!(matches!(verdict(&both, &t, 0), Verdict::Failed(w) if w.len() == 1));
        // Sent short with its tail over its bound: judged at once.
        let slow = Thresholds {
            max_p99_us: Some(500.0),
            ..t
        };
        assert!(matches!(verdict(&short, &slow, 0), Verdict::Failed(_)));
        // Sent short because a place other than a CPU held a sender back
        // (its transmit path: a capped egress): judged at once.
        use diagnosis::{Blame, Direction, Kind as Of, Place, Says};
        let capped = StepFigures {
            findings: vec![
                Finding::new(
                    Of::Rate,
                    Says::MoreWorkers {
                        host: "h2".to_string(),
                        workers: 1,
                        peers: 2,
                    },
                )
                .blame(Blame::toward("h2", Direction::OutOf, Place::TransmitPath)),
            ],
            ..short.clone()
        };
        assert!(matches!(verdict(&capped, &t, 0), Verdict::Failed(_)));
    }

    #[test]
    fn an_agent_is_short_of_cpu_when_throttled_far_behind_or_behind_past_its_bucket_and_short() {
        // Throttled by its cgroup, whatever else.
        assert!(starved("h", Some(100.0), 0.0, 3.0).starved());
        // Far behind its schedule, even at its rate.
        assert!(starved("h", Some(100.0), 20.0, 0.0).starved());
        // Behind past what its bucket forgives, and short of its rate.
        assert!(starved("h", Some(96.0), 6.5, 0.0).starved());
        // Short of its rate, its bucket forgiving the lateness: not its CPU
        // (a link pushing back on its sockets does that).
        assert!(!starved("h", Some(96.0), 6.0, 0.0).starved());
        // Behind past its bucket at its rate: it caught up.
        assert!(!starved("h", Some(99.6), 15.0, 0.0).starved());
        assert!(!starved("h", None, 15.0, 0.0).starved());
        assert_eq!(
            starved("h2", Some(96.14), 14.2, 0.0).text(),
            "h2's agent was short of CPU (sent 96.1% of its rate, up to 14 ms behind its send schedule)"
        );
        assert_eq!(
            starved("h3", None, 0.0, 420.0).text(),
            "h3's agent was short of CPU (throttled 420 ms by its cgroup's CPU quota)"
        );
    }
}
