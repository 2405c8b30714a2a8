//! `mx doctor`: is the fleet ready? Locally: ssh, scp, the matrix and the agent
//! binary's architecture. On every host: ssh works, the architecture can run the
//! agent, cores, the hard open-file limit (FDS-TOO-LOW when below what the
//! matrix needs of that host), whether an agent already runs, and the host's
//! clock offset from this machine's (CLOCK-OFF past what `mx start` takes
//! without widening its margins: the fleet's flows begin and end at one
//! wall-clock instant).

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use crate::agent::disk::file;
use crate::cli::{DoctorArgs, Via};
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::transport::Outcome;
use crate::fleet::unreachable::Cause;
use crate::fleet::{Fleet, LOOK_TIMEOUT, instants, scripts};
use crate::matrix::Host;
use crate::matrix::schedule::Schedule;
use crate::units::{self, wall_now};

/// The agents' report interval when `mx start` is not told otherwise.
const DEFAULT_INTERVAL: f64 = 5.0;

/// `uname -m` of an ELF executable, from its header's e_machine field.
fn elf_arch(path: &Path) -> Option<&'static str> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.get(..4)? != b"\x7fELF" {
        return None;
    }
    let machine = u16::from_le_bytes([*bytes.get(18)?, *bytes.get(19)?]);
    Some(match machine {
        0x3e => "x86_64",
        0xb7 => "aarch64",
        0x03 => "i686",
        0xf3 => "riscv64",
        0x15 => "ppc64le",
        _ => "unknown",
    })
}

fn on_path(command: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(command).is_file()))
}

/// Descriptors the agent on host `index` needs, for its busiest layer (one
/// stream per pair); in a disk run (`disk_depth` given) with the handles of
/// its disk threads too, for the workers `mx start` runs on its `cores`.
fn fds_needed(fleet: &Fleet, index: u32, cores: usize, disk_depth: Option<usize>) -> u64 {
    let schedule = Schedule::new(&fleet.matrix);
    let flows = (0..schedule.layer_count())
        .map(|l| schedule.layer_flows(index, l).count())
        .max()
        .unwrap_or(0);
    let disk = disk_depth.map_or(0, |depth| {
        let workers = crate::agent::worker_count(None, flows, cores);
        crate::agent::limits::disk_handles(workers, depth)
    });
    crate::agent::limits::fds_needed(flows, fleet.matrix.config.rotation.is_some(), disk)
}

/// What the host checks found, gathered as the hosts answer.
#[derive(Default)]
struct Findings {
    wrong_arch: Mutex<Vec<String>>,
    low_fds: Mutex<Vec<String>>,
    low_disk: Mutex<Vec<String>>,
    /// Hosts whose remote directory mx would refuse (not this user's alone).
    unsafe_dir: Mutex<Vec<String>>,
    /// Hosts not reached, each with what ssh said stood in the way (`None`:
    /// not a cause ssh names).
    unreached: Mutex<Vec<(usize, Option<Cause>)>>,
    offsets: Mutex<Vec<instants::Offset>>,
}

