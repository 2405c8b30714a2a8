//! Every kind of finding, written: one of each thing a finding can say,
//! and each reason it can give, against the golden file beside this one.

use super::*;
use crate::analysis::diagnosis::Kind;
use crate::analysis::diagnosis::says::*;

fn nic(counted: bool) -> Nic {
    Nic {
        host: "h2".into(),
        name: Some("eth0".into()),
        counted,
    }
}

fn starved() -> Starvation {
    Starvation {
        throttled_ms: Some(420.0),
        behind_ms: Some(310.0),
    }
}

/// Each reason a host's loss can sit where it does.
fn every_why() -> Vec<Why> {
    vec![
        Why::StarvedReader {
            host: "h2".into(),
            starved: starved(),
            dropped: 3.0,
            late: 10.0,
            disk_busy_pct: None,
        },
        Why::StarvedReader {
            host: "h2".into(),
            starved: starved(),
            dropped: 0.0,
            late: 10.0,
            disk_busy_pct: Some(42.0),
        },
        Why::SocketsOverflowed {
            host: "h2".into(),
            dropped: 1_234.0,
            late: 0.0,
            disk_busy_pct: None,
        },
        Why::SocketsOverflowed {
            host: "h2".into(),
            dropped: 1_234.0,
            late: 5.0,
            disk_busy_pct: Some(80.0),
        },
        Why::NicRxDrops {
            nic: nic(true),
            drops: 5_000.0,
        },
        Why::DiskHeldReads {
            host: "h2".into(),
            busy_pct: 64.0,
        },
        Why::DroppedAfterNic {
            nic: nic(true),
            unread: 2_500.0,
        },
        Why::LostBeforeNic { nic: nic(true) },
        Why::PartlyAfterNic {
            nic: nic(true),
            unread: 700.0,
        },
        Why::IntoUncompared { nic: nic(true) },
        Why::IntoUncompared { nic: nic(false) },
    ]
    .into_iter()
    .chain(out_of_whys())
    .collect()
}

/// Each reason a host's loss out of it can sit where it does.
fn out_of_whys() -> Vec<Why> {
    vec![
        Why::StarvedSender {
            nic: nic(true),
            starved: starved(),
            unsent: 9_000.0,
        },
        Why::CappedEgress {
            nic: nic(true),
            sndbuf_errors: 55_130.0,
            unanswered: 87_205.0,
            unsent: 33_721.0,
            egress_bps: Some(20e6),
        },
        Why::CappedEgress {
            nic: nic(true),
            sndbuf_errors: 55_130.0,
            unanswered: 0.0,
            unsent: 33_721.0,
            egress_bps: None,
        },
        Why::NeighbourTable {
            host: "h39".into(),
            ipv6: false,
            dropped: 3_456.0,
            table_fulls: 26_409.0,
            res_failed: 12.0,
        },
        Why::NeighbourTable {
            host: "h39".into(),
            ipv6: true,
            dropped: 3_456.0,
            table_fulls: 0.0,
            res_failed: 40.0,
        },
        Why::AnsweredLate {
            host: "h2".into(),
            starved: Starvation {
                throttled_ms: None,
                behind_ms: Some(1_299.0),
            },
            late_answers: 4_000.0,
        },
        Why::LostAfterNic { nic: nic(true) },
        Why::PartlyOnHost {
            nic: nic(true),
            kept_back: 55_130.0,
            unsent: 33_721.0,
            lost: 120_324.0,
        },
        Why::OutUncompared { nic: nic(true) },
        Why::PathBetween {
            from: "h3".into(),
            to: "h5".into(),
            streams: 1,
        },
    ]
}

fn leg(peers: &[&str], loss: &[f64]) -> LegLoss {
    LegLoss {
        peers: peers.iter().map(|p| p.to_string()).collect(),
        loss_pct: loss.to_vec(),
    }
}

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

/// One of each thing a finding can say, with each of its variants.
fn every_finding() -> Vec<(Kind, Says)> {
    let mut out = loss_findings();
    out.extend(starved_host_findings());
    out.extend(path_findings());
    out.extend(link_findings());
    out.extend(pool_findings());
    out.extend(rate_findings());
    out.extend(agent_findings());
    out.extend(tail_findings());
    out.extend(route_findings());
    out
}

