//! `mx reload`: push an edited matrix onto a running fleet and restart only the
//! hosts the edit changed, with the flags each was started with (read off its
//! stamp), keeping their reports (facts.md 4.9).
//!
//! | probe                          | action                                   |
//! |--------------------------------|------------------------------------------|
//! | stamp, running, same print     | keep (not even re-copied)                |
//! | stamp, running, new print      | restart                                  |
//! | stamp, not running             | start with its stamped flags             |
//! | no stamp, not running          | start (flags of the fleet's other hosts) |
//! | no stamp, running              | report and leave alone: flags unknown    |

use std::io::Write;

use super::commands::{check_dwell_interval, deploy, stage};
use super::{Fleet, LOOK_TIMEOUT, STEP_TIMEOUT, bind, scripts};
use clap::Parser as _;

use crate::cli::{AgentFlags, ReloadArgs};
use crate::error::{EXIT_PROBLEMS, Error, Result};
use crate::stamp::fingerprint;

/// What the probe found on one host.
#[derive(Debug, Clone, Default, PartialEq)]
struct Probe {
    state: String,
    fingerprint: Option<String>,
    flags: Option<Vec<String>>,
}

fn parse_probe(text: &str) -> Probe {
    let mut p = Probe::default();
    for line in text.lines() {
        if let Some(state) = line.strip_prefix("state=") {
            p.state = state.trim().to_string();
        } else if let Some(fp) = line.strip_prefix("fp=") {
            p.fingerprint = Some(fp.trim().to_string());
        } else if let Some(flags) = line.strip_prefix("flags=") {
            p.flags = shlex::split(flags);
        }
    }
    p
}

/// The `--interval` of a flag list (5 s when absent, the agent's default).
fn interval_of(flags: &[String]) -> f64 {
    flags
        .iter()
        .position(|f| f == "--interval")
        .and_then(|i| flags.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0)
}

enum Action {
    Keep,
    Restart(Vec<String>),
    Start(Vec<String>),
    Unstamped,
}

