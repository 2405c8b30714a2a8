//! The shell scripts the controller runs on each host. Every value that comes
//! from a file or a flag (a directory, a host name, a flag value) is quoted for
//! the shell: a token or path can never run a command.

use super::packing::Packing;
use super::shell_join;

/// One word, quoted for a POSIX shell (single quotes only where needed).
pub fn q(word: &str) -> String {
    shell_join(&[word])
}

/// The agent binary's name inside the remote directory.
pub(crate) const AGENT_BIN: &str = "mx";

/// Prints the pids of agents started from `dir` (by the binary itself, so
/// other agents on the same box, another user's or another sandbox's, are
/// never touched): every process whose executable is the file `dir/mx`.
///
/// `test -ef` (same device and inode; a builtin of dash, bash and busybox)
/// costs one stat per process. A `$(readlink ...)` per process would fork
/// once for every process on the host: 90 ms of CPU per call for 70
/// processes, seconds on a busy server, and a look every few seconds
/// (`run`'s live line) stalled the very agents it looked at. The binary's
/// path is fixed where the script begins (a relative `dir` is the login
/// directory's), so a script that has moved into `dir` still finds it.
///
/// `mx_running` says whether one runs without a process of its own (where
/// `[ -n "$(agent_pids)" ]` forks a subshell): every step asks it.
fn agent_pids(dir: &str) -> String {
    format!(
        "case {d} in /*) mx_exe={exe} ;; *) mx_exe=\"$PWD\"/{exe} ;; esac\n\
         agent_pids() {{ [ -e \"$mx_exe\" ] || return 0; for p in /proc/[0-9]*; do [ \"$p/exe\" -ef \"$mx_exe\" ] && echo \"${{p#/proc/}}\"; done; return 0; }}\n\
         mx_running() {{ [ -e \"$mx_exe\" ] || return 1; for p in /proc/[0-9]*; do [ \"$p/exe\" -ef \"$mx_exe\" ] && return 0; done; return 1; }}",
        d = q(dir),
        exe = q(&format!("{dir}/{AGENT_BIN}")),
    )
}

/// The file that marks a remote directory as made by mx: `clean` deletes no
/// directory without it, and `start` moves into no one else's.
pub(crate) const OWNED_MARK: &str = ".mx-remote-dir";

/// How a refusal of the remote directory ends: what the operator does.
pub const CHOOSE_ANOTHER: &str = "choose another --remote-dir";

