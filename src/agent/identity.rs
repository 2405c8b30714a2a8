//! Who this agent is in the matrix, where its peers are, and what `--bind` means
//! on this host (facts.md 3.2, 3.11).

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};

use crate::error::{Error, Result};
pub use crate::matrix::resolve::resolve;
use crate::matrix::{Host, Matrix};

/// True when `ip` is an address of this machine (a socket can bind to it).
pub fn is_local(ip: Ipv4Addr) -> bool {
    UdpSocket::bind(SocketAddrV4::new(ip, 0)).is_ok()
}

/// Which matrix host this agent is: `--host`, else the hostname (full or short),
/// else the one matrix host whose IPv4 literal is a local address.
pub fn who_am_i(matrix: &Matrix, host_flag: Option<&str>) -> Result<u32> {
    let names = || {
        matrix
            .hosts()
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(name) = host_flag {
        return matrix.index_of(name).ok_or_else(|| {
            Error::refused(format!(
                "--host '{name}' is not in the matrix (hosts: {})",
                names()
            ))
        });
    }
    let hostname = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let short = hostname.split('.').next().unwrap_or_default();
    for candidate in [hostname.as_str(), short] {
        if let Some(index) = matrix.index_of(candidate).filter(|_| !candidate.is_empty()) {
            return Ok(index);
        }
    }
    let local: Vec<u32> = matrix
        .hosts()
        .iter()
        .enumerate()
        .filter(|(_, h)| h.addr.parse::<Ipv4Addr>().is_ok_and(is_local))
        .map(|(i, _)| i as u32)
        .collect();
    match local.as_slice() {
        [one] => Ok(*one),
        [] => Err(Error::refused(format!(
            "this host ({hostname}) is not in the matrix and none of its addresses are local; pass --host. Matrix hosts: {}",
            names()
        ))),
        several => {
            let which: Vec<&str> = several
                .iter()
                .map(|&i| matrix.hosts()[i as usize].name.as_str())
                .collect();
            Err(Error::refused(format!(
                "several matrix hosts are local addresses ({}); pass --host",
                which.join(", ")
            )))
        }
    }
}

/// The interface and address `--bind SPEC` names: the first IPv4 address whose
/// line `<interface> inet <addr>/<prefix>` contains SPEC (so an interface name,
/// an address, or a prefix of one all work, as with `ip -o -4 addr show`).
pub fn bind_address(spec: &str) -> Result<(String, Ipv4Addr)> {
    let addrs = nix::ifaddrs::getifaddrs()
        .map_err(|e| Error::refused(format!("--bind '{spec}': cannot list interfaces: {e}")))?;
    for ifaddr in addrs {
        let Some(ip) = ifaddr
            .address
            .as_ref()
            .and_then(|a| a.as_sockaddr_in())
            .map(|a| a.ip())
        else {
            continue;
        };
        let prefix = ifaddr
            .netmask
            .as_ref()
            .and_then(|m| m.as_sockaddr_in())
            .map_or(32, |m| u32::from(m.ip()).count_ones());
        let line = format!("{} inet {ip}/{prefix}", ifaddr.interface_name);
        if line.contains(spec) {
            return Ok((ifaddr.interface_name, ip));
        }
    }
    Err(Error::refused(format!(
        "--bind '{spec}': no interface matched"
    )))
}

/// Refuses a `--bind` address that is not the one the matrix gives peers for
/// this host: every request to us would go where nobody listens.
pub fn check_bind_matches(
    bound: Ipv4Addr,
    interface: &str,
    me: &Host,
    matrix_addr: Option<SocketAddrV4>,
) -> Result<()> {
    match matrix_addr {
        Some(addr) if *addr.ip() != bound => Err(Error::refused(format!(
            "--bind put this agent on {bound} ({interface}), but the matrix tells every peer that {} is at {} -- their requests would go where nobody listens: 100% loss, guaranteed. Bind the address the matrix names, or retarget the matrix (mx start --bind does both)",
            me.name,
            addr.ip()
        ))),
        _ => Ok(()),
    }
}
