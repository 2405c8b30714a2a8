//! `mx reload`: push an edited matrix onto a running fleet and restart only the
//! hosts the edit changed, with the flags each was started with (read off its
//! stamp), keeping their reports. An edit changes a host when it changes
//! its own flows (the stamp's `fp=`, the original's terms). One that
//! changes only what its senders send it (the stamp's `in=`) leaves it
//! running: the new matrix is copied to it and its agent re-plans what it
//! answers in place (`agent::answers`), before the restarted senders send
//! at their new rates.
//!
//! | probe                          | action                                   |
//! |--------------------------------|------------------------------------------|
//! | stamp, running, same print     | keep (not even re-copied)                |
//! | stamp, running, new rates in   | keep; the matrix copied, re-read in place|
//! | stamp, running, new print      | restart                                  |
//! | stamp, not running             | start with its stamped flags             |
//! | no stamp, not running          | start (flags of the fleet's other hosts) |
//! | no stamp, running              | report and leave alone: flags unknown    |

use std::io::Write;

use clap::Parser as _;

use super::start::check_dwell_interval;
use crate::agent::config::MetricsAt;
use crate::agent::stamp::{self, fingerprint};
use crate::cli::{AgentFlags, ReloadArgs};
use crate::error::{EXIT_PROBLEMS, Error, Result};
use crate::fleet::deploy::{Staged, deploy, deploy_all, stage};
use crate::fleet::scripts::{BeganBy, Go};
use crate::fleet::transport::Outcome;
use crate::fleet::{COPY_TIMEOUT, Fleet, LOOK_TIMEOUT, STEP_TIMEOUT, bind, instants, scripts};
use crate::matrix::{Host, Matrix};
use crate::units::{self, wall_now};

/// What the probe found on one host.
#[derive(Debug, Clone, Default, PartialEq)]
struct Probe {
    state: String,
    fingerprint: Option<String>,
    /// What the host answers (`in=`); none in a stamp of the original's.
    inbound: Option<String>,
    flags: Option<Vec<String>>,
}

fn parse_probe(text: &str) -> Probe {
    let mut p = Probe::default();
    for line in text.lines() {
        if let Some(state) = line.strip_prefix("state=") {
            p.state = state.trim().to_string();
        } else if let Some(fp) = line.strip_prefix("fp=") {
            p.fingerprint = Some(fp.trim().to_string());
        } else if let Some(inbound) = line.strip_prefix("in=") {
            p.inbound = Some(inbound.trim().to_string());
        } else if let Some(flags) = line.strip_prefix("flags=") {
            p.flags = shlex::split(flags);
        }
    }
    p
}

/// The value of `flag` in a flag list, when there.
fn value_of<'a>(flags: &'a [String], flag: &str) -> Option<&'a str> {
    flags
        .iter()
        .position(|f| f == flag)
        .and_then(|i| flags.get(i + 1))
        .map(String::as_str)
}

/// Where `mx monitor` writes the targets by default: a reload of an
/// always-on fleet rewrites them there, so that Prometheus (which rereads a
/// `file_sd` file by itself) follows the new matrix.
const MONITOR_TARGETS: &str = "monitor/targets.json";

/// With agents serving `/metrics` (`metrics`, their flag) and `mx
/// monitor`'s targets beside the matrix, rewrites them for `target`.
fn rewrite_targets(target: &Matrix, metrics: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let path = std::path::Path::new(MONITOR_TARGETS);
    let (Some(metrics), true) = (metrics, path.is_file()) else {
        return Ok(());
    };
    let port = match super::agent::metrics_addr(metrics)? {
        MetricsAt::Port(port) => port,
        MetricsAt::Addr(addr) => addr.port(),
    };
    let text = crate::monitor::targets::file_sd(target, port);
    crate::files::write_atomically(path, |f| f.write_all(text.as_bytes()))?;
    writeln!(
        out,
        "[mx] {MONITOR_TARGETS} rewritten for the new matrix: {} targets on port {port} (Prometheus rereads it by itself)",
        target.host_count()
    )?;
    Ok(())
}

/// The `--interval` of a flag list (5 s when absent, the agent's default).
fn interval_of(flags: &[String]) -> f64 {
    value_of(flags, "--interval")
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0)
}

/// What reload does on one host, with the flags it starts the agent with.
enum Action {
    Keep,
    /// Running, its own flows unchanged, the rates into it changed.
    Answers,
    Restart(Vec<String>),
    Start(Vec<String>),
    Unstamped,
}

