//! `mx check`: will the NICs carry this matrix? Per-host packet and wire rates
//! against the caps the user gives; exit 1 when a host is over.
//!
//! Requests or replies larger than the path MTU (`--mtu`) are called out, one
//! line a direction, and the packet rates count their fragments.
//!
//! Unpaced (`max`) flows have no rate, so nothing about them can be weighed:
//! they are named and left out of the loads, and a matrix with nothing paced
//! gets no table, no verdict and no worker count, only what is known and how to
//! find out the rest.
//!
//! `json.rs` writes the same figures as one document (`--json`).

mod json;

use std::io::Write;

use crate::cli::CheckArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::matrix::load::{
    self, DiskLoad, MatrixLoad, WORKER_EXCHANGES_PER_SECOND, matrix_load, workers_needed,
};
use crate::matrix::{DiskMode, Host, Ip, MIN_PACKET_BYTES, Matrix, resolve};
use crate::units::{self, bits, byte_rate, ops, pps};

use super::unpaced_ceiling;
use crate::matrix::load::fragments_line;

/// Flows inside a pool of a pool-to-pool matrix named before the rest are counted.
const INSIDE_FLOWS_LISTED: usize = 5;

/// Senders whose unpaced flows are listed; the rest are counted.
const UNPACED_SENDERS_LISTED: usize = 5;
/// Receivers named on one sender's line; the rest are counted.
const UNPACED_RECEIVERS_LISTED: usize = 8;

/// Names that resolve to no address here: weighed as IPv4 below, but `mx
/// start` refuses them, so check says so before the user deploys. (Still
/// checked, not refused: a matrix of bare names, hand-written to be
/// weighed, is the original's use of check.)
fn unresolved_line(matrix: &Matrix, unresolved: &[usize], out: &mut dyn Write) -> Result<()> {
    if unresolved.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = unresolved
        .iter()
        .map(|&i| {
            let h = &matrix.hosts()[i];
            if h.name == h.addr {
                h.name.clone()
            } else {
                format!("{} ({})", h.name, h.addr)
            }
        })
        .collect();
    writeln!(
        out,
        "  NOT RESOLVED: {} -- no address on this machine, so mx start refuses {}: fix the name, or write the address in the matrix (name=address)",
        names.join(", "),
        if unresolved.len() == 1 { "it" } else { "them" }
    )?;
    Ok(())
}

