//! A shell kept open on each host for the length of a fleet command.
//!
//! A fleet command takes several steps on every host (`start`: make ready,
//! copy, launch, go). Run each as its own `ssh host script`, and every step
//! pays a login: sshd forks the user's shell, which reads its rc files (a
//! fifth of a second of CPU on a host whose `.bashrc` loads pyenv), and at
//! thousands of hosts that is most of what a start costs. A session pays it
//! once: the first step opens `ssh host 'exec sh'`, and each step is one line
//! written to that shell, `sh -c '<script>' </dev/null 2>&1`, followed by a
//! marker line that carries the step's exit status.
//!
//! Files travel the same stdin, in lock step: the host says it is ready to
//! read a file only once the shell has parsed the step (so none of the
//! file's bytes are taken for commands), reads exactly their count, and
//! checks the count and the SHA-256 before the file takes its name (a packed
//! file is unpacked as it arrives, by a tool that checks what it unpacks). The next
//! step is written only after this one's marker, so a `head -c` that reads
//! ahead (busybox's) finds nothing to take.
//!
//! Every step line opens with an acknowledgement the shell prints before it
//! runs anything. A session that closed before acknowledging (a cut link, a
//! restarted sshd, a Ctrl-C) ran nothing of the step, which is then run in a
//! new session; one that closed after it did run the step, which is never run
//! twice: it fails as it would have over one ssh call. A copy that did not
//! end well retires its session (bytes may be left in the shell's input). A
//! command that keeps no shell open (an `MX_SSH` wrapper that does not pass
//! stdin on) is seen on its first step, and the host gets one call per step
//! from then on. A host past the first [`KEPT_PER_JOB`]` * --jobs` a
//! command reaches holds a session for one host's job of a fan-out (a
//! deploy's make-ready and copies, in one login) and no longer
//! ([`Sessions::job_done`]), with no ssh master; past the open-file limit,
//! one call per step: what a command holds is bounded by `--jobs`, not by
//! the fleet's size.
//!
//! Sessions are for the system's OpenSSH alone. Any other command (a wrapper
//! that maps the paths in the command it is given into a chroot, a container
//! or a sandbox, or logs it) sees no step of a session on its command line,
//! so it gets none ([`Sessions::none`]): one call per step, the whole script
//! its command, as such wrappers are written for.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use sha2::Digest;

use super::{CANNOT_RUN, Outcome, TIMED_OUT};
use crate::packing::Packing;
use crate::scripts::{self, q};

/// Why a session stopped answering a step.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// Its stdout closed: the shell, the ssh process or the connection ended.
    Closed,
    TimedOut,
}

/// One host's open shell.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    stderr: ChildStderr,
    /// What stdout said that no step has taken yet.
    out: Vec<u8>,
    /// What stderr said (ssh's own messages; a step's go to its stdout).
    err: Vec<u8>,
    out_closed: bool,
    err_closed: bool,
    /// Ends every step's output: `mx-step-<nonce>`, unlikely in any output.
    marker: String,
    /// Whether a step has finished in it: a close now is the session's end,
    /// not the host's answer.
    answered: bool,
    /// Whether it may not take another step: a copy that did not end well may
    /// have left bytes in the shell's input.
    spoiled: bool,
}

/// The marker's line after a step: `\n<marker> <status>\n` (the leading
/// newline ends a last line that had none).
fn marker_line(marker: &str) -> String {
    format!("printf '\\n%s %s\\n' {marker} \"$?\"\n")
}

/// Where the step's marker is in `out`: (end of the step's output, its exit
/// status, end of the marker line).
fn find_marker(out: &[u8], marker: &str) -> Option<(usize, i32, usize)> {
    let head = format!("\n{marker} ");
    let at = find(out, head.as_bytes())?;
    let rest = &out[at + head.len()..];
    let end = rest.iter().position(|&b| b == b'\n')?;
    let code = std::str::from_utf8(&rest[..end])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((at, code, at + head.len() + end + 1))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn nonblocking(fd: impl AsFd) -> std::io::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
    fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Reads what `fd` has now into `into`; whether it has closed.
fn drain(fd: impl AsFd, into: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match nix::unistd::read(&fd, &mut buf) {
            Ok(0) => return true,
            Ok(n) => into.extend_from_slice(&buf[..n]),
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => return false,
            Err(_) => return true,
        }
    }
}

impl Session {
    /// Starts `cmd` (a shell reading its commands from stdin).
    fn open(mut cmd: Command) -> std::io::Result<Session> {
        // Its own process group: a Ctrl-C at the terminal is mx's to act on
        // (`mx run` ends the fleet through these very sessions).
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn()?;
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        nonblocking(&stdin)?;
        nonblocking(&stdout)?;
        nonblocking(&stderr)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        Ok(Session {
            child,
            stdin: Some(stdin),
            stdout,
            stderr,
            out: Vec::new(),
            err: Vec::new(),
            out_closed: false,
            err_closed: false,
            marker: format!("mx-step-{:x}{nanos:08x}", std::process::id()),
            answered: false,
            spoiled: false,
        })
    }

