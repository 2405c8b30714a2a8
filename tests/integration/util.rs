//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scratch directory that mx runs in; removed when dropped.
pub struct Sandbox {
    dir: tempfile::TempDir,
}

/// What one run of mx did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.file(name);
        std::fs::write(&path, text).expect("write fixture");
        path
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name)).expect("read output")
    }

    /// Runs `mx args...` here, with no MX_* variables but those given.
    pub fn mx_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        self.mx_fed(args, env, None)
    }

    /// Runs `mx args...` here with `input` on its standard input: a pipe,
    /// not a terminal.
    pub fn mx_input(&self, args: &[&str], input: &str) -> Run {
        self.mx_fed(args, &[], Some(input))
    }

    /// `mx args...` to run here, every `MX_*` variable of this process
    /// removed and `env` set: for a test that spawns it and acts meanwhile.
    pub fn mx_command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mx"));
        cmd.args(args).current_dir(self.path());
        for (key, _) in std::env::vars() {
            if key.starts_with("MX_") {
                cmd.env_remove(key);
            }
        }
        for (key, value) in env {
            cmd.env(key, value);
        }
        cmd
    }

    fn mx_fed(&self, args: &[&str], env: &[(&str, &str)], input: Option<&str>) -> Run {
        let mut cmd = self.mx_command(args, env);
        let Output {
            status,
            stdout,
            stderr,
        } = match input {
            None => cmd.output().expect("run mx"),
            Some(input) => {
                use std::io::Write;
                let mut child = cmd
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("run mx");
                // mx may exit without reading: a closed pipe is its answer.
                let _ = child
                    .stdin
                    .take()
                    .expect("piped")
                    .write_all(input.as_bytes());
                child.wait_with_output().expect("run mx")
            }
        };
        Run {
            code: status.code().expect("mx exited, not killed"),
            stdout: String::from_utf8(stdout).expect("utf-8 stdout"),
            stderr: String::from_utf8(stderr).expect("utf-8 stderr"),
        }
    }

    pub fn mx(&self, args: &[&str]) -> Run {
        self.mx_env(args, &[])
    }

    /// Runs `mx args...` here on a terminal: a pseudo-terminal that
    /// util-linux `script` opens, 100 columns wide, stopped with ctrl-c
    /// (SIGINT) after `limit` seconds. Returns what the terminal received,
    /// escape codes and all.
    pub fn mx_on_terminal(&self, args: &[&str], limit: u64) -> String {
        let words: Vec<String> = [env!("CARGO_BIN_EXE_mx")]
            .iter()
            .chain(args)
            .map(|w| shlex::try_quote(w).unwrap().into_owned())
            .collect();
        let line = format!(
            "stty cols 100 rows 40; timeout -s INT {limit} {}",
            words.join(" ")
        );
        let mut cmd = Command::new("script");
        cmd.args(["-q", "-e", "-f", "-c", &line, "/dev/null"])
            .current_dir(self.path())
            .env("TERM", "xterm")
            .stdin(Stdio::null());
        for (key, _) in std::env::vars() {
            if key.starts_with("MX_") {
                cmd.env_remove(key);
            }
        }
        let out = cmd.output().expect("util-linux script runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Compares `actual` with the golden file `tests/golden/<name>`. With
/// `MX_BLESS=1` the golden file is (re)written instead; review the diff.
pub fn assert_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("MX_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).expect("bless golden file");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("golden file {}: {e}", path.display()));
    if want != actual {
        panic!(
            "output differs from {}\n--- want\n{want}\n--- got\n{actual}\n(MX_BLESS=1 rewrites it)",
            path.display()
        );
    }
}

/// Fails the test, saying `what` needs root, unless it runs as root. The tests
/// that call it are `#[ignore = "needs root: ..."]`: a plain run lists them as
/// skipped; `--run-ignored all` (CI, as root) runs them.
pub fn require_root(what: &str) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "{what} needs root: run the ignored tests as root"
    );
}

