//! Moving files and processes to the hosts of a matrix: every host reached
//! through one [`transport::Transport`] (ssh, a local directory per host, or a
//! dry run that prints instead), in parallel up to `--jobs`, each step's output
//! printed afterwards in matrix order, one line per host. A
//! host that fails (unreachable, refused, timed out) gets its own line and
//! makes the command exit 1; it never stops the others.
//!
//! The steps: [`deploy`] (the agent and the matrix), [`launch`] (the
//! agents), [`scripts`] (what runs on a host), [`instants`] (the fleet's one
//! start and end instant), [`end`], [`collect`]. The transports:
//! [`transport`] (ssh, local, dry run) and [`slurm`](transport::slurm).
//! Which steps a command takes, and what it prints around them, is the
//! command's business (`crate::commands`).

#![forbid(unsafe_code)]

pub mod bind;
pub mod collect;
pub mod deploy;
pub mod end;
pub mod instants;
pub mod launch;
pub mod look;
pub mod packing;
pub mod scripts;
pub mod transport;
pub mod unreachable;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mx_base::error::{Error, Result};
use mx_matrix::{Host, Matrix};

use transport::{Outcome, Transport};

/// A step's outcome that declined, as it should, rather than failed: its
/// words (`already running`) and which outcomes it covers.
pub type Refusal = (&'static str, fn(&Outcome) -> bool);

/// How long a generic remote step may take.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long copying the agent and matrix may take.
pub const COPY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long writing a host's data file may take (a slow disk, a big file).
pub const PREPARE_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a quick look (status) may take.
pub const LOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// The hosts whose commands a dry run prints, unless asked for all: the
/// rest run the same commands, with their own names and addresses.
pub const DRY_RUN_SHOWN: usize = 2;

/// A fleet command's view of the fleet.
pub struct Fleet {
    pub matrix: Matrix,
    pub matrix_path: std::path::PathBuf,
    pub transport: Box<dyn Transport>,
    pub jobs: usize,
    pub remote_dir: String,
    pub dry_run: bool,
    /// A dry run prints every host's commands (`--dry-run all`), not the
    /// first [`DRY_RUN_SHOWN`] hosts'.
    pub dry_run_all: bool,
    /// The flags that locate this fleet, each with a leading space, for the
    /// commands mx suggests (see [`Fleet::hint`]).
    pub locator: String,
    /// A directory here that holds a local fleet of these hosts, when this
    /// command goes over ssh instead (no `--local`): a failure names it.
    pub local_here: Option<std::path::PathBuf>,
}

/// `1 host`, `3 hosts`.
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Joins arguments into one shell-safe line (single quotes only where needed).
pub fn shell_join<S: AsRef<str>>(args: &[S]) -> String {
    args.iter()
        .map(|a| {
            shlex::try_quote(a.as_ref())
                .map(|q| q.into_owned())
                .unwrap_or_else(|_| a.as_ref().replace('\0', ""))
        })
        .collect::<Vec<_>>()
        .join(" ")
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
    /// time; returns the outcomes in the same order. A host's steps within
    /// `step` share one login, kept past it only for the hosts the command
    /// keeps connected ([`Transport::job_done`]).
    pub fn each<T, F>(&self, hosts: &[usize], step: F) -> Vec<T>
    where
        T: Send,
        F: Fn(&Host) -> T + Sync,
    {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<T>>> =
            Mutex::new(std::iter::repeat_with(|| None).take(hosts.len()).collect());
        std::thread::scope(|scope| {
            for _ in 0..self.jobs.min(hosts.len()) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&h) = hosts.get(i) else { break };
                        let host = &self.matrix.hosts()[h];
                        let outcome = step(host);
                        self.transport.job_done(host);
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
            // Seen now, not when the step is over: at thousands of hosts a
            // step takes a while, and the operator should know which.
            out.flush()?;
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
        self.print_refusing(out, hosts, outcomes, quiet, None)
    }

    /// [`Fleet::print`], where the hosts whose outcome `refusal` (its words,
    /// and which outcomes it covers) picks out were not failures but a step
    /// that declined, as it should: they are summed up in their own line
    /// (`[mx] already running on 4/4 hosts: ...`), never as FAILED.
    pub fn print_refusing(
        &self,
        out: &mut dyn std::io::Write,
        hosts: &[usize],
        outcomes: &[Outcome],
        quiet: bool,
        refusal: Option<Refusal>,
    ) -> std::io::Result<Vec<usize>> {
        let width = hosts
            .iter()
            .map(|&h| self.matrix.hosts()[h].name.len())
            .max()
            .unwrap_or(0);
        let mut failed = Vec::new();
        let mut refused = Vec::new();
        let mut succeeded = Vec::new();
        let mut not_shown = 0;
        for (i, (&h, outcome)) in hosts.iter().zip(outcomes).enumerate() {
            let name = &self.matrix.hosts()[h].name;
            if outcome.ok() {
                succeeded.push(h);
            } else if refusal.is_some_and(|(_, picks)| picks(outcome)) {
                refused.push(name.as_str());
            } else {
                failed.push(name.as_str());
            }
            if quiet && outcome.ok() && !self.dry_run {
                continue;
            }
            if self.dry_run && !self.dry_run_all && i >= DRY_RUN_SHOWN && outcome.ok() {
                not_shown += 1;
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
        if not_shown > 0 {
            writeln!(
                out,
                "  ... and {not_shown} more hosts, each alike (--dry-run all prints every one)"
            )?;
        }
        if let Some(tally) = self.transport.take_tally() {
            self.said_cost(out, &tally)?;
        }
        if let (Some((words, _)), false) = (refusal, refused.is_empty()) {
            writeln!(
                out,
                "[mx] {words} on {}/{} hosts: {}",
                refused.len(),
                hosts.len(),
                refused.join(" ")
            )?;
        }
        if !failed.is_empty() {
            writeln!(
                out,
                "[mx] FAILED on {}/{} hosts: {}",
                failed.len(),
                hosts.len(),
                failed.join(" ")
            )?;
            if let Some(dir) = &self.local_here {
                let dir = shell_join(&[dir.display().to_string()]);
                writeln!(
                    out,
                    "[mx] {dir}/ here holds a local fleet of these hosts, and this went over ssh: add --local {dir} (or export MX_LOCAL={dir} once for every command)"
                )?;
            }
        }
        out.flush()?;
        Ok(succeeded)
    }

    /// What a dry run's step would cost: the hosts it reaches, in waves of
    /// `--jobs`, and the bytes it would send from this machine.
    fn said_cost(
        &self,
        out: &mut dyn std::io::Write,
        tally: &transport::Tally,
    ) -> std::io::Result<()> {
        if tally.steps == 0 {
            return Ok(());
        }
        let hosts = tally.hosts.len();
        let waves = hosts.div_ceil(self.jobs.max(1));
        let mut cost = format!(
            "[mx] dry run: this step would take {} on {hosts} hosts, {} at a time ({waves} wave{})",
            plural(tally.steps, "command"),
            self.jobs.min(hosts),
            if waves == 1 { "" } else { "s" }
        );
        if !tally.sent.is_empty() {
            let each: Vec<String> = tally
                .sent
                .iter()
                .map(|(name, sent)| {
                    let size = |b: u64| mx_base::units::bytes(b as f64);
                    let each = if sent.smallest == sent.largest {
                        size(sent.largest)
                    } else {
                        format!("{} to {} each", size(sent.smallest), size(sent.largest))
                    };
                    format!("{name} ({each}) to {}", plural(sent.copies, "host"))
                })
                .collect();
            // The agent goes only where the host lacks it, gzipped where the
            // host can unpack it: what a dry run cannot know, so at most.
            let agent = tally.sent.contains_key(scripts::AGENT_BIN);
            cost.push_str(&format!(
                ", and send {}{} from this machine: {}{}",
                if agent { "at most " } else { "" },
                mx_base::units::bytes(tally.bytes() as f64),
                each.join(", "),
                if agent {
                    " (the agent goes only to hosts that lack it, packed where they can unpack it: zstd, else gzip)"
                } else {
                    ""
                }
            ));
        }
        if tally.fetched > 0 {
            cost.push_str(&format!(", and fetch {}", plural(tally.fetched, "file")));
        }
        writeln!(out, "{cost}")
    }

    pub fn all(&self) -> Vec<usize> {
        (0..self.matrix.host_count()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