    /// Writes `input` while reading what the host says, until `done` finds
    /// what it waits for in stdout (and says what), stdout closes, or the
    /// deadline passes. What was found, and how many bytes of `input` were
    /// left unwritten then.
    fn pump<T>(
        &mut self,
        mut input: &[u8],
        deadline: Instant,
        done: impl Fn(&[u8]) -> Option<T>,
    ) -> Result<(T, usize), Stop> {
        loop {
            if let Some(found) = done(&self.out) {
                return Ok((found, input.len()));
            }
            if self.out_closed {
                return Err(Stop::Closed);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // What came as time ran out still counts: a step that ended
                // at its deadline (on a host slow to log in) did end.
                self.out_closed = drain(&self.stdout, &mut self.out);
                if let Some(found) = done(&self.out) {
                    return Ok((found, input.len()));
                }
                return Err(Stop::TimedOut);
            }
            let readable = PollFlags::POLLIN;
            let mut fds = vec![PollFd::new(self.stdout.as_fd(), readable)];
            if !self.err_closed {
                fds.push(PollFd::new(self.stderr.as_fd(), readable));
            }
            let writing = !input.is_empty() && self.stdin.is_some();
            if let (true, Some(stdin)) = (writing, &self.stdin) {
                fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLOUT));
            }
            let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
            match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => return Err(Stop::Closed),
            }
            let ready = |fd: &PollFd| fd.any().unwrap_or(false);
            let (out_ready, err_ready) = (ready(&fds[0]), !self.err_closed && ready(&fds[1]));
            let in_ready = writing && ready(fds.last().expect("stdout is polled"));
            drop(fds);
            if out_ready {
                self.out_closed = drain(&self.stdout, &mut self.out);
            }
            if err_ready {
                self.err_closed = drain(&self.stderr, &mut self.err);
            }
            if in_ready && let Some(stdin) = &self.stdin {
                match nix::unistd::write(stdin, input) {
                    Ok(n) => input = &input[n..],
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    // The host's end is gone: what it said tells why.
                    Err(_) => input = &[],
                }
            }
        }
    }

    /// Runs `script` in a fresh `sh` of the session, its stdin `/dev/null`.
    fn run(&mut self, script: &str, deadline: Instant) -> Result<Outcome, Stop> {
        let line = format!(
            "{}sh -c {} </dev/null 2>&1; {}",
            self.ack_line(),
            q(script),
            self.marker_line()
        );
        self.step(line.as_bytes(), deadline)
    }

    fn marker_line(&self) -> String {
        marker_line(&self.marker)
    }

    /// What a step line opens with: the shell says it has the line before
    /// it runs any of it.
    fn ack_line(&self) -> String {
        format!("printf '%s\\n' {}; ", self.ack())
    }

    fn ack(&self) -> String {
        format!("{}-go", self.marker)
    }

    /// Whether the shell acknowledged a step since `from` (an offset in `out`).
    fn acknowledged(&self, from: usize) -> bool {
        find(&self.out[from.min(self.out.len())..], self.ack().as_bytes()).is_some()
    }

    /// Writes `input` and waits for its marker: what the step said, its
    /// exit status, and the bytes of `input` left unwritten.
    fn step(&mut self, input: &[u8], deadline: Instant) -> Result<Outcome, Stop> {
        let marker = self.marker.clone();
        let ((end, code, next), left) =
            self.pump(input, deadline, |out| find_marker(out, &marker))?;
        if left > 0 {
            self.spoiled = true;
        }
        Ok(self.take_outcome(end, code, next))
    }

    /// The step's outcome from the output up to `end` (less the shell's
    /// acknowledgement), ssh's own messages after it (as one ssh call per
    /// step would give them); the rest of the output stays for the next step.
    fn take_outcome(&mut self, end: usize, code: i32, next: usize) -> Outcome {
        let said = String::from_utf8_lossy(&self.out[..end]).into_owned();
        let ack = format!("{}\n", self.ack());
        let mut text = said.replacen(&ack, "", 1);
        self.out.drain(..next);
        text.push_str(&String::from_utf8_lossy(&self.err));
        self.err.clear();
        self.answered = true;
        Outcome {
            code,
            text: text.trim_end().to_string(),
        }
    }

    /// Copies the local `file` to `dir` on the host (see the module's docs).
    fn push(
        &mut self,
        file: &Path,
        dir: &str,
        deadline: Instant,
        digests: &Digests,
    ) -> Result<Outcome, Stop> {
        let (bytes, meta) =
            match std::fs::read(file).and_then(|b| Ok((b, std::fs::metadata(file)?))) {
                Ok(read) => read,
                Err(e) => {
                    return Ok(Outcome {
                        code: CANNOT_RUN,
                        text: format!("cannot read {}: {e}", file.display()),
                    });
                }
            };
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mode = {
            use std::os::unix::fs::PermissionsExt;
            meta.permissions().mode() & 0o777
        };
        // A packed file is checked by the tool that unpacks it.
        let sha = Packing::of_name(&name)
            .is_none()
            .then(|| digests.of(file, &meta, &bytes));
        let ready = format!("{}-send", self.marker);
        let script = scripts::receive(dir, &name, bytes.len(), sha.as_deref(), mode, &ready);
        // Its stdin is the session's: the file's bytes follow.
        let line = format!(
            "{}sh -c {} 2>&1; {}",
            self.ack_line(),
            q(&script),
            self.marker_line()
        );
        let marker = self.marker.clone();
        let asked = format!("{ready}\n");
        let (said, _) = self.pump(line.as_bytes(), deadline, |out| {
            match find_marker(out, &marker) {
                Some(found) => Some(Err(found)),
                None => find(out, asked.as_bytes()).map(Ok),
            }
        })?;
        match said {
            // It did not get as far as reading (no such dir, say).
            Err((end, code, next)) => Ok(self.take_outcome(end, code, next)),
            Ok(at) => {
                self.out.drain(at..at + asked.len());
                // From here the shell's input holds the file's bytes until
                // the receiver has taken them all: a copy that fails may
                // have left some, and its session takes no other step.
                self.spoiled = true;
                let copied = self.step(&bytes, deadline);
                if copied.as_ref().is_ok_and(|c| c.ok()) {
                    self.spoiled = false;
                }
                copied
            }
        }
    }

    /// Ends the session: its shell sees the end of its input and exits.
    fn close(&mut self) {
        self.stdin = None;
    }

    /// Waits until `deadline` for the process to end (killing it then): its
    /// exit status, and everything it said that no step took.
    fn finish(mut self, deadline: Instant) -> Outcome {
        self.close();
        let code = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status.code().unwrap_or(CANNOT_RUN),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break CANNOT_RUN;
                }
            }
        };
        let _ = self.stdout.read_to_end(&mut self.out);
        let _ = self.stderr.read_to_end(&mut self.err);
        // The host's words, without the session's own lines (a step's
        // acknowledgement and its marker), which are no one's to read.
        let (ack, marker) = (self.ack(), format!("{} ", self.marker));
        let mut text: String = String::from_utf8_lossy(&self.out)
            .lines()
            .filter(|l| *l != ack && !l.starts_with(&marker))
            .map(|l| format!("{l}\n"))
            .collect();
        text.push_str(&String::from_utf8_lossy(&self.err));
        Outcome {
            code,
            text: text.trim_end().to_string(),
        }
    }
}

