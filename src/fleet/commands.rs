//! start, status, stop, clean, logs, collect and run (facts.md 4.1-4.8).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::transport::Outcome;
use super::{COPY_TIMEOUT, Fleet, LOOK_TIMEOUT, STEP_TIMEOUT, instants, scripts};
use crate::cli::{
    AgentBinary, CleanArgs, CollectArgs, LogsArgs, RunArgs, RunFlags, StartArgs, StatusArgs,
    StopArgs,
};
use crate::error::{EXIT_PROBLEMS, Error, Result};
use crate::matrix::Matrix;
use crate::units;
use crate::units::{local_clock, wall_now};

/// A layered matrix switches layers on report ticks: its dwell must be a whole
/// multiple of the interval.
pub fn check_dwell_interval(fleet: &Fleet, interval: f64) -> Result<()> {
    let Some(rotation) = fleet.matrix.config.rotation else {
        return Ok(());
    };
    let Err(suggestion) = rotation.fits_interval(interval) else {
        return Ok(());
    };
    Err(Error::refused(format!(
        "layered matrix: dwell {}s must be a whole multiple of --interval ({}s) so layer switches land on report ticks. Try --interval {}.",
        units::g(rotation.dwell),
        units::g(interval),
        units::g(suggestion)
    )))
}

/// Copies the agent binary and the matrix, both under their remote names
/// (`mx`, `matrix.csv`), into a staging directory. `deploy` is the matrix to
/// send when it differs from the file (retargeted by --bind).
pub fn stage(
    fleet: &Fleet,
    agent: &AgentBinary,
    deploy: Option<&Matrix>,
) -> Result<(tempfile::TempDir, Vec<PathBuf>)> {
    let staging =
        tempfile::tempdir().map_err(|e| Error::refused(format!("cannot stage files: {e}")))?;
    let binary = agent.resolve()?;
    let to_agent = staging.path().join(scripts::AGENT_BIN);
    std::fs::copy(&binary, &to_agent)
        .map_err(|e| Error::io(&binary, "cannot stage the agent", &e))?;
    let to_matrix = staging.path().join("matrix.csv");
    match deploy {
        Some(matrix) => matrix.save(&to_matrix)?,
        None => {
            std::fs::copy(&fleet.matrix_path, &to_matrix)
                .map_err(|e| Error::io(&fleet.matrix_path, "cannot stage the matrix", &e))?;
        }
    }
    Ok((staging, vec![to_agent, to_matrix]))
}

/// The matrix with every host name resolved to its IPv4 address on the
/// controller, when any host is named rather than numbered: the agents never
/// need DNS (ssh still goes to the name). `None` when all are addresses.
/// Two names (or a name and an address) landing on one ip:port are refused:
/// one agent would answer for both.
pub fn resolved(matrix: &Matrix) -> Result<Option<Matrix>> {
    if matrix
        .hosts()
        .iter()
        .all(|h| h.addr.parse::<std::net::Ipv4Addr>().is_ok())
    {
        return Ok(None);
    }
    let mut addrs = Vec::new();
    for host in matrix.hosts() {
        match crate::agent::identity::resolve(host) {
            Some(addr) => addrs.push(addr.ip().to_string()),
            None => {
                return Err(Error::refused(format!(
                    "host '{}': '{}' does not resolve to an IPv4 address on this machine -- fix the name or write the address in the matrix",
                    host.name, host.addr
                )));
            }
        }
    }
    let resolved = matrix.retargeted(&addrs);
    if let Some((a, b)) = crate::matrix::shared_endpoint(resolved.hosts()) {
        let (first, second) = (&matrix.hosts()[a], &matrix.hosts()[b]);
        return Err(Error::refused(format!(
            "hosts '{}' ({}) and '{}' ({}) both resolve to {}:{} -- one agent would answer for both; give each host its own address or port",
            first.name, first.addr, second.name, second.addr, addrs[a], first.port
        )));
    }
    Ok(Some(resolved))
}

