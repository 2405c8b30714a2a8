//! `mx gen`: build matrix.csv from the server list, then say what it holds and
//! what to run next, fragments included: requests or
//! replies larger than the path MTU (`--mtu`) are called out, and the wire
//! and packet rates count every fragment.

use std::io::Write;
use std::path::Path;

use crate::cli::{GenArgs, PpsArg};
use crate::error::{Error, Result};
use crate::matrix::build::{Shape, Traffic, build, build_between};
use crate::matrix::pools::{Between, Pool, Pools};
use crate::matrix::resolve;
use crate::matrix::selection::Selection;
use crate::matrix::shape::LayerPlan;
use crate::matrix::write::gen_rate_text;
use crate::matrix::{
    DiskMode, Host, HostToken, MIN_PACKET_BYTES, Matrix, Rate, shared_endpoint,
    shared_endpoint_message,
};
use crate::plan::{self, Datagram, Exchange, Mtu, per_host, pps_for_gbps};
use crate::units::{self, Ip, bits, byte_rate, payload_bits, pps};

use super::unpaced_ceiling;
use crate::plan::fragments_line;

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
    print_summary(out, &matrix, args, (shape, peers), mtu)?;
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

/// The console summary, over a path of `mtu`.
fn print_summary(
    out: &mut dyn Write,
    matrix: &Matrix,
    args: &GenArgs,
    (shape, peers): (Shape, usize),
    mtu: Mtu,
) -> std::io::Result<()> {
    let (tx, rx) = (matrix.config.tx_size, matrix.config.rx_size);
    // gen draws hosts of one family (refused otherwise).
    let ip = matrix.ip().unwrap_or_default();
    print_written(out, matrix, args, mtu, ip)?;
    print_shape(out, matrix, (shape, peers))?;
    let rate = matrix.row(0).first().map_or(Rate::UNPACED, |c| c.rate);
    let x = Exchange::new(tx, rx, ip, mtu);
    let matrix_flag = if args.output == Path::new("matrix.csv") {
        String::new()
    } else {
        format!(" --matrix {}", args.output.display())
    };
    // A matrix of the Slurm allocation's nodes runs through Slurm.
    let via = if args.pools.pools.is_empty() && args.servers.path == Path::new("slurm") {
        " --via slurm"
    } else {
        ""
    };
    let run = format!("mx run{matrix_flag}{via} --for 60");
    match per_host(rate, peers) {
        None => print_unpaced(out, &run)?,
        Some(host_pps) => {
            let pair_pps = rate.pps().unwrap_or_default();
            print_per_host(out, matrix, &x, (pair_pps, host_pps), peers)?;
            print_per_nic(out, matrix, &x, pair_pps)?;
        }
    }
    print_disk(out, matrix)?;
    let (first, why) = if rate.is_unpaced() {
        (run, "# how far do the senders get?")
    } else {
        (
            format!("mx check{matrix_flag}{} --nic-gbps 25", args.mtu.flag()),
            "# will the NICs take it?",
        )
    };
    let start = format!("mx start{matrix_flag}{via}");
    let width = first.len().max(start.len()) + 5;
    writeln!(out)?;
    writeln!(out, "next: {first:<width$}{why}")?;
    writeln!(out, "      {start:<width$}# deploy and run it")?;
    Ok(())
}

/// The summary's head: the file written, hosts, flows and sizes, the traffic
/// class, and the datagrams the path MTU fragments.
fn print_written(
    out: &mut dyn Write,
    matrix: &Matrix,
    args: &GenArgs,
    mtu: Mtu,
    ip: Ip,
) -> std::io::Result<()> {
    let n = matrix.host_count();
    let (tx, rx) = (matrix.config.tx_size, matrix.config.rx_size);
    writeln!(out, "wrote {}", args.output.display())?;
    writeln!(
        out,
        "  {n} hosts, {} flows, {}",
        matrix.flow_count(),
        matrix.sizes_phrase()
    )?;
    if !matrix.config.dscp.is_default() {
        writeln!(out, "  class    : {}", matrix.config.dscp.sentence())?;
    }
    let mut label = "  MTU      : ";
    for (what, size) in [("requests", tx), ("replies", rx)] {
        if let Some(line) = fragments_line(what, size, mtu, &[ip]) {
            writeln!(out, "{label}{line}")?;
            label = "             ";
        }
    }
    Ok(())
}

