//! Faults injected in the lab (nftables drops and duplicates, a tbf rate cap,
//! a killed agent, a cut link, broken ssh), and what mx says about them. The
//! truth of each is known per leg: drops are scoped by port.
//!
//! The agents run with `--no-gso` here: on a real wire every datagram is its
//! own packet, but over veth a GSO run stays one buffer, and nftables would
//! drop a whole run of datagrams at once instead of each with 5% odds.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::lab::{Lab, run_fed};
use crate::summarize::advice;
use crate::util::Sandbox;

/// The agents' port (`mx gen`'s default).
const PORT: u16 = 5300;
/// 5% of the datagrams matching `what`, in nft's numgen terms.
fn drop_5_percent(hook: &str, what: &str) -> String {
    nft_chain(
        "inet",
        hook,
        &format!("{what} numgen random mod 10000 < 500 drop"),
    )
}

/// An nft script: one table `mxfault` of `family`, one chain on `hook`, one rule.
fn nft_chain(family: &str, hook: &str, rule: &str) -> String {
    format!(
        "table {family} mxfault {{\n  chain c {{\n    type filter hook {hook} priority 0;\n    {rule}\n  }}\n}}\n"
    )
}

/// Starts the lab's fleet, lets it run `seconds`, summarizes the last `window`
/// seconds with grids in g/, then stops and cleans. Returns the summary.
pub fn run_and_summarize(
    lab: &Lab,
    sb: &Sandbox,
    seconds: u64,
    window: &str,
    extra: &[&str],
) -> String {
    let mut args = vec!["start", "--interval", "1", "--no-gso"];
    args.extend(extra);
    let start = lab.mx(sb, &args);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    std::thread::sleep(Duration::from_secs(seconds));
    let summary = lab.mx(sb, &["summarize", "--window", window, "--grid", "g"]);
    assert_eq!(summary.code, 0, "{}{}", summary.stdout, summary.stderr);
    assert_eq!(lab.mx(sb, &["stop"]).code, 0);
    assert_eq!(lab.mx(sb, &["clean", "--yes"]).code, 0);
    summary.stdout
}

/// Starts the lab's fleet (`--no-gso`), lets it run `seconds`, collects the
/// reports into reports/, then stops and cleans.
fn run_and_collect(lab: &Lab, sb: &Sandbox, seconds: u64) {
    let start = lab.mx(sb, &["start", "--interval", "1", "--no-gso"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    std::thread::sleep(Duration::from_secs(seconds));
    assert_eq!(lab.mx(sb, &["collect"]).code, 0);
    assert_eq!(lab.mx(sb, &["stop"]).code, 0);
    assert_eq!(lab.mx(sb, &["clean", "--yes"]).code, 0);
}

/// The rows of a collected report whose `dir` and `peer` are these, as
/// column name -> cell.
/// Whether one of `hosts` said, in its host row for an interval (by `ts`),
/// that it fell behind its schedule further than its bucket forgives: a
/// starved agent on a loaded CI box, its own edge, said as such (the rule
/// the rate tests follow, `agents::fell_behind`).
fn fell_behind(sb: &Sandbox, hosts: &[&str]) -> impl Fn(&str) -> bool {
    let rows: Vec<_> = hosts
        .iter()
        .map(|h| report_rows(sb, h, "host", "*"))
        .collect();
    assert!(rows.iter().all(|r| !r.is_empty()), "no host rows");
    move |ts: &str| {
        rows.iter().flatten().any(|h| {
            h["ts"] == ts
                && h["behind_ms"]
                    .parse::<f64>()
                    .is_ok_and(|ms| ms > crate::agents::FORGIVEN_MS)
        })
    }
}

pub fn report_rows(
    sb: &Sandbox,
    host: &str,
    dir: &str,
    peer: &str,
) -> Vec<BTreeMap<String, String>> {
    let text = sb.read(&format!("reports/{host}.csv"));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.trim_end().split(','))
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect::<BTreeMap<_, _>>()
        })
        .filter(|r| r["dir"] == dir && r["peer"] == peer)
        .collect()
}

