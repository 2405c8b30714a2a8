//! One module per sub-command. Each takes its parsed arguments and a writer for
//! standard output, prints what the user sees, and returns the exit code (or an
//! [`Error`] that `main` prints as one `mx: ...` line).

pub mod agent;
pub mod check;
pub mod clean;
pub mod collect;
pub mod compare;
pub mod demo;
pub mod doctor;
pub mod export;
pub mod generate;
pub mod help;
pub mod hints;
pub mod logs;
pub mod manual;
pub mod monitor;
pub mod reload;
pub mod report;
pub mod run;
pub mod start;
pub mod status;
pub mod status_fleet;
pub mod stop;
pub mod summarize;
pub mod trace;

use std::path::Path;

use crate::cli::{FleetArgs, Via};
use crate::error::{Error, Result};
use crate::fleet::transport::session::Sessions;
use crate::fleet::transport::slurm::{self, Allocation};
use crate::fleet::transport::{Local, Rehearsal, Slurm, Ssh, Tallied, Transport};
use crate::fleet::{self, DEFAULT_MATRIX, DEFAULT_REMOTE_DIR, Fleet};
use crate::matrix::servers::{parse_servers, read_servers};
use crate::matrix::{HostToken, Matrix};

/// How to find what unpaced flows reach, in the words gen, check and hints share:
/// an unpaced flow has no rate to weigh against a NIC or to size workers from, so
/// only a run can say. `goal` says what to find (`the ceiling`), `run` is the
/// `mx run` command to suggest; each line is printed after the caller's indent.
pub(crate) fn unpaced_ceiling(goal: &str, run: &str) -> [String; 4] {
    [
        format!("to find {goal}, run it: {run}"),
        "  `sent` in its summary is what each host managed, and `agent` its busiest worker's"
            .to_string(),
        "  share of a core: near 100%, mx is the limit, not the network (WHAT TO DO NEXT says"
            .to_string(),
        "  what to raise). To weigh a rate against your NICs, `mx check` a matrix paced near it."
            .to_string(),
    ]
}

/// Whether `matrix` runs its packets through the hosts' disks, so that every
/// host needs its data file: a disk matrix whose payloads are not all
/// header-only (the agent leaves its file alone otherwise).
pub(crate) fn data_files_needed(matrix: &Matrix) -> bool {
    let c = &matrix.config;
    !crate::agent::disk::DiskWork::of(c.disk, c.tx_size, c.rx_size).is_none()
}

