//! Property tests: round trips of the file format and the guarantees of the shapes.

use std::collections::HashSet;

use matrix_orchestrator::matrix::build::{Shape, Traffic, build, build_between};
use matrix_orchestrator::matrix::pools::Between;
use matrix_orchestrator::matrix::schedule::Schedule;
use matrix_orchestrator::matrix::{Cell, Config, Dscp, Host, HostToken, Matrix, Rate};
use proptest::prelude::*;

/// A host token in one of the three forms; index `i` keeps names unique.
fn token(i: usize, form: u8, port: u16) -> HostToken {
    let addr = format!("198.18.{}.{}", i / 250, i % 250 + 1);
    let text = match form % 3 {
        0 => addr,
        1 => format!("node{i}={addr}"),
        _ => format!("node{i}={addr}:{port}"),
    };
    HostToken::parse(&text).unwrap()
}

/// Rates of the kinds a file holds: unpaced, integers, gen's 3-decimal small
/// rates, and arbitrary hand-typed values.
fn rate() -> impl Strategy<Value = Rate> {
    prop_oneof![
        Just(Rate::UNPACED),
        (1u32..5_000_000).prop_map(|v| Rate::per_second(f64::from(v))),
        (1u32..100_000).prop_map(|v| Rate::per_second(f64::from(v) / 1000.0)),
        (1e-3f64..1e7).prop_map(Rate::per_second),
    ]
}

fn matrix() -> impl Strategy<Value = Matrix> {
    (2usize..16)
        .prop_flat_map(|n| {
            (
                Just(n),
                prop::collection::vec((any::<u8>(), 1u16..=65535), n),
                prop::collection::vec(prop::option::weighted(0.6, rate()), n * n),
                (32u32..=65507, 32u32..=65507, 1u16..=65535, 0u8..=63),
                prop::option::of((1u32..4, any::<i64>())),
            )
        })
        .prop_filter_map(
            "at least one flow",
            |(n, forms, cells, (tx_size, rx_size, port, dscp), shuffle)| {
                let hosts: Vec<Host> = forms
                    .iter()
                    .enumerate()
                    .map(|(i, &(form, p))| Host::from_token(token(i, form, p), port))
                    .collect();
                let rows: Vec<Vec<Cell>> = (0..n)
                    .map(|src| {
                        (0..n)
                            .filter(|&dst| dst != src)
                            .filter_map(|dst| {
                                cells[src * n + dst].map(|rate| Cell {
                                    dst: dst as u32,
                                    rate,
                                })
                            })
                            .collect()
                    })
                    .collect();
                if rows.iter().all(Vec::is_empty) {
                    return None;
                }
                let config = Config {
                    tx_size,
                    rx_size,
                    port,
                    shuffle: shuffle.map(|(peers, seed)| matrix_orchestrator::matrix::ShuffleKey {
                        peers,
                        seed,
                    }),
                    rotation: None,
                    disk: Default::default(),
                    dscp: Dscp::parse(&dscp.to_string()).unwrap(),
                };
                Some(Matrix::from_parts(config, hosts, rows))
            },
        )
}

fn names(n: usize) -> Vec<HostToken> {
    (0..n)
        .map(|i| HostToken::parse(&format!("h{i}")).unwrap())
        .collect()
}

fn traffic() -> Traffic {
    Traffic {
        rate: Rate::per_second(1000.0),
        tx_size: 64,
        rx_size: 64,
        port: 5300,
        disk: Default::default(),
        dscp: Default::default(),
    }
}

