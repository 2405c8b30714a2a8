//! `mx run --for S`: start, hold, summarize, stop, in one command. The flows
//! begin at one instant and end at one, S seconds later.
//!
//! `progress.rs` draws the live line while the flows run; `ramp.rs` is
//! `mx run --ramp`, the run that raises the rate step by step to find the
//! limit.

mod interrupt;
mod progress;
mod ramp;

use std::io::Write;

use self::interrupt::Interrupt;
use self::progress::{Screen, Span};
use crate::cli::RunArgs;
use crate::commands::start::start_fleet;
use crate::commands::summarize::summarize_collected;
use crate::commands::trace;
use crate::error::{EXIT_INTERRUPTED, Error, Result};
use crate::fleet::collect::{collect_reports, missed_reports};
use crate::fleet::end::end_fleet;
use crate::fleet::transport::Outcome;
use crate::fleet::{Fleet, STEP_TIMEOUT, scripts};
use crate::units::{self, local_clock, wall_now};

/// `run --for S`: start, hold, summarize, stop. The flows begin at one
/// instant and (unless `--keep`) end at one, S seconds later: the agents end
/// themselves, and the summary covers the steady part between.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<u8> {
    // With --json, standard output holds the summary's document alone: what
    // the run says on its way goes to standard error.
    if args.report.json {
        let screen = screen_of(console::Term::stderr());
        return run_saying(args, &mut std::io::stderr(), Some(out), screen);
    }
    run_saying(args, out, None, screen_of(console::Term::stdout()))
}

/// The live line on `term` when it is a terminal, else plain lines.
fn screen_of(term: console::Term) -> Screen {
    if term.is_term() {
        Screen::Terminal(term)
    } else {
        Screen::Lines
    }
}

/// The run, said on `out`; the summary goes to `document` when given.
fn run_saying(
    args: &RunArgs,
    out: &mut dyn Write,
    document: Option<&mut dyn Write>,
    screen: Screen,
) -> Result<u8> {
    if args.ramp.range.is_some() {
        return ramp::run(args, out, document);
    }
    if let Some(flag) = args.ramp_flags_given().first() {
        return Err(Error::refused(format!(
            "{flag} is a setting of the ramp: give --ramp FROM:TO with it (e.g. --ramp 0.5:3)"
        )));
    }
    crate::commands::agent::check_flags(&args.run.agent_flags)?;
    let fleet = crate::commands::open_fleet(args.fleet())?;
    let hold = if args.run.agent_flags.duration > 0.0 {
        args.run.agent_flags.duration
    } else {
        args.for_seconds
    };
    let started = start_fleet(&fleet, &args.run, (!args.keep).then_some(hold), None, out)?;
    let Some(begin) = started.start else {
        return Ok(started.code);
    };
    if started.code != 0 {
        return Ok(started.code);
    }
    if fleet.dry_run {
        // Nothing ran: show what would, and summarize nothing.
        writeln!(
            out,
            "[mx] then, after {}s: collect every report, summarize, and check that every agent ended",
            units::g(hold)
        )?;
        collect_reports(&fleet, &args.report.read.reports.dir, out)?;
        return Ok(0);
    }
    writeln!(out)?;
    writeln!(
        out,
        "[mx] running for {}s -- ctrl-c ends every flow at once and summarizes what ran (twice: gives up waiting)",
        units::g(hold)
    )?;
    out.flush()?;
    let interrupt = Interrupt::watch(fleet.hint("stop"))?;
    // Until the agents have ended themselves (the end, their grace, a breath);
    // with --keep, until the last interval is written.
    let interval = args.run.agent_flags.interval;
    let done_at = match started.end {
        Some(end) => end + started.grace + 0.5,
        None => begin + hold + crate::report::hold_seconds(interval) + 1.0,
    };
    let span = Span {
        begin,
        hold,
        done_at,
        interval,
    };
    progress::hold(&fleet, &span, interrupt.flag(), screen, out)?;
    let cut_short = interrupt
        .came()
        .then(|| interrupt.at().unwrap_or_else(wall_now));
    if let Some(at) = cut_short {
        writeln!(
            out,
            "[mx] interrupted: the run was cut short at {} ({}s of the {}s planned) -- ending every flow now",
            local_clock(at),
            units::g((at - begin).clamp(0.0, hold).floor()),
            units::g(hold)
        )?;
        out.flush()?;
        if !args.keep {
            end_fleet(&fleet, out, "ending the flows together")?;
        }
    } else if let Some(end) = started.end {
        await_end(&fleet, end, started.grace, out)?;
    }
    let summary = summarize_run(&fleet, args, hold, out, document);
    if !args.keep {
        say_what_stays(&fleet, out)?;
    }
    match cut_short {
        Some(at) => {
            writeln!(
                out,
                "[mx] cut short by ctrl-c at {}s of the {}s planned: the summary covers what ran",
                units::g((at - begin).clamp(0.0, hold).floor()),
                units::g(hold)
            )?;
            summary.map(|_| EXIT_INTERRUPTED)
        }
        None => summary,
    }
}

