//! The agent's contract beyond raw traffic: report.csv's shape, SIGTERM, workers
//! and streams, layered runs, stray packets, fd limits, --bind and --host.

use std::collections::BTreeSet;
use std::net::SocketAddrV4;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use matrix_orchestrator::matrix::Matrix;
use matrix_orchestrator::matrix::schedule::Schedule;
use matrix_orchestrator::report::COLUMNS;

use crate::agents::{
    Fleet, PORT, RowExt, addr, fell_behind, full_rows, header, mesh, plain_socket,
};
use crate::util::Sandbox;

#[test]
fn agent_report_has_its_columns_blanks_and_boundaries_and_survives_sigterm() {
    let net = 21;
    let mut fleet = Fleet::new(&mesh(net, 2, "1000", (64, 64)));
    fleet.start("h2", &["--interval", "2", "--duration", "9"]);
    fleet.start("h1", &["--interval", "2", "--workers", "2"]);
    std::thread::sleep(Duration::from_millis(6500));
    fleet.terminate("h1");
    let codes = fleet.wait(Duration::from_secs(15));
    assert!(codes.iter().all(|(_, c)| *c == 0), "{codes:?}");
    assert!(
        fleet.log("h1").contains("mx agent: stopped"),
        "{}",
        fleet.log("h1")
    );

    // Each interval's log line says its ts for scripts and its local time
    // for people: `ts=<unix s> time=HH:MM:SS`.
    let log = fleet.log("h1");
    let stamped: Vec<&str> = log.lines().filter(|l| l.starts_with("ts=")).collect();
    assert!(stamped.len() >= 2, "{log}");
    for line in stamped {
        let (ts, rest) = line[3..].split_once(' ').unwrap();
        let ts: i64 = ts.parse().expect(line);
        let time = matrix_orchestrator::units::local_clock(ts as f64);
        assert!(rest.starts_with(&format!("time={time} ")), "{line}");
    }

    let text = fleet.report_text("h1");
    let header_line = text.lines().next().unwrap();
    assert_eq!(header_line, COLUMNS.join(","));
    assert!(text.ends_with("\r\n") && text.lines().all(|l| !l.contains('\n')));
    assert_eq!(
        text.matches("\r\n").count(),
        text.lines().count(),
        "CRLF line ends"
    );

    let rows = fleet.report("h1");
    let hosts: Vec<_> = rows.iter().filter(|r| r.s("dir") == "host").collect();
    assert!(
        hosts.len() >= 2,
        "finished intervals on disk: {}",
        hosts.len()
    );
    for h in &hosts {
        assert_eq!(h.f("ts").unwrap() as i64 % 2, 0, "ts on a 2 s boundary");
        assert_eq!(h.s("peer"), "*");
        assert_eq!(h.s("workers"), "2");
        assert_eq!(h.f("rtt_avg_us"), None, "host row has no avg");
        assert_eq!(h.f("rtt_max_us"), None, "host row has no max");
        assert!(h.f("cpu_pct").is_some() && h.f("agent_cpu_pct").is_some());
        assert_eq!(h.f("stray_pkts"), Some(0.0));
        assert_eq!(h.f("dup_pkts"), None);
    }
    for r in rows.iter().filter(|r| r.s("dir") == "tx") {
        for blank in [
            "cpu_pct",
            "cpu_max_pct",
            "agent_cpu_pct",
            "workers",
            "layer",
            "stray_pkts",
        ] {
            assert_eq!(r.f(blank), None, "tx {blank}");
        }
        assert!(r.f("dup_pkts").is_some() && r.f("ooo_pkts").is_some());
    }
    for r in rows.iter().filter(|r| r.s("dir") == "rx") {
        for blank in [
            "target_pps",
            "loss_pct",
            "rtt_avg_us",
            "rtt_p50_us",
            "rtt_max_us",
            "cpu_pct",
        ] {
            assert_eq!(r.f(blank), None, "rx {blank}");
        }
    }
    for disk in &COLUMNS[21..30] {
        assert!(
            rows.iter().all(|r| r.s(disk).is_empty()),
            "{disk} is never measured"
        );
    }
    // The interval cut short by SIGTERM is flushed too: per-peer rows after the
    // last host row, and no host row of their own.
    let last_host_ts = hosts.last().unwrap().f("ts").unwrap();
    let last_ts = rows.iter().filter_map(|r| r.f("ts")).fold(0.0, f64::max);
    assert!(last_ts > last_host_ts, "final partial interval written");
    assert!(
        rows.iter()
            .any(|r| r.s("dir") == "tx" && r.f("ts") == Some(last_ts))
    );
}

