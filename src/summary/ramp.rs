//! Finding the limit (`mx run --ramp`), the pure part: which rate scales a
//! ramp tries and in what order ([`Plan`]), each step's figures from its own
//! whole intervals ([`step_figures`], the summary's span and aggregate code
//! over the intervals entirely at the step's scale), whether it held
//! ([`verdict`]), and the table and JSON document of the steps. The fleet is
//! driven by `commands::ramp`.
//!
//! A scale multiplies every flow's matrix rate: x1 is the matrix as
//! written, x2 twice every cell. Scales are kept to the report's 4 decimals,
//! so that the controller and the rows name the same step.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::analysis::aggregate::ReportSet;
use super::analysis::diagnosis::{self, Finding};
use super::analysis::figures::{self, Context, Figures, percent};
use super::analysis::span::Step;
use super::document::ro;
use crate::error::Result;
use crate::units::{self, micros, pps};

/// The `schema` of the ramp's JSON document.
pub const SCHEMA: &str = "mx.ramp/1";

/// Bisection stops once the rate that held and the one that did not are
/// within this fraction of the latter ...
pub const BISECT_WITHIN: f64 = 0.02;
/// ... or after this many bisection steps.
pub const MAX_BISECT_STEPS: usize = 8;
/// Most steps a climb may take: past this the step is a typo.
pub const MAX_STEPS: usize = 1000;
/// `--min-delivered` when not given.
pub const DEFAULT_MIN_DELIVERED: f64 = 99.9;
/// Steps a climb takes when `--ramp-step` is not given (from FROM to TO).
pub const DEFAULT_STEPS: f64 = 10.0;
/// Tries a scale gets at most while an agent is short of CPU in them: a
/// loaded box or a stolen vCPU starves an agent for a few seconds, and a
/// step judged then would put the host's hiccup where the limit goes.
pub const MAX_TRIES: usize = 3;
/// How far behind its send schedule an agent falls and loses no sends (from
/// ~400 pps a flow up; more below, where the bucket holds two packets): an
/// agent further behind than this, that sent short of its rate, lost those
/// sends to its CPU.
const BUCKET_FORGIVES_MS: f64 = crate::report::FORGIVEN_BEHIND_MS;
/// A host that sent under this share of its target was short of its rate
/// (over whole intervals the pacing is exact to 0.02%).
const SHORT_OF_RATE: f64 = 0.995;

/// A scale kept to the report's 4 decimals.
pub fn round4(scale: f64) -> f64 {
    (scale * 1e4).round() / 1e4
}

/// Which scales a ramp tries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub from: f64,
    pub to: f64,
    pub step: f64,
    /// After the first step that fell short, bisect between it and the last
    /// that held.
    pub bisect: bool,
}

/// How a step came to be tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Climb,
    Bisect,
    /// The step before again, at the same scale: an agent was short of CPU
    /// in it.
    Again,
}

impl Plan {
    /// `--ramp FROM:TO` and `--ramp-step` (as given; `None`: a tenth of the
    /// way), checked: one line naming the value at fault.
    pub fn parse(
        range: &str,
        step: Option<&str>,
        bisect: bool,
    ) -> std::result::Result<Plan, String> {
        let factor = |text: &str| text.trim().trim_start_matches(['x', 'X']).parse::<f64>();
        let bad_range = |why: &str| {
            format!(
                "--ramp '{range}': {why} (FROM:TO, factors of every flow's matrix rate, e.g. 0.5:3)"
            )
        };
        let (from, to) = range
            .split_once(':')
            .ok_or_else(|| bad_range("want two factors with a ':' between"))?;
        let (Ok(from), Ok(to)) = (factor(from), factor(to)) else {
            return Err(bad_range("FROM and TO must be numbers"));
        };
        if !(from.is_finite() && to.is_finite()) || round4(from) <= 0.0 {
            return Err(bad_range("FROM and TO must be positive (at least 0.0001)"));
        }
        let (from, to) = (round4(from), round4(to));
        if to <= from {
            return Err(bad_range("TO must be above FROM"));
        }
        let step = match step {
            None => round4((to - from) / DEFAULT_STEPS).max(1e-4),
            Some(text) => match factor(text) {
                Ok(s) if s.is_finite() && round4(s) > 0.0 => round4(s),
                _ => {
                    return Err(format!(
                        "--ramp-step '{text}': want a positive factor (at least 0.0001), added to the scale at each step"
                    ));
                }
            },
        };
        let steps = ((to - from) / step - 1e-9).ceil() + 1.0;
        if steps > MAX_STEPS as f64 {
            return Err(format!(
                "--ramp-step '{}' makes {steps} steps from x{} to x{}: at most {MAX_STEPS} (or --bisect with a coarser step)",
                scale_text(step),
                units::g(from),
                units::g(to)
            ));
        }
        Ok(Plan {
            from,
            to,
            step,
            bisect,
        })
    }

