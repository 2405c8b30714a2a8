//! How the controller reaches a host: run a shell script there, copy files to
//! it, fetch one back. One small interface, so a fleet managed by another
//! engine (kubectl exec/cp, srun) can be added without touching the commands.
//!
//! - [`Ssh`]: the system's OpenSSH (`ssh`/`scp`, or `MX_SSH`/`MX_SCP` whole),
//!   BatchMode, an 8 s connect timeout, the script as one argument.
//! - [`Local`]: the same scripts run by `sh` on this machine, each host in its
//!   own sandbox directory. It powers `mx demo` and the tests that need no
//!   root. Not a fake: same scripts, same agent, real packets.
//! - [`Slurm`](super::slurm::Slurm): the nodes of a Slurm allocation, through
//!   srun and sbcast; its agents live in one job step ([`Transport::run_held`]).
//!
//! With `--dry-run` nothing runs, through either transport: each call
//! "succeeds" and returns the command it would have run, shell-quoted.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::session::Sessions;
use super::shell_join;
use super::slurm::Slurm;
use crate::matrix::Host;
use crate::units::wall_now;

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
pub const TIMED_OUT: i32 = 124;
/// Exit code of a step whose command could not be started.
pub const CANNOT_RUN: i32 = 127;

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
    /// ssh the launch script detaches the agent (nohup) and returns.
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
/// which names its host [`HELD_HOST`], says [`HELD`](super::scripts::HELD)
/// once its agent runs, then waits for it; the fleet's remote `dir`; and how
/// long every host may take to answer.
pub struct HeldLaunch<'a> {
    pub script: &'a str,
    pub dir: &'a str,
    pub timeout: Duration,
}

/// [`Transport::push`] to each of `hosts` in turn.
fn push_each<T: Transport + ?Sized>(transport: &T, hosts: &[&Host], copy: &Copy) -> Vec<Outcome> {
    hosts
        .iter()
        .map(|h| transport.push(h, copy.files, copy.dir, copy.timeout))
        .collect()
}

/// The shell word a held script names its host by: the transport sets it
/// on each node before the script runs.
pub const HELD_HOST: &str = "\"$MX_HOST\"";

/// Runs `cmd`, returning its status and merged output; kills it at `timeout`.
pub fn run_command(cmd: Command, timeout: Duration) -> Outcome {
    run_with(cmd, None, timeout)
}

/// Runs `cmd` with its standard output written to the file `to` (made or
/// truncated), returning its status and its standard error; kills it at
/// `timeout`.
pub fn run_command_into(cmd: Command, to: &Path, timeout: Duration) -> Outcome {
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

/// The system's OpenSSH.
pub struct Ssh {
    /// The ssh command and its own options (`MX_SSH` split on whitespace).
    pub ssh: Vec<String>,
    pub scp: Vec<String>,
    pub user: Option<String>,
    /// Where shared connections live (ControlMaster), when sharing is on: the
    /// first session to a host opens a master that later ones ride, for 60 s,
    /// so a command's second and third step cost no new key exchange.
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
/// user's alone ([`make_private`](crate::private_dir::make_private)). One
/// that another user made or could write to would hand them the master
/// sockets, and with them a shell on every host: then no connection is
/// shared, and the warning says why, once.
pub fn control_dir() -> Option<PathBuf> {
    match crate::private_dir::make_private(&control_dir_path()) {
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
    /// BatchMode and the connect timeout, then connection sharing when on.
    fn options(&self) -> Vec<String> {
        let mut options: Vec<String> = SSH_OPTIONS.iter().map(|s| s.to_string()).collect();
        if let Some(dir) = &self.control_dir {
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
    pub fn ssh_argv(&self, host: &Host, script: &str) -> Vec<String> {
        let mut argv = self.ssh.clone();
        argv.extend(self.options());
        argv.push(self.target(host));
        argv.push(script.to_string());
        argv
    }

    pub fn push_argv(&self, host: &Host, files: &[PathBuf], dir: &str) -> Vec<String> {
        let mut argv = self.scp.clone();
        argv.extend(self.options());
        argv.push("-q".into());
        argv.extend(files.iter().map(|f| f.display().to_string()));
        argv.push(self.copy_target(host, &format!("{dir}/")));
        argv
    }

    pub fn pull_argv(&self, host: &Host, remote: &str, to: &Path) -> Vec<String> {
        let mut argv = self.scp.clone();
        argv.extend(self.options());
        argv.push("-q".into());
        argv.push(self.copy_target(host, remote));
        argv.push(to.display().to_string());
        argv
    }
}

fn command(argv: &[String]) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
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
            .unwrap_or_else(|| run_command(command(&self.push_argv(host, files, dir)), timeout))
    }

    fn pull(&self, host: &Host, remote: &str, to: &Path, timeout: Duration) -> Outcome {
        run_command(command(&self.pull_argv(host, remote, to)), timeout)
    }
}

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

/// The text a dry run prints for a command: `DRY-RUN ` and the argv quoted for a
/// shell; a multi-line script prints one prefixed line per line.
pub fn dry_run_text(argv: &[String]) -> String {
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

impl Local {
    /// What [`Local::run`] would run: the host's directory made, and the
    /// script run by `sh` in it.
    fn run_text(&self, host: &Host, script: &str) -> String {
        let root = self.host_root(host).display().to_string();
        format!(
            "{} && {} && {}",
            shell_join(&["mkdir", "-p", &root]),
            shell_join(&["cd", &root]),
            shell_join(&["sh", "-c", script])
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::HostToken;

    fn host(token: &str) -> Host {
        Host::from_token(HostToken::parse(token).unwrap(), 5300)
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
