//! The fleet commands through the local transport: the same scripts ssh would
//! run, each host in its own sandbox directory, real agents on 127.x addresses.

use std::path::Path;
use std::time::Duration;

use crate::util::{Sandbox, summary_words, wire_bits_per_request};

/// The agent reports of a local fleet's `hosts`, in their remote directory
/// `dir` under /var/tmp (`mx`, or a class's own).
pub fn local_reports(sb: &Sandbox, hosts: &[&str], dir: &str) -> Vec<std::path::PathBuf> {
    hosts
        .iter()
        .map(|h| sb.file(&format!("hosts/{h}/var/tmp/{dir}/report.csv")))
        .collect()
}

/// Pids of processes whose executable lies under `root`.
pub fn agents_under(root: &Path) -> Vec<String> {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| {
            let exe = std::fs::read_link(e.path().join("exe")).ok()?;
            exe.starts_with(&root)
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

fn fleet_dir(net: u8, names: &[&str]) -> Sandbox {
    fleet_dir_with(net, names, &["--pps", "1000"])
}

/// A sandbox whose hosts `names` sit on 127.`net`.0.x, its matrix made by
/// `mx gen` with `gen_args`.
pub fn fleet_dir_with(net: u8, names: &[&str], gen_args: &[&str]) -> Sandbox {
    let sb = Sandbox::new();
    let servers: String = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{n}=127.{net}.0.{}\n", i + 1))
        .collect();
    sb.write("servers.txt", &servers);
    let run = sb.mx(&[&["gen"][..], gen_args].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    sb
}

#[test]
fn agent_status_of_a_big_fleet_is_one_line_and_the_hosts_unlike_it() {
    // 101 hosts: two run agents (started by hand in their directories, as
    // a start would leave them), the other 99 were never deployed.
    let names: Vec<String> = (1..=101).map(|i| format!("h{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // 40 pps a flow: a worker that sends a few ms past a tick moves one
    // request a flow into the next interval, 2.5% of the rate, not all of
    // it (at 1 pps, half a host's flows read as sending nothing).
    let sb = fleet_dir_with(60, &names, &["--pps", "40"]);
    let mut agents = Vec::new();
    for host in ["h1", "h2"] {
        let dir = sb.file(&format!("hosts/{host}/var/tmp/mx"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(crate::util::lean_agent(), dir.join("mx")).unwrap();
        std::fs::copy(sb.file("matrix.csv"), dir.join("matrix.csv")).unwrap();
        let log = std::fs::File::create(dir.join("agent.log")).unwrap();
        agents.push(
            std::process::Command::new(dir.join("mx"))
                .args(["agent", "--matrix", "matrix.csv", "--host", host])
                .args(["--interval", "1", "--duration", "30"])
                .current_dir(&dir)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }
    let reports = local_reports(&sb, &["h1", "h2"], "mx");
    crate::util::wait_for_steady(&reports, 1);
    let status = sb.mx(&["status", "--local", "hosts"]);
    for mut agent in agents {
        let _ = agent.kill();
        let _ = agent.wait();
    }
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    let lines: Vec<&str> = status.stdout.lines().collect();
    assert!(
        lines[0].starts_with("[mx] 101 hosts: 2 running (rows ")
            && lines[0].ends_with("; 99 not deployed"),
        "{}",
        status.stdout
    );
    // The two that run are in the fleet line, not listed; 20 of the 99
    // that are not are, and the rest counted.
    assert_eq!(lines.len(), 1 + 20 + 1, "{}", status.stdout);
    assert!(
        lines[1..21].iter().all(|l| l.ends_with("  NOT-DEPLOYED")),
        "{}",
        status.stdout
    );
    assert!(!status.stdout.contains("  h1 ") && !status.stdout.contains("  h2 "));
    assert_eq!(
        lines[21],
        "  ... and 79 more hosts like these (`mx status --each` prints every host)"
    );
    // --each: the original's line a host.
    let each = sb.mx(&["status", "--local", "hosts", "--each"]);
    assert_eq!(
        each.stdout.lines().filter(|l| l.starts_with("  h")).count(),
        101,
        "{}",
        each.stdout
    );
}

#[test]
fn agent_fleet_lifecycle_on_local_hosts_leaves_no_trace() {
    let sb = fleet_dir(51, &["h1", "h2", "h3"]);
    let local = ["--local", "hosts"];
    fn with<'a>(cmd: &[&'a str], local: &[&'a str]) -> Vec<&'a str> {
        [cmd, local].concat()
    }
    let run = sb.mx(&with(&["start", "--interval", "1"], &local));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("[mx] running: 3 hosts, 6 flows, 64 -> 64 bytes, 6.0 kpps"),
        "{}",
        run.stdout
    );
    assert_eq!(
        agents_under(&sb.file("hosts")).len(),
        3,
        "one agent per host"
    );
    // The next steps, as they must be typed to reach this fleet.
    assert!(
        run.stdout.ends_with(
            "[mx] next: mx status --local hosts      # one line per host\n\
             [mx]       mx summarize --local hosts   # pps / Gbps / loss / rtt\n\
             [mx]       mx stop --local hosts        # when you are done\n"
        ),
        "{}",
        run.stdout
    );

    // A second start is refused on every host, copies nothing over the
    // running agents, and says why: they already run.
    let again = sb.mx(&with(&["start", "--interval", "1"], &local));
    assert_eq!(again.code, 1);
    assert!(
        again
            .stdout
            .contains("h1  already running -- mx stop --local hosts first"),
        "{}",
        again.stdout
    );
    // A refusal, read as one: never "FAILED".
    assert!(
        again
            .stdout
            .contains("\n[mx] already running on 3/3 hosts: h1 h2 h3\n"),
        "{}",
        again.stdout
    );
    assert!(!again.stdout.contains("FAILED"), "{}", again.stdout);
    assert!(
        again.stdout.ends_with(
            "[mx] no agent was started: the agents already run on 3 hosts -- `mx stop --local hosts` first, or `mx reload --local hosts` to push an edited matrix\n"
        ),
        "{}",
        again.stdout
    );

    crate::util::wait_for_steady(&local_reports(&sb, &["h1", "h2", "h3"], "mx"), 2);
    let status = sb.mx(&with(&["status"], &local));
    assert_eq!(status.code, 0);
    // The row's age, not its raw epoch; the target labelled.
    for h in ["h1", "h2", "h3"] {
        let line = status
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("  {h}  ")))
            .unwrap_or_else(|| panic!("{}", status.stdout));
        let (age, rest) = line[6..].split_once("s ago: tx=").expect(line);
        assert!(age.parse::<u32>().is_ok(), "{line}");
        assert!(rest.contains(" (target 2.0 kpps) rx="), "{line}");
        assert!(!line.contains("ts="), "{line}");
    }
    let summary = sb.mx(&with(&["summarize", "--window", "2"], &local));
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    assert!(
        summary
            .stdout
            .contains("[mx] collecting reports into reports/ on 3 hosts")
    );
    assert!(
        summary.stdout.contains("s steady, 3 hosts, 6 flows"),
        "{}",
        summary.stdout
    );
    assert!(sb.file("reports/h2.csv").exists());

    // export collects first too, narrating on stderr: stdout is the samples.
    let export = sb.mx(&with(&["export", "--window", "2"], &local));
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert!(
        export
            .stderr
            .contains("[mx] collecting reports into reports/ on 3 hosts"),
        "{}",
        export.stderr
    );
    assert!(export.stdout.starts_with("# mx "), "{}", export.stdout);
    assert!(
        export.stdout.contains("\nmx_pps\th1\t"),
        "{}",
        export.stdout
    );
    let no_matrix = sb.mx(&with(&["export", "--matrix", "nope.csv"], &local));
    assert_eq!(no_matrix.code, 2);
    assert!(
        no_matrix
            .stderr
            .contains("matrix not found: nope.csv -- `mx export --no-collect` exports")
    );

    let logs = sb.mx(&with(&["logs"], &local));
    assert_eq!(logs.code, 0);
    assert!(
        logs.stdout.contains("h1  -> logs/h1.log"),
        "{}",
        logs.stdout
    );
    assert!(sb.read("logs/h1.log").contains(concat!(
        "mx agent ",
        env!("CARGO_PKG_VERSION"),
        ": host=h1"
    )));

    // A report that cannot be collected: the summary of what is there, the
    // hosts it is stale for, and exit 1.
    std::fs::remove_file(sb.file("hosts/h2/var/tmp/mx/report.csv")).unwrap();
    let stale = sb.mx(&with(&["summarize", "--window", "2"], &local));
    assert_eq!(stale.code, 1, "{}{}", stale.stdout, stale.stderr);
    assert!(
        stale.stdout.contains("s steady, 3 hosts, 6 flows"),
        "{}",
        stale.stdout
    );
    assert!(
        stale.stdout.contains(
            "[mx] 1 of 3 hosts' reports could not be collected just now, so the summary above is stale for them:\n\
             [mx]   h2  its earlier copy was summarized (reports/h2.csv, collected at "
        ),
        "{}",
        stale.stdout
    );
    // One that arrives and is not a report (a disk that returned garbage):
    // checked as it arrives, named, left out; its earlier copy kept.
    let earlier = sb.read("reports/h3.csv");
    let garbage = sb.file("hosts/h3/var/tmp/mx/report.csv.garbage");
    std::fs::write(&garbage, "\0\0\0 not a report\n").unwrap();
    std::fs::rename(&garbage, sb.file("hosts/h3/var/tmp/mx/report.csv")).unwrap();
    let damaged = sb.mx(&with(&["summarize", "--window", "2"], &local));
    assert_eq!(damaged.code, 1, "{}{}", damaged.stdout, damaged.stderr);
    assert!(
        damaged.stdout.contains("[mx] 2 of 3 hosts' reports could not be collected just now")
            && damaged.stdout.contains(
                "[mx]   h3  its earlier copy was summarized (reports/h3.csv, collected at "
            )
            && damaged.stdout.contains(
                ") (arrived, and is not a report: report.csv: not an mx report (its first line is not the report header: ts,host,dir,peer,...))\n"
            ),
        "{}",
        damaged.stdout
    );
    assert_eq!(sb.read("reports/h3.csv"), earlier);
    assert!(!sb.file("reports/.h3.csv.part").exists());

    let stop = sb.mx(&with(&["stop"], &local));
    assert_eq!(stop.code, 0);
    // Each agent ended its flows at the one end instant, and exited itself.
    assert!(stop.stdout.contains("h3  ended"), "{}", stop.stdout);
    assert!(
        stop.stdout.ends_with(
            "[mx] reports and logs are still on the hosts:\n\
             [mx]   mx summarize --local hosts   # collect + analyze\n\
             [mx]   mx logs --local hosts        # collect agent logs\n\
             [mx]   mx clean --local hosts       # delete every trace\n"
        ),
        "{}",
        stop.stdout
    );
    assert!(agents_under(&sb.file("hosts")).is_empty());
    let status = sb.mx(&with(&["status"], &local));
    assert!(
        status.stdout.contains("h1  NOT-RUNNING"),
        "{}",
        status.stdout
    );

    let clean = sb.mx(&with(&["clean", "--yes"], &local));
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    assert!(clean.stdout.contains("h2  clean (was: not-running)"));
    assert!(
        clean
            .stdout
            .contains("[mx] nothing of mx remains on the fleet")
    );
    for h in ["h1", "h2", "h3"] {
        assert!(
            !sb.file(&format!("hosts/{h}/var/tmp/mx")).exists(),
            "{h}'s dir survived"
        );
    }
    let status = sb.mx(&with(&["status"], &local));
    assert!(
        status.stdout.contains("h1  NOT-DEPLOYED"),
        "{}",
        status.stdout
    );
}

#[test]
fn agent_fleet_clean_stops_running_agents_too() {
    let sb = fleet_dir(52, &["h1", "h2"]);
    assert_eq!(
        sb.mx(&["start", "--local", "hosts", "--interval", "1"])
            .code,
        0
    );
    assert_eq!(agents_under(&sb.file("hosts")).len(), 2);
    let clean = sb.mx(&["clean", "--local", "hosts", "-y"]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    assert!(
        clean.stdout.contains("h1  clean (was: stopped)"),
        "{}",
        clean.stdout
    );
    assert!(agents_under(&sb.file("hosts")).is_empty());
}

#[test]
fn agent_fleet_hostile_names_and_dirs_are_quoted_never_run() {
    // A host name and a remote dir built to run commands if ever unquoted.
    let sb = fleet_dir(
        53,
        &["h$(touch${IFS}pwned-name)", "h2;touch${IFS}pwned-semi"],
    );
    let dir = "/var/tmp/mx it's $(touch pwned-dir) `touch pwned-tick`;x";
    let local = ["--local", "hosts", "--remote-dir", dir];
    let run = sb.mx(&[&["start", "--interval", "1"][..], &local].concat());
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let status = sb.mx(&[&["status"][..], &local].concat());
    assert!(!status.stdout.contains("NOT-"), "{}", status.stdout);
    // The next step start prints works typed as shown, hostile dir and all.
    let next = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("[mx] next: "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    let typed = next.split("   #").next().unwrap().trim_end();
    let status = typed_in(&sb, typed);
    assert_eq!(
        status.code, 0,
        "{typed}\n{}{}",
        status.stdout, status.stderr
    );
    // Both hosts answered from the hostile directory: it reached this fleet.
    assert!(
        !status.stdout.contains("NOT-"),
        "{typed}\n{}",
        status.stdout
    );
    assert_eq!(
        status.stdout.lines().count(),
        2,
        "{typed}\n{}",
        status.stdout
    );
    let clean = sb.mx(&[&["clean", "--yes"][..], &local].concat());
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    let mut leftovers = Vec::new();
    for entry in walk(sb.path()) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("pwned") {
            leftovers.push(entry);
        }
    }
    assert!(
        leftovers.is_empty(),
        "a quoted word ran as a command: {leftovers:?}"
    );
    assert!(agents_under(&sb.file("hosts")).is_empty());
}

/// Runs `line` (an mx command as mx printed it) through sh in the sandbox,
/// as a person would type it, with this mx first on the PATH.
fn typed_in(sb: &Sandbox, line: &str) -> crate::util::Run {
    let exe = Path::new(env!("CARGO_BIN_EXE_mx"));
    let path = format!(
        "{}:{}",
        exe.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(sb.path())
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    crate::util::Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.clone());
            if p.is_dir() {
                out.extend(walk(&p));
            }
        }
    }
    out
}

#[test]
fn a_remote_dir_mx_may_not_own_is_refused() {
    let sb = fleet_dir(54, &["h1", "h2"]);
    for dir in ["/", "/var", "~", "/home/someone"] {
        let run = sb.mx(&["clean", "--yes", "--remote-dir", dir]);
        assert_eq!(run.code, 2, "{dir}");
        assert!(
            run.stderr.contains("is not a directory mx may own"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn a_dry_run_shows_two_hosts_and_counts_what_each_step_would_cost() {
    // 300 hosts that do not exist: a dry run runs nothing.
    let sb = Sandbox::new();
    let servers: String = (1..=300)
        .map(|i| format!("h{i}=198.18.{}.{}\n", 10 + i / 250, i % 250 + 1))
        .collect();
    sb.write("servers.txt", &servers);
    assert_eq!(sb.mx(&["gen", "--pps", "10"]).code, 0);
    let matrix = std::fs::metadata(sb.file("matrix.csv")).unwrap().len();
    let agent = crate::util::lean_agent();
    let agent_bytes = std::fs::metadata(agent).unwrap().len();
    let env = [
        ("MX_SSH", "ssh"),
        ("MX_SCP", "scp"),
        ("MX_AGENT", agent.to_str().unwrap()),
    ];
    let before = walk(sb.path());
    let run = sb.mx_env(&["start", "--dry-run", "--interval", "5"], &env);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let hosts_shown = |text: &str| -> std::collections::BTreeSet<String> {
        text.lines()
            .filter(|l| l.contains("DRY-RUN"))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    // Each step shows the first two hosts' commands, and says the rest.
    assert_eq!(
        hosts_shown(&run.stdout),
        ["h1", "h2"].map(String::from).into(),
        "{}",
        run.stdout
    );
    let more = "  ... and 298 more hosts, each alike (--dry-run all prints every one)";
    assert_eq!(run.stdout.matches(more).count(), 3, "{}", run.stdout);
    // The deploy: a ready step and a copy a host, and the bytes; then the
    // launch, and the step that gives every host the start instant. Each
    // host gets its slice of the matrix: a 300-host full mesh is 640 kB,
    // and a slice of it about 12 kB.
    let whole = mx_matrix::Matrix::load(&sb.file("matrix.csv")).unwrap();
    let slicer = mx_matrix::slice::Slicer::new(whole);
    let slices: Vec<u64> = (0..300).map(|h| slicer.slice(h).len() as u64).collect();
    let (smallest, largest) = (*slices.iter().min().unwrap(), *slices.iter().max().unwrap());
    assert!(
        largest * 40 < matrix,
        "slices of {largest} bytes, of a matrix of {matrix}"
    );
    let mb = |n: u64| mx_base::units::bytes(n as f64);
    let deploy = format!(
        "[mx] dry run: this step would take 600 commands on 300 hosts, 64 at a time (5 waves), and send at most {} from this machine: matrix.csv ({} to {} each) to 300 hosts, mx ({}) to 300 hosts (the agent goes only to hosts that lack it, packed where they can unpack it: zstd, else gzip)",
        mb(slices.iter().sum::<u64>() + 300 * agent_bytes),
        mb(smallest),
        mb(largest),
        mb(agent_bytes)
    );
    assert!(run.stdout.contains(&deploy), "{deploy}\n{}", run.stdout);
    let each =
        "[mx] dry run: this step would take 300 commands on 300 hosts, 64 at a time (5 waves)\n";
    assert_eq!(run.stdout.matches(each).count(), 2, "{}", run.stdout);
    // --jobs sets the waves; --dry-run all prints every host.
    let all = sb.mx_env(&["stop", "--dry-run", "all", "--jobs", "100"], &env);
    assert_eq!(all.code, 0, "{}{}", all.stdout, all.stderr);
    assert_eq!(hosts_shown(&all.stdout).len(), 300, "{}", all.stdout);
    assert!(!all.stdout.contains("more hosts"), "{}", all.stdout);
    assert!(
        all.stdout.contains(
            "[mx] dry run: this step would take 300 commands on 300 hosts, 100 at a time (3 waves)\n"
        ),
        "{}",
        all.stdout
    );
    assert_eq!(walk(sb.path()), before, "a dry run wrote files");
    // Only `all` is a value it takes.
    let bad = sb.mx_env(&["stop", "--dry-run", "some"], &env);
    assert_eq!(bad.code, 2, "{}{}", bad.stdout, bad.stderr);
}

#[test]
fn dry_run_prints_ssh_and_scp_and_touches_nothing() {
    let sb = fleet_dir(55, &["h1", "h2"]);
    let before: Vec<_> = walk(sb.path());
    let run = sb.mx_env(
        &["start", "--dry-run", "--user", "ops"],
        &[
            ("MX_SSH", "ssh -F lab_config"),
            ("MX_SCP", "scp -F lab_config"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Exactly the options the real run uses, connection sharing included.
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let shared = format!(
        "-o 'ControlMaster=auto' -o 'ControlPath={}/mx-ssh-{uid}/%C' -o 'ControlPersist=60s'",
        std::env::temp_dir().display()
    );
    let options = format!(
        "-o 'BatchMode=yes' -o 'ConnectTimeout=8' -o 'ServerAliveInterval=5' -o 'ServerAliveCountMax=3' {shared}"
    );
    assert!(
        run.stdout.contains(&format!(
            "DRY-RUN ssh -F lab_config {options} ops@127.55.0.1 "
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains(&format!("DRY-RUN scp -F lab_config {options} -q ")),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("ops@127.55.0.2:/var/tmp/mx/"));
    assert_eq!(walk(sb.path()), before, "dry run wrote files");
    let run = sb.mx(&["stop", "--dry-run"]);
    assert_eq!(run.code, 0);
    assert!(
        run.stdout
            .contains(&format!("DRY-RUN ssh {options} 127.55.0.1 ")),
        "{}",
        run.stdout
    );
    // A user's ssh that manages its own connections is left to do so.
    let run = sb.mx_env(
        &["stop", "--dry-run"],
        &[("MX_SSH", "ssh -o ControlMaster=no")],
    );
    assert!(
        run.stdout.contains(
            "DRY-RUN ssh -o 'ControlMaster=no' -o 'BatchMode=yes' -o 'ConnectTimeout=8' -o 'ServerAliveInterval=5' -o 'ServerAliveCountMax=3' 127.55.0.1 "
        ),
        "{}",
        run.stdout
    );

    // The local transport rehearses too: the scripts it would run, and
    // where, and nothing started, made or copied.
    for cmd in [
        &["start", "--interval", "1"][..],
        &["status"],
        &["stop"],
        &["collect"],
        &["clean"],
    ] {
        let run = sb.mx(&[cmd, &["--local", "hosts", "--dry-run"][..]].concat());
        assert_eq!(run.code, 0, "{cmd:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains(&format!(
                "  h2  DRY-RUN mkdir -p {root}/h2 && cd {root}/h2 && sh -c '",
                root = sb.file("hosts").display()
            )) || cmd == ["collect"],
            "{cmd:?}: {}",
            run.stdout
        );
        assert_eq!(walk(sb.path()), before, "{cmd:?} --dry-run wrote files");
        assert!(agents_under(sb.path()).is_empty(), "{cmd:?} started agents");
    }
    let run = sb.mx(&["start", "--local", "hosts", "--dry-run"]);
    let copy = run
        .stdout
        .lines()
        .find(|l| l.starts_with("  h1  DRY-RUN cp "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(
        copy.ends_with(&format!(
            "/matrix.csv {}/h1/var/tmp/mx/",
            sb.file("hosts").display()
        )),
        "{copy}"
    );
    let run = sb.mx(&["collect", "--local", "hosts", "--dry-run"]);
    assert!(
        run.stdout.contains(&format!(
            "  h1  DRY-RUN cp {}/h1/var/tmp/mx/report.csv reports/.h1.csv.part",
            sb.file("hosts").display()
        )),
        "{}",
        run.stdout
    );
}

#[test]
fn agent_fleet_run_holds_summarizes_and_stops() {
    let sb = fleet_dir(56, &["h1", "h2"]);
    let run = sb.mx(&[
        "run",
        "--local",
        "hosts",
        "--for",
        "4",
        "--interval",
        "1",
        "--window",
        "2",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("[mx] running for 4s -- ctrl-c ends every flow at once and summarizes what ran (twice: gives up waiting)")
    );
    assert!(
        run.stdout
            .contains("mx summarize -- 4s steady, 2 hosts, 2 flows"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("LOSS              0.00%"),
        "one start and one end: no edge reads as loss\n{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("[mx] every agent ended at"),
        "{}",
        run.stdout
    );
    assert!(
        agents_under(&sb.file("hosts")).is_empty(),
        "run stops the agents"
    );
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}

#[test]
fn agent_fleet_start_refuses_a_dwell_off_the_interval_and_resolves_names_first() {
    let sb = Sandbox::new();
    sb.write(
        "servers.txt",
        "h1=127.57.0.1\nh2=127.57.0.2\nh3=127.57.0.3\nh4=127.57.0.4\n",
    );
    assert_eq!(
        sb.mx(&["gen", "--peers", "1", "--dwell", "4", "--seed", "1"])
            .code,
        0
    );
    let run = sb.mx(&["start", "--local", "hosts", "--interval", "3"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "mx: layered matrix: dwell 4s must be a whole multiple of --interval (3s) so layer switches land on report ticks. Try --interval 4.\n"
    );
    assert!(
        !sb.file("hosts").exists(),
        "refused before anything was copied"
    );
    // Host names are resolved on the controller: the agents get addresses.
    sb.write("servers.txt", "h1=localhost\nh2=127.57.0.2\n");
    assert_eq!(sb.mx(&["gen", "--pps", "100"]).code, 0);
    let run = sb.mx(&[
        "start",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--duration",
        "1",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let deployed = sb.read("hosts/h2/var/tmp/mx/matrix.csv");
    assert!(deployed.contains("h1=127.0.0.1:5300"), "{deployed}");
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}

/// `mx doctor --local hosts` with `args`, its hard (and soft) open-file
/// limit `limit`, as every host it probes then has: exit code and stdout.
fn doctor_under_fd_limit(sb: &Sandbox, limit: u64, args: &[&str]) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mx"));
    cmd.current_dir(sb.path())
        .args(["doctor", "--local", "hosts"])
        .args(args);
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn doctor_flags_a_hard_fd_limit_below_the_run() {
    let sb = fleet_dir(58, &["h1", "h2", "h3"]);
    let (code, text) = doctor_under_fd_limit(&sb, 60, &[]);
    assert_eq!(code, Some(0), "markers do not fail doctor: {text}");
    // 2 flows + 64 spare descriptors > 60.
    assert!(text.contains("  h1  arch=x86_64; cores="), "{text}");
    assert!(
        text.contains("nofile_hard=60 FDS-TOO-LOW(need>66)"),
        "{text}"
    );
    assert!(text.contains("have a hard open-file limit below the run's need"));
}

#[test]
fn doctor_counts_the_disk_threads_handles_at_the_depth_given() {
    let sb = fleet_dir_with(88, &["h1", "h2"], &DISK_GEN);
    let line = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("  h1  arch="))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    // One flow a host, so min(cores, 2) workers (mx start's default), each
    // with 2 handles per disk thread and an eventfd, beside 1 socket and
    // 64 spares.
    let (_, shallow) = doctor_under_fd_limit(&sb, 200, &[]);
    let cores: u64 = line(&shallow)
        .split("cores=")
        .nth(1)
        .and_then(|t| t.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{shallow}"));
    let workers = cores.min(2);
    let need = |depth: u64| 1 + workers * (2 * depth + 1) + 64;
    assert!(need(1) < 200);
    assert!(!line(&shallow).contains("FDS-TOO-LOW"), "{shallow}");
    let (_, deep) = doctor_under_fd_limit(&sb, 200, &["--disk-depth", "64"]);
    assert!(
        line(&deep).contains(&format!("nofile_hard=200 FDS-TOO-LOW(need>{})", need(64))),
        "{deep}"
    );
    assert!(deep.contains("have a hard open-file limit below the run's need"));
}

#[test]
fn status_watch_refreshes() {
    let sb = fleet_dir(59, &["h1", "h2"]);
    let watch = |seconds: u64| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mx"))
            .current_dir(sb.path())
            .args(["status", "--local", "hosts", "--watch", "1"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(seconds * 1000 + 500));
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let text = watch(2);
    assert!(text.matches("mx status -- ").count() >= 2, "{text}");
    assert!(text.contains("(every 1s, ctrl-c to stop)"));
    assert!(text.matches("h1  NOT-DEPLOYED").count() >= 2);
    // Not a terminal: no screen to clear, the looks one after another.
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(text.contains("\n\nmx status -- "), "{text}");

    // Rows every 5 s, looks every second: a row seen before is said to be.
    let start = sb.mx(&["start", "--local", "hosts", "--interval", "5"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let began = std::time::Instant::now();
    while !sb.read("hosts/h1/var/tmp/mx/agent.log").contains(" tx=") {
        assert!(began.elapsed() < Duration::from_secs(20), "no row yet");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mx"))
        .current_dir(sb.path())
        .args(["status", "--local", "hosts", "--watch", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read until a look says so (bounded: a loaded machine looks slowly).
    let mut h1 = Vec::new();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if line.starts_with("  h1  ") {
            let done = line.contains("(unchanged since the last look)");
            h1.push(line);
            if done {
                break;
            }
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert!(h1.len() >= 2, "{h1:#?}");
    assert!(!h1[0].contains("unchanged"), "the first look: {h1:#?}");
    assert!(
        h1.last()
            .unwrap()
            .contains("s ago (unchanged since the last look): tx="),
        "{h1:#?}"
    );
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}

#[test]
fn clean_and_start_leave_a_directory_mx_did_not_make_alone() {
    let sb = fleet_dir(56, &["h1", "h2"]);
    // On h1, the remote dir already holds someone's files.
    let theirs = sb.file("hosts/h1/srv/data");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("precious.txt"), "keep me").unwrap();
    let local = ["--local", "hosts", "--remote-dir", "/srv/data"];
    let clean = sb.mx(&[&["clean", "--yes"][..], &local].concat());
    assert_eq!(clean.code, 1, "{}", clean.stdout);
    assert!(
        clean
            .stdout
            .contains("hosts/h1/srv/data was not made by mx (no .mx-remote-dir in it): left alone"),
        "{}",
        clean.stdout
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("precious.txt")).unwrap(),
        "keep me"
    );
    let start = sb.mx(&[&["start", "--interval", "1"][..], &local].concat());
    assert_eq!(start.code, 1, "{}", start.stdout);
    assert!(
        start.stdout.contains(
            "hosts/h1/srv/data holds files mx did not put there -- choose another --remote-dir"
        ),
        "{}",
        start.stdout
    );
    assert_eq!(
        std::fs::read_dir(&theirs).unwrap().count(),
        1,
        "nothing copied in"
    );
    // A directory mx made (h2's, on a start elsewhere) is cleaned as before.
    let ours = ["--local", "hosts", "--remote-dir", "/var/tmp/mx-owned"];
    assert_eq!(
        sb.mx(&[&["start", "--interval", "1"][..], &ours].concat())
            .code,
        0
    );
    assert!(sb.file("hosts/h2/var/tmp/mx-owned/.mx-remote-dir").exists());
    assert_eq!(sb.mx(&[&["clean", "--yes"][..], &ours].concat()).code, 0);
    assert!(!sb.file("hosts/h2/var/tmp/mx-owned").exists());
}

/// The seconds after "disagree by " in `text`.
fn disagreement(text: &str) -> f64 {
    let at = text
        .find("the hosts' clocks disagree by ")
        .unwrap_or_else(|| panic!("{text}"))
        + "the hosts' clocks disagree by ".len();
    text[at..].split('s').next().unwrap().parse().unwrap()
}

/// A PATH whose `date +%s.%N` runs `seconds` fast on local host `host` (its
/// scripts run in hosts/<host>), as a host with a wrong clock would answer.
fn skewed_clock(sb: &Sandbox, host: &str, seconds: f64) -> String {
    let bin = sb.file("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let date = bin.join("date");
    std::fs::write(
        &date,
        format!(
            "#!/bin/sh\n\
             case \"$PWD/\" in */hosts/{host}/*) if [ \"$1\" = \"+%s.%N\" ]; then t=$(/bin/date +%s.%N); awk -v t=\"$t\" 'BEGIN {{ printf \"%.9f\\n\", t + {seconds} }}'; exit 0; fi ;; esac\n\
             exec /bin/date \"$@\"\n"
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&date)
        .status()
        .unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

#[test]
fn doctor_measures_each_hosts_clock_and_flags_one_that_is_off() {
    let sb = fleet_dir(59, &["h1", "h2", "h3"]);
    let path = skewed_clock(&sb, "h2", 0.4);
    let run = sb.mx_env(&["doctor", "--local", "hosts"], &[("PATH", &path)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let line = |h: &str| {
        run.stdout
            .lines()
            .find(|l| l.starts_with(&format!("  {h}  ")))
            .unwrap_or_else(|| panic!("{h}: {}", run.stdout))
            .to_string()
    };
    // The offset, as measured over the transport: `clock=+0.012s`.
    let clock = |h: &str| -> f64 {
        let l = line(h);
        let at = l.find("; clock=").unwrap_or_else(|| panic!("{l}")) + "; clock=".len();
        l[at..].split('s').next().unwrap().parse().unwrap()
    };
    assert!(clock("h1").abs() < 0.05, "{}", line("h1"));
    assert!(!line("h1").contains("CLOCK-OFF"), "{}", line("h1"));
    assert!((clock("h2") - 0.4).abs() < 0.05, "{}", line("h2"));
    assert!(line("h2").contains(" CLOCK-OFF(+0."), "{}", line("h2"));
    assert!(
        run.stdout.contains(
            "[mx] 1 host(s) more than 0.25s off this machine's clock (h2): `mx start` will widen"
        ),
        "{}",
        run.stdout
    );
    // Further off than a report can absorb: not ready.
    let path = skewed_clock(&sb, "h3", 2.0);
    let run = sb.mx_env(&["doctor", "--local", "hosts"], &[("PATH", &path)]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("[mx] the hosts' clocks disagree by "),
        "{}",
        run.stdout
    );
    assert!(
        (disagreement(&run.stdout) - 2.0).abs() < 0.05,
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("fleet looks ready"), "{}", run.stdout);
}

#[test]
fn agent_fleet_start_widens_its_margins_for_a_clock_off_and_refuses_one_far_off() {
    let sb = fleet_dir(60, &["h1", "h2", "h3"]);
    let path = skewed_clock(&sb, "h2", 0.4);
    let start = sb.mx_env(
        &["start", "--local", "hosts", "--interval", "1"],
        &[("PATH", &path)],
    );
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert!(
        start.stdout.contains("[mx] h2's clock is +0.3")
            || start.stdout.contains("[mx] h2's clock is +0.4"),
        "{}",
        start.stdout
    );
    assert!(
        start.stdout.contains("the start margin is widened to"),
        "{}",
        start.stdout
    );
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
    // Two seconds off: refused before anything is sent, the armed agents stopped.
    let path = skewed_clock(&sb, "h2", 2.0);
    let start = sb.mx_env(
        &["start", "--local", "hosts", "--interval", "1"],
        &[("PATH", &path)],
    );
    assert_eq!(start.code, 2, "{}{}", start.stdout, start.stderr);
    assert!(
        start
            .stderr
            .starts_with("mx: the hosts' clocks disagree by "),
        "{}",
        start.stderr
    );
    assert!(
        (disagreement(&start.stderr) - 2.0).abs() < 0.05,
        "{}",
        start.stderr
    );
    assert!(start.stderr.contains("fix time sync"), "{}", start.stderr);
    assert!(
        agents_under(&sb.file("hosts")).is_empty(),
        "no agent is left armed"
    );
    for h in ["h1", "h2", "h3"] {
        let report = sb.file(&format!("hosts/{h}/var/tmp/mx/report.csv"));
        let rows = std::fs::read_to_string(&report).unwrap_or_default();
        assert!(rows.lines().count() <= 1, "{h} sent nothing: {rows}");
    }
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}

/// `text` with the sandbox's path written `<sandbox>`, for golden files.
fn portable(sb: &Sandbox, text: &str) -> String {
    let real = std::fs::canonicalize(sb.path()).unwrap();
    text.replace(&sb.path().display().to_string(), "<sandbox>")
        .replace(&real.display().to_string(), "<sandbox>")
}

#[test]
fn status_and_summarize_exit_1_when_a_host_cannot_be_reached() {
    let sb = fleet_dir(61, &["h1", "h2"]);
    // Hosts that answer, deployed or not, are a status: exit 0.
    let status = sb.mx(&["status", "--local", "hosts"]);
    assert_eq!(status.code, 0, "{}", status.stdout);
    assert!(
        status.stdout.contains("  h2  NOT-DEPLOYED"),
        "{}",
        status.stdout
    );
    // h2's sandbox cannot be entered: h2 cannot be reached.
    std::fs::remove_dir_all(sb.file("hosts/h2")).unwrap();
    std::fs::write(sb.file("hosts/h2"), "").unwrap();
    let status = sb.mx(&["status", "--local", "hosts"]);
    assert_eq!(status.code, 1, "{}", status.stdout);
    assert!(
        status.stdout.contains("  h1  NOT-DEPLOYED"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.ends_with("[mx] FAILED on 1/2 hosts: h2\n"),
        "{}",
        status.stdout
    );
    // Nothing collected from any host, nothing to summarize: a problem
    // found (exit 1), not bad input.
    let summary = sb.mx(&["summarize", "--local", "hosts"]);
    assert_eq!(summary.code, 1, "{}{}", summary.stdout, summary.stderr);
    assert!(
        summary.stdout.contains("[mx] FAILED on 2/2 hosts: h1 h2"),
        "{}",
        summary.stdout
    );
    assert_eq!(
        summary.stderr,
        "mx: no reports in reports/ -- is the run started? (mx status)\n"
    );
}

#[test]
fn start_run_and_the_agent_refuse_the_same_flags_with_the_same_words() {
    let sb = fleet_dir(62, &["h1", "h2"]);
    for (flags, refusal) in [
        (
            &["--interval", "0"][..],
            "--interval must be a positive number of seconds (got 0)",
        ),
        (
            &["--interval", "-1"],
            "--interval must be a positive number of seconds (got -1)",
        ),
        (
            &["--interval", "nan"],
            "--interval must be a positive number of seconds (got nan)",
        ),
        (
            &["--duration", "-5"],
            "--duration must be 0 (run until stopped) or a number of seconds (got -5)",
        ),
        (
            &["--workers", "0"],
            "--workers must be at least 1, or 'auto' (got 0)",
        ),
        (
            &["--workers", "-2"],
            "--workers must be at least 1, or 'auto' (got -2)",
        ),
        (&["--streams", "0"], "--streams must be at least 1"),
        (&["--streams", "-1"], "--streams must be at least 1"),
        (
            &["--streams", "257"],
            "--streams above 256 is almost certainly a mistake (got 257)",
        ),
        (
            &["--sndbuf", "-1"],
            "--sndbuf must be 0 (the kernel's default) or a number of bytes (got -1)",
        ),
        (
            &["--rcvbuf", "-4096"],
            "--rcvbuf must be 0 (sized for the packets) or a number of bytes (got -4096)",
        ),
        (
            &["--disk-depth", "0"],
            "--disk-depth must be 1 to 256 disk operations in flight per worker (got 0)",
        ),
        (
            &["--disk-depth", "1000"],
            "--disk-depth must be 1 to 256 disk operations in flight per worker (got 1000)",
        ),
    ] {
        let want = format!("mx: {refusal}\n");
        for cmd in ["start", "run"] {
            let run = sb.mx(&[&[cmd, "--local", "hosts"][..], flags].concat());
            assert_eq!(run.code, 2, "{cmd} {flags:?}: {}{}", run.stdout, run.stderr);
            assert_eq!(run.stderr, want, "{cmd} {flags:?}");
            assert_eq!(run.stdout, "", "{cmd} {flags:?}");
            assert!(
                !sb.file("hosts").exists(),
                "{cmd} {flags:?}: nothing copied"
            );
        }
        let agent = sb.mx(&[&["agent", "--host", "h1"][..], flags].concat());
        assert_eq!(agent.code, 2, "agent {flags:?}");
        assert_eq!(agent.stderr, want, "agent {flags:?}");
    }
    let agent = sb.mx(&["agent", "--host", "h1", "--grace", "-1"]);
    assert_eq!(agent.code, 2);
    assert_eq!(
        agent.stderr,
        "mx: --grace must be 0 or a number of seconds (got -1)\n"
    );
    // doctor takes --disk-depth for its fd check, refused alike before any
    // host is asked.
    for depth in ["0", "1000"] {
        let doctor = sb.mx(&["doctor", "--local", "hosts", "--disk-depth", depth]);
        assert_eq!(doctor.code, 2, "{}{}", doctor.stdout, doctor.stderr);
        assert_eq!(
            doctor.stderr,
            format!(
                "mx: --disk-depth must be 1 to 256 disk operations in flight per worker (got {depth})\n"
            )
        );
        assert_eq!(doctor.stdout, "");
    }
}

/// Edits host `host`'s row of the sandbox's matrix.csv: its cells `from` -> `to`.
fn edit_row(sb: &Sandbox, host: &str, from: &str, to: &str) {
    let matrix = sb.read("matrix.csv");
    let edited: String = matrix
        .split_inclusive('\n')
        .map(|l| {
            if l.starts_with(&format!("{host}=")) {
                l.replace(from, to)
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_ne!(edited, matrix);
    sb.write("matrix.csv", &edited);
}

/// `text` with the time after "begin together at " as `HH:MM:SS`.
fn without_clock(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once(" begin together at ") {
            Some((head, _)) => format!("{head} begin together at HH:MM:SS\n"),
            None => format!("{line}\n"),
        })
        .collect()
}

#[test]
fn agent_fleet_reload_of_a_stopped_fleet_says_so_and_starts_every_host_at_one_instant() {
    let sb = fleet_dir(66, &["h1", "h2", "h3"]);
    let local = ["--local", "hosts"];
    let start = sb.mx(&[&["start", "--interval", "1"][..], &local].concat());
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert_eq!(sb.mx(&[&["stop"][..], &local].concat()).code, 0);
    let reload = sb.mx(&[&["reload"][..], &local].concat());
    assert_eq!(reload.code, 0, "{}{}", reload.stdout, reload.stderr);
    // Said first, before any host is touched.
    let lines: Vec<&str> = reload.stdout.lines().collect();
    assert!(
        lines[1].starts_with(
            "[mx] no agent runs on any host: reload starts every host of the matrix, together"
        ),
        "{}",
        reload.stdout
    );
    assert!(
        reload.stdout.contains("[mx] 3 host(s) begin together at "),
        "{}",
        reload.stdout
    );
    // One start instant, written to every host: no host on its own.
    let instants: Vec<String> = ["h1", "h2", "h3"]
        .iter()
        .map(|h| sb.read(&format!("hosts/{h}/var/tmp/mx/agent.start")))
        .collect();
    assert!(instants.iter().all(|i| *i == instants[0]), "{instants:?}");
    for h in ["h1", "h2", "h3"] {
        let log = sb.read(&format!("hosts/{h}/var/tmp/mx/agent.log"));
        assert!(log.contains("all hosts together"), "{h}: {log}");
    }
    // The summary names the restart as reload's, at its instant: never a
    // host that came up late.
    let begin = reload
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("[mx] 3 host(s) begin together at "))
        .expect("the instant")
        .to_string();
    // Two steady intervals past the instant in every report (the reports
    // are kept: count from what they held when reload returned).
    let reports: Vec<std::path::PathBuf> = ["h1", "h2", "h3"]
        .iter()
        .map(|h| sb.file(&format!("hosts/{h}/var/tmp/mx/report.csv")))
        .collect();
    let held: Vec<usize> = reports
        .iter()
        .map(|p| crate::util::steady_intervals(p))
        .collect();
    crate::util::wait_for(
        "two steady intervals after the reload",
        Duration::from_secs(30),
        || {
            let now: Vec<usize> = reports
                .iter()
                .map(|p| crate::util::steady_intervals(p))
                .collect();
            match now.iter().zip(&held).all(|(n, h)| *n >= h + 2) {
                true => Ok(()),
                false => Err(format!("{held:?} -> {now:?}")),
            }
        },
    );
    let summary = sb.mx(&[&["summarize"][..], &local].concat());
    assert_eq!(summary.code, 0, "{}{}", summary.stdout, summary.stderr);
    let want = format!("; h1, h2, h3 restarted by reload at {begin} (the reload's edges");
    assert!(summary.stdout.contains(&want), "{want}: {}", summary.stdout);
    assert!(
        !summary.stdout.contains("came up late"),
        "{}",
        summary.stdout
    );
    assert_eq!(sb.mx(&[&["stop"][..], &local].concat()).code, 0);
}

#[test]
fn agent_fleet_reload_says_what_each_host_was_and_refuses_a_stamp_no_agent_could_run() {
    let sb = fleet_dir(63, &["h1", "h2"]);
    let local = ["--local", "hosts"];
    let start = sb.mx(&[&["start", "--interval", "1"][..], &local].concat());
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    // h2 sends h1 more: h2 restarts; h1 re-reads what it answers, runs on.
    edit_row(&sb, "h2", ",1000", ",1500");
    let reload = sb.mx(&[&["reload"][..], &local].concat());
    assert_eq!(reload.code, 0, "{}{}", reload.stdout, reload.stderr);
    crate::util::assert_golden("fleet_reload.stdout", &without_clock(&reload.stdout));

    // A stamp no agent could start with (edited by hand, or from another
    // tool): refused before anything is copied, in the agent's own words.
    let stamp = sb.file("hosts/h1/var/tmp/mx/agent.stamp");
    let text = std::fs::read_to_string(&stamp).unwrap();
    std::fs::write(
        &stamp,
        text.replace("flags=--interval 1", "flags=--interval 1 --streams 0"),
    )
    .unwrap();
    let deployed = sb.read("hosts/h1/var/tmp/mx/matrix.csv");
    edit_row(&sb, "h1", ",1000", ",1200");
    let reload = sb.mx(&[&["reload"][..], &local].concat());
    assert_eq!(reload.code, 2, "{}{}", reload.stdout, reload.stderr);
    assert_eq!(
        reload.stderr,
        "mx: h1's agent.stamp (flags=--interval 1 --streams 0) cannot start an agent: --streams must be at least 1\n"
    );
    assert_eq!(sb.read("hosts/h1/var/tmp/mx/matrix.csv"), deployed);
    assert_eq!(agents_under(&sb.file("hosts")).len(), 2, "both run on");
    assert_eq!(sb.mx(&[&["clean", "-y"][..], &local].concat()).code, 0);
}

#[test]
fn stop_and_clean_say_what_is_true_and_name_the_way_back_to_this_fleet() {
    let sb = fleet_dir(64, &["h1", "h2"]);
    assert_eq!(sb.mx(&["gen", "--pps", "1000", "-o", "m2.csv"]).code, 0);
    let fleet = [
        "--local",
        "hosts",
        "--matrix",
        "m2.csv",
        "--remote-dir",
        "/srv/mx run",
    ];
    let with = |cmd: &[&'static str]| [cmd, &fleet[..]].concat();
    // Never deployed: nothing there to collect.
    let stop = sb.mx(&with(&["stop"]));
    assert_eq!(stop.code, 0, "{}", stop.stdout);
    crate::util::assert_golden("stop_never_deployed.stdout", &portable(&sb, &stop.stdout));
    // Deployed on h1 only (a directory mx made, no agent in it).
    let dir = sb.file("hosts/h1/srv/mx run");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".mx-remote-dir"), "").unwrap();
    let stop = sb.mx(&with(&["stop"]));
    assert_eq!(stop.code, 0, "{}", stop.stdout);
    crate::util::assert_golden("stop_partly_deployed.stdout", &portable(&sb, &stop.stdout));
    // No terminal to confirm on: nothing done, and what works instead.
    let clean = sb.mx(&with(&["clean"]));
    assert_eq!(clean.code, 1, "{}", clean.stdout);
    crate::util::assert_golden(
        "clean_without_a_terminal.stdout",
        &portable(&sb, &clean.stdout),
    );
    assert!(dir.exists());
    // An answer piped in that is not `yes` is the answer, not a missing one.
    let clean = sb.mx_input(&with(&["clean"]), "no\n");
    assert_eq!(clean.code, 1, "{}", clean.stdout);
    assert!(
        clean.stdout.ends_with(
            "[mx] nothing done (exit status 1: not confirmed): standard input answered 'no', and only 'yes' cleans -- \
             `mx clean --local hosts --matrix m2.csv --remote-dir '/srv/mx run' --yes` cleans without asking\n"
        ),
        "{}",
        clean.stdout
    );
    assert!(dir.exists());
    // A `yes` piped in is an answer, as it always was.
    let clean = sb.mx_input(&with(&["clean"]), "yes\n");
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    assert!(
        clean.stdout.contains("  h1  clean (was: not-running)"),
        "{}",
        clean.stdout
    );
    assert!(!dir.exists());
    // The way out that clean named works as typed.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".mx-remote-dir"), "").unwrap();
    let typed = sb
        .mx(&with(&["clean"]))
        .stdout
        .lines()
        .last()
        .and_then(|l| l.split('`').nth(1).map(str::to_string))
        .unwrap();
    let clean = typed_in(&sb, &typed);
    assert_eq!(clean.code, 0, "{typed}\n{}{}", clean.stdout, clean.stderr);
    assert!(!dir.exists(), "{typed}");
}

/// `mx gen` flags for a small disk matrix: every reply's 4 KiB payload read
/// from the responder's disk and written to the requester's.
const DISK_GEN: [&str; 6] = ["--pps", "200", "--disk", "replies", "--rx-size", "4096"];

/// Host `host`'s data file in the default remote dir, and its size if there.
fn data_file(sb: &Sandbox, host: &str) -> Option<u64> {
    let path = sb.file(&format!("hosts/{host}/var/tmp/mx/disk.dat"));
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// Where `line` starts in `text`, which must hold it.
fn at(text: &str, line: &str) -> usize {
    text.find(line)
        .unwrap_or_else(|| panic!("no {line:?} in:\n{text}"))
}

#[test]
fn agent_fleet_disk_files_are_written_before_any_agent_starts_kept_by_stop_removed_by_clean() {
    let sb = fleet_dir_with(65, &["h1", "h2", "h3"], &DISK_GEN);
    let local = ["--local", "hosts"];
    let start = sb.mx(&[
        &["start", "--interval", "1", "--disk-size", "2M"][..],
        &local,
    ]
    .concat());
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let out = &start.stdout;
    // Every host's file written, and said so, before any agent is launched.
    let prepare = at(
        out,
        "[mx] disk: preparing a 2.0 MiB data file (written once, reused by later runs) on 3 hosts\n",
    );
    let launch = at(out, "[mx] starting agents on 3 hosts\n");
    assert!(at(out, "[mx] deploying agent + matrix on 3 hosts\n") < prepare);
    for h in ["h1", "h2", "h3"] {
        let wrote = at(out, &format!("  {h}  disk: wrote 2.0 MiB to disk.dat in "));
        assert!(prepare < wrote && wrote < launch, "{out}");
        assert_eq!(data_file(&sb, h), Some(2 << 20), "{h}");
        // So each agent found its file there when it started.
        let log = sb.read(&format!("hosts/{h}/var/tmp/mx/agent.log"));
        assert!(
            log.contains("disk: reusing disk.dat (2.0 MiB, already prepared)"),
            "{h}: {log}"
        );
        assert!(!log.contains("disk: wrote"), "{h}: {log}");
    }
    assert!(
        out.contains("[mx] running: 3 hosts, 6 flows, 64 -> 4096 bytes, 1.2 kpps, disk=replies\n"),
        "{out}"
    );
    let stop = sb.mx(&[&["stop"][..], &local].concat());
    assert_eq!(stop.code, 0, "{}", stop.stdout);
    assert!(
        stop.stdout.ends_with(
            "[mx]   mx clean --local hosts       # delete every trace\n\
             [mx] so is each host's disk.dat data file, which the next start reuses; mx clean --local hosts removes it too\n"
        ),
        "{}",
        stop.stdout
    );
    assert_eq!(data_file(&sb, "h2"), Some(2 << 20), "stop keeps it");
    // `mx run` prepares the same way, finds the files kept, and says they stay.
    let run = sb.mx(&[
        &["run", "--for", "2", "--interval", "1", "--disk-size", "2M"][..],
        &local,
    ]
    .concat());
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let reused = at(&run.stdout, "  h3  disk: reusing disk.dat (2.0 MiB");
    assert!(reused < at(&run.stdout, "[mx] starting agents on 3 hosts\n"));
    assert!(
        run.stdout.ends_with(
            "[mx] reports and logs stay on the hosts, and so does each host's disk.dat data file, which the next start reuses (mx clean --local hosts removes them)\n"
        ),
        "{}",
        run.stdout
    );
    let clean = sb.mx(&[&["clean", "--yes"][..], &local].concat());
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    for h in ["h1", "h2", "h3"] {
        assert_eq!(data_file(&sb, h), None, "{h}: clean removes it");
    }
}

#[test]
fn disk_size_a_bad_one_touches_nothing_and_a_file_too_big_starts_no_agent() {
    let sb = fleet_dir_with(66, &["h1", "h2"], &DISK_GEN);
    for cmd in ["start", "run"] {
        let run = sb.mx(&[cmd, "--local", "hosts", "--disk-size", "12Q"]);
        assert_eq!(run.code, 2, "{cmd}: {}{}", run.stdout, run.stderr);
        assert_eq!(
            run.stderr, "mx: --disk-size wants a size like 1G, 512M or 4096K (got '12Q')\n",
            "{cmd}"
        );
        assert_eq!(run.stdout, "", "{cmd}");
        assert!(!sb.file("hosts").exists(), "{cmd}: nothing copied");
    }
    // A size no filesystem here can hold: every host refuses it, with
    // nothing written, and no agent starts anywhere.
    let start = sb.mx(&[
        "start",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--disk-size",
        "500T",
    ]);
    assert_eq!(start.code, 1, "{}{}", start.stdout, start.stderr);
    assert!(
        start.stdout.contains(
            "  h2  mx: disk.dat: a 500.0 TiB data file would leave its filesystem all but full ("
        ),
        "{}",
        start.stdout
    );
    assert!(
        start.stdout.ends_with(
            "[mx] FAILED on 2/2 hosts: h1 h2\n\
             [mx] no agent was started: every host needs its data file first\n"
        ),
        "{}",
        start.stdout
    );
    assert!(
        !start.stdout.contains("starting agents"),
        "{}",
        start.stdout
    );
    assert!(agents_under(&sb.file("hosts")).is_empty());
    assert_eq!(data_file(&sb, "h1"), None);
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}

/// Whether `report` holds a host row whose disk columns (22 to 30) are all
/// filled in.
fn host_row_with_disk(report: &str) -> bool {
    report.lines().any(|row| {
        let cols: Vec<&str> = row.split(',').collect();
        cols.get(2) == Some(&"host")
            && cols.len() > 30
            && cols[21..30].iter().all(|c| !c.is_empty())
    })
}

#[test]
fn agent_fleet_reload_brings_disk_into_a_running_fleet_files_first() {
    let sb = fleet_dir_with(
        67,
        &["h1", "h2", "h3"],
        &["--pps", "200", "--rx-size", "4096"],
    );
    let local = ["--local", "hosts"];
    let start = sb.mx(&[
        &["start", "--interval", "1", "--disk-size", "2M"][..],
        &["--disk-depth", "4"],
        &local,
    ]
    .concat());
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert!(!start.stdout.contains("disk:"), "{}", start.stdout);
    assert_eq!(data_file(&sb, "h1"), None, "no disk, no file");
    // h3 was started with another size (as by a start of its own).
    let stamp = sb.file("hosts/h3/var/tmp/mx/agent.stamp");
    let text = std::fs::read_to_string(&stamp).unwrap();
    assert!(
        text.contains("flags=--interval 1 --disk-size 2M --disk-depth 4\n"),
        "{text}"
    );
    std::fs::write(&stamp, text.replace("--disk-size 2M", "--disk-size 3M")).unwrap();
    let regen = sb.mx(&[&["gen"][..], &DISK_GEN].concat());
    assert_eq!(regen.code, 0, "{}", regen.stderr);
    let reload = sb.mx(&[&["reload"][..], &local].concat());
    assert_eq!(reload.code, 0, "{}{}", reload.stdout, reload.stderr);
    let out = &reload.stdout;
    // Every host stopped and copied, then every file written (the size each
    // host was started with, off its stamp), then every agent launched.
    let deploy = at(
        out,
        "[mx] stopping, then deploying agent + matrix on 3 hosts\n",
    );
    let prepare = at(
        out,
        "[mx] disk: preparing each host's data file at the --disk-size it runs with (written once, reused by later runs) on 3 hosts\n",
    );
    let launch = at(out, "[mx] starting agents on 3 hosts\n");
    assert!(deploy < prepare && prepare < launch, "{out}");
    for (h, mib) in [("h1", 2), ("h2", 2), ("h3", 3)] {
        let wrote = at(
            out,
            &format!("  {h}  disk: wrote {mib}.0 MiB to disk.dat in "),
        );
        assert!(prepare < wrote && wrote < launch, "{out}");
        assert!(
            out.contains(&format!("  {h}  restarted (was running)\n")),
            "{out}"
        );
        assert_eq!(data_file(&sb, h), Some(mib << 20), "{h}");
    }
    assert!(
        out.contains("[mx] reloaded: 3 restarted, 0 left running\n"),
        "{out}"
    );
    // The agents run the disk matrix: their host rows fill the disk columns.
    let began = std::time::Instant::now();
    for h in ["h1", "h2", "h3"] {
        let report = format!("hosts/{h}/var/tmp/mx/report.csv");
        while !host_row_with_disk(&sb.read(&report)) {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "{h}: no host row with disk columns:\n{}",
                sb.read(&report)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // At the depth it was started with, which reload passed on.
        use crate::agents::RowExt;
        let rows = crate::agents::rows_of(&sb.read(&report));
        let depths: Vec<Option<f64>> = rows
            .iter()
            .filter(|r| r.s("dir") == "host" && r.f("disk_rd_iops").is_some())
            .map(|r| r.f("disk_depth"))
            .collect();
        assert!(
            !depths.is_empty() && depths.iter().all(|d| *d == Some(4.0)),
            "{h}: {depths:?}"
        );
        let log = sb.read(&format!("hosts/{h}/var/tmp/mx/agent.log"));
        assert!(log.contains("disk: reusing disk.dat ("), "{h}: {log}");
        assert!(!log.contains("disk: wrote"), "{h}: {log}");
    }
    assert_eq!(sb.mx(&[&["clean", "-y"][..], &local].concat()).code, 0);
}

/// A PATH whose `df` says local host `host` (its scripts run in
/// hosts/<host>) has `kib` KiB free, as a host with a small disk would.
fn small_disk(sb: &Sandbox, host: &str, kib: u64) -> String {
    let bin = sb.file("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let df = bin.join("df");
    std::fs::write(
        &df,
        format!(
            "#!/bin/sh\n\
             case \"$PWD/\" in */hosts/{host}/*) echo 'Filesystem 1024-blocks Used Available Capacity Mounted on'; echo '/dev/small 4194304 1 {kib} 1% /'; exit 0 ;; esac\n\
             exec /bin/df \"$@\"\n"
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&df)
        .status()
        .unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

#[test]
fn doctor_reports_each_hosts_disk_free_in_a_disk_run_and_flags_one_short_of_it() {
    let sb = fleet_dir_with(68, &["h1", "h2"], &DISK_GEN);
    // h2 has half a GiB free: too little for the default 1 GiB file.
    let path = small_disk(&sb, "h2", 512 * 1024);
    let run = sb.mx_env(&["doctor", "--local", "hosts"], &[("PATH", &path)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let line = |h: &str| {
        run.stdout
            .lines()
            .find(|l| l.starts_with(&format!("  {h}  ")))
            .unwrap_or_else(|| panic!("{h}: {}", run.stdout))
            .to_string()
    };
    assert!(
        line("h2").ends_with("; disk_free=0.5G DISK-SPACE-LOW(need>1G)"),
        "{}",
        line("h2")
    );
    // h1's is measured where its remote dir will be (its nearest parent
    // now: nothing is deployed yet).
    let h1 = line("h1");
    let free: f64 = h1
        .split("; disk_free=")
        .nth(1)
        .and_then(|v| {
            v.strip_suffix('G')
                .or_else(|| v.split_once("G ").map(|(g, _)| g))
        })
        .unwrap_or_else(|| panic!("{h1}"))
        .parse()
        .unwrap_or_else(|_| panic!("{h1}"));
    assert!(free > 0.0, "{h1}");
    assert_eq!(h1.contains("DISK-SPACE-LOW"), free < 1.1, "{h1}");
    assert!(
        run.stdout.contains(&format!(
            "[mx] {} host(s) have too little free space in {}/<host>/var/tmp/mx for a 1.0 GiB data file (mx start's default --disk-size): ",
            if free < 1.1 { 2 } else { 1 },
            sb.file("hosts").display()
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("fleet looks ready"), "{}", run.stdout);
    // A matrix without disk= asks nothing of the disks.
    assert_eq!(sb.mx(&["gen", "--pps", "200", "-o", "plain.csv"]).code, 0);
    let plain = sb.mx_env(
        &["doctor", "--local", "hosts", "--matrix", "plain.csv"],
        &[("PATH", &path)],
    );
    assert_eq!(plain.code, 0, "{}{}", plain.stdout, plain.stderr);
    assert!(!plain.stdout.contains("disk_free"), "{}", plain.stdout);
    assert!(!plain.stdout.contains("disk space"), "{}", plain.stdout);
}

#[test]
fn dry_run_shows_the_disk_prepare_step_and_touches_nothing() {
    let sb = fleet_dir_with(69, &["h1", "h2"], &DISK_GEN);
    let before = walk(sb.path());
    let run = sb.mx(&[
        "start",
        "--local",
        "hosts",
        "--dry-run",
        "--disk-size",
        "2M",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let out = &run.stdout;
    let prepare = at(
        out,
        "[mx] disk: preparing a 2.0 MiB data file (written once, reused by later runs) on 2 hosts\n",
    );
    let launch = at(out, "[mx] starting agents on 2 hosts\n");
    let command = at(
        out,
        &format!(
            "  h2  DRY-RUN {}/h2/var/tmp/mx/mx agent --prepare-disk --disk-size 2M",
            sb.file("hosts").display()
        ),
    );
    assert!(prepare < command && command < launch, "{out}");
    assert_eq!(walk(sb.path()), before, "dry run wrote files");
    // Through ssh, the same command in the remote dir; the default size
    // goes unsaid, as the agent's own default.
    let run = sb.mx(&["start", "--dry-run"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "[mx] disk: preparing a 1.0 GiB data file (written once, reused by later runs) on 2 hosts\n"
        ),
        "{}",
        run.stdout
    );
    let command = run
        .stdout
        .lines()
        .find(|l| l.starts_with("  h1  DRY-RUN /var/tmp/mx/mx agent --prepare-disk"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(!command.contains("--disk-size"), "{command}");
    assert_eq!(walk(sb.path()), before, "dry run wrote files");
    assert!(agents_under(sb.path()).is_empty());
}

#[test]
fn agent_fleet_lifecycle_over_ipv6_on_loopback() {
    // Three hosts on ::1 (a port each), through the local transport: gen,
    // check, start --bind lo (the IPv6 address of lo, as these hosts are
    // IPv6), status, summarize and export with IPv6 wire rates, stop, clean.
    let sb = Sandbox::new();
    sb.write("servers.txt", "h1=[::1]:5461\nh2=[::1]:5462\n[::1]:5463\n");
    let generated = sb.mx(&["gen", "--pps", "1000"]);
    assert_eq!(generated.code, 0, "{}", generated.stderr);
    // 2,000 requests of 64 bytes out of each host: 150 bytes each on the
    // wire over IPv6 (2.4 Mbps), where IPv4 would be 130 (2.1 Mbps).
    assert!(
        generated
            .stdout
            .contains("             2.4 Mbps out on the wire (1.0 Mbps payload)\n"),
        "{}",
        generated.stdout
    );
    assert!(
        sb.read("matrix.csv")
            .contains("src\\dst,h1=[::1]:5461,h2=[::1]:5462,[::1]:5463\r\n"),
        "{}",
        sb.read("matrix.csv")
    );
    let check = sb.mx(&["check", "--nic-gbps", "1"]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    assert!(
        check.stdout.starts_with(
            "matrix matrix.csv: 3 hosts, 6 flows, 64 bytes out -> 64 bytes back, port 5300, IPv6\n"
        ),
        "{}",
        check.stdout
    );
    // Each host sends 2,000 requests and answers 2,000: 4.8 Mbps each way.
    assert!(check.stdout.contains("4.8 Mbps"), "{}", check.stdout);

    let local = ["--local", "hosts"];
    let mx = |cmd: &[&str]| sb.mx(&[cmd, &local[..]].concat());
    let start = mx(&["start", "--interval", "1", "--bind", "lo"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert!(
        start.stdout.contains(
            "[mx] --bind 'lo': matrix retargeted at each host's matching address (0 of 3 changed)"
        ),
        "{}",
        start.stdout
    );
    assert_eq!(agents_under(&sb.file("hosts")).len(), 3);
    assert!(
        sb.read("hosts/::1/var/tmp/mx/agent.log")
            .contains("bind: 'lo' -> ::1 (lo)"),
        "{}",
        sb.read("hosts/::1/var/tmp/mx/agent.log")
    );

    crate::util::wait_for_steady(&local_reports(&sb, &["h1", "h2", "::1"], "mx"), 2);
    let status = mx(&["status"]);
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    for h in ["h1", "h2", "::1"] {
        assert!(
            status
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("  {h}  ")) && l.contains("s ago: tx=")),
            "{h}: {}",
            status.stdout
        );
    }
    let summary = mx(&["summarize", "--window", "2"]);
    assert_eq!(summary.code, 0, "{}{}", summary.stdout, summary.stderr);
    let text = &summary.stdout;
    assert!(text.contains("s steady, 3 hosts, 6 flows"), "{text}");
    // Requests of 64 bytes: 150 bytes (1,200 bits) each on the wire over
    // IPv6, where IPv4 would be 130 (1,040 bits).
    let bits = wire_bits_per_request(text);
    assert!(
        (1150.0..1250.0).contains(&bits),
        "{bits} bits a request: {text}"
    );
    assert_eq!(summary_words(text, "DELIVERED")[3], "100.00%", "{text}");
    assert!(sb.file("reports/::1.csv").exists());
    let export = mx(&["export", "--no-collect", "--window", "2", "-o", "-"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    // Its requests on the wire at 1,200 bits each, as the summary counts.
    let sample = |test: &str| -> f64 {
        let lead = format!("{test}\t::1\t");
        export
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(&lead))
            .and_then(|v| v.split('\t').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {lead}: {}", export.stdout))
    };
    let bits = sample("mx_request_gbps") * 1e9 / sample("mx_pps");
    assert!(
        (1195.0..1205.0).contains(&bits),
        "{bits}: {}",
        export.stdout
    );

    let stop = mx(&["stop"]);
    assert_eq!(stop.code, 0, "{}{}", stop.stdout, stop.stderr);
    assert!(agents_under(&sb.file("hosts")).is_empty());
    let clean = mx(&["clean", "--yes"]);
    assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    for h in ["h1", "h2", "::1"] {
        assert!(
            !sb.file(&format!("hosts/{h}/var/tmp/mx")).exists(),
            "{h} left a trace"
        );
    }
}

#[test]
fn agent_fleet_start_copies_the_agent_only_where_it_differs() {
    let sb = fleet_dir(64, &["h1", "h2"]);
    let deployed = |host: &str| sb.file(&format!("hosts/{host}/var/tmp/mx/mx"));
    let start = |extra: &[&str]| {
        let run = sb.mx(&[&["start", "--local", "hosts", "--interval", "1"][..], extra].concat());
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert_eq!(sb.mx(&["stop", "--local", "hosts"]).code, 0);
        run.stdout
    };
    let first = start(&[]);
    assert!(!first.contains("had this agent already"), "{first}");
    let inode = |host: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(deployed(host)).unwrap().ino()
    };
    let before = (inode("h1"), inode("h2"));
    // The same binary again: not copied (the file is the one already there),
    // the matrix is.
    sb.write("matrix.csv", &sb.read("matrix.csv").replace("1000", "900"));
    let again = start(&[]);
    assert!(
        again.contains("[mx] 2 of 2 hosts had this agent already (same sha256): only the matrix was copied there"),
        "{again}"
    );
    assert_eq!((inode("h1"), inode("h2")), before);
    assert!(sb.read("hosts/h1/var/tmp/mx/matrix.csv").contains("900"));
    // Another agent binary (this one with bytes appended: it still runs):
    // copied.
    let mut other = std::fs::read(env!("CARGO_BIN_EXE_mx")).unwrap();
    other.extend_from_slice(b"another build");
    std::fs::write(sb.file("other-mx"), &other).unwrap();
    std::fs::set_permissions(
        sb.file("other-mx"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let other_start = start(&["--agent", "other-mx"]);
    assert!(
        !other_start.contains("had this agent already"),
        "{other_start}"
    );
    assert_eq!(std::fs::read(deployed("h2")).unwrap(), other);
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}

/// A number the kernel keeps in /proc/sys/kernel.
fn kernel_number(name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Processes forked between two reads of the kernel's newest pid (all of
/// the machine's, so a bound, not an exact count), across a wrap at pid_max.
fn forked_since(before: u64) -> u64 {
    let after = kernel_number("ns_last_pid");
    if after >= before {
        after - before
    } else {
        after + kernel_number("pid_max") - before
    }
}

#[test]
fn agent_fleet_a_look_forks_the_same_on_a_host_running_two_thousand_processes() {
    // Looking for the agent among a host's processes must not fork once per
    // process: `run`'s live line looks every few seconds, and a look that
    // forks thousands of times steals the CPU of the agents it measures.
    let sb = fleet_dir(73, &["h1", "h2"]);
    let start = sb.mx(&["start", "--local", "hosts", "--interval", "1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let crowd: Vec<std::process::Child> = (0..2000)
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("120")
                .spawn()
                .unwrap()
        })
        .collect();
    let before = kernel_number("ns_last_pid");
    let status = sb.mx(&["status", "--local", "hosts"]);
    let forked = forked_since(before);
    for mut p in crowd {
        let _ = p.kill();
        let _ = p.wait();
    }
    assert_eq!(status.code, 0, "{}", status.stdout);
    // Both agents found among the crowd: each host's own line, none NOT-.
    // (Waiting for the start, or, on a VM slow to fork 2,000 sleeps, past it
    // and sending.)
    for host in ["h1", "h2"] {
        let line = format!("  {host}  ");
        assert!(
            status.stdout.lines().any(|l| l.starts_with(&line)
                && (l.contains("start: flows begin at") || l.contains(" ago: tx="))),
            "{host}:\n{}",
            status.stdout
        );
    }
    assert!(!status.stdout.contains("NOT-"), "{}", status.stdout);
    // Two hosts' scripts fork a few dozen times; once per process would be
    // 4,000 and more.
    assert!(forked < 400, "a look at 2 hosts forked {forked} processes");
    let stop = sb.mx(&["stop", "--local", "hosts"]);
    assert_eq!(stop.code, 0, "{}", stop.stdout);
    assert!(agents_under(&sb.file("hosts")).is_empty());
}

/// An ssh wrapper as chroot, container and sandbox wrappers are written: it
/// runs the command it is given in a directory of its own for each host,
/// rewriting the remote directory wherever the command names it, and logs
/// every command. `scp` likewise maps `host:path`.
fn path_mapping_wrappers(sb: &Sandbox, remote: &str) -> (String, String) {
    let root = sb.file("wrapped");
    let log = sb.file("calls.log");
    let ssh = format!(
        r#"#!/bin/bash
target=""
while [ $# -gt 0 ]; do
    case "$1" in
        -o) shift 2 ;;
        -*) shift ;;
        *) target="$1"; shift; break ;;
    esac
done
host="${{target#*@}}"
root="{root}/$host"
remote='{remote}'
mkdir -p "$root"
cmd="$*"
printf 'ssh\t%s\t%s\n' "$host" "$cmd" >> "{log}"
cmd="${{cmd//$remote/$root$remote}}"
cd "$root" && exec bash -c "$cmd"
"#,
        root = root.display(),
        log = log.display(),
    );
    let scp = format!(
        r#"#!/bin/bash
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -o) shift 2 ;;
        -q|-r|-B) shift ;;
        *) args+=("$1"); shift ;;
    esac
done
n=${{#args[@]}}
remap() {{
    case "$1" in
        *:*) h="${{1%%:*}}"; h="${{h#*@}}"; printf '%s\n' "{root}/$h${{1#*:}}" ;;
        *) printf '%s\n' "$1" ;;
    esac
}}
dst="$(remap "${{args[$((n-1))]}}")"
printf 'scp\t%s\n' "${{args[*]}}" >> "{log}"
case "$dst" in */) mkdir -p "$dst" ;; *) mkdir -p "$(dirname "$dst")" ;; esac
for s in "${{args[@]:0:$((n-1))}}"; do cp -f "$(remap "$s")" "$dst" || exit 1; done
"#,
        root = root.display(),
        log = log.display(),
    );
    std::fs::create_dir_all(sb.file("bin")).unwrap();
    sb.write("bin/ssh-wrap", &ssh);
    sb.write("bin/scp-wrap", &scp);
    for name in ["bin/ssh-wrap", "bin/scp-wrap"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(sb.file(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (
        sb.file("bin/ssh-wrap").display().to_string(),
        sb.file("bin/scp-wrap").display().to_string(),
    )
}

#[test]
fn agent_fleet_through_an_ssh_wrapper_that_maps_paths_lands_each_host_in_its_own_directory() {
    let sb = fleet_dir(74, &["alpha", "beta"]);
    // A directory no test machine has: were it not mapped, the run would
    // land there for real, both hosts in one directory.
    let remote = format!("/var/tmp/mx-wrapped-{}", std::process::id());
    let (ssh, scp) = path_mapping_wrappers(&sb, &remote);
    let env = [("MX_SSH", ssh.as_str()), ("MX_SCP", scp.as_str())];
    let fleet = |cmd: &[&str]| {
        sb.mx_env(
            &[cmd, &["--remote-dir", remote.as_str()][..]].concat(),
            &env,
        )
    };
    let dir_of = |addr: &str| sb.file(&format!("wrapped/{addr}{remote}"));

    let run = fleet(&[
        "start",
        "--interval",
        "1",
        "--duration",
        "60",
        "--streams",
        "2",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        !Path::new(&remote).exists(),
        "the wrapper's mapping was bypassed"
    );
    for addr in ["127.74.0.1", "127.74.0.2"] {
        for file in ["mx", "matrix.csv", "agent.pid", "agent.stamp"] {
            assert!(dir_of(addr).join(file).exists(), "{addr}: no {file}");
        }
    }
    assert_eq!(
        agents_under(&sb.file("wrapped")).len(),
        2,
        "one agent a host"
    );
    // Each step was its own call, its script on the wrapper's command line:
    // the launch's flags are there to see.
    let calls = sb.read("calls.log");
    for host in ["alpha", "beta"] {
        let launches: Vec<&str> = calls
            .split("\nssh\t")
            .filter(|call| call.contains(&format!(" agent --matrix matrix.csv --host {host} ")))
            .collect();
        assert_eq!(launches.len(), 1, "{calls}");
        assert!(launches[0].contains("--streams 2"), "{}", launches[0]);
    }
    assert!(
        !calls.contains("exec sh\n"),
        "a session was opened: {calls}"
    );

    // Both agents' first rows, as status reads them through the wrapper.
    crate::util::wait_for(
        "a row from each host in status",
        Duration::from_secs(30),
        || {
            let run = fleet(&["status"]);
            assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
            match run.stdout.matches("tx=").count() {
                2 => Ok(()),
                _ => Err(run.stdout),
            }
        },
    );
    let run = fleet(&["summarize", "--window", "30"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(sb.file("reports/alpha.csv").exists() && sb.file("reports/beta.csv").exists());

    let run = fleet(&["stop"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        agents_under(&sb.file("wrapped")).is_empty(),
        "an agent outlived stop"
    );
    assert!(
        dir_of("127.74.0.1").join("report.csv").exists(),
        "stop keeps the report"
    );
    let run = fleet(&["clean", "--yes"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    for addr in ["127.74.0.1", "127.74.0.2"] {
        assert!(!dir_of(addr).exists(), "{addr}: clean left its directory");
    }
}

#[test]
fn agent_fleet_stop_ends_agents_started_with_a_duration_at_its_own_instant() {
    let sb = fleet_dir(75, &["h1", "h2"]);
    let local = ["--local", "hosts"];
    let run = sb.mx(&[
        &["start", "--interval", "1", "--duration", "120"][..],
        &local,
    ]
    .concat());
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    std::thread::sleep(Duration::from_secs(2));
    let began = std::time::Instant::now();
    let run = sb.mx(&[&["stop"][..], &local].concat());
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // Each agent ended by itself at the stop's instant (its duration was
    // two minutes away), not when the stop gave up waiting and sent TERM.
    for host in ["h1", "h2"] {
        assert!(
            run.stdout.contains(&format!("  {host}  ended\n")),
            "{}",
            run.stdout
        );
    }
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    assert!(agents_under(&sb.file("hosts")).is_empty());
}

#[test]
#[ignore = "needs root: a directory another user owns (chown)"]
fn a_planted_ssh_control_directory_is_never_used_and_an_own_one_is_tightened() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    crate::util::require_root("planting a directory as another user");
    let sb = fleet_dir(76, &["h1", "h2"]);
    let tmp = sb.file("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let tmp_text = tmp.display().to_string();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let control = tmp.join(format!("mx-ssh-{uid}"));
    let status = || sb.mx_env(&["status"], &[("TMPDIR", tmp_text.as_str())]);
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;

    // Another user made it first, open to all: mx shares no connection
    // there, leaves it as it is, and says why.
    // The sandbox is this user's (0700): open it, as /tmp is.
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let other = crate::util::OtherUser::get();
    other.run(&["mkdir", "-m", "0777", &control.display().to_string()]);
    let run = status();
    assert!(
        run.stderr.contains(&format!(
            "mx: warning: not sharing ssh connections: {} belongs to another user (owner uid {}, mode 0777)",
            control.display(),
            other.uid
        )),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("not sharing ssh connections").count(),
        1,
        "said once"
    );
    assert_eq!(mode(&control), 0o777, "mx changed another user's directory");
    assert_eq!(
        std::fs::read_dir(&control).unwrap().count(),
        0,
        "a socket in another user's directory"
    );

    // A symlink to a directory: refused, nothing made through it.
    std::fs::remove_dir(&control).unwrap();
    let elsewhere = tmp.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &control).unwrap();
    let run = status();
    assert!(run.stderr.contains("is a symlink"), "{}", run.stderr);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // One an earlier mx left at 0755, this user's own: taken, and tightened.
    std::fs::remove_file(&control).unwrap();
    std::fs::create_dir(&control).unwrap();
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = status();
    assert!(!run.stderr.contains("not sharing"), "{}", run.stderr);
    assert_eq!(mode(&control), 0o700);
    assert_eq!(std::fs::metadata(&control).unwrap().uid(), uid);
}

#[test]
fn a_remote_directory_others_can_write_or_reached_through_a_symlink_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let sb = fleet_dir(77, &["h1", "h2"]);
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
    let start = |dir: &str| {
        sb.mx(&[
            "start",
            "--local",
            "hosts",
            "--interval",
            "1",
            "--remote-dir",
            dir,
        ])
    };
    let var_tmp = sb.file("hosts/h1/var/tmp");
    std::fs::create_dir_all(&var_tmp).unwrap();
    let shown = var_tmp.display().to_string();

    let open = var_tmp.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = start("/var/tmp/open");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "  h1  {shown}/open is writable by other users (owner "
        )) && run.stdout.contains(
            "mode 0777): any of them could replace the agent -- choose another --remote-dir"
        ),
        "{}",
        run.stdout
    );
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);

    let run = start("/var/tmp/open/mx");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "  h1  {shown}/open/mx is not safe: {shown}/open (owner "
        )),
        "{}",
        run.stdout
    );
    assert!(!open.join("mx").exists(), "made under an open parent");

    let elsewhere = sb.file("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, var_tmp.join("link")).unwrap();
    let run = start("/var/tmp/link");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains(&format!("  h1  {shown}/link is a symlink (owner ")),
        "{}",
        run.stdout
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // Nor is the agent staged on this machine where another user could
    // swap it on its way: a TMPDIR anyone can write, not sticky.
    let open_tmp = sb.file("open-tmp");
    std::fs::create_dir(&open_tmp).unwrap();
    std::fs::set_permissions(&open_tmp, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = sb.mx_env(
        &["start", "--local", "hosts", "--interval", "1"],
        &[("TMPDIR", &open_tmp.display().to_string())],
    );
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr.contains("cannot stage the agent safely: ")
            && run
                .stderr
                .contains(&format!("{} (owner uid ", open_tmp.display()))
            && run
                .stderr
                .contains("(set TMPDIR to a directory of your own)"),
        "{}",
        run.stderr
    );
    assert!(!sb.file("hosts/h1/var/tmp/mx").exists());

    // A fresh one is made 0700, its files 0600, the agent 0700.
    let run = start("/var/tmp/mx");
    assert_eq!(run.code, 0, "{}", run.stdout);
    for host in ["h1", "h2"] {
        let dir = sb.file(&format!("hosts/{host}/var/tmp/mx"));
        assert_eq!(mode(&dir), 0o700);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let want = if path.ends_with("mx") { 0o700 } else { 0o600 };
            assert_eq!(mode(&path), want, "{}", path.display());
        }
    }
    assert_eq!(sb.mx(&["stop", "--local", "hosts"]).code, 0);
    assert_eq!(sb.mx(&["clean", "--yes", "--local", "hosts"]).code, 0);
}

#[test]
fn agent_fleet_reports_of_another_matrix_are_refused_unless_told_which_to_trust() {
    // Run A (1000 pps per pair) on the hosts; B keeps another matrix
    // (1500 pps) for the same hosts and the same remote directory.
    let a = fleet_dir(67, &["h1", "h2"]);
    let hosts = a.file("hosts");
    let hosts = hosts.to_str().unwrap();
    let start = a.mx(&["start", "--local", hosts, "--interval", "1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    crate::util::wait_for_steady(&local_reports(&a, &["h1", "h2"], "mx"), 2);
    let b = fleet_dir_with(67, &["h1", "h2"], &["--pps", "1500"]);
    let summary = b.mx(&["summarize", "--local", hosts, "--window", "2"]);
    assert_eq!(summary.code, 2, "{}{}", summary.stdout, summary.stderr);
    assert!(
        summary.stderr.starts_with(
            "mx: the reports of h1, h2 in reports/ were written by agents running another matrix than matrix.csv"
        ),
        "{}",
        summary.stderr
    );
    assert!(!summary.stdout.contains("REQUESTS"), "{}", summary.stdout);
    // Told which to trust, it reads them; the run's own matrix needs no word.
    let alone = b.mx(&[
        "summarize",
        "--local",
        hosts,
        "--window",
        "2",
        "--trust",
        "reports",
    ]);
    assert_eq!(alone.code, 0, "{}{}", alone.stdout, alone.stderr);
    assert!(alone.stdout.contains("REQUESTS"), "{}", alone.stdout);
    assert!(alone.stderr.contains("read alone, as --trust reports asks"));
    let own = a.mx(&["summarize", "--local", hosts, "--window", "2"]);
    assert_eq!(own.code, 0, "{}{}", own.stdout, own.stderr);
    assert!(!own.stderr.contains("another matrix"), "{}", own.stderr);
    assert_eq!(a.mx(&["stop", "--local", hosts]).code, 0);
}

/// `--local` runs every host on this machine: a matrix with hosts off
/// loopback (the Quick start's 10.0.0.x) is refused in one line naming
/// them, before anything is made; `MX_LOCAL` is `--local`; and a command
/// that goes over ssh from a directory holding a local fleet of its hosts
/// says so when it fails.
#[test]
fn local_fleets_are_loopback_ones_mx_local_names_them_and_ssh_beside_one_says_so() {
    let sb = Sandbox::new();
    sb.write("servers.txt", "10.0.0.10\n10.0.0.11\n10.0.0.12\n");
    assert_eq!(sb.mx(&["gen", "--pps", "1000"]).code, 0);
    for args in [&["doctor"][..], &["start"][..]] {
        let run = sb.mx(&[args, &["--local", "hosts"][..]].concat());
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert_eq!(
            run.stderr,
            "mx: --local hosts: every host runs on this machine, on a loopback address of its own (127.x.y.z or ::1), and these are not: 10.0.0.10=10.0.0.10, 10.0.0.11=10.0.0.11, 10.0.0.12=10.0.0.12 -- give them 127.x addresses in the server list (h1=127.0.1.1, h2=127.0.1.2, ...) and mx gen again\n"
        );
        assert!(!sb.file("hosts").exists(), "nothing made");
    }

    let sb = fleet_dir(201, &["h1", "h2"]);
    let local = [("MX_LOCAL", "hosts")];
    let start = sb.mx_env(&["start", "--interval", "1"], &local);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert_eq!(agents_under(&sb.file("hosts")).len(), 2);
    let status = sb.mx_env(&["status"], &local);
    assert_eq!(status.code, 0, "{}", status.stdout);
    for h in ["h1", "h2"] {
        assert!(
            status.stdout.contains(&format!("  {h}  ")),
            "{}",
            status.stdout
        );
    }
    assert!(!status.stdout.contains("FAILED"), "{}", status.stdout);
    // Over ssh (a command that only fails), from beside the local fleet.
    let over_ssh = sb.mx_env(&["status"], &[("MX_SSH", "false")]);
    assert_eq!(over_ssh.code, 1, "{}", over_ssh.stdout);
    assert!(
        over_ssh.stdout.contains(
            "[mx] hosts/ here holds a local fleet of these hosts, and this went over ssh: add --local hosts (or export MX_LOCAL=hosts once for every command)"
        ),
        "{}",
        over_ssh.stdout
    );
    assert_eq!(sb.mx_env(&["stop"], &local).code, 0);
    assert_eq!(sb.mx_env(&["clean", "--yes"], &local).code, 0);
}
