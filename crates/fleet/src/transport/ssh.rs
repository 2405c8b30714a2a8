//! The system's OpenSSH as a transport: `ssh`/`scp` (or `MX_SSH`/`MX_SCP`
//! whole), BatchMode, an 8 s connect timeout, connection sharing in a
//! directory private to this user, and one login per host per command
//! (`session.rs`) where the command is OpenSSH itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::session::Sessions;
use super::{Outcome, Transport, run_command};
use crate::packing::Packing;
use crate::scripts;
use mx_matrix::Host;

/// The system's OpenSSH.
pub struct Ssh {
    /// The ssh command and its own options (`MX_SSH` split on whitespace).
    pub ssh: Vec<String>,
    pub scp: Vec<String>,
    pub user: Option<String>,
    /// Where shared connections live (ControlMaster), when sharing is on: the
    /// first session to a host opens a master that later ones ride, for 60 s,
    /// so a command's second and third step cost no new key exchange. Only
    /// the hosts the sessions keep get one (see [`Sessions::keeps`]): a
    /// master outlives its call, and at 10,000 hosts a master each would be
    /// 10,000 processes.
    pub control_dir: Option<PathBuf>,
    /// A shell kept open on each host for the command's steps.
    pub sessions: Sessions,
}

/// The command a session opens: a shell reading its steps from stdin.
const SESSION_SHELL: &str = "exec sh";

/// Whether `ssh` (the command and its own options) is the system's OpenSSH,
/// which runs a session's shell and passes its stdin on: `ssh -V` says
/// `OpenSSH_<version>`. Anything else (a wrapper that rewrites the paths in
/// the command it is given for a chroot, a container or a sandbox, or logs
/// it) gets one call per step, the whole script on its command line, as it
/// was written for.
pub fn is_openssh(ssh: &[String]) -> bool {
    let Some((program, options)) = ssh.split_first() else {
        return false;
    };
    let mut cmd = Command::new(program);
    cmd.args(options).arg("-V");
    let said = run_command(cmd, Duration::from_secs(5));
    said.ok() && said.text.starts_with("OpenSSH_")
}

/// Where shared ssh connections live: private to this user.
pub fn control_dir_path() -> PathBuf {
    let uid = nix::unistd::getuid();
    std::env::temp_dir().join(format!("mx-ssh-{uid}"))
}

/// The directory for shared ssh connections (mode 0700), when it is this
/// user's alone ([`make_private`](mx_base::private_dir::make_private)). One
/// that another user made or could write to would hand them the master
/// sockets, and with them a shell on every host: then no connection is
/// shared, and the warning says why, once.
pub fn control_dir() -> Option<PathBuf> {
    match mx_base::private_dir::make_private(&control_dir_path()) {
        Ok(dir) => Some(dir),
        Err(why) => {
            eprintln!("mx: warning: not sharing ssh connections: {why}");
            None
        }
    }
}

/// Options every ssh and scp call carries: never prompt, give up connecting
/// (and on a silent server's banner) in 8 s, and drop a connection whose
/// peer has gone quiet for 15 s (a cut link, a hung host): a shared master
/// connection would otherwise hold every later step until TCP gives up.
const SSH_OPTIONS: [&str; 8] = [
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=8",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
];

impl Ssh {
    /// BatchMode and the connect timeout, then connection sharing when on
    /// and `host` is one the command keeps connected.
    fn options(&self, host: &Host) -> Vec<String> {
        let mut options: Vec<String> = SSH_OPTIONS.iter().map(|s| s.to_string()).collect();
        if let (Some(dir), true) = (&self.control_dir, self.sessions.keeps(&host.name)) {
            options.extend([
                "-o".to_string(),
                "ControlMaster=auto".to_string(),
                "-o".to_string(),
                format!("ControlPath={}/%C", dir.display()),
                "-o".to_string(),
                "ControlPersist=60s".to_string(),
            ]);
        }
        options
    }

    /// `[user@]addr`: what ssh takes, an IPv6 address as it is.
    fn target(&self, host: &Host) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", host.addr),
            None => host.addr.clone(),
        }
    }

    /// `[user@]addr:path` as scp takes it: an IPv6 address in brackets
    /// (`root@[2001:db8::10]:/var/tmp/mx/`), else scp would split it at its
    /// first colon.
    fn copy_target(&self, host: &Host, path: &str) -> String {
        let addr = if host.addr.contains(':') {
            format!("[{}]", host.addr)
        } else {
            host.addr.clone()
        };
        match &self.user {
            Some(user) => format!("{user}@{addr}:{path}"),
            None => format!("{addr}:{path}"),
        }
    }

    /// The argv of an ssh call running `script` on `host` (the script is one argument).
    pub(crate) fn ssh_argv(&self, host: &Host, script: &str) -> Vec<String> {
        let mut argv = self.ssh.clone();
        argv.extend(self.options(host));
        argv.push(self.target(host));
        argv.push(script.to_string());
        argv
    }

    pub(crate) fn push_argv(&self, host: &Host, files: &[PathBuf], dir: &str) -> Vec<String> {
        let mut argv = self.scp.clone();
        argv.extend(self.options(host));
        argv.push("-q".into());
        argv.extend(files.iter().map(|f| f.display().to_string()));
        argv.push(self.copy_target(host, &format!("{dir}/")));
        argv
    }

    pub(crate) fn pull_argv(&self, host: &Host, remote: &str, to: &Path) -> Vec<String> {
        let mut argv = self.scp.clone();
        argv.extend(self.options(host));
        argv.push("-q".into());
        argv.push(self.copy_target(host, remote));
        argv.push(to.display().to_string());
        argv
    }
}

