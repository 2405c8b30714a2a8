//! `--dry-run`: a transport that only says what it would do, the very
//! commands the real one would run, with the same options, each line
//! prefixed `DRY-RUN `.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::{Copy, HeldLaunch, Local, Outcome, Slurm, Ssh, Transport, push_each};
use crate::shell_join;
use mx_base::units::wall_now;
use mx_matrix::Host;

/// The text a dry run prints for a command: `DRY-RUN ` and the argv quoted for a
/// shell; a multi-line script prints one prefixed line per line.
pub(crate) fn dry_run_text(argv: &[String]) -> String {
    dry_run_lines(&shell_join(argv))
}

/// `text` (a command line), each of its lines prefixed `DRY-RUN `.
fn dry_run_lines(text: &str) -> String {
    text.lines()
        .map(|l| format!("DRY-RUN {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A transport that only says what it would do: the very commands the real
/// one would run, with the same options.
pub enum Rehearsal {
    Ssh(Ssh),
    Local(Local),
    Slurm(Slurm),
}

impl Transport for Rehearsal {
    fn remote_dir(&self, host: &Host, dir: &str) -> String {
        match self {
            Rehearsal::Ssh(ssh) => ssh.remote_dir(host, dir),
            Rehearsal::Local(local) => local.remote_dir(host, dir),
            Rehearsal::Slurm(slurm) => slurm.remote_dir(host, dir),
        }
    }

    fn shown_dir(&self, dir: &str) -> String {
        match self {
            Rehearsal::Ssh(ssh) => ssh.shown_dir(dir),
            Rehearsal::Local(local) => local.shown_dir(dir),
            Rehearsal::Slurm(slurm) => slurm.shown_dir(dir),
        }
    }

    fn run(&self, host: &Host, script: &str, timeout: Duration) -> Outcome {
        let text = match self {
            Rehearsal::Ssh(ssh) => shell_join(&ssh.ssh_argv(host, script)),
            Rehearsal::Local(local) => local.run_text(host, script),
            Rehearsal::Slurm(slurm) => slurm.rehearse_run(host, script, timeout),
        };
        Outcome {
            code: 0,
            text: dry_run_lines(&text),
        }
    }

    fn push(&self, host: &Host, files: &[PathBuf], dir: &str, timeout: Duration) -> Outcome {
        let argv = match self {
            Rehearsal::Slurm(_) => {
                let copy = Copy {
                    files,
                    dir,
                    timeout,
                };
                return self.push_all(&[host], &copy).remove(0);
            }
            Rehearsal::Ssh(ssh) => ssh.push_argv(host, files, dir),
            Rehearsal::Local(_) => {
                let mut argv = vec!["cp".to_string()];
                argv.extend(files.iter().map(|f| f.display().to_string()));
                argv.push(format!("{dir}/"));
                argv
            }
        };
        Outcome {
            code: 0,
            text: dry_run_text(&argv),
        }
    }

    fn pull(&self, host: &Host, remote: &str, to: &Path, timeout: Duration) -> Outcome {
        let argv = match self {
            Rehearsal::Slurm(slurm) => {
                return Outcome {
                    code: 0,
                    text: dry_run_lines(&slurm.rehearse_pull(host, remote, to, timeout)),
                };
            }
            Rehearsal::Ssh(ssh) => ssh.pull_argv(host, remote, to),
            Rehearsal::Local(_) => vec![
                "cp".to_string(),
                remote.to_string(),
                to.display().to_string(),
            ],
        };
        Outcome {
            code: 0,
            text: dry_run_text(&argv),
        }
    }

    fn broadcasts(&self) -> bool {
        matches!(self, Rehearsal::Slurm(_))
    }

    /// Slurm's one copy for every host: shown once, with the first host.
    fn push_all(&self, hosts: &[&Host], copy: &Copy) -> Vec<Outcome> {
        let Rehearsal::Slurm(slurm) = self else {
            return push_each(self, hosts, copy);
        };
        once_for_all(hosts, &slurm.rehearse_push(hosts, copy))
    }

    fn holds_agents(&self) -> bool {
        matches!(self, Rehearsal::Slurm(_))
    }

    fn run_held(&self, hosts: &[&Host], launch: &HeldLaunch) -> Vec<(Outcome, f64)> {
        let text = match self {
            Rehearsal::Slurm(slurm) => slurm.rehearse_held(hosts, launch),
            _ => String::from("(this transport holds no agents)"),
        };
        once_for_all(hosts, &text)
            .into_iter()
            .map(|o| (o, wall_now()))
            .collect()
    }

    fn sweep(&self, _dir: &str, _wait: Duration) -> Option<Outcome> {
        match self {
            Rehearsal::Slurm(slurm) => Some(Outcome {
                code: 0,
                text: dry_run_lines(&slurm.rehearse_sweep()),
            }),
            _ => None,
        }
    }
}

/// What a dry run's steps would cost: the hosts they reach, the steps
/// (each a command over the host's one login), and the files they would
/// send from this machine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub hosts: BTreeSet<String>,
    pub steps: usize,
    /// By file name: its copies (a host's slice of the matrix differs from
    /// host to host, under one name).
    pub sent: BTreeMap<String, Sent>,
    /// Files it would fetch (reports): their size is the hosts'.
    pub fetched: usize,
}

/// The copies of one file a step would send.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sent {
    pub copies: usize,
    /// All copies' bytes.
    pub bytes: u64,
    /// The smallest copy and the largest.
    pub smallest: u64,
    pub largest: u64,
}

impl Tally {
    /// The bytes it would send, all copies.
    pub fn bytes(&self) -> u64 {
        self.sent.values().map(|s| s.bytes).sum()
    }
}

/// A [`Rehearsal`] that keeps a [`Tally`] of what it would do.
pub struct Tallied {
    rehearsal: Rehearsal,
    tally: Mutex<Tally>,
}

impl Tallied {
    pub fn new(rehearsal: Rehearsal) -> Tallied {
        Tallied {
            rehearsal,
            tally: Mutex::default(),
        }
    }

    fn count(&self, hosts: &[&Host], files: &[PathBuf], fetched: usize) {
        let mut tally = self.tally.lock().expect("unpoisoned");
        for host in hosts {
            tally.hosts.insert(host.name.clone());
            tally.steps += 1;
            tally.fetched += fetched;
            for file in files {
                let name = file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let size = std::fs::metadata(file).map_or(0, |m| m.len());
                let sent = tally.sent.entry(name).or_insert(Sent {
                    smallest: size,
                    ..Sent::default()
                });
                sent.copies += 1;
                sent.bytes += size;
                sent.smallest = sent.smallest.min(size);
                sent.largest = sent.largest.max(size);
            }
        }
    }
}

impl Transport for Tallied {
    fn remote_dir(&self, host: &Host, dir: &str) -> String {
        self.rehearsal.remote_dir(host, dir)
    }

    fn shown_dir(&self, dir: &str) -> String {
        self.rehearsal.shown_dir(dir)
    }

    fn run(&self, host: &Host, script: &str, timeout: Duration) -> Outcome {
        self.count(&[host], &[], 0);
        self.rehearsal.run(host, script, timeout)
    }

    fn push(&self, host: &Host, files: &[PathBuf], dir: &str, timeout: Duration) -> Outcome {
        self.count(&[host], files, 0);
        self.rehearsal.push(host, files, dir, timeout)
    }

    fn pull(&self, host: &Host, remote: &str, to: &Path, timeout: Duration) -> Outcome {
        self.count(&[host], &[], 1);
        self.rehearsal.pull(host, remote, to, timeout)
    }

    fn take_tally(&self) -> Option<Tally> {
        Some(std::mem::take(&mut *self.tally.lock().expect("unpoisoned")))
    }

    fn broadcasts(&self) -> bool {
        self.rehearsal.broadcasts()
    }

    fn push_all(&self, hosts: &[&Host], copy: &Copy) -> Vec<Outcome> {
        if self.broadcasts() {
            self.count(hosts, copy.files, 0);
            return self.rehearsal.push_all(hosts, copy);
        }
        push_each(self, hosts, copy)
    }

    fn holds_agents(&self) -> bool {
        self.rehearsal.holds_agents()
    }

    fn run_held(&self, hosts: &[&Host], launch: &HeldLaunch) -> Vec<(Outcome, f64)> {
        self.count(hosts, &[], 0);
        self.rehearsal.run_held(hosts, launch)
    }

    fn sweep(&self, dir: &str, wait: Duration) -> Option<Outcome> {
        self.rehearsal.sweep(dir, wait)
    }
}

/// One dry-run command that serves every one of `hosts`: the first host
/// shows it, the others say they are in it.
fn once_for_all(hosts: &[&Host], text: &str) -> Vec<Outcome> {
    hosts
        .iter()
        .enumerate()
        .map(|(i, _)| Outcome {
            code: 0,
            text: if i == 0 {
                dry_run_lines(text)
            } else {
                format!("DRY-RUN (in the same step as {})", hosts[0].name)
            },
        })
        .collect()
}