/// The shell functions that judge the remote directory `dir` (in
/// `$mx_dir`) as OpenSSH's StrictModes judges `~/.ssh`: `/var/tmp/mx`
/// belongs to whoever makes it first, and an agent run as root from a
/// directory another user can write is that user's code run as root.
///
/// - `mx_own`: the directory itself is a real directory (never a symlink),
///   owned by the user the script runs as, writable by no one else; and
///   every directory above it as `mx_parents` judges them.
/// - `mx_parents DIR`: DIR and every directory above it, by its real path,
///   are owned by root or that user, and writable by no one else unless
///   sticky (as `/var/tmp` is: nobody removes or renames another's entry).
///
/// Either refuses in one line naming the path, its owner and its mode, and
/// exits the script. `umask 077` makes every file the script (and an agent
/// it starts) writes private: logs, reports, control files.
///
/// Every fleet step runs these, on every host: they read the owners and
/// modes of the whole chain with one `stat` (a fork and an exec where a
/// stat a directory cost three), the real path by `cd -P` in the script's
/// own shell (no subshell), and the user's id from the directory itself
/// once `test -O` says it is theirs (from `/proc/self/status` where the
/// directory is yet to be made, `id -u` where that cannot be read). A
/// refusal's words cost their own stat. `mx_dir_mode` is left holding the
/// directory's mode, so that a step tightens it only where it must.
fn dir_rules(dir: &str) -> String {
    format!(
        r#"umask 077
mx_dir={d}
mx_refuse() {{ echo "$1 -- {CHOOSE_ANOTHER}"; exit 1; }}
mx_stat() {{ mx_st=$(stat -c '%u %a %U' -- "$1" 2>/dev/null) || {{ echo "cannot read the owner and mode of $1 (this host's stat has no -c?)"; exit 1; }}; set -- $mx_st; mx_uid=$1; mx_mode=$((0$2)); mx_said="owner $3 (uid $1), mode $(printf %04o "$mx_mode")"; }}
mx_own() {{
  if [ -L "$mx_dir" ]; then mx_stat "$mx_dir"; mx_refuse "$mx_dir is a symlink ($mx_said): mx never runs through one"; fi
  [ -d "$mx_dir" ] || {{ mx_stat "$mx_dir"; mx_refuse "$mx_dir is not a directory ($mx_said)"; }}
  [ -O "$mx_dir" ] || {{ mx_stat "$mx_dir"; mx_refuse "$mx_dir belongs to another user ($mx_said): whoever owns it could replace the agent"; }}
  mx_chain "$mx_dir" own
}}
mx_parents() {{ [ -n "$mx_me" ] || mx_whoami; mx_chain "$1"; }}
mx_whoami() {{
  while read -r mx_k mx_real mx_v mx_rest; do [ "$mx_k" = Uid: ] && {{ mx_me=$mx_v; return 0; }}; done < /proc/self/status 2>/dev/null
  mx_me=$(id -u)
}}
mx_chain() {{
  mx_back=$PWD
  cd -P -- "$1" 2>/dev/null || {{ echo "cannot enter $1"; exit 1; }}
  mx_p=$PWD; cd -- "$mx_back" 2>/dev/null
  mx_first=$2; mx_arg=$1
  set --; mx_q=$mx_p
  while :; do set -- "$@" "$mx_q"; [ "$mx_q" = / ] && break; mx_q=${{mx_q%/*}}; [ -n "$mx_q" ] || mx_q=/; done
  mx_st=$(stat -c '%u %a' -- "$@" 2>/dev/null) || {{ echo "cannot read the owner and mode of $mx_arg (this host's stat has no -c?)"; exit 1; }}
  set -- $mx_st; mx_q=$mx_p
  while [ $# -ge 2 ]; do
    mx_uid=$1; mx_mode=$((0$2)); shift 2
    if [ -n "$mx_first" ]; then
      mx_me=$mx_uid; mx_first=; mx_dir_mode=$mx_mode
      [ $((mx_mode & 022)) = 0 ] || {{ mx_stat "$mx_dir"; mx_refuse "$mx_dir is writable by other users ($mx_said): any of them could replace the agent"; }}
    elif {{ [ "$mx_uid" != 0 ] && [ "$mx_uid" != "$mx_me" ]; }} || {{ [ $((mx_mode & 022)) != 0 ] && [ $((mx_mode & 01000)) = 0 ]; }}; then
      mx_stat "$mx_q"; mx_refuse "$mx_dir is not safe: $mx_q ($mx_said) lets another user replace what is in it"
    fi
    [ "$mx_q" = / ] && return 0
    mx_q=${{mx_q%/*}}; [ -n "$mx_q" ] || mx_q=/
  done
}}"#,
        d = q(dir)
    )
}

/// The head of every script that touches the remote directory: the rules
/// ([`dir_rules`]) applied to it when it exists (a script that finds none
/// says so itself), and [`agent_pids`].
fn head(dir: &str) -> String {
    format!(
        "{rules}\n\
         if [ -e \"$mx_dir\" ] || [ -L \"$mx_dir\" ]; then mx_own; fi\n\
         {pids}",
        rules = dir_rules(dir),
        pids = agent_pids(dir)
    )
}

/// Makes the directory (mode 0700, under parents judged first: nothing is
/// made in a directory another user controls), or takes it when the rules
/// allow, tightened to 0700; marks it mx's. A directory that holds files mx
/// did not put there is refused (an empty one is taken).
fn make_owned_dir(dir: &str) -> String {
    format!(
        "{rules}\n\
         if [ ! -e \"$mx_dir\" ] && [ ! -L \"$mx_dir\" ]; then {ancestors}; mkdir -p -- \"$mx_dir\" || exit 1; fi\n\
         mx_own; [ \"$mx_dir_mode\" = 448 ] || chmod 700 \"$mx_dir\" || exit 1\n\
         mx_empty() {{ for mx_f in \"$1\"/* \"$1\"/.[!.]* \"$1\"/..?*; do {{ [ -e \"$mx_f\" ] || [ -L \"$mx_f\" ]; }} && return 1; done; return 0; }}\n\
         if [ ! -e {d}/{OWNED_MARK} ] && ! mx_empty {d}; then echo \"{shown} holds files mx did not put there -- {CHOOSE_ANOTHER}\"; exit 1; fi\n\
         : > {d}/{OWNED_MARK} || exit 1\n\
         {pids}",
        rules = dir_rules(dir),
        ancestors = JUDGE_NEAREST_ANCESTOR,
        d = q(dir),
        shown = shown(dir),
        pids = agent_pids(dir),
    )
}

/// Judges the nearest directory that exists above `$mx_dir` (and all above
/// it): where a missing remote directory would be made. Each step up is
/// `dirname`'s, by parameter expansion (no process): `a` -> `.`, `/a` ->
/// `/`, `a/b/` -> `a/b` (not a directory yet, so up again).
const JUDGE_NEAREST_ANCESTOR: &str = "mx_up=$mx_dir; while :; do case $mx_up in */*) mx_up=${mx_up%/*}; [ -n \"$mx_up\" ] || mx_up=/ ;; *) mx_up=. ;; esac; [ -d \"$mx_up\" ] && break; done; mx_parents \"$mx_up\"";

/// `dir` for a message inside double quotes: nothing in it can expand.
fn shown(dir: &str) -> String {
    dir.replace(['"', '\\', '$', '`'], "?")
}

/// What a host whose agent already runs answers a start: `already running
/// -- <stop> first`, `stop` being the command that stops this fleet.
pub fn already_running(stop: &str) -> String {
    format!("{ALREADY_RUNNING} -- {stop} first")
}

/// The start of [`already_running`]'s answer.
pub const ALREADY_RUNNING: &str = "already running";

/// Makes the directory, unless an agent is already running there (then says
/// so, naming `stop`, the command that stops this fleet).
pub fn prepare(dir: &str, stop: &str) -> String {
    format!(
        "{make}\nif mx_running; then echo {running}; exit 1; fi\necho ready",
        make = make_owned_dir(dir),
        running = q(&already_running(stop)),
    )
}

/// Makes the directory (reload: the agent there is about to be replaced).
pub(crate) fn make_dir(dir: &str) -> String {
    make_owned_dir(dir)
}

/// Unpacks `name` (a [`Packing`]'s), copied into `dir` as it is, under its
/// name without the suffix, with `mode` (a copy that could not unpack as it
/// arrived: scp).
pub(crate) fn unpack(dir: &str, name: &str, mode: u32) -> String {
    let (packing, unpacked) = Packing::of_name(name).unwrap_or((Packing::Gzip, name));
    let tmp = q(&format!(".{unpacked}.tmp"));
    format!(
        "cd {d} && {tool} -dc < {p} > {tmp} 2>/dev/null && chmod {mode:o} {tmp} && mv -f {tmp} {u} && rm -f {p} || {{ rm -f {tmp} {p}; echo \"{shown} arrived but could not be unpacked ({tool} -d)\"; exit 1; }}",
        d = q(dir),
        tool = packing.tool(),
        p = q(name),
        u = q(unpacked),
        shown = shown(name),
    )
}

/// Prints `sha256=<hex>` of the agent binary already in `dir`, when there is
/// one and the host has `sha256sum` (nothing otherwise: the binary is
/// copied).
pub(crate) fn agent_sha256(dir: &str) -> String {
    format!(
        "if [ -f {exe} ] && command -v sha256sum >/dev/null 2>&1; then set -- $(sha256sum < {exe}); echo \"sha256=$1\"; fi; true",
        exe = q(&format!("{dir}/{AGENT_BIN}"))
    )
}

/// Receives a file of `len` bytes on stdin as `dir/name` (a session's copy,
/// `fleet::transport::session`): says `ready` once it reads, takes exactly
/// `len` bytes whatever happens to them, and gives the file its name and
/// `mode` only when it is whole:
///
/// - a `name` with a [`Packing`]'s suffix is unpacked as it arrives, by its
///   tool, under its name without the suffix: the tool checks what it
///   unpacks (zstd's content checksum, gzip's CRC and length) and fails on
///   a cut-short frame, so `sha` is `None` (the packed bytes are neither
///   written nor hashed: 2.6 MB less to write and read on every fresh
///   host, and two processes fewer);
/// - any other file when its SHA-256 is `sha` (where the host has
///   `sha256sum`; a file that differs is counted, to say whether it came
///   short) or, without it, when their count is `len`.
///
/// The bytes must never be left for the session's shell, which would read
/// them as commands: a `head` without `-c` is refused before `ready`, a
/// writer that fails (a full disk, a damaged frame) still drains them
/// (`cat > /dev/null`), and a `head` that fails mid-way kills the
/// session's shell (`$PPID`) while it waits for this one, before it reads
/// another byte.
pub fn receive(
    dir: &str,
    name: &str,
    len: usize,
    sha: Option<&str>,
    mode: u32,
    ready: &str,
) -> String {
    let opening = format!(
        "cd {d} 2>/dev/null || {{ echo \"cannot copy into {shown}: no such directory\"; exit 1; }}\n\
         head -c 1 </dev/null >/dev/null 2>&1 || {{ echo \"cannot copy into {shown}: this host's head has no -c (coreutils' and busybox's have it)\"; exit 1; }}\n\
         echo {ready}",
        d = q(dir),
        shown = shown(dir),
        ready = q(ready),
    );
    // Exactly `len` bytes from the session into `writer`, which is drained
    // when it fails.
    let take = |writer: &str| {
        format!(
            "{{ head -c {len} || kill -9 $PPID; }} | {{ {writer} && exit 0; cat > /dev/null; exit 1; }}"
        )
    };
    let name_shown = shown(name);
    if let Some((packing, unpacked)) = Packing::of_name(name) {
        let out = q(&format!(".{unpacked}.tmp"));
        return format!(
            "{opening}\n\
             {take} || {{ rm -f {out}; echo \"{name_shown} could not be unpacked into {shown} ({tool} -d: it arrived damaged or short, or the disk is full)\"; exit 1; }}\n\
             chmod {mode:o} {out} && mv -f {out} {n}",
            take = take(&format!("{} -dc > {out} 2>/dev/null", packing.tool())),
            shown = shown(dir),
            tool = packing.tool(),
            n = q(unpacked),
        );
    }
    let tmp = q(&format!(".{name}.tmp"));
    let sha = q(sha.expect("a file copied as it is has its SHA-256"));
    format!(
        "{opening}\n\
         {take} || {{ rm -f {tmp}; echo \"cannot write {shown}/{name_shown}\"; exit 1; }}\n\
         mx_short() {{ got=$(wc -c < {tmp}); [ \"$got\" -ne {len} ] && {{ rm -f {tmp}; echo \"{name_shown} arrived short: $got of {len} bytes\"; exit 1; }}; }}\n\
         if command -v sha256sum >/dev/null 2>&1; then set -- $(sha256sum < {tmp}); [ \"$1\" = {sha} ] || {{ mx_short; rm -f {tmp}; echo \"{name_shown} arrived damaged (its sha256 differs)\"; exit 1; }}; else mx_short; fi\n\
         chmod {mode:o} {tmp} && mv -f {tmp} {n}",
        take = take(&format!("cat > {tmp}")),
        shown = shown(dir),
        n = q(name),
    )
}

/// Prints this host's wall clock, for the controller to measure its offset.
const CLOCK: &str = "echo \"clock=$(date +%s.%N)\"";

/// How a launched agent outlives its launch script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep<'a> {
    /// Detached (hangups ignored) as host `name`: the script returns and the agent
    /// runs on (ssh, local).
    Detached(&'a str),
    /// Held: the script runs as the host its transport names
    /// ([`HELD_HOST`]), says [`HELD`] once the
    /// agent runs, then waits for it (Slurm: an agent lives as long as the
    /// step that started it).
    Held,
}

/// The shell word a held script names its host by: the transport sets it
/// on each node before the script runs.
pub const HELD_HOST: &str = "\"$MX_HOST\"";

/// What a held launch script says once its agent runs, before it waits.
pub const HELD: &str = "mx-held";

/// Starts the agent armed (listening and answering, sending nothing until
/// the controller writes the fleet's start instant, [`go`]; see [`Keep`]),
/// from files only its user can read or
/// write (a copy that kept an earlier file's mode is made so); waits for
/// its stamp (written once its workers run, its responders listening) or
/// its death, for at most 5.2 s; then prints the host's clock. The stamp
/// comes 5 to 20 ms after the launch on an idle host: it is looked for
/// every 20 ms at first, then every 100 ms (a launch took a whole 100 ms
/// sleep where it needed a tenth of it). `wipe` deletes the last run's log
/// and report first. `stop` is the command that stops this fleet, named when an
/// agent runs.
pub fn launch(dir: &str, keep: Keep, agent_flags: &[String], wipe: bool, stop: &str) -> String {
    let wipe = if wipe {
        "rm -f agent.log report.csv agent.pid agent.stamp agent.start agent.end agent.rate agent.answers\n"
    } else {
        "rm -f agent.stamp agent.start agent.end agent.rate agent.answers\n"
    };
    format!(
        "{pids}\ncd {d} 2>/dev/null || {{ echo 'not deployed (drop --no-deploy)'; exit 1; }}\n\
         if mx_running; then echo {running}; exit 1; fi\n\
         chmod 700 {AGENT_BIN} 2>/dev/null; chmod 600 matrix.csv 2>/dev/null\n\
         {wipe}( trap '' HUP; exec {exe} agent --matrix matrix.csv --host {h} --report report.csv --log agent.log --armed {flags} ) </dev/null >/dev/null 2>&1 &\n\
         child=$!\n\
         i=0; while [ $i -lt 60 ]; do [ -f agent.stamp ] && break; kill -0 $child 2>/dev/null || break; if [ $i -lt 10 ]; then sleep 0.02; else sleep 0.1; fi; i=$((i+1)); done\n\
         if [ -f agent.stamp ] && kill -0 $child 2>/dev/null; then echo started; else echo 'died on startup:'; tail -n 5 agent.log; exit 1; fi\n\
         {CLOCK}{hold}",
        pids = head(dir),
        d = q(dir),
        exe = q(&format!("{dir}/{AGENT_BIN}")),
        h = match keep {
            Keep::Detached(host) => q(host),
            Keep::Held => HELD_HOST.to_string(),
        },
        flags = shell_join(agent_flags),
        running = q(&already_running(stop)),
        hold = match keep {
            Keep::Detached(_) => String::new(),
            Keep::Held => format!("\necho {HELD}\nwait $child"),
        },
    )
}

/// Writes the host's data file with the deployed agent (or finds an earlier
/// run's of the right size), so that no agent of the run starts while a
/// peer's disk is still busy writing it. `disk_size` is `--disk-size` as
/// given (the agent's default when `None`).
pub fn prepare_disk(dir: &str, disk_size: Option<&str>) -> String {
    let exe = format!("{dir}/{AGENT_BIN}");
    let mut command = vec![exe.as_str(), "agent", "--prepare-disk"];
    if let Some(size) = disk_size {
        command.extend(["--disk-size", size]);
    }
    format!(
        "cd {d} 2>/dev/null || {{ echo 'not deployed (drop --no-deploy)'; exit 1; }}\n{command}",
        d = q(dir),
        command = shell_join(&command),
    )
}

/// Sweeps the TTL of `tuples` (`SRC:SPORT>DST:DPORT`, `,` between) with
/// the deployed agent, `probes` probes a TTL, for at most `seconds` in all:
/// a line per tuple (`mx agent --trace`). The directory is judged first, as
/// every step judges it: the agent run is the one mx put there.
pub fn trace(dir: &str, tuples: &str, probes: u16, seconds: f64) -> String {
    let exe = format!("{dir}/{AGENT_BIN}");
    let (probes, seconds) = (probes.to_string(), seconds.to_string());
    let command = [
        exe.as_str(),
        "agent",
        "--trace",
        tuples,
        "--trace-probes",
        &probes,
        "--trace-for",
        &seconds,
    ];
    format!(
        "{pids}\ncd {d} 2>/dev/null || {{ echo NOT-DEPLOYED; exit 1; }}\n\
         if mx_running; then echo 'an agent runs here: its flows hold the ports a sweep binds -- trace once the run has ended'; exit 1; fi\n\
         {command}",
        pids = head(dir),
        d = q(dir),
        command = shell_join(&command),
    )
}

/// A control file's words: `at=<unix s>[ grace=<s>]`.
fn instant_words(at: f64, grace: Option<f64>) -> String {
    match grace {
        Some(g) => format!("at={at:.6} grace={g:.3}"),
        None => format!("at={at:.6}"),
    }
}

/// Writes a control file by rename, so the agent never reads half of it.
fn write_control(name: &str, words: &str) -> String {
    format!(
        "printf '%s\\n' {w} > {name}.tmp && mv -f {name}.tmp {name} || exit 1",
        w = q(words)
    )
}

/// A rate file's words: `scale=<factor> at=<unix s>`.
fn rate_words(scale: f64, at: f64) -> String {
    format!("scale={scale:.4} {}", instant_words(at, None))
}

/// The head of a script for a running agent: into its directory, or fail
/// saying it is not running any more (naming `logs`, the command that
/// fetches this fleet's logs).
fn running_agent(dir: &str, logs: &str) -> String {
    format!(
        "{pids}\ncd {d} 2>/dev/null || {{ echo 'not deployed'; exit 1; }}\n\
         if ! mx_running; then echo {gone}; exit 1; fi\n",
        pids = head(dir),
        d = q(dir),
        gone = q(&format!(
            "the agent is not running any more (died after it started? {logs})"
        )),
    )
}

/// What the go tells every host: the start instant, the grace, the end
/// instant if any, the rate scale the flows begin at if any, and the
/// command that gave the instant.
pub struct Go {
    pub begin: f64,
    pub grace: f64,
    pub end: Option<f64>,
    pub scale: Option<f64>,
    pub by: BeganBy,
}

/// The command that gave a fleet its start instant. The agent writes it on
/// its first host row (`began_by`), so that a summary can tell a restart by
/// `mx reload` from a host that came up late.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeganBy {
    /// `mx start`, `mx run`.
    Start,
    Reload,
}

impl BeganBy {
    /// The start file's `by=` word (the agent's `clock::read_began_by`).
    fn word(self) -> &'static str {
        match self {
            BeganBy::Start => "start",
            BeganBy::Reload => "reload",
        }
    }
}

/// Tells an armed agent the fleet's start instant (and, for `mx run`, the end
/// instant and grace; for `mx run --ramp`, the rate scale of the first step,
/// written first); fails when no agent runs there any more, naming `logs`,
/// the command that fetches this fleet's logs.
pub fn go(dir: &str, go: &Go, logs: &str) -> String {
    let mut script = running_agent(dir, logs);
    if let Some(scale) = go.scale {
        script.push_str(&write_control(RATE_FILE, &rate_words(scale, go.begin)));
        script.push('\n');
    }
    let start = format!(
        "{} by={}",
        instant_words(go.begin, Some(go.grace)),
        go.by.word()
    );
    script.push_str(&write_control("agent.start", &start));
    script.push('\n');
    if let Some(end) = go.end {
        script.push_str(&write_control(
            "agent.end",
            &instant_words(end, Some(go.grace)),
        ));
        script.push('\n');
    }
    script
}

/// The rate control file's name (the agent's `clock::RATE_FILE`).
const RATE_FILE: &str = "agent.rate";

/// Orders a running agent to scale every flow's matrix rate by `scale` from
/// the whole interval that begins at `at` (`mx run --ramp`); fails when no
/// agent runs there any more, naming `logs`.
pub fn rate(dir: &str, scale: f64, at: f64, logs: &str) -> String {
    format!(
        "{}{}\necho ordered",
        running_agent(dir, logs),
        write_control(RATE_FILE, &rate_words(scale, at))
    )
}

/// The control file a running agent re-reads what it answers from (the
/// agent's `answers::ANSWERS_FILE`).
const ANSWERS_FILE: &str = "agent.answers";

/// Orders a running agent to re-read what it answers from the matrix just
/// copied beside it (`mx reload`, when only the rates into it changed), and
/// waits up to 5 s for its stamp to say it did (`in=<print>`); fails naming
/// `logs` when no agent runs, or it did not.
pub fn answers(dir: &str, inbound: &str, logs: &str) -> String {
    let said = format!("in={inbound}");
    format!(
        "{}{}
i=0
while [ $i -lt 50 ]; do
  grep -qx {s} {stamp} 2>/dev/null && {{ echo 'answers re-read: runs on'; exit 0; }}
  sleep 0.1; i=$((i + 1))
done
echo {late}; exit 1",
        running_agent(dir, logs),
        write_control(ANSWERS_FILE, &said),
        s = q(&said),
        stamp = "agent.stamp",
        late = q(&format!(
            "the agent did not re-read what it answers within 5s ({logs})"
        ))
    )
}

/// What reload needs to know: `state=absent|running|stopped`, then the stamp.
pub fn probe(dir: &str) -> String {
    format!(
        "{pids}\nif [ ! -d {d} ]; then echo state=absent; exit 0; fi\n\
         if mx_running; then echo state=running; else echo state=stopped; fi\n\
         cat {d}/agent.stamp 2>/dev/null; exit 0",
        pids = head(dir),
        d = q(dir)
    )
}

/// What doctor reports, once the remote directory (or where it would be
/// made) passes the rules every script applies: architecture, cores, the
/// hard fd limit, agent running, and the host's clock (for its offset from
/// the controller's). With `disk`, also the space a data file could take in
/// `dir`.
pub fn doctor(dir: &str, disk: bool) -> String {
    let room = if disk {
        format!("{}\n", disk_room(dir))
    } else {
        String::new()
    };
    format!(
        "{pids}\nif [ ! -e \"$mx_dir\" ]; then {ancestors}; fi\n{room}echo \"arch=$(uname -m) cores=$(nproc 2>/dev/null || echo '?') nofile_hard=$(ulimit -Hn) running=$(mx_running && echo yes || echo no)\"\n{CLOCK}",
        pids = head(dir),
        ancestors = JUDGE_NEAREST_ANCESTOR,
    )
}

/// Prints `disk_free_kb=<free> disk_file_kb=<held>`: the free KiB of the
/// filesystem `dir` is on (or will be: its nearest existing parent before
/// the first start), and the KiB an earlier data file there holds, which
/// a new one would replace.
fn disk_room(dir: &str) -> String {
    format!(
        "room={d}; while [ ! -d \"$room\" ]; do room=$(dirname -- \"$room\"); done\n\
         echo \"disk_free_kb=$(df -Pk -- \"$room\" 2>/dev/null | awk 'NR==2 {{print $4}}') disk_file_kb=$(du -k -- {file} 2>/dev/null | cut -f1)\"",
        d = q(dir),
        file = q(&format!("{dir}/{DATA_FILE}")),
    )
}

/// The data file's name inside the remote directory (the agent's
/// `--disk-file` default, which the fleet never changes).
pub(crate) const DATA_FILE: &str = "disk.dat";

/// What `--bind` means on a host: the address of the first line of `ip -o
/// addr show` that contains `spec`, per family (`inet ADDR`, `inet6 ADDR`;
/// IPv6 link-local addresses are skipped), or nothing.
pub(crate) fn bind_probe(spec: &str) -> String {
    format!(
        "ip -o addr show 2>/dev/null | grep -F -- {s} | awk '($3 == \"inet\" || ($3 == \"inet6\" && !/ scope link /)) && !seen[$3]++ {{ sub(\"/.*\", \"\", $4); print $3, $4 }}'",
        s = q(spec)
    )
}

/// One status line: the agent's last log line, NOT-RUNNING or NOT-DEPLOYED;
/// then, when there is a report, the report's header and newest host row (what the
/// agent ran, to compare with the matrix here).
pub fn status(dir: &str) -> String {
    format!(
        "{pids}\ncd {d} 2>/dev/null || {{ echo NOT-DEPLOYED; exit 0; }}\n\
         if mx_running; then tail -n 1 agent.log 2>/dev/null || echo 'running (no report yet)'; else echo NOT-RUNNING; fi\n{newest}",
        pids = head(dir),
        d = q(dir),
        newest = newest_host_row(),
    )
}

/// The report's header line and its newest host row, when there is a
/// report (read from the end: `tac` seeks, so an hour's report costs what
/// its last interval does). While an agent runs (its pid file is there),
/// only a row it wrote: a report a reload kept holds the last agent's
/// rows, another matrix's, until the new one writes. Run in the agent's
/// directory.
fn newest_host_row() -> &'static str {
    "if [ -s report.csv ] && { [ ! -e agent.pid ] || [ report.csv -nt agent.pid ]; }; then\n\
     head -n 1 report.csv\n\
     col=$(head -n 1 report.csv | tr -d '\\r' | tr ',' '\\n' | grep -nxF dir | head -n 1 | cut -d: -f1)\n\
     tac report.csv | awk -F, -v d=\"$col\" '$d == \"host\" { print; exit }'\n\
     fi"
}

/// The agent's state for `status --json`: `running`, `NOT-RUNNING` or
/// `NOT-DEPLOYED` on the first line; then the report's header and newest host row.
pub fn status_row(dir: &str) -> String {
    format!(
        "{pids}\ncd {d} 2>/dev/null || {{ echo NOT-DEPLOYED; exit 0; }}\n\
         if mx_running; then echo running; else echo NOT-RUNNING; fi\n{newest}",
        pids = head(dir),
        d = q(dir),
        newest = newest_host_row(),
    )
}

/// Stops the agent: TERM, wait up to 10 s, then KILL. Prints what it did.
pub fn stop(dir: &str) -> String {
    format!("{pids}\n{STOP_BODY}", pids = head(dir)).replace("__DIR__", &q(dir))
}

/// Ends the agent's flows at the fleet's end instant `at` (Unix seconds): it
/// stops sending then, answers `grace` seconds more and exits by itself. This
/// waits for that (10 s past it at most), then stops whatever still runs as
/// [`stop`] does. Prints `ended` when the agent exited on its own (now, or
/// before: it left a report and took its pid file with it).
pub fn end(dir: &str, at: f64, grace: f64) -> String {
    let wait_until = (at + grace).ceil() as u64 + 10;
    format!(
        "{pids}\nif [ -d {d} ] && ! mx_running && [ -f {d}/report.csv ] && [ ! -f {d}/agent.pid ]; then echo ended; exit 0; fi\n\
         if [ -d {d} ] && mx_running; then\n\
         (cd {d} && {write}) || exit 1\n\
         while mx_running && [ \"$(date +%s)\" -lt {wait_until} ]; do sleep 0.1; done\n\
         if ! mx_running; then rm -f {d}/agent.pid; echo ended; exit 0; fi\n\
         fi\n{STOP_BODY}",
        pids = head(dir),
        d = q(dir),
        write = write_control("agent.end", &instant_words(at, Some(grace))),
    )
    .replace("__DIR__", &q(dir))
}

const STOP_BODY: &str = "if [ ! -d __DIR__ ]; then state=not-deployed; else state=not-running; fi
p=$(agent_pids)
if [ -n \"$p\" ]; then
  kill -TERM $p 2>/dev/null; state=stopped
  i=0; while [ $i -lt 100 ] && mx_running; do sleep 0.1; i=$((i+1)); done
  p=$(agent_pids); if [ -n \"$p\" ]; then kill -KILL $p 2>/dev/null; state=killed; fi
fi
rm -f __DIR__/agent.pid 2>/dev/null
echo $state";

/// Stops the agent, deletes the directory, and verifies both.
pub fn clean(dir: &str) -> String {
    format!(
        "{stop_script}\nwas=$state\n\
         if mx_running; then echo 'LEFTOVER: an agent is still running'; exit 1; fi\n\
         if [ -e {d} ] && [ ! -e {d}/{OWNED_MARK} ]; then echo \"LEFTOVER: {shown} was not made by mx (no {OWNED_MARK} in it): left alone\"; exit 1; fi\n\
         rm -rf {d}\n\
         if [ -e {d} ]; then echo \"LEFTOVER: {shown} still exists\"; exit 1; fi\n\
         echo \"clean (was: $was)\"",
        stop_script = stop(dir).replace("echo $state", ":"),
        d = q(dir),
        shown = shown(dir),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prepare_step_runs_the_deployed_agent_in_its_dir_quoted() {
        let dir = "/var/tmp/mx $(touch x)";
        assert_eq!(
            prepare_disk(dir, Some("512 M")),
            "cd '/var/tmp/mx $(touch x)' 2>/dev/null || { echo 'not deployed (drop --no-deploy)'; exit 1; }\n\
             '/var/tmp/mx $(touch x)/mx' agent --prepare-disk --disk-size '512 M'"
        );
        assert!(
            prepare_disk("/var/tmp/mx", None).ends_with("\n/var/tmp/mx/mx agent --prepare-disk")
        );
    }

    #[test]
    fn the_trace_step_judges_the_dir_then_runs_the_deployed_agent_quoted() {
        let script = trace(
            "/var/tmp/mx $(x)",
            "198.18.1.1:40000>198.18.1.65:5300",
            10,
            60.0,
        );
        assert!(script.starts_with(&head("/var/tmp/mx $(x)")), "{script}");
        assert!(
            script.ends_with(
                "cd '/var/tmp/mx $(x)' 2>/dev/null || { echo NOT-DEPLOYED; exit 1; }\n\
                 if mx_running; then echo 'an agent runs here: its flows hold the ports a sweep binds -- trace once the run has ended'; exit 1; fi\n\
                 '/var/tmp/mx $(x)/mx' agent --trace '198.18.1.1:40000>198.18.1.65:5300' --trace-probes 10 --trace-for 60"
            ),
            "{script}"
        );
    }

    #[test]
    fn the_bind_probe_says_an_address_per_family() {
        let probe = |spec: &str| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(bind_probe(spec))
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        // Loopback holds 127.0.0.1 and ::1: one line each, IPv4 first.
        assert_eq!(probe("lo"), "inet 127.0.0.1\ninet6 ::1\n");
        assert_eq!(probe("::1/128"), "inet6 ::1\n");
        assert_eq!(probe("127.0.0.1"), "inet 127.0.0.1\n");
        assert_eq!(probe("nosuchif0"), "");
    }

    #[test]
    fn a_rate_order_is_written_whole_for_a_running_agent_only() {
        let script = rate("/var/tmp/mx", 1.25, 1_796_003_025.0, "mx logs");
        assert!(
            script.contains(
                "printf '%s\\n' 'scale=1.2500 at=1796003025.000000' > agent.rate.tmp && mv -f agent.rate.tmp agent.rate || exit 1\necho ordered"
            ),
            "{script}"
        );
        assert!(
            script.contains("the agent is not running any more"),
            "{script}"
        );
        // The go of a ramp orders the first step's scale before the start.
        let at = |scale| Go {
            begin: 100.0,
            grace: 1.0,
            end: None,
            scale,
            by: BeganBy::Reload,
        };
        let go = go("/var/tmp/mx", &at(Some(0.5)), "mx logs");
        let (rate_at, start_at) = (
            go.find("agent.rate.tmp").unwrap(),
            go.find("agent.start.tmp").unwrap(),
        );
        assert!(rate_at < start_at, "{go}");
        assert!(!super::go("/d", &at(None), "l").contains("agent.rate"));
        assert!(
            go.contains("'at=100.000000 grace=1.000 by=reload' > agent.start.tmp"),
            "{go}"
        );
    }

    /// Runs `script` in `sh` in `cwd`, `input` on its stdin: (status, stdout).
    fn sh(script: &str, cwd: &std::path::Path, input: &[u8]) -> (i32, String) {
        use std::io::Write;
        let mut child = std::process::Command::new("sh")
            .args(["-c", script])
            .current_dir(cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.code().unwrap_or(-1), text)
    }

    #[test]
    fn a_received_file_takes_its_name_only_whole_and_says_short_or_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().display().to_string();
        let bytes = b"the matrix, its slice\n".repeat(100);
        let sha = crate::transport::session::sha256_hex(&bytes);
        let receive = |len| receive(&to, "matrix.csv", len, Some(&sha), 0o600, "go on");
        let file = dir.path().join("matrix.csv");
        // Cut short: said with its count, and nothing named.
        let (code, said) = sh(&receive(bytes.len()), dir.path(), &bytes[..1000]);
        assert_eq!(code, 1, "{said}");
        assert_eq!(
            said,
            format!(
                "go on\nmatrix.csv arrived short: 1000 of {} bytes",
                bytes.len()
            )
        );
        assert!(!file.exists());
        // Whole but altered: damaged.
        let mut altered = bytes.clone();
        altered[7] ^= 1;
        let (code, said) = sh(&receive(bytes.len()), dir.path(), &altered);
        assert_eq!(code, 1, "{said}");
        assert_eq!(
            said,
            "go on\nmatrix.csv arrived damaged (its sha256 differs)"
        );
        assert!(!file.exists());
        // Whole: named, with its mode, and no temporary file left.
        let (code, said) = sh(&receive(bytes.len()), dir.path(), &bytes);
        assert_eq!((code, said.as_str()), (0, "go on"));
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
        let mode = std::fs::metadata(&file).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn the_shell_helpers_that_spare_a_process_say_what_the_commands_would() {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.path().join("a/b")).unwrap();
        let b = base.path().display().to_string();
        // The nearest directory that exists above a missing one, as
        // `dirname` would find it step by step.
        let nearest = |dir: &str| {
            let script = format!(
                "mx_dir={}\nmx_parents() {{ echo \"$1\"; }}\n{JUDGE_NEAREST_ANCESTOR}",
                q(dir)
            );
            sh(&script, base.path(), b"").1
        };
        assert_eq!(nearest("mx"), ".");
        assert_eq!(nearest("a/b/c/d"), "a/b");
        assert_eq!(nearest("a/x/"), "a");
        assert_eq!(nearest(&format!("{b}/a/b/c")), format!("{b}/a/b"));
        assert_eq!(nearest("/mx-nowhere-at-all/x"), "/");
        // The user's id without `id -u`; an empty directory told from one
        // holding a dotfile.
        let me = sh("id -u", base.path(), b"").1;
        let rules = dir_rules("unused");
        assert_eq!(
            sh(
                &format!("{rules}\nmx_whoami; echo $mx_me"),
                base.path(),
                b""
            )
            .1,
            me
        );
        let make = make_owned_dir("a/b");
        let (code, said) = sh(&make, base.path(), b"");
        assert_eq!((code, said.as_str()), (0, ""), "an empty dir is taken");
        std::fs::create_dir(base.path().join("c")).unwrap();
        std::fs::write(base.path().join("c/.hidden"), b"").unwrap();
        let (code, said) = sh(&make_owned_dir("c"), base.path(), b"");
        assert_eq!(code, 1);
        assert!(
            said.contains("c holds files mx did not put there"),
            "{said}"
        );
    }

    #[test]
    fn an_agent_is_found_from_a_relative_dir_after_the_script_moved_into_it() {
        // A relative --remote-dir is the login directory's: a script that
        // has changed into it still finds the agent started from there.
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join("mxrun")).unwrap();
        let exe = home.path().join("mxrun").join(AGENT_BIN);
        std::fs::copy("/bin/sleep", &exe).unwrap();
        let mut agent = std::process::Command::new(&exe).arg("30").spawn().unwrap();
        let script = format!("{}\ncd mxrun && agent_pids", agent_pids("mxrun"));
        let (code, said) = sh(&script, home.path(), b"");
        agent.kill().unwrap();
        agent.wait().unwrap();
        assert_eq!((code, said), (0, agent.id().to_string()));
    }

    #[test]
    fn hostile_words_are_quoted() {
        assert_eq!(q("plain"), "plain");
        assert_eq!(q("a b"), "'a b'");
        assert_eq!(q("x;$(rm -rf /)"), "'x;$(rm -rf /)'");
        // Whatever the quoting, the shell must hand back the word unchanged.
        for word in ["it's", "a'$(touch pwned)`x`\\", "a b'c\"d$e", "x;y|z&"] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", q(word)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), word);
        }
    }
}