/// [`report_rows`] of the intervals `host`'s own host row marks whole
/// (`phase` steady or last). `mx start` begins the flows at an instant off
/// the interval's boundaries and marks the interval it falls in `start`: 0.5
/// to 1.5 intervals long, its counts are not an interval's (its rates are).
fn whole_rows(sb: &Sandbox, host: &str, dir: &str, peer: &str) -> Vec<BTreeMap<String, String>> {
    let whole: std::collections::BTreeSet<String> = report_rows(sb, host, "host", "*")
        .into_iter()
        .filter(|h| matches!(h["phase"].as_str(), "steady" | "last"))
        .map(|h| h["ts"].clone())
        .collect();
    report_rows(sb, host, dir, peer)
        .into_iter()
        .filter(|r| whole.contains(&r["ts"]))
        .collect()
}

/// The sum of `column` over rows, blanks as nothing.
fn sum(rows: &[BTreeMap<String, String>], column: &str) -> f64 {
    rows.iter()
        .filter_map(|r| r[column].parse::<f64>().ok())
        .sum()
}

/// A grid file of the summary: (src, dst) -> value, blanks left out.
pub fn grid(sb: &Sandbox, name: &str) -> BTreeMap<(String, String), f64> {
    let text = sb.read(&format!("g/{name}"));
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    let mut cells = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        for (i, value) in fields.iter().enumerate().skip(1) {
            if let Ok(v) = value.parse::<f64>() {
                cells.insert((fields[0].to_string(), header[i].clone()), v);
            }
        }
    }
    cells
}