/// Who sends to whom: the pools, the shuffle and its seed, the layers.
fn print_shape(
    out: &mut dyn Write,
    matrix: &Matrix,
    (shape, peers): (Shape, usize),
) -> std::io::Result<()> {
    let pools = matrix.pools();
    if pools.between.is_some() {
        print_pools(out, matrix, shape)?;
    } else if let Shape::KRegular { seed, .. } | Shape::Layered { seed, .. } = shape {
        writeln!(
            out,
            "  shape    : k-regular shuffle, {peers} peer{} per host (seed {seed} -- reuse --seed {seed} to replay)",
            plural(peers)
        )?;
    }
    if let Some(pool) = pools.pools.first().filter(|_| pools.between.is_none()) {
        writeln!(out, "  pool     : the mesh inside pool {}", pool.name)?;
    }
    if let Shape::Layered { dwell, fill, .. } = shape {
        if pools.between.is_some() {
            print_pool_layers(out, matrix, dwell, fill)?;
        } else {
            print_layers(out, matrix, peers, dwell, fill)?;
        }
    }
    Ok(())
}

/// An unpaced matrix has no rate, so no figure to size a NIC or workers by:
/// say so, and how to find out instead of pointing at `mx check`, which
/// cannot tell.
fn print_unpaced(out: &mut dyn Write, run: &str) -> std::io::Result<()> {
    const INDENT: &str = "             ";
    writeln!(out, "  rate: unpaced (send as fast as each host can)")?;
    writeln!(
        out,
        "  load     : whatever the senders manage, so there is no figure to size a NIC by,"
    )?;
    writeln!(
        out,
        "{INDENT}and nothing for `mx check` to weigh against its caps"
    )?;
    for line in unpaced_ceiling("the ceiling", run) {
        writeln!(out, "{INDENT}{line}")?;
    }
    Ok(())
}

/// The paced rates: per pair, out of (and back into) each host, and what
/// they are on the wire.
fn print_per_host(
    out: &mut dyn Write,
    matrix: &Matrix,
    x: &Exchange,
    (pair_pps, host_pps): (f64, f64),
    peers: usize,
) -> std::io::Result<()> {
    let (tx, rx) = (matrix.config.tx_size, matrix.config.rx_size);
    writeln!(out, "  per pair : {}", pps(pair_pps))?;
    if matrix.pools().between.is_some() {
        let busiest = |f: fn(&plan::HostLoad) -> f64| {
            plan::layer_loads(matrix, 0)
                .iter()
                .map(f)
                .fold(0.0, f64::max)
        };
        writeln!(
            out,
            "  per host : {} out from each sender ({} peer{}), up to {} of requests in at a receiver",
            pps(host_pps),
            peers,
            plural(peers),
            pps(busiest(|l| l.in_pps))
        )?;
    } else {
        writeln!(
            out,
            "  per host : {} out, {} back in -- every host identical",
            pps(host_pps),
            pps(host_pps)
        )?;
    }
    writeln!(
        out,
        "             {} out on the wire ({} payload)",
        bits(x.request.wire_bits(host_pps)),
        bits(payload_bits(host_pps, tx))
    )?;
    writeln!(
        out,
        "             {} back on the wire ({} payload)",
        bits(x.reply.wire_bits(host_pps)),
        bits(payload_bits(host_pps, rx))
    )?;
    Ok(())
}

/// What crosses each NIC, and what the fleet offers in all.
fn print_per_nic(
    out: &mut dyn Write,
    matrix: &Matrix,
    x: &Exchange,
    pair_pps: f64,
) -> std::io::Result<()> {
    // The host's own requests and the replies it serves go out, the replies
    // to it and its peers' requests come in. The very arithmetic `mx check`
    // weighs against the caps, on the heaviest layer (the first: a layered
    // gen's last layer may be short).
    let nic = plan::layer_loads(matrix, 0)
        .into_iter()
        .max_by(|a, b| a.packets(x).total_cmp(&b.packets(x)))
        .unwrap_or_default();
    // Packets, not datagrams: say so where they part.
    let counted = if x.request.fragmented() || x.reply.fragmented() {
        ", fragments counted"
    } else {
        ""
    };
    if matrix.pools().between.is_some() {
        writeln!(
            out,
            "  per NIC  : up to {} each way{counted}, on the busiest host (its requests and replies, both ways)",
            pps(nic.packets(x))
        )?;
    } else {
        writeln!(
            out,
            "  per NIC  : {} each way{counted} -- each host also answers its peers' {} of requests",
            pps(nic.packets(x)),
            pps(nic.in_pps)
        )?;
    }
    writeln!(
        out,
        "             {} out, {} in on the wire: requests and replies, as `mx check` counts",
        bits(nic.out_wire(x)),
        bits(nic.in_wire(x))
    )?;
    writeln!(
        out,
        "  fleet    : {} offered",
        pps(pair_pps * matrix.flow_count() as f64)
    )?;
    Ok(())
}