/// The run's summary over its `hold` seconds (at most its last 300):
/// collected, its lossy paths traced (unless the agents were kept, or
/// `--no-trace`), then summarized onto `document`, or onto `out`.
fn summarize_run(
    fleet: &Fleet,
    args: &RunArgs,
    hold: f64,
    out: &mut dyn Write,
    document: Option<&mut dyn Write>,
) -> Result<u8> {
    let mut report = args.report.clone();
    report.window = report.window.max(hold.min(300.0).floor());
    if args.keep || args.no_trace || report.no_collect {
        return match document {
            Some(document) => crate::commands::summarize::run(&report, document),
            None => crate::commands::summarize::run(&report, out),
        };
    }
    collect_trace_and_summarize(fleet, &report, out, document)
}

/// Collects the reports; where a flow's loss sat on some of its paths
/// alone, sweeps those streams' paths (`mx trace`: the agents have ended,
/// and their ports are free) so that the summary can name the link; then
/// summarizes.
fn collect_trace_and_summarize(
    fleet: &Fleet,
    report: &crate::cli::SummarizeArgs,
    out: &mut dyn Write,
    document: Option<&mut dyn Write>,
) -> Result<u8> {
    let dir = &report.read.reports.dir;
    let missed = missed_reports(fleet, dir, out)?;
    let plan = trace::Plan {
        window: report.window,
        all: false,
        probes: crate::agent::trace::DEFAULT_PROBES,
        seconds: TRACE_SECONDS,
    };
    // A trace that cannot run is said, and the summary goes on without it.
    if let Err(e) = trace::trace_lossy(fleet, dir, &plan, out) {
        writeln!(out, "[mx] trace: not traced: {}", e.message())?;
    }
    match document {
        Some(document) => summarize_collected(report, fleet, &missed, out, Some(document)),
        None => summarize_collected(report, fleet, &missed, out, None),
    }
}

/// How long a run's hosts may sweep their lossy streams' paths.
const TRACE_SECONDS: f64 = 30.0;

/// Every agent has its end instant: waits for each to exit (an agent short
/// of CPU writes its last rows late), so that the reports are whole when
/// collected; one still running 10 s on is stopped.
fn await_end(fleet: &Fleet, end: f64, grace: f64, out: &mut dyn Write) -> Result<()> {
    let outcomes = fleet.each(&fleet.all(), |host| {
        fleet.transport.run(
            host,
            &scripts::end(&fleet.dir(host), end, grace),
            STEP_TIMEOUT,
        )
    });
    let late: Vec<usize> = (0..outcomes.len())
        .filter(|&i| outcomes[i].text.lines().last() != Some("ended"))
        .collect();
    if late.is_empty() {
        writeln!(
            out,
            "[mx] every agent ended at {} as planned, and stopped",
            local_clock(end)
        )?;
    } else {
        let shown: Vec<Outcome> = late.iter().map(|&i| outcomes[i].clone()).collect();
        writeln!(out, "[mx] not every agent ended by itself:")?;
        fleet.print(out, &late, &shown, false)?;
    }
    Ok(())
}

/// What the run leaves on the hosts, and the command that removes it.
fn say_what_stays(fleet: &Fleet, out: &mut dyn Write) -> Result<()> {
    let disk = if crate::commands::data_files_needed(&fleet.matrix) {
        ", and so does each host's disk.dat data file, which the next start reuses"
    } else {
        ""
    };
    writeln!(
        out,
        "[mx] reports and logs stay on the hosts{disk} ({} removes them)",
        fleet.hint("clean")
    )?;
    Ok(())
}
