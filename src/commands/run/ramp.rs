//! `mx run --ramp FROM:TO`: find the limit. The fleet starts at the first
//! step's rate scale and is never restarted: each next step is ordered on
//! the running agents by a rate file (`agent.rate`: a scale and the whole
//! interval boundary it applies from, written like the start instant), each
//! step holds for whole intervals, its figures come from the intervals
//! entirely at its scale ([`crate::summary::ramp`]), and the ramp stops at
//! the first step that falls short (or bisects below it, with `--bisect`).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::agent::clock::RATE_LEAD;
use crate::cli::RunArgs;
use crate::commands::start::start_fleet;
use crate::error::{EXIT_INTERRUPTED, EXIT_PROBLEMS, Error, Result};
use crate::fleet::collect::collect_reports;
use crate::fleet::end::end_fleet;
use crate::fleet::{Fleet, STEP_TIMEOUT, instants, scripts};
use crate::summary::analysis::span::Step;
use crate::summary::ramp::{
    self, Kind, Plan, StepFigures, StepResult, Thresholds, Verdict, scale_text,
};
use crate::units::{self, local_clock, pps, wall_now};

/// How far ahead of now a step's instant is, at least: the order's ssh
/// fan-out, and the lead an agent needs before the interval it applies from.
const ORDER_MARGIN: f64 = 1.5;

/// Intervals a step holds when `--ramp-hold` is not given.
const DEFAULT_HOLD_INTERVALS: f64 = 3.0;

/// Seconds a step holds: `--ramp-hold` (default three intervals) rounded up
/// to whole intervals of `interval`.
fn hold_seconds(given: Option<&str>, interval: f64) -> Result<f64> {
    let seconds = match given {
        None => DEFAULT_HOLD_INTERVALS * interval,
        Some(text) => match text.trim().trim_end_matches('s').parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => v,
            _ => {
                return Err(Error::refused(format!(
                    "--ramp-hold '{text}': want the seconds each step holds, more than 0"
                )));
            }
        },
    };
    Ok((seconds / interval - 1e-9).ceil().max(1.0) * interval)
}

/// What the ramp needs besides the fleet, checked before anything runs.
struct Ramp {
    plan: Plan,
    thresholds: Thresholds,
    interval: f64,
    hold: f64,
}

impl Ramp {
    fn of(args: &RunArgs) -> Result<Ramp> {
        let r = &args.ramp;
        let range = r.range.as_deref().unwrap_or_default();
        let plan = Plan::parse(range, r.ramp_step.as_deref(), r.bisect).map_err(Error::refused)?;
        let thresholds = crate::commands::summarize::step_holds(&args.report.holds)?;
        crate::commands::agent::check_flags(&args.run.agent_flags)?;
        if args.run.agent_flags.duration > 0.0 {
            return Err(Error::refused(
                "--ramp runs until it finds the limit, and then ends the flows: drop --duration",
            ));
        }
        let interval = args.run.agent_flags.interval;
        Ok(Ramp {
            plan,
            thresholds,
            interval,
            hold: hold_seconds(r.ramp_hold.as_deref(), interval)?,
        })
    }

    /// Whole intervals in a step.
    fn intervals(&self) -> usize {
        (self.hold / self.interval).round() as usize
    }
}