/// Lowercase hex SHA-256, as `sha256sum` prints it.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The SHA-256 of each big file a command copies, worked out once: the
/// agent goes to every host, and at 10,000 hosts hashing its 3 MB for each
/// would be minutes of this machine's CPU. A file is known by its path,
/// length, modification time and inode: a file rewritten is hashed anew.
/// Files under [`REMEMBERED`] (a host's slice of the matrix, cut for it
/// alone) are hashed each time, and not kept.
#[derive(Default)]
struct Digests {
    known: Mutex<HashMap<std::path::PathBuf, (FileKey, String)>>,
}

/// What tells one content of a file from another without reading it.
type FileKey = (u64, Option<std::time::SystemTime>, u64);

/// The size from which a file's SHA-256 is remembered.
const REMEMBERED: usize = 1 << 20;

impl Digests {
    fn of(&self, file: &Path, meta: &std::fs::Metadata, bytes: &[u8]) -> String {
        use std::os::unix::fs::MetadataExt;
        if bytes.len() < REMEMBERED {
            return sha256_hex(bytes);
        }
        let key = (bytes.len() as u64, meta.modified().ok(), meta.ino());
        let mut known = self.known.lock().expect("unpoisoned");
        match known.get(file) {
            Some((k, sha)) if *k == key && meta.len() == bytes.len() as u64 => sha.clone(),
            _ => {
                let sha = sha256_hex(bytes);
                known.insert(file.to_path_buf(), (key, sha.clone()));
                sha
            }
        }
    }
}

/// How long a closing session may take to end before it is killed.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How many hosts a fleet command keeps connected per `--jobs`: the first
/// this many hosts it reaches hold their shell (and their ssh master) for
/// the whole command, so a fleet up to that size logs in once per host. A
/// host past them logs in once per fan-out it is in (a start's deploy,
/// launch and go: three, where a step each and an scp and an unpack were
/// five), sharing no connection, so that the processes, descriptors and
/// memory of a command are bounded by `--jobs` whatever the fleet's size:
/// at most `KEPT_PER_JOB * jobs` shells and as many masters, and `jobs`
/// job shells beside them.
pub const KEPT_PER_JOB: usize = 4;

