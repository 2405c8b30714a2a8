//! Ending a run: every agent's flows stop at one instant, a margin from now
//! (the same on every host, so no host reads its peers' silence as loss),
//! and each agent answers a grace period more, then exits by itself.

use std::io::Write;

use super::transport::Outcome;
use super::{Fleet, STEP_TIMEOUT, instants, scripts};
use mx_base::error::Result;
use mx_base::units::wall_now;

/// Ends every agent's flows at one instant, a margin from now: each stops
/// sending then, answers a grace period more and exits by itself (those still
/// running 10 s later are stopped). Prints each host's outcome.
/// Returns every host's outcome (the stop script's last line: `ended`,
/// `stopped`, `killed`, `not-running` or `not-deployed`).
pub fn end_fleet(fleet: &Fleet, out: &mut dyn Write, label: &str) -> Result<Vec<Outcome>> {
    let at = wall_now() + instants::START_MARGIN;
    let grace = instants::START_MARGIN;
    let all = fleet.all();
    writeln!(out, "[mx] {label} on {} hosts", all.len())?;
    let outcomes = fleet.each(&all, |host| {
        fleet.transport.run(
            host,
            &scripts::end(&fleet.dir(host), at, grace),
            STEP_TIMEOUT,
        )
    });
    fleet.print(out, &all, &outcomes, false)?;
    Ok(outcomes)
}