/// The fleet `args` locate: the matrix, and the transport their flags ask for.
pub(crate) fn open_fleet(args: &FleetArgs) -> Result<Fleet> {
    fleet::check_remote_dir(&args.remote_dir)?;
    let matrix = Matrix::load(&args.matrix)?;
    let split = |text: &str| {
        text.split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let user = args
        .user
        .clone()
        .or_else(|| std::env::var("SSH_USER").ok().filter(|u| !u.is_empty()));
    let ssh_words = split(&args.ssh);
    // Share connections unless the user's own ssh command already manages
    // them, or no ssh is run (--local, --via slurm). A dry run shows the
    // same options, and creates nothing.
    let sharing = args.local.is_none()
        && args.via == Via::Ssh
        && !ssh_words
            .iter()
            .any(|w| w.contains("ControlPath") || w.contains("ControlMaster"));
    let ssh = Ssh {
        ssh: ssh_words,
        scp: split(&args.scp),
        user,
        control_dir: match (sharing, args.dry_run()) {
            (false, _) => None,
            (true, true) => Some(fleet::transport::control_dir_path()),
            (true, false) => fleet::transport::control_dir(),
        },
        sessions: Sessions::for_jobs(args.jobs),
    };
    if ssh.ssh.is_empty() || ssh.scp.is_empty() {
        return Err(Error::refused("MX_SSH / MX_SCP must name a command"));
    }
    if let Some(root) = &args.local {
        check_loopback(&matrix, root)?;
    }
    let local = match &args.local {
        // Absolute: the scripts run from each host's own directory.
        Some(root) => Some(Local {
            root: std::path::absolute(root).map_err(|e| Error::io(root, "cannot use", &e))?,
            sessions: Sessions::for_jobs(args.jobs),
        }),
        None => None,
    };
    let transport: Box<dyn Transport> = match (args.via, local, args.dry_run()) {
        (Via::Slurm, Some(_), _) => {
            return Err(Error::refused(
                "--via slurm and --local do not go together: --local runs every host on this machine, --via slurm on the nodes of a Slurm allocation",
            ));
        }
        (Via::Slurm, None, dry_run) => {
            let slurm = open_slurm(args, &matrix)?;
            if dry_run {
                Box::new(Tallied::new(Rehearsal::Slurm(slurm)))
            } else {
                Box::new(slurm)
            }
        }
        (Via::Ssh, Some(local), true) => Box::new(Tallied::new(Rehearsal::Local(local))),
        (Via::Ssh, Some(local), false) => Box::new(local),
        (Via::Ssh, None, true) => Box::new(Tallied::new(Rehearsal::Ssh(ssh))),
        // Sessions for the system's OpenSSH only (a dry run opens none).
        (Via::Ssh, None, false) if !fleet::transport::is_openssh(&ssh.ssh) => Box::new(Ssh {
            sessions: Sessions::none(args.jobs),
            ..ssh
        }),
        (Via::Ssh, None, false) => Box::new(ssh),
    };
    if args.jobs == 0 {
        return Err(Error::refused("--jobs must be at least 1"));
    }
    let local_here = match (&args.local, args.via) {
        (None, Via::Ssh) => local_fleet_here(&matrix),
        _ => None,
    };
    Ok(Fleet {
        matrix,
        matrix_path: args.matrix.clone(),
        transport,
        jobs: args.jobs,
        remote_dir: args.remote_dir.clone(),
        dry_run: args.dry_run(),
        dry_run_all: args.dry_run_all(),
        locator: locator(args),
        local_here,
    })
}

/// Whether `addr` (a matrix host's address) is this machine's loopback:
/// 127.0.0.0/8 or ::1, or a name that resolves to nothing else; `None` for
/// a name that resolves to nothing (refused later, in its own words).
fn is_loopback(addr: &str) -> Option<bool> {
    if let Ok(ip) = addr.parse::<std::net::IpAddr>() {
        return Some(ip.is_loopback());
    }
    use std::net::ToSocketAddrs;
    let found: Vec<std::net::SocketAddr> = (addr, 0).to_socket_addrs().ok()?.collect();
    (!found.is_empty()).then(|| found.iter().all(|a| a.ip().is_loopback()))
}

/// `--local` runs every host on this machine, on a loopback address of its
/// own: a matrix host outside loopback would send from an address that is
/// not this machine's, to one that is someone else's.
fn check_loopback(matrix: &Matrix, root: &std::path::Path) -> Result<()> {
    let outside: Vec<String> = matrix
        .hosts()
        .iter()
        .filter(|h| is_loopback(&h.addr) == Some(false))
        .map(|h| format!("{}={}", h.name, h.addr))
        .collect();
    if outside.is_empty() {
        return Ok(());
    }
    let shown = if outside.len() > 4 {
        format!(
            "{}, ... ({} in all)",
            outside[..4].join(", "),
            outside.len()
        )
    } else {
        outside.join(", ")
    };
    Err(Error::refused(format!(
        "--local {}: every host runs on this machine, on a loopback address of its own (127.x.y.z or ::1), and these are not: {shown} -- give them 127.x addresses in the server list (h1=127.0.1.1, h2=127.0.1.2, ...) and mx gen again",
        root.display()
    )))
}

/// A directory here that holds a local fleet of `matrix`'s hosts (a
/// sandbox per host, as `--local DIR` makes), when every host is on
/// loopback: a command without `--local` would ssh to them instead.
fn local_fleet_here(matrix: &Matrix) -> Option<std::path::PathBuf> {
    let first = &matrix.hosts().first()?.name;
    if !matrix
        .hosts()
        .iter()
        .all(|h| is_loopback(&h.addr) == Some(true))
    {
        return None;
    }
    std::fs::read_dir(".")
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|dir| dir.join(first).join("var/tmp").is_dir())
        .map(|dir| {
            dir.strip_prefix(".")
                .map(std::path::Path::to_path_buf)
                .unwrap_or(dir)
        })
}