/// The flow line `src -> dst: ...` of the worst flows: (delivered %, forward %).
fn flow_line(summary: &str, src: &str, dst: &str) -> (f64, f64) {
    let line = summary
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{src} -> {dst}:")))
        .unwrap_or_else(|| panic!("no flow line {src} -> {dst}:\n{summary}"));
    let pct_after = |key: &str| -> f64 {
        let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len();
        line[at..]
            .trim_start()
            .split('%')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (pct_after("back ("), pct_after("forward"))
}

/// The fleet's LOSS line: (forward %, return %).
fn loss_legs(summary: &str) -> (f64, f64) {
    let line = summary
        .lines()
        .find(|l| l.trim_start().starts_with("LOSS"))
        .unwrap_or_else(|| panic!("no LOSS line:\n{summary}"));
    let inner = line.split('(').nth(1).unwrap();
    let numbers: Vec<f64> = inner
        .split('%')
        .filter_map(|part| part.rsplit(' ').next()?.trim().parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

fn advises(summary: &str, want: &str) {
    assert!(
        advice(summary).iter().any(|h| h.contains(want)),
        "no hint says {want:?}:\n{summary}"
    );
}

/// Every cell of `grid` outside row/column `host` is below `limit`.
fn others_clean(cells: &BTreeMap<(String, String), f64>, host: &str, limit: f64) {
    for ((src, dst), v) in cells {
        if src != host && dst != host {
            assert!(*v < limit, "{src} -> {dst}: {v}");
        }
    }
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_5_percent_dropped_into_a_host_is_its_forward_leg() {
    let lab = Lab::up(78, 3);
    let sb = lab.controller("5000");
    // Requests entering h2 (to the agents' port): 5% dropped.
    lab.exec(
        2,
        &["nft", "-f", "-"],
        &drop_5_percent("input", &format!("udp dport {PORT}")),
    );
    let summary = run_and_summarize(&lab, &sb, 9, "6", &[]);
    for src in ["h1", "h3"] {
        let (delivered, forward) = flow_line(&summary, src, "h2");
        assert!(
            (forward - 95.0).abs() <= 0.5,
            "{src} -> h2 forward {forward}\n{summary}"
        );
        assert!(
            (delivered - forward).abs() <= 0.2,
            "return leg clean: {summary}"
        );
    }
    let (forward, back) = loss_legs(&summary);
    // 2 of 6 flows lose 5% on the way in: 1.67% of the fleet's requests.
    assert!((forward - 5.0 / 3.0).abs() <= 0.25, "{forward}\n{summary}");
    assert!(back < 0.1, "{back}\n{summary}");
    let loss = grid(&sb, "loss_grid.csv");
    for src in ["h1", "h3"] {
        let v = loss[&(src.to_string(), "h2".to_string())];
        assert!((v - 5.0).abs() <= 0.5, "the dark column: {src} -> h2 = {v}");
    }
    others_clean(&loss, "h2", 0.5);
    assert!(loss[&("h2".to_string(), "h1".to_string())] < 0.5);
    // h2's own firewall: its interface counted what its agent never read.
    advises(&summary, "requests into h2 are lost, and only requests");
    advises(&summary, "dropped inside h2, after its NIC");
}

/// A rule on the lab's bridge, in this (root) namespace: the switch drops,
/// not the host. Removed when dropped (and by lab.sh down).
pub struct BridgeRule(u8);

impl BridgeRule {
    pub fn add(lab: &Lab, rule: &str) -> BridgeRule {
        let net = lab.net();
        let script =
            nft_chain("bridge", "forward", rule).replacen("mxfault", &format!("mxfault{net}"), 1);
        let mut nft = Command::new("nft");
        nft.args(["-f", "-"]);
        run_fed(nft, &script);
        BridgeRule(net)
    }
}

impl Drop for BridgeRule {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "bridge", &format!("mxfault{}", self.0)])
            .status();
    }
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_5_percent_dropped_leaving_a_host_is_its_return_leg() {
    let lab = Lab::up(79, 3);
    let sb = lab.controller("5000");
    // Replies leaving h2 (from the agents' port) are dropped by the switch,
    // 5% of them. (Dropped by h2's own output hook instead, each drop would
    // be an EPERM to the sender, which a batch send cannot pin on one datagram.)
    let _rule = BridgeRule::add(
        &lab,
        &format!(
            "iifname \"mx79v2\" ip saddr 198.18.79.2 udp sport {PORT} numgen random mod 10000 < 500 drop"
        ),
    );
    let summary = run_and_summarize(&lab, &sb, 9, "6", &[]);
    // The lab's own bridge and veths, on a 2-core VM, drop a fraction of a
    // percent now and then (seen once in ~10 runs: 0.8% into h2, both
    // senders alike, no socket counting a drop). Misreading the 5% dropped
    // replies as forward loss would take 5% off the forward leg: the bounds
    // below tell the two apart with room for the lab's noise.
    for src in ["h1", "h3"] {
        let (delivered, forward) = flow_line(&summary, src, "h2");
        assert!(forward >= 99.0, "{src} -> h2 forward {forward}\n{summary}");
        assert!(
            (delivered - 95.0).abs() <= 0.5,
            "{src} -> h2 delivered {delivered}\n{summary}"
        );
    }
    let (forward, back) = loss_legs(&summary);
    assert!(forward < 0.5, "{forward}\n{summary}");
    assert!((back - 5.0 / 3.0).abs() <= 0.25, "{back}\n{summary}");
    let loss = grid(&sb, "loss_grid.csv");
    for src in ["h1", "h3"] {
        let v = loss[&(src.to_string(), "h2".to_string())];
        assert!((v - 5.0).abs() <= 1.0, "the dark column: {src} -> h2 = {v}");
    }
    others_clean(&loss, "h2", 0.5);
    // The switch dropped what left h2: its interface sent all of it.
    advises(&summary, "replies out of h2 are lost, and only replies");
    advises(
        &summary,
        "h2's interface (eth0) sent everything its agent handed the kernel",
    );
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_rate_capped_host_is_named_its_transmit_path() {
    let lab = Lab::up(80, 3);
    let sb = lab.controller("5000");
    // The traffic rides eth1 (--bind), ssh stays on eth0. h2 sends 2 x 5000
    // requests and 2 x 5000 replies a second, ~110 bytes each on the wire:
    // ~17.6 Mb/s through an 8 Mb/s cap on its eth1.
    cap_link(&lab, 2, "8mbit");
    let summary = run_and_summarize(&lab, &sb, 8, "5", &["--bind", "eth1"]);
    eprintln!("{summary}");
    advises(&summary, "packets out of h2 are lost");
    advises(&summary, "a rate cap or a full queue on h2's egress");
    let loss = grid(&sb, "loss_grid.csv");
    for other in ["h1", "h3"] {
        assert!(
            loss[&(other.to_string(), "h2".to_string())] > 20.0,
            "{loss:?}"
        );
        assert!(
            loss[&("h2".to_string(), other.to_string())] > 20.0,
            "{loss:?}"
        );
    }
    others_clean(&loss, "h2", 0.5);
}

/// Caps host `i`'s eth1 (the traffic's link under `--bind eth1`) at `rate`
/// (tc's words: `8mbit`) with tbf: what leaves past it queues up to 20 ms,
/// then is dropped.
pub fn cap_link(lab: &Lab, i: usize, rate: &str) {
    lab.exec(
        i,
        &[
            "tc", "qdisc", "replace", "dev", "eth1", "root", "tbf", "rate", rate, "burst", "16kb",
            "latency", "20ms",
        ],
        "",
    );
}

/// Host-row timestamps of a report file.
fn host_ticks(path: &std::path::Path) -> Vec<i64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.split(',').nth(2) == Some("host"))
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_dead_agent_and_a_cut_link_leave_the_rest_running() {
    let lab = Lab::up(81, 4);
    let sb = lab.controller("1000");
    let start = lab.mx(&sb, &["start", "--interval", "1", "--no-gso"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    // The flows begin at the start instant, up to two seconds on: a few
    // steady intervals on every host, collected before the faults.
    crate::util::wait_for_steady(&lab.reports(), 4);
    assert_eq!(lab.mx(&sb, &["collect"]).code, 0);
    // h2's agent dies; h4's link goes down (its agent runs on, unreachable).
    let pid = lab.agents(2).pop().expect("h2's agent");
    assert!(
        Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap()
            .success()
    );
    lab.exec(4, &["ip", "link", "set", "eth0", "down"], "");
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    std::thread::sleep(Duration::from_secs(5));

    let t0 = Instant::now();
    let summary = lab.mx(&sb, &["summarize", "--window", "0"]);
    assert!(
        t0.elapsed() < Duration::from_secs(40),
        "bounded: {:?}",
        t0.elapsed()
    );
    // h4 could not be collected: the summary of what came, and exit 1.
    assert_eq!(summary.code, 1, "{}{}", summary.stdout, summary.stderr);
    let text = summary.stdout;
    // Said, on its own line; its earlier copy kept, and the summary said to
    // be stale for it.
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("h4")
            && l.contains("not collected, the earlier copy kept")),
        "{text}"
    );
    assert!(
        text.contains("[mx]   h4  its earlier copy was summarized (reports/h4.csv, collected at "),
        "{text}"
    );
    assert!(host_ticks(&sb.file("reports/h4.csv")).len() >= 2);
    advises(&text, "h2's agent stopped at");
    advises(&text, "h4 could not be reached to collect its report");
    // The survivors kept reporting past the faults.
    for h in ["h1", "h3"] {
        let ticks = host_ticks(&sb.file(&format!("reports/{h}.csv")));
        assert!(*ticks.last().unwrap() >= killed_at + 3, "{h}: {ticks:?}");
    }
    // Every interval h2 wrote before it died is there, one per second.
    let h2 = host_ticks(&sb.file("reports/h2.csv"));
    assert!(h2.len() >= 3, "{h2:?}");
    assert!(h2.windows(2).all(|w| w[1] == w[0] + 1), "{h2:?}");
    assert!(*h2.last().unwrap() <= killed_at + 1);

    let status = lab.mx(&sb, &["status"]);
    for h in ["h1", "h3"] {
        assert!(
            status
                .stdout
                .lines()
                .any(|l| l.trim_start().starts_with(h) && l.contains("s ago: tx=")),
            "{h} runs on:\n{}",
            status.stdout
        );
    }
    let stop = lab.mx(&sb, &["stop"]);
    assert_eq!(stop.code, 1, "h4 cannot be reached: {}", stop.stdout);
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_duplicated_requests_are_counted_and_answered_once() {
    let lab = Lab::up(82, 2);
    let sb = lab.controller("2000");
    // Every request h1 sends to h2 goes out twice.
    lab.exec(
        1,
        &["nft", "-f", "-"],
        &nft_chain(
            "ip",
            "output",
            &format!("ip daddr 198.18.82.2 udp dport {PORT} dup to 198.18.82.2"),
        ),
    );
    run_and_collect(&lab, &sb, 7);
    // The whole intervals (the first, in which the flows began, is not one),
    // collected while the flows ran.
    let rows = whole_rows(&sb, "h2", "rx", "h1");
    let full = &rows[..];
    assert!(full.len() >= 2, "{rows:?}");
    // An interval served short is excused where h1 (sending) or h2 (reading
    // late, counted late) said it fell behind its schedule: a starved agent
    // on a loaded CI box, its own edge, said (a CI run served 1,959 of 2,000
    // in one), as the rate tests allow: so the run is seven seconds long.
    let starved = fell_behind(&sb, &["h1", "h2"]);
    let mut excused = 0;
    for r in full {
        // One duplicate for every request that arrived (interval 1 s: the
        // count and the rate are the same number).
        let dups: f64 = r["dup_pkts"].parse().unwrap();
        let served: f64 = r["pps"].parse().unwrap();
        if (served - 2000.0).abs() > 20.0 {
            assert!(
                starved(&r["ts"]),
                "{r:?}: and neither agent said it fell behind"
            );
            excused += 1;
        }
        assert!((dups - served).abs() <= 0.01 * served, "{r:?}");
        // ... and each answered once.
        assert_eq!(r["rep_pps"], r["pps"], "{r:?}");
    }
    crate::agents::assert_mostly_on_time("h2 <- h1", excused, full.len(), &rows);
    // h1 got one reply per request: no duplicate reached it.
    for r in report_rows(&sb, "h1", "tx", "h2") {
        assert_eq!(r["dup_pkts"], "0", "{r:?}");
    }
}

/// A process listening on port 22 of host `i` that accepts and never speaks.
fn silent_listener(lab: &Lab, i: usize) -> Child {
    Command::new("ip")
        .args(["netns", "exec", &lab.netns(i), "python3", "-c"])
        .arg(
            "import socket,time\n\
             s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind(('0.0.0.0', 22)); s.listen(64)\n\
             conns=[]\n\
             while True: conns.append(s.accept())\n",
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Whether something listens on TCP port 22 in host `i`'s namespace.
fn listens_on_22(lab: &Lab, i: usize) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.netns(i), "ss", "-Hltn", "sport = :22"])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

/// An sshd on host `i` that knows no key: every login is refused.
fn refusing_sshd(lab: &Lab, i: usize) -> Child {
    let config = lab.dir.join(format!("h{i}/sshd_config"));
    let refusing = lab.dir.join(format!("h{i}/sshd_config.refusing"));
    let text = std::fs::read_to_string(&config).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("AuthorizedKeysFile") {
                "AuthorizedKeysFile /nonexistent".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&refusing, text + "\n").unwrap();
    Command::new("ip")
        .args(["netns", "exec", &lab.netns(i), "/usr/sbin/sshd", "-D", "-f"])
        .arg(&refusing)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_refused_auth_and_a_hung_ssh_get_their_own_lines_in_bounded_time() {
    let lab = Lab::up(83, 4);
    let sb = lab.controller("500");
    let start = lab.mx(&sb, &["start", "--interval", "1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    // Then h2 refuses every key and h3's ssh port answers nothing, ever
    // (their agents go with their old sshd).
    lab.cut(2);
    lab.cut(3);
    let mut refusing = refusing_sshd(&lab, 2);
    let mut silent = silent_listener(&lab, 3);
    // Until both listen (under CI's load a fixed half second was not
    // enough: h3's port was still closed, and refused rather than hung).
    crate::util::wait_for(
        "h2's and h3's new port 22",
        Duration::from_secs(20),
        || match [2, 3].iter().find(|&&i| !listens_on_22(&lab, i)) {
            Some(i) => Err(format!("h{i} does not listen yet")),
            None => Ok(()),
        },
    );
    let t0 = Instant::now();
    let stop = lab.mx(&sb, &["stop"]);
    let took = t0.elapsed();
    let _ = refusing.kill();
    let _ = silent.kill();
    let _ = refusing.wait();
    let _ = silent.wait();
    assert_eq!(stop.code, 1, "{}{}", stop.stdout, stop.stderr);
    // ssh's 8 s connect timeout bounds the silent host: well under a minute.
    assert!(took < Duration::from_secs(40), "{took:?}");
    let line = |h: &str| -> String {
        let lines: Vec<&str> = stop
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("  {h} ")))
            .collect();
        assert_eq!(lines.len(), 1, "{h}: one line each:\n{}", stop.stdout);
        lines[0].to_string()
    };
    assert!(line("h2").contains("Permission denied"), "{}", line("h2"));
    assert!(line("h3").contains("timed out"), "{}", line("h3"));
    assert!(
        stop.stdout.contains("[mx] FAILED on 2/4 hosts: h2 h3"),
        "{}",
        stop.stdout
    );
    // The rest of the fleet was stopped as asked.
    assert!(line("h1").contains("ended"), "{}", line("h1"));
    assert!(line("h4").contains("ended"), "{}", line("h4"));
    assert!(lab.agents(1).is_empty() && lab.agents(4).is_empty());
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_reordered_requests_are_counted_out_of_order() {
    let lab = Lab::up(84, 2);
    let sb = lab.controller("2000");
    // On h1's way out, 10% of its requests to h2 take a slow lane (an htb
    // class below their rate, so a queue builds): they arrive behind later ones.
    for argv in [
        &[
            "tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10",
        ][..],
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate",
            "1gbit",
        ],
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate",
            "150kbit", "ceil", "150kbit",
        ],
    ] {
        lab.exec(1, argv, "");
    }
    lab.exec(
        1,
        &["nft", "-f", "-"],
        &nft_chain(
            "ip",
            "output",
            &format!("ip daddr 198.18.84.2 udp dport {PORT} numgen random mod 100 < 10 meta priority set 1:20"),
        ),
    );
    run_and_collect(&lab, &sb, 5);
    let h2_from_h1 = report_rows(&sb, "h2", "rx", "h1");
    // h2 saw h1's requests out of order, and h1 saw h2's in order, but for
    // a stray one: a CI run counted 1, not reproduced here. Likely a loaded
    // kernel's own (a veth hands each packet to the backlog of the CPU that
    // sent it, and a sender moved to the other CPU can overtake its packets
    // still waiting there); if mx's instead, more than a stray fails this.
    // The slow lane reorders hundreds or more.
    let shaped = sum(&h2_from_h1, "ooo_pkts");
    assert!(shaped > 100.0, "{h2_from_h1:?}");
    let h1_from_h2 = report_rows(&sb, "h1", "rx", "h2");
    let clean = sum(&h1_from_h2, "ooo_pkts");
    let arrived = sum(&h1_from_h2, "pkts");
    assert!(arrived > 1000.0, "{h1_from_h2:?}");
    println!("out of order: {shaped} from h1 (slow lane), {clean} of {arrived} from h2");
    assert!(
        clean <= 0.001 * arrived && clean * 100.0 < shaped,
        "{clean} of {arrived} out of order from h2, against {shaped} from h1"
    );
    assert_eq!(sum(&h2_from_h1, "dup_pkts"), 0.0);
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_requests_the_kernel_refuses_are_send_errors_and_logged_once() {
    let lab = Lab::up(85, 2);
    let sb = lab.controller("1000");
    // h1's own firewall refuses its requests to h2: sendmmsg says EPERM.
    lab.exec(
        1,
        &["nft", "-f", "-"],
        &nft_chain("ip", "output", &format!("udp dport {PORT} drop")),
    );
    let start = lab.mx(&sb, &["start", "--interval", "1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(lab.mx(&sb, &["collect"]).code, 0);
    let log = lab.mx(&sb, &["logs"]);
    assert_eq!(log.code, 0, "{}", log.stdout);
    assert_eq!(lab.mx(&sb, &["stop"]).code, 0);
    assert_eq!(lab.mx(&sb, &["clean", "--yes"]).code, 0);
    let rows = whole_rows(&sb, "h1", "tx", "h2");
    assert!(rows.len() >= 2, "{rows:?}");
    // Every request was tried and refused, counted once: 1,000 an interval,
    // short only where h1 said it fell behind (it cannot try what it missed:
    // a CI run counted 915 in one interval).
    let starved = fell_behind(&sb, &["h1"]);
    let mut excused = 0;
    for r in &rows {
        assert_eq!(r["pkts"], "0", "nothing left: {r:?}");
        let refused: f64 = r["send_errors"].parse().unwrap();
        assert!(refused <= 1020.0, "counted more than tried: {r:?}");
        if refused < 980.0 {
            assert!(
                starved(&r["ts"]),
                "{r:?}: and h1 did not say it fell behind"
            );
            excused += 1;
        }
    }
    crate::agents::assert_mostly_on_time("refused requests", excused, rows.len(), &rows);
    assert!(sum(&report_rows(&sb, "h2", "tx", "h1"), "send_errors") == 0.0);
    let text = sb.read("logs/h1.log");
    assert_eq!(
        text.matches("the kernel refused requests to h2 (Operation not permitted")
            .count(),
        1,
        "{text}"
    );
}
