//! Launching the agents of a fleet. Over ssh (and locally) each host runs
//! its launch script, which leaves the agent running detached (hangups
//! ignored, as `nohup` would) and returns. A transport whose agents live
//! only as long as the step that started them (Slurm) runs one held launch
//! across the hosts instead: each node's script says how its launch went,
//! then stays, waiting for its agent.

use std::collections::BTreeMap;

use super::scripts::{self, Keep};
use super::transport::{HeldLaunch, Outcome};
use super::{Fleet, STEP_TIMEOUT};
use mx_base::units::wall_now;

/// Launches the agent on each of `hosts` (indices into the matrix), host `i`
/// with `flags_of(i)`: what each host said, when its step was sent and when
/// it answered (this machine's clock, Unix seconds), in the order of `hosts`. Every agent
/// starts armed: hosts started together begin at one instant ([`scripts::go`]).
/// `wipe` deletes the last run's log and report first.
pub fn launch<'a>(
    fleet: &Fleet,
    hosts: &[usize],
    flags_of: &(dyn Fn(usize) -> &'a [String] + Sync),
    wipe: bool,
) -> Vec<(Outcome, f64, f64)> {
    let stop = fleet.hint("stop");
    let index = |name: &str| fleet.matrix.index_of(name).expect("a matrix host") as usize;
    if !fleet.transport.holds_agents() {
        return fleet.each(hosts, |host| {
            let script = scripts::launch(
                &fleet.dir(host),
                Keep::Detached(&host.name),
                flags_of(index(&host.name)),
                wipe,
                &stop,
            );
            let sent = wall_now();
            let outcome = fleet.transport.run(host, &script, STEP_TIMEOUT);
            (outcome, sent, wall_now())
        });
    }
    // One held launch per set of flags (a reload may restart hosts stamped
    // with different ones): the same script on every node of it.
    let mut groups: BTreeMap<&[String], Vec<usize>> = BTreeMap::new();
    for (at, &h) in hosts.iter().enumerate() {
        groups.entry(flags_of(h)).or_default().push(at);
    }
    let mut answers: Vec<Option<(Outcome, f64, f64)>> = vec![None; hosts.len()];
    for (flags, members) in groups {
        let group: Vec<&mx_matrix::Host> = members
            .iter()
            .map(|&at| &fleet.hosts()[hosts[at]])
            .collect();
        let dir = fleet.dir(group[0]);
        let script = scripts::launch(&dir, Keep::Held, flags, wipe, &stop);
        let held = HeldLaunch {
            script: &script,
            dir: &dir,
            timeout: STEP_TIMEOUT,
        };
        let sent = wall_now();
        let said = fleet.transport.run_held(&group, &held);
        for (at, (outcome, returned)) in members.into_iter().zip(said) {
            answers[at] = Some((outcome, sent, returned));
        }
    }
    answers
        .into_iter()
        .map(|a| a.expect("every host launched"))
        .collect()
}