/// The open sessions of a fleet command, one per host (by name), each used
/// by one step at a time.
pub struct Sessions {
    idle: Mutex<HashMap<String, Session>>,
    /// Hosts whose command keeps no shell open: one call per step.
    one_call: Mutex<HashSet<String>>,
    /// Whether steps run in a kept shell at all (the system's OpenSSH, or
    /// a local shell); otherwise every step is one call.
    shells: bool,
    /// The hosts that may keep a connection for the command (a shell, an
    /// ssh master): the first `cap` reached.
    kept: Mutex<HashSet<String>>,
    /// At most this many kept hosts.
    cap: usize,
    /// At most this many sessions open at once (each holds three
    /// descriptors here): the kept hosts', and one for each job in flight.
    most_open: usize,
    opened: Mutex<usize>,
    digests: Digests,
}

impl Default for Sessions {
    /// As many as the open-file limit allows: for one host or a test.
    fn default() -> Self {
        Sessions::new(true, usize::MAX, 0)
    }
}

impl Sessions {
    /// Shells kept open (`shells`) or not, for at most `keep` hosts, and
    /// `jobs` more held for a host's job alone (no more in all than the
    /// open-file limit allows).
    fn new(shells: bool, keep: usize, jobs: usize) -> Self {
        let most = session_cap();
        Sessions {
            idle: Mutex::default(),
            one_call: Mutex::default(),
            shells,
            kept: Mutex::default(),
            cap: keep.min(most),
            most_open: keep.saturating_add(jobs).min(most),
            opened: Mutex::new(0),
            digests: Digests::default(),
        }
    }

    /// A fleet command's sessions, `--jobs` `jobs`: the first
    /// [`KEPT_PER_JOB`]` * jobs` hosts it reaches are kept connected.
    pub fn for_jobs(jobs: usize) -> Self {
        Sessions::new(true, jobs.saturating_mul(KEPT_PER_JOB), jobs)
    }

    /// No shell at all: every step is one call, its script whole on the
    /// command line (a command that is not the system's OpenSSH, see
    /// [`is_openssh`](super::is_openssh)); still, only the first
    /// [`KEPT_PER_JOB`]` * jobs` hosts keep an ssh master.
    pub fn none(jobs: usize) -> Self {
        Sessions::new(false, jobs.saturating_mul(KEPT_PER_JOB), jobs)
    }

    /// Whether `host` may keep a connection for the command: it already
    /// does, or a place is left (it takes it).
    pub fn keeps(&self, host: &str) -> bool {
        let mut kept = self.kept.lock().expect("unpoisoned");
        if kept.contains(host) {
            return true;
        }
        if kept.len() >= self.cap {
            return false;
        }
        kept.insert(host.to_string());
        true
    }

    /// A fan-out is done with `host` for now: a host the command does not
    /// keep has its session closed (its job's steps shared one login).
    pub fn job_done(&self, host: &str) {
        if self.kept.lock().expect("unpoisoned").contains(host) {
            return;
        }
        if let Some(session) = self.take(host) {
            self.release(session, Instant::now() + CLOSE_WAIT);
        }
    }
}

/// How many sessions this process may hold: its open-file limit (raised to
/// the hard limit where it can be) less room for everything else, three
/// descriptors a session.
fn session_cap() -> usize {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    // Enough for thousands of hosts; no more, since the programs mx starts
    // (ssh, scp, local agents) inherit it.
    let want = if hard == RLIM_INFINITY {
        65536
    } else {
        hard.min(65536)
    };
    let soft = if want > soft && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
        want
    } else {
        soft
    };
    (soft.saturating_sub(256) / 3) as usize
}

/// What a step in a session came to: its outcome, or no session for this
/// host (the caller makes one call for the step).
pub type Answer = Option<Outcome>;

impl Sessions {
    /// Runs `script` in `host`'s session, opening it with `open` when none is.
    pub fn run(
        &self,
        host: &str,
        open: &dyn Fn() -> Command,
        script: &str,
        timeout: Duration,
    ) -> Answer {
        self.with(host, open, timeout, &|s, deadline| s.run(script, deadline))
    }

    /// Copies each of `files` into `dir` on `host`, in its session.
    pub fn push(
        &self,
        host: &str,
        open: &dyn Fn() -> Command,
        files: &[std::path::PathBuf],
        dir: &str,
        timeout: Duration,
    ) -> Answer {
        self.with(host, open, timeout, &|s, deadline| {
            let mut said = Vec::new();
            for file in files {
                let outcome = s.push(file, dir, deadline, &self.digests)?;
                if !outcome.ok() {
                    return Ok(outcome);
                }
                said.extend((!outcome.text.is_empty()).then_some(outcome.text));
            }
            Ok(Outcome {
                code: 0,
                text: said.join("\n"),
            })
        })
    }