#[test]
fn agent_workers_and_streams_spread_the_load_and_merge_the_rows() {
    let net = 22;
    let mut fleet = Fleet::new(&mesh(net, 2, "4000", (64, 64)));
    for h in ["h1", "h2"] {
        fleet.start(
            h,
            &[
                "--interval",
                "1",
                "--duration",
                "6.6",
                "--workers",
                "2",
                "--streams",
                "4",
            ],
        );
    }
    fleet.wait_ok();
    let log = fleet.log("h1");
    assert!(
        log.contains("workers: 2 (flow sockets per worker: 2, 2)"),
        "{log}"
    );
    assert!(log.contains("streams=4 flows=4"), "{log}");
    let rows = fleet.report("h1");
    let tx = full_rows(&rows, "tx", None);
    let ticks: BTreeSet<&str> = tx.iter().map(|r| r.s("ts")).collect();
    assert_eq!(tx.len(), ticks.len(), "one tx row per peer per interval");
    // Within 1%, but an interval may fall short where h1 says it fell
    // behind further than its bucket forgives (a CI VM's stall read 3,894.2
    // pps), as the rate tests allow.
    let mut short = Vec::new();
    for r in &tx {
        assert_eq!(
            r.f("target_pps"),
            Some(4000.0),
            "the streams' targets add up"
        );
        let pps = r.f("pps").unwrap();
        if (pps - 4000.0).abs() >= 40.0 {
            let behind = fell_behind(&rows, r.s("ts"));
            assert!(behind.is_some(), "{pps} pps, and h1 did not fall behind");
            short.push((pps, behind));
        }
    }
    crate::agents::assert_mostly_on_time("h1 -> h2", short.len(), tx.len(), &short);
    let rx = full_rows(&rows, "rx", None);
    assert_eq!(rx.len(), ticks.len(), "one rx row per peer per interval");
    for r in full_rows(&rows, "host", None) {
        assert_eq!(r.s("workers"), "2");
    }
}

/// `pid`'s peak resident memory in KiB, sampled until it exits.
fn peak_rss_kib(pid: u32) -> u64 {
    let mut peak = 0;
    // A process that has exited (a zombie until it is waited for) has no
    // VmHWM line.
    while let Some(kib) = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
    {
        peak = peak.max(kib);
        std::thread::sleep(Duration::from_millis(100));
    }
    peak
}

#[test]
fn agent_streams_of_a_pair_share_their_rtt_histograms_and_time_every_reply() {
    // 250 flow sockets to one peer, 40 pps each. A pair's streams are one
    // row, so they record their RTTs into one histogram per interval slot
    // (~16 KB each): one set per stream kept 8 MB for these 250.
    let net = 23;
    let mut fleet = Fleet::new(&mesh(net, 2, "10000", (64, 64)));
    let run = ["--interval", "1", "--duration", "3.6", "--workers", "1"];
    let h1 = fleet.spawn("h1", &[&run[..], &["--streams", "250"]].concat());
    fleet.start("h2", &run);
    let peak = peak_rss_kib(h1);
    fleet.wait_ok();
    assert!(peak > 0 && peak < 11 * 1024, "h1's peak RSS {peak} KiB");
    // Every reply is timed once: an interval's histogram holds as many RTTs
    // as replies came back in it (on time or late), over all 250 streams.
    let rows = fleet.report("h1");
    let hosts = full_rows(&rows, "host", None);
    assert!(hosts.len() >= 2, "{}", fleet.log("h1"));
    for host in hosts {
        let ts = host.s("ts");
        let samples: u64 = host
            .s("rtt_hist")
            .split(';')
            .map(|b| b.split_once(':').unwrap().1.parse::<u64>().unwrap())
            .sum();
        let replies: f64 = full_rows(&rows, "tx", None)
            .iter()
            .filter(|r| r.s("ts") == ts)
            .map(|r| r.f("rep_pkts").unwrap() + r.f("late_pkts").unwrap())
            .sum();
        assert!(replies > 9_000.0, "{ts}: {replies} replies");
        assert_eq!(samples as f64, replies, "{ts}");
    }
}

