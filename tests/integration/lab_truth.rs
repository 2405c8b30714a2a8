//! The headline run tells the truth (issue "truth"): `mx run` on the lab of
//! real sshd hosts reads a clean network as clean, a wire drop as the wire's,
//! a late host as late (not as loss), and a host starved of CPU as its own.
//! Needs root, like the rest of the lab; CI runs it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::agents::Starved;
use crate::lab::Lab;
use crate::lab_faults::grid;
use crate::summarize::{advice, assert_reads_clean};
use crate::util::Sandbox;

/// The agents' port (`mx gen`'s default).
const PORT: u16 = 5300;

/// The summary's LOSS line: (round trip, forward, return), in %.
fn loss(summary: &str) -> (f64, f64, f64) {
    let line = summary
        .lines()
        .find(|l| l.trim_start().starts_with("LOSS"))
        .unwrap_or_else(|| panic!("no LOSS line:\n{summary}"));
    let numbers: Vec<f64> = line
        .split('%')
        .filter_map(|part| part.rsplit([' ', '(']).next()?.trim().parse().ok())
        .collect();
    (numbers[0], numbers[1], numbers[2])
}

/// `mx run --for <seconds> --interval <interval> --grid g <extra>` on the lab.
fn run(lab: &Lab, sb: &Sandbox, seconds: &str, interval: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "run",
        "--for",
        seconds,
        "--interval",
        interval,
        "--grid",
        "g",
    ];
    args.extend(extra);
    let run = lab.mx(sb, &args);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("[mx] every agent ended at"),
        "{}",
        run.stdout
    );
    run.stdout
}

