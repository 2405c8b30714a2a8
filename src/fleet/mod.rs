//! The fleet commands: every host of the matrix reached through one
//! [`transport::Transport`], in parallel up to `--jobs`, each step's output
//! printed afterwards in matrix order, one line per host (facts.md 4.0).
//! A host that fails (unreachable, refused, timed out) gets its own line and
//! makes the command exit 1; it never stops the others.

pub mod bind;
pub mod commands;
pub mod doctor;
pub mod instants;
pub mod reload;
pub mod scripts;
pub mod transport;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::cli::FleetArgs;
use crate::error::{Error, Result};
use crate::matrix::{Host, Matrix};

use transport::{Local, Outcome, Rehearsal, Ssh, Transport};

/// How long a generic remote step may take.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long copying the agent and matrix may take.
pub const COPY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a quick look (status) may take.
pub const LOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// A fleet command's view of the fleet.
pub struct Fleet {
    pub matrix: Matrix,
    pub matrix_path: std::path::PathBuf,
    pub transport: Box<dyn Transport>,
    pub jobs: usize,
    pub remote_dir: String,
    pub dry_run: bool,
    /// The flags that locate this fleet, for the commands mx suggests: see
    /// [`locator`].
    pub locator: String,
}

/// The flags a suggested command needs to reach the same fleet as this one
/// (` --local DIR`, ` --matrix FILE` and ` --remote-dir DIR` when not the
/// defaults, ` --user USER` when one was given), shell-quoted, each with a
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
    if words.is_empty() {
        String::new()
    } else {
        format!(" {}", crate::stamp::shell_join(&words))
    }
}

/// `--matrix` and `--remote-dir` when not given.
pub const DEFAULT_MATRIX: &str = "matrix.csv";
pub const DEFAULT_REMOTE_DIR: &str = "/var/tmp/mx";

/// Refuses remote directories that `mx clean` must never delete: `/`, empty, a
/// top-level directory (`/var`, `/tmp`, ...) or a home directory.
pub fn check_remote_dir(dir: &str) -> Result<()> {
    let trimmed = dir.trim();
    let parts: Vec<&str> = trimmed
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let home = trimmed.starts_with('~')
        || trimmed.contains("$HOME")
        || (parts.first() == Some(&"home") && parts.len() <= 2)
        || (parts.first() == Some(&"root") && parts.len() == 1);
    if trimmed.is_empty()
        || parts.is_empty()
        || (trimmed.starts_with('/') && parts.len() < 2)
        || home
        || parts.contains(&"..")
    {
        return Err(Error::refused(format!(
            "--remote-dir '{dir}' is not a directory mx may own: it must be a dedicated directory such as /var/tmp/mx, not /, a top-level directory, a home directory or a path with '..'"
        )));
    }
    Ok(())
}

impl Fleet {
    /// The fleet of `args`: the matrix, and the transport its flags ask for.
    pub fn open(args: &FleetArgs) -> Result<Fleet> {
        check_remote_dir(&args.remote_dir)?;
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
        // them. A dry run shows the same options, and creates nothing.
        let sharing = !ssh_words
            .iter()
            .any(|w| w.contains("ControlPath") || w.contains("ControlMaster"));
        let ssh = Ssh {
            ssh: ssh_words,
            scp: split(&args.scp),
            user,
            control_dir: match (sharing, args.dry_run) {
                (false, _) => None,
                (true, true) => Some(transport::control_dir_path()),
                (true, false) => transport::control_dir(),
            },
        };
        if ssh.ssh.is_empty() || ssh.scp.is_empty() {
            return Err(Error::refused("MX_SSH / MX_SCP must name a command"));
        }
        let local = match &args.local {
            // Absolute: the scripts run from each host's own directory.
            Some(root) => Some(Local {
                root: std::path::absolute(root).map_err(|e| Error::io(root, "cannot use", &e))?,
            }),
            None => None,
        };
        let transport: Box<dyn Transport> = match (local, args.dry_run) {
            (Some(local), true) => Box::new(Rehearsal::Local(local)),
            (Some(local), false) => Box::new(local),
            (None, true) => Box::new(Rehearsal::Ssh(ssh)),
            (None, false) => Box::new(ssh),
        };
        if args.jobs == 0 {
            return Err(Error::refused("--jobs must be at least 1"));
        }
        Ok(Fleet {
            matrix,
            matrix_path: args.matrix.clone(),
            transport,
            jobs: args.jobs,
            remote_dir: args.remote_dir.clone(),
            dry_run: args.dry_run,
            locator: locator(args),
        })
    }

    /// `mx <command>` with the flags that locate this fleet: a suggestion
    /// that works when typed as shown.
    pub fn hint(&self, command: &str) -> String {
        format!("mx {command}{}", self.locator)
    }