/// `run --ramp`: start the fleet at the first step's scale, raise it step
/// by step, end the flows, print the steps (on `out`; with `document`, the
/// JSON there and the rest on `out`).
pub fn run(args: &RunArgs, out: &mut dyn Write, document: Option<&mut dyn Write>) -> Result<u8> {
    let ramp = Ramp::of(args)?;
    let fleet = crate::commands::open_fleet(args.fleet())?;
    let unpaced = fleet.matrix.unpaced_count();
    if unpaced > 0 {
        return Err(Error::refused(format!(
            "--ramp scales every flow's matrix rate, and {unpaced} flow(s) of {} are unpaced (max), which no scale changes -- give them a rate (mx gen --pps N)",
            fleet.matrix_path.display()
        )));
    }
    let (first, _) = ramp.plan.next(&[]).expect("a climb has a first step");
    // Another ramp's steps must never be read as this one's.
    let _ = std::fs::remove_file(
        args.report
            .read
            .reports
            .dir
            .join(ramp::recorded::RECORD_FILE),
    );
    let started = start_fleet(&fleet, &args.run, None, Some(first), out)?;
    let Some(begin) = started.start else {
        return Ok(started.code);
    };
    if fleet.dry_run {
        writeln!(
            out,
            "[mx] then, every {}s: collect every report, judge the step from its whole intervals, and order the next step's rate scale on every host (agent.rate); at the end, end every flow",
            units::g(ramp.hold)
        )?;
        return Ok(0);
    }
    if started.code != 0 {
        // A ramp needs the whole fleet: what did start is ended.
        end_fleet(&fleet, out, "ending the flows of the hosts that started")?;
        return Ok(started.code);
    }
    writeln!(out)?;
    let climbs = ramp.plan.climb().len();
    let a_step = ramp.hold + ramp.interval;
    writeln!(
        out,
        "[mx] ramp: x{} to x{} in steps of {} ({climbs} steps{}), {}s a step (an interval of {}s for the rate to settle, then {} judged): {} at most{}; a step holds while {} -- ctrl-c ends the ramp and shows the steps so far",
        scale_text(ramp.plan.from),
        scale_text(ramp.plan.to),
        scale_text(ramp.plan.step),
        if ramp.plan.bisect {
            ", then bisecting below the first that falls short"
        } else {
            ""
        },
        units::g(a_step),
        units::g(ramp.interval),
        ramp.intervals(),
        units::duration(a_step * climbs as f64),
        if ramp.plan.bisect { " of climbing" } else { "" },
        ramp.thresholds.text()
    )?;
    out.flush()?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&interrupted));
    let (steps, mut code) = climb(&fleet, args, &ramp, (first, begin), &interrupted, out)?;
    let cut_short = interrupted.load(Ordering::Relaxed);
    if cut_short {
        writeln!(
            out,
            "[mx] ctrl-c: the ramp was cut short -- the steps so far follow"
        )?;
        code = EXIT_INTERRUPTED;
    }
    if args.keep {
        let last = steps.last().map_or(first, |s| s.scale);
        writeln!(
            out,
            "[mx] --keep: the agents run on, at x{} of the matrix's rates",
            scale_text(last)
        )?;
    } else {
        end_fleet(&fleet, out, "ending the flows together")?;
    }
    if let Some(document) = document {
        let mut doc = ramp::document(
            &ramp.plan,
            &ramp.thresholds,
            ramp.hold,
            ramp.interval,
            &steps,
        );
        doc.cut_short = cut_short;
        document.write_all(ramp::to_json(&doc).as_bytes())?;
    } else {
        writeln!(out)?;
        out.write_all(table(&fleet, &ramp, &steps, cut_short).as_bytes())?;
    }
    Ok(code)
}

/// The table of the steps, and the answer under it.
fn table(fleet: &Fleet, ramp: &Ramp, steps: &[StepResult], cut_short: bool) -> String {
    let m = &fleet.matrix;
    let mut text = format!(
        "mx run --ramp -- {} hosts, {} flows, {} bytes out -> {} bytes back; {} interval(s) of {}s a step; a step holds while {}\n",
        m.host_count(),
        m.flow_count(),
        m.config.tx_size,
        m.config.rx_size,
        ramp.intervals(),
        units::g(ramp.interval),
        ramp.thresholds.text()
    );
    text.push_str(&ramp::steps_text(steps, cut_short));
    text
}

/// Runs the steps, from the first (its scale and the instant it began);
/// returns them and the exit code (1 when a step could not be measured or
/// ordered, or a report collected).
fn climb(
    fleet: &Fleet,
    args: &RunArgs,
    ramp: &Ramp,
    (first, begin): (f64, f64),
    interrupted: &AtomicBool,
    out: &mut dyn Write,
) -> Result<(Vec<StepResult>, u8)> {
    let mut steps: Vec<StepResult> = Vec::new();
    let mut tried: Vec<(f64, bool)> = Vec::new();
    let mut current = Some((first, Kind::Climb, begin));
    // Far enough ahead for the order to reach every host a lead before its
    // instant; widened to the fan-out each order takes.
    let mut margin = ORDER_MARGIN;
    while let Some((scale, kind, at)) = current.take() {
        // The interval the rate begins in settles (a pacer's first is a
        // packet short); the step is judged on the whole intervals after it.
        let settled = at + ramp.interval;
        let until = settled + ramp.hold;
        // Its last interval is written a hold after its tick, everywhere.
        let written = until + crate::report::hold_seconds(ramp.interval) + 0.5;
        if !sleep_until(written, interrupted) {
            break;
        }
        let step = Step {
            scale,
            after: settled.floor() as i64,
            until: until.floor() as i64,
        };
        let Some(figures) = measure(fleet, &args.report.read.reports.dir, &step, ramp, out)? else {
            return Ok((steps, EXIT_PROBLEMS));
        };
        let tries = ramp::tried_again(&steps, scale);
        let verdict = ramp::verdict(&figures, &ramp.thresholds, tries);
        writeln!(
            out,
            "[mx] step {} at x{} ({} offered, {} interval(s)): {}",
            steps.len() + 1,
            scale_text(scale),
            figures.offered_pps.map_or("-".to_string(), pps),
            figures.intervals,
            verdict.text()
        )?;
        out.flush()?;
        let measured = verdict != Verdict::NotMeasured;
        let again = matches!(verdict, Verdict::Again(_));
        if !again {
            tried.push((scale, verdict.held()));
        }
        steps.push(StepResult {
            scale,
            kind,
            after: step.after,
            until: step.until,
            figures,
            verdict,
        });
        record(&args.report.read.reports.dir, &steps)?;
        if !measured {
            writeln!(
                out,
                "[mx] stopping the ramp: no whole interval ran at x{} on every host (a host late to its order, or short of CPU: `{}` says more)",
                scale_text(scale),
                fleet.hint("logs")
            )?;
            return Ok((steps, EXIT_PROBLEMS));
        }
        let next = if again {
            Some((scale, Kind::Again))
        } else {
            ramp.plan.next(&tried)
        };
        let Some((next, next_kind)) = next else {
            break;
        };
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let Some((at, took)) = order(fleet, next, ramp.interval, margin, out)? else {
            return Ok((steps, EXIT_PROBLEMS));
        };
        margin = ORDER_MARGIN.max(took * 1.5 + RATE_LEAD);
        current = Some((next, next_kind, at));
    }
    Ok((steps, 0))
}