    fn with(
        &self,
        host: &str,
        open: &dyn Fn() -> Command,
        timeout: Duration,
        step: &dyn Fn(&mut Session, Instant) -> Result<Outcome, Stop>,
    ) -> Answer {
        let deadline = Instant::now() + timeout;
        let mut retried = false;
        loop {
            let mut session = match self.take(host) {
                Some(session) => session,
                None => self.open(host, open)?,
            };
            let said_before = session.out.len();
            match step(&mut session, deadline) {
                Ok(outcome) if session.spoiled => {
                    self.release(session, Instant::now());
                    return Some(outcome);
                }
                Ok(outcome) => {
                    let other = self
                        .idle
                        .lock()
                        .expect("unpoisoned")
                        .insert(host.to_string(), session);
                    // Two steps on one host at once opened two sessions:
                    // one is kept.
                    if let Some(other) = other {
                        self.release(other, Instant::now() + CLOSE_WAIT);
                    }
                    return Some(outcome);
                }
                Err(Stop::TimedOut) => {
                    let mut ended = self.release(session, Instant::now());
                    ended.code = TIMED_OUT;
                    ended.text = format!("{}\ntimed out after {}s", ended.text, timeout.as_secs())
                        .trim_start()
                        .to_string();
                    return Some(ended);
                }
                Err(Stop::Closed) => {
                    // Closed before the shell had the step (the link or sshd
                    // went between steps): nothing of it ran, and a new
                    // session tells the host's answer now.
                    let unacknowledged = !session.acknowledged(said_before);
                    let answered = session.answered;
                    let ended = self.release(session, Instant::now() + CLOSE_WAIT);
                    if answered && unacknowledged && !retried {
                        retried = true;
                        continue;
                    }
                    if !answered && ended.code == 0 {
                        // It ended well without running the step: a command
                        // that keeps no shell open.
                        self.one_call
                            .lock()
                            .expect("unpoisoned")
                            .insert(host.to_string());
                        return None;
                    }
                    return Some(ended);
                }
            }
        }
    }

    fn take(&self, host: &str) -> Option<Session> {
        self.idle.lock().expect("unpoisoned").remove(host)
    }

    /// A new session to `host` (kept for the command, or held for its job:
    /// [`Sessions::job_done`]), or `None` when it gets one call per step (no
    /// shell kept open there, or no descriptors or processes left here for
    /// one).
    fn open(&self, host: &str, open: &dyn Fn() -> Command) -> Option<Session> {
        if !self.shells || self.one_call.lock().expect("unpoisoned").contains(host) {
            return None;
        }
        // Taken here, before `open` builds the command: a kept host's ssh
        // gets a master, any other none.
        self.keeps(host);
        let mut opened = self.opened.lock().expect("unpoisoned");
        if *opened >= self.most_open {
            return None;
        }
        // One that cannot be started leaves the step to one call, which
        // says why if it cannot run either.
        let session = Session::open(open()).ok()?;
        *opened += 1;
        Some(session)
    }

    /// Ends `session` (see [`Session::finish`]) and frees its place.
    fn release(&self, session: Session, deadline: Instant) -> Outcome {
        *self.opened.lock().expect("unpoisoned") -= 1;
        session.finish(deadline)
    }
}

impl Sessions {
    /// Ends every open session: each shell sees the end of its input at
    /// once, then each is waited for (killed past `CLOSE_WAIT`), so no ssh
    /// outlives the command. A later step would open a new one.
    pub fn close_all(&self) {
        let mut idle: Vec<Session> = self
            .idle
            .lock()
            .map(|mut m| m.drain().map(|(_, s)| s).collect())
            .unwrap_or_default();
        if let Ok(mut opened) = self.opened.lock() {
            *opened = opened.saturating_sub(idle.len());
        }
        for session in &mut idle {
            session.close();
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        for session in idle {
            session.finish(deadline);
        }
    }
}

impl Drop for Sessions {
    fn drop(&mut self) {
        self.close_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local_shell(dir: &Path) -> impl Fn() -> Command + '_ {
        move || {
            let mut cmd = Command::new("sh");
            cmd.current_dir(dir);
            cmd
        }
    }

    const LONG: Duration = Duration::from_secs(20);