impl Action {
    /// The flags to start with, when this host is (re)started.
    fn flags(&self) -> Option<&[String]> {
        match self {
            Action::Restart(f) | Action::Start(f) => Some(f),
            Action::Keep | Action::Answers | Action::Unstamped => None,
        }
    }
}

pub fn run(args: &ReloadArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
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
    if found.iter().all(|p| p.state != "running") {
        writeln!(
            out,
            "[mx] no agent runs on any host: reload starts every host of the matrix, together, as `{}` would (each with the flags it last ran with)",
            fleet.hint("start")
        )?;
    }
    let actions = actions(&found, target);
    let act = announce(&fleet, &actions, out)?;
    let answers: Vec<usize> = (0..n)
        .filter(|&i| matches!(actions[i], Action::Answers))
        .collect();
    if act.is_empty() && answers.is_empty() {
        writeln!(
            out,
            "[mx] every host already matches {} -- nothing to restart",
            fleet.matrix_path.display()
        )?;
        return Ok(0);
    }
    let flags_of = |i: usize| actions[i].flags().unwrap_or_default();
    for &i in &act {
        check_stamped_flags(&fleet.hosts()[i].name, flags_of(i))?;
        check_dwell_interval(&fleet, interval_of(flags_of(i)))?;
    }
    let staged = stage(&fleet, &args.agent.resolve()?, Some(target))?;
    // What the running hosts answer first: a sender restarted at a higher
    // rate is answered from its first request.
    if !answers.is_empty() && !reread_answers(&fleet, &answers, &staged, target, out)? {
        return Ok(EXIT_PROBLEMS);
    }
    if act.is_empty() {
        writeln!(
            out,
            "[mx] reloaded: 0 restarted, {n} left running ({} re-read what they answer)",
            answers.len()
        )?;
        return Ok(0);
    }
    let disks = super::data_files_needed(target);
    let Some(done) = restart_together(&fleet, &act, &staged, &flags_of, disks, out)? else {
        return Ok(EXIT_PROBLEMS);
    };
    if done.len() < act.len() {
        writeln!(
            out,
            "[mx] some hosts did not come back; `{}` will tell you why",
            fleet.hint("logs")
        )?;
        return Ok(EXIT_PROBLEMS);
    }
    let metrics = act.iter().find_map(|&i| value_of(flags_of(i), "--metrics"));
    rewrite_targets(target, metrics, out)?;
    let kept = actions
        .iter()
        .filter(|a| matches!(a, Action::Keep | Action::Answers))
        .count();
    writeln!(
        out,
        "[mx] reloaded: {} restarted, {kept} left running",
        act.len()
    )?;
    fleet.hint_lines(out, "[mx] next: ", "", &[("status", "one line per host")])?;
    Ok(0)
}

/// What to do on each host, by what its probe found (the table at the top),
/// given `target`, the matrix the hosts should run. A host without a stamp
/// starts with the flags of the first host that has one.
fn actions(found: &[Probe], target: &Matrix) -> Vec<Action> {
    let fleet_flags = found
        .iter()
        .find_map(|p| p.flags.clone())
        .unwrap_or_else(|| vec!["--interval".to_string(), "5".to_string()]);
    let stamped = |p: &Probe| p.flags.clone().unwrap_or_else(|| fleet_flags.clone());
    let inbound = stamp::inbound_prints(target);
    // The same rates in (its answer budget), where the stamp says them.
    let same_in = |p: &Probe, i: usize| p.inbound.as_ref().is_none_or(|v| *v == inbound[i]);
    found
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let running = p.state == "running";
            match (&p.fingerprint, running) {
                (None, true) => Action::Unstamped,
                (None, false) => Action::Start(fleet_flags.clone()),
                (Some(_), false) => Action::Start(stamped(p)),
                (Some(fp), true) if *fp == fingerprint(target, i as u32) => match same_in(p, i) {
                    true => Action::Keep,
                    false => Action::Answers,
                },
                (Some(_), true) => Action::Restart(stamped(p)),
            }
        })
        .collect()
}

