//! The matrices `mx gen` makes: the full mesh, the `--peers K` k-regular shuffle and
//! the `--dwell` layered rotation (whose grid is layer 0), over all hosts or
//! from one pool to another ([`super::pools`]).

use super::pools::{Between, Pool, PoolPlan, Pools};
use super::shape::{KRegular, LayerPlan};
use super::{Cell, Config, Host, HostToken, Matrix, Rate, Rotation, ShuffleKey};

/// Which pairs carry flows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// Every ordered pair.
    FullMesh,
    /// K shifted permutations of one seeded shuffle: K flows out and K in per host.
    KRegular { peers: u32, seed: i64 },
    /// The N-1 shifts dealt K at a time into layers held `dwell` seconds each.
    Layered {
        peers: u32,
        seed: i64,
        dwell: f64,
        fill: bool,
    },
}

/// What a generated matrix carries besides its hosts and shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// The rate of every flow (the per-pair rate).
    pub rate: Rate,
    pub tx_size: u32,
    pub rx_size: u32,
    pub port: u16,
    pub disk: super::DiskMode,
    pub dscp: super::Dscp,
}

/// Builds the matrix for `hosts` in `shape`. The caller has validated the shape
/// against the host count (1 <= K <= N-1; at least two layers when layered).
pub fn build(hosts: Vec<HostToken>, shape: Shape, traffic: Traffic) -> Matrix {
    let n = hosts.len();
    let mut config = config_of(&traffic);
    let receivers: Vec<Vec<u32>> = match shape {
        Shape::FullMesh => (0..n as u32)
            .map(|src| (0..n as u32).filter(|&dst| dst != src).collect())
            .collect(),
        Shape::KRegular { peers, seed } => {
            config.shuffle = Some(ShuffleKey { peers, seed });
            let graph = KRegular::new(n, peers as usize, seed);
            (0..n as u32)
                .map(|src| graph.targets(src).collect())
                .collect()
        }
        Shape::Layered {
            peers,
            seed,
            dwell,
            fill,
        } => {
            config.shuffle = Some(ShuffleKey { peers, seed });
            let plan = LayerPlan::new(n, peers as usize, seed, fill);
            config.rotation = Some(Rotation {
                layers: plan.layers.len() as u32,
                dwell,
                fill,
            });
            (0..n as u32)
                .map(|src| plan.targets(src, 0).collect())
                .collect()
        }
    };
    assemble(config, hosts, receivers, traffic)
}

/// `n` hosts `h0`.. at 198.18.0.x in `shape`, 1,000 requests a second a
/// flow, 64 bytes each way: a fleet for the tests of this crate and of
/// those that take its matrices.
pub fn generated(n: usize, shape: Shape) -> Matrix {
    let hosts = (0..n)
        .map(|i| HostToken::parse(&format!("h{i}=198.18.{}.{}", i / 250, i % 250 + 1)).unwrap())
        .collect();
    let traffic = Traffic {
        rate: Rate::per_second(1000.0),
        tx_size: 64,
        rx_size: 64,
        port: super::DEFAULT_PORT,
        disk: super::DiskMode::Off,
        dscp: super::Dscp::default(),
    };
    build(hosts, shape, traffic)
}

/// Builds a pool-to-pool matrix: the hosts are the pools' in order, pool by
/// pool, and flows go only across `between` (see [`super::pools`] for the
/// shapes: `FullMesh` is every cross pair). The caller has validated K
/// against the receiver pools and the layer count.
pub fn build_between(
    pools: Vec<(String, Vec<HostToken>)>,
    between: Between,
    shape: Shape,
    traffic: Traffic,
) -> Matrix {
    let mut hosts = Vec::new();
    let mut set = Pools {
        pools: Vec::new(),
        between: Some(between),
    };
    for (name, tokens) in pools {
        let first = hosts.len() as u32;
        set.pools.push(Pool {
            name,
            members: (first..first + tokens.len() as u32).collect(),
        });
        hosts.extend(tokens);
    }
    let n = hosts.len();
    let mut config = config_of(&traffic);
    let receivers: Vec<Vec<u32>> = match shape {
        Shape::FullMesh => {
            let mut receivers = vec![Vec::new(); n];
            for (s, r) in set.directions() {
                for &src in &set.pools[s].members {
                    receivers[src as usize] = set.pools[r].members.clone();
                }
            }
            receivers
        }
        Shape::KRegular { peers, seed } => {
            config.shuffle = Some(ShuffleKey { peers, seed });
            let plan = PoolPlan::new(&set, n, peers as usize, seed, false);
            (0..n as u32)
                .map(|src| plan.targets(src, 0).collect())
                .collect()
        }
        Shape::Layered {
            peers,
            seed,
            dwell,
            fill,
        } => {
            config.shuffle = Some(ShuffleKey { peers, seed });
            let plan = PoolPlan::new(&set, n, peers as usize, seed, fill);
            config.rotation = Some(Rotation {
                layers: plan.layer_count() as u32,
                dwell,
                fill,
            });
            (0..n as u32)
                .map(|src| plan.targets(src, 0).collect())
                .collect()
        }
    };
    assemble(config, hosts, receivers, traffic).with_pools(set)
}

/// The header keys every generated matrix starts from.
fn config_of(traffic: &Traffic) -> Config {
    Config {
        tx_size: traffic.tx_size,
        rx_size: traffic.rx_size,
        port: traffic.port,
        shuffle: None,
        rotation: None,
        disk: traffic.disk,
        dscp: traffic.dscp,
    }
}

/// The matrix of `hosts` whose host i sends to `receivers[i]`, every flow at
/// the traffic's rate.
fn assemble(
    config: Config,
    hosts: Vec<HostToken>,
    receivers: Vec<Vec<u32>>,
    traffic: Traffic,
) -> Matrix {
    let rows = receivers
        .into_iter()
        .map(|mut dsts| {
            dsts.sort_unstable();
            dsts.into_iter()
                .map(|dst| Cell {
                    dst,
                    rate: traffic.rate,
                })
                .collect()
        })
        .collect();
    let hosts = hosts
        .into_iter()
        .map(|t| Host::from_token(t, traffic.port))
        .collect();
    Matrix::from_parts(config, hosts, rows)
}