/// The disk line of a disk matrix: what the mode means, and what it asks of
/// each host's disk (every host alike in what gen draws; from the heaviest
/// layer's load, as the NIC line), or why it asks nothing.
fn print_disk(out: &mut dyn Write, matrix: &Matrix) -> std::io::Result<()> {
    let c = &matrix.config;
    let Some(sentence) = c.disk.sentence() else {
        return Ok(());
    };
    writeln!(out, "  disk     : {sentence}")?;
    const INDENT: &str = "             ";
    let load = plan::layer_loads(matrix, 0)
        .into_iter()
        .max_by(|a, b| a.datagrams().total_cmp(&b.datagrams()))
        .unwrap_or_default();
    let disk = plan::DiskLoad::of(c.disk, &load, c.tx_size, c.rx_size);
    let header_only = |size: u32| size <= MIN_PACKET_BYTES;
    let empty = match (
        c.disk.requests() && !header_only(c.tx_size),
        c.disk.replies() && !header_only(c.rx_size),
    ) {
        (false, false) => Some(match c.disk {
            DiskMode::Requests => "--tx-size",
            DiskMode::Replies => "--rx-size",
            _ => "--tx-size or --rx-size",
        }),
        _ => None,
    };
    if let Some(flag) = empty {
        writeln!(
            out,
            "{INDENT}...but those payloads are header-only ({MIN_PACKET_BYTES} bytes), so there is nothing to put on disk: raise {flag}"
        )?;
    } else if load.unpaced && disk.ops() == 0.0 {
        writeln!(
            out,
            "{INDENT}as many reads and writes as the unpaced flows send packets"
        )?;
    } else {
        writeln!(
            out,
            "{INDENT}per host {} IOPS / {} read, {} IOPS / {} written",
            units::ops(disk.read_iops),
            byte_rate(disk.read_bytes),
            units::ops(disk.write_iops),
            byte_rate(disk.write_bytes)
        )?;
        writeln!(
            out,
            "{INDENT}(whole {}-byte blocks, random offsets; `mx check` has it per host)",
            plan::DISK_BLOCK
        )?;
    }
    Ok(())
}

/// The pools of a pool-to-pool matrix and its shape: who sends, who
/// answers, and how the flows are dealt.
fn print_pools(out: &mut dyn Write, matrix: &Matrix, shape: Shape) -> std::io::Result<()> {
    const INDENT: &str = "             ";
    let pools = matrix.pools();
    let b = pools.between.expect("a pool-to-pool matrix");
    let (s, r) = (&pools.pools[b.senders], &pools.pools[b.receivers]);
    let (sn, rn) = (s.members.len(), r.members.len());
    if b.duplex {
        writeln!(
            out,
            "  pools    : {} ({sn} host{}) and {} ({rn} host{}) send to each other (duplex); no flow inside a pool",
            s.name,
            plural(sn),
            r.name,
            plural(rn)
        )?;
    } else {
        writeln!(
            out,
            "  pools    : {} ({sn} host{}) sends, {} ({rn} host{}) answers (simplex); no flow inside a pool",
            s.name,
            plural(sn),
            r.name,
            plural(rn)
        )?;
    }
    match shape {
        Shape::FullMesh => writeln!(
            out,
            "  shape    : every {} host to every {} host{}",
            s.name,
            r.name,
            if b.duplex { ", and back" } else { "" }
        )?,
        Shape::KRegular { peers, seed } | Shape::Layered { peers, seed, .. } => {
            let k = peers as usize;
            writeln!(
                out,
                "  shape    : each sender talks to exactly {k} host{} of the other pool, dealt evenly (seed {seed} --",
                plural(k)
            )?;
            writeln!(out, "{INDENT}reuse --seed {seed} to replay):")?;
            for (from, to) in pools.directions() {
                let (f, t) = (&pools.pools[from], &pools.pools[to]);
                let flows = f.members.len() * k;
                let (low, high) = (flows / t.members.len(), flows.div_ceil(t.members.len()));
                let each = if low == high {
                    format!("exactly {low} {} sender{}", f.name, plural(low))
                } else {
                    format!(
                        "{low} or {high} {} senders ({flows} flows over {} hosts)",
                        f.name,
                        t.members.len()
                    )
                };
                writeln!(out, "{INDENT}every {} host answers {each}", t.name)?;
            }
        }
    }
    Ok(())
}