/// A route that changed once for one way, and one that flapped for many.
fn route_findings() -> Vec<(Kind, Says)> {
    use crate::analysis::routes::Hops;
    let way = |from: &str, to: &str| RouteWay {
        from: from.into(),
        to: to.into(),
    };
    let hops = |fewest, most| Hops { fewest, most };
    vec![
        (
            Kind::Route,
            Says::RouteChange {
                ways: vec![way("h1", "h3")],
                hops: vec![hops(2, 2), hops(2, 3), hops(3, 3)],
                at: 1_700_000_000,
                changes: 2,
            },
        ),
        (
            Kind::Route,
            Says::RouteChange {
                ways: ["h1", "h2", "h3", "h4", "h5", "h6"]
                    .iter()
                    .map(|h| way(h, "h9"))
                    .collect(),
                hops: vec![hops(3, 3), hops(5, 5), hops(3, 3)],
                at: 1_700_000_000,
                changes: 14,
            },
        ),
    ]
}

/// Loss on some of each flow's paths: on the requests, and on the replies
/// into one host (whose NIC's queues fit too).
fn path_findings() -> Vec<(Kind, Says)> {
    let mut out = Vec::new();
    let path_flow = |from: &str, to: &str, ports: &[u16], lost: f64| PathFlow {
        from: from.into(),
        to: to.into(),
        lossy_ports: ports.to_vec(),
        streams: 8,
        lost,
        lost_pct: 10.1,
    };
    out.push((
        Kind::Loss,
        Says::PathLoss {
            leg: LegName::Requests,
            flows: vec![
                path_flow("h1", "h3", &[40_001, 40_004, 40_006], 1_520.0),
                path_flow("h2", "h4", &[39_877], 505.0),
            ],
            one_receiver: None,
        },
    ));
    out.push((
        Kind::Loss,
        Says::PathLoss {
            leg: LegName::Replies,
            flows: (1..=7)
                .map(|i| path_flow(&format!("h{i}"), "h9", &[40_000 + i], 100.0))
                .collect(),
            one_receiver: Some("h9".into()),
        },
    ));
    out
}

/// The link the traced paths name: one alone, one of two the probes tell
/// apart, two they cannot.
fn link_findings() -> Vec<(Kind, Says)> {
    let link = |from: &str, to: &str| LinkName {
        from: from.into(),
        to: to.into(),
    };
    let probes = |far: (u64, u64), near: (u64, u64)| ProbeCount {
        far_sent: far.0,
        far_unanswered: far.1,
        near_sent: near.0,
        near_unanswered: near.1,
    };
    let lossy: Vec<String> = (0..6)
        .map(|i| format!("h1:{} -> h3", 40_000 + i))
        .chain(["h3 -> h1:40002".to_string()])
        .collect();
    let says = |links: Vec<LinkName>, decided, probes| {
        Says::LinkLoss(LinkLoss {
            links,
            decided_by_probes: decided,
            probes,
            lossy_streams: lossy.clone(),
            clean_streams: 41,
            lost: 1_402.0,
            sent: 14_000.0,
            traced: 96,
        })
    };
    let two = vec![
        link("198.18.1.62", "198.18.1.131"),
        link("198.18.1.131", "198.18.1.134"),
    ];
    vec![
        (
            Kind::Loss,
            says(
                vec![link("198.18.1.131", "198.18.1.134")],
                None,
                vec![probes((70, 7), (70, 0))],
            ),
        ),
        (
            Kind::Loss,
            says(
                two.clone(),
                Some(0),
                vec![probes((700, 71), (0, 0)), probes((700, 69), (700, 71))],
            ),
        ),
        (
            Kind::Loss,
            says(
                two,
                None,
                vec![probes((70, 2), (0, 0)), probes((70, 2), (70, 2))],
            ),
        ),
    ]
}

/// Loss between two pools: one way across, and both.
fn pool_findings() -> Vec<(Kind, Says)> {
    let way = |from: &str, to: &str, lossy_legs, lost: f64| PoolWay {
        from: from.into(),
        to: to.into(),
        lossy_legs,
        legs: 8,
        lost,
        lost_pct: lost / 400.0,
    };
    vec![
        (
            Kind::Loss,
            Says::PoolLoss {
                ways: vec![way("tor1", "tor2", 8, 4_040.0), way("tor2", "tor1", 0, 0.0)],
                clean_outside: 8,
            },
        ),
        (
            Kind::Loss,
            Says::PoolLoss {
                ways: vec![
                    way("tor1", "tor2", 8, 4_040.0),
                    way("tor2", "tor1", 6, 1_980.0),
                ],
                clean_outside: 12,
            },
        ),
    ]
}