pub fn run(args: &DoctorArgs, out: &mut dyn Write) -> Result<u8> {
    let depth = super::agent::disk_depth(args.disk_depth.n)?;
    let fleet = super::open_fleet(&args.fleet)?;
    fleet.matrix.print_warnings();
    let binary = args.agent.resolve()?;
    let arch = elf_arch(&binary).unwrap_or("unknown");
    local_checks(args, &fleet, &binary, arch, out)?;
    let all = fleet.all();
    let findings = Findings::default();
    let disk = super::data_files_needed(&fleet.matrix);
    let slurm = args.fleet.via == Via::Slurm;
    let reach = if slurm { "srun" } else { "ssh" };
    let label = if disk {
        format!("checking hosts ({reach} + architecture + fd limit + clock + disk space)")
    } else {
        format!("checking hosts ({reach} + architecture + fd limit + clock)")
    };
    let ok = fleet.step(out, &label, &all, false, |host| {
        check_host(&fleet, host, arch, disk.then_some(depth), &findings)
    })?;
    let wrong_arch = findings.wrong_arch.into_inner().expect("unpoisoned");
    let low_fds = findings.low_fds.into_inner().expect("unpoisoned");
    let low_disk = findings.low_disk.into_inner().expect("unpoisoned");
    let offsets = findings.offsets.into_inner().expect("unpoisoned");
    let unsafe_dir = findings.unsafe_dir.into_inner().expect("unpoisoned");
    let mut unreached = findings.unreached.into_inner().expect("unpoisoned");
    unreached.sort();
    if let Some(path) = &args.ready_hosts {
        write_ready_hosts(&fleet, &ok, path, out)?;
    }
    if ok.len() < all.len() {
        say_not_checked(&fleet, args, &unsafe_dir, &unreached, out)?;
        return Ok(EXIT_PROBLEMS);
    }
    let wrong = wrong_arch;
    if !wrong.is_empty() {
        writeln!(
            out,
            "[mx] {} host(s) cannot run this {arch} agent: {} -- build mx for them and pass --agent",
            wrong.len(),
            wrong.join(", ")
        )?;
        return Ok(EXIT_PROBLEMS);
    }
    let low = low_fds;
    if !low.is_empty() {
        writeln!(
            out,
            "[mx] {} host(s) have a hard open-file limit below the run's need: raise it (limits.conf / systemd LimitNOFILE), or use fewer peers",
            low.len()
        )?;
    }
    if !low_disk.is_empty() {
        writeln!(
            out,
            "[mx] {} host(s) have too little free space in {} for a {} data file (mx start's default --disk-size): {} -- free space there, or start with a smaller --disk-size",
            low_disk.len(),
            fleet.transport.shown_dir(&fleet.remote_dir),
            file::size_text(file::DEFAULT_SIZE),
            low_disk.join(", ")
        )?;
    }
    // Clocks: as `mx start` will judge them, at the default interval.
    match instants::margins(&offsets, DEFAULT_INTERVAL, 0.0) {
        Err(refusal) => {
            writeln!(out, "[mx] {}", refusal.message())?;
            return Ok(EXIT_PROBLEMS);
        }
        Ok(margins) if margins.note.is_some() => {
            let off: Vec<&str> = offsets
                .iter()
                .filter(|o| o.seconds.abs() > instants::CLOCK_TOLERANCE)
                .map(|o| o.host.as_str())
                .collect();
            writeln!(
                out,
                "[mx] {} host(s) more than {}s off this machine's clock ({}): `mx start` will widen its start and end margins for them; fix time sync (NTP, chrony) to keep runs tight",
                off.len(),
                instants::CLOCK_TOLERANCE,
                off.join(", ")
            )?;
        }
        Ok(_) => {}
    }
    if !low_disk.is_empty() {
        // `mx start` would refuse: the data files are written before any agent.
        return Ok(EXIT_PROBLEMS);
    }
    writeln!(out, "[mx] fleet looks ready: {}", fleet.hint("start"))?;
    Ok(0)
}

/// Why some hosts could not be checked: remote directories another user
/// could take over, and hosts not reached (`unreached`) and how to fix them.
fn say_not_checked(
    fleet: &Fleet,
    args: &DoctorArgs,
    unsafe_dir: &[String],
    unreached: &[(usize, Option<Cause>)],
    out: &mut dyn Write,
) -> Result<()> {
    if !unsafe_dir.is_empty() {
        writeln!(
            out,
            "[mx] {} host(s) have a remote directory another user could take over: {} -- {}",
            unsafe_dir.len(),
            unsafe_dir.join(", "),
            scripts::CHOOSE_ANOTHER
        )?;
    }
    if unreached.is_empty() {
        return Ok(());
    }
    if args.fleet.via == Via::Slurm {
        writeln!(
            out,
            "[mx] fix those nodes first (`srun --overlap -w NODE true` must work in this allocation)"
        )?;
        return Ok(());
    }
    // One line per cause, naming its hosts, with its own fix.
    let hosts = fleet.matrix.hosts();
    let target = |i: usize| match &args.fleet.user {
        Some(user) => format!("{user}@{}", hosts[i].addr),
        None => hosts[i].addr.clone(),
    };
    let mut causes: Vec<Option<Cause>> = unreached.iter().map(|&(_, c)| c).collect();
    causes.sort();
    causes.dedup();
    for cause in causes {
        let of: Vec<usize> = unreached
            .iter()
            .filter(|&&(_, c)| c == cause)
            .map(|&(i, _)| i)
            .collect();
        let names: Vec<&str> = of.iter().map(|&i| hosts[i].name.as_str()).collect();
        let (what, fix) = match cause {
            Some(cause) => (cause.what(), cause.fix(&target(of[0]))),
            None => (
                "not reached",
                format!("`ssh {}` must work (its words are above)", target(of[0])),
            ),
        };
        writeln!(out, "[mx] {}: {what} -- {fix}", names.join(", "))?;
    }
    Ok(())
}