/// Makes the remote dir (refusing a host whose agent runs) and copies `files`.
pub fn deploy(
    fleet: &Fleet,
    host: &crate::matrix::Host,
    files: &[PathBuf],
    check_running: bool,
) -> Outcome {
    let dir = fleet.dir(host);
    let script = if check_running {
        scripts::prepare(&dir, &fleet.hint("stop"))
    } else {
        scripts::make_dir(&dir)
    };
    let ready = fleet.transport.run(host, &script, STEP_TIMEOUT);
    if !ready.ok() {
        return ready;
    }
    let copied = fleet.transport.push(host, files, &dir, COPY_TIMEOUT);
    match (fleet.dry_run, copied.ok()) {
        (true, _) => Outcome {
            code: 0,
            text: format!("{}\n{}", ready.text, copied.text),
        },
        (false, true) => copied,
        (false, false) => Outcome {
            code: copied.code,
            text: format!("copy failed: {}", copied.text),
        },
    }
}

pub fn start(args: &StartArgs, out: &mut dyn Write) -> Result<u8> {
    crate::agent::check_flags(&args.run.agent_flags)?;
    let fleet = Fleet::open(&args.fleet)?;
    Ok(start_fleet(&fleet, &args.run, None, out)?.code)
}

/// `1 host`, `3 hosts`.
fn hosts_text(n: usize) -> String {
    if n == 1 {
        "1 host".to_string()
    } else {
        format!("{n} hosts")
    }
}

/// How many of the failed `outcomes` are hosts whose agent already runs.
fn already_running(outcomes: &[Outcome]) -> usize {
    outcomes
        .iter()
        .filter(|o| {
            !o.ok()
                && o.text
                    .lines()
                    .last()
                    .is_some_and(|l| l.starts_with(scripts::ALREADY_RUNNING))
        })
        .count()
}

/// Why no agent was started when `running` hosts already run one: what to do.
fn already_running_note(fleet: &Fleet, running: usize) -> String {
    format!(
        "the agents already run on {} -- `{}` first, or `{}` to push an edited matrix",
        hosts_text(running),
        fleet.hint("stop"),
        fleet.hint("reload")
    )
}

/// What a start achieved: its exit code, and the instants it gave the flows.
pub struct Started {
    pub code: u8,
    /// When every flow began (Unix seconds); `None` when none was given.
    pub start: Option<f64>,
    /// When they end (`mx run`), and how long the responders answer after.
    pub end: Option<f64>,
    pub grace: f64,
}

