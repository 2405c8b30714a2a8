//! The fleet over real OpenSSH: hosts are network namespaces with their own
//! sshd, /var/tmp, hostname and PID namespace, built by tests/lab/lab.sh.
//! Needs root: each test is `#[ignore]`d (listed as skipped by a plain run);
//! `cargo nextest run --run-ignored all` runs them, as CI does, as root.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{Run, Sandbox, summary_words, wire_bits_per_request};

pub struct Lab {
    net: u8,
    hosts: usize,
    pub dir: PathBuf,
    /// The script that built it (tests/lab/<script>), and takes it down.
    script: &'static str,
    /// The size its script takes: the hosts, or a fabric's hosts per leaf.
    size: usize,
}

fn lab_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/lab")
        .join(name)
}

impl Lab {
    /// Builds a lab of `hosts` hosts on 198.18.<net>.0/24. Needs root: the
    /// tests that build one are `#[ignore]`d, and run with `--run-ignored all`
    /// (as CI does, as root); run so without root, they fail, saying why.
    pub fn up(net: u8, hosts: usize) -> Lab {
        Lab::build("lab.sh", net, hosts, false)
    }

    /// [`Lab::up`] over IPv6 as well: host i also at fd00:18:<net>::<i>
    /// (eth0) and fd00:19:<net>::<i> (eth1), sshd listening on IPv6 alone,
    /// servers.txt naming the hosts by their IPv6 addresses.
    pub fn up_v6(net: u8, hosts: usize) -> Lab {
        Lab::build("lab.sh", net, hosts, true)
    }

    /// The lab built by tests/lab/`script` (lab.sh, or slurm.sh: lab.sh's
    /// hosts with a Slurm cluster on them), called `up <net> <hosts> <dir>`.
    pub fn built_by(script: &'static str, net: u8, hosts: usize) -> Lab {
        Lab::build(script, net, hosts, false)
    }

    /// A leaf-spine fabric (tests/lab/fabric.sh): two leaves of `per_leaf`
    /// hosts each (h1.. behind l1, the rest behind l2), two spines, ECMP on
    /// the 5-tuple. Hosts are reached over ssh on a management network;
    /// their traffic crosses the fabric.
    pub fn fabric(net: u8, per_leaf: usize) -> Lab {
        let mut lab = Lab::build("fabric.sh", net, per_leaf, false);
        lab.hosts = 2 * per_leaf;
        lab
    }

    /// Drops `pct` percent of what fabric router `router` receives (`in`)
    /// or sends (`out`) on `interface` (named by its ends: `s2-l1`).
    pub fn fabric_drop(&self, router: &str, interface: &str, way: &str, pct: f64) {
        self.fabric_script(&["drop", router, interface, way, &pct.to_string()]);
    }

    /// Joins the fabric's leaves by a link of their own, which what crosses
    /// between them takes (`up`), or cuts it (the traffic goes back over
    /// the spines, a router longer).
    pub fn fabric_shortcut(&self, up: bool) {
        self.fabric_script(&["shortcut", if up { "up" } else { "down" }]);
    }

    /// Takes every fault of the fabric away.
    pub fn fabric_heal(&self) {
        self.fabric_script(&["heal"]);
    }