    #[test]
    fn steps_run_in_one_shell_each_with_its_output_and_status() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::default();
        let open = local_shell(dir.path());
        let pid = |s: &Sessions| s.run("h", &open, "echo $PPID", LONG).unwrap();
        let first = pid(&sessions);
        assert_eq!(first.code, 0);
        // The same session's shell is every step's parent.
        assert_eq!(pid(&sessions), first);
        let failed = sessions
            .run("h", &open, "echo one; printf two >&2; exit 3", LONG)
            .unwrap();
        assert_eq!((failed.code, failed.text.as_str()), (3, "one\ntwo"));
        // A last line without its newline, and a step that reads stdin (it
        // reads nothing: the session's next steps are not its input).
        let said = sessions
            .run("h", &open, "printf 'no newline'; cat", LONG)
            .unwrap();
        assert_eq!((said.code, said.text.as_str()), (0, "no newline"));
        let late = sessions
            .run(
                "h",
                &open,
                "echo begun; sleep 5",
                Duration::from_millis(300),
            )
            .unwrap();
        // The host's words and the timeout, none of the session's own lines.
        assert_eq!(late.code, TIMED_OUT);
        assert_eq!(late.text, "begun\ntimed out after 0s");
        // A new session after the one that timed out.
        let next = pid(&sessions);
        assert!(next.ok() && next.text != first.text, "{next:?}");
    }

