//! `mx start`: deploy, launch every agent armed (listening and answering,
//! sending nothing), then give every host the one start instant, with margins
//! the clocks and the ssh fan-out allow: every agent listens before any flow
//! sends, so the run's beginning is nobody's loss.

use std::io::Write;
use std::time::Instant;

use crate::agent::disk::file;
use crate::cli::{RunFlags, StartArgs};
use crate::error::{EXIT_PROBLEMS, Error, Result};
use crate::fleet::deploy::{AGENT_UNCHANGED, agent_packed, deploy_all, stage};
use crate::fleet::packing::Packing;
use crate::fleet::scripts::{BeganBy, Go};
use crate::fleet::transport::Outcome;
use crate::fleet::{
    Fleet, PREPARE_TIMEOUT, Refusal, STEP_TIMEOUT, bind, instants, launch, scripts,
};
use crate::matrix::resolve::resolved;
use crate::units::{self, local_clock, wall_now};

/// A layered matrix switches layers on report ticks: its dwell must be a whole
/// multiple of the interval.
pub(crate) fn check_dwell_interval(fleet: &Fleet, interval: f64) -> Result<()> {
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

pub fn run(args: &StartArgs, out: &mut dyn Write) -> Result<u8> {
    super::agent::check_flags(&args.run.agent_flags)?;
    let fleet = super::open_fleet(&args.fleet)?;
    Ok(start_fleet(&fleet, &args.run, None, None, out)?.code)
}

/// `1 host`, `3 hosts`.
fn hosts_text(n: usize) -> String {
    if n == 1 {
        "1 host".to_string()
    } else {
        format!("{n} hosts")
    }
}

/// Whether `outcome` is a host that declined because its agent already runs.
fn is_already_running(outcome: &Outcome) -> bool {
    !outcome.ok()
        && outcome
            .text
            .lines()
            .last()
            .is_some_and(|l| l.starts_with(scripts::ALREADY_RUNNING))
}

/// A host whose agent already runs declined to start another: a refusal,
/// said as one, never a failure.
const ALREADY_RUNNING_HOSTS: Refusal = ("already running", is_already_running);

/// How many of the failed `outcomes` are hosts whose agent already runs.
fn already_running(outcomes: &[Outcome]) -> usize {
    outcomes.iter().filter(|o| is_already_running(o)).count()
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
/// instant (and, with `end_after`, the end instant that many seconds later;
/// with `scale`, the factor its flows' matrix rates begin at).
pub(crate) fn start_fleet(
    fleet: &Fleet,
    run: &RunFlags,
    end_after: Option<f64>,
    scale: Option<f64>,
    out: &mut dyn Write,
) -> Result<Started> {
    // The agents' own refusals, before anything is copied (`start` and `run`
    // check before the fleet is even opened: this is for every other caller).
    super::agent::check_flags(&run.agent_flags)?;
    let interval = run.agent_flags.interval;
    fleet.matrix.print_warnings();
    check_dwell_interval(fleet, interval)?;
    let failed = |code| Started {
        code,
        start: None,
        end: None,
        grace: instants::START_MARGIN,
    };
    let Some(hosts) = ready_hosts(fleet, run, out)? else {
        return Ok(failed(EXIT_PROBLEMS));
    };
    // 1. Every agent up, listening and answering, sending nothing yet.
    let logs_hint = fleet.hint("logs");
    let flags = run.agent_flags.to_args();
    let launch = launch_armed(fleet, &hosts, &|_| &flags, true, out)?;
    // 2. The instants, with margins the clocks allow.
    let margins = margins_or_stop(fleet, &launch, interval, out)?;
    if let Some(note) = &margins.note {
        writeln!(out, "[mx] {note}")?;
    }
    if launch.started.is_empty() {
        let running = already_running(&launch.outcomes);
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
    let lasts = end_after.is_some() || scale.is_some() || run.agent_flags.duration > 0.0;
    let begin = instants::begin(wall_now(), interval, margins.start, lasts);
    let end = end_after.map(|seconds| begin + seconds);
    // 3. The go: every host learns the one start instant.
    let go = Go {
        begin,
        grace: margins.grace,
        end,
        scale,
        by: BeganBy::Start,
    };
    let went = give_start(fleet, &launch.started, &go, out)?;
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
    print_running(fleet, begin, out)?;
    if code == 0 && end_after.is_none() && scale.is_none() {
        // Done with the hosts: their shells close while the margin runs
        // out, not once the flows load them (on 200 lab hosts sharing two
        // cores, closing after the start instant took 10 s).
        out.flush()?;
        fleet.transport.close_sessions();
        wait_then_hint(fleet, begin, out)?;
    }
    Ok(Started {
        code,
        start: Some(begin),
        end,
        grace: margins.grace,
    })
}

/// The start and end margins the launched agents' clocks allow; when their
/// clocks are too far apart, nothing was sent yet: the armed agents are
/// stopped, and the run refused.
pub(super) fn margins_or_stop(
    fleet: &Fleet,
    launch: &Launch,
    interval: f64,
    out: &mut dyn Write,
) -> Result<instants::Margins> {
    match instants::margins(&launch.offsets, interval, launch.seconds) {
        Ok(m) => Ok(m),
        Err(refusal) => {
            fleet.step(
                out,
                "stopping the armed agents",
                &launch.started,
                true,
                |host| {
                    fleet
                        .transport
                        .run(host, &scripts::stop(&fleet.dir(host)), STEP_TIMEOUT)
                },
            )?;
            Err(refusal)
        }
    }
}

/// `mx start` returns with the flows running (at most a margin and an
/// interval away), so that `mx status` straight after it shows them going;
/// then the next commands.
fn wait_then_hint(fleet: &Fleet, begin: f64, out: &mut dyn Write) -> Result<()> {
    let wait = begin - wall_now();
    if wait > 0.0 && !fleet.dry_run {
        std::thread::sleep(std::time::Duration::from_secs_f64(wait));
    }
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
    Ok(())
}

/// Every host made ready to launch: deployed (unless `--no-deploy`), and with
/// its data file in a disk run. `None` when one is not (said why): a fleet
/// starts whole or not at all.
fn ready_hosts(fleet: &Fleet, run: &RunFlags, out: &mut dyn Write) -> Result<Option<Vec<usize>>> {
    let hosts = if run.no_deploy {
        fleet.all()
    } else {
        match deploy_fleet(fleet, run, out)? {
            Some(hosts) => hosts,
            None => return Ok(None),
        }
    };
    let size = run.agent_flags.disk_size.as_deref();
    if super::data_files_needed(&fleet.matrix) && !prepare_disks(fleet, &hosts, &|_| size, out)? {
        return Ok(None);
    }
    Ok(Some(hosts))
}

/// Writes the data file on each of `hosts` (or finds an earlier run's), all
/// before any agent starts: an agent would write its own at start, while its
/// peers already send to it, and a gigabyte takes a while. `size_of(h)` is
/// host `h`'s `--disk-size` as given (checked). Returns whether every host
/// has its file; says so when not.
pub(super) fn prepare_disks<'a>(
    fleet: &Fleet,
    hosts: &[usize],
    size_of: &(dyn Fn(usize) -> Option<&'a str> + Sync),
    out: &mut dyn Write,
) -> Result<bool> {
    if hosts.is_empty() {
        return Ok(true);
    }
    let mut sizes = Vec::with_capacity(hosts.len());
    for &h in hosts {
        sizes.push(match size_of(h) {
            Some(text) => file::parse_size(text).map_err(Error::refused)?,
            None => file::DEFAULT_SIZE,
        });
    }
    sizes.dedup();
    let what = match sizes[..] {
        [size] => format!("a {} data file", file::size_text(size)),
        _ => "each host's data file at the --disk-size it runs with".to_string(),
    };
    let label = format!("disk: preparing {what} (written once, reused by later runs)");
    let index = |name: &str| fleet.matrix.index_of(name).expect("a matrix host") as usize;
    let prepared = fleet.step(out, &label, hosts, false, |host| {
        let script = scripts::prepare_disk(&fleet.dir(host), size_of(index(&host.name)));
        fleet.transport.run(host, &script, PREPARE_TIMEOUT)
    })?;
    if prepared.len() < hosts.len() {
        writeln!(
            out,
            "[mx] no agent was started: every host needs its data file first"
        )?;
        return Ok(false);
    }
    Ok(true)
}

/// Copies the agent and the matrix (retargeted by `--bind`, or with names
/// resolved here) to every host. The hosts to start, or `None` when one is
/// not ready (said why): a fleet starts whole or not at all.
fn deploy_fleet(fleet: &Fleet, run: &RunFlags, out: &mut dyn Write) -> Result<Option<Vec<usize>>> {
    let retargeted = match &run.agent_flags.bind {
        Some(spec) => Some(bind::retarget(fleet, spec, out)?),
        None => resolved(&fleet.matrix)?,
    };
    let staged = stage(fleet, &run.agent.resolve()?, retargeted.as_ref())?;
    let hosts = fleet.all();
    writeln!(
        out,
        "[mx] deploying agent + matrix on {} hosts",
        hosts.len()
    )?;
    out.flush()?;
    let outcomes = deploy_all(fleet, &hosts, &staged, true);
    let ready = fleet.print_refusing(out, &hosts, &outcomes, true, Some(ALREADY_RUNNING_HOSTS))?;
    let unchanged = outcomes
        .iter()
        .filter(|o| o.ok() && o.text == AGENT_UNCHANGED)
        .count();
    if unchanged > 0 {
        writeln!(
            out,
            "[mx] {unchanged} of {} hosts had this agent already (same sha256): only the matrix was copied there",
            hosts.len()
        )?;
    }
    for how in Packing::ALL {
        let said = agent_packed(how);
        let packed = outcomes.iter().filter(|o| o.ok() && o.text == said).count();
        if let (true, Some((small, whole))) = (packed > 0, staged.packed_sizes(how)) {
            writeln!(
                out,
                "[mx] the agent went packed to {packed} of {} hosts ({}: {} for its {}), unpacked there",
                hosts.len(),
                how.tool(),
                crate::units::bytes(small as f64),
                crate::units::bytes(whole as f64)
            )?;
        }
    }
    let unready = hosts.len() - ready.len();
    if unready == 0 {
        return Ok(Some(ready));
    }
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
    Ok(None)
}

/// The armed launch on every host: what each said, the hosts that came up,
/// their clocks as read when each answered, and how long the fan-out took.
pub(super) struct Launch {
    pub(super) outcomes: Vec<Outcome>,
    pub(super) started: Vec<usize>,
    offsets: Vec<instants::Offset>,
    seconds: f64,
}

/// Launches the agents armed: listening and answering, sending nothing;
/// each with the flags `flags_of` its host, its report started afresh when
/// `wipe` (a start) or kept (a reload's restart).
pub(super) fn launch_armed<'a>(
    fleet: &Fleet,
    hosts: &[usize],
    flags_of: &(dyn Fn(usize) -> &'a [String] + Sync),
    wipe: bool,
    out: &mut dyn Write,
) -> Result<Launch> {
    let launched_at = Instant::now();
    writeln!(out, "[mx] starting agents on {} hosts", hosts.len())?;
    out.flush()?;
    let answers = launch::launch(fleet, hosts, flags_of, wipe);
    let seconds = launched_at.elapsed().as_secs_f64();
    let mut offsets = Vec::new();
    let mut outcomes = Vec::with_capacity(answers.len());
    for (&h, (mut outcome, sent, returned)) in hosts.iter().zip(answers) {
        if let Some(remote) = instants::clock_of(&outcome.text) {
            let name = &fleet.hosts()[h].name;
            offsets.push(instants::Offset::between(name, remote, sent, returned));
        }
        outcome.text = instants::without_clock(&outcome.text);
        outcomes.push(outcome);
    }
    let started = fleet.print_refusing(out, hosts, &outcomes, true, Some(ALREADY_RUNNING_HOSTS))?;
    Ok(Launch {
        outcomes,
        started,
        offsets,
        seconds,
    })
}

/// Gives every started host the start instant (and the end and the scale,
/// if any); names a host that had it only after it passed. Returns the
/// hosts told.
pub(super) fn give_start(
    fleet: &Fleet,
    started: &[usize],
    go: &Go,
    out: &mut dyn Write,
) -> Result<Vec<usize>> {
    let logs_hint = fleet.hint("logs");
    let late = std::sync::Mutex::new(Vec::new());
    let begin = go.begin;
    let went = fleet.step(out, "", started, true, |host| {
        let script = scripts::go(&fleet.dir(host), go, &logs_hint);
        let outcome = fleet.transport.run(host, &script, STEP_TIMEOUT);
        let returned = wall_now();
        if outcome.ok() && returned > begin && !fleet.dry_run {
            late.lock()
                .expect("unpoisoned")
                .push((host.name.clone(), returned - begin));
        }
        outcome
    })?;
    for (host, by) in late.into_inner().expect("unpoisoned") {
        writeln!(
            out,
            "[mx] {host} had the start instant only {by:.1}s after it passed (slow ssh?): it starts late, and its first interval is left out of summaries"
        )?;
    }
    Ok(went)
}

/// What now runs, and when its flows begin.
fn print_running(fleet: &Fleet, begin: f64, out: &mut dyn Write) -> Result<()> {
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
    let disk = if m.config.disk.is_on() {
        format!(", disk={}", m.config.disk.name())
    } else {
        String::new()
    };
    let dscp = m.config.dscp.setting(", ");
    writeln!(
        out,
        "[mx] running: {} hosts, {} flows, {} -> {} bytes, {offered}{disk}{dscp}",
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
    Ok(())
}
