//! `--bind` the two-NIC way (an agent bound to its data-plane address is
//! reached there only if the matrix gives peers that address): the pattern
//! is resolved on every host over ssh, and a matrix retargeted at the
//! data-plane addresses is deployed, so the traffic rides the bound NIC end to
//! end while ssh keeps using the login addresses. A host with no match aborts
//! the command before anything starts, named.

use std::io::Write;

use super::{Fleet, LOOK_TIMEOUT, scripts};
use mx_base::error::{Error, Result};
use std::net::IpAddr;

use mx_matrix::{Ip, Matrix, family};

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
        match o.ok().then(|| matched(&o.text, host.ip())).flatten() {
            Some(addr) => addrs.push(addr.to_string()),
            None => missing.push(host.name.clone()),
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(10).map(String::as_str).collect();
        return Err(Error::refused(format!(
            "--bind '{spec}' matches no interface on {} host(s): {}{} -- fix the pattern (an interface name or an address, matched against `ip -o addr show`) before anything starts",
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
    let retargeted = fleet.matrix.retargeted(&addrs);
    // Hosts that matched in different families cannot reach each other.
    family::decide(&retargeted, &family::literal_offers(&retargeted))
        .map_err(|why| Error::refused(format!("--bind '{spec}' retargets the matrix so: {why}")))?;
    Ok(retargeted)
}

/// The address a host's probe found: of `family` (the family the matrix
/// reaches the host by) when the pattern matched one, else of the other.
fn matched(probe: &str, family: Ip) -> Option<IpAddr> {
    let found: Vec<IpAddr> = probe
        .lines()
        .filter_map(|line| match line.trim().split_once(' ') {
            Some(("inet" | "inet6", addr)) => addr.trim().parse().ok(),
            _ => None,
        })
        .collect();
    let of = |ip: Ip| found.iter().copied().find(|a| Ip::of(*a) == ip);
    of(family).or_else(|| found.first().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_answer_in_the_hosts_family_first() {
        let both = "inet 198.18.1.11\ninet6 fd00:18:1::11\n";
        assert_eq!(matched(both, Ip::V4), Some("198.18.1.11".parse().unwrap()));
        assert_eq!(
            matched(both, Ip::V6),
            Some("fd00:18:1::11".parse().unwrap())
        );
        // A pattern only one family matched: that family, whatever the host's.
        let v6 = "inet6 2001:db8::5\n";
        assert_eq!(matched(v6, Ip::V4), Some("2001:db8::5".parse().unwrap()));
        assert_eq!(matched("", Ip::V4), None);
        assert_eq!(matched("inet bogus\nwarning: something\n", Ip::V4), None);
    }
}
