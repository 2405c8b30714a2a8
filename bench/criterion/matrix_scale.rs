//! Scale of the matrix work, measured (issue 2): `mx gen` for 10,000 hosts with
//! `--peers 8 --dwell 15`, a 2,000-host full mesh (4 million cells), and loading
//! each back. Run with `cargo bench --bench matrix_scale`; CI runs it once with
//! `-- --test` so it keeps building and working.
//!
//! Each case is what the command does minus argument parsing: build the matrix
//! and write it to a file (gen), or read and parse the file (every command that
//! loads a matrix).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use matrix_orchestrator::matrix::build::{Shape, Traffic, build};
use matrix_orchestrator::matrix::{HostToken, Matrix, Rate};

fn hosts(n: usize) -> Vec<HostToken> {
    (0..n)
        .map(|i| HostToken::parse(&format!("198.18.{}.{}", i / 250, i % 250 + 1)).unwrap())
        .collect()
}

fn traffic() -> Traffic {
    Traffic {
        rate: Rate::per_second(10_000.0),
        tx_size: 64,
        rx_size: 64,
        port: 5300,
        disk: Default::default(),
        dscp: Default::default(),
    }
}

const LAYERED_10K: Shape = Shape::Layered {
    peers: 8,
    seed: 1,
    dwell: 15.0,
    fill: false,
};

fn scale(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let layered_path = dir.path().join("layered10k.csv");
    let mesh_path = dir.path().join("mesh2k.csv");
    let mut group = c.benchmark_group("matrix");
    group.sample_size(10);

    group.bench_function("gen 10000 hosts --peers 8 --dwell 15", |b| {
        b.iter(|| {
            let m = build(hosts(10_000), LAYERED_10K, traffic());
            m.save(&layered_path).unwrap();
        })
    });
    group.bench_function("gen 2000-host full mesh (4M cells)", |b| {
        b.iter(|| {
            let m = build(hosts(2_000), Shape::FullMesh, traffic());
            m.save(&mesh_path).unwrap();
        })
    });
    group.bench_function("load 10000-host layered matrix", |b| {
        b.iter(|| black_box(Matrix::load(&layered_path).unwrap()))
    });
    group.bench_function("load 2000-host full mesh", |b| {
        b.iter(|| black_box(Matrix::load(&mesh_path).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, scale);
criterion_main!(benches);