/// Keeps the steps judged so far beside the reports they were judged on
/// ([`ramp::recorded::RECORD_FILE`]): a summary of those reports judges the
/// same intervals, and says what the ramp said.
fn record(dir: &std::path::Path, steps: &[StepResult]) -> Result<()> {
    let path = dir.join(ramp::recorded::RECORD_FILE);
    crate::files::write_atomically(&path, |f| {
        f.write_all(ramp::recorded::record_text(steps).as_bytes())
    })
}

/// Sleeps until wall time `t`; false when interrupted first.
fn sleep_until(t: f64, interrupted: &AtomicBool) -> bool {
    while wall_now() < t {
        if interrupted.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    !interrupted.load(Ordering::Relaxed)
}

/// Collects every report and computes the step's figures; when fewer whole
/// intervals than the step held are there yet (an agent short of CPU writes
/// late), looks again twice, a second apart. `None` when a report could not
/// be collected (said why).
fn measure(
    fleet: &Fleet,
    dir: &std::path::Path,
    step: &Step,
    ramp: &Ramp,
    out: &mut dyn Write,
) -> Result<Option<StepFigures>> {
    let mut figures = StepFigures::default();
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        let mut said = Vec::new();
        if !collect_reports(fleet, dir, &mut said)? {
            out.write_all(&said)?;
            writeln!(
                out,
                "[mx] stopping the ramp: a step is judged on every host's report"
            )?;
            return Ok(None);
        }
        figures = ramp::step_figures(dir, step)?;
        if figures.intervals >= ramp.intervals() {
            break;
        }
    }
    Ok(Some(figures))
}

/// Orders `scale` on every running agent from the first whole interval a
/// `margin` from now; returns that instant and how long the fan-out took,
/// or `None` when a host could not be ordered (said which).
fn order(
    fleet: &Fleet,
    scale: f64,
    interval: f64,
    margin: f64,
    out: &mut dyn Write,
) -> Result<Option<(f64, f64)>> {
    let at = instants::start_instant(wall_now(), interval, margin);
    let logs = fleet.hint("logs");
    let sent = Instant::now();
    let late = std::sync::Mutex::new(Vec::new());
    let all = fleet.all();
    let outcomes = fleet.each(&all, |host| {
        let outcome = fleet.transport.run(
            host,
            &scripts::rate(&fleet.dir(host), scale, at, &logs),
            STEP_TIMEOUT,
        );
        let returned = wall_now();
        if outcome.ok() && returned > at - RATE_LEAD {
            late.lock()
                .expect("unpoisoned")
                .push((host.name.clone(), returned - at));
        }
        outcome
    });
    let took = sent.elapsed().as_secs_f64();
    if outcomes.iter().any(|o| !o.ok()) {
        writeln!(
            out,
            "[mx] the rate x{} could not be ordered on every host:",
            scale_text(scale)
        )?;
        fleet.print(out, &all, &outcomes, true)?;
        return Ok(None);
    }
    for (host, by) in late.into_inner().expect("unpoisoned") {
        let when = if by < 0.0 {
            format!("only {:.2}s before", -by)
        } else {
            format!("{by:.2}s after")
        };
        writeln!(
            out,
            "[mx] {host} had the order for x{} {when} its instant {} (an agent needs it {RATE_LEAD}s ahead; slow ssh?): it moves an interval later, and the interval it ran at another rate than its peers is left out",
            scale_text(scale),
            local_clock(at)
        )?;
    }
    Ok(Some((at, took)))
}