/// A starved agent's loss into its host and out of it, said once.
fn starved_host_findings() -> Vec<(Kind, Says)> {
    let host_loss = |direction, why| Says::HostLoss {
        host: "h1".into(),
        direction,
        requests: leg(&["h2", "h3", "h4"], &[7.1, 6.8, 7.3]),
        replies: leg(&["h2", "h3", "h4"], &[3.2, 3.0, 3.3]),
        lossy_requests: true,
        lossy_replies: true,
        lost: 9_800.0,
        place_tells_legs: true,
        why,
    };
    vec![(
        Kind::Loss,
        Says::StarvedHost {
            into: Box::new(host_loss(
                Direction::Into,
                Why::StarvedReader {
                    host: "h1".into(),
                    starved: starved(),
                    dropped: 2_100.0,
                    late: 7_700.0,
                    disk_busy_pct: None,
                },
            )),
            out_of: Box::new(host_loss(
                Direction::OutOf,
                Why::AnsweredLate {
                    host: "h1".into(),
                    starved: starved(),
                    late_answers: 4_400.0,
                },
            )),
        },
    )]
}

/// Each reason, into and out of a host (both legs, or one alone), a pair,
/// the fabric, round trips.
fn loss_findings() -> Vec<(Kind, Says)> {
    let mut out = Vec::new();
    for (i, why) in every_why().into_iter().enumerate() {
        let direction = if i % 2 == 0 {
            Direction::Into
        } else {
            Direction::OutOf
        };
        let (lossy_requests, lossy_replies) = [(true, true), (true, false), (false, true)][i % 3];
        out.push((
            Kind::Loss,
            Says::HostLoss {
                host: "h2".into(),
                direction,
                requests: leg(&["h1", "h3", "h4"], &[4.91, 5.04, 5.12]),
                replies: leg(&["h1", "h3", "h4"], &[4.93, 4.98]),
                lossy_requests,
                lossy_replies,
                lost: 15_001.0,
                place_tells_legs: i % 4 == 0,
                why,
            },
        ));
    }
    out.push((
        Kind::Loss,
        Says::PairLoss {
            a: "h3".into(),
            b: "h5".into(),
            ways: vec![
                PairWay {
                    from: "h3".into(),
                    to: "h5".into(),
                    legs: vec![(LegName::Requests, 2.0), (LegName::Replies, 1.96)],
                    lost: 3_960.0,
                    why: Why::PathBetween {
                        from: "h3".into(),
                        to: "h5".into(),
                        streams: 4,
                    },
                },
                PairWay {
                    from: "h5".into(),
                    to: "h3".into(),
                    legs: vec![(LegName::Requests, 0.5)],
                    lost: 500.0,
                    why: Why::LostBeforeNic {
                        nic: Nic {
                            host: "h3".into(),
                            name: None,
                            counted: true,
                        },
                    },
                },
            ],
        },
    ));
    for disk in [
        None,
        Some(BusyDisk {
            host: "h4".into(),
            busy_pct: 35.0,
        }),
    ] {
        out.push((
            Kind::Loss,
            Says::FabricLoss {
                legs: vec![
                    FabricLeg {
                        leg: LegName::Requests,
                        typical_pct: 1.0,
                        flows_pct: vec![0.9, 1.0, 1.1],
                    },
                    FabricLeg {
                        leg: LegName::Replies,
                        typical_pct: 0.042,
                        flows_pct: vec![0.042],
                    },
                ],
                disk,
            },
        ));
    }
    out.push((
        Kind::Loss,
        Says::RoundTrips {
            flows: vec![RoundTrip {
                src: "h1".into(),
                dst: "h2".into(),
                loss_pct: 12.5,
            }],
        },
    ));
    out
}

/// Each reason hosts fall short of their rate.
fn short_whys() -> Vec<ShortWhy> {
    vec![
        ShortWhy::Starved {
            behind_ms: 310.0,
            throttled_ms: 0.0,
            disk: None,
        },
        ShortWhy::Starved {
            behind_ms: 310.0,
            throttled_ms: 420.0,
            disk: Some(BusyDisk {
                host: "h1".into(),
                busy_pct: 55.0,
            }),
        },
        ShortWhy::HotCore { core_pct: 85.0 },
        ShortWhy::Egress { dropped: 1_200.0 },
        ShortWhy::Unresolved {
            dropped: 1_200.0,
            table_fulls: 26_409.0,
            res_failed: 0.0,
        },
        ShortWhy::Unresolved {
            dropped: 1_200.0,
            table_fulls: 26_409.0,
            res_failed: 40.0,
        },
        ShortWhy::Disk {
            disk: BusyDisk {
                host: "h3".into(),
                busy_pct: 20.0,
            },
        },
        ShortWhy::Unknown,
    ]
}

