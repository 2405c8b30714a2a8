//! Finding the limit on the lab: a tbf rate cap on one host's link, and the
//! knee `mx run --ramp` finds on the running fleet.

use crate::lab::Lab;
use crate::lab_faults::cap_link;

/// Bytes a 64-byte request or reply takes on the capped link as tbf counts
/// it: the UDP payload, and the UDP, IP and Ethernet headers.
const FRAME_BYTES: f64 = 64.0 + 8.0 + 20.0 + 14.0;
/// The cap on h2's eth1, bits per second.
const CAP_BPS: f64 = 2e6;

/// `highest rate that held: N pps` of the ramp's conclusion.
fn highest_held(text: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with("highest rate that held: "))
        .unwrap_or_else(|| panic!("no conclusion:\n{text}"));
    line["highest rate that held: ".len()..]
        .split(" pps")
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_ramp_finds_the_knee_of_a_rate_capped_link_within_10_percent() {
    let lab = Lab::up(110, 3);
    let sb = lab.controller("200");
    // The traffic rides eth1 (--bind), ssh stays on eth0. h2's eth1 carries
    // its requests to h1 and h3 and its replies to theirs: 4 flows' worth of
    // 64-byte datagrams, 106 bytes each as tbf counts them. At x1 (200 pps a
    // flow) that is 4 x 200 x 106 x 8 = 678 kbit/s: a 2 Mbit/s cap is x2.95.
    // Past it the link loses what does not fit, and what does waits in tbf's
    // queue (its limit is 20 ms of the rate plus the 16 KB burst: ~85 ms),
    // so both delivery and the p99 tail say so.
    cap_link(&lab, 2, "2mbit");
    let run = lab.mx(
        &sb,
        &[
            "run",
            "--bind",
            "eth1",
            "--interval",
            "1",
            "--no-gso",
            "--ramp",
            "2:4",
            "--ramp-step",
            "0.5",
            "--ramp-hold",
            "4",
            "--min-delivered",
            "97",
            "--max-p99",
            "50ms",
            "--bisect",
        ],
    );
    eprintln!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("the limit lies between x"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains(" b  "), "it bisected: {}", run.stdout);
    // The steps that fell short say where, as the summary would: out of h2,
    // in its transmit path (its qdisc dropped what did not fit); and so
    // does the answer.
    let failed: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("FAILED") && l.starts_with("  "))
        .collect();
    assert!(!failed.is_empty(), "{}", run.stdout);
    for line in &failed {
        assert!(
            line.contains("h2's transmit path"),
            "{line}\n{}",
            run.stdout
        );
    }
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("what set it: ") && l.contains("h2's transmit path")),
        "{}",
        run.stdout
    );
    // The fleet's highest rate that held, as h2's load on its capped link.
    let held = highest_held(&run.stdout);
    let per_flow = held / 6.0;
    let load = 4.0 * per_flow * FRAME_BYTES * 8.0;
    assert!(
        (load - CAP_BPS).abs() <= 0.10 * CAP_BPS,
        "knee {held} pps = {:.0} kbit/s on h2's link, cap {:.0} kbit/s\n{}",
        load / 1e3,
        CAP_BPS / 1e3,
        run.stdout
    );
    // The agents were never restarted: each logged one start.
    for i in 1..=3 {
        assert!(lab.agents(i).is_empty(), "h{i}'s agent ended");
    }
    let logs = lab.mx(&sb, &["logs"]);
    assert_eq!(logs.code, 0, "{}", logs.stdout);
    for h in ["h1", "h2", "h3"] {
        let log = sb.read(&format!("logs/{h}.log"));
        assert_eq!(log.matches("mx agent ").count(), 1, "{log}");
    }
    assert_eq!(lab.mx(&sb, &["clean", "--yes"]).code, 0);
}
