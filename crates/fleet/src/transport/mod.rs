//! How the controller reaches a host: run a shell script there, copy files to
//! it, fetch one back. One small interface, so a fleet managed by another
//! engine (kubectl exec/cp, srun) can be added without touching the commands.
//!
//! - [`Ssh`] (`ssh.rs`, its one login per host in `session.rs`): the system's OpenSSH (`ssh`/`scp`, or `MX_SSH`/`MX_SCP` whole),
//!   BatchMode, an 8 s connect timeout, the script as one argument.
//! - [`Local`] (`local.rs`): the same scripts run by `sh` on this machine, each host in its
//!   own sandbox directory. It powers `mx demo` and the tests that need no
//!   root. Not a fake: same scripts, same agent, real packets.
//! - [`Slurm`] (`slurm.rs`): the nodes of a Slurm allocation, through
//!   srun and sbcast; its agents live in one job step ([`Transport::run_held`]).
//!
//! With `--dry-run` nothing runs, through either transport ([`Rehearsal`],
//! `dry_run.rs`): each call "succeeds" and returns the command it would have
//! run, shell-quoted.
//!
//! This module holds the interface and what every transport shares (running
//! a local command with a deadline); it uses none of the transports built on
//! it, and only names them for the fleet.

mod dry_run;
mod local;
pub mod session;
pub mod slurm;
mod ssh;

pub use dry_run::{Rehearsal, Tallied, Tally};
pub use local::Local;
pub use slurm::Slurm;
pub use ssh::{Ssh, control_dir, control_dir_path, is_openssh};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mx_base::units::wall_now;
use mx_matrix::Host;

/// What a remote step returned: its exit status and its output (stdout and
/// stderr together, as a person reading it would see them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub code: i32,
    pub text: String,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// Exit code of a step that ran out of time (as timeout(1) reports it).
pub(crate) const TIMED_OUT: i32 = 124;
/// Exit code of a step whose command could not be started.
pub(crate) const CANNOT_RUN: i32 = 127;

pub trait Transport: Send + Sync {
    /// The directory `dir` (the --remote-dir) as this transport sees it on `host`.
    fn remote_dir(&self, host: &Host, dir: &str) -> String;
    /// The same for a person, on every host at once (`<host>` standing for
    /// each host's name where the path differs between hosts).
    fn shown_dir(&self, dir: &str) -> String {
        dir.to_string()
    }
    /// Runs the shell script `script` on `host`.
    fn run(&self, host: &Host, script: &str, timeout: Duration) -> Outcome;
    /// Copies local `files` into `dir` on `host`.
    fn push(&self, host: &Host, files: &[PathBuf], dir: &str, timeout: Duration) -> Outcome;
    /// Copies `remote` (a path on `host`) to the local `to`.
    fn pull(&self, host: &Host, remote: &str, to: &Path, timeout: Duration) -> Outcome;
    /// A fan-out is done with `host` for now ([`Fleet::each`](super::Fleet::each)):
    /// what the transport held for that host's job alone may go (a
    /// session's shell, where the command keeps none for it).
    fn job_done(&self, _host: &Host) {}
    /// Ends what the command holds open to its hosts (sessions' shells; a
    /// shared ssh connection outlives it, as always), as the command's end
    /// would: for a command done with its hosts before it returns.
    fn close_sessions(&self) {}

    /// Whether a file sent packed ([`Packing`](super::packing::Packing)) is
    /// unpacked as it arrives (ssh: a 6 MB agent crosses as 2.6 MB). A local
    /// copy costs nothing, and Slurm's sbcast has its own compression.
    fn unpacks(&self) -> bool {
        false
    }

    /// What a dry run's steps would have cost since it was last asked, and
    /// from now on counted afresh (`None`: not a dry run).
    fn take_tally(&self) -> Option<Tally> {
        None
    }

    /// Whether [`Transport::push_all`] copies to every host at once (Slurm's
    /// sbcast), so that a deploy makes every host's directory first, then
    /// copies once; otherwise each host is made and copied to in turn.
    fn broadcasts(&self) -> bool {
        false
    }