/// Writes the hosts that passed, one `name=address` per line (a server list
/// `mx gen --servers` reads), so that a fleet with a few dead hosts is one
/// regenerate away from running.
fn write_ready_hosts(
    fleet: &Fleet,
    ready: &[usize],
    path: &Path,
    out: &mut dyn Write,
) -> Result<()> {
    let hosts = fleet.matrix.hosts();
    let text: String = ready
        .iter()
        .map(|&i| format!("{}\n", hosts[i].token))
        .collect();
    crate::files::write_atomically(path, |w| w.write_all(text.as_bytes()))?;
    writeln!(
        out,
        "[mx] wrote {} ({} of {} hosts ready): `mx gen --servers {}` makes a matrix of them",
        path.display(),
        ready.len(),
        hosts.len(),
        path.display()
    )?;
    Ok(())
}

/// This machine's side: ssh and scp (or Slurm's srun, sbcast, scontrol and
/// squeue) on the PATH, the matrix, the agent.
fn local_checks(
    args: &DoctorArgs,
    fleet: &Fleet,
    binary: &Path,
    arch: &str,
    out: &mut dyn Write,
) -> Result<()> {
    let m = &fleet.matrix;
    writeln!(out, "[mx] local checks")?;
    let tools: Vec<&str> = match args.fleet.via {
        Via::Ssh => vec![&args.fleet.ssh, &args.fleet.scp],
        Via::Slurm => vec!["srun", "sbcast", "scontrol", "squeue"],
    };
    for tool in tools {
        let name = tool.split_whitespace().next().unwrap_or("");
        let found = if on_path(name) || Path::new(name).is_file() {
            "found"
        } else {
            "MISSING (not on PATH)"
        };
        writeln!(out, "  {name:<11} {found}")?;
    }
    writeln!(
        out,
        "  {:<11} {}: {} hosts, {} flows, {} -> {} bytes, port {}",
        "matrix",
        fleet.matrix_path.display(),
        m.host_count(),
        m.flow_count(),
        m.config.tx_size,
        m.config.rx_size,
        m.config.port
    )?;
    writeln!(
        out,
        "  {:<11} {} ({arch}, static)",
        "agent",
        binary.display()
    )?;
    // Users of the original installed Python on every host for its agent.
    writeln!(
        out,
        "  {:<11} not needed on the hosts: the agent is this one static binary",
        "Python"
    )?;
    writeln!(out)?;
    Ok(())
}

/// Share of the free space the agent lets its data file take (as
/// `agent::disk::file::prepare` refuses a bigger one).
const MOST_OF_FREE: f64 = 0.95;

