//! `mx gen`: build matrix.csv from the server list, then say what it holds and
//! what to run next, fragments included: requests or
//! replies larger than the path MTU (`--mtu`) are called out, and the wire
//! and packet rates count every fragment.
//!
//! Here: the flags read, the hosts, the shape and the rate drawn, the
//! matrix written; `summary.rs` says what it holds.

mod summary;

use std::io::Write;
use std::path::Path;

use crate::cli::{GenArgs, PpsArg};
use crate::error::{Error, Result};
use crate::matrix::build::{Shape, Traffic, build, build_between};
use crate::matrix::load::{Datagram, pps_for_gbps};
use crate::matrix::pools::{Between, Pool, Pools};
use crate::matrix::resolve;
use crate::matrix::selection::Selection;
use crate::matrix::shape::LayerPlan;
use crate::matrix::write::gen_rate_text;
use crate::matrix::{Host, HostToken, Matrix, Rate, shared_endpoint, shared_endpoint_message};
use crate::units::{self, Ip};

/// Per-pair rate when neither --pps nor --gbps is given.
const DEFAULT_PPS: f64 = 10_000.0;

pub fn run(args: &GenArgs, out: &mut dyn Write) -> Result<u8> {
    let (tx_size, rx_size) = args.sizes.checked()?;
    args.mtu.checked()?;
    let traffic = |rate| Traffic {
        rate,
        tx_size,
        rx_size,
        port: args.port,
        disk: args.disk,
        dscp: args.dscp,
    };
    let (matrix, shape, peers) = match args.pools.selection(args.port)? {
        Selection::Servers => {
            let hosts = super::read_server_list(&args.servers.path)?;
            // Two hosts at one address and port would make a matrix every reader refuses.
            let placed: Vec<Host> = hosts
                .iter()
                .map(|t| Host::from_token(t.clone(), args.port))
                .collect();
            if let Some((a, b)) = shared_endpoint(&placed) {
                return Err(Error::refused(format!(
                    "{}: {}",
                    args.servers.path.display(),
                    shared_endpoint_message(&placed[a], &placed[b])
                )));
            }
            let ip = family(
                &hosts,
                args.port,
                &format!("{}: ", args.servers.path.display()),
            )?;
            mesh(args, hosts, (tx_size, ip), &traffic)?
        }
        Selection::Inside { name, hosts } => {
            let count = hosts.len() as u32;
            let ip = family(&hosts, args.port, "")?;
            let (matrix, shape, peers) = mesh(args, hosts, (tx_size, ip), &traffic)?;
            let pools = Pools {
                pools: vec![Pool {
                    name,
                    members: (0..count).collect(),
                }],
                between: None,
            };
            (matrix.with_pools(pools), shape, peers)
        }
        Selection::Between { pools, between } => {
            let sizes: Vec<usize> = pools.iter().map(|(_, h)| h.len()).collect();
            let shape = pool_shape(args, &pools, between)?;
            // A sender's peers: K, or every host of the pool it sends to (the
            // larger, for a duplex of unequal pools: no sender over a budget).
            let peers = match shape {
                Shape::FullMesh if between.duplex => sizes[0].max(sizes[1]),
                Shape::FullMesh => sizes[1],
                Shape::KRegular { peers, .. } | Shape::Layered { peers, .. } => peers as usize,
            };
            let all: Vec<HostToken> = pools.iter().flat_map(|(_, h)| h.iter().cloned()).collect();
            let ip = family(&all, args.port, "")?;
            let rate = pair_rate(args, (tx_size, ip), peers)?;
            let matrix = build_between(pools, between, shape, traffic(rate));
            let n = matrix.host_count();
            (matrix.with_families(&vec![ip; n]), shape, peers)
        }
    };

    let mtu = args.mtu.for_family(matrix.ip().unwrap_or_default())?;
    if args.output == Path::new("-") {
        matrix.write_to(out)?;
        return Ok(0);
    }
    matrix.save(&args.output)?;
    summary::print_summary(out, &matrix, args, (shape, peers), mtu)?;
    Ok(0)
}

/// The one IP version of the hosts gen draws a matrix over; refused, after
/// `label`, when they have none in common.
fn family(hosts: &[HostToken], port: u16, label: &str) -> Result<Option<Ip>> {
    resolve::one_family(hosts, port).map_err(|why| Error::refused(format!("{label}{why}")))
}

/// The mesh shapes over `hosts` (every pair, `--peers`, `--dwell`), all of
/// one IP version.
fn mesh(
    args: &GenArgs,
    hosts: Vec<HostToken>,
    (tx_size, ip): (u32, Option<Ip>),
    traffic: &dyn Fn(Rate) -> Traffic,
) -> Result<(Matrix, Shape, usize)> {
    let n = hosts.len();
    let shape = shape(args, n)?;
    let peers = match shape {
        Shape::FullMesh => n - 1,
        Shape::KRegular { peers, .. } | Shape::Layered { peers, .. } => peers as usize,
    };
    let rate = pair_rate(args, (tx_size, ip), peers)?;
    let matrix = build(hosts, shape, traffic(rate)).with_families(&vec![ip; n]);
    Ok((matrix, shape, peers))
}

