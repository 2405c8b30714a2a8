//! Two pools in the lab, as a fabric is qualified (docs/pools.md):
//! three hosts behind one "top-of-rack" bridge, three behind another, the
//! bridges joined by one uplink capped with tbf, and the pool-to-pool run
//! over the data NICs (`--bind eth1`). The summary's pool lines must show
//! the cap, on the leg that crosses it.

use std::process::Command;

use crate::lab::Lab;
use crate::lab_faults::{grid, run_and_summarize};

/// The second pool's own bridge and the uplink to the first, torn down on
/// drop (lab.sh knows only its own links).
struct SecondTor {
    net: u8,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl SecondTor {
    /// Moves hosts `hosts`' data NICs (their eth1 veths) onto a new bridge
    /// joined to the lab's data bridge by one veth pair, and caps that link
    /// at `rate` toward the new bridge: the second pool's uplink.
    fn split(net: u8, hosts: &[usize], rate: &str) -> SecondTor {
        let tor = SecondTor { net };
        let (bridge, up, down) = tor.names();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["link", "set", &bridge, "up"]);
        for i in hosts {
            ip(&["link", "set", &format!("mx{net}w{i}"), "master", &bridge]);
        }
        ip(&["link", "add", &up, "type", "veth", "peer", "name", &down]);
        ip(&["link", "set", &up, "master", &format!("mxbd{net}"), "up"]);
        ip(&["link", "set", &down, "master", &bridge, "up"]);
        let out = Command::new("tc")
            .args([
                "qdisc", "replace", "dev", &up, "root", "tbf", "rate", rate, "burst", "32kb",
                "latency", "20ms",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tor
    }

    fn names(&self) -> (String, String, String) {
        let net = self.net;
        (
            format!("mxbe{net}"),
            format!("mx{net}u0"),
            format!("mx{net}u1"),
        )
    }
}

impl Drop for SecondTor {
    fn drop(&mut self) {
        let (bridge, up, _) = self.names();
        let _ = Command::new("ip").args(["link", "del", &up]).status();
        let _ = Command::new("ip").args(["link", "del", &bridge]).status();
    }
}

/// The figure after `label` on the first line of the pool section that has it.
fn pool_figure(summary: &str, label: &str) -> String {
    let section = &summary[summary.find("  POOL tor1 -> tor2").expect("a pool section")..];
    let line = section
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no {label} line\n{summary}"));
    line.trim_start()[label.len()..].trim_start().to_string()
}

/// "3.6 kpps ..." -> 3600.
fn leading_pps(text: &str) -> f64 {
    let mut words = text.split_whitespace();
    let value: f64 = words.next().unwrap().parse().unwrap();
    match words.next().unwrap() {
        "pps" => value,
        "kpps" => value * 1e3,
        "Mpps" => value * 1e6,
        unit => panic!("unit {unit}"),
    }
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_pool_to_pool_through_a_capped_uplink_shows_the_cap() {
    let lab = Lab::up(95, 6);
    let _tor2 = SecondTor::split(lab.net(), &[4, 5, 6], "30mbit");
    let sb = crate::util::Sandbox::new();
    let servers = std::fs::read_to_string(lab.dir.join("servers.txt")).unwrap();
    let lines: Vec<&str> = servers.lines().collect();
    sb.write("tor1.txt", &(lines[..3].join("\n") + "\n"));
    sb.write("tor2.txt", &(lines[3..].join("\n") + "\n"));
    // 9 flows of 1000-byte requests at 1000/s: 9000 requests a second, each
    // 1042 bytes at the uplink's tbf (UDP, IPv4, Ethernet): 75 Mb/s into a
    // 30 Mb/s cap. Replies (64 bytes) come back on the uncapped side.
    let run = sb.mx(&[
        "gen",
        "--pool",
        "tor1=tor1.txt",
        "--pool",
        "tor2=tor2.txt",
        "--pps",
        "1000",
        "--tx-size",
        "1000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary = run_and_summarize(&lab, &sb, 9, "6", &["--bind", "eth1"]);
    eprintln!("{summary}");

    let capped = 30e6 / (1042.0 * 8.0);
    let requests = leading_pps(&pool_figure(&summary, "REQUESTS"));
    let delivered = leading_pps(&pool_figure(&summary, "DELIVERED"));
    // The senders' own pace is not what this test is about (a busy 2-core
    // machine may hold them a little under): the cap is measured against
    // what they did send.
    assert!(requests > 9000.0 * 0.8, "tor1 sent {requests}\n{summary}");
    assert!(
        (delivered - capped).abs() < capped * 0.15,
        "delivered {delivered} through a {capped:.0}/s cap\n{summary}"
    );
    // The loss is the forward leg's (into tor2), none on the way back.
    let loss = pool_figure(&summary, "LOSS");
    let forward: f64 = loss
        .split("round trip (")
        .nth(1)
        .and_then(|t| t.split('%').next())
        .unwrap()
        .parse()
        .unwrap();
    let want = (1.0 - capped / requests) * 100.0;
    assert!((forward - want).abs() < 8.0, "{loss} (want ~{want:.0}%)");
    assert!(
        loss.contains(", 0.00% on the way back)") || loss.contains(", 0.01% on the way back)"),
        "{loss}"
    );
    // The grid: cells across the pools measured, inside a pool blank.
    let cells = grid(&sb, "loss_grid.csv");
    for a in ["h1", "h2", "h3"] {
        for b in ["h4", "h5", "h6"] {
            let key = (a.to_string(), b.to_string());
            assert!(cells[&key] > 30.0, "{a} -> {b}: {cells:?}");
            assert!(!cells.contains_key(&(b.to_string(), a.to_string())));
        }
    }
    for pool in [["h1", "h2", "h3"], ["h4", "h5", "h6"]] {
        for a in pool {
            for b in pool {
                assert!(
                    !cells.contains_key(&(a.to_string(), b.to_string())),
                    "{a} -> {b} inside a pool has a figure: {cells:?}"
                );
            }
        }
    }
}