    fn fabric_script(&self, args: &[&str]) {
        let out = Command::new("bash")
            .arg(lab_script(self.script))
            .arg(args[0])
            .arg(&self.dir)
            .args(&args[1..])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "fabric.sh {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The lab `script` builds, called `up <net> <size> <dir>`.
    fn build(script: &'static str, net: u8, size: usize, v6: bool) -> Lab {
        crate::util::require_root("the lab (network namespaces, one sshd per host)");
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "the lab needs Debian's openssh-server (tests/run installs it)"
        );
        let dir = std::env::temp_dir().join(format!("mx-lab-{net}"));
        let lab = Lab {
            net,
            hosts: size,
            dir,
            script,
            size,
        };
        let out = Command::new("bash")
            .arg(lab_script(script))
            .args(["up", &net.to_string(), &size.to_string()])
            .arg(&lab.dir)
            .env("MX_LAB_IPV6", if v6 { "1" } else { "0" })
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script} up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    /// MX_SSH and MX_SCP for this lab, and MX_AGENT: the agent it deploys
    /// ([`crate::util::lean_agent`]).
    pub fn env(&self) -> [(&'static str, String); 3] {
        let config = self.dir.join("ssh_config");
        [
            ("MX_SSH", format!("ssh -F {}", config.display())),
            ("MX_SCP", format!("scp -F {}", config.display())),
            ("MX_AGENT", crate::util::lean_agent().display().to_string()),
        ]
    }

    /// A controller directory holding the lab's servers.txt and a matrix.
    pub fn controller(&self, pps: &str) -> Sandbox {
        let sb = Sandbox::new();
        std::fs::copy(self.dir.join("servers.txt"), sb.file("servers.txt")).unwrap();
        assert_eq!(sb.mx(&["gen", "--pps", pps]).code, 0);
        sb
    }

    pub fn mx(&self, sb: &Sandbox, args: &[&str]) -> Run {
        let env = self.env();
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        sb.mx_env(args, &pairs)
    }

    /// `mx stop` (every agent ends its flows) and `mx clean --yes`, then
    /// checks that nothing is left: no remote dir, no agent, on any host.
    pub fn stop_and_clean(&self, sb: &Sandbox) {
        let stop = self.mx(sb, &["stop"]);
        assert_eq!(stop.code, 0, "{}", stop.stdout);
        let ended = stop.stdout.matches("  ended").count();
        assert_eq!(ended, self.hosts, "{}", stop.stdout);
        let clean = self.mx(sb, &["clean", "--yes"]);
        assert_eq!(clean.code, 0, "{}", clean.stdout);
        for i in 1..=self.hosts {
            assert!(
                !self.var_tmp(i).join("mx").exists(),
                "h{i}: the remote dir is gone"
            );
            assert!(self.agents(i).is_empty(), "h{i}: no agent runs");
        }
    }

    /// Host `i`'s /var/tmp, as the lab keeps it on this machine.
    pub fn var_tmp(&self, i: usize) -> PathBuf {
        self.dir.join(format!("h{i}/vartmp"))
    }

    /// Host `i`'s home for root (its `/root`): where its logins begin; the
    /// controller's, which the tests' hosts share, unless the lab gave it
    /// one of its own (`MX_LAB_OWN_HOME=1`).
    pub fn home(&self, i: usize) -> PathBuf {
        let own = self.dir.join(format!("h{i}/home"));
        if own.is_dir() {
            return own;
        }
        PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
    }

    /// Every host's agent report, where the agent writes it.
    pub fn reports(&self) -> Vec<PathBuf> {
        (1..=self.hosts)
            .map(|i| self.var_tmp(i).join("mx/report.csv"))
            .collect()
    }

    /// Processes named `mx` in host `i`'s namespaces.
    pub fn agents(&self, i: usize) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "pids", &format!("mx{}h{i}", self.net)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "mx")
            })
            .map(str::to_string)
            .collect()
    }

    /// The lab's network: hosts are 198.18.<net>.<i>.
    pub fn net(&self) -> u8 {
        self.net
    }

    /// Host `i`'s network namespace.
    pub fn netns(&self, i: usize) -> String {
        format!("mx{}h{i}", self.net)
    }

    /// Runs `argv` inside host `i`'s network namespace; panics on failure.
    pub fn exec(&self, i: usize, argv: &[&str], stdin: &str) -> String {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns(i)]).args(argv);
        run_fed(cmd, stdin)
    }

    /// Stops host `i`'s sshd (and everything in its namespaces): unreachable.
    pub fn cut(&self, i: usize) {
        let out = Command::new("ip")
            .args(["netns", "pids", &format!("mx{}h{i}", self.net)])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&out.stdout).lines() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
}