/// The pool-to-pool shape the flags ask for: K at most the smaller receiving
/// pool, and a rotation only where there is something to rotate.
fn pool_shape(
    args: &GenArgs,
    pools: &[(String, Vec<HostToken>)],
    between: Between,
) -> Result<Shape> {
    shape_flags(args)?;
    let Some(peers) = args.peers else {
        return Ok(Shape::FullMesh);
    };
    let (from, to) = (&pools[0], &pools[1]);
    let (most, whose) = if between.duplex && from.1.len() < to.1.len() {
        (from.1.len(), &from.0)
    } else {
        (to.1.len(), &to.0)
    };
    if peers < 1 || peers as usize > most {
        return Err(Error::refused(format!(
            "--peers must be between 1 and {most} here: a sender's peers are distinct hosts of the other pool, and {whose} has {most} (got {peers})"
        )));
    }
    let peers = peers as u32;
    let seed = match args.seed {
        Some(seed) => seed,
        None => random_seed()?,
    };
    let Some(dwell) = args.dwell else {
        return Ok(Shape::KRegular { peers, seed });
    };
    dwell_flags(seed, dwell)?;
    let layers = pools_of(pools, between).layer_count(peers as usize);
    if layers < 2 {
        return Err(Error::refused(format!(
            "--peers {peers} already covers every cross-pool pair: --dwell has nothing to rotate (drop --dwell, or lower --peers)"
        )));
    }
    Ok(Shape::Layered {
        peers,
        seed,
        dwell,
        fill: args.equal_layers,
    })
}

/// The pools' sizes as a [`Pools`] (members numbered pool by pool), for the
/// arithmetic that needs only the sizes.
fn pools_of(pools: &[(String, Vec<HostToken>)], between: Between) -> Pools {
    let mut first = 0u32;
    Pools {
        pools: pools
            .iter()
            .map(|(name, hosts)| {
                let members = (first..first + hosts.len() as u32).collect();
                first += hosts.len() as u32;
                Pool {
                    name: name.clone(),
                    members,
                }
            })
            .collect(),
        between: Some(between),
    }
}

/// The shape the flags ask for, checked in the original tool's order.
fn shape(args: &GenArgs, n: usize) -> Result<Shape> {
    shape_flags(args)?;
    let Some(peers) = args.peers else {
        return Ok(Shape::FullMesh);
    };
    if peers < 1 || peers as usize > n - 1 {
        return Err(Error::refused(format!(
            "--peers must be between 1 and {} for {n} hosts (got {peers})",
            n - 1
        )));
    }
    let peers = peers as u32;
    let seed = match args.seed {
        Some(seed) => seed,
        None => random_seed()?,
    };
    let Some(dwell) = args.dwell else {
        return Ok(Shape::KRegular { peers, seed });
    };
    dwell_flags(seed, dwell)?;
    if LayerPlan::layer_count(n, peers as usize) < 2 {
        return Err(Error::refused(format!(
            "--peers {peers} of {n} hosts is already every pair: --dwell has nothing to rotate (drop --dwell, or lower --peers)"
        )));
    }
    Ok(Shape::Layered {
        peers,
        seed,
        dwell,
        fill: args.equal_layers,
    })
}

/// The flags that need others: --dwell needs --peers, --equal-layers --dwell.
fn shape_flags(args: &GenArgs) -> Result<()> {
    if args.dwell.is_some() && args.peers.is_none() {
        return Err(Error::refused(
            "--dwell needs --peers K: the layers rotate K peers at a time",
        ));
    }
    if args.equal_layers && args.dwell.is_none() {
        return Err(Error::refused(
            "--equal-layers needs --dwell: only a layered matrix has layers to equalize",
        ));
    }
    Ok(())
}

/// A layered matrix's seed and dwell.
fn dwell_flags(seed: i64, dwell: f64) -> Result<()> {
    if seed < 0 {
        return Err(Error::refused(format!(
            "--seed must be 0 or more for a layered matrix (got {seed})"
        )));
    }
    if !(dwell >= 1.0 && dwell.is_finite()) {
        return Err(Error::refused(format!(
            "--dwell must be at least 1 second (got {})",
            units::g(dwell)
        )));
    }
    Ok(())
}

/// The per-pair rate, rounded to what the file will hold, so the
/// matrix in memory is the matrix on disk.
fn pair_rate(args: &GenArgs, (tx_size, ip): (u32, Option<Ip>), peers: usize) -> Result<Rate> {
    let pps = match (args.pps, args.gbps) {
        (Some(PpsArg::Max), _) => return Ok(Rate::UNPACED),
        (Some(PpsArg::Rate(pps)), _) => {
            if pps.is_nan() || pps <= 0.0 {
                return Err(Error::refused(
                    "--pps must be greater than 0 (or 'max' for unpaced)",
                ));
            }
            pps
        }
        (None, Some(gbps)) => {
            if !(gbps > 0.0 && gbps.is_finite()) {
                return Err(Error::refused(format!(
                    "--gbps must be greater than 0 (got {})",
                    units::g(gbps)
                )));
            }
            let request = Datagram {
                payload: tx_size,
                ip: ip.unwrap_or_default(),
                mtu: args.mtu.checked()?,
            };
            pps_for_gbps(gbps, request) / peers as f64
        }
        (None, None) => DEFAULT_PPS,
    };
    if pps.is_infinite() {
        return Ok(Rate::UNPACED);
    }
    let written: f64 = gen_rate_text(Rate::per_second(pps))
        .parse()
        .expect("gen writes numbers");
    if written <= 0.0 {
        return Err(Error::refused(format!(
            "that is {pps:e} requests/s per pair, which rounds to 0 in the matrix: ask for more"
        )));
    }
    Ok(Rate::per_second(written))
}

/// A seed for `--peers` when none is given: 32 random bits, as the original draws.
fn random_seed() -> Result<i64> {
    let mut bytes = [0u8; 4];
    let mut urandom = std::fs::File::open("/dev/urandom")
        .map_err(|e| Error::io(Path::new("/dev/urandom"), "cannot draw a seed", &e))?;
    std::io::Read::read_exact(&mut urandom, &mut bytes)
        .map_err(|e| Error::io(Path::new("/dev/urandom"), "cannot draw a seed", &e))?;
    Ok(i64::from(u32::from_le_bytes(bytes)))
}