/// Hosts short of their rate for each reason, the tool's ceiling, a disk
/// that held them, coverage, the all-clear.
fn rate_findings() -> Vec<(Kind, Says)> {
    let mut out = Vec::new();
    let short = |n: usize| -> Vec<ShortHost> {
        (1..=n)
            .map(|i| ShortHost {
                host: format!("h{i}"),
                sent_pps: 3_930.0 + i as f64,
                target_pps: 15_000.0,
            })
            .collect()
    };
    let whys = short_whys();
    for (i, why) in whys.into_iter().enumerate() {
        let hosts = short(if i % 2 == 0 { 1 } else { 6 });
        out.push((Kind::Rate, Says::Short { hosts, why }));
    }
    for fleet_sent_pct in [None, Some(71.25)] {
        out.push((
            Kind::Rate,
            Says::BusyWorker {
                host: "h1".into(),
                agent_cpu_pct: 97.0,
                fleet_sent_pct,
                worker_pps: 400_000.0,
            },
        ));
    }
    for workers in [2, 8] {
        out.push((
            Kind::Rate,
            Says::MoreWorkers {
                host: "h1".into(),
                workers,
                peers: 3,
            },
        ));
    }
    for (iops, workers, depth) in [
        (Some((2_000.0, Some(480.0))), Some(4), Some(1)),
        (Some((16_000.0, Some(490.0))), Some(4), Some(8)),
        (None, None, None),
    ] {
        out.push((
            Kind::Disk,
            Says::DiskBound {
                hosts: 2,
                host: "h2".into(),
                busy_pct: 91.0,
                iops,
                workers,
                depth,
            },
        ));
    }
    out.push((
        Kind::Coverage,
        Says::Coverage {
            measured: 12,
            total: 90,
            rotation_s: 150.0,
        },
    ));
    for landing in [true, false] {
        out.push((
            Kind::Clear,
            Says::AllClear {
                landing,
                ramp: "0.5:3".into(),
            },
        ));
    }
    out
}

/// Each way a host goes, hosts never heard from, requests refused by plan.
fn agent_findings() -> Vec<(Kind, Says)> {
    let mut out = Vec::new();
    for (gone, left_out) in [
        (Gone::Stopped, 12),
        (
            Gone::StoppedStarved {
                behind_ms: 1_299.0,
                throttled_ms: Some(7_941.0),
            },
            0,
        ),
        (
            Gone::StoppedStarved {
                behind_ms: 25.0,
                throttled_ms: None,
            },
            3,
        ),
        (Gone::Unreachable, 4),
        (Gone::Silent, 0),
    ] {
        out.push((
            Kind::Agent,
            Says::Gone {
                host: "h3".into(),
                last_ts: 1_700_000_000,
                before_end_s: 9,
                left_out,
                gone,
            },
        ));
    }
    out.push((
        Kind::Agent,
        Says::NeverHeard {
            hosts: names(&["h7", "h8"]),
        },
    ));
    for sources in [names(&["h1"]), names(&["h1", "h4"])] {
        out.push((
            Kind::Plan,
            Says::Refused {
                receiver: "h2".into(),
                sources,
                sent_pps: 10_000.0,
                back_pps: 1_100.0,
                headroom_pct: 10.0,
                refused: 88_000.0,
            },
        ));
    }
    out
}

/// The tail, on the fleet and on a few hosts, with each cause it fits.
fn tail_findings() -> Vec<(Kind, Says)> {
    let mut out = Vec::new();
    let fleet = TailSpread::Fleet {
        tail_intervals: 30,
        intervals: 48,
        hosts: 3,
        of: 4,
    };
    let hosts = TailSpread::Hosts {
        hosts: names(&["h2"]),
    };
    let causes = [
        (
            fleet.clone(),
            TailCause::Disk {
                host: "h2".into(),
                io: "write".into(),
                disk_p99_us: 4_000.0,
                makes_the_tail: true,
            },
        ),
        (
            hosts.clone(),
            TailCause::Disk {
                host: "h2".into(),
                io: "read".into(),
                disk_p99_us: 300.0,
                makes_the_tail: false,
            },
        ),
        (fleet.clone(), TailCause::FabricQueues),
        (hosts.clone(), TailCause::LinkQueues { queued: Vec::new() }),
        (
            hosts.clone(),
            TailCause::LinkQueues {
                queued: names(&["h2"]),
            },
        ),
        (
            fleet,
            TailCause::AgentsLate {
                hosts: names(&["h1", "h2"]),
                behind_ms: 40.0,
                throttled: true,
                steal_pct: Some(3.25),
                fleet_wide: true,
            },
        ),
        (
            hosts,
            TailCause::AgentsLate {
                hosts: names(&["h2"]),
                behind_ms: 1_299.0,
                throttled: false,
                steal_pct: None,
                fleet_wide: false,
            },
        ),
    ];
    for (spread, cause) in causes {
        out.push((
            Kind::Latency,
            Says::Tail {
                p50_us: 163.0,
                p99_us: 7_000.0,
                spread,
                cause,
            },
        ));
    }
    out
}