/// Runs `cmd` with `stdin` as its input; its output, or a panic with its
/// errors if it fails.
pub fn run_fed(mut cmd: Command, stdin: &str) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(lab_script(self.script))
            .args(["down", &self.net.to_string(), &self.size.to_string()])
            .arg(&self.dir)
            .status();
    }
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_whole_lifecycle_over_real_ssh_leaves_nothing() {
    let lab = Lab::up(71, 4);
    let sb = lab.controller("1000");
    let start = lab.mx(&sb, &["start", "--interval", "1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert!(
        start.stdout.contains("[mx] running: 4 hosts, 12 flows"),
        "{}",
        start.stdout
    );
    for i in 1..=4 {
        assert_eq!(lab.agents(i).len(), 1, "h{i} runs one agent");
        assert!(lab.var_tmp(i).join("mx/agent.stamp").exists());
    }
    let again = lab.mx(&sb, &["start", "--interval", "1"]);
    assert_eq!(again.code, 1, "a double start is refused");
    assert!(
        again.stdout.contains("already running -- mx stop first"),
        "{}",
        again.stdout
    );

    crate::util::wait_for_steady(&lab.reports(), 2);
    let status = lab.mx(&sb, &["status"]);
    assert_eq!(status.code, 0);
    assert_eq!(
        status.stdout.matches("s ago: tx=").count(),
        4,
        "{}",
        status.stdout
    );
    let summary = lab.mx(&sb, &["summarize", "--window", "2"]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    assert!(
        summary.stdout.contains("s steady, 4 hosts, 12 flows"),
        "{}",
        summary.stdout
    );
    let logs = lab.mx(&sb, &["logs"]);
    assert_eq!(logs.code, 0, "{}", logs.stdout);
    assert!(sb.read("logs/h3.log").contains("host=h3"));

    lab.stop_and_clean(&sb);
}

/// UDP datagrams host `i` received over IPv4 and over IPv6 (its kernel's
/// `InDatagrams` of /proc/net/snmp and `Udp6InDatagrams` of /proc/net/snmp6).
fn udp_datagrams_in(lab: &Lab, i: usize) -> (u64, u64) {
    let snmp = lab.exec(i, &["cat", "/proc/net/snmp"], "");
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "InDatagrams")
        .unwrap();
    let v4 = values.split_whitespace().nth(at).unwrap().parse().unwrap();
    let snmp6 = lab.exec(i, &["cat", "/proc/net/snmp6"], "");
    let v6 = snmp6
        .lines()
        .find_map(|l| l.strip_prefix("Udp6InDatagrams"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (v4, v6)
}

/// Every host's UDP datagrams in so far (IPv4 and IPv6 summed): the lab's
/// only UDP is mx's traffic.
fn datagrams_in(lab: &Lab, hosts: usize) -> Vec<u64> {
    (1..=hosts)
        .map(|i| {
            let (v4, v6) = udp_datagrams_in(lab, i);
            v4 + v6
        })
        .collect()
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_ctrl_c_stops_the_fleets_traffic_at_once_and_exits_130() {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let lab = Lab::up(88, 3);
    let sb = lab.controller("2000");
    let env = lab.env();
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut cmd = sb.mx_command(&["run", "--for", "30", "--interval", "1"], &pairs);
    // Its own process group, as a terminal's foreground job: the terminal's
    // ctrl-c reaches every process in it.
    cmd.process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    // Until the traffic runs, then a few seconds of it.
    let began = Instant::now();
    let mut seen = datagrams_in(&lab, 3);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = datagrams_in(&lab, 3);
        if now.iter().zip(&seen).all(|(n, s)| n > s) {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(40), "no traffic");
        seen = now;
    }
    std::thread::sleep(Duration::from_secs(3));
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let sent = Instant::now();
    nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGINT).unwrap();
    // The last moment any host still received a datagram.
    let mut last = datagrams_in(&lab, 3);
    let mut last_rise = Duration::ZERO;
    while sent.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(100));
        let now = datagrams_in(&lab, 3);
        if now != last {
            last_rise = sent.elapsed();
            last = now;
        }
    }
    assert!(
        last_rise <= Duration::from_secs(2),
        "traffic ran on {last_rise:?} after ctrl-c"
    );
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("[mx] interrupted: the run was cut short at "),
        "{stdout}"
    );
    // The summary covers what ran, and says it was cut short.
    assert!(stdout.contains("REQUESTS"), "{stdout}");
    assert!(
        stdout.contains("of the 30s planned: the summary covers what ran"),
        "{stdout}"
    );
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_ipv6_lifecycle_over_ipv6_sshd_with_flows_on_ipv6() {
    // sshd listens on IPv6 alone and servers.txt names the hosts by their
    // fd00:18:111::<i> addresses: every ssh and scp goes over IPv6. The
    // traffic rides eth1's IPv6 addresses (--bind eth1: eth1 has an IPv4
    // address too; the hosts' family decides).
    let lab = Lab::up_v6(111, 3);
    assert_eq!(
        std::fs::read_to_string(lab.dir.join("servers.txt")).unwrap(),
        "h1=[fd00:18:111::1]\nh2=[fd00:18:111::2]\nh3=[fd00:18:111::3]\n"
    );
    let sb = lab.controller("1000");
    let doctor = lab.mx(&sb, &["doctor"]);
    assert_eq!(doctor.code, 0, "{}{}", doctor.stdout, doctor.stderr);
    assert!(
        doctor.stdout.contains("[mx] fleet looks ready: mx start"),
        "{}",
        doctor.stdout
    );
    let before: Vec<(u64, u64)> = (1..=3).map(|i| udp_datagrams_in(&lab, i)).collect();
    let start = lab.mx(&sb, &["start", "--interval", "1", "--bind", "eth1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert!(
        start.stdout.contains(
            "[mx] --bind 'eth1': matrix retargeted at each host's matching address (3 of 3 changed)"
        ),
        "{}",
        start.stdout
    );
    assert!(
        start.stdout.contains("[mx] running: 3 hosts, 6 flows"),
        "{}",
        start.stdout
    );
    for i in 1..=3 {
        assert_eq!(lab.agents(i).len(), 1, "h{i} runs one agent");
        let deployed = std::fs::read_to_string(lab.var_tmp(i).join("mx/matrix.csv")).unwrap();
        assert!(
            deployed.contains(
                "h1=[fd00:19:111::1]:5300,h2=[fd00:19:111::2]:5300,h3=[fd00:19:111::3]:5300"
            ),
            "{deployed}"
        );
    }

    crate::util::wait_for_steady(&lab.reports(), 2);
    let status = lab.mx(&sb, &["status"]);
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    assert_eq!(
        status.stdout.matches("s ago: tx=").count(),
        3,
        "{}",
        status.stdout
    );
    let summary = lab.mx(&sb, &["summarize", "--window", "2"]);
    assert_eq!(summary.code, 0, "{}{}", summary.stdout, summary.stderr);
    let text = &summary.stdout;
    assert!(text.contains("s steady, 3 hosts, 6 flows"), "{text}");
    // Delivered ~100%, and requests weighed at IPv6's 150 wire bytes.
    let delivered = summary_words(text, "DELIVERED");
    let share: f64 = delivered[3].trim_end_matches('%').parse().unwrap();
    assert!(share >= 99.5, "{text}");
    let bits = wire_bits_per_request(text);
    assert!(
        (1150.0..1250.0).contains(&bits),
        "{bits} bits a request: {text}"
    );
    for h in ["h1", "h2", "h3"] {
        assert!(
            sb.file(&format!("reports/{h}.csv")).exists(),
            "{h} collected"
        );
    }
    // The flows went over IPv6: thousands of UDP datagrams in per host over
    // IPv6, next to nothing over IPv4. (Udp6InDatagrams counts what a socket
    // reads: a GRO message of several datagrams counts once, so 4,000
    // datagrams a second for ~4 s read as 4,400-4,700 in two CI runs on a
    // loaded 2-core VM, 2026-12-02. Over IPv4 this would be near 0.)
    for i in 1..=3 {
        let (v4, v6) = udp_datagrams_in(&lab, i);
        let (v4_before, v6_before) = before[i - 1];
        assert!(
            v6 - v6_before > 2000,
            "h{i}: {} IPv6 datagrams",
            v6 - v6_before
        );
        assert!(
            v4 - v4_before < 50,
            "h{i}: {} IPv4 datagrams",
            v4 - v4_before
        );
        let log = std::fs::read_to_string(lab.var_tmp(i).join("mx/agent.log")).unwrap();
        assert!(
            log.contains(&format!("bind: 'eth1' -> fd00:19:111::{i} (eth1)")),
            "{log}"
        );
    }

    // collect, logs and reload (an edited rate) over IPv6 ssh too.
    let collect = lab.mx(&sb, &["collect", "--reports", "again"]);
    assert_eq!(collect.code, 0, "{}{}", collect.stdout, collect.stderr);
    assert!(sb.file("again/h3.csv").exists());
    let logs = lab.mx(&sb, &["logs"]);
    assert_eq!(logs.code, 0, "{}{}", logs.stdout, logs.stderr);
    assert!(sb.read("logs/h2.log").contains("host=h2"));
    assert_eq!(sb.mx(&["gen", "--pps", "500"]).code, 0);
    let reload = lab.mx(&sb, &["reload", "--bind", "eth1"]);
    assert_eq!(reload.code, 0, "{}{}", reload.stdout, reload.stderr);
    for i in 1..=3 {
        // The host's slice: its own row at the edited rate.
        let deployed = std::fs::read_to_string(lab.var_tmp(i).join("mx/matrix.csv")).unwrap();
        let own_row = format!("row {} ", i - 1);
        assert!(
            deployed
                .lines()
                .any(|l| l.starts_with(&own_row) && l.ends_with("=500")),
            "{deployed}"
        );
        assert!(deployed.contains("h1=[fd00:19:111::1]:5300"), "{deployed}");
    }
    lab.stop_and_clean(&sb);
}

/// An `ssh` (or `scp`) for `lab` that writes a line to `log` each time it is
/// run (`ssh -V` for the version asked, which is no login), then runs the
/// real one.
fn counting(sb: &Sandbox, lab: &Lab, tool: &str, log: &Path) -> String {
    let path = sb.write(
        &format!("counting-{tool}"),
        &format!(
            "#!/bin/sh\nif [ \"$1\" = -V ]; then echo '{tool} -V'; else echo {tool}; fi >> '{}'\nexec {tool} -F '{}' \"$@\"\n",
            log.display(),
            lab.dir.join("ssh_config").display()
        ),
    );
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_start_logs_in_once_per_host_and_copies_the_agent_whole_through_it() {
    let lab = Lab::up(86, 3);
    let sb = lab.controller("500");
    let log = sb.file("calls.log");
    let env = [
        ("MX_SSH", counting(&sb, &lab, "ssh", &log)),
        ("MX_SCP", counting(&sb, &lab, "scp", &log)),
        ("MX_AGENT", crate::util::lean_agent().display().to_string()),
    ];
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let start = sb.mx_env(&["start", "--interval", "1"], &pairs);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    // Ready, copy, launch and go on each host: one login a host, no scp;
    // before them, one `ssh -V` (no login) that finds it is OpenSSH, which
    // keeps sessions.
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls, "ssh -V\nssh\nssh\nssh\n", "{}", start.stdout);
    // The hosts and this machine have zstd (tests/run installs it): the
    // agent crossed packed so, and was unpacked there byte for byte, with
    // its mode, and nothing else left beside it.
    let packed = start
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("[mx] the agent went packed to 3 of 3 hosts (zstd: "))
        .unwrap_or_else(|| panic!("no packed copy said: {}", start.stdout));
    let (small, whole) = packed
        .strip_suffix("), unpacked there")
        .and_then(|s| s.split_once(" for its "))
        .unwrap_or_else(|| panic!("{packed}"));
    let mb = |s: &str| s.strip_suffix(" MB").unwrap().parse::<f64>().unwrap();
    let size = std::fs::metadata(crate::util::lean_agent()).unwrap().len();
    assert!((mb(whole) - size as f64 / 1e6).abs() < 0.1, "{packed}");
    assert!(mb(small) < mb(whole) / 2.0, "{packed}");
    let agent = std::fs::read(crate::util::lean_agent()).unwrap();
    for i in 1..=3 {
        let dir = lab.var_tmp(i).join("mx");
        let deployed = std::fs::read(dir.join("mx")).unwrap();
        assert!(deployed == agent, "h{i}: the agent arrived whole");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("mx"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "h{i}");
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".gz") || n.ends_with(".zst") || n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "h{i} kept {left:?}");
        assert_eq!(lab.agents(i).len(), 1, "h{i} runs one agent");
    }
    // So does a status: one login a host.
    std::fs::remove_file(&log).unwrap();
    let status = sb.mx_env(&["status"], &pairs);
    assert_eq!(status.code, 0, "{}", status.stdout);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "ssh -V\nssh\nssh\nssh\n"
    );
    lab.stop_and_clean(&sb);
}

