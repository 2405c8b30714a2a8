//! Host names to addresses: a host's token is an IPv4 literal or a name the
//! resolver turns into one. The controller resolves names once and deploys a
//! matrix of addresses, so the agents never need DNS.

use std::net::{Ipv4Addr, SocketAddrV4, ToSocketAddrs};

use super::{Host, Matrix};
use crate::error::{Error, Result};

/// The host's IPv4 address: the literal, or the first IPv4 the name resolves to.
pub fn resolve(host: &Host) -> Option<SocketAddrV4> {
    if let Ok(ip) = host.addr.parse::<Ipv4Addr>() {
        return Some(SocketAddrV4::new(ip, host.port));
    }
    (host.addr.as_str(), host.port)
        .to_socket_addrs()
        .ok()?
        .find_map(|a| match a {
            std::net::SocketAddr::V4(v4) => Some(v4),
            std::net::SocketAddr::V6(_) => None,
        })
}

/// The matrix with every host name resolved to its IPv4 address on the
/// controller, when any host is named rather than numbered: the agents never
/// need DNS (ssh still goes to the name). `None` when all are addresses.
/// Two names (or a name and an address) landing on one ip:port are refused:
/// one agent would answer for both.
pub fn resolved(matrix: &Matrix) -> Result<Option<Matrix>> {
    if matrix
        .hosts()
        .iter()
        .all(|h| h.addr.parse::<Ipv4Addr>().is_ok())
    {
        return Ok(None);
    }
    let mut addrs = Vec::new();
    for host in matrix.hosts() {
        match resolve(host) {
            Some(addr) => addrs.push(addr.ip().to_string()),
            None => {
                return Err(Error::refused(format!(
                    "host '{}': '{}' does not resolve to an IPv4 address on this machine -- fix the name or write the address in the matrix",
                    host.name, host.addr
                )));
            }
        }
    }
    let resolved = matrix.retargeted(&addrs);
    if let Some((a, b)) = super::shared_endpoint(resolved.hosts()) {
        let (first, second) = (&matrix.hosts()[a], &matrix.hosts()[b]);
        return Err(Error::refused(format!(
            "hosts '{}' ({}) and '{}' ({}) both resolve to {}:{} -- one agent would answer for both; give each host its own address or port",
            first.name, first.addr, second.name, second.addr, addrs[a], first.port
        )));
    }
    Ok(Some(resolved))
}