/// The rotation of a layered pool-to-pool matrix.
fn print_pool_layers(
    out: &mut dyn Write,
    matrix: &Matrix,
    dwell: f64,
    fill: bool,
) -> std::io::Result<()> {
    const INDENT: &str = "             ";
    let pools = matrix.pools();
    let layers = matrix.config.rotation.map_or(1, |r| r.layers as usize);
    let peers = matrix.config.shuffle.map_or(1, |k| k.peers as usize);
    let short = pools
        .directions()
        .iter()
        .any(|&(_, r)| !pools.pools[r].members.len().is_multiple_of(peers))
        || pools
            .directions()
            .iter()
            .any(|&(_, r)| pools.pools[r].members.len().div_ceil(peers) != layers);
    writeln!(
        out,
        "  layers   : {layers}, held {} each -- every cross-pool pair measured {} per {} cycle",
        seconds(dwell),
        if fill && short {
            "at least once"
        } else {
            "exactly once"
        },
        seconds(layers as f64 * dwell)
    )?;
    if short && !fill {
        writeln!(
            out,
            "{INDENT}a short layer carries fewer flows (use --equal-layers to pad it with repeats)"
        )?;
    } else if short {
        writeln!(
            out,
            "{INDENT}short layers padded with repeats (--equal-layers): the load never dips"
        )?;
    }
    writeln!(
        out,
        "{INDENT}dwell must be a whole multiple of the agents' --interval (default 5s); `mx start` checks"
    )
}

fn print_layers(
    out: &mut dyn Write,
    matrix: &Matrix,
    peers: usize,
    dwell: f64,
    fill: bool,
) -> std::io::Result<()> {
    const INDENT: &str = "             ";
    let n = matrix.host_count();
    let layers = LayerPlan::layer_count(n, peers);
    let remainder = (n - 1) - peers * (layers - 1);
    let padded = fill && remainder < peers;
    writeln!(
        out,
        "  layers   : {layers}, held {} each -- every ordered pair measured {} per {} cycle",
        seconds(dwell),
        if padded {
            "at least once"
        } else {
            "exactly once"
        },
        seconds(layers as f64 * dwell)
    )?;
    if padded {
        let short = peers - remainder;
        writeln!(
            out,
            "{INDENT}every layer carries exactly {peers} peers per host (--equal-layers): the last"
        )?;
        writeln!(
            out,
            "{INDENT}layer's {remainder} leftover shift{} padded with {short} repeat{}, so those {short} pair{}",
            if remainder == 1 { " is" } else { "s are" },
            plural(short),
            plural(short)
        )?;
        writeln!(
            out,
            "{INDENT}per host are measured twice per cycle and the load never dips"
        )?;
    } else if fill {
        writeln!(
            out,
            "{INDENT}--equal-layers: {peers} divides {} evenly, so there is nothing to pad",
            n - 1
        )?;
    } else if remainder < peers {
        writeln!(
            out,
            "{INDENT}the last layer carries the remainder: {remainder} peer{} per host instead of {peers} (use",
            plural(remainder)
        )?;
        writeln!(
            out,
            "{INDENT}--equal-layers to pad it with repeats and hold the load flat)"
        )?;
    }
    writeln!(
        out,
        "{INDENT}dwell must be a whole multiple of the agents' --interval (default 5s); `mx start` checks"
    )
}

/// A time span as the summaries print it: `30s`, `2m00s`; fractions kept (`2.5s`).
fn seconds(value: f64) -> String {
    if value.fract() == 0.0 {
        units::duration(value)
    } else {
        format!("{}s", units::g(value))
    }
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}