/// A 4-host layered matrix on `net` (1 peer per layer, 1 s dwell, seed 3) at
/// `pps` per pair: its text and the parsed matrix.
fn layered_matrix(net: u8, pps: &str) -> (String, Matrix) {
    let sandbox = Sandbox::new();
    let servers: String = (1..=4)
        .map(|i| format!("h{i}={}\n", addr(net, i)))
        .collect();
    sandbox.write("servers.txt", &servers);
    let run = sandbox.mx(&[
        "gen", "--peers", "1", "--seed", "3", "--dwell", "1", "--pps", pps, "-o", "-",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let matrix = Matrix::parse(run.stdout.as_bytes(), "layered.csv").unwrap();
    (run.stdout, matrix)
}

#[test]
fn agent_layered_run_visits_every_pair_in_its_layer_and_counts_replies_with_their_requests() {
    let (text, matrix) = layered_matrix(23, "max");
    let schedule = Schedule::new(&matrix);
    assert_eq!(schedule.layer_count(), 3);

    let mut fleet = Fleet::new(&text);
    for h in ["h1", "h2", "h3", "h4"] {
        fleet.start(
            h,
            &["--interval", "1", "--duration", "6.6", "--workers", "1"],
        );
    }
    fleet.wait_ok();
    let mut pairs = BTreeSet::new();
    for (src, name) in ["h1", "h2", "h3", "h4"].iter().enumerate() {
        let rows = fleet.report(name);
        assert!(
            fleet
                .log(name)
                .contains("mx agent: layered -- 3 layers of 1 peers")
        );
        for r in rows.iter().filter(|r| r.s("dir") == "tx") {
            // No drain rows: the replies still in flight when a layer ends are
            // counted in the row of their requests' interval.
            assert!(r.f("pps").is_some(), "{name}: a row without sends {r:?}");
        }
        for r in full_rows(&rows, "tx", None) {
            let ts = r.f("ts").unwrap();
            let layer = r.f("layer").expect("tx rows carry their layer") as usize;
            let peer = matrix.index_of(r.s("peer")).unwrap();
            let want: Vec<u32> = schedule
                .flows_in_layer(src as u32, layer)
                .iter()
                .map(|c| c.dst)
                .collect();
            assert_eq!(want, [peer], "{name} row {r:?} is in the wrong layer");
            // The layer of the interval that ends at ts.
            assert_eq!(schedule.layer_at(ts - 1.0), Some(layer), "{name} at {ts}");
            pairs.insert((src as u32, peer));
            // Replies are counted with their requests: never more than sent,
            // and the last ones before a switch are not lost.
            let (sent, back) = (r.f("pkts").unwrap(), r.f("rep_pkts").unwrap());
            assert!(back <= sent && sent > 0.0, "{name} {r:?}");
            assert_eq!(r.f("late_pkts"), Some(0.0), "{name} {r:?}");
        }
        for r in full_rows(&rows, "host", None) {
            assert!(r.f("layer").is_some());
        }
    }
    assert_eq!(
        pairs.len(),
        12,
        "every ordered pair of 4 hosts measured: {pairs:?}"
    );
}

#[test]
fn agent_stray_packets_are_counted_never_answered() {
    let net = 24;
    let mut fleet = Fleet::new(&mesh(net, 2, "1000", (64, 64)));
    for h in ["h1", "h2"] {
        fleet.start(h, &["--interval", "1", "--duration", "3.6"]);
    }
    std::thread::sleep(Duration::from_millis(800));
    let target = SocketAddrV4::new(addr(net, 1), PORT);
    // From a matrix host's address (h2's, another port): junk of every kind.
    let inside = plain_socket(addr(net, 2), 6000);
    let mut bad_magic = header(0, 1, 64, 64, 1, 1);
    bad_magic[..4].copy_from_slice(b"XXXX");
    let junk: Vec<Vec<u8>> = vec![
        (0..64u8)
            .map(|i| i.wrapping_mul(97).wrapping_add(13))
            .collect(),
        bad_magic,
        b"MXO1short".to_vec(),
        header(0, 7, 64, 64, 1, 1),
        header(1, 1, 64, 64, 1, 1),
    ];
    for packet in &junk {
        inside.send_to(packet, target).unwrap();
    }
    // From an address that is not in the matrix: a perfectly valid request.
    let outside = plain_socket(addr(net, 99), 6000);
    outside
        .send_to(&header(0, 1, 64, 8192, 1, 1), target)
        .unwrap();
    let mut buf = [0u8; 9000];
    assert!(inside.recv_from(&mut buf).is_err(), "junk was answered");
    assert!(
        outside.recv_from(&mut buf).is_err(),
        "a stranger was answered"
    );

    fleet.wait_ok();
    let rows = fleet.report("h1");
    let stray: f64 = rows
        .iter()
        .filter(|r| r.s("dir") == "host")
        .filter_map(|r| r.f("stray_pkts"))
        .sum();
    let final_rows = rows.iter().filter(|r| r.s("dir") == "host").count();
    assert!(final_rows >= 2);
    assert_eq!(stray, 6.0, "all six counted as stray");
    for r in full_rows(&rows, "tx", Some("h2")) {
        assert!(
            r.f("loss_pct").unwrap() < 1.0,
            "real flows undisturbed: {r:?}"
        );
    }
}

/// Runs `mx agent` for h1 of a 3-host mesh with NOFILE limited to (soft, hard).
fn agent_with_nofile(net: u8, soft: u64, hard: u64, extra: &[&str]) -> (i32, String) {
    let fleet = Fleet::new(&mesh(net, 3, "100", (64, 64)));
    let mut cmd = fleet.command("h1", extra);
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let status = cmd.status().unwrap();
    (status.code().unwrap(), fleet.log("h1"))
}

#[test]
fn agent_refuses_a_hard_fd_limit_below_the_run_and_names_the_fix() {
    // 2 peers x 200 streams = 400 sockets + 64 spare > a hard limit of 100.
    let (code, log) = agent_with_nofile(25, 100, 100, &["--streams", "200", "--duration", "1"]);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("mx: this run needs ~464 file descriptors (400 flows; each is a socket) but the hard limit is 100"),
        "{log}"
    );
    assert!(log.contains("limits.conf / systemd LimitNOFILE"));
}

#[test]
fn agent_raises_its_soft_fd_limit_by_itself() {
    let (code, log) = agent_with_nofile(
        26,
        100,
        2000,
        &["--streams", "200", "--duration", "1.2", "--interval", "1"],
    );
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("fd limit: soft 100 -> 464 (hard 2000;"),
        "{log}"
    );
}