pub fn run(args: &CheckArgs, out: &mut dyn Write) -> Result<u8> {
    // A value no path has is refused before the matrix is read.
    args.mtu.checked()?;
    // Names resolved here: each host is weighed in its own IP version.
    let (matrix, unresolved) = resolve::with_families_and_unresolved(&Matrix::load(&args.matrix)?)?;
    let ips = families(&matrix);
    // IPv6 hosts (last, if any) hold the MTU to IPv6's least.
    let mtu = args
        .mtu
        .for_family(ips.last().copied().unwrap_or_default())?;
    matrix.print_warnings();
    let load = matrix_load(&matrix, mtu);
    if args.json {
        return json::json(args, &matrix, (&load, mtu), out);
    }

    header(args, &matrix, out)?;
    unresolved_line(&matrix, &unresolved, out)?;
    if !matrix.config.dscp.is_default() {
        writeln!(out, "  class: {}", matrix.config.dscp.sentence())?;
    }
    for (what, size) in [
        ("requests", matrix.config.tx_size),
        ("replies", matrix.config.rx_size),
    ] {
        if let Some(line) = fragments_line(what, size, mtu, &ips) {
            writeln!(out, "  {line}")?;
        }
    }
    // Counted as the loads count them: in a layered matrix a row's first cell
    // sets its rate in every layer.
    let (unpaced, unpaced_lines) = unpaced_flows(&matrix);
    let nothing_paced = load.fleet_pps == 0.0;
    if let (Some(key), Some(rotation)) = (matrix.config.shuffle, matrix.config.rotation) {
        writeln!(
            out,
            "  layered: {} layers of {} peers, {}s each{}",
            rotation.layers,
            key.peers,
            units::g(rotation.dwell),
            if nothing_paced {
                ""
            } else {
                " -- every layer is checked; each host shows its heaviest"
            }
        )?;
    }
    pool_lines(&matrix, out)?;
    if nothing_paced {
        return all_unpaced(args, &matrix, out);
    }
    if unpaced > 0 {
        let (flows, load) = if unpaced == 1 {
            (
                format!("1 flow is {UNPACED}"),
                "its load is whatever its sender manages",
            )
        } else {
            (
                format!("{unpaced} flows are {UNPACED}"),
                "their load is whatever the senders manage",
            )
        };
        writeln!(out, "  {flows}, left out below: {load}")?;
        for line in &unpaced_lines {
            writeln!(out, "    {line}")?;
        }
    }
    let over_hosts = table_and_caps(args, &matrix, &load, out)?;
    disk_table(args, &matrix, &load, out)?;
    verdict(args, &load, unpaced, over_hosts, out)?;
    if unpaced > 0 {
        writeln!(out)?;
        let goal = if unpaced == 1 {
            "what the unpaced flow reaches"
        } else {
            "what the unpaced flows reach"
        };
        for line in unpaced_ceiling(goal, &run_command(args)) {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(if over_hosts > 0 { EXIT_PROBLEMS } else { 0 })
}

/// The first line: the matrix, its size, sizes, port, disk mode and IP version.
fn header(args: &CheckArgs, matrix: &Matrix, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "matrix {}: {} hosts, {} flows, {}, port {}{}{}",
        args.matrix.display(),
        matrix.host_count(),
        matrix.flow_count(),
        matrix.sizes_phrase(),
        matrix.config.port,
        match matrix.config.disk {
            DiskMode::Off => String::new(),
            mode => format!(", disk={}", mode.name()),
        },
        match matrix.ip() {
            Some(Ip::V4) => "",
            Some(Ip::V6) => ", IPv6",
            None => ", IPv4 and IPv6",
        }
    )?;
    Ok(())
}

/// The IP versions of the matrix's hosts, IPv4 first.
fn families(matrix: &Matrix) -> Vec<Ip> {
    let mut ips: Vec<Ip> = matrix.hosts().iter().map(Host::ip).collect();
    ips.sort();
    ips.dedup();
    ips
}

/// How a flow without a rate is named: the cell words that make one (any
/// case) all mean `max`, as they did in the original.
const UNPACED: &str = "unpaced ('max'; a cell of 'inf' or 'unpaced' means max too)";

/// Nothing paced: no load to weigh and no rate to size workers from. Exit 0: an
/// unpaced matrix is a fine thing to run, only not one to check.
fn all_unpaced(args: &CheckArgs, matrix: &Matrix, out: &mut dyn Write) -> Result<u8> {
    let every = if matrix.flow_count() == 1 {
        "the only flow is"
    } else {
        "every flow is"
    };
    writeln!(
        out,
        "  {every} {UNPACED}: the offered load is whatever the senders manage, so there"
    )?;
    writeln!(
        out,
        "  is no load to weigh against a NIC's caps and no rate to size workers from"
    )?;
    writeln!(out)?;
    let caps: Vec<String> = [("--nic-gbps", args.nic_gbps), ("--nic-mpps", args.nic_mpps)]
        .into_iter()
        .filter_map(|(flag, cap)| cap.map(|c| format!("{flag} {}", units::g(c))))
        .collect();
    if !caps.is_empty() {
        writeln!(
            out,
            "  caps not checked: {} (nothing here is paced)",
            caps.join(" ")
        )?;
    }
    for line in unpaced_ceiling("the ceiling", &run_command(args)) {
        writeln!(out, "  {line}")?;
    }
    Ok(0)
}

/// The paced loads, busiest first, and the hosts over the caps; returns how many
/// cap violations there are (a host over both caps counts twice, as the original).
fn table_and_caps(
    args: &CheckArgs,
    matrix: &Matrix,
    load: &MatrixLoad,
    out: &mut dyn Write,
) -> Result<usize> {
    let n = matrix.host_count();
    // Busiest first: by the heavier wire direction, then matrix order.
    let mut order: Vec<usize> = (0..n).collect();
    let heavier = |i: usize| load.hosts[i].out_wire.max(load.hosts[i].in_wire);
    order.sort_by(|&a, &b| heavier(b).total_cmp(&heavier(a)).then(a.cmp(&b)));
    let width = name_width(matrix);
    writeln!(out)?;
    writeln!(
        out,
        "  {:<width$}{:>13}{:>15}{:>15}",
        "host", "pps each way", "out (wire)", "in (wire)"
    )?;
    for &i in order.iter().take(args.top) {
        let h = &load.hosts[i];
        writeln!(
            out,
            "  {:<width$}{:>13}{:>15}{:>15}{}",
            matrix.hosts()[i].name,
            pps(h.packets),
            bits(h.out_wire),
            bits(h.in_wire),
            if h.unpaced { "  + unpaced" } else { "" }
        )?;
    }
    if n > args.top {
        writeln!(out, "  ... {} more (raise --top)", n - args.top)?;
    }

    let mut over_hosts = 0;
    let mut over_lines = Vec::new();
    for &i in &order {
        let over = over_caps(args, &load.hosts[i]);
        for reason in &over {
            over_lines.push(format!(
                "  OVER CAPACITY {}: {reason}",
                matrix.hosts()[i].name
            ));
        }
        over_hosts += usize::from(!over.is_empty());
    }
    if !over_lines.is_empty() {
        writeln!(out)?;
        for line in &over_lines {
            writeln!(out, "{line}")?;
        }
    }
    Ok(over_hosts)
}

/// How host load `h` exceeds the caps given, one phrase per cap (empty: it
/// does not).
fn over_caps(args: &CheckArgs, h: &load::PeakLoad) -> Vec<String> {
    let mut over = Vec::new();
    if let Some(gbps) = args.nic_gbps
        && h.out_wire.max(h.in_wire) > gbps * 1e9
    {
        over.push(format!(
            "{} out / {} in > {} NIC",
            bits(h.out_wire),
            bits(h.in_wire),
            bits(gbps * 1e9)
        ));
    }
    if let Some(mpps) = args.nic_mpps
        && h.packets > mpps * 1e6
    {
        over.push(format!(
            "{} > {} NIC packet rate",
            pps(h.packets),
            pps(mpps * 1e6)
        ));
    }
    over
}

/// A disk matrix: what each host's disk is asked for, busiest first, from
/// the same paced loads as the table above.
fn disk_table(
    args: &CheckArgs,
    matrix: &Matrix,
    load: &MatrixLoad,
    out: &mut dyn Write,
) -> Result<()> {
    let c = &matrix.config;
    let Some(sentence) = c.disk.sentence() else {
        return Ok(());
    };
    let disks: Vec<DiskLoad> = load.hosts.iter().map(|h| h.disk).collect();
    writeln!(out)?;
    writeln!(out, "  disk: {sentence}")?;
    if disks.iter().all(|d| d.ops() == 0.0) {
        writeln!(
            out,
            "  ...but those payloads are header-only ({MIN_PACKET_BYTES} bytes): nothing to put on disk"
        )?;
        return Ok(());
    }
    let mut order: Vec<usize> = (0..disks.len()).collect();
    order.sort_by(|&a, &b| disks[b].ops().total_cmp(&disks[a].ops()).then(a.cmp(&b)));
    // Each column as wide as its widest cell (its title's too), four spaces
    // apart, as the original prints it: the names to the left, the figures
    // to the right, so that a row reads `h1    2.0k    16.4 MB/s ...` when
    // its figures are the widest of their columns.
    let titles = ["host", "read IOPS", "read", "write IOPS", "write"];
    let rows: Vec<[String; 5]> = order
        .iter()
        .take(args.top)
        .map(|&i| {
            let d = &disks[i];
            [
                matrix.hosts()[i].name.clone(),
                ops(d.read_iops),
                byte_rate(d.read_bytes),
                ops(d.write_iops),
                byte_rate(d.write_bytes),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..titles.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([titles[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 5]| {
        let mut text = format!("  {:<w$}", cells[0], w = widths[0]);
        for (cell, w) in cells.iter().zip(&widths).skip(1) {
            text.push_str(&format!("    {cell:>w$}"));
        }
        text.trim_end().to_string()
    };
    writeln!(out, "{}", line(titles))?;
    for row in &rows {
        writeln!(
            out,
            "{}",
            line([&row[0], &row[1], &row[2], &row[3], &row[4]])
        )?;
    }
    if disks.len() > args.top {
        writeln!(out, "  ... {} more (raise --top)", disks.len() - args.top)?;
    }
    writeln!(
        out,
        "  each agent worker keeps --disk-depth I/Os in flight (1 by default), so a host's queue depth is its --workers x --disk-depth"
    )?;
    writeln!(
        out,
        "  (whole {}-byte blocks at random offsets, read and written with O_DIRECT where the filesystem takes it)",
        load::DISK_BLOCK
    )?;
    Ok(())
}

/// The host column's width: the longest name and two spaces, at least 24.
fn name_width(matrix: &Matrix) -> usize {
    matrix
        .hosts()
        .iter()
        .map(|h| h.name.len() + 2)
        .max()
        .unwrap_or(0)
        .max(24)
}

/// The fleet's offer, the verdict on the caps and the CPU side, for the paced
/// flows (the original's lines when every flow is paced).
fn verdict(
    args: &CheckArgs,
    load: &MatrixLoad,
    unpaced: usize,
    over_hosts: usize,
    out: &mut dyn Write,
) -> Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "  fleet offered: {} requests + the same rate in replies{}",
        pps(load.fleet_pps),
        match unpaced {
            0 => "",
            1 => ", and the unpaced flow on top",
            _ => ", and the unpaced flows on top",
        }
    )?;
    if over_hosts > 0 {
        writeln!(
            out,
            "  NOT admissible: {over_hosts} host(s) over the caps you gave"
        )?;
        writeln!(
            out,
            "  fix it: lower --pps in `mx gen`, or shrink --tx-size/--rx-size"
        )?;
    } else if args.nic_gbps.is_none() && args.nic_mpps.is_none() {
        writeln!(
            out,
            "  no caps given -- pass --nic-gbps and/or --nic-mpps to check them"
        )?;
    } else if unpaced > 0 {
        writeln!(
            out,
            "  the paced flows are admissible against the caps you gave; the unpaced {} on top, unchecked",
            if unpaced == 1 {
                "one comes"
            } else {
                "ones come"
            }
        )?;
    } else {
        writeln!(out, "  admissible against the caps you gave")?;
    }
    let busiest = load.hosts.iter().map(|h| h.out_pps).fold(0.0, f64::max);
    let workers = workers_needed(busiest);
    writeln!(
        out,
        "  the CPU side: one mx worker sends or answers ~{} of requests, so the busiest",
        pps(WORKER_EXCHANGES_PER_SECOND)
    )?;
    if unpaced > 0 {
        // No count for the unpaced flows: they take whatever workers they get.
        writeln!(
            out,
            "  host here needs about {workers} worker{} for its paced flows (`mx start --workers {workers}`, one core each),",
            if workers == 1 { "" } else { "s" }
        )?;
        writeln!(
            out,
            "  the unpaced {} aside; `mx hints --pps-per-host N` does that arithmetic for any rate",
            if unpaced == 1 { "flow" } else { "flows" }
        )?;
    } else {
        writeln!(
            out,
            "  host here needs about {workers} worker{} (`mx start --workers {workers}`, one core each);",
            if workers == 1 { "" } else { "s" }
        )?;
        writeln!(
            out,
            "  `mx hints --pps-per-host N` does that arithmetic for any rate"
        )?;
    }
    Ok(())
}

/// How many flows are unpaced, and one line per sender naming them: `b -> d, e`;
/// in a layered matrix a sender's rate holds in every layer, so its line says so.
fn unpaced_flows(matrix: &Matrix) -> (usize, Vec<String>) {
    let layered = matrix.config.shuffle.is_some() && matrix.config.rotation.is_some();
    let name = |i: u32| matrix.hosts()[i as usize].name.as_str();
    let mut lines = Vec::new();
    let (mut senders, mut flows) = (0, 0);
    for (src, row) in matrix.rows() {
        let line = if layered {
            if !matrix.row_rate(src).is_some_and(|r| r.is_unpaced()) {
                continue;
            }
            flows += row.len();
            format!("{} -> its peers, in every layer", name(src))
        } else {
            let receivers: Vec<&str> = row
                .iter()
                .filter(|c| c.rate.is_unpaced())
                .map(|c| name(c.dst))
                .collect();
            if receivers.is_empty() {
                continue;
            }
            flows += receivers.len();
            let mut line = format!(
                "{} -> {}",
                name(src),
                receivers
                    .iter()
                    .take(UNPACED_RECEIVERS_LISTED)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if receivers.len() > UNPACED_RECEIVERS_LISTED {
                line.push_str(&format!(
                    " and {} more",
                    receivers.len() - UNPACED_RECEIVERS_LISTED
                ));
            }
            line
        };
        senders += 1;
        if senders <= UNPACED_SENDERS_LISTED {
            lines.push(line);
        }
    }
    if senders > UNPACED_SENDERS_LISTED {
        lines.push(format!(
            "... and {} more hosts sending unpaced",
            senders - UNPACED_SENDERS_LISTED
        ));
    }
    (flows, lines)
}

/// `mx run --for 60`, with this check's --matrix when it is not the default.
fn run_command(args: &CheckArgs) -> String {
    if args.matrix == std::path::Path::new("matrix.csv") {
        "mx run --for 60".to_string()
    } else {
        format!("mx run --matrix {} --for 60", args.matrix.display())
    }
}

/// A pool matrix's pools: per direction of a pool-to-pool matrix its flows
/// and offered rate (layer 0, the grid), and any flow the grid holds inside a
/// pool, which a pool-to-pool matrix never draws (a hand edit, named).
fn pool_lines(matrix: &Matrix, out: &mut dyn Write) -> std::io::Result<()> {
    let pools = matrix.pools();
    let Some(between) = pools.between else {
        if let Some(pool) = pools.pools.first() {
            writeln!(
                out,
                "  pool {}: {} of the {} hosts",
                pool.name,
                pool.members.len(),
                matrix.host_count()
            )?;
        }
        return Ok(());
    };
    let pool_of = pools.pool_of_each(matrix.host_count());
    let (s, r) = (
        &pools.pools[between.senders],
        &pools.pools[between.receivers],
    );
    writeln!(
        out,
        "  pools: {} ({} hosts) {} {} ({} hosts), no flow inside a pool",
        s.name,
        s.members.len(),
        if between.duplex { "<->" } else { "->" },
        r.name,
        r.members.len()
    )?;
    let mut inside = Vec::new();
    for (from, to) in pools.directions() {
        let (mut flows, mut offered, mut unpaced) = (0usize, 0.0, 0usize);
        for (src, row) in matrix.rows() {
            if pool_of[src as usize] != Some(from) {
                continue;
            }
            for cell in row.iter().filter(|c| pool_of[c.dst as usize] == Some(to)) {
                flows += 1;
                match cell.rate.pps() {
                    Some(pps) => offered += pps,
                    None => unpaced += 1,
                }
            }
        }
        let unpaced = if unpaced > 0 {
            format!(" (+{unpaced} unpaced)")
        } else {
            String::new()
        };
        writeln!(
            out,
            "    {} -> {}: {flows} flows, {} offered{unpaced}{}",
            pools.pools[from].name,
            pools.pools[to].name,
            pps(offered),
            if matrix.config.rotation.is_some() {
                " in layer 0"
            } else {
                ""
            }
        )?;
    }
    for (src, row) in matrix.rows() {
        for cell in row {
            let (a, b) = (pool_of[src as usize], pool_of[cell.dst as usize]);
            if a.is_some() && a == b {
                inside.push((src, cell.dst));
            }
        }
    }
    if !inside.is_empty() {
        let names: Vec<String> = inside
            .iter()
            .take(INSIDE_FLOWS_LISTED)
            .map(|&(a, b)| {
                format!(
                    "{} -> {}",
                    matrix.hosts()[a as usize].name,
                    matrix.hosts()[b as usize].name
                )
            })
            .collect();
        let more = inside.len().saturating_sub(INSIDE_FLOWS_LISTED);
        writeln!(
            out,
            "    but {} flow{} stay{} inside a pool (edited by hand?): {}{}",
            inside.len(),
            if inside.len() == 1 { "" } else { "s" },
            if inside.len() == 1 { "s" } else { "" },
            names.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}
