//! A local fleet of real `mx agent` processes on 127.<net>.0.x, for the tests.
//!
//! Each test takes its own `net` (the second octet) so tests running in
//! parallel never share an address; every agent runs in its own directory, as
//! it would on its own host. Agents are killed when the fleet is dropped.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::Sandbox;

pub const PORT: u16 = 5300;

/// The address of host `i` (1-based) of test network `net`.
pub fn addr(net: u8, i: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, net, 0, i)
}

/// A matrix text for hosts h1..hN on `net`, every cell `cell` (blank diagonal).
pub fn mesh(net: u8, n: u8, cell: &str, sizes: (u32, u32)) -> String {
    mesh_at(n, |i| addr(net, i).to_string(), cell, sizes)
}

/// A matrix text of two hosts on `net` in which h1 alone sends, to h2, at
/// `rate` requests a second.
pub fn one_way_pair(net: u8, rate: u32) -> String {
    format!(
        "# port={PORT}\nsrc\\dst,h1={},h2={}\nh1,,{rate}\nh2,,\n",
        addr(net, 1),
        addr(net, 2)
    )
}

/// One start instant (`--start-at`) for agents started one by one, as
/// `mx start` gives a fleet: the next whole second at least 1.5 s away.
/// Agents that began apart would send their first requests to ports their
/// peers had not bound yet, and those losses are the test's, not the path's.
pub fn start_soon() -> String {
    (matrix_orchestrator::units::wall_now() + 1.5)
        .ceil()
        .to_string()
}

/// [`mesh`] over IPv6: every host on ::1, host i on UDP port `base + i`
/// (`h1=[::1]:5401`).
pub fn mesh_v6(base: u16, n: u8, cell: &str, sizes: (u32, u32)) -> String {
    mesh_at(n, |i| format!("[::1]:{}", base + u16::from(i)), cell, sizes)
}

/// A mesh of hosts h1..hN whose addresses `at` gives (1-based).
fn mesh_at(n: u8, at: impl Fn(u8) -> String, cell: &str, sizes: (u32, u32)) -> String {
    let mut text = format!(
        "# tx_size={} rx_size={} port={PORT}\nsrc\\dst",
        sizes.0, sizes.1
    );
    for i in 1..=n {
        text.push_str(&format!(",h{i}={}", at(i)));
    }
    text.push('\n');
    for src in 1..=n {
        text.push_str(&format!("h{src}"));
        for dst in 1..=n {
            text.push(',');
            if src != dst {
                text.push_str(cell);
            }
        }
        text.push('\n');
    }
    text
}

/// One parsed report row: column name -> cell text.
pub type Row = BTreeMap<String, String>;

pub trait RowExt {
    fn f(&self, column: &str) -> Option<f64>;
    fn s(&self, column: &str) -> &str;
}

impl RowExt for Row {
    /// The cell as a number; `None` when blank.
    fn f(&self, column: &str) -> Option<f64> {
        let cell = self
            .get(column)
            .unwrap_or_else(|| panic!("no column {column}"));
        (!cell.is_empty()).then(|| cell.parse().unwrap_or_else(|_| panic!("{column}={cell}")))
    }

    fn s(&self, column: &str) -> &str {
        self.get(column)
            .unwrap_or_else(|| panic!("no column {column}"))
    }
}

pub struct Fleet {
    pub sandbox: Sandbox,
    children: Vec<(String, Child)>,
    /// The network namespace the agents run in (`None`: this one).
    netns: Option<String>,
}

/// A network namespace of its own with loopback up, deleted when dropped:
/// for a test that changes the network (nftables) under its agents.
pub struct NetNs(pub String);

impl NetNs {
    pub fn new(name: &str) -> NetNs {
        let _ = Command::new("ip").args(["netns", "del", name]).status();
        let ns = NetNs(name.to_string());
        ns.run(&["ip", "netns", "add", name], false);
        ns.run(&["ip", "link", "set", "lo", "up"], true);
        ns
    }