#[test]
fn agent_bind_refusals_name_the_reason() {
    let net = 27;
    let fleet = Fleet::new(&mesh(net, 2, "100", (64, 64)));
    let run = |extra: &[&str]| {
        let out = fleet.command("h1", extra).output().unwrap();
        (out.status.code().unwrap(), fleet.log("h1"))
    };
    let (code, log) = run(&["--bind", "nosuchif0"]);
    assert_eq!(code, 2);
    assert!(
        log.contains("mx: --bind 'nosuchif0': no interface matched"),
        "{log}"
    );
    // lo's first address is 127.0.0.1; the matrix says h1 is 127.27.0.1.
    let (code, log) = run(&["--bind", "lo"]);
    assert_eq!(code, 2);
    assert!(
        log.contains("--bind put this agent on 127.0.0.1 (lo)"),
        "{log}"
    );
    assert!(log.contains("h1 is at 127.27.0.1"));
    assert!(log.contains("100% loss, guaranteed"));
}

#[test]
fn agent_bind_to_the_matrix_address_works() {
    let matrix = "src\\dst,h1=127.0.0.1:5391,h2=127.28.0.2:5392\nh1,,200\nh2,200,\n";
    let mut fleet = Fleet::new(matrix);
    fleet.start(
        "h1",
        &[
            "--bind",
            "127.0.0.1",
            "--interval",
            "1",
            "--duration",
            "2.6",
        ],
    );
    fleet.start("h2", &["--interval", "1", "--duration", "2.6"]);
    fleet.wait_ok();
    assert!(
        fleet
            .log("h1")
            .contains("bind: '127.0.0.1' -> 127.0.0.1 (lo)")
    );
    let rows = fleet.report("h1");
    let tx = full_rows(&rows, "tx", Some("h2"));
    assert!(!tx.is_empty() && tx.iter().all(|r| r.f("loss_pct").unwrap() < 1.0));
    let stamp = std::fs::read_to_string(fleet.dir("h1").join("agent.stamp")).unwrap();
    assert!(stamp.starts_with("fp="), "{stamp}");
    assert!(
        stamp.contains("\nflags=--interval 1 --duration 2.6 --bind 127.0.0.1\n"),
        "{stamp}"
    );
    assert!(
        !fleet.dir("h1").join("agent.pid").exists(),
        "pid file removed on exit"
    );
}

#[test]
fn agent_who_am_i_refusals() {
    let net = 29;
    let fleet = Fleet::new(&mesh(net, 2, "100", (64, 64)));
    let mut cmd = fleet.command("nobody", &[]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        fleet
            .log("nobody")
            .contains("mx: --host 'nobody' is not in the matrix (hosts: h1, h2)")
    );
    // Without --host, both 127.29.0.x addresses are local to this machine.
    let out = fleet.agent_here(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("several matrix hosts are local addresses (h1, h2); pass --host"),
        "{err}"
    );
}