/// The Slurm transport for `matrix`: the allocation this shell is in, each
/// matrix host mapped to one of its nodes.
fn open_slurm(args: &FleetArgs, matrix: &Matrix) -> Result<Slurm> {
    // Relative to what? Each node's srun starts in `/`: a node-local path
    // says where the files go.
    if !args.remote_dir.starts_with('/') {
        return Err(Error::refused(format!(
            "--via slurm needs an absolute --remote-dir on the nodes (a node-local directory such as {DEFAULT_REMOTE_DIR}), not '{}'",
            args.remote_dir
        )));
    }
    let alloc = Allocation::current("--via slurm", Some(matrix.host_count()))?;
    let node_of = slurm::map_hosts(matrix.hosts(), &alloc)?;
    Ok(Slurm {
        job: alloc.job,
        node_of,
    })
}

/// The server list `--servers` names: the file, or with `slurm` the nodes of
/// the Slurm allocation this shell is in (`./slurm` is a file so named).
pub(crate) fn read_server_list(path: &Path) -> Result<Vec<HostToken>> {
    if path != Path::new("slurm") {
        return read_servers(path);
    }
    let alloc = Allocation::current("--servers slurm", None)?;
    parse_servers(
        &alloc.server_list(),
        &format!("the Slurm allocation (job {})", alloc.job),
    )
}

/// The flags a suggested command needs to reach the same fleet as this one
/// (` --local DIR`, ` --matrix FILE` and ` --remote-dir DIR` when not the
/// defaults, ` --user USER` when one was given, ` --via slurm`), shell-quoted, each with a
/// leading space: `mx status` + this is a command that works as typed.
pub fn locator(args: &FleetArgs) -> String {
    let mut words: Vec<String> = Vec::new();
    if let Some(local) = &args.local {
        words.extend(["--local".to_string(), local.display().to_string()]);
    }
    if args.matrix != std::path::Path::new(DEFAULT_MATRIX) {
        words.extend(["--matrix".to_string(), args.matrix.display().to_string()]);
    }
    if args.remote_dir != DEFAULT_REMOTE_DIR {
        words.extend(["--remote-dir".to_string(), args.remote_dir.clone()]);
    }
    if let Some(user) = &args.user {
        words.extend(["--user".to_string(), user.clone()]);
    }
    if args.via == Via::Slurm {
        words.extend(["--via".to_string(), "slurm".to_string()]);
    }
    if words.is_empty() {
        String::new()
    } else {
        format!(" {}", fleet::shell_join(&words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locator_carries_what_finds_this_fleet_again_quoted() {
        let plain = FleetArgs {
            matrix: DEFAULT_MATRIX.into(),
            user: None,
            jobs: 64,
            remote_dir: DEFAULT_REMOTE_DIR.into(),
            dry_run: None,
            local: None,
            via: Via::Ssh,
            ssh: "ssh".into(),
            scp: "scp".into(),
        };
        assert_eq!(locator(&plain), "");
        let local = FleetArgs {
            local: Some("hosts".into()),
            dry_run: Some("first".into()),
            jobs: 3,
            ..plain.clone()
        };
        assert_eq!(locator(&local), " --local hosts");
        let everything = FleetArgs {
            matrix: "m2.csv".into(),
            user: Some("ops".into()),
            remote_dir: "/srv/mx run".into(),
            local: Some("/tmp/a b".into()),
            ..plain.clone()
        };
        assert_eq!(
            locator(&everything),
            " --local '/tmp/a b' --matrix m2.csv --remote-dir '/srv/mx run' --user ops"
        );
        let slurm = FleetArgs {
            via: Via::Slurm,
            ..plain.clone()
        };
        assert_eq!(locator(&slurm), " --via slurm");
    }
}