/// The words of the first line of a summary `text` that starts, after its
/// indent, with `lead` (`REQUESTS`, `DELIVERED`, a host's name, ...).
pub fn summary_words(text: &str, lead: &str) -> Vec<String> {
    text.lines()
        .find(|l| l.trim_start().starts_with(lead))
        .unwrap_or_else(|| panic!("no {lead} line: {text}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Bits on the wire per request, by a summary's REQUESTS line
/// (`REQUESTS  5.8 kpps  7.0 Mbps wire ...`): 1,040 for 64-byte requests
/// over IPv4, 1,200 over IPv6 (to the rounding of the line's figures).
pub fn wire_bits_per_request(text: &str) -> f64 {
    let words = summary_words(text, "REQUESTS");
    let scaled = |value: &str, unit: &str| -> f64 {
        let scale = match unit.chars().next() {
            Some('k') => 1e3,
            Some('M') => 1e6,
            Some('G') => 1e9,
            _ => 1.0,
        };
        value.parse::<f64>().unwrap_or_else(|_| panic!("{text}")) * scale
    };
    assert_eq!(words.get(5).map(String::as_str), Some("wire"), "{text}");
    scaled(&words[3], &words[4]) / scaled(&words[1], &words[2])
}

/// An unprivileged local account, made for the tests that play another user
/// of a shared machine (planting a directory before mx makes it). Needs
/// root.
pub struct OtherUser {
    pub name: &'static str,
    pub uid: u32,
    pub gid: u32,
}

impl OtherUser {
    /// The account `mx-other`, made when this machine has none (tests in
    /// other processes may race to make it: useradd locks /etc/passwd, and
    /// the loser finds it made).
    pub fn get() -> OtherUser {
        require_root("making another user");
        const NAME: &str = "mx-other";
        for _ in 0..100 {
            if let Some((uid, gid)) = Self::ids(NAME) {
                return OtherUser {
                    name: NAME,
                    uid,
                    gid,
                };
            }
            let _ = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                ])
                .arg(NAME)
                .output();
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("cannot make the user {NAME} (useradd)");
    }

    fn ids(name: &str) -> Option<(u32, u32)> {
        let id = |flag: &str| {
            let out = Command::new("id").args([flag, name]).output().ok()?;
            String::from_utf8(out.stdout).ok()?.trim().parse().ok()
        };
        Some((id("-u")?, id("-g")?))
    }

    /// Runs `argv` as this user (no supplementary groups); panics unless it
    /// succeeds.
    pub fn run(&self, argv: &[&str]) {
        let out = Command::new("setpriv")
            .arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--clear-groups")
            .arg("--")
            .args(argv)
            .output()
            .expect("setpriv runs");
        assert!(
            out.status.success(),
            "as {}: {argv:?}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Waits for an event: polls `look` every 100 ms until it returns `Some`,
/// and fails the test naming `what` (and what `look` saw last, through
/// `seen`) if `limit` passes first. Tests wait for what they need this way,
/// never for a fixed time: a slow machine waits longer, a fast one less.
pub fn wait_for<T>(
    what: &str,
    limit: std::time::Duration,
    mut look: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match look() {
            Ok(found) => return found,
            Err(seen) if std::time::Instant::now() >= deadline => {
                panic!("waited {limit:?} for {what}; last seen: {seen}")
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
}

/// The steady intervals in the agent report at `path` (0 while it is not
/// written yet): its distinct `ts` over rows whose phase is `steady`.
pub fn steady_intervals(path: &Path) -> usize {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    let mut lines = text.lines();
    let Some(header) = lines.next() else { return 0 };
    let header: Vec<&str> = header.trim_end().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (Some(ts), Some(phase)) = (column("ts"), column("phase")) else {
        return 0;
    };
    let mut seen: Vec<&str> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|cells| cells.get(phase) == Some(&"steady"))
        .filter_map(|cells| cells.get(ts).copied())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// Waits until every agent report of `paths` holds `n` steady intervals:
/// what a `summarize --window` of n intervals needs to read.
pub fn wait_for_steady(paths: &[PathBuf], n: usize) {
    wait_for(
        &format!("{n} steady intervals in every report"),
        std::time::Duration::from_secs(30),
        || {
            let counts: Vec<usize> = paths.iter().map(|p| steady_intervals(p)).collect();
            if counts.iter().all(|&c| c >= n) {
                Ok(())
            } else {
                Err(format!("{counts:?} in {paths:?}"))
            }
        },
    )
}

/// The agent the lab deploys: this test build's mx without its debug
/// sections (11 MB, not 116: what a host needs to run it). A lab start then
/// copies what a user's would, in kind: a stripped binary. Made once per
/// build into the build's own temporary directory (named by the binary's
/// size and time, written under a temporary name and renamed), and shared
/// by every test process of that build.
pub fn lean_agent() -> &'static Path {
    static LEAN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LEAN.get_or_init(|| {
        let exe = Path::new(env!("CARGO_BIN_EXE_mx"));
        let meta = std::fs::metadata(exe).expect("the test build's mx");
        let made = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let lean = dir.join(format!("lean-agent-{}-{made}", meta.len()));
        if lean.is_file() {
            return lean;
        }
        let fresh = tempfile::Builder::new()
            .prefix(".lean-agent-")
            .tempfile_in(dir)
            .expect("a file for the lean agent")
            .into_temp_path();
        let out = Command::new("objcopy")
            .arg("--strip-debug")
            .arg(exe)
            .arg(&*fresh)
            .output()
            .expect("objcopy (binutils) runs");
        assert!(out.status.success(), "objcopy: {out:?}");
        fresh.persist(&lean).expect("the lean agent takes its name");
        lean
    })
}

/// The findings of kind `kind` (`loss`, `rate`, ...) of a `summarize
/// --json` document.
pub fn findings_of<'a>(doc: &'a serde_json::Value, kind: &str) -> Vec<&'a serde_json::Value> {
    doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// Runs Debian's `promtool` with `args` in `dir`, and asserts it passed;
/// what it printed.
pub fn promtool(args: &[&str], dir: &Path) -> String {
    let out = std::process::Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (tests/run installs Debian's prometheus)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}
