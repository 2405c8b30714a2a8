//! `mx stop`: every agent's flows end together, and the reports and logs stay
//! on the hosts for `summarize` and `logs`.

use std::io::Write;

use crate::cli::StopArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::Fleet;
use crate::fleet::end::end_fleet;
use crate::fleet::transport::Outcome;

fn stop_fleet(fleet: &Fleet, out: &mut dyn Write) -> Result<bool> {
    let outcomes = end_fleet(fleet, out, "stopping agents (flows end together)")?;
    let stopped = outcomes
        .iter()
        .filter(|o| o.ok() && matches!(o.text.lines().last(), Some("ended" | "stopped" | "killed")))
        .count();
    if stopped > 0 {
        writeln!(out, "[mx] {stopped} agent(s) stopped")?;
    }
    // A host that did not answer was told nothing: its agent, if one runs
    // there, sends on until its own end (or forever, started without one).
    let unanswered: Vec<&str> = fleet
        .hosts()
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| !o.ok())
        .map(|(h, _)| h.name.as_str())
        .collect();
    if !unanswered.is_empty() {
        writeln!(
            out,
            "[mx] not stopped: {} -- an agent there may still be sending; `{}` again retries (hosts already stopped say so and stay stopped)",
            unanswered.join(", "),
            fleet.hint("stop")
        )?;
    }
    // Hosts that answered that nothing of mx is there.
    let bare: Vec<&str> = fleet
        .hosts()
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| o.ok() && o.text.lines().last() == Some("not-deployed"))
        .map(|(h, _)| h.name.as_str())
        .collect();
    if bare.len() == outcomes.len() {
        writeln!(
            out,
            "[mx] nothing was deployed on these hosts ({} is not there): no agent ran, no report or log was left to collect",
            fleet.transport.shown_dir(&fleet.remote_dir)
        )?;
    } else {
        if !bare.is_empty() {
            writeln!(
                out,
                "[mx] nothing was deployed on {} ({} is not there): no report or log there",
                bare.join(", "),
                fleet.transport.shown_dir(&fleet.remote_dir)
            )?;
        }
        writeln!(out, "[mx] reports and logs are still on the hosts:")?;
        fleet.hint_lines(
            out,
            "[mx]   ",
            "[mx]   ",
            &[
                ("summarize", "collect + analyze"),
                ("logs", "collect agent logs"),
                ("clean", "delete every trace"),
            ],
        )?;
        if super::data_files_needed(&fleet.matrix) {
            writeln!(
                out,
                "[mx] so is each host's disk.dat data file, which the next start reuses; {} removes it too",
                fleet.hint("clean")
            )?;
        }
    }
    Ok(outcomes.iter().all(Outcome::ok))
}

pub fn run(args: &StopArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
    Ok(if stop_fleet(&fleet, out)? {
        0
    } else {
        EXIT_PROBLEMS
    })
}