    /// Suggested commands, one per line, their comments aligned: the first
    /// line opens with `first`, the rest with `rest` (as wide).
    pub fn hint_lines(
        &self,
        out: &mut dyn std::io::Write,
        first: &str,
        rest: &str,
        lines: &[(&str, &str)],
    ) -> std::io::Result<()> {
        let commands: Vec<String> = lines.iter().map(|(c, _)| self.hint(c)).collect();
        // At least as wide as the original's `mx summarize   #`.
        let width = (commands.iter().map(String::len).max().unwrap_or(0) + 3).max(15);
        for (i, (command, (_, comment))) in commands.iter().zip(lines).enumerate() {
            let lead = if i == 0 { first } else { rest };
            writeln!(out, "{lead}{command:<width$}# {comment}")?;
        }
        Ok(())
    }

    pub fn hosts(&self) -> &[Host] {
        self.matrix.hosts()
    }

    /// The remote directory as the transport sees it on `host`.
    pub fn dir(&self, host: &Host) -> String {
        self.transport.remote_dir(host, &self.remote_dir)
    }

    /// Runs `step` for each of `hosts` (indices into the matrix), `--jobs` at a
    /// time; returns the outcomes in the same order.
    pub fn each<F>(&self, hosts: &[usize], step: F) -> Vec<Outcome>
    where
        F: Fn(&Host) -> Outcome + Sync,
    {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; hosts.len()]);
        std::thread::scope(|scope| {
            for _ in 0..self.jobs.min(hosts.len()) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&h) = hosts.get(i) else { break };
                        let outcome = step(&self.matrix.hosts()[h]);
                        results.lock().expect("no panics hold this lock")[i] = Some(outcome);
                    }
                });
            }
        });
        results
            .into_inner()
            .expect("no panics hold this lock")
            .into_iter()
            .map(|o| o.expect("every host ran"))
            .collect()
    }

    /// Runs `step` on `hosts` and prints the result the original's way (see
    /// [`Fleet::print`]). Returns the indices of the hosts that succeeded.
    pub fn step<F>(
        &self,
        out: &mut dyn std::io::Write,
        label: &str,
        hosts: &[usize],
        quiet: bool,
        step: F,
    ) -> std::io::Result<Vec<usize>>
    where
        F: Fn(&Host) -> Outcome + Sync,
    {
        if !label.is_empty() {
            writeln!(out, "[mx] {label} on {} hosts", hosts.len())?;
        }
        let outcomes = self.each(hosts, step);
        self.print(out, hosts, &outcomes, quiet)
    }

    /// Prints each host's lines (all hosts, or with `quiet` only the failing
    /// ones) as `  <host>  <line>`, then `[mx] FAILED on f/n hosts: ...`.
    /// Returns the indices of the hosts that succeeded.
    pub fn print(
        &self,
        out: &mut dyn std::io::Write,
        hosts: &[usize],
        outcomes: &[Outcome],
        quiet: bool,
    ) -> std::io::Result<Vec<usize>> {
        let width = hosts
            .iter()
            .map(|&h| self.matrix.hosts()[h].name.len())
            .max()
            .unwrap_or(0);
        let mut failed = Vec::new();
        let mut succeeded = Vec::new();
        for (&h, outcome) in hosts.iter().zip(outcomes) {
            let name = &self.matrix.hosts()[h].name;
            if outcome.ok() {
                succeeded.push(h);
            } else {
                failed.push(name.as_str());
            }
            if quiet && outcome.ok() && !self.dry_run {
                continue;
            }
            let text = if outcome.ok() || !outcome.text.is_empty() {
                outcome.text.clone()
            } else {
                format!("failed (exit {})", outcome.code)
            };
            if text.is_empty() {
                writeln!(out, "  {name:<width$}")?;
            }
            for line in text.lines() {
                writeln!(out, "  {name:<width$}  {line}")?;
            }
        }
        if !failed.is_empty() {
            writeln!(
                out,
                "[mx] FAILED on {}/{} hosts: {}",
                failed.len(),
                hosts.len(),
                failed.join(" ")
            )?;
        }
        Ok(succeeded)
    }

    pub fn all(&self) -> Vec<usize> {
        (0..self.matrix.host_count()).collect()
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
            dry_run: false,
            local: None,
            ssh: "ssh".into(),
            scp: "scp".into(),
        };
        assert_eq!(locator(&plain), "");
        let local = FleetArgs {
            local: Some("hosts".into()),
            dry_run: true,
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
    }

    #[test]
    fn remote_dirs_mx_may_not_own() {
        for bad in [
            "",
            "/",
            "/var",
            "/tmp/",
            "~",
            "~/mx",
            "/home/alice",
            "/root",
            "$HOME/x",
            "/var/tmp/../..",
            ".",
        ] {
            assert!(check_remote_dir(bad).is_err(), "{bad:?} accepted");
        }
        for good in [
            "/var/tmp/mx",
            "/opt/mx/run",
            "mx-run",
            "/home/alice/mx",
            "/tmp/mx test",
        ] {
            assert!(check_remote_dir(good).is_ok(), "{good:?} refused");
        }
    }
}