#[test]
fn agent_a_flow_that_cannot_open_fails_the_start_not_a_quiet_empty_run() {
    // b's name resolves nowhere (.invalid never does): a's flow to it cannot open.
    let matrix = "src\\dst,a=127.31.0.1,b=nothing.invalid:5302\na,,1000\nb,1000,\n";
    let fleet = Fleet::new(matrix);
    let out = fleet
        .command("a", &["--interval", "1", "--duration", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", fleet.log("a"));
    let err = std::fs::read_to_string(fleet.dir("a").join("agent.err")).unwrap();
    assert!(
        err.contains(
            "mx: cannot reach b (nothing.invalid:5302): the address does not resolve to an IPv4 address here"
        ),
        "{err}"
    );
    // Refused before anything ran: no stamp (mx start reports the host as
    // having died on startup), no report rows.
    assert!(!fleet.dir("a").join("agent.stamp").exists());
    let report = std::fs::read_to_string(fleet.dir("a").join("report.csv")).unwrap_or_default();
    assert!(report.lines().count() <= 1, "{report}");
    // mx start refuses such a fleet before deploying anything, naming the host.
    let sb = Sandbox::new();
    sb.write("matrix.csv", matrix);
    let start = sb.mx(&["start", "--local", "hosts", "--interval", "1"]);
    assert_eq!(start.code, 2, "{}{}", start.stdout, start.stderr);
    assert!(
        start.stderr.contains(
            "mx: host 'b': 'nothing.invalid' does not resolve to an IP address on this machine"
        ),
        "{}",
        start.stderr
    );
    assert!(!sb.file("hosts").exists(), "nothing was deployed");
}

#[test]
fn agent_refuses_a_flow_across_address_families_in_one_line() {
    // An IPv4 host cannot send to an IPv6 one: the agent, and mx start before
    // anything is deployed, refuse the matrix, naming the flow and the reason.
    let matrix = "src\\dst,a=127.31.0.1,b=[::1]:5302\na,,1000\nb,,\n";
    let why = "flow a -> b crosses address families: a (IPv4, 127.31.0.1) cannot reach b (IPv6, ::1) -- a host speaks one family to all its peers; give both hosts addresses of one family, or drop the flow\n";
    let fleet = Fleet::new(matrix);
    let out = fleet.command("a", &["--duration", "3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", fleet.log("a"));
    let err = std::fs::read_to_string(fleet.dir("a").join("agent.err")).unwrap();
    assert!(err.ends_with(&format!("mx: ../matrix.csv: {why}")), "{err}");
    let sb = Sandbox::new();
    sb.write("matrix.csv", matrix);
    for cmd in [
        &["start", "--local", "hosts"][..],
        &["check"][..],
        &["summarize", "--no-collect"][..],
    ] {
        let run = sb.mx(cmd);
        assert_eq!(run.code, 2, "{cmd:?}: {}{}", run.stdout, run.stderr);
        assert_eq!(run.stderr, format!("mx: matrix.csv: {why}"), "{cmd:?}");
    }
    assert!(!sb.file("hosts").exists(), "nothing was deployed");
}

#[test]
fn agent_finds_itself_by_hostname_or_its_one_local_address() {
    let net = 30;
    let hostname = nix::unistd::gethostname().unwrap().into_string().unwrap();
    // Both addresses are local, but the hostname decides.
    let matrix = format!(
        "src\\dst,other={},{hostname}={}\n{hostname},,\nother,,100\n",
        addr(net, 1),
        addr(net, 2)
    );
    let fleet = Fleet::new(&matrix);
    let out = fleet.agent_here(&["--duration", "1.2", "--interval", "1"]);
    let log = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{log}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(log.contains(&format!("host={hostname} ")), "{log}");

    // One matrix address is this machine's, the other (RFC 2544 space, on no
    // interface here) is not: the agent is the local one. It has no flows of
    // its own, so nothing is ever sent to the other address.
    let matrix = format!(
        "src\\dst,h1={},h2=198.18.255.254\nh1,,\nh2,100,\n",
        addr(net, 1)
    );
    let fleet = Fleet::new(&matrix);
    let out = fleet.agent_here(&["--duration", "1.2", "--interval", "1"]);
    let log = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("host=h1 "), "{log}");
}

#[test]
fn agent_counts_duplicated_and_reordered_requests_and_answers_each_once() {
    let net = 31;
    // h1 (the agent) only answers; h2 is this test.
    let matrix = format!(
        "src\\dst,h1={},h2={}\nh2,100,\n",
        addr(net, 1),
        addr(net, 2)
    );
    let mut fleet = Fleet::new(&matrix);
    fleet.start(
        "h1",
        &["--interval", "1", "--duration", "2.5", "--log", "agent.out"],
    );
    std::thread::sleep(Duration::from_millis(600));
    let peer = plain_socket(addr(net, 2), PORT);
    let to = SocketAddrV4::new(addr(net, 1), PORT);
    for seq in [1u64, 1, 3, 2] {
        peer.send_to(&header(0, 1, 64, 64, seq, 5), to).unwrap();
    }
    let mut buf = [0u8; 256];
    let mut answered = Vec::new();
    while let Ok((_, _)) = peer.recv_from(&mut buf) {
        answered.push(u64::from_be_bytes(buf[16..24].try_into().unwrap()));
    }
    assert_eq!(answered, [1, 3, 2], "a duplicate is not answered again");
    fleet.wait_ok();
    let rows = fleet.report("h1");
    let rx: Vec<_> = rows.iter().filter(|r| r.s("dir") == "rx").collect();
    let sum = |col: &str| rx.iter().filter_map(|r| r.f(col)).sum::<f64>();
    assert_eq!(sum("dup_pkts"), 1.0);
    assert_eq!(sum("ooo_pkts"), 1.0);
    // --log: every line of the agent went to the file, none to stdout.
    let log = std::fs::read_to_string(fleet.dir("h1").join("agent.out")).unwrap();
    assert!(
        log.contains(concat!("mx agent ", env!("CARGO_PKG_VERSION"), ": host=h1"))
            && log.contains("mx agent: stopped"),
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(fleet.dir("h1").join("agent.log")).unwrap(),
        ""
    );
}

/// Steps the machine's wall clock by `seconds`, and back by as much when
/// dropped (even if the test fails half way).
struct ClockStep(i64);

impl ClockStep {
    fn by(seconds: i64) -> ClockStep {
        step_wall_clock(seconds);
        ClockStep(seconds)
    }
}

impl Drop for ClockStep {
    fn drop(&mut self) {
        step_wall_clock(-self.0);
    }
}

fn step_wall_clock(seconds: i64) {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime/clock_settime read and write one live timespec.
    let rc = unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut now);
        now.tv_sec += seconds as libc::time_t;
        libc::clock_settime(libc::CLOCK_REALTIME, &now)
    };
    assert_eq!(rc, 0, "stepping the clock needs root (CAP_SYS_TIME)");
}