/// The name of what a finding says. (A new variant fails to compile here
/// until it is named, and then the test below until it is written.)
fn variant(says: &Says) -> &'static str {
    match says {
        Says::HostLoss { .. } => "host_loss",
        Says::PairLoss { .. } => "pair_loss",
        Says::StarvedHost { .. } => "starved_host",
        Says::PathLoss { .. } => "path_loss",
        Says::LinkLoss(_) => "link_loss",
        Says::PoolLoss { .. } => "pool_loss",
        Says::FabricLoss { .. } => "fabric_loss",
        Says::RoundTrips { .. } => "round_trips",
        Says::Short { .. } => "short",
        Says::BusyWorker { .. } => "busy_worker",
        Says::MoreWorkers { .. } => "more_workers",
        Says::DiskBound { .. } => "disk_bound",
        Says::Coverage { .. } => "coverage",
        Says::AllClear { .. } => "all_clear",
        Says::Gone { .. } => "gone",
        Says::NeverHeard { .. } => "never_heard",
        Says::Refused { .. } => "refused",
        Says::Tail { .. } => "tail",
        Says::RouteChange { .. } => "route_change",
    }
}

const EVERY_VARIANT: [&str; 19] = [
    "host_loss",
    "starved_host",
    "pair_loss",
    "path_loss",
    "link_loss",
    "pool_loss",
    "fabric_loss",
    "round_trips",
    "short",
    "busy_worker",
    "more_workers",
    "disk_bound",
    "coverage",
    "all_clear",
    "gone",
    "never_heard",
    "refused",
    "tail",
    "route_change",
];

#[test]
fn every_kind_of_finding_is_written_as_the_golden_file_says() {
    let findings = every_finding();
    for name in EVERY_VARIANT {
        assert!(
            findings.iter().any(|(_, s)| variant(s) == name),
            "no {name} among the findings written"
        );
    }
    // Each of the 16 reasons a loss can sit where it does.
    let whys: std::collections::BTreeSet<String> = every_why()
        .iter()
        .map(|w| serde_json::to_value(w).unwrap()["why"].to_string())
        .collect();
    assert_eq!(whys.len(), 16, "{whys:?}");
    let mut written = String::new();
    for (kind, says) in findings {
        let f = Finding::new(kind, says);
        let line = text(&f);
        assert!(!line.is_empty() && !line.contains('\n'), "{line}");
        // The data is --json's `detail`: named by what it says.
        let json = serde_json::to_value(&f.says).unwrap();
        assert_eq!(json["says"], variant(&f.says), "{json}");
        written.push_str(&format!("[{}] {line}\n", variant(&f.says)));
    }
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/render/findings/every_finding.txt");
    if std::env::var_os("MX_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&golden, &written).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert!(
        want == written,
        "the findings' words differ from {}\n--- want\n{want}\n--- got\n{written}\n(MX_BLESS=1 rewrites it)",
        golden.display()
    );
}

#[test]
fn blames_read_as_a_few_words() {
    let out = Blame::toward("h2", Direction::OutOf, Place::TransmitPath);
    let f = Finding::new(Kind::Loss, Says::NeverHeard { hosts: Vec::new() }).blame(out);
    assert_eq!(brief(&f).unwrap(), "h2's transmit path");
    let both = Finding::new(Kind::Loss, Says::NeverHeard { hosts: Vec::new() })
        .blame(Blame::toward("h2", Direction::Into, Place::Wire))
        .blame(Blame::toward("h2", Direction::Into, Place::ReceivePath));
    assert_eq!(
        brief(&both).unwrap(),
        "the wire into h2 or h2's receive path"
    );
    let nothing = Finding::new(Kind::Clear, Says::NeverHeard { hosts: Vec::new() });
    assert_eq!(brief(&nothing), None);
}