pub(super) fn command(argv: &[String]) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

impl Ssh {
    /// Copies `files` with scp (no session to copy in), then unpacks those
    /// sent packed, which scp leaves as they came.
    fn scp_and_unpack(
        &self,
        host: &Host,
        files: &[PathBuf],
        dir: &str,
        timeout: Duration,
    ) -> Outcome {
        let copied = run_command(command(&self.push_argv(host, files, dir)), timeout);
        let packed = files
            .iter()
            .filter_map(|f| f.file_name()?.to_str())
            .filter(|n| Packing::of_name(n).is_some());
        let mut outcome = copied;
        for name in packed {
            if !outcome.ok() {
                break;
            }
            let script = scripts::unpack(dir, name, 0o700);
            outcome = run_command(command(&self.ssh_argv(host, &script)), timeout);
        }
        outcome
    }
}

impl Transport for Ssh {
    fn remote_dir(&self, _host: &Host, dir: &str) -> String {
        dir.to_string()
    }

    fn run(&self, host: &Host, script: &str, timeout: Duration) -> Outcome {
        let open = || command(&self.ssh_argv(host, SESSION_SHELL));
        self.sessions
            .run(&host.name, &open, script, timeout)
            .unwrap_or_else(|| run_command(command(&self.ssh_argv(host, script)), timeout))
    }

    fn push(&self, host: &Host, files: &[PathBuf], dir: &str, timeout: Duration) -> Outcome {
        let open = || command(&self.ssh_argv(host, SESSION_SHELL));
        self.sessions
            .push(&host.name, &open, files, dir, timeout)
            .unwrap_or_else(|| self.scp_and_unpack(host, files, dir, timeout))
    }

    fn unpacks(&self) -> bool {
        true
    }

    fn job_done(&self, host: &Host) {
        self.sessions.job_done(&host.name);
    }

    fn close_sessions(&self) {
        self.sessions.close_all();
    }

    fn pull(&self, host: &Host, remote: &str, to: &Path, timeout: Duration) -> Outcome {
        run_command(command(&self.pull_argv(host, remote, to)), timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_matrix::HostToken;

    fn host(token: &str) -> Host {
        Host::from_token(HostToken::parse(token).unwrap(), 5300)
    }

    #[test]
    fn only_the_hosts_a_command_keeps_get_a_master_that_outlives_the_call() {
        use super::super::session::KEPT_PER_JOB;
        let ssh = Ssh {
            ssh: vec!["ssh".into()],
            scp: vec!["scp".into()],
            user: None,
            control_dir: Some(PathBuf::from("/run/mx-ssh-0")),
            sessions: Sessions::for_jobs(1),
        };
        for i in 1..=KEPT_PER_JOB + 2 {
            let h = host(&format!("h{i}=10.0.0.{i}"));
            let calls = [
                ssh.ssh_argv(&h, "true"),
                ssh.push_argv(&h, &[PathBuf::from("/tmp/mx")], "/var/tmp/mx"),
                ssh.pull_argv(&h, "/var/tmp/mx/report.csv", Path::new("r.csv")),
            ];
            for argv in calls {
                let sharing = argv.iter().filter(|a| a.starts_with("Control")).count();
                let want = if i <= KEPT_PER_JOB { 3 } else { 0 };
                assert_eq!(sharing, want, "h{i}: {argv:?}");
            }
        }
    }

    #[test]
    fn ssh_takes_an_ipv6_address_bare_and_scp_in_brackets() {
        let ssh = Ssh {
            ssh: vec!["ssh".into()],
            scp: vec!["scp".into()],
            user: Some("root".into()),
            control_dir: None,
            sessions: Sessions::default(),
        };
        let v6 = host("db=[2001:db8::10]:5300");
        let argv = ssh.ssh_argv(&v6, "true");
        assert_eq!(argv[argv.len() - 2..], ["root@2001:db8::10", "true"]);
        let push = ssh.push_argv(&v6, &[PathBuf::from("/tmp/mx")], "/var/tmp/mx");
        assert_eq!(push.last().unwrap(), "root@[2001:db8::10]:/var/tmp/mx/");
        let pull = ssh.pull_argv(&v6, "/var/tmp/mx/report.csv", Path::new("reports/db.csv"));
        assert_eq!(
            pull[pull.len() - 2..],
            [
                "root@[2001:db8::10]:/var/tmp/mx/report.csv",
                "reports/db.csv"
            ]
        );
        // IPv4 and names as before.
        let anon = Ssh { user: None, ..ssh };
        let v4 = host("web=10.0.0.5");
        assert_eq!(
            anon.push_argv(&v4, &[], "/d").last().unwrap(),
            "10.0.0.5:/d/"
        );
    }
}