pub fn reload(args: &ReloadArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = Fleet::open(&args.fleet)?;
    fleet.matrix.print_warnings();
    let retargeted = match &args.bind {
        Some(spec) => Some(bind::retarget(&fleet, spec, out)?),
        None => None,
    };
    let target = retargeted.as_ref().unwrap_or(&fleet.matrix);
    let all = fleet.all();
    let n = all.len();
    writeln!(out, "[mx] checking {n} host(s) on {n} hosts")?;
    let probes = fleet.each(&all, |host| {
        fleet
            .transport
            .run(host, &scripts::probe(&fleet.dir(host)), LOOK_TIMEOUT)
    });
    if fleet.print(out, &all, &probes, true)?.len() < n {
        writeln!(
            out,
            "[mx] could not reach every host -- nothing was changed"
        )?;
        return Ok(EXIT_PROBLEMS);
    }
    if fleet.dry_run {
        writeln!(
            out,
            "[mx] dry run: the probes above are what reload would run first"
        )?;
        return Ok(0);
    }
    let found: Vec<Probe> = probes.iter().map(|o| parse_probe(&o.text)).collect();
    let fleet_flags = found
        .iter()
        .find_map(|p| p.flags.clone())
        .unwrap_or_else(|| vec!["--interval".to_string(), "5".to_string()]);
    let mut actions = Vec::new();
    for (i, p) in found.iter().enumerate() {
        let running = p.state == "running";
        let action = match (&p.fingerprint, running) {
            (None, true) => Action::Unstamped,
            (None, false) => Action::Start(fleet_flags.clone()),
            (Some(_), false) => {
                Action::Start(p.flags.clone().unwrap_or_else(|| fleet_flags.clone()))
            }
            (Some(fp), true) if *fp == fingerprint(target, i as u32) => Action::Keep,
            (Some(_), true) => {
                Action::Restart(p.flags.clone().unwrap_or_else(|| fleet_flags.clone()))
            }
        };
        actions.push(action);
    }
    let name = |i: usize| fleet.hosts()[i].name.as_str();
    for (i, a) in actions.iter().enumerate() {
        if let Action::Unstamped = a {
            writeln!(
                out,
                "[mx] {}: running, and carries no stamp -- `{} && {}` brings it under reload",
                name(i),
                fleet.hint("stop"),
                fleet.hint("start")
            )?;
        }
    }
    let kept = actions.iter().filter(|a| matches!(a, Action::Keep)).count();
    let restart: Vec<usize> = (0..n)
        .filter(|&i| matches!(actions[i], Action::Restart(_)))
        .collect();
    let start: Vec<usize> = (0..n)
        .filter(|&i| matches!(actions[i], Action::Start(_)))
        .collect();
    if kept > 0 {
        writeln!(out, "[mx] unchanged, left running: {kept} of {n} host(s)")?;
    }
    if restart.is_empty() && start.is_empty() {
        writeln!(
            out,
            "[mx] every host already matches {} -- nothing to restart",
            fleet.matrix_path.display()
        )?;
        return Ok(0);
    }
    let names = |list: &[usize]| list.iter().map(|&i| name(i)).collect::<Vec<_>>().join(", ");
    if !restart.is_empty() {
        writeln!(
            out,
            "[mx] matrix changed for {} host(s): {}",
            restart.len(),
            names(&restart)
        )?;
    }
    if !start.is_empty() {
        writeln!(
            out,
            "[mx] not running, will start: {} host(s): {}",
            start.len(),
            names(&start)
        )?;
    }
    let flags_of = |i: usize| match &actions[i] {
        Action::Restart(f) | Action::Start(f) => f.clone(),
        _ => Vec::new(),
    };
    let act: Vec<usize> = (0..n)
        .filter(|i| restart.contains(i) || start.contains(i))
        .collect();
    for &i in &act {
        let flags = flags_of(i);
        check_stamped_flags(name(i), &flags)?;
        check_dwell_interval(&fleet, interval_of(&flags))?;
    }
    let (_staging, files) = stage(&fleet, &args.agent, Some(target))?;
    let done = fleet.step(
        out,
        &format!("restarting {} host(s)", act.len()),
        &act,
        false,
        |host| {
            let i = fleet.matrix.index_of(&host.name).expect("a matrix host") as usize;
            // Stop first: a running executable cannot be overwritten (ETXTBSY),
            // and one unlinked under a running agent would hide it from stop.
            let dir = fleet.dir(host);
            let stopped = fleet
                .transport
                .run(host, &scripts::stop(&dir), STEP_TIMEOUT);
            // What the stop script found: `stopped` and `killed` are agents
            // that were running.
            let was = match stopped.text.lines().last() {
                Some("stopped") => "restarted (was running)",
                Some("killed") => "restarted (was running, and had to be killed)",
                Some("not-deployed") => "started (was not deployed)",
                _ => "started (was not running)",
            };
            let copied = deploy(&fleet, host, &files, false);
            if !copied.ok() {
                return copied;
            }
            let mut started = fleet.transport.run(
                host,
                &scripts::launch(
                    &dir,
                    &host.name,
                    &flags_of(i),
                    false,
                    scripts::Begin::Now,
                    &fleet.hint("stop"),
                ),
                STEP_TIMEOUT,
            );
            if started.ok() {
                started.text = was.to_string();
            }
            started
        },
    )?;
    if done.len() < act.len() {
        writeln!(
            out,
            "[mx] some hosts did not come back; `{}` will tell you why",
            fleet.hint("logs")
        )?;
        return Ok(EXIT_PROBLEMS);
    }
    writeln!(
        out,
        "[mx] reloaded: {} restarted, {kept} left running",
        act.len()
    )?;
    fleet.hint_lines(out, "[mx] next: ", "", &[("status", "one line per host")])?;
    Ok(0)
}

/// Refuses flags stamped on host `host` that its agent would refuse, before
/// anything is copied, with the agent's own words.
fn check_stamped_flags(host: &str, flags: &[String]) -> Result<()> {
    #[derive(clap::Parser)]
    #[command(no_binary_name = true)]
    struct Stamped {
        #[command(flatten)]
        flags: AgentFlags,
    }
    let shown = crate::stamp::shell_join(flags);
    let parsed = Stamped::try_parse_from(flags).map_err(|e| {
        let first = e.to_string();
        let first = first
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        Error::refused(format!(
            "{host}'s agent.stamp (flags={shown}) cannot start an agent: {first}"
        ))
    })?;
    crate::agent::check_flags(&parsed.flags).map_err(|e| {
        Error::refused(format!(
            "{host}'s agent.stamp (flags={shown}) cannot start an agent: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_and_flags_parse() {
        let p =
            parse_probe("state=running\nfp=0123456789abcdef\nflags=--interval 2 --bind 'eth 1'\n");
        assert_eq!(p.state, "running");
        assert_eq!(p.fingerprint.as_deref(), Some("0123456789abcdef"));
        let flags = p.flags.unwrap();
        assert_eq!(flags, ["--interval", "2", "--bind", "eth 1"]);
        assert_eq!(interval_of(&flags), 2.0);
        assert_eq!(interval_of(&[]), 5.0);
        assert_eq!(parse_probe("state=absent\n").fingerprint, None);
    }
}
