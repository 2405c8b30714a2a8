//! `mx trace` on loopback agents: what it sweeps, what it writes, and what
//! it refuses. The fabric lab (lab_fabric.rs) is where a trace names a link;
//! here each stream's path is one hop, and the sweeps' rules are checked.

use crate::fleet_local::fleet_dir_with;
use matrix_orchestrator::report::paths::{self, HopKind, Leg};

/// After a clean run, `mx trace` finds nothing to sweep and says so; with
/// `--all` it sweeps every stream both ways, requests from their senders'
/// ports and replies from the responders', into paths.trace beside the
/// reports, each one hop (loopback) reached.
#[test]
fn agent_trace_after_a_clean_run_sweeps_only_when_asked_and_writes_every_leg() {
    let sb = fleet_dir_with(211, &["h1", "h2"], &["--pps", "200"]);
    let run = sb.mx(&[
        "run",
        "--local",
        "hosts",
        "--for",
        "3",
        "--interval",
        "1",
        "--streams",
        "4",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        !run.stdout.contains("[mx] trace:"),
        "a clean run sweeps nothing: {}",
        run.stdout
    );
    let nothing = sb.mx(&["trace", "--local", "hosts", "--no-collect", "--window", "0"]);
    assert_eq!(nothing.code, 0, "{}{}", nothing.stdout, nothing.stderr);
    assert!(
        nothing.stdout.contains(
            "[mx] trace: nothing to trace -- no flow's loss sat on some of its paths alone (--all sweeps every stream)"
        ),
        "{}",
        nothing.stdout
    );
    assert!(!sb.file("reports").join(paths::FILE).exists());

    let all = sb.mx(&[
        "trace",
        "--local",
        "hosts",
        "--no-collect",
        "--window",
        "0",
        "--all",
        "--probes",
        "3",
    ]);
    assert_eq!(all.code, 0, "{}{}", all.stdout, all.stderr);
    // 2 flows of 4 streams, each swept both ways, by both hosts.
    assert!(
        all.stdout
            .contains("[mx] trace: 8 streams, both ways: 16 sweeps from 2 hosts, 3 probes a TTL"),
        "{}",
        all.stdout
    );
    assert!(
        all.stdout.contains("[mx] trace: 16 of 16 legs swept"),
        "{}",
        all.stdout
    );
    let traced = paths::read(&sb.file("reports").join(paths::FILE))
        .unwrap()
        .expect("paths.trace");
    assert_eq!(traced.paths.len(), 16);
    for p in &traced.paths {
        let hops = p.hops.as_ref().unwrap();
        assert_eq!(hops.len(), 1, "{p:?}");
        let want = if p.to == "h1" {
            "127.211.0.1"
        } else {
            "127.211.0.2"
        };
        assert_eq!(hops[0].kind, HopKind::Reached(want.into()), "{p:?}");
        assert_eq!((hops[0].sent, hops[0].answered), (3, 3), "{p:?}");
    }
    // Each stream's requests from its sender, its replies back to the same
    // port from its responder.
    for leg in [Leg::Requests, Leg::Replies] {
        assert_eq!(traced.paths.iter().filter(|p| p.leg == leg).count(), 8);
    }
    let ports = |leg: Leg, from: &str| -> Vec<u16> {
        let mut p: Vec<u16> = traced
            .paths
            .iter()
            .filter(|p| p.leg == leg && p.from == from)
            .map(|p| p.sport)
            .collect();
        p.sort_unstable();
        p
    };
    assert_eq!(ports(Leg::Requests, "h1"), ports(Leg::Replies, "h2"));
    assert_eq!(ports(Leg::Requests, "h2"), ports(Leg::Replies, "h1"));
    // A summary reads it quietly: nothing lost, no link named.
    let summary = sb.mx(&[
        "summarize",
        "--local",
        "hosts",
        "--no-collect",
        "--window",
        "0",
        "--json",
    ]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    assert!(
        !summary.stdout.contains("\"where\": \"link\""),
        "{}",
        summary.stdout
    );
}

/// While the agents run, their flows hold the ports a sweep binds: each
/// host refuses and says why, the command exits 1 naming each host once,
/// and nothing swept writes no paths.trace.
#[test]
fn agent_trace_while_the_agents_run_is_refused_by_each_host() {
    let sb = fleet_dir_with(212, &["h1", "h2"], &["--pps", "200"]);
    let start = sb.mx(&[
        "start",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--streams",
        "2",
    ]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let reports = crate::fleet_local::local_reports(&sb, &["h1", "h2"], "mx");
    crate::util::wait_for_steady(&reports, 2);
    let trace = sb.mx(&["trace", "--local", "hosts", "--all", "--window", "0"]);
    assert_eq!(trace.code, 1, "{}{}", trace.stdout, trace.stderr);
    assert!(
        trace.stdout.contains(
            "an agent runs here: its flows hold the ports a sweep binds -- trace once the run has ended"
        ),
        "{}",
        trace.stdout
    );
    assert!(
        trace.stdout.contains("[mx] trace: FAILED on h1 ("),
        "{}",
        trace.stdout
    );
    assert!(
        trace.stdout.contains("[mx] trace: 0 of 8 legs swept\n"),
        "{}",
        trace.stdout
    );
    assert_eq!(
        trace.stdout.matches("FAILED on").count(),
        1,
        "{}",
        trace.stdout
    );
    assert_eq!(trace.stdout.matches("h1 (").count(), 1, "{}", trace.stdout);
    assert!(!sb.file("reports").join(paths::FILE).exists());
    let stop = sb.mx(&["stop", "--local", "hosts"]);
    assert_eq!(stop.code, 0, "{}", stop.stdout);
}