/// Deploys, launches every agent armed, then tells every host the one start
/// instant (and, with `end_after`, the end instant that many seconds later).
pub fn start_fleet(
    fleet: &Fleet,
    run: &RunFlags,
    end_after: Option<f64>,
    out: &mut dyn Write,
) -> Result<Started> {
    // The agents' own refusals, before anything is copied (`start` and `run`
    // check before the fleet is even opened: this is for every other caller).
    crate::agent::check_flags(&run.agent_flags)?;
    let interval = run.agent_flags.interval;
    fleet.matrix.print_warnings();
    check_dwell_interval(fleet, interval)?;
    let failed = |code| Started {
        code,
        start: None,
        end: None,
        grace: instants::START_MARGIN,
    };
    let mut hosts = fleet.all();
    if !run.no_deploy {
        let retargeted = match &run.agent_flags.bind {
            Some(spec) => Some(super::bind::retarget(fleet, spec, out)?),
            None => resolved(&fleet.matrix)?,
        };
        let (_staging, files) = stage(fleet, &run.agent, retargeted.as_ref())?;
        writeln!(
            out,
            "[mx] deploying agent + matrix on {} hosts",
            hosts.len()
        )?;
        let outcomes = fleet.each(&hosts, |host| deploy(fleet, host, &files, true));
        hosts = fleet.print(out, &hosts, &outcomes, true)?;
        let unready = fleet.matrix.host_count() - hosts.len();
        if unready > 0 {
            let running = already_running(&outcomes);
            let why = if running == 0 {
                "every host needs the agent and the matrix first".to_string()
            } else if running == unready {
                already_running_note(fleet, running)
            } else {
                format!(
                    "{}; and every host needs the agent and the matrix first",
                    already_running_note(fleet, running)
                )
            };
            writeln!(out, "[mx] no agent was started: {why}")?;
            return Ok(failed(EXIT_PROBLEMS));
        }
    }
    // 1. Every agent up, listening and answering, sending nothing yet.
    let flags = run.agent_flags.to_args();
    let stop_hint = fleet.hint("stop");
    let logs_hint = fleet.hint("logs");
    let offsets = std::sync::Mutex::new(Vec::new());
    let launched_at = Instant::now();
    writeln!(out, "[mx] starting agents on {} hosts", hosts.len())?;
    let outcomes = fleet.each(&hosts, |host| {
        let mut outcome = fleet.transport.run(
            host,
            &scripts::launch(
                &fleet.dir(host),
                &host.name,
                &flags,
                true,
                scripts::Begin::Armed,
                &stop_hint,
            ),
            STEP_TIMEOUT,
        );
        let returned = wall_now();
        if let Some(remote) = instants::clock_of(&outcome.text) {
            offsets
                .lock()
                .expect("unpoisoned")
                .push(instants::Offset::at_return(&host.name, remote, returned));
        }
        outcome.text = instants::without_clock(&outcome.text);
        outcome
    });
    let launch_seconds = launched_at.elapsed().as_secs_f64();
    let started = fleet.print(out, &hosts, &outcomes, true)?;
    // 2. The instants, with margins the clocks allow.
    let margins = match instants::margins(
        &offsets.into_inner().expect("unpoisoned"),
        interval,
        launch_seconds,
    ) {
        Ok(m) => m,
        Err(refusal) => {
            // Nothing was sent: the armed agents are stopped, and the run refused.
            fleet.step(out, "stopping the armed agents", &started, true, |host| {
                fleet
                    .transport
                    .run(host, &scripts::stop(&fleet.dir(host)), STEP_TIMEOUT)
            })?;
            return Err(refusal);
        }
    };
    if let Some(note) = &margins.note {
        writeln!(out, "[mx] {note}")?;
    }
    if started.is_empty() {
        let running = already_running(&outcomes);
        if running == hosts.len() {
            writeln!(
                out,
                "[mx] no agent was started: {}",
                already_running_note(fleet, running)
            )?;
        } else {
            writeln!(
                out,
                "[mx] some hosts did not start; `{logs_hint}` will tell you why"
            )?;
        }
        return Ok(failed(EXIT_PROBLEMS));
    }
    let begin = instants::start_instant(wall_now(), interval, margins.start);
    let end = end_after.map(|seconds| begin + seconds);
    // 3. The go: every host learns the one start instant.
    let late = std::sync::Mutex::new(Vec::new());
    let went = fleet.step(out, "", &started, true, |host| {
        let mut outcome = fleet.transport.run(
            host,
            &scripts::go(&fleet.dir(host), begin, margins.grace, end, &logs_hint),
            STEP_TIMEOUT,
        );
        let returned = wall_now();
        if outcome.ok() && returned > begin && !fleet.dry_run {
            late.lock()
                .expect("unpoisoned")
                .push((host.name.clone(), returned - begin));
        }
        outcome.text = instants::without_clock(&outcome.text);
        outcome
    })?;
    for (host, by) in late.into_inner().expect("unpoisoned") {
        writeln!(
            out,
            "[mx] {host} had the start instant only {by:.1}s after it passed (slow ssh?): it starts late, and its first interval is left out of summaries"
        )?;
    }
    if went.is_empty() {
        writeln!(
            out,
            "[mx] no agent was given the start instant; `{logs_hint}` will tell you why"
        )?;
        return Ok(failed(EXIT_PROBLEMS));
    }
    let code = if went.len() < fleet.matrix.host_count() {
        writeln!(
            out,
            "[mx] some hosts did not start; `{logs_hint}` will tell you why"
        )?;
        EXIT_PROBLEMS
    } else {
        0
    };
    let m = &fleet.matrix;
    let offered = if m.unpaced_count() > 0 {
        "unpaced".to_string()
    } else {
        units::pps(
            m.rows()
                .flat_map(|(_, r)| r.iter())
                .filter_map(|c| c.rate.pps())
                .sum(),
        )
    };
    writeln!(
        out,
        "[mx] running: {} hosts, {} flows, {} -> {} bytes, {offered}",
        m.host_count(),
        m.flow_count(),
        m.config.tx_size,
        m.config.rx_size
    )?;
    writeln!(
        out,
        "[mx] every agent is listening; all flows begin together at {} (in {:.1}s)",
        local_clock(begin),
        (begin - wall_now()).max(0.0)
    )?;
    if let (Some(key), Some(r)) = (m.config.shuffle, m.config.rotation) {
        writeln!(
            out,
            "[mx] layered: {} layers of {} peers, dwell {}s -- every ordered pair measured once per {} cycle; keep it running at least that long for full coverage",
            r.layers,
            key.peers,
            units::g(r.dwell),
            units::duration(f64::from(r.layers) * r.dwell)
        )?;
    }
    if code == 0 && end_after.is_none() {
        fleet.hint_lines(
            out,
            "[mx] next: ",
            "[mx]       ",
            &[
                ("status", "one line per host"),
                ("summarize", "pps / Gbps / loss / rtt"),
                ("stop", "when you are done"),
            ],
        )?;
    }
    Ok(Started {
        code,
        start: Some(begin),
        end,
        grace: margins.grace,
    })
}

