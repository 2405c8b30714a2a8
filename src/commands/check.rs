//! `mx check`: will the NICs carry this matrix? Per-host packet and wire rates
//! against the caps the user gives; exit 1 when a host is over (facts.md 4.10).

use std::io::Write;

use crate::cli::CheckArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::matrix::Matrix;
use crate::plan::{WORKER_EXCHANGES_PER_SECOND, matrix_load, workers_needed};
use crate::units::{self, bits, pps};

pub fn run(args: &CheckArgs, out: &mut dyn Write) -> Result<u8> {
    let matrix = Matrix::load(&args.matrix)?;
    matrix.print_warnings();
    let n = matrix.host_count();
    let load = matrix_load(&matrix);

    writeln!(
        out,
        "matrix {}: {n} hosts, {} flows, {}, port {}",
        args.matrix.display(),
        matrix.flow_count(),
        matrix.sizes_phrase(),
        matrix.config.port
    )?;
    if let (Some(key), Some(rotation)) = (matrix.config.shuffle, matrix.config.rotation) {
        writeln!(
            out,
            "  layered: {} layers of {} peers, {}s each -- every layer is checked; each host shows its heaviest",
            rotation.layers,
            key.peers,
            units::g(rotation.dwell)
        )?;
    }
    let unpaced = matrix.unpaced_count();
    if unpaced > 0 {
        writeln!(
            out,
            "  {unpaced} flow{} unpaced ('max'): offered load is whatever the senders manage, so the caps below cannot be checked",
            if unpaced == 1 { " is" } else { "s are" }
        )?;
    }

    // Busiest first: by the heavier wire direction, then matrix order.
    let mut order: Vec<usize> = (0..n).collect();
    let heavier = |i: usize| load.hosts[i].out_wire.max(load.hosts[i].in_wire);
    order.sort_by(|&a, &b| heavier(b).total_cmp(&heavier(a)).then(a.cmp(&b)));
    let width = matrix
        .hosts()
        .iter()
        .map(|h| h.name.len() + 2)
        .max()
        .unwrap_or(0)
        .max(24);
    writeln!(out)?;
    writeln!(
        out,
        "  {:<width$}{:>13}{:>15}{:>15}",
        "host", "packets/s", "out (wire)", "in (wire)"
    )?;
    for &i in order.iter().take(args.top) {
        let h = &load.hosts[i];
        writeln!(
            out,
            "  {:<width$}{:>13}{:>15}{:>15}",
            matrix.hosts()[i].name,
            pps(h.packets),
            bits(h.out_wire),
            bits(h.in_wire)
        )?;
    }
    if n > args.top {
        writeln!(out, "  ... {} more (raise --top)", n - args.top)?;
    }

    let mut over_hosts = 0;
    let mut over_lines = Vec::new();
    for &i in &order {
        let (h, name) = (&load.hosts[i], &matrix.hosts()[i].name);
        let mut over = false;
        if let Some(gbps) = args.nic_gbps
            && h.out_wire.max(h.in_wire) > gbps * 1e9
        {
            over = true;
            over_lines.push(format!(
                "  OVER CAPACITY {name}: {} out / {} in > {} NIC",
                bits(h.out_wire),
                bits(h.in_wire),
                bits(gbps * 1e9)
            ));
        }
        if let Some(mpps) = args.nic_mpps
            && h.packets > mpps * 1e6
        {
            over = true;
            over_lines.push(format!(
                "  OVER CAPACITY {name}: {} > {} NIC packet rate",
                pps(h.packets),
                pps(mpps * 1e6)
            ));
        }
        over_hosts += usize::from(over);
    }
    if !over_lines.is_empty() {
        writeln!(out)?;
        for line in &over_lines {
            writeln!(out, "{line}")?;
        }
    }

    writeln!(out)?;
    writeln!(
        out,
        "  fleet offered: {} requests + the same rate in replies",
        pps(load.fleet_pps)
    )?;
    let code = if over_hosts > 0 {
        writeln!(
            out,
            "  NOT admissible: {over_hosts} host(s) over the caps you gave"
        )?;
        writeln!(
            out,
            "  fix it: lower --pps in `mx gen`, or shrink --tx-size/--rx-size"
        )?;
        EXIT_PROBLEMS
    } else {
        if args.nic_gbps.is_some() || args.nic_mpps.is_some() {
            writeln!(out, "  admissible against the caps you gave")?;
        } else {
            writeln!(
                out,
                "  no caps given -- pass --nic-gbps and/or --nic-mpps to check them"
            )?;
        }
        0
    };
    let busiest = load.hosts.iter().map(|h| h.out_pps).fold(0.0, f64::max);
    let workers = workers_needed(busiest);
    writeln!(
        out,
        "  the CPU side: one mx worker sends or answers ~{} of requests, so the busiest",
        pps(WORKER_EXCHANGES_PER_SECOND)
    )?;
    writeln!(
        out,
        "  host here needs about {workers} worker{} (`mx start --workers {workers}`, one core each);",
        if workers == 1 { "" } else { "s" }
    )?;
    writeln!(
        out,
        "  `mx hints --pps-per-host N` does that arithmetic for any rate"
    )?;
    Ok(code)
}