#[test]
#[ignore = "needs root (CI runs it: --run-ignored all)"]
fn agent_clock_steps_mid_run_neither_stall_nor_skew_a_layered_run() {
    crate::util::require_root("stepping the wall clock");
    let (text, matrix) = layered_matrix(34, "1000");
    let schedule = Schedule::new(&matrix);
    let mut fleet = Fleet::new(&text);
    for h in ["h1", "h2", "h3", "h4"] {
        fleet.start(h, &["--interval", "1", "--duration", "9", "--workers", "1"]);
    }
    let started = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(2500));
    {
        // Forward 30 s for 3 s, then back: both steps land mid-run.
        let _step = ClockStep::by(30);
        std::thread::sleep(Duration::from_secs(3));
    }
    // The agents end on their monotonic deadline: nothing stalled.
    fleet.wait_ok();
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    for (src, name) in ["h1", "h2", "h3", "h4"].iter().enumerate() {
        let rows = fleet.report(name);
        let ticks: Vec<i64> = rows
            .iter()
            .filter(|r| r.s("dir") == "host")
            .map(|r| r.f("ts").unwrap() as i64)
            .collect();
        // One host row per second, on the timeline the run started on: no
        // gap, no repeat, no burst of rows.
        assert!(ticks.len() >= 8, "{name}: {ticks:?}");
        assert!(
            ticks.windows(2).all(|w| w[1] == w[0] + 1),
            "{name}: {ticks:?}"
        );
        for r in full_rows(&rows, "tx", None) {
            let ts = r.f("ts").unwrap();
            // Every full interval carries the full rate: the steps did not
            // shorten or stretch an interval's arithmetic. A 30 s step that
            // leaked into it would read 30x off; the 10% margin is the honest
            // shortfall of a pacer starved for tens of ms on a loaded 2-core
            // CI box (it never bursts to catch up), seen at 966 pps there.
            let pps = r.f("pps").unwrap();
            assert!((pps - 1000.0).abs() <= 100.0, "{name} ts={ts}: {pps} pps");
            // ... and the flows are the layer of their label, as on every host.
            let layer = r.f("layer").unwrap() as usize;
            let peer = matrix.index_of(r.s("peer")).unwrap();
            let want: Vec<u32> = schedule
                .flows_in_layer(src as u32, layer)
                .iter()
                .map(|c| c.dst)
                .collect();
            assert!(want.contains(&peer), "{name} ts={ts}: layer {layer}");
        }
    }
}