    #[test]
    fn only_the_first_hosts_a_command_reaches_keep_a_shell_the_rest_one_a_job() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::for_jobs(1);
        let open = local_shell(dir.path());
        let hosts: Vec<String> = (1..=KEPT_PER_JOB + 3).map(|i| format!("h{i}")).collect();
        // Two fan-outs over the fleet, as a start's deploy and launch make
        // them: two steps for each host's job, then the next host.
        let mut shells = vec![Vec::new(); hosts.len()];
        for _ in 0..2 {
            for (i, host) in hosts.iter().enumerate() {
                for _ in 0..2 {
                    let said = sessions.run(host, &open, "echo $PPID", LONG);
                    shells[i].push(said.expect("a session").text);
                }
                sessions.job_done(host);
                // Never more open than the kept hosts' and this job's.
                assert!(*sessions.opened.lock().unwrap() <= KEPT_PER_JOB + 1);
            }
        }
        for (i, pids) in shells.iter().enumerate() {
            // One login for a job's steps, whichever the host.
            assert_eq!(pids[0], pids[1], "h{}", i + 1);
            assert_eq!(pids[2], pids[3], "h{}", i + 1);
            if i < KEPT_PER_JOB {
                // A kept host: the same shell in both fan-outs.
                assert_eq!(pids[0], pids[2], "h{}", i + 1);
            } else {
                // Past them: a shell of its own for each job.
                assert_ne!(pids[0], pids[2], "h{}", i + 1);
            }
        }
        assert_eq!(*sessions.opened.lock().unwrap(), KEPT_PER_JOB);
        assert!(sessions.keeps("h1") && !sessions.keeps(&hosts[KEPT_PER_JOB]));
        // No shell at all: still only the first keep a connection (an ssh
        // master).
        let none = Sessions::none(1);
        assert!(none.run("h1", &open, "true", LONG).is_none());
        let kept = hosts.iter().filter(|h| none.keeps(h)).count();
        assert_eq!(kept, KEPT_PER_JOB);
    }

    #[test]
    fn a_file_arrives_whole_under_its_name_with_its_mode_and_the_session_goes_on() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("to");
        std::fs::create_dir(&to).unwrap();
        // Bytes a shell would choke on if it read them as commands.
        let mut bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
        bytes.extend_from_slice(b"\nrm -rf /\n'\"`");
        let file = dir.path().join("mx");
        std::fs::write(&file, &bytes).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o751)).unwrap();
        let small = dir.path().join("matrix.csv");
        std::fs::write(&small, "a,b\n").unwrap();
        let sessions = Sessions::default();
        let open = local_shell(dir.path());
        let to_dir = to.display().to_string();
        let pushed = sessions
            .push("h", &open, &[file, small], &to_dir, LONG)
            .unwrap();
        assert_eq!((pushed.code, pushed.text.as_str()), (0, ""));
        assert_eq!(std::fs::read(to.join("mx")).unwrap(), bytes);
        assert_eq!(
            std::fs::read_to_string(to.join("matrix.csv")).unwrap(),
            "a,b\n"
        );
        let mode = std::fs::metadata(to.join("mx"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o751);
        let after = sessions.run("h", &open, "ls -A to", LONG).unwrap();
        assert_eq!(after.text, "matrix.csv\nmx", "no temp file left");
        // Into a directory that is not there: said, nothing sent, and the
        // session still answers.
        let missing = sessions
            .push("h", &open, &[to.join("mx")], "/nonexistent/mx", LONG)
            .unwrap();
        assert!(!missing.ok(), "{missing:?}");
        assert!(missing.text.contains("/nonexistent/mx"), "{missing:?}");
        assert_eq!(
            sessions.run("h", &open, "echo still", LONG).unwrap().text,
            "still"
        );
    }

    #[test]
    fn a_big_files_digest_is_worked_out_once_and_anew_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mx");
        let first: Vec<u8> = (0..=255u8).cycle().take(REMEMBERED + 1).collect();
        std::fs::write(&file, &first).unwrap();
        let sessions = Sessions::default();
        let open = local_shell(dir.path());
        for host in ["h1", "h2"] {
            std::fs::create_dir(dir.path().join(host)).unwrap();
            let to = dir.path().join(host).display().to_string();
            let pushed = sessions
                .push(host, &open, std::slice::from_ref(&file), &to, LONG)
                .unwrap();
            assert!(pushed.ok(), "{pushed:?}");
            assert_eq!(
                std::fs::read(dir.path().join(host).join("mx")).unwrap(),
                first
            );
        }
        assert_eq!(sessions.digests.known.lock().unwrap().len(), 1);
        // Rewritten, the same length: its new digest, and it arrives whole
        // (a digest kept from before would have it refused as damaged).
        let second: Vec<u8> = first.iter().map(|b| b.wrapping_add(1)).collect();
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, &second).unwrap();
        let to = dir.path().join("h1").display().to_string();
        let pushed = sessions
            .push("h1", &open, std::slice::from_ref(&file), &to, LONG)
            .unwrap();
        assert!(pushed.ok(), "{pushed:?}");
        assert_eq!(
            std::fs::read(dir.path().join("h1").join("mx")).unwrap(),
            second
        );
        // A small file (a host's slice) is hashed each time, never kept.
        let slice = dir.path().join("matrix.csv");
        std::fs::write(&slice, "a,b\n").unwrap();
        sessions.push("h2", &open, &[slice], &to, LONG).unwrap();
        assert_eq!(sessions.digests.known.lock().unwrap().len(), 1);
    }

    /// `bytes` packed `how` into `path` (as a deploy packs the agent), with
    /// `mode`.
    fn packed(how: Packing, path: &std::path::Path, bytes: &[u8], mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let plain = path.with_extension("plain");
        std::fs::write(&plain, bytes).unwrap();
        crate::deploy::pack(how, &plain, path).unwrap();
        std::fs::remove_file(plain).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_packed_file_arrives_unpacked_under_its_name_and_a_broken_one_leaves_nothing() {
        use std::os::unix::fs::PermissionsExt;
        for how in Packing::ALL {
            let dir = tempfile::tempdir().unwrap();
            let to = dir.path().join("to");
            std::fs::create_dir(&to).unwrap();
            let bytes: Vec<u8> = (0..=255u8).cycle().take(500_000).collect();
            let name = format!("mx{}", how.suffix());
            let file = dir.path().join(&name);
            packed(how, &file, &bytes, 0o700);
            let sessions = Sessions::default();
            let open = local_shell(dir.path());
            let to_dir = to.display().to_string();
            let pushed = sessions.push("h", &open, &[file], &to_dir, LONG).unwrap();
            assert_eq!((pushed.code, pushed.text.as_str()), (0, ""), "{how:?}");
            assert_eq!(std::fs::read(to.join("mx")).unwrap(), bytes);
            let mode = std::fs::metadata(to.join("mx"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700);
            let after = sessions.run("h", &open, "ls -A to", LONG).unwrap();
            assert_eq!(after.text, "mx", "only the agent, unpacked");
            // Bytes that arrive whole but are not packed so: said in one
            // line, the agent there untouched, nothing left beside it.
            let broken = dir.path().join("broken").join(&name);
            std::fs::create_dir(broken.parent().unwrap()).unwrap();
            std::fs::write(&broken, b"not packed at all").unwrap();
            let refused = sessions.push("h", &open, &[broken], &to_dir, LONG).unwrap();
            assert!(!refused.ok(), "{refused:?}");
            assert_eq!(
                refused.text,
                format!(
                    "{name} could not be unpacked into {to_dir} ({} -d: it arrived damaged or short, or the disk is full)",
                    how.tool()
                )
            );
            assert_eq!(std::fs::read(to.join("mx")).unwrap(), bytes);
            let after = sessions.run("h", &open, "ls -A to", LONG).unwrap();
            assert_eq!(after.text, "mx", "nothing left of the broken copy");
            // A packed agent cut short (its frame unfinished): refused the
            // same way, though no SHA-256 of it was checked.
            let whole = std::fs::read(dir.path().join(&name)).unwrap();
            let cut = dir.path().join("cut").join(&name);
            std::fs::create_dir(cut.parent().unwrap()).unwrap();
            std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
            let refused = sessions.push("h", &open, &[cut], &to_dir, LONG).unwrap();
            assert!(!refused.ok(), "{how:?}: {refused:?}");
            assert_eq!(std::fs::read(to.join("mx")).unwrap(), bytes);
            let after = sessions.run("h", &open, "ls -A to", LONG).unwrap();
            assert_eq!(after.text, "mx", "nothing left of the cut copy");
        }
    }

    #[test]
    fn a_packed_file_copied_as_it_is_unpacks_in_place() {
        use std::process::Command;
        let dir = tempfile::tempdir().unwrap();
        let bytes = b"#!/bin/sh\necho agent\n".repeat(1000);
        packed(Packing::Gzip, &dir.path().join("mx.gz"), &bytes, 0o600);
        let d = dir.path().display().to_string();
        let run = Command::new("sh")
            .args(["-c", &scripts::unpack(&d, "mx.gz", 0o700)])
            .output()
            .unwrap();
        assert!(run.status.success(), "{run:?}");
        assert_eq!(std::fs::read(dir.path().join("mx")).unwrap(), bytes);
        assert!(!dir.path().join("mx.gz").exists());
        std::fs::write(dir.path().join("mx.gz"), b"junk").unwrap();
        let run = Command::new("sh")
            .args(["-c", &scripts::unpack(&d, "mx.gz", 0o700)])
            .output()
            .unwrap();
        assert!(!run.status.success());
        assert_eq!(
            String::from_utf8_lossy(&run.stdout).trim_end(),
            "mx.gz arrived but could not be unpacked (gzip -d)"
        );
        assert_eq!(std::fs::read(dir.path().join("mx")).unwrap(), bytes);
        assert!(!dir.path().join("mx.gz").exists() && !dir.path().join(".mx.tmp").exists());
    }

    #[test]
    fn a_session_closed_between_steps_is_opened_again_and_a_shell_that_keeps_none_gets_none() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::default();
        let open = local_shell(dir.path());
        let first = sessions.run("h", &open, "echo $PPID", LONG).unwrap();
        // The session's own shell ends between steps (as when a link is cut).
        let shell: i32 = first.text.parse().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(shell),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let again = sessions.run("h", &open, "echo $PPID", LONG).unwrap();
        assert!(again.ok() && again.text != first.text, "{again:?}");
        // A command that exits at once, well, without reading its input:
        // one call per step for that host.
        let no_shell = || Command::new("true");
        assert_eq!(sessions.run("w", &no_shell, "echo hi", LONG), None);
        assert_eq!(sessions.run("w", &no_shell, "echo hi", LONG), None);
        // One that cannot connect says why, with its status.
        let refused = || {
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg("echo 'ssh: connect to host x: refused' >&2; exit 255");
            cmd
        };
        let said = sessions.run("x", &refused, "true", LONG).unwrap();
        assert_eq!(
            (said.code, said.text.as_str()),
            (255, "ssh: connect to host x: refused")
        );
    }

    #[test]
    fn a_copy_whose_reader_fails_leaves_no_byte_for_the_shell_to_run() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A `head` that passes the check for -c, then reads nothing.
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let head = bin.join("head");
        std::fs::write(
            &head,
            "#!/bin/sh\n[ \"$2\" = 1 ] && exec /usr/bin/head \"$@\"\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&head, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.path().join("evil");
        std::fs::write(&file, "echo INJECTED > pwned\n'unclosed\n").unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let open = || {
            let mut cmd = Command::new("sh");
            cmd.current_dir(dir.path()).env("PATH", &path);
            cmd
        };
        let sessions = Sessions::default();
        let to = dir.path().display().to_string();
        let copied = sessions.push("h", &open, &[file], &to, LONG).unwrap();
        assert!(!copied.ok(), "{copied:?}");
        std::thread::sleep(Duration::from_millis(200));
        assert!(!dir.path().join("pwned").exists(), "the file's bytes ran");
        // The next step gets a shell of its own, and answers.
        assert_eq!(
            sessions.run("h", &open, "echo next", LONG).unwrap().text,
            "next"
        );
        // A head with no -c is said before any byte is sent.
        std::fs::write(&head, "#!/bin/sh\nexit 1\n").unwrap();
        let refused = sessions
            .push("h", &open, &[dir.path().join("evil")], &to, LONG)
            .unwrap();
        assert!(refused.text.contains("head has no -c"), "{refused:?}");
        assert_eq!(
            sessions.run("h", &open, "echo still", LONG).unwrap().text,
            "still"
        );
    }

    #[test]
    fn a_step_the_shell_had_is_never_run_twice() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::default();
        let open = local_shell(dir.path());
        assert!(sessions.run("h", &open, "true", LONG).unwrap().ok());
        // The step runs, and its session ends under it (as a link cut
        // mid-step): it fails, and is not run again in a new session.
        let cut = sessions.run("h", &open, "echo x >> count; kill -9 $PPID", LONG);
        assert!(!cut.unwrap().ok());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("count")).unwrap(),
            "x\n"
        );
    }

    #[test]
    fn two_steps_at_once_on_one_host_leave_one_session_open() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::default();
        let open = local_shell(dir.path());
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| assert!(sessions.run("h", &open, "sleep 0.3", LONG).unwrap().ok()));
            }
        });
        assert_eq!(*sessions.opened.lock().unwrap(), 1);
        assert_eq!(sessions.idle.lock().unwrap().len(), 1);
    }
}