    /// Runs `argv` (inside the namespace with `inside`); panics unless it succeeds.
    pub fn run(&self, argv: &[&str], inside: bool) {
        let mut cmd = Command::new(if inside { "ip" } else { argv[0] });
        if inside {
            cmd.args(["netns", "exec", &self.0]).args(argv);
        } else {
            cmd.args(&argv[1..]);
        }
        let out = cmd.output().expect("run a command");
        assert!(
            out.status.success(),
            "{argv:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Loads nftables script `rules` inside the namespace.
    pub fn nft(&self, rules: &str) {
        let file = std::env::temp_dir().join(format!("{}.nft", self.0));
        std::fs::write(&file, rules).unwrap();
        self.run(&["nft", "-f", file.to_str().unwrap()], true);
        let _ = std::fs::remove_file(file);
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

impl Fleet {
    /// A fleet directory holding `matrix` as matrix.csv.
    pub fn new(matrix: &str) -> Fleet {
        let sandbox = Sandbox::new();
        sandbox.write("matrix.csv", matrix);
        Fleet {
            sandbox,
            children: Vec::new(),
            netns: None,
        }
    }

    /// The same, its agents run inside network namespace `ns`.
    pub fn in_netns(matrix: &str, ns: &NetNs) -> Fleet {
        let mut fleet = Fleet::new(matrix);
        fleet.netns = Some(ns.0.clone());
        fleet
    }

    pub fn dir(&self, host: &str) -> PathBuf {
        self.sandbox.file(host)
    }

    /// The agent command for `host`, run in its own directory.
    pub fn command(&self, host: &str, extra: &[&str]) -> Command {
        self.command_from(host, "../matrix.csv", extra)
    }

    /// The agent command for `host`, run from `matrix` (a path from its
    /// directory: the fleet's matrix, or a host's slice of it).
    pub fn command_from(&self, host: &str, matrix: &str, extra: &[&str]) -> Command {
        let dir = self.dir(host);
        std::fs::create_dir_all(&dir).unwrap();
        let mx = env!("CARGO_BIN_EXE_mx");
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns, mx]);
                cmd
            }
            None => Command::new(mx),
        };
        cmd.current_dir(&dir)
            .args(["agent", "--matrix", matrix, "--host", host])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("agent.log")).unwrap())
            .stderr(std::fs::File::create(dir.join("agent.err")).unwrap());
        cmd
    }

    /// Starts `host`'s agent with `extra` flags.
    pub fn start(&mut self, host: &str, extra: &[&str]) {
        self.spawn(host, extra);
    }

    /// Starts `host`'s agent with `extra` flags; returns its pid.
    pub fn spawn(&mut self, host: &str, extra: &[&str]) -> u32 {
        self.spawn_from(host, "../matrix.csv", extra)
    }

    /// [`Fleet::spawn`], the agent run from `matrix` ([`Fleet::command_from`]).
    pub fn spawn_from(&mut self, host: &str, matrix: &str, extra: &[&str]) -> u32 {
        let child = self
            .command_from(host, matrix, extra)
            .spawn()
            .expect("spawn mx agent");
        let pid = child.id();
        self.children.push((host.to_string(), child));
        pid
    }

    /// Waits for every agent to exit (they run with --duration); returns their codes.
    pub fn wait(&mut self, limit: Duration) -> Vec<(String, i32)> {
        let deadline = Instant::now() + limit;
        let mut codes = Vec::new();
        for (host, child) in &mut self.children {
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    codes.push((host.clone(), status.code().unwrap_or(-1)));
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "agent {host} did not stop in time"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.children.clear();
        codes
    }

    /// Starts every one of `hosts` with `extra` flags and waits for them all to
    /// exit 0 (they must run with --duration).
    pub fn run_all(&mut self, hosts: &[&str], extra: &[&str]) {
        for host in hosts {
            self.start(host, extra);
        }
        self.wait_ok();
    }

    /// Waits for every agent and asserts each exited 0.
    pub fn wait_ok(&mut self) {
        for (host, code) in self.wait(Duration::from_secs(30)) {
            assert_eq!(code, 0, "{host} exited {code}\n{}", self.log(&host));
        }
    }

    /// Runs `mx agent --matrix matrix.csv <extra>` in the fleet directory,
    /// without --host: the agent works out which host it is.
    pub fn agent_here(&self, extra: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_mx"))
            .current_dir(self.sandbox.path())
            .args(["agent", "--matrix", "matrix.csv"])
            .args(extra)
            .output()
            .unwrap()
    }

    /// Sends SIGTERM to `host`'s agent.
    pub fn terminate(&self, host: &str) {
        let (_, child) = self.children.iter().find(|(h, _)| h == host).unwrap();
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0);
    }

    pub fn log(&self, host: &str) -> String {
        std::fs::read_to_string(self.dir(host).join("agent.log")).unwrap_or_default()
            + &std::fs::read_to_string(self.dir(host).join("agent.err")).unwrap_or_default()
    }

    /// Copies each of `hosts`' report into `reports/<host>.csv`, as `mx
    /// collect` would, for `mx summarize --no-collect`; returns that directory.
    pub fn collect_reports(&self, hosts: &[&str]) -> PathBuf {
        let reports = self.sandbox.file("reports");
        std::fs::create_dir_all(&reports).unwrap();
        for h in hosts {
            std::fs::copy(
                self.dir(h).join("report.csv"),
                reports.join(format!("{h}.csv")),
            )
            .unwrap();
        }
        reports
    }

    /// `hosts`' reports collected ([`Self::collect_reports`]), then `mx
    /// summarize` over all of them against the fleet's matrix, with `extra`.
    pub fn summarize(&self, hosts: &[&str], extra: &[&str]) -> crate::util::Run {
        self.collect_reports(hosts);
        let words = [
            "summarize",
            "--no-collect",
            "--matrix",
            "matrix.csv",
            "--window",
            "0",
        ];
        self.sandbox.mx(&[&words[..], extra].concat())
    }

    pub fn report_text(&self, host: &str) -> String {
        std::fs::read_to_string(self.dir(host).join("report.csv"))
            .unwrap_or_else(|e| panic!("{host} report: {e}\n{}", self.log(host)))
    }

    /// `host`'s report rows.
    pub fn report(&self, host: &str) -> Vec<Row> {
        rows_of(&self.report_text(host))
    }
}