/// A small tmpfs mounted at `dir`, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: std::path::PathBuf) -> SmallDisk {
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "mxdisk"])
            .arg(&dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount a tmpfs (needs root)");
        SmallDisk(dir)
    }

    /// Writes a file until the disk refuses: the disk is full.
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.0.join("filler")).unwrap();
        let chunk = [0u8; 4096];
        while filler.write_all(&chunk).is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
#[ignore = "needs root (CI runs it: --run-ignored all)"]
fn agent_a_full_disk_holds_the_report_and_loses_nothing_when_space_returns() {
    crate::util::require_root("mounting a small disk");
    let net = 35;
    let mut fleet = Fleet::new(&mesh(net, 2, "1000", (64, 64)));
    std::fs::create_dir_all(fleet.dir("h1")).unwrap();
    let disk = SmallDisk::mount(fleet.dir("h1").join("disk"));
    let args = ["--interval", "1", "--duration", "9"];
    fleet.start(
        "h1",
        &[&args[..], &["--report", "disk/report.csv"]].concat(),
    );
    fleet.start("h2", &args);
    std::thread::sleep(Duration::from_millis(2500));
    disk.fill();
    std::thread::sleep(Duration::from_secs(3));
    disk.free();
    fleet.wait_ok();
    let log = fleet.log("h1");
    assert!(
        log.contains("cannot write the report (No space left on device"),
        "{log}"
    );
    assert!(
        log.contains("the report is being written again: nothing was lost"),
        "{log}"
    );
    // Every row whole, every interval there, one per second, at full rate.
    let text = std::fs::read_to_string(disk.0.join("report.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap().split(',').count(), COLUMNS.len());
    let mut ticks = Vec::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), COLUMNS.len(), "a torn row: {line:?}");
        if cells[2] == "host" {
            ticks.push(cells[0].parse::<i64>().unwrap());
        }
        if cells[2] == "tx" && !ticks.is_empty() && line.ends_with('\r') {
            let pps: f64 = cells[7].parse().unwrap();
            assert!(pps > 900.0, "traffic went on: {line}");
        }
    }
    assert!(ticks.len() >= 7, "{ticks:?}");
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "{ticks:?}");
}

/// An agent whose directory is deleted under it (`rm -rf /var/tmp/mx`, a
/// wiped sandbox) can no longer be stopped by `mx stop` or collected: it
/// stops itself, rather than run on as a trace nobody can find.
#[test]
fn agent_whose_directory_is_deleted_stops_itself() {
    let net = 44;
    let fleet = Fleet::new(&mesh(net, 2, "1000", (64, 64)));
    let home = fleet.dir("h1");
    std::fs::create_dir_all(&home).unwrap();
    let log = fleet.sandbox.file("h1.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mx"))
        .current_dir(&home)
        .args(["agent", "--matrix", "../matrix.csv", "--host", "h1"])
        .args(["--interval", "1"])
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !home.join("report.csv").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_dir_all(&home).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the agent ran on after its directory was deleted");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{status:?}\n{text}");
    assert!(
        text.contains(
            "was deleted: no one can stop this agent or collect its report, so it stops now"
        ),
        "{text}"
    );
}

/// A run whose planned end falls inside an interval sends for only part of
/// it; that interval's rates are per second of sending, so it reads at the
/// rate that was sent, not as a slower one (half of it, here).
#[test]
fn agent_an_end_inside_an_interval_reads_at_the_rate_sent() {
    let net = 45;
    let mut fleet = Fleet::new(&mesh(net, 2, "1000", (64, 64)));
    // Flows begin on a tick and end 3 s later: a whole interval, then one
    // the end cuts to its first second.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let start = ((now + 3) / 2 * 2).to_string();
    let args = ["--interval", "2", "--duration", "3", "--start-at", &start];
    fleet.run_all(&["h1", "h2"], &args);
    let rows = fleet.report("h1");
    let tx: Vec<&crate::agents::Row> = rows.iter().filter(|r| r.s("dir") == "tx").collect();
    let last = tx.last().expect("tx rows");
    let (pkts, pps) = (last.f("pkts").unwrap(), last.f("pps").unwrap());
    assert!(
        (800.0..=1200.0).contains(&pkts),
        "the last interval sent {pkts} requests in its 1 s"
    );
    assert!(
        (900.0..=1100.0).contains(&pps),
        "the interval the end cut short reads {pps} pps for a 1000 pps flow\n{}",
        fleet.report_text("h1")
    );
    let rx = rows.iter().rfind(|r| r.s("dir") == "rx").unwrap();
    let pps = rx.f("pps").unwrap();
    assert!(
        (900.0..=1100.0).contains(&pps),
        "the last rx row reads {pps} pps"
    );
}

