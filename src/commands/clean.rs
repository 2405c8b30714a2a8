//! `mx clean`: stop every agent and delete its directory, verifying both;
//! asks first unless `--yes`.

use std::io::{IsTerminal, Write};

use crate::cli::CleanArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::{STEP_TIMEOUT, scripts};

/// How long clean waits for the transport's own leftovers to end by
/// themselves before it ends them.
const SWEEP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub fn run(args: &CleanArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
    if !args.yes && !fleet.dry_run {
        writeln!(
            out,
            "[mx] this stops every agent and deletes {} on {} hosts.",
            fleet.transport.shown_dir(&fleet.remote_dir),
            fleet.matrix.host_count()
        )?;
        writeln!(
            out,
            "[mx] collect anything you want first ({}, {}).",
            fleet.hint("summarize"),
            fleet.hint("logs")
        )?;
        // Without a terminal no one is there to type: a `yes` piped in is
        // taken (as the original took it), anything else says what works.
        let terminal = std::io::stdin().is_terminal();
        if terminal {
            write!(out, "[mx] type 'yes' to continue: ")?;
        }
        out.flush()?;
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        let answer = answer.trim();
        if !answer.eq_ignore_ascii_case("yes") {
            let without_asking = format!("`{} --yes` cleans without asking", fleet.hint("clean"));
            // Not confirmed is exit 1, as the original has it: said, since
            // a script sees the status and nothing else.
            if terminal {
                writeln!(out, "[mx] nothing done (exit status 1: not confirmed)")?;
            } else if answer.is_empty() {
                writeln!(
                    out,
                    "[mx] nothing done (exit status 1: not confirmed): standard input is not a terminal, so no one can answer -- {without_asking}"
                )?;
            } else {
                writeln!(
                    out,
                    "[mx] nothing done (exit status 1: not confirmed): standard input answered '{}', and only 'yes' cleans -- {without_asking}",
                    answer.escape_debug()
                )?;
            }
            return Ok(EXIT_PROBLEMS);
        }
    }
    let done = fleet.step(out, "removing every trace", &fleet.all(), false, |host| {
        fleet
            .transport
            .run(host, &scripts::clean(&fleet.dir(host)), STEP_TIMEOUT)
    })?;
    // What the transport itself kept for this fleet (Slurm: the job steps
    // that held the agents), which end once the agents have.
    let swept = fleet.transport.sweep(&fleet.remote_dir, SWEEP_WAIT);
    if let Some(swept) = &swept {
        for line in swept.text.lines() {
            writeln!(out, "[mx] {line}")?;
        }
    }
    if done.len() < fleet.matrix.host_count() || swept.is_some_and(|s| !s.ok()) {
        return Ok(EXIT_PROBLEMS);
    }
    writeln!(
        out,
        "[mx] nothing of mx remains on the fleet (no packages, no sysctls, no unit files -- there never were any)"
    )?;
    Ok(0)
}