/// Says what reload will do: the running hosts it cannot touch, those left
/// alone, restarted and started. Returns the hosts to (re)start.
fn announce(fleet: &Fleet, actions: &[Action], out: &mut dyn Write) -> Result<Vec<usize>> {
    let name = |i: usize| fleet.hosts()[i].name.as_str();
    let which = |keep: fn(&Action) -> bool| -> Vec<usize> {
        (0..actions.len()).filter(|&i| keep(&actions[i])).collect()
    };
    for i in which(|a| matches!(a, Action::Unstamped)) {
        writeln!(
            out,
            "[mx] {}: running, and carries no stamp -- `{} && {}` brings it under reload",
            name(i),
            fleet.hint("stop"),
            fleet.hint("start")
        )?;
    }
    let kept = which(|a| matches!(a, Action::Keep | Action::Answers)).len();
    if kept > 0 {
        writeln!(
            out,
            "[mx] unchanged, left running: {kept} of {} host(s)",
            actions.len()
        )?;
    }
    let names = |list: &[usize]| list.iter().map(|&i| name(i)).collect::<Vec<_>>().join(", ");
    let answers = which(|a| matches!(a, Action::Answers));
    if !answers.is_empty() {
        writeln!(
            out,
            "[mx] the rates into {} host(s) changed, and nothing else of theirs: they re-read what they answer, and run on: {}",
            answers.len(),
            names(&answers)
        )?;
    }
    let restart = which(|a| matches!(a, Action::Restart(_)));
    if !restart.is_empty() {
        writeln!(
            out,
            "[mx] matrix changed for {} host(s): {}",
            restart.len(),
            names(&restart)
        )?;
    }
    let start = which(|a| matches!(a, Action::Start(_)));
    if !start.is_empty() {
        writeln!(
            out,
            "[mx] not running, will start: {} host(s): {}",
            start.len(),
            names(&start)
        )?;
    }
    Ok(which(|a| a.flags().is_some()))
}

/// Copies the new matrix to each of `hosts` (running, its own flows
/// unchanged) and has its agent re-read what it answers from it, waiting
/// for its stamp to say so; false when a host did not (said which).
fn reread_answers(
    fleet: &Fleet,
    hosts: &[usize],
    staged: &Staged,
    target: &Matrix,
    out: &mut dyn Write,
) -> Result<bool> {
    let inbound = stamp::inbound_prints(target);
    let logs = fleet.hint("logs");
    let done = fleet.step(
        out,
        "copying the matrix, re-reading what they answer",
        hosts,
        false,
        |host| {
            let i = fleet
                .hosts()
                .iter()
                .position(|h| h.name == host.name)
                .expect("a fleet host");
            let dir = fleet.dir(host);
            let matrix = match staged.copy_of_matrix_for(host) {
                Ok(matrix) => matrix,
                Err(failed) => return failed,
            };
            let copied =
                fleet
                    .transport
                    .push(host, &[matrix.path().to_path_buf()], &dir, COPY_TIMEOUT);
            if !copied.ok() {
                return copied;
            }
            fleet.transport.run(
                host,
                &scripts::answers(&dir, &inbound[i], &logs),
                STEP_TIMEOUT,
            )
        },
    )?;
    Ok(done.len() == hosts.len())
}

/// Stops the agent on `host` and copies the staged files; on success the outcome's
/// text says what the host was (`restarted (was running)`, ...).
fn stop_and_deploy(fleet: &Fleet, host: &Host, staged: &Staged) -> Outcome {
    // Stop first: a running executable cannot be overwritten (ETXTBSY), and
    // one unlinked under a running agent would hide it from stop.
    let was = stop_agent(fleet, host);
    let copied = deploy(fleet, host, staged, false);
    if !copied.ok() {
        return copied;
    }
    Outcome {
        code: 0,
        text: was.to_string(),
    }
}

/// Stops the agent on `host`: what the host was, in reload's words.
fn stop_agent(fleet: &Fleet, host: &Host) -> &'static str {
    let stopped = fleet
        .transport
        .run(host, &scripts::stop(&fleet.dir(host)), STEP_TIMEOUT);
    // What the stop script found: `stopped` and `killed` are agents that
    // were running.
    match stopped.text.lines().last() {
        Some("stopped") => "restarted (was running)",
        Some("killed") => "restarted (was running, and had to be killed)",
        Some("not-deployed") => "started (was not deployed)",
        _ => "started (was not running)",
    }
}