/// A receiver held off the CPU across a tick (stopped here, as a loaded box
/// holds it) closes that interval late, after the run's end. The requests it
/// counts for an interval are those its peer sent in it, by the tag they
/// carry, so their rate is over the interval's own span: not over the time
/// the receiver took to close it (too long: the late interval read slow),
/// nor over what was left of the run after (nothing: the short last one read
/// 1,000 times the rate sent).
#[test]
fn agent_held_off_the_cpu_across_a_tick_reads_its_rx_at_the_rate_sent() {
    let net = 47;
    let mut fleet = Fleet::new(&mesh(net, 2, "200", (64, 64)));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // Flows begin on a tick at least 2 s away and end 3 s later: a whole
    // interval, then one the end cuts to its first second.
    let start = ((now as u64 + 4) / 2 * 2) as f64;
    let args = [
        "--interval",
        "2",
        "--duration",
        "3",
        "--start-at",
        &format!("{start}"),
    ];
    fleet.start("h1", &args);
    let h2 = fleet.spawn("h2", &args);
    // h2 is stopped from 0.2 s before the first tick to 0.4 s past the end.
    let at = |t: f64| {
        let wait = t - std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        std::thread::sleep(Duration::from_secs_f64(wait.max(0.0)));
    };
    let signal = |sig: nix::sys::signal::Signal| {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(h2 as i32), sig).unwrap()
    };
    at(start + 1.8);
    signal(nix::sys::signal::Signal::SIGSTOP);
    at(start + 3.4);
    signal(nix::sys::signal::Signal::SIGCONT);
    fleet.wait_ok();
    let rows = fleet.report("h2");
    let rx: Vec<&crate::agents::Row> = rows.iter().filter(|r| r.s("dir") == "rx").collect();
    assert_eq!(rx.len(), 2, "{}", fleet.report_text("h2"));
    for (row, seconds) in rx.iter().zip([2.0, 1.0]) {
        let (pkts, pps) = (row.f("pkts").unwrap(), row.f("pps").unwrap());
        assert!(
            (0.9 * 200.0 * seconds..=1.1 * 200.0 * seconds).contains(&pkts),
            "h2 counted {pkts} requests in a {seconds} s interval at 200 pps\n{}",
            fleet.report_text("h2")
        );
        assert!(
            (180.0..=220.0).contains(&pps),
            "h2's rx row at {} reads {pps} pps of h1's 200\n{}",
            row.s("ts"),
            fleet.report_text("h2")
        );
    }
}

/// Two agents started by hand a second apart, without `--start-at`: each
/// begins its flows at once and ends them `--duration` later. h1 starts
/// 1.8 s before a tick; h2 starts 0.8 s before it, under half an interval,
/// so its first interval runs to the tick after (2.8 s), and it ends a
/// second after h1. h1 counts each of h2's requests in the interval h2
/// sent it in, so their rate is over the time they arrived in: h2's first
/// interval, wider than h1's; h1's last, cut by h1's end while h2 still
/// sends. Over h1's own spans they read 1.4 times the rate sent, and the
/// last several times it.
#[test]
fn agents_started_by_hand_apart_read_their_rx_at_the_rate_sent() {
    let net = 48;
    let mut fleet = Fleet::new(&mesh(net, 2, "1000", (64, 64)));
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let at = |t: f64| std::thread::sleep(Duration::from_secs_f64((t - wall()).max(0.0)));
    let tick = (wall() / 2.0).ceil() * 2.0 + 2.0;
    let args = ["--interval", "2", "--duration", "7", "--workers", "2"];
    at(tick - 1.8);
    fleet.start("h1", &args);
    at(tick - 0.8);
    fleet.start("h2", &args);
    fleet.wait_ok();
    let rows = fleet.report("h1");
    let rx: Vec<&crate::agents::Row> = rows
        .iter()
        .filter(|r| r.s("dir") == "rx" && r.f("pkts").unwrap() >= 100.0)
        .collect();
    // h2's first interval, two whole ones, and h1's last (1.2 s long).
    assert!(rx.len() >= 3, "{}", fleet.report_text("h1"));
    for row in rx {
        let pps = row.f("pps").unwrap();
        assert!(
            (900.0..=1100.0).contains(&pps),
            "h1's rx row at {} reads {pps} pps of h2's 1000\n{}",
            row.s("ts"),
            fleet.report_text("h1")
        );
    }
}
