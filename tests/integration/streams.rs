//! Each stream of a pair counted apart: the report's `streams` cell, held
//! against the truth of a drop planted on some streams' source ports, and
//! the summary that reads it as a path's loss, not a host's.

use crate::agents::{Fleet, NetNs, PORT, Row, RowExt, one_way_pair, start_soon};
use crate::util::findings_of;
use serde_json::Value;

/// The streams of a tx row's cell: (port, sent, replies, settled, fwd, ret).
fn streams_of(row: &Row) -> Vec<[u64; 6]> {
    let cell = row.s("streams");
    assert!(!cell.is_empty(), "a tx row counts its streams: {row:?}");
    cell.split(';')
        .map(|s| {
            let f: Vec<u64> = s.split(':').map(|v| v.parse().unwrap()).collect();
            assert_eq!(f.len(), 6, "both legs told: {s}");
            [f[0], f[1], f[2], f[3], f[4], f[5]]
        })
        .collect()
}

/// h1 sends to h2 from 8 streams whose source ports are 40000-40007 (the
/// namespace's whole ephemeral range); 10% of the requests from 40000-40003
/// are dropped on their way into h2, none from the rest. Each row's streams
/// add up to the row; the four lose about 10% forward, the other four none;
/// and the summary names those four ports as one path's loss, blaming no
/// host.
#[test]
#[ignore = "needs root: a network namespace with nftables (CI runs it: --run-ignored all)"]
fn agent_streams_are_counted_apart_and_loss_on_some_of_them_is_a_path_s() {
    let ns = NetNs::new("mxstreams");
    ns.run(
        &["sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40007"],
        true,
    );
    ns.nft(&format!(
        "table inet mxstreams {{\n  chain in {{\n    type filter hook input priority 0;\n    udp dport {PORT} udp sport 40000-40003 numgen random mod 100 < 10 counter drop\n  }}\n}}\n"
    ));
    let matrix = one_way_pair(1, 4000);
    let mut fleet = Fleet::in_netns(&matrix, &ns);
    let start = start_soon();
    let args = [
        "--interval",
        "1",
        "--duration",
        "6",
        "--streams",
        "8",
        "--start-at",
        &start,
    ];
    fleet.run_all(&["h1", "h2"], &args);
    let log = || fleet.report_text("h1");
    let rows: Vec<Row> = fleet
        .report("h1")
        .into_iter()
        .filter(|r| r.s("dir") == "tx")
        .collect();
    assert!(rows.len() >= 5, "{}", log());
    let mut by_port = std::collections::BTreeMap::<u64, [u64; 3]>::new();
    for r in &rows {
        let streams = streams_of(r);
        let ports: Vec<u64> = streams.iter().map(|s| s[0]).collect();
        assert_eq!(ports, (40_000..=40_007).collect::<Vec<_>>(), "{r:?}");
        let sum = |i: usize| streams.iter().map(|s| s[i]).sum::<u64>();
        assert_eq!(
            [sum(1), sum(2), sum(3), sum(4), sum(5)],
            [
                "pkts",
                "rep_pkts",
                "settled_pkts",
                "fwd_lost_pkts",
                "ret_lost_pkts"
            ]
            .map(|c| r.f(c).unwrap() as u64),
            "the streams add up to the row: {r:?}"
        );
        for s in streams {
            let t = by_port.entry(s[0]).or_default();
            t[0] += s[3];
            t[1] += s[4];
            t[2] += s[5];
        }
    }
    for (port, [settled, fwd, ret]) in &by_port {
        assert!(*settled > 1_500, "{port}: {settled} settled\n{}", log());
        assert_eq!(*ret, 0, "{port}: no reply is dropped\n{}", log());
        let share = *fwd as f64 / *settled as f64;
        if *port <= 40_003 {
            assert!((0.06..=0.14).contains(&share), "{port}: {share}\n{}", log());
        } else {
            assert_eq!(*fwd, 0, "{port}\n{}", log());
        }
    }

    let run = fleet.summarize(&["h1", "h2"], &["--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let flow = doc["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["src"] == "h1")
        .unwrap();
    assert_eq!(flow["streams"].as_array().unwrap().len(), 8, "{flow}");
    let loss = findings_of(&doc, "loss");
    assert_eq!(loss.len(), 1, "one loss finding: {loss:?}");
    let finding = loss[0];
    let text = finding["text"].as_str().unwrap();
    println!("{text}");
    assert!(
        text.starts_with("requests lost on some paths alone: 4 of the 8 streams of h1 -> h2")
            && text.contains("ports 40000, 40001, 40002, 40003)"),
        "{text}"
    );
    for b in finding["blames"].as_array().unwrap() {
        assert_eq!(b["where"], "path", "{finding}");
        assert_eq!((&b["host"], &b["peer"]), (&"h1".into(), &"h2".into()));
    }
}