fn every_cell_at_most(cells: &BTreeMap<(String, String), f64>, limit: f64, skip: Option<&str>) {
    for ((src, dst), v) in cells {
        if skip.is_some_and(|h| h == src || h == dst) {
            continue;
        }
        assert!(*v <= limit, "{src} -> {dst}: {v} > {limit}");
    }
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_clean_run_reads_clean() {
    let lab = Lab::up(90, 4);
    let sb = lab.controller("5000");
    let out = run(&lab, &sb, "20", "2", &[]);
    assert_eq!(loss(&out), (0.0, 0.0, 0.0), "{out}");
    assert!(
        out.contains("mx summarize -- 20s steady, 4 hosts, 12 flows"),
        "{out}"
    );
    assert!(
        out.contains("10 interval(s) of 2s in which every host was sending"),
        "{out}"
    );
    let cells = grid(&sb, "loss_grid.csv");
    assert_eq!(cells.len(), 12);
    every_cell_at_most(&cells, 0.05, None);
    assert_reads_clean(&out);
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_5_percent_dropped_on_the_wire_into_a_host_in_a_run() {
    let lab = Lab::up(91, 4);
    let sb = lab.controller("5000");
    // Requests entering h2 (to the agents' port): 5% dropped by nftables in
    // h2, after its interface counted them.
    lab.exec(
        2,
        &["nft", "-f", "-"],
        &format!(
            "table inet mxfault {{\n  chain c {{\n    type filter hook input priority 0;\n    udp dport {PORT} numgen random mod 10000 < 500 drop\n  }}\n}}\n"
        ),
    );
    // One datagram per trip: nftables would drop a whole GSO run at once.
    let out = run(&lab, &sb, "20", "2", &["--no-gso"]);
    let cells = grid(&sb, "loss_grid.csv");
    for src in ["h1", "h3", "h4"] {
        let v = cells[&(src.to_string(), "h2".to_string())];
        assert!((v - 5.0).abs() <= 0.5, "the dark column: {src} -> h2 = {v}");
    }
    every_cell_at_most(&cells, 0.1, Some("h2"));
    for dst in ["h1", "h3", "h4"] {
        assert!(cells[&("h2".to_string(), dst.to_string())] <= 0.1);
    }
    // 3 of 12 flows lose 5% on the way in: 1.25% of the fleet's requests,
    // all of it on the forward leg.
    let (round_trip, forward, back) = loss(&out);
    assert!((forward - 1.25).abs() <= 0.15, "{forward}\n{out}");
    assert!(back <= 0.02, "{back}\n{out}");
    assert!((round_trip - forward - back).abs() <= 0.011, "{out}");
    let hints = advice(&out);
    // The firewall's loss reads as h2's way in, after its NIC: its
    // interface counted what its agent never read. CPU is named only with
    // the figure that shows it.
    assert!(
        hints.iter().any(|h| h.starts_with("requests into h2 are lost, and only requests")
            && h.contains("more packets arriving than its agent read: they were dropped inside h2, after its NIC")
            && (!h.contains("CPU") || h.contains("h2's agent fell up to"))),
        "the firewall's loss reads as h2's receive path: {out}"
    );
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_layered_run_reads_clean_and_covers_every_pair() {
    let lab = Lab::up(92, 4);
    let sb = Sandbox::new();
    std::fs::copy(lab.dir.join("servers.txt"), sb.file("servers.txt")).unwrap();
    let generated = sb.mx(&[
        "gen", "--pps", "5000", "--peers", "1", "--dwell", "2", "--seed", "7",
    ]);
    assert_eq!(generated.code, 0, "{}", generated.stderr);
    let out = run(&lab, &sb, "12", "1", &[]);
    assert_eq!(loss(&out), (0.0, 0.0, 0.0), "{out}");
    assert!(
        out.contains("COVERAGE  12 of 12 ordered pairs measured so far"),
        "{out}"
    );
    every_cell_at_most(&grid(&sb, "loss_grid.csv"), 0.05, None);
}

/// Makes every ssh session into lab host `i` slow at login (0.3 s), and the
/// start instant much slower to arrive (5 s, past the margin the launch's
/// pace gives it): sshd's ForceCommand runs a script that waits, then runs
/// what was asked. A command run whole that carries the start instant waits
/// 5 s more; a session's shell (mx's steps written to its stdin) reads its
/// input through a filter that holds the bytes carrying the start instant
/// back 5 s (binary-safe: the agent's copy crosses it too).
fn slow_ssh(lab: &Lab, i: usize) {
    let host = lab.dir.join(format!("h{i}"));
    let script: PathBuf = host.join("slow-login.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         case \"$SSH_ORIGINAL_COMMAND\" in *agent.start.tmp*) sleep 5 ;; *) sleep 0.3 ;; esac\n\
         case \"$SSH_ORIGINAL_COMMAND\" in sftp|internal-sftp|*sftp-server*) exec /usr/lib/openssh/sftp-server ;; esac\n\
         if [ \"$SSH_ORIGINAL_COMMAND\" = 'exec sh' ]; then\n\
         perl -e '$| = 1; while (sysread(STDIN, my $b, 65536)) { sleep 5 if $b =~ /agent\\.start\\.tmp/; syswrite(STDOUT, $b) }' | exec /bin/sh\n\
         fi\n\
         exec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n",
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    let config = host.join("sshd_config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("ForceCommand {}\n", script.display()));
    std::fs::write(&config, text).unwrap();
    // sshd re-reads its configuration on SIGHUP (it is the namespace's init).
    let pids = Command::new("ip")
        .args(["netns", "pids", &lab.netns(i)])
        .output()
        .unwrap();
    for pid in String::from_utf8_lossy(&pids.stdout).lines() {
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sshd") {
            Command::new("kill").args(["-HUP", pid]).status().unwrap();
        }
    }
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_host_held_back_by_slow_ssh_starts_late_and_that_is_not_loss() {
    let lab = Lab::up(93, 4);
    let sb = lab.controller("5000");
    slow_ssh(&lab, 3);
    let out = run(&lab, &sb, "12", "1", &[]);
    assert!(
        out.contains("[mx] h3 had the start instant only "),
        "the late host is named at start: {out}"
    );
    assert!(
        out.contains("h3 began sending ") && out.contains("s after the others"),
        "and in the summary: {out}"
    );
    assert_eq!(loss(&out), (0.0, 0.0, 0.0), "{out}");
    every_cell_at_most(&grid(&sb, "loss_grid.csv"), 0.05, None);
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_an_agent_starved_of_cpu_reads_as_its_host_not_the_network() {
    let lab = Lab::up(94, 4);
    let sb = lab.controller("20000");
    let start = lab.mx(&sb, &["start", "--interval", "1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let agent = lab.agents(2).first().cloned().expect("h2's agent runs");
    let _starved = Starved::hold(&agent, "mx-lab-starved-94");
    std::thread::sleep(Duration::from_secs(12));
    let stop = lab.mx(&sb, &["stop"]);
    assert_eq!(stop.code, 0, "{}", stop.stdout);
    let summary = lab.mx(&sb, &["summarize", "--window", "0"]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    let out = summary.stdout;
    let hints = advice(&out);
    // What h2 could not send, and any loss into it (its own sockets, while
    // its agent could not run: how much depends on how long it was held),
    // are h2's CPU's.
    assert!(
        hints.iter().any(|h| h.contains("h2")
            && (h.contains("h2's CPU, not the network") || h.contains("its CPU, not the network"))),
        "{out}"
    );
    assert!(
        hints.iter().any(|h| h.contains("h2's agent")
            && (h.contains("behind its send schedule") || h.contains("throttled"))),
        "{out}"
    );
    // Never "CPU to spare" about it, never the fabric, never a cable first.
    for h in &hints {
        assert!(!h.contains("CPU to spare"), "{h}\n{out}");
        assert!(
            !h.contains("on the wire") && !h.contains("loss everywhere"),
            "{h}\n{out}"
        );
        assert!(
            !h.contains("h2's NIC, cable") || h.contains("CPU"),
            "{h}\n{out}"
        );
    }
    assert!(
        lab.agents(2).is_empty(),
        "the starved agent was stopped too"
    );
}