pub fn status(args: &StatusArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = Fleet::open(&args.fleet)?;
    let all = fleet.all();
    // Clear the screen between looks only where there is a screen.
    let terminal = std::io::stdout().is_terminal();
    // Each host's row at the last look (its ts), to say which rows are new.
    let mut last_rows: Vec<Option<i64>> = vec![None; all.len()];
    let mut first = true;
    loop {
        if args.watch > 0.0 {
            if terminal {
                write!(out, "\x1b[2J\x1b[H")?;
            } else if !first {
                writeln!(out)?;
            }
            writeln!(
                out,
                "mx status -- {} (every {}s, ctrl-c to stop)",
                local_clock(wall_now()),
                units::g(args.watch)
            )?;
        }
        let mut outcomes = fleet.each(&all, |host| {
            fleet
                .transport
                .run(host, &scripts::status(&fleet.dir(host)), LOOK_TIMEOUT)
        });
        let now = wall_now();
        for (outcome, last) in outcomes.iter_mut().zip(last_rows.iter_mut()) {
            if !outcome.ok() || fleet.dry_run {
                continue;
            }
            let ts = row_ts(&outcome.text);
            let unchanged = !first && ts.is_some() && ts == *last;
            outcome.text = status_row(&outcome.text, now, unchanged);
            *last = ts;
        }
        let answered = fleet.print(out, &all, &outcomes, false)?;
        out.flush()?;
        if args.watch <= 0.0 {
            // Hosts that answer, running or not, are a status; one that cannot
            // be reached is a problem.
            return Ok(if answered.len() == all.len() {
                0
            } else {
                EXIT_PROBLEMS
            });
        }
        first = false;
        std::thread::sleep(Duration::from_secs_f64(args.watch));
    }
}

/// The ts of an agent's status line (`ts=<unix s> ...`), if it is one.
fn row_ts(line: &str) -> Option<i64> {
    let rest = line.strip_prefix("ts=")?;
    let (ts, _) = rest.split_once(' ')?;
    ts.parse().ok()
}