    /// Makes `copy` to every one of `hosts`: one outcome per host, in order.
    fn push_all(&self, hosts: &[&Host], copy: &Copy) -> Vec<Outcome> {
        push_each(self, hosts, copy)
    }

    /// Whether an agent lives only as long as the step that launched it
    /// (Slurm), so that launches go through [`Transport::run_held`]; over
    /// ssh the launch script detaches the agent (hangups ignored) and returns.
    fn holds_agents(&self) -> bool {
        false
    }

    /// Runs `launch` on every one of `hosts` at once and leaves it running.
    /// Each host's outcome is what its script said until it said
    /// [`HELD`](super::scripts::HELD) (or its exit status when it ended
    /// first), with when that came (Unix seconds). Only for a transport that
    /// [`holds_agents`](Transport::holds_agents).
    fn run_held(&self, hosts: &[&Host], _launch: &HeldLaunch) -> Vec<(Outcome, f64)> {
        let none = Outcome {
            code: CANNOT_RUN,
            text: "this transport holds no agents".to_string(),
        };
        vec![(none, wall_now()); hosts.len()]
    }

    /// What the transport itself may have left for the fleet in `dir` once
    /// every host is clean (Slurm: the job steps that held the agents):
    /// waits up to `wait` for it to go, ends what stays, and says so.
    /// `None` when it keeps nothing of its own (ssh, local).
    fn sweep(&self, _dir: &str, _wait: Duration) -> Option<Outcome> {
        None
    }
}

/// Local files to copy into a directory on the hosts, and how long that may take.
pub struct Copy<'a> {
    pub files: &'a [PathBuf],
    pub dir: &'a str,
    pub timeout: Duration,
}

/// A launch that a transport holding its agents keeps running: `script`,
/// which names its host [`HELD_HOST`](super::scripts::HELD_HOST), says [`HELD`](super::scripts::HELD)
/// once its agent runs, then waits for it; the fleet's remote `dir`; and how
/// long every host may take to answer.
pub struct HeldLaunch<'a> {
    pub script: &'a str,
    pub dir: &'a str,
    pub timeout: Duration,
}

/// [`Transport::push`] to each of `hosts` in turn.
pub(crate) fn push_each<T: Transport + ?Sized>(
    transport: &T,
    hosts: &[&Host],
    copy: &Copy,
) -> Vec<Outcome> {
    hosts
        .iter()
        .map(|h| transport.push(h, copy.files, copy.dir, copy.timeout))
        .collect()
}

/// Runs `cmd`, returning its status and merged output; kills it at `timeout`.
pub fn run_command(cmd: Command, timeout: Duration) -> Outcome {
    run_with(cmd, None, timeout)
}

/// Runs `cmd` with its standard output written to the file `to` (made or
/// truncated), returning its status and its standard error; kills it at
/// `timeout`.
pub(crate) fn run_command_into(cmd: Command, to: &Path, timeout: Duration) -> Outcome {
    match std::fs::File::create(to) {
        Ok(file) => run_with(cmd, Some(file), timeout),
        Err(e) => Outcome {
            code: CANNOT_RUN,
            text: format!("cannot write {}: {e}", to.display()),
        },
    }
}

fn run_with(mut cmd: Command, into: Option<std::fs::File>, timeout: Duration) -> Outcome {
    let stdout = match into {
        Some(file) => Stdio::from(file),
        None => Stdio::piped(),
    };
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Outcome {
                code: CANNOT_RUN,
                text: format!("cannot run {:?}: {e}", cmd.get_program()),
            };
        }
    };
    // Read both pipes on threads so a chatty command cannot block on a full pipe.
    let stdout = child.stdout.take();
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut stdout) = stdout {
            let _ = stdout.read_to_string(&mut s);
        }
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code().unwrap_or(CANNOT_RUN),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break TIMED_OUT;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break CANNOT_RUN,
        }
    };
    let mut text = out_reader.join().unwrap_or_default();
    text.push_str(&err_reader.join().unwrap_or_default());
    if code == TIMED_OUT {
        text.push_str(&format!("timed out after {}s", timeout.as_secs()));
    }
    Outcome {
        code,
        text: text.trim_end().to_string(),
    }
}
