//! `mx summarize`: collect every host's report (unless `--no-collect`), then
//! turn the reports into the answer ([`crate::summary`], pure), write the
//! grids `--grid` asks for, and say which hosts the summary is stale for.

use std::io::Write;
use std::path::Path;

use crate::cli::{StepHolds, SummarizeArgs, Trust};
use crate::error::{EXIT_PROBLEMS, EXIT_REFUSED, Error, Result};
use crate::files::write_atomically;
use crate::fleet::collect::{Missed, missed_reports};
use crate::matrix::Matrix;
use crate::matrix::run_print::run_print;
use crate::summary::analysis::span::Step;
use crate::summary::ramp::{self, Kind, Thresholds};
use crate::summary::{Options, Summary};
use crate::units::{self, local_clock};

pub fn run(args: &SummarizeArgs, out: &mut dyn Write) -> Result<u8> {
    // Bad input is refused before anything reaches a host.
    step_holds(&args.holds)?;
    if args.no_collect {
        return summarize(args, &[], out);
    }
    // With --json, standard output holds the document alone: what the
    // collection says goes to standard error.
    if args.json {
        return collect_and_summarize(args, &mut std::io::stderr(), Some(out));
    }
    collect_and_summarize(args, out, None)
}

/// Collects, saying so on `said`, then summarizes onto `document` (or onto
/// `said` too when there is no separate document output).
fn collect_and_summarize(
    args: &SummarizeArgs,
    said: &mut dyn Write,
    document: Option<&mut dyn Write>,
) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
    // A host without a report yet is said, not fatal: summarize what came,
    // say which hosts it is stale for, and exit 1.
    let missed = missed_reports(&fleet, &args.read.reports.dir, said)?;
    summarize_collected(args, &fleet, &missed, said, document)
}

/// Summarizes the reports just collected from `fleet`, `missed` naming the
/// hosts whose reports could not be (what [`run`] does once it has
/// collected).
pub(crate) fn summarize_collected(
    args: &SummarizeArgs,
    fleet: &crate::fleet::Fleet,
    missed: &[Missed],
    said: &mut dyn Write,
    document: Option<&mut dyn Write>,
) -> Result<u8> {
    let unreachable: Vec<String> = missed.iter().map(|m| m.host.clone()).collect();
    let summarized = match document {
        Some(out) => summarize(args, &unreachable, out),
        None => summarize(args, &unreachable, said),
    };
    if missed.is_empty() {
        return summarized;
    }
    match summarized {
        Ok(_) => {
            stale_note(said, missed, fleet.matrix.host_count())?;
            Ok(EXIT_PROBLEMS)
        }
        // Nothing to summarize because hosts could not be reached: a problem
        // found, not bad input.
        Err(e) if e.code() == EXIT_REFUSED => Err(Error::problems(e.message())),
        Err(e) => Err(e),
    }
}

/// `--min-delivered` and `--max-p99`, checked: one line naming the value
/// at fault.
pub(crate) fn step_holds(holds: &StepHolds) -> Result<Thresholds> {
    Thresholds::parse(holds.min_delivered.as_deref(), holds.max_p99.as_deref())
        .map_err(Error::refused)
}

/// Loads the matrix for names, order, layers and each host's IP version
/// (names resolved here) when it is there; a summary of reports alone still
/// works without it.
pub(crate) fn optional_matrix(path: &Path) -> Result<Option<Matrix>> {
    if path.exists() {
        Matrix::load(path).map(|m| Some(crate::matrix::resolve::families_or_as_is(m)))
    } else {
        Ok(None)
    }
}

/// The matrix at `path` beside the reports in `reports`, checked against
/// what their agents ran (each host row's `matrix_fp`): reports of another
/// matrix (a shared remote directory, an edit since) are refused, naming
/// the hosts, unless `trust` says which to believe.
pub(crate) fn matrix_for_reports(
    path: &Path,
    reports: &Path,
    trust: Option<Trust>,
) -> Result<Option<Matrix>> {
    let Some(matrix) = optional_matrix(path)? else {
        return Ok(None);
    };
    let mut other = Vec::new();
    for (i, host) in matrix.hosts().iter().enumerate() {
        let file = reports.join(format!("{}.csv", host.name));
        if !file.is_file() {
            continue;
        }
        let ran = crate::report::read::latest_matrix_print(&file)?;
        if ran.is_some_and(|print| print != run_print(&matrix, i as u32)) {
            other.push(host.name.as_str());
        }
    }
    if other.is_empty() {
        return Ok(Some(matrix));
    }
    let hosts = units::names_list(&other, 5);
    match trust {
        None => Err(Error::refused(format!(
            "the reports of {hosts} in {}/ were written by agents running another matrix than {}: another run's (a remote directory two runs share, or an edit since) -- give the matrix they ran (--matrix FILE), or --trust reports (read them alone) or --trust matrix",
            reports.display(),
            path.display()
        ))),
        Some(Trust::Reports) => {
            eprintln!(
                "[mx] the reports of {hosts} ran another matrix than {}: read alone, as --trust reports asks",
                path.display()
            );
            Ok(None)
        }
        Some(Trust::Matrix) => {
            eprintln!(
                "[mx] the reports of {hosts} ran another matrix than {}: read with it all the same, as --trust matrix asks",
                path.display()
            );
            Ok(Some(matrix))
        }
    }
}

