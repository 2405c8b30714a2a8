//! `--dry-run`: a transport that only says what it would do, the very
//! commands the real one would run, with the same options, each line
//! prefixed `DRY-RUN `.

use std::path::{Path, PathBuf};
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