/// Every (src, dst) edge of a matrix's grid.
fn edges(m: &Matrix) -> Vec<(u32, u32)> {
    m.rows()
        .flat_map(|(src, row)| row.iter().map(move |c| (src, c.dst)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn write_then_read_gives_back_the_same_matrix(m in matrix()) {
        let bytes = m.to_bytes();
        let back = Matrix::parse(&bytes, "roundtrip.csv").unwrap();
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(back.to_bytes(), bytes);
    }

    #[test]
    fn layered_matrices_round_trip(n in 3usize..40, k in 1usize..10, seed in 0i64..=u32::MAX as i64,
                                   dwell in 1u32..600, fill: bool) {
        let k = k.min(n - 2).max(1);
        prop_assume!((n - 1).div_ceil(k) >= 2);
        let shape = Shape::Layered { peers: k as u32, seed, dwell: f64::from(dwell), fill };
        let m = build(names(n), shape, traffic());
        let bytes = m.to_bytes();
        let back = Matrix::parse(&bytes, "layered.csv").unwrap();
        back.check_layer_zero("layered.csv").unwrap();
        prop_assert_eq!(&back, &m);
    }

    #[test]
    fn peers_is_exactly_k_regular(n in 2usize..300, k in 1usize..40, seed: i64) {
        let k = k.min(n - 1);
        let m = build(names(n), Shape::KRegular { peers: k as u32, seed }, traffic());
        let mut indegree = vec![0usize; n];
        for (src, row) in m.rows() {
            prop_assert_eq!(row.len(), k, "out-degree of {}", src);
            // Rows are sorted strictly by receiver: no repeated pair.
            prop_assert!(row.windows(2).all(|w| w[0].dst < w[1].dst));
            for cell in row {
                prop_assert_ne!(cell.dst, src, "self-loop");
                indegree[cell.dst as usize] += 1;
            }
        }
        prop_assert!(indegree.iter().all(|&d| d == k), "in-degrees {:?}", indegree);
    }

    #[test]
    fn layers_partition_every_ordered_pair_exactly_once(n in 3usize..120, k in 1usize..20, seed in 0i64..1 << 40) {
        let k = k.min(n - 1);
        let plan = matrix_orchestrator::matrix::shape::LayerPlan::new(n, k, seed, false);
        prop_assert_eq!(plan.layers.len(), (n - 1).div_ceil(k));
        let mut seen = vec![0u8; n * n];
        for layer in 0..plan.layers.len() {
            for src in 0..n as u32 {
                for dst in plan.targets(src, layer) {
                    prop_assert_ne!(dst, src);
                    seen[src as usize * n + dst as usize] += 1;
                }
            }
        }
        for src in 0..n {
            for dst in 0..n {
                let want = u8::from(src != dst);
                prop_assert_eq!(seen[src * n + dst], want, "pair {} -> {}", src, dst);
            }
        }
    }

    #[test]
    fn equal_layers_cover_every_pair_and_load_every_host_k(n in 3usize..120, k in 1usize..20, seed in 0i64..1 << 40) {
        let k = k.min(n - 1);
        let plan = matrix_orchestrator::matrix::shape::LayerPlan::new(n, k, seed, true);
        let mut covered = HashSet::new();
        for layer in 0..plan.layers.len() {
            let mut indegree = vec![0usize; n];
            for src in 0..n as u32 {
                let targets: Vec<u32> = plan.targets(src, layer).collect();
                let distinct: HashSet<u32> = targets.iter().copied().collect();
                prop_assert_eq!(distinct.len(), k, "layer {} host {} out-degree", layer, src);
                for dst in targets {
                    prop_assert_ne!(dst, src);
                    indegree[dst as usize] += 1;
                    covered.insert((src, dst));
                }
            }
            prop_assert!(indegree.iter().all(|&d| d == k), "layer {} in-degrees", layer);
        }
        prop_assert_eq!(covered.len(), n * (n - 1));
    }

    #[test]
    fn the_same_seed_gives_the_same_file(n in 2usize..60, k in 1usize..8, seed: i64, layered: bool) {
        let k = k.min(n - 1);
        let shape = if layered && (n - 1).div_ceil(k) >= 2 && seed >= 0 {
            Shape::Layered { peers: k as u32, seed, dwell: 15.0, fill: false }
        } else {
            Shape::KRegular { peers: k as u32, seed }
        };
        let a = build(names(n), shape, traffic());
        let b = build(names(n), shape, traffic());
        prop_assert_eq!(a.to_bytes(), b.to_bytes());
        prop_assert_eq!(edges(&a).len(), n * k);
    }
}

/// Two pools of `a` and `b` hosts (`p0..`, `q0..`), `a` sending to `b`.
fn two_pools(a: usize, b: usize) -> Vec<(String, Vec<HostToken>)> {
    let pool = |prefix: &str, n: usize| {
        (0..n)
            .map(|i| HostToken::parse(&format!("{prefix}{i}")).unwrap())
            .collect()
    };
    vec![("tor1".into(), pool("p", a)), ("tor2".into(), pool("q", b))]
}

fn between(duplex: bool) -> Between {
    Between {
        senders: 0,
        receivers: 1,
        duplex,
    }
}

/// The shape of a pool-to-pool run: no flow inside a pool, senders only in
/// the sending pools, and each sender's receivers distinct.
fn cross_pool_rows(m: &Matrix, a: usize, duplex: bool) -> Result<(), TestCaseError> {
    for (src, row) in m.rows() {
        let sender_side = (src as usize) < a;
        if !sender_side && !duplex {
            prop_assert!(row.is_empty(), "simplex: receiver {} sends", src);
        }
        for cell in row {
            prop_assert_ne!(
                (cell.dst as usize) < a,
                sender_side,
                "{} -> {} stays inside a pool",
                src,
                cell.dst
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn pool_peers_give_every_sender_k_and_spread_receivers_evenly(
        a in 1usize..40, b in 1usize..40, k in 1usize..40, seed: i64, duplex: bool,
    ) {
        let most = if duplex { a.min(b) } else { b };
        let k = k.min(most);
        let m = build_between(
            two_pools(a, b),
            between(duplex),
            Shape::KRegular { peers: k as u32, seed },
            traffic(),
        );
        cross_pool_rows(&m, a, duplex)?;
        let mut indegree = vec![0usize; a + b];
        for (src, row) in m.rows() {
            let sends = (src as usize) < a || duplex;
            prop_assert_eq!(row.len(), if sends { k } else { 0 }, "out-degree of {}", src);
            for cell in row {
                indegree[cell.dst as usize] += 1;
            }
        }
        // "Exactly": every receiver answers floor(s*K/r) or ceil(s*K/r) senders.
        let directions: &[(std::ops::Range<usize>, usize)] = if duplex {
            &[(a..a + b, a), (0..a, b)]
        } else {
            &[(a..a + b, a)]
        };
        for (receivers, senders) in directions {
            let flows = senders * k;
            let r = receivers.len();
            for h in receivers.clone() {
                prop_assert!(
                    indegree[h] == flows / r || indegree[h] == flows.div_ceil(r),
                    "receiver {} answers {} of {} flows over {}", h, indegree[h], flows, r
                );
            }
        }
    }

    #[test]
    fn pool_layers_meet_every_cross_pair_exactly_once_per_cycle(
        a in 1usize..30, b in 2usize..30, k in 1usize..30, seed in 0i64..1 << 40, duplex: bool,
    ) {
        let k = k.min(if duplex { a.min(b) } else { b });
        let layers = if duplex { b.div_ceil(k).max(a.div_ceil(k)) } else { b.div_ceil(k) };
        prop_assume!(layers >= 2);
        let m = build_between(
            two_pools(a, b),
            between(duplex),
            Shape::Layered { peers: k as u32, seed, dwell: 10.0, fill: false },
            traffic(),
        );
        // Read back from its own file: the agents derive the layers from it.
        let m = Matrix::parse(&m.to_bytes(), "pools.csv").unwrap();
        let schedule = Schedule::new(&m);
        prop_assert_eq!(schedule.layer_count(), layers);
        let n = a + b;
        let mut seen = vec![0u8; n * n];
        for layer in 0..layers {
            for src in 0..n as u32 {
                let flows = schedule.flows_in_layer(src, layer);
                prop_assert!(flows.len() <= k, "layer {} host {}", layer, src);
                for cell in flows {
                    seen[src as usize * n + cell.dst as usize] += 1;
                }
            }
        }
        for src in 0..n {
            for dst in 0..n {
                let across = (src < a) != (dst < a);
                let want = u8::from(across && (src < a || duplex));
                prop_assert_eq!(seen[src * n + dst], want, "pair {} -> {}", src, dst);
            }
        }
    }

    #[test]
    fn equal_pool_layers_keep_every_sender_at_k(
        a in 1usize..30, b in 2usize..30, k in 1usize..30, seed in 0i64..1 << 40, duplex: bool,
    ) {
        let k = k.min(if duplex { a.min(b) } else { b });
        let layers = if duplex { b.div_ceil(k).max(a.div_ceil(k)) } else { b.div_ceil(k) };
        prop_assume!(layers >= 2);
        let m = build_between(
            two_pools(a, b),
            between(duplex),
            Shape::Layered { peers: k as u32, seed, dwell: 10.0, fill: true },
            traffic(),
        );
        let schedule = Schedule::new(&m);
        let mut covered = HashSet::new();
        for layer in 0..layers {
            for src in 0..(a + b) as u32 {
                let flows = schedule.flows_in_layer(src, layer);
                let sends = (src as usize) < a || duplex;
                prop_assert_eq!(flows.len(), if sends { k } else { 0 });
                covered.extend(flows.iter().map(|c| (src, c.dst)));
            }
        }
        prop_assert_eq!(covered.len(), a * b * if duplex { 2 } else { 1 });
    }

    #[test]
    fn the_same_seed_gives_the_same_pool_file(a in 1usize..20, b in 2usize..20, k in 1usize..8, seed in 0i64..1 << 40, layered: bool) {
        let k = k.min(b);
        let shape = if layered && b.div_ceil(k) >= 2 {
            Shape::Layered { peers: k as u32, seed, dwell: 15.0, fill: false }
        } else {
            Shape::KRegular { peers: k as u32, seed }
        };
        let make = || build_between(two_pools(a, b), between(false), shape, traffic());
        let (first, second) = (make(), make());
        prop_assert_eq!(first.to_bytes(), second.to_bytes());
        // And the file reads back as the matrix it was written from.
        let back = Matrix::parse(&first.to_bytes(), "pools.csv").unwrap();
        prop_assert_eq!(back.to_bytes(), first.to_bytes());
        prop_assert_eq!(back.pools(), first.pools());
    }
}