    /// The climb: FROM, FROM + STEP, ... and TO last (even where the steps
    /// do not land on it).
    pub fn climb(&self) -> Vec<f64> {
        let mut scales = Vec::new();
        let mut i = 0.0;
        loop {
            let scale = round4(self.from + i * self.step);
            if scale >= self.to - 0.5e-4 {
                scales.push(self.to);
                return scales;
            }
            scales.push(scale);
            i += 1.0;
        }
    }

    /// The next scale to try after `tried` (each scale and whether it held,
    /// in the order tried), and how it came; `None` when the ramp is done:
    /// the climb's end, or its first step that fell short (bisected first,
    /// with `bisect`, until the rates that held and did not are within
    /// [`BISECT_WITHIN`] of each other).
    pub fn next(&self, tried: &[(f64, bool)]) -> Option<(f64, Kind)> {
        let climb = self.climb();
        let Some(bad) = tried
            .iter()
            .filter(|(_, held)| !held)
            .map(|&(s, _)| s)
            .reduce(f64::min)
        else {
            // Everything held so far: the climb's next step.
            return climb.get(tried.len()).map(|&s| (s, Kind::Climb));
        };
        if !self.bisect {
            return None;
        }
        let good = tried
            .iter()
            .filter(|&&(s, held)| held && s < bad)
            .map(|&(s, _)| s)
            .reduce(f64::max)?;
        // The climb ends at its first step that fell short; bisection follows.
        let climbed = tried
            .iter()
            .position(|(_, held)| !held)
            .map_or(0, |i| i + 1);
        let bisected = tried.len() - climbed;
        if bisected >= MAX_BISECT_STEPS || bad - good <= BISECT_WITHIN * bad {
            return None;
        }
        let mid = round4((good + bad) / 2.0);
        (mid > good && mid < bad).then_some((mid, Kind::Bisect))
    }
}

