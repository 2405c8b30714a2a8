//! Our shuffles against real CPython draws (tests/fixtures/cpython_shapes.txt,
//! written by CPython's own `random`), so a layered matrix means the same layers
//! to our agents and to the original's.

use matrix_orchestrator::matrix::shape::{KRegular, LayerPlan};

fn numbers(text: &str) -> Vec<u64> {
    text.split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect()
}

#[test]
fn relabel_sparse_and_layered_shifts_match_cpython() {
    let fixture = include_str!("../fixtures/cpython_shapes.txt");
    let mut checked = [0usize; 3];
    for line in fixture.lines().filter(|l| !l.starts_with('#')) {
        let (head, values) = line.split_once(" | ").unwrap();
        let head: Vec<&str> = head.split_whitespace().collect();
        let want: Vec<u32> = numbers(values).into_iter().map(|v| v as u32).collect();
        let n: usize = head[1].parse().unwrap();
        match head[0] {
            "R" => {
                let seed: i64 = head[2].parse().unwrap();
                let plan = LayerPlan::new(n, 1, seed, false);
                assert_eq!(plan.graph.relabel, want, "relabel N={n} seed={seed}");
                checked[0] += 1;
            }
            "L" => {
                let seed: i64 = head[2].parse().unwrap();
                // With K = 1 every layer is one shift: the layers, in order, are the
                // shuffled shift list itself.
                let plan = LayerPlan::new(n, 1, seed, false);
                let shifts: Vec<u32> = plan.layers.concat();
                assert_eq!(shifts, want, "layered shifts N={n} seed={seed}");
                checked[1] += 1;
            }
            "S" => {
                let k: usize = head[2].parse().unwrap();
                let seed: i64 = head[3].parse().unwrap();
                let graph = KRegular::new(n, k, seed);
                assert_eq!(graph.shifts, want, "sparse shifts N={n} K={k} seed={seed}");
                checked[2] += 1;
            }
            other => panic!("unknown fixture record {other}"),
        }
    }
    // The fixture covers both of CPython's sample() strategies and 64-bit seeds.
    assert!(
        checked.iter().all(|&c| c >= 70),
        "fixture too small: {checked:?}"
    );
}

#[test]
fn layers_deal_the_shuffled_shifts_k_at_a_time() {
    for (n, k, seed) in [(23usize, 5usize, 42i64), (100, 8, 1), (11, 3, 5)] {
        let all = LayerPlan::new(n, 1, seed, false).layers.concat();
        let plan = LayerPlan::new(n, k, seed, false);
        let want: Vec<Vec<u32>> = all.chunks(k).map(<[u32]>::to_vec).collect();
        assert_eq!(plan.layers, want);
        assert_eq!(plan.layers.len(), (n - 1).div_ceil(k));
    }
}
