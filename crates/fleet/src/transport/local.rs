//! Hosts as sandbox directories on this machine (`--local DIR`): the same
//! scripts as over ssh, run by `sh` in each host's directory, a shell kept
//! open per host as over ssh. It powers `mx demo` and the tests that need
//! no root. Not a fake: same scripts, same agent, real packets.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::session::Sessions;
use super::{CANNOT_RUN, Outcome, Transport, run_command};
use crate::shell_join;
use mx_matrix::Host;

/// Hosts as sandbox directories on this machine: `<root>/<host name>/` stands
/// for the host's filesystem root, so `--remote-dir /var/tmp/mx` of host h1 is
/// `<root>/h1/var/tmp/mx`.
pub struct Local {
    pub root: PathBuf,
    /// A shell kept open in each host's directory for the command's steps,
    /// as over ssh.
    pub sessions: Sessions,
}

impl Local {
    fn host_root(&self, host: &Host) -> PathBuf {
        self.root.join(&host.name)
    }
}

impl Transport for Local {
    fn remote_dir(&self, host: &Host, dir: &str) -> String {
        self.host_root(host)
            .join(dir.trim_start_matches('/'))
            .display()
            .to_string()
    }

    fn shown_dir(&self, dir: &str) -> String {
        self.root
            .join("<host>")
            .join(dir.trim_start_matches('/'))
            .display()
            .to_string()
    }

    fn run(&self, host: &Host, script: &str, timeout: Duration) -> Outcome {
        let root = self.host_root(host);
        if let Err(e) = std::fs::create_dir_all(&root) {
            return Outcome {
                code: CANNOT_RUN,
                text: format!("cannot create {}: {e}", root.display()),
            };
        }
        let open = || {
            let mut cmd = Command::new("sh");
            cmd.current_dir(&root);
            cmd
        };
        self.sessions
            .run(&host.name, &open, script, timeout)
            .unwrap_or_else(|| {
                let mut cmd = Command::new("sh");
                cmd.arg("-c").arg(script).current_dir(&root);
                run_command(cmd, timeout)
            })
    }

    fn push(&self, _host: &Host, files: &[PathBuf], dir: &str, _timeout: Duration) -> Outcome {
        for file in files {
            let Some(name) = file.file_name() else {
                continue;
            };
            let to = Path::new(dir).join(name);
            // Copy to a temp name and rename: a running binary is never overwritten in place.
            let tmp = Path::new(dir).join(format!(".{}.tmp", name.to_string_lossy()));
            if let Err(e) = std::fs::copy(file, &tmp).and_then(|_| std::fs::rename(&tmp, &to)) {
                return Outcome {
                    code: 1,
                    text: format!("cannot copy {} to {}: {e}", file.display(), to.display()),
                };
            }
        }
        Outcome {
            code: 0,
            text: String::new(),
        }
    }

    fn job_done(&self, host: &Host) {
        self.sessions.job_done(&host.name);
    }

    fn close_sessions(&self) {
        self.sessions.close_all();
    }

    fn pull(&self, _host: &Host, remote: &str, to: &Path, _timeout: Duration) -> Outcome {
        match std::fs::copy(remote, to) {
            Ok(_) => Outcome {
                code: 0,
                text: String::new(),
            },
            Err(e) => Outcome {
                code: 1,
                text: format!("{remote}: {e}"),
            },
        }
    }
}

impl Local {
    /// What [`Local::run`] would run: the host's directory made, and the
    /// script run by `sh` in it.
    pub(super) fn run_text(&self, host: &Host, script: &str) -> String {
        let root = self.host_root(host).display().to_string();
        format!(
            "{} && {} && {}",
            shell_join(&["mkdir", "-p", &root]),
            shell_join(&["cd", &root]),
            shell_join(&["sh", "-c", script])
        )
    }
}