/// The rows of a report's text (no cell of ours holds a comma).
pub fn rows_of(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), header.len(), "row width: {line}");
            header
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Rows of `dir` (and `peer`, if given) from whole intervals: those whose host
/// row says the flows sent throughout (`phase` steady or last). Not the first
/// interval (it began with the agent), nor the one the run ended in, nor a
/// final partial one (no host row).
pub fn full_rows<'a>(rows: &'a [Row], dir: &str, peer: Option<&str>) -> Vec<&'a Row> {
    let whole: Vec<&str> = rows
        .iter()
        .filter(|r| r.s("dir") == "host" && matches!(r.s("phase"), "steady" | "last"))
        .map(|r| r.s("ts"))
        .collect();
    rows.iter()
        .filter(|r| r.s("dir") == dir && peer.is_none_or(|p| r.s("peer") == p))
        .filter(|r| whole.contains(&r.s("ts")))
        .collect()
}

/// How late an agent's loop may wake and lose no tokens, in ms (the report
/// schema's one definition).
pub const FORGIVEN_MS: f64 = matrix_orchestrator::report::FORGIVEN_BEHIND_MS;

/// How far behind its send schedule an agent said it fell in the interval
/// `ts` (the host row of its report `rows`), if further than its bucket
/// forgives. A 2-core CI VM can lose a vCPU for tens of ms: a loop that wakes
/// that late cannot send what it missed (pacing.rs), so its flows may fall
/// short in that interval, and the agent has said why (its own edge, said
/// as such, never the network's).
pub fn fell_behind(rows: &[Row], ts: &str) -> Option<f64> {
    let row = rows
        .iter()
        .find(|r| r.s("dir") == "host" && r.s("ts") == ts)?;
    row.f("behind_ms").filter(|ms| *ms > FORGIVEN_MS)
}

/// The rule for a rate test's intervals that an agent excused (each one ran
/// short where an agent said it fell behind, [`fell_behind`]): `short` of
/// `whole` whole intervals, the run's `what` for the message.
///
/// Excused is not free: the rate must still have held in at least half the
/// intervals, and in at least three, or an agent that is always behind would
/// pass. A 2-core CI VM loses a vCPU in stretches of a second or two (a CI
/// run at 1 kpps: h1 14 ms behind in 2 of 4 intervals), so a rate test runs
/// long enough for six whole intervals, that one stretch is not most of them.
pub fn assert_mostly_on_time(what: &str, short: usize, whole: usize, detail: &dyn std::fmt::Debug) {
    assert!(
        short * 2 <= whole && whole - short >= 3,
        "{what}: short in {short} of {whole} whole intervals (needs 3 and half on time): {detail:#?}"
    );
}

/// A plain UDP socket standing in for a matrix host.
pub fn plain_socket(ip: Ipv4Addr, port: u16) -> UdpSocket {
    let s = UdpSocket::bind(SocketAddrV4::new(ip, port)).expect("bind test socket");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s
}

/// An MXO1 header (the original's wire format: crates/wire/src/lib.rs), big-endian.
pub fn header(
    kind: u8,
    src_index: u16,
    len: u32,
    reply_len: u32,
    seq: u64,
    t_send: u64,
) -> Vec<u8> {
    let mut h = b"MXO1".to_vec();
    h.extend([kind, 0]);
    h.extend(src_index.to_be_bytes());
    h.extend(len.to_be_bytes());
    h.extend(reply_len.to_be_bytes());
    h.extend(seq.to_be_bytes());
    h.extend(t_send.to_be_bytes());
    h
}

/// A CPU quota of 1% of a core on a process, in a cgroup of its own (v1's
/// cpu controller where this machine has it, else cgroup v2); removed on drop.
pub struct Starved {
    dir: PathBuf,
}

impl Starved {
    pub fn hold(pid: &str, name: &str) -> Starved {
        let v1 = PathBuf::from("/sys/fs/cgroup/cpu");
        let dir = if v1.join("cgroup.procs").exists() {
            let dir = v1.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cpu.cfs_period_us"), "100000").unwrap();
            std::fs::write(dir.join("cpu.cfs_quota_us"), "1000").unwrap();
            dir
        } else {
            let root = PathBuf::from("/sys/fs/cgroup");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cpu.max"), "1000 100000").unwrap();
            dir
        };
        std::fs::write(dir.join("cgroup.procs"), pid).unwrap();
        Starved { dir }
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        let parent = self.dir.parent().unwrap().join("cgroup.procs");
        if let Ok(pids) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in pids.lines() {
                let _ = std::fs::write(&parent, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
