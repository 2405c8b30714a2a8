//! What `mx gen` prints once the matrix is written: hosts, flows and sizes,
//! the shape (pools, the shuffle's seed, the layers), the rates per pair,
//! host and NIC on the wire (fragments counted), the disk's share, and the
//! commands to run next.

use std::io::Write;
use std::path::Path;

use crate::cli::GenArgs;
use crate::commands::unpaced_ceiling;
use crate::matrix::build::Shape;
use crate::matrix::load::{self, Exchange, Mtu, fragments_line, per_host};
use crate::matrix::shape::LayerPlan;
use crate::matrix::{DiskMode, MIN_PACKET_BYTES, Matrix, Rate};
use crate::units::{self, Ip, bits, byte_rate, payload_bits, pps, pps_as_given};

/// The console summary, over a path of `mtu`.
pub(super) fn print_summary(
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
    writeln!(out, "  per pair : {}", pps_as_given(pair_pps))?;
    if matrix.pools().between.is_some() {
        let busiest = |f: fn(&load::HostLoad) -> f64| {
            load::layer_loads(matrix, 0)
                .iter()
                .map(f)
                .fold(0.0, f64::max)
        };
        writeln!(
            out,
            "  per host : {} out from each sender ({} peer{}), up to {} of requests in at a receiver",
            pps_as_given(host_pps),
            peers,
            plural(peers),
            pps(busiest(|l| l.in_pps))
        )?;
    } else {
        writeln!(
            out,
            "  per host : {} out, {} back in -- every host identical",
            pps_as_given(host_pps),
            pps_as_given(host_pps)
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
    let nic = load::layer_loads(matrix, 0)
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
    let load = load::layer_loads(matrix, 0)
        .into_iter()
        .max_by(|a, b| a.datagrams().total_cmp(&b.datagrams()))
        .unwrap_or_default();
    let disk = load::DiskLoad::of(c.disk, &load, c.tx_size, c.rx_size);
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
            load::DISK_BLOCK
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