/// `1.5`, `0.0625`: a scale as the table writes it.
pub fn scale_text(scale: f64) -> String {
    units::g(round4(scale))
}

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
/// aggregate over the step's intervals ([`super::analysis::span::step_span`]), its
/// fleet figures. No interval at all: every figure `None`.
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
    why.extend(f.short_of_cpu.iter().map(ShortOfCpu::text));
    why.extend(places(f, t));
    let wire_fails = f
        .wire_loss_pct
        .is_some_and(|w| 100.0 - w < t.min_delivered_pct);
    if !f.short_of_cpu.is_empty() && !wire_fails && tries + 1 < MAX_TRIES {
        Verdict::Again(why)
    } else {
        Verdict::Failed(why)
    }
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
            let brief = finding.brief()?;
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
fn limit_set_by(failed: &StepResult) -> Option<String> {
    use diagnosis::Kind as Of;
    let findings = &failed.figures.findings;
    [Of::Loss, Of::Agent, Of::Rate, Of::Latency]
        .iter()
        .find_map(|kind| findings.iter().find(|f| f.kind == *kind)?.brief())
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

/// The step with the highest rate that held, if any.
pub fn highest_held(steps: &[StepResult]) -> Option<&StepResult> {
    steps
        .iter()
        .filter(|s| s.verdict.held())
        .max_by(|a, b| a.scale.total_cmp(&b.scale))
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

/// How many times `scale` was tried and left unjudged in `steps` (an agent
/// short of CPU): a scale is tried again only right after itself, and a
/// ramp comes back to no scale, so these are the tries before its last.
pub fn tried_again(steps: &[StepResult], scale: f64) -> usize {
    steps
        .iter()
        .filter(|s| s.scale == scale && matches!(s.verdict, Verdict::Again(_)))
        .count()
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
    use super::*;

    fn plan(from: f64, to: f64, step: f64, bisect: bool) -> Plan {
        Plan {
            from,
            to,
            step,
            bisect,
        }
    }

    /// Runs `p` against a fleet whose limit is `limit`: every scale at or
    /// under it holds. Returns the scales tried, in order.
    fn ramp_against(p: &Plan, limit: f64) -> Vec<(f64, Kind)> {
        let mut tried = Vec::new();
        let mut steps = Vec::new();
        while let Some((scale, kind)) = p.next(&tried) {
            tried.push((scale, scale <= limit));
            steps.push((scale, kind));
            assert!(steps.len() < 100, "runaway: {steps:?}");
        }
        steps
    }

    #[test]
    fn the_climb_goes_from_from_to_to_in_steps_and_ends_on_to() {
        assert_eq!(
            plan(1.0, 2.0, 0.25, false).climb(),
            vec![1.0, 1.25, 1.5, 1.75, 2.0]
        );
        // A step that does not land on TO: TO is the last.
        assert_eq!(plan(0.5, 1.2, 0.3, false).climb(), vec![0.5, 0.8, 1.1, 1.2]);
        // Float sums do not leave a sliver step before TO.
        assert_eq!(plan(0.1, 0.4, 0.1, false).climb(), vec![0.1, 0.2, 0.3, 0.4]);
    }

    #[test]
    fn a_climb_stops_at_its_first_step_that_fell_short() {
        let p = plan(1.0, 3.0, 0.5, false);
        let steps: Vec<f64> = ramp_against(&p, 1.8).into_iter().map(|s| s.0).collect();
        assert_eq!(steps, vec![1.0, 1.5, 2.0]);
        // Nothing falls short: the whole climb.
        assert_eq!(ramp_against(&p, 10.0).len(), 5);
        // The first step falls short: nothing more, bisect or not.
        assert_eq!(ramp_against(&p, 0.5).len(), 1);
        assert_eq!(ramp_against(&plan(1.0, 3.0, 0.5, true), 0.5).len(), 1);
    }

    #[test]
    fn bisect_halves_the_gap_to_within_two_percent() {
        let p = plan(1.0, 4.0, 0.5, true);
        let steps = ramp_against(&p, 2.358);
        type Steps<'a> = Vec<&'a (f64, Kind)>;
        let (climb, bisect): (Steps, Steps) = steps.iter().partition(|s| s.1 == Kind::Climb);
        assert_eq!(
            climb.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![1.0, 1.5, 2.0, 2.5]
        );
        assert_eq!(
            bisect.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![2.25, 2.375, 2.3125, 2.3438]
        );
        // What held last is within 2% of the limit.
        let tried: Vec<(f64, bool)> = steps.iter().map(|&(s, _)| (s, s <= 2.358)).collect();
        let good = tried
            .iter()
            .filter(|t| t.1)
            .map(|t| t.0)
            .reduce(f64::max)
            .unwrap();
        assert!((2.358 - good) / 2.358 <= BISECT_WITHIN, "{good}");
        // A gap already within 2% is not bisected.
        let fine = plan(1.0, 1.02, 0.01, true);
        assert_eq!(ramp_against(&fine, 1.005).len(), 2);
        // Bisection is bounded however fine the rounding lets it go.
        let long = plan(0.0001, 1000.0, 999.9999, true);
        assert!(ramp_against(&long, 0.00015).len() <= 2 + MAX_BISECT_STEPS);
    }

    #[test]
    fn flag_values_are_checked_naming_the_value() {
        let p = Plan::parse("0.5:2", None, true).unwrap();
        assert_eq!(p, plan(0.5, 2.0, 0.15, true));
        assert_eq!(
            Plan::parse("x1:x3", Some("0.5"), false)
                .unwrap()
                .climb()
                .len(),
            5
        );
        for (range, step, want) in [
            ("2", None, "--ramp '2': want two factors"),
            ("a:2", None, "--ramp 'a:2': FROM and TO must be numbers"),
            ("0:2", None, "--ramp '0:2': FROM and TO must be positive"),
            ("-1:2", None, "--ramp '-1:2': FROM and TO must be positive"),
            ("3:1", None, "--ramp '3:1': TO must be above FROM"),
            (
                "1:inf",
                None,
                "--ramp '1:inf': FROM and TO must be positive",
            ),
            ("1:2", Some("0"), "--ramp-step '0': want a positive factor"),
            (
                "1:2",
                Some("-0.1"),
                "--ramp-step '-0.1': want a positive factor",
            ),
            (
                "1:2",
                Some("fast"),
                "--ramp-step 'fast': want a positive factor",
            ),
            (
                "1:2",
                Some("0.0001"),
                "--ramp-step '0.0001' makes 10001 steps",
            ),
        ] {
            let e = Plan::parse(range, step, false).unwrap_err();
            assert!(e.starts_with(want), "{range} {step:?}: {e}");
            assert!(!e.contains('\n'));
        }
        let t = Thresholds::parse(Some("99%"), Some("5ms")).unwrap();
        assert_eq!((t.min_delivered_pct, t.max_p99_us), (99.0, Some(5000.0)));
        assert_eq!(t.text(), "delivered >= 99% and p99 <= 5.0ms");
        let t = Thresholds::parse(None, None).unwrap();
        assert_eq!((t.min_delivered_pct, t.max_p99_us), (99.9, None));
        assert_eq!(parse_micros("800us"), Some(800.0));
        assert_eq!(parse_micros("0.2s"), Some(200_000.0));
        for (min, p99, want) in [
            (Some("0"), None, "--min-delivered '0': want a percentage"),
            (
                Some("101"),
                None,
                "--min-delivered '101': want a percentage",
            ),
            (
                Some("most"),
                None,
                "--min-delivered 'most': want a percentage",
            ),
            (
                None,
                Some("5"),
                "--max-p99 '5': want a positive duration with its unit",
            ),
            (
                None,
                Some("-5ms"),
                "--max-p99 '-5ms': want a positive duration",
            ),
            (None, Some("5 parsecs"), "--max-p99 '5 parsecs': want"),
        ] {
            let e = Thresholds::parse(min, p99).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }

    fn figures(delivered: f64, p99: f64) -> StepFigures {
        StepFigures {
            intervals: 4,
            offered_pps: Some(1000.0),
            sent_pps: Some(1000.0),
            back_pps: Some(delivered * 10.0),
            delivered_pct: Some(delivered),
            rtt_p99_us: Some(p99),
            ..StepFigures::default()
        }
    }

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

    fn starved(host: &str, sent_pct: Option<f64>, behind_ms: f64, throttled_ms: f64) -> ShortOfCpu {
        ShortOfCpu {
            host: host.to_string(),
            sent_pct,
            behind_ms,
            throttled_ms,
        }
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

    #[test]
    fn a_step_short_with_an_agent_short_of_cpu_is_tried_again_then_judged_naming_it() {
        let t = Thresholds {
            min_delivered_pct: 97.0,
            max_p99_us: None,
        };
        let f = StepFigures {
            short_of_cpu: vec![starved("h2", Some(96.1), 14.2, 0.0)],
            ..figures(95.49, 800.0)
        };
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
        let result = |scale, kind, figures: &StepFigures, tries| StepResult {
            scale,
            kind,
            after: 0,
            until: 4,
            verdict: verdict(figures, &t, tries),
            figures: StepFigures {
                offered_pps: Some(1000.0 * scale),
                ..figures.clone()
            },
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