/// An agent's status line as `mx status` shows it: the row's age (seen from
/// this machine's clock) for its raw ts, `(unchanged since the last look)`
/// when `--watch` finds the row it showed before, and the target labelled
/// (`tx=4.0 kpps (target 4.0 kpps)`); the rest as the agent wrote it. Other
/// lines (NOT-RUNNING, an armed agent's note) are left alone.
pub fn status_row(line: &str, now: f64, unchanged: bool) -> String {
    let Some(ts) = row_ts(line) else {
        return line.to_string();
    };
    let rest = &line[line.find(' ').expect("row_ts found one") + 1..];
    let age = (now - ts as f64).max(0.0);
    let age = if age < 120.0 {
        format!("{}s ago", age.floor())
    } else {
        format!("{} ago", units::duration(age))
    };
    let mark = if unchanged {
        " (unchanged since the last look)"
    } else {
        ""
    };
    format!("{age}{mark}: {}", labelled_target(rest))
}

/// `tx=<sent>/<target>` as `tx=<sent> (target <target>)`, or `(unpaced)`.
fn labelled_target(fields: &str) -> String {
    let Some(at) = fields.find("tx=") else {
        return fields.to_string();
    };
    let tx_end = fields[at..].find(" rx=").map_or(fields.len(), |e| at + e);
    let tx = &fields[at + 3..tx_end];
    let Some((sent, target)) = tx.rsplit_once('/') else {
        return fields.to_string();
    };
    let target = if target == "max" {
        "(unpaced)".to_string()
    } else {
        format!("(target {target})")
    };
    format!("{}tx={sent} {target}{}", &fields[..at], &fields[tx_end..])
}

/// Ends every agent's flows at one instant, a margin from now: each stops
/// sending then, answers a grace period more and exits by itself (those still
/// running 10 s later are stopped). Prints each host's outcome.
/// Returns every host's outcome (the stop script's last line: `ended`,
/// `stopped`, `killed`, `not-running` or `not-deployed`).
fn end_fleet(fleet: &Fleet, out: &mut dyn Write, label: &str) -> Result<Vec<Outcome>> {
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

fn stop_fleet(fleet: &Fleet, out: &mut dyn Write) -> Result<bool> {
    let outcomes = end_fleet(fleet, out, "stopping agents (flows end together)")?;
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
    }
    Ok(outcomes.iter().all(Outcome::ok))
}

pub fn stop(args: &StopArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = Fleet::open(&args.fleet)?;
    Ok(if stop_fleet(&fleet, out)? {
        0
    } else {
        EXIT_PROBLEMS
    })
}