/// The summary of the reports in `--reports`, and the grids `--grid` asks
/// for; `unreachable` names the hosts whose report could not be collected.
fn summarize(args: &SummarizeArgs, unreachable: &[String], out: &mut dyn Write) -> Result<u8> {
    let opts = Options {
        window: args.window,
        top: args.top,
        top_hosts: args.top_hosts,
        series: args.json,
    };
    let matrix = matrix_for_reports(&args.fleet.matrix, &args.read.reports.dir, args.read.trust)?;
    let summary = Summary::read_collected(&args.read.reports.dir, matrix, opts, unreachable)?;
    let record =
        std::fs::read_to_string(args.read.reports.dir.join(ramp::recorded::RECORD_FILE)).ok();
    let (steps, recorded) = summary.ramp_steps(record.as_deref());
    if !steps.is_empty() {
        return summarize_ramp(args, &summary, (&steps, recorded), out);
    }
    if args.json {
        if let Some(dir) = &args.grid {
            write_grids(dir, &summary)?;
        }
        out.write_all(crate::summary::document::to_json(&summary.document()).as_bytes())?;
        return Ok(0);
    }
    let mut text = summary.text();
    if let Some(dir) = &args.grid {
        text.push_str(&write_grids(dir, &summary)?);
    }
    text.push_str(&summary.what_to_do_next());
    out.write_all(text.as_bytes())?;
    Ok(0)
}

/// A ramp's reports (`mx run --ramp`), step by step: one figure over the
/// whole run would average every step's rate.
fn summarize_ramp(
    args: &SummarizeArgs,
    summary: &Summary,
    (steps, recorded): (&[(Step, Kind)], bool),
    out: &mut dyn Write,
) -> Result<u8> {
    let thresholds = step_holds(&args.holds)?;
    let results = ramp::recorded::judge(&args.read.reports.dir, steps, &thresholds, recorded)?;
    if args.json {
        let doc = ramp::recorded::recorded_document(&results, &thresholds, summary.interval());
        out.write_all(ramp::to_json(&doc).as_bytes())?;
        return Ok(0);
    }
    let scales = |pick: fn(f64, f64) -> f64| {
        let scale = results.iter().map(|s| s.scale).reduce(pick).unwrap_or(0.0);
        ramp::scale_text(scale)
    };
    let window = if args.window > 0.0 {
        format!(
            " (the newest {}s; --window 0: the whole run)",
            units::g(args.window)
        )
    } else {
        String::new()
    };
    let mut text = format!(
        "mx summarize -- a ramp (mx run --ramp): {} step(s), x{} to x{}, each summarized alone (one figure over the run would average their rates into one no step ran){}{window}; a step holds while {}\n",
        results.len(),
        scales(f64::min),
        scales(f64::max),
        if recorded {
            ", on the intervals the ramp judged"
        } else {
            ""
        },
        thresholds.text()
    );
    text.push_str(&ramp::steps_text(&results, false));
    if args.grid.is_some() {
        text.push_str(
            "[mx] --grid: not written, as a ramp's steps ran at different rates and a grid holds one per flow -- summarize one step with --window\n",
        );
    }
    out.write_all(text.as_bytes())?;
    Ok(0)
}

/// Writes the grids into `dir`; returns the lines that say so.
fn write_grids(dir: &Path, summary: &Summary) -> Result<String> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "cannot create", &e))?;
    let (grids, layered) = summary.grids();
    let mut written = Vec::new();
    for (name, text) in grids {
        write_atomically(&dir.join(name), |out| out.write_all(text.as_bytes()))?;
        written.push(name);
    }
    let mut lines = String::new();
    if layered {
        lines.push_str(&format!(
            "  wrote {}/coverage_grid.csv (cells: intervals measured; empty = never yet)\n\n",
            dir.display()
        ));
    }
    lines.push_str(&format!(
        "  wrote {}/{{{}}}\n\n",
        dir.display(),
        written.join(",")
    ));
    Ok(lines)
}

/// Says, after a summary, which hosts' reports it could not collect: the
/// summary is stale for them (an earlier copy) or lacks them (none).
fn stale_note(out: &mut dyn Write, missed: &[Missed], hosts: usize) -> std::io::Result<()> {
    writeln!(
        out,
        "[mx] {} of {hosts} hosts' reports could not be collected just now, so the summary above is stale for them:",
        missed.len()
    )?;
    let width = missed.iter().map(|m| m.host.len()).max().unwrap_or(0);
    for m in missed {
        let what = match &m.earlier {
            Some((path, when)) => {
                let at = when
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                format!(
                    "its earlier copy was summarized ({}, collected at {})",
                    path.display(),
                    local_clock(at)
                )
            }
            None => "no report of it was ever collected: it is not in the summary".to_string(),
        };
        let why = match m.why.as_str() {
            "" => String::new(),
            why => format!(" ({why})"),
        };
        writeln!(out, "[mx]   {:<width$}  {what}{why}", m.host)?;
    }
    Ok(())
}