/// [`stop_and_deploy`] on each of `hosts`: a transport that broadcasts
/// (Slurm) stops every agent first, then copies to all hosts at once.
fn stop_and_deploy_all(fleet: &Fleet, hosts: &[usize], staged: &Staged) -> Vec<Outcome> {
    if !fleet.transport.broadcasts() {
        return fleet.each(hosts, |host| stop_and_deploy(fleet, host, staged));
    }
    let was = fleet.each(hosts, |host| stop_agent(fleet, host));
    deploy_all(fleet, hosts, staged, false)
        .into_iter()
        .zip(was)
        .map(|(copied, was)| match copied.ok() {
            true => Outcome {
                code: 0,
                text: was.to_string(),
            },
            false => copied,
        })
        .collect()
}

/// The restart of the hosts in `act`, together: stop and copy; with
/// `disks`, write every data file (each with the `--disk-size` its host was
/// started with), so that no restarted agent sends while a peer's disk is
/// still busy writing; then launch them all armed, and give them one start
/// instant, as `mx start` does: hosts reload starts begin together, never
/// one by one. The hosts that came back, or `None` when nothing could be
/// started (said so).
fn restart_together<'a>(
    fleet: &Fleet,
    act: &[usize],
    staged: &Staged,
    flags_of: &(dyn Fn(usize) -> &'a [String] + Sync),
    disks: bool,
    out: &mut dyn Write,
) -> Result<Option<Vec<usize>>> {
    writeln!(
        out,
        "[mx] stopping, then deploying agent + matrix on {} hosts",
        act.len()
    )?;
    let stopped = stop_and_deploy_all(fleet, act, staged);
    let deployed = fleet.print(out, act, &stopped, true)?;
    let size_of = |i: usize| value_of(flags_of(i), "--disk-size");
    if disks && !super::start::prepare_disks(fleet, &deployed, &size_of, out)? {
        return Ok(None);
    }
    // Armed, then one instant for all, on the longest interval among them.
    let launch = super::start::launch_armed(fleet, &deployed, flags_of, false, out)?;
    let interval = deployed
        .iter()
        .map(|&i| interval_of(flags_of(i)))
        .fold(0.0, f64::max);
    let margins = super::start::margins_or_stop(fleet, &launch, interval, out)?;
    if launch.started.is_empty() {
        return Ok(None);
    }
    let begin = instants::start_instant(wall_now(), interval, margins.start);
    let go = Go {
        begin,
        grace: margins.grace,
        end: None,
        scale: None,
        by: BeganBy::Reload,
    };
    let went = super::start::give_start(fleet, &launch.started, &go, out)?;
    // What each host was, beside its name.
    let was: Vec<Outcome> = went
        .iter()
        .map(|&i| {
            let at = act.iter().position(|&a| a == i).expect("an acted host");
            Outcome {
                code: 0,
                text: stopped[at].text.clone(),
            }
        })
        .collect();
    fleet.print(out, &went, &was, false)?;
    if !went.is_empty() {
        writeln!(
            out,
            "[mx] {} host(s) begin together at {}",
            went.len(),
            units::local_clock(begin)
        )?;
    }
    Ok(Some(went))
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
    let shown = crate::fleet::shell_join(flags);
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
    super::agent::check_flags(&parsed.flags).map_err(|e| {
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

    #[test]
    fn a_host_whose_senders_changed_re_reads_what_it_answers_and_runs_on() {
        let text = "src\\dst,a,b,c\na,,100,100\nb,100,,100\nc,100,100,\n";
        let before = Matrix::parse(text.as_bytes(), "m.csv").unwrap();
        let edited = text.replace("a,,100,100", "a,,100,200");
        let after = Matrix::parse(edited.as_bytes(), "m.csv").unwrap();
        let inbound = stamp::inbound_prints(&before);
        let probes: Vec<Probe> = (0..3)
            .map(|i| {
                parse_probe(&format!(
                    "state=running\nfp={}\nin={}\nflags=--interval 5\n",
                    fingerprint(&before, i),
                    inbound[i as usize]
                ))
            })
            .collect();
        let restarted: Vec<bool> = actions(&probes, &after)
            .iter()
            .map(|a| matches!(a, Action::Restart(_)))
            .collect();
        // a's row changed; c answers a at a new rate; b is untouched.
        // a's row changed; c answers a at a new rate, and re-reads it in
        // place; b is untouched.
        assert_eq!(restarted, [true, false, false]);
        let all = actions(&probes, &after);
        assert!(matches!(all[1], Action::Keep));
        assert!(matches!(all[2], Action::Answers));
        // A stamp without the line (the original's) is judged by its flows.
        let mut old = probes.clone();
        old[2].inbound = None;
        assert!(matches!(actions(&old, &after)[2], Action::Keep));
    }
}