/// The ssh and scp processes running now whose command line names `config`
/// (one lab's ssh_config): a command's calls, its sessions and their
/// masters.
fn ssh_processes(config: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| {
            let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let program = argv
                .first()
                .map(|p| Path::new(std::str::from_utf8(p).unwrap_or("")));
            let named = program
                .and_then(|p| p.file_name())
                .is_some_and(|n| n == "ssh" || n == "scp");
            named && argv.contains(&config.as_bytes())
        })
        .count()
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_fleet_past_its_jobs_keeps_only_its_first_hosts_connected() {
    use matrix_orchestrator::fleet::transport::session::KEPT_PER_JOB;
    use std::sync::atomic::{AtomicBool, Ordering};
    let hosts = KEPT_PER_JOB + 2;
    let lab = Lab::up(134, hosts);
    let sb = lab.controller("100");
    let config = lab.dir.join("ssh_config").display().to_string();
    // ssh and scp that log every call, whole, then run the real one.
    let log = sb.file("calls.log");
    let wrap = |tool: &str| {
        let path = sb.write(
            &format!("logging-{tool}"),
            &format!(
                "#!/bin/sh\necho {tool} \"$@\" >> '{}'\nexec {tool} -F '{config}' \"$@\"\n",
                log.display()
            ),
        );
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path.display().to_string()
    };
    let env = [
        ("MX_SSH", wrap("ssh")),
        ("MX_SCP", wrap("scp")),
        ("MX_AGENT", crate::util::lean_agent().display().to_string()),
    ];
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // A fresh start with --jobs 1, its ssh processes counted as it goes.
    let done = AtomicBool::new(false);
    let (start, most) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut most = 0;
            while !done.load(Ordering::Relaxed) {
                most = most.max(ssh_processes(&config));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            most
        });
        let start = sb.mx_env(&["start", "--interval", "1", "--jobs", "1"], &pairs);
        done.store(true, Ordering::Relaxed);
        (start, watcher.join().unwrap())
    });
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let calls = std::fs::read_to_string(&log).unwrap();
    for i in 1..=hosts {
        let addr = format!("198.18.134.{i}");
        let to_it: Vec<&str> = calls
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .any(|w| w.split(['@', ':']).any(|part| part == addr))
            })
            .collect();
        if i <= KEPT_PER_JOB {
            // Kept: one login for every step, over a master of its own.
            assert_eq!(to_it.len(), 1, "h{i}: {to_it:#?}");
            assert!(to_it[0].contains("ControlMaster=auto"), "{}", to_it[0]);
        } else {
            // Past them: a login per fan-out (the deploy's make-ready and
            // copies in one, the launch, the go), no scp, each its own
            // connection, leaving no master behind.
            assert_eq!(to_it.len(), 3, "h{i}: {to_it:#?}");
            assert!(
                to_it
                    .iter()
                    .all(|l| l.starts_with("ssh ") && !l.contains("Control")),
                "h{i}: {to_it:#?}"
            );
        }
    }
    // At most a shell and a master for each kept host, and one job's
    // shell at a time beside them; a shell and a master for every host
    // would be 12 here.
    assert!(most <= 2 * KEPT_PER_JOB + 2, "{most} ssh processes at once");
    // What outlives the command: the kept hosts' masters, for 60 s.
    let left = ssh_processes(&config);
    eprintln!("ssh processes: {most} at most during the start, {left} after it");
    assert!(left <= KEPT_PER_JOB, "{left} ssh processes after the start");
    for i in 1..=hosts {
        assert_eq!(lab.agents(i).len(), 1, "h{i} runs one agent");
    }
    lab.stop_and_clean(&sb);
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_an_unreachable_host_gets_its_own_line_and_exit_1() {
    let lab = Lab::up(72, 3);
    let sb = lab.controller("500");
    lab.cut(2);
    let status = lab.mx(&sb, &["status"]);
    assert_eq!(
        status.code, 1,
        "a host that cannot be reached: {}",
        status.stdout
    );
    assert!(
        status.stdout.contains("h1  NOT-DEPLOYED"),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("h3  NOT-DEPLOYED"));
    assert!(
        status.stdout.contains("[mx] FAILED on 1/3 hosts: h2"),
        "{}",
        status.stdout
    );
    let stop = lab.mx(&sb, &["stop"]);
    assert_eq!(stop.code, 1);
    let h2: Vec<&str> = stop
        .stdout
        .lines()
        .filter(|l| l.starts_with("  h2 "))
        .collect();
    assert_eq!(h2.len(), 1, "{}", stop.stdout);
    assert!(
        h2[0].contains("198.18.72.2"),
        "the line says which host: {}",
        h2[0]
    );
    assert!(stop.stdout.contains("h1  not-deployed"));
    // The host that was told nothing is named, with the way to retry it.
    assert!(
        stop.stdout.contains(
            "[mx] not stopped: h2 -- an agent there may still be sending; `mx stop` again retries"
        ),
        "{}",
        stop.stdout
    );
    let start = lab.mx(&sb, &["start"]);
    assert_eq!(start.code, 1);
    assert!(
        start.stdout.contains("[mx] FAILED on 1/3 hosts: h2"),
        "{}",
        start.stdout
    );
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_dry_run_touches_nothing() {
    let lab = Lab::up(73, 2);
    let sb = lab.controller("500");
    for cmd in [&["start"][..], &["stop"], &["clean"], &["status"]] {
        let run = lab.mx(&sb, &[cmd, &["--dry-run"][..]].concat());
        assert_eq!(run.code, 0, "{cmd:?}: {}", run.stdout);
        assert!(run.stdout.contains("DRY-RUN ssh -F "), "{}", run.stdout);
    }
    for i in 1..=2 {
        assert_eq!(
            std::fs::read_dir(lab.var_tmp(i)).unwrap().count(),
            0,
            "h{i} was touched"
        );
        assert!(lab.agents(i).is_empty());
    }
}

#[test]
fn agent_demo_runs_the_whole_lifecycle_for_a_new_user() {
    let sb = Sandbox::new();
    let run = sb.mx(&["demo", "--seconds", "6", "--hosts", "3"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let out = run.stdout;
    for step in [
        "$ mx gen",
        "$ mx start",
        "$ mx status",
        "$ mx summarize",
        "$ mx stop",
        "$ mx clean",
    ] {
        assert!(out.contains(step), "{step} missing:\n{out}");
    }
    assert!(out.contains("s steady, 3 hosts, 6 flows"), "{out}");
    assert!(out.contains("[mx] nothing of mx remains on the fleet"));
    // It leaves the report page, and says where.
    let said = out
        .lines()
        .find_map(|l| l.strip_prefix("[mx] the demo's report page: "))
        .unwrap_or_else(|| panic!("no report page named:\n{out}"));
    let page = std::path::Path::new(said.split(' ').next().unwrap());
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..80]);
    std::fs::remove_dir_all(page.parent().unwrap()).unwrap();
}

/// Bytes sent and received on `dev` inside host `i`'s namespace.
fn counters(net: u8, i: usize, dev: &str) -> (u64, u64) {
    let read = |what: &str| -> u64 {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &format!("mx{net}h{i}"),
                "cat",
                &format!("/sys/class/net/{dev}/statistics/{what}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (read("tx_bytes"), read("rx_bytes"))
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_bind_moves_the_traffic_to_the_data_nic() {
    let lab = Lab::up(74, 3);
    let sb = lab.controller("5000");
    // A pattern only h1 has: refused before anything starts, naming the others.
    let run = lab.mx(&sb, &["start", "--bind", "198.19.74.1"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("--bind '198.19.74.1' matches no interface on 2 host(s): h2, h3"),
        "{}",
        run.stderr
    );
    assert!(lab.agents(1).is_empty() && std::fs::read_dir(lab.var_tmp(1)).unwrap().count() == 0);

    let run = lab.mx(&sb, &["start", "--bind", "eth1", "--interval", "1"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("matrix retargeted at each host's matching address (3 of 3 changed)")
    );
    // Counted from the fleet's start instant: the deploy itself (scp of the
    // binary) rode eth0, and the flows begin together a moment after `start`.
    std::thread::sleep(until_the_flows_begin(&run.stdout));
    let before: Vec<_> = (1..=3)
        .map(|i| (counters(74, i, "eth0"), counters(74, i, "eth1")))
        .collect();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let after: Vec<_> = (1..=3)
        .map(|i| (counters(74, i, "eth0"), counters(74, i, "eth1")))
        .collect();
    assert_eq!(lab.mx(&sb, &["stop"]).code, 0);
    for i in 0..3 {
        let data = (after[i].1.0 - before[i].1.0, after[i].1.1 - before[i].1.1);
        let mgmt = (after[i].0.0 - before[i].0.0, after[i].0.1 - before[i].0.1);
        // 2 flows x 5000 pps x 3 s of 64-byte requests and replies each way:
        // megabytes on eth1; eth0 carries only the ssh sessions.
        assert!(
            data.0 > 2_000_000 && data.1 > 2_000_000,
            "h{}: eth1 moved {data:?}",
            i + 1
        );
        assert!(
            mgmt.0 < data.0 / 4 && mgmt.1 < data.1 / 4,
            "h{}: eth0 moved {mgmt:?} vs {data:?}",
            i + 1
        );
    }
    let stamp = std::fs::read_to_string(lab.var_tmp(1).join("mx/agent.stamp")).unwrap();
    assert!(stamp.contains("--bind eth1"), "{stamp}");
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_reload_restarts_only_what_the_edit_changed() {
    let lab = Lab::up(75, 3);
    let sb = lab.controller("1000");
    assert_eq!(
        lab.mx(&sb, &["start", "--interval", "1", "--streams", "2"])
            .code,
        0
    );
    let pids = |lab: &Lab| (1..=3).map(|i| lab.agents(i)).collect::<Vec<_>>();
    let first = pids(&lab);

    // Nothing edited: nothing restarted.
    let run = lab.mx(&sb, &["reload"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("[mx] every host already matches matrix.csv -- nothing to restart"),
        "{}",
        run.stdout
    );
    assert_eq!(pids(&lab), first);

    // One row (h2's) edited: only h2 restarts, with its original flags, report
    // kept (what it held before the reload: its first steady intervals).
    crate::util::wait_for_steady(&lab.reports(), 2);
    let rows_before = std::fs::read_to_string(lab.var_tmp(2).join("mx/report.csv"))
        .unwrap()
        .lines()
        .count();
    let matrix = sb.read("matrix.csv");
    let edited: String = matrix
        .split_inclusive('\n')
        .map(|l| {
            if l.starts_with("h2=") {
                l.replacen(",1000,", ",1500,", 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_ne!(edited, matrix);
    sb.write("matrix.csv", &edited);
    let run = lab.mx(&sb, &["reload"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("[mx] unchanged, left running: 2 of 3 host(s)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("[mx] matrix changed for 1 host(s): h2"));
    assert!(
        run.stdout.contains("h2  restarted (was running)"),
        "{}",
        run.stdout
    );
    let second = pids(&lab);
    assert_eq!(second[0], first[0]);
    assert_ne!(second[1], first[1]);
    assert_eq!(second[2], first[2]);
    // h1 answers h2 at h2's new rate: it re-read that, and ran on.
    assert!(
        run.stdout
            .contains("they re-read what they answer, and run on: h1"),
        "{}",
        run.stdout
    );
    let h1_log = std::fs::read_to_string(lab.var_tmp(1).join("mx/agent.log")).unwrap();
    assert!(
        h1_log.contains("answers: what the hosts that send here send re-read from"),
        "{h1_log}"
    );
    let stamp = std::fs::read_to_string(lab.var_tmp(2).join("mx/agent.stamp")).unwrap();
    assert!(stamp.contains("flags=--interval 1 --streams 2"), "{stamp}");
    let rows_after = std::fs::read_to_string(lab.var_tmp(2).join("mx/report.csv"))
        .unwrap()
        .lines()
        .count();
    assert!(rows_after >= rows_before, "the report survives a reload");

    // The header (packet shape) edited: every host restarts.
    let reshaped = sb.read("matrix.csv").replace("tx_size=64", "tx_size=128");
    sb.write("matrix.csv", &reshaped);
    let run = lab.mx(&sb, &["reload"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("[mx] matrix changed for 3 host(s): h1, h2, h3"),
        "{}",
        run.stdout
    );
    let third = pids(&lab);
    for i in 0..3 {
        assert_ne!(third[i], second[i], "h{} restarted", i + 1);
    }
    assert_eq!(lab.mx(&sb, &["clean", "--yes"]).code, 0);
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_doctor_checks_ssh_architecture_and_fd_limits() {
    let lab = Lab::up(76, 2);
    let sb = lab.controller("1000");
    let run = lab.mx(&sb, &["doctor"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout.contains("  h1  arch=x86_64; cores="),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("agent_running=no"));
    assert!(run.stdout.contains("[mx] fleet looks ready: mx start"));
    lab.cut(2);
    let run = lab.mx(&sb, &["doctor"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("[mx] FAILED on 1/2 hosts: h2"),
        "{}",
        run.stdout
    );
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_doctor_tells_each_unreachable_host_its_own_fix_and_writes_the_ready_ones() {
    let lab = Lab::up(87, 4);
    let sb = lab.controller("1000");
    // h2 is asked for a user whose keys do not hold ours, h3 shows a host
    // key other than the one known for it, h4's sshd is gone: three causes,
    // three fixes.
    let keygen = |path: &str| {
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(sb.file(path))
            .status()
            .unwrap();
        assert!(status.success());
    };
    keygen("impostor");
    let impostor = sb.read("impostor.pub");
    let impostor_key = impostor
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    sb.write("known_hosts", &format!("198.18.87.3 {impostor_key}\n"));
    let lab_config = std::fs::read_to_string(lab.dir.join("ssh_config")).unwrap();
    sb.write(
        "ssh_config",
        &format!(
            "Host 198.18.87.2\n    User mx-stranger\n\
             Host 198.18.87.3\n    StrictHostKeyChecking yes\n    UserKnownHostsFile {}\n\
             {lab_config}",
            sb.file("known_hosts").display()
        ),
    );
    lab.cut(4);
    let ssh = format!("ssh -F {}", sb.file("ssh_config").display());
    let run = sb.mx_env(
        &["doctor", "--ready-hosts", "ready.txt"],
        &[("MX_SSH", &ssh)],
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    for line in [
        "[mx] h2: your key was refused -- `ssh-copy-id 198.18.87.2` installs your key",
        "[mx] h3: the host key changed -- if the host was reinstalled, `ssh-keygen -R 198.18.87.3` forgets its old key",
        "[mx] h4: connection refused: no sshd listening -- start sshd on the host",
    ] {
        assert!(run.stdout.contains(line), "{line}\nin:\n{}", run.stdout);
    }
    // Only the refused key is told to copy a key.
    assert_eq!(
        run.stdout.matches("ssh-copy-id").count(),
        1,
        "{}",
        run.stdout
    );
    // The ready hosts, as a server list gen takes.
    assert_eq!(sb.read("ready.txt"), "h1=198.18.87.1\n");
    assert!(
        run.stdout
            .contains("[mx] wrote ready.txt (1 of 4 hosts ready): `mx gen --servers ready.txt`"),
        "{}",
        run.stdout
    );
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_hostile_names_and_dirs_cross_real_ssh_quoted() {
    let lab = Lab::up(77, 2);
    let sb = Sandbox::new();
    // Names and a remote dir that would run commands on the host if a login
    // shell ever saw them unquoted.
    sb.write(
        "servers.txt",
        "h$(touch${IFS}/var/tmp/pwned-name)=198.18.77.1\nh2;touch${IFS}/var/tmp/pwned-semi=198.18.77.2\n",
    );
    assert_eq!(sb.mx(&["gen", "--pps", "500"]).code, 0);
    // (No '/' inside the hostile part: that would only make a nested path.)
    let dir = "/var/tmp/mx it's $(touch${IFS}pwned-dir) `touch pwned-tick`;x";
    let run = lab.mx(&sb, &["start", "--interval", "1", "--remote-dir", dir]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let status = lab.mx(&sb, &["status", "--remote-dir", dir]);
    assert!(
        status
            .stdout
            .contains("  h$(touch${IFS}/var/tmp/pwned-name)  "),
        "{}",
        status.stdout
    );
    assert!(!status.stdout.contains("NOT-"), "{}", status.stdout);
    assert_eq!(lab.agents(1).len(), 1);
    let clean = lab.mx(&sb, &["clean", "--yes", "--remote-dir", dir]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    for i in 1..=2 {
        let left: Vec<_> = std::fs::read_dir(lab.var_tmp(i))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            left.is_empty(),
            "h{i}: {left:?} (a quoted word ran, or the dir survived)"
        );
        assert!(lab.agents(i).is_empty());
    }
    // A command that ran would have touched its file in the login directory.
    for i in 1..=2 {
        for name in ["pwned-dir", "pwned-tick", "pwned-name", "pwned-semi"] {
            assert!(
                !lab.home(i).join(name).exists(),
                "h{i}: {name} was created: a word ran"
            );
        }
    }
}

/// How long from now until the flows begin, from `mx start`'s
/// `all flows begin together at HH:MM:SS (in N.Ns)` line, plus a margin.
fn until_the_flows_begin(start_output: &str) -> std::time::Duration {
    let seconds: f64 = start_output
        .lines()
        .find_map(|l| l.split("all flows begin together at ").nth(1))
        .and_then(|rest| rest.split("(in ").nth(1))
        .and_then(|rest| rest.split('s').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no start instant in:\n{start_output}"));
    std::time::Duration::from_secs_f64(seconds + 0.3)
}