pub fn clean(args: &CleanArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = Fleet::open(&args.fleet)?;
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
        if !answer.trim().eq_ignore_ascii_case("yes") {
            if terminal {
                writeln!(out, "[mx] nothing done")?;
            } else {
                writeln!(
                    out,
                    "[mx] nothing done: standard input is not a terminal, so no one can answer -- `{} --yes` cleans without asking",
                    fleet.hint("clean")
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
    if done.len() < fleet.matrix.host_count() {
        return Ok(EXIT_PROBLEMS);
    }
    writeln!(
        out,
        "[mx] nothing of mx remains on the fleet (no packages, no sysctls, no unit files -- there never were any)"
    )?;
    Ok(0)
}

/// A host whose file could not be fetched: its name, and the earlier copy
/// kept in its place (with when that was fetched), if there is one.
pub struct Missed {
    pub host: String,
    pub earlier: Option<(PathBuf, std::time::SystemTime)>,
}

/// Fetches `file` from every host's remote dir into `into/<host><suffix>`.
/// Returns the hosts it could not fetch from.
fn fetch(
    fleet: &Fleet,
    out: &mut dyn Write,
    file: &str,
    into: &Path,
    suffix: &str,
    quiet: bool,
    missing: &str,
) -> Result<Vec<Missed>> {
    if !fleet.dry_run {
        std::fs::create_dir_all(into).map_err(|e| Error::io(into, "cannot create", &e))?;
    }
    let label = format!(
        "collecting {}s into {}/",
        if file == "agent.log" { "log" } else { "report" },
        into.display()
    );
    let done = fleet.step(out, &label, &fleet.all(), quiet, |host| {
        let to = into.join(format!("{}{suffix}", host.name));
        // Into a side file, renamed over the copy only when whole: a transfer
        // cut half way (a link going down) must not truncate what we had.
        let part = into.join(format!(".{}{suffix}.part", host.name));
        let got = fleet.transport.pull(
            host,
            &format!("{}/{file}", fleet.dir(host)),
            &part,
            COPY_TIMEOUT,
        );
        let got = if got.ok() && !fleet.dry_run {
            match std::fs::rename(&part, &to) {
                Ok(()) => got,
                Err(e) => Outcome {
                    code: 1,
                    text: format!("cannot keep {}: {e}", to.display()),
                },
            }
        } else {
            let _ = std::fs::remove_file(&part);
            got
        };
        match (got.ok(), quiet) {
            (true, false) if !fleet.dry_run => Outcome {
                code: 0,
                text: format!("-> {}", to.display()),
            },
            (true, _) => got,
            (false, _) if to.exists() => Outcome {
                code: got.code,
                text: format!("not collected, the earlier copy kept: {}", got.text),
            },
            (false, _) => Outcome {
                code: got.code,
                text: format!("{missing}: {}", got.text),
            },
        }
    })?;
    Ok(fleet
        .hosts()
        .iter()
        .enumerate()
        .filter(|(i, _)| !done.contains(i))
        .map(|(_, host)| {
            let copy = into.join(format!("{}{suffix}", host.name));
            let earlier = std::fs::metadata(&copy)
                .and_then(|m| m.modified())
                .ok()
                .map(|when| (copy, when));
            Missed {
                host: host.name.clone(),
                earlier,
            }
        })
        .collect())
}

pub fn logs(args: &LogsArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = Fleet::open(&args.fleet)?;
    let missed = fetch(
        &fleet,
        out,
        "agent.log",
        &args.output,
        ".log",
        false,
        "no log",
    )?;
    Ok(if missed.is_empty() { 0 } else { EXIT_PROBLEMS })
}

/// Collects every host's report.csv into `reports/<host>.csv`; true when
/// every host's came.
pub fn collect_reports(fleet: &Fleet, reports: &Path, out: &mut dyn Write) -> Result<bool> {
    Ok(missed_reports(fleet, reports, out)?.is_empty())
}

/// Collects every host's report.csv into `reports/<host>.csv`; returns the
/// hosts whose report did not come.
pub fn missed_reports(fleet: &Fleet, reports: &Path, out: &mut dyn Write) -> Result<Vec<Missed>> {
    fetch(
        fleet,
        out,
        "report.csv",
        reports,
        ".csv",
        true,
        "no report yet",
    )
}

/// Says, after a summary, which hosts' reports it could not collect: the
/// summary is stale for them (an earlier copy) or lacks them (none).
pub fn stale_note(out: &mut dyn Write, missed: &[Missed], hosts: usize) -> std::io::Result<()> {
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
        writeln!(out, "[mx]   {:<width$}  {what}", m.host)?;
    }
    Ok(())
}

pub fn collect(args: &CollectArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = Fleet::open(&args.fleet)?;
    let ok = collect_reports(&fleet, &args.reports.dir, out)?;
    Ok(if ok { 0 } else { EXIT_PROBLEMS })
}

/// `run --for S`: start, hold, summarize, stop. The flows begin at one
/// instant and (unless `--keep`) end at one, S seconds later: the agents end
/// themselves, and the summary covers the steady part between.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<u8> {
    crate::agent::check_flags(&args.run.agent_flags)?;
    let fleet = Fleet::open(args.fleet())?;
    let hold = if args.run.agent_flags.duration > 0.0 {
        args.run.agent_flags.duration
    } else {
        args.for_seconds
    };
    let started = start_fleet(&fleet, &args.run, (!args.keep).then_some(hold), out)?;
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
        collect_reports(&fleet, &args.report.reports.dir, out)?;
        return Ok(0);
    }
    writeln!(out)?;
    writeln!(
        out,
        "[mx] running for {}s -- ctrl-c stops the agents and summarizes early",
        units::g(hold)
    )?;
    out.flush()?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&interrupted));
    // Until the agents have ended themselves (the end, their grace, a breath);
    // with --keep, until the last interval is written.
    let interval = args.run.agent_flags.interval;
    let done_at = match started.end {
        Some(end) => end + started.grace + 0.5,
        None => begin + hold + crate::report::hold_seconds(interval) + 1.0,
    };
    while wall_now() < done_at && !interrupted.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if interrupted.load(Ordering::Relaxed) {
        writeln!(
            out,
            "[mx] interrupted -- ending every flow now, then summarizing what ran"
        )?;
        if !args.keep {
            end_fleet(&fleet, out, "ending the flows together")?;
        }
    } else if let Some(end) = started.end {
        // Every agent has its end instant: wait for each to exit (an agent
        // short of CPU writes its last rows late), so that the reports are
        // whole when collected; one still running 10 s on is stopped.
        let outcomes = fleet.each(&fleet.all(), |host| {
            fleet.transport.run(
                host,
                &scripts::end(&fleet.dir(host), end, started.grace),
                STEP_TIMEOUT,
            )
        });
        let late: Vec<usize> = (0..outcomes.len())
            .filter(|&i| outcomes[i].text.lines().last() != Some("ended"))
            .collect();
        if late.is_empty() {
            writeln!(
                out,
                "[mx] every agent ended at {} as planned",
                local_clock(end)
            )?;
        } else {
            let shown: Vec<Outcome> = late.iter().map(|&i| outcomes[i].clone()).collect();
            writeln!(out, "[mx] not every agent ended by itself:")?;
            fleet.print(out, &late, &shown, false)?;
        }
    }
    let mut report = args.report.clone();
    report.window = report.window.max(hold.min(300.0).floor());
    let summary = crate::summary::run(&report, out);
    if !args.keep {
        writeln!(
            out,
            "[mx] reports and logs stay on the hosts ({} removes them)",
            fleet.hint("clean")
        )?;
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW: &str = "ts=1796003022 tx=4.0 kpps/4.0 kpps rx=4.0 kpps serving=4.0 kpps loss=0.00% rtt_p50=112us rtt_p99=384us cpu=31%(max 33%) workers=2 peers=2 busiest_worker=13% of a core";

    #[test]
    fn a_status_row_shows_its_age_and_a_labelled_target() {
        assert_eq!(
            status_row(ROW, 1796003024.7, false),
            "2s ago: tx=4.0 kpps (target 4.0 kpps) rx=4.0 kpps serving=4.0 kpps loss=0.00% rtt_p50=112us rtt_p99=384us cpu=31%(max 33%) workers=2 peers=2 busiest_worker=13% of a core"
        );
        assert!(status_row(ROW, 1796003029.0, true).starts_with(
            "7s ago (unchanged since the last look): tx=4.0 kpps (target 4.0 kpps) rx="
        ));
        // A clock a little behind the host's: never a negative age.
        assert!(status_row(ROW, 1796003021.0, false).starts_with("0s ago: "));
        assert!(status_row(ROW, 1796003022.0 + 600.0, false).starts_with("10m00s ago: "));
        let unpaced = "ts=1796003022 tx=120.0 kpps/max rx=119.0 kpps serving=1 pps loss=0.83%";
        assert_eq!(
            status_row(unpaced, 1796003023.0, false),
            "1s ago: tx=120.0 kpps (unpaced) rx=119.0 kpps serving=1 pps loss=0.83%"
        );
        assert_eq!(
            status_row(
                "ts=1796003022 partial interval: 1 of 2 workers reported -- per-peer rows written, host totals skipped",
                1796003023.0,
                false
            ),
            "1s ago: partial interval: 1 of 2 workers reported -- per-peer rows written, host totals skipped"
        );
        for other in [
            "NOT-RUNNING",
            "NOT-DEPLOYED",
            "running (no report yet)",
            "armed: listening and answering; the flows begin at the fleet's start instant (agent.start)",
            "",
        ] {
            assert_eq!(status_row(other, 1796003023.0, false), other);
        }
        assert_eq!(row_ts(ROW), Some(1796003022));
        assert_eq!(row_ts("NOT-RUNNING"), None);
    }
}
