//! `--bind` the two-NIC way (mx-original.md, "How --bind really works"): the
//! pattern is resolved on every host over ssh, and a matrix retargeted at the
//! data-plane addresses is deployed, so the traffic rides the bound NIC end to
//! end while ssh keeps using the login addresses. A host with no match aborts
//! the command before anything starts, named.

use std::io::Write;

use super::{Fleet, LOOK_TIMEOUT, scripts};
use crate::error::{Error, Result};
use crate::matrix::Matrix;

/// The matrix to deploy for `--bind spec`: every host at the address `spec`
/// matches on it. In a dry run the probes are printed and the matrix is kept.
pub fn retarget(fleet: &Fleet, spec: &str, out: &mut dyn Write) -> Result<Matrix> {
    let hosts = fleet.all();
    let outcomes = fleet.each(&hosts, |host| {
        fleet
            .transport
            .run(host, &scripts::bind_probe(spec), LOOK_TIMEOUT)
    });
    if fleet.dry_run {
        for (host, o) in fleet.hosts().iter().zip(&outcomes) {
            for line in o.text.lines() {
                writeln!(out, "  {}  {line}", host.name)?;
            }
        }
        return Ok(fleet.matrix.clone());
    }
    let mut addrs = Vec::new();
    let mut missing = Vec::new();
    for (host, o) in fleet.hosts().iter().zip(&outcomes) {
        let addr = o.text.lines().last().unwrap_or("").trim();
        if o.ok() && addr.parse::<std::net::Ipv4Addr>().is_ok() {
            addrs.push(addr.to_string());
        } else {
            missing.push(host.name.clone());
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(10).map(String::as_str).collect();
        return Err(Error::refused(format!(
            "--bind '{spec}' matches no interface on {} host(s): {}{} -- fix the pattern (an interface name or an address, matched against `ip -o -4 addr show`) before anything starts",
            missing.len(),
            shown.join(", "),
            if missing.len() > 10 { " ..." } else { "" }
        )));
    }
    let changed = fleet
        .hosts()
        .iter()
        .zip(&addrs)
        .filter(|(h, a)| &h.addr != *a)
        .count();
    writeln!(
        out,
        "[mx] --bind '{spec}': matrix retargeted at each host's matching address ({changed} of {} changed)",
        addrs.len()
    )?;
    Ok(fleet.matrix.retargeted(&addrs))
}