/// `; disk_free=<GiB>G[ DISK-SPACE-LOW(need><size>)]` from the doctor
/// script's `disk_free_kb=` and `disk_file_kb=`, and whether the default data
/// file would not fit. The free space counts an earlier data file's blocks,
/// as the agent does: a new file replaces it, one of the same size is reused.
fn disk_free(text: &str) -> (String, bool) {
    let kib = |key: &str| {
        text.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let Some(free) = kib("disk_free_kb=") else {
        return ("; disk_free=?".to_string(), false);
    };
    let room = (free + kib("disk_file_kb=").unwrap_or(0)) * 1024;
    let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
    let mut part = format!("; disk_free={:.1}G", gib(room));
    let low = file::DEFAULT_SIZE as f64 > MOST_OF_FREE * room as f64;
    if low {
        part.push_str(&format!(
            " DISK-SPACE-LOW(need>{}G)",
            units::g(gib(file::DEFAULT_SIZE))
        ));
    }
    (part, low)
}

/// Probes one host: its line (architecture, cores, fd limit, agent, clock,
/// and in a disk run, `disk_depth` given, the room for a data file), with
/// what is wrong noted in `findings`.
fn check_host(
    fleet: &Fleet,
    host: &Host,
    arch: &str,
    disk_depth: Option<usize>,
    findings: &Findings,
) -> Outcome {
    let disk = disk_depth.is_some();
    let sent = wall_now();
    let probe = fleet
        .transport
        .run(host, &scripts::doctor(&fleet.dir(host), disk), LOOK_TIMEOUT);
    let returned = wall_now();
    if probe.text.ends_with(scripts::CHOOSE_ANOTHER) {
        let mut refused = findings.unsafe_dir.lock().expect("unpoisoned");
        refused.push(host.name.clone());
    } else if !probe.ok() {
        let index = fleet.matrix.index_of(&host.name).expect("a matrix host") as usize;
        let mut unreached = findings.unreached.lock().expect("unpoisoned");
        unreached.push((index, Cause::of(&probe.text)));
    }
    if !probe.ok() || fleet.dry_run {
        return probe;
    }
    let field = |key: &str| {
        probe
            .text
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key).map(str::to_string))
            .unwrap_or_else(|| "?".to_string())
    };
    let (remote_arch, cores, hard, running) = (
        field("arch="),
        field("cores="),
        field("nofile_hard="),
        field("running="),
    );
    let mut line = format!("arch={remote_arch}");
    if remote_arch != arch {
        line.push_str(&format!(" CANNOT-RUN-AGENT({arch})"));
        let mut wrong = findings.wrong_arch.lock().expect("unpoisoned");
        wrong.push(host.name.clone());
    }
    line.push_str(&format!("; cores={cores}; nofile_hard={hard}"));
    let index = fleet.matrix.index_of(&host.name).expect("a matrix host");
    let cores_n = cores.parse::<usize>().unwrap_or(1);
    let need = fds_needed(fleet, index, cores_n, disk_depth);
    if hard != "unlimited" && hard.parse::<u64>().is_ok_and(|h| h < need) {
        line.push_str(&format!(" FDS-TOO-LOW(need>{need})"));
        let mut low = findings.low_fds.lock().expect("unpoisoned");
        low.push(host.name.clone());
    }
    line.push_str(&format!("; agent_running={running}"));
    if let Some(remote) = instants::clock_of(&probe.text) {
        let offset = instants::Offset::between(&host.name, remote, sent, returned);
        line.push_str(&format!("; clock={}", offset.text()));
        if offset.seconds.abs() > instants::CLOCK_TOLERANCE {
            line.push_str(&format!(" CLOCK-OFF({})", offset.text()));
        }
        findings.offsets.lock().expect("unpoisoned").push(offset);
    }
    if disk {
        let (part, low) = disk_free(&probe.text);
        line.push_str(&part);
        if low {
            let mut low = findings.low_disk.lock().expect("unpoisoned");
            low.push(host.name.clone());
        }
    }
    Outcome {
        code: 0,
        text: line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_free_counts_an_earlier_data_file_and_flags_room_the_agent_would_refuse() {
        assert_eq!(
            disk_free("arch=x86_64 disk_free_kb=73400320 disk_file_kb="),
            ("; disk_free=70.0G".to_string(), false)
        );
        assert_eq!(
            disk_free("disk_free_kb=524288 disk_file_kb="),
            ("; disk_free=0.5G DISK-SPACE-LOW(need>1G)".to_string(), true)
        );
        // 1 GiB free is not enough: the agent keeps 5% of it free.
        assert!(disk_free("disk_free_kb=1048576 disk_file_kb=").1);
        // The earlier 1 GiB file is reused (or replaced): its blocks count.
        assert_eq!(
            disk_free("disk_free_kb=524288 disk_file_kb=1048576"),
            ("; disk_free=1.5G".to_string(), false)
        );
        // No df there: unknown, and nothing flagged on a guess.
        assert_eq!(
            disk_free("disk_free_kb= disk_file_kb="),
            ("; disk_free=?".to_string(), false)
        );
    }
}
