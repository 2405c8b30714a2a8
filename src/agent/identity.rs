//! Who this agent is in the matrix, where its peers are, and what `--bind` means
//! on this host (facts.md 3.2, 3.11).

use std::net::{IpAddr, SocketAddr, UdpSocket};

use crate::error::{Error, Result};
pub use crate::matrix::resolve::resolve;
use crate::matrix::{Host, Ip, Matrix};

/// True when `ip` is an address of this machine (a socket can bind to it).
pub fn is_local(ip: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Which matrix host this agent is: `--host`, else the hostname (full or short),
/// else the one matrix host whose address literal is a local address.
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
        .filter(|(_, h)| h.addr.parse::<IpAddr>().is_ok_and(is_local))
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

/// The interface and address `--bind SPEC` names: the first address whose line
/// `<interface> inet <addr>/<prefix>` (IPv6: `inet6`) contains SPEC, so an
/// interface name, an address, or a prefix of one all work, as with `ip -o
/// addr show`. An address of `family` (this host's in the matrix) is taken
/// before one of the other; IPv6 link-local addresses are never taken (they
/// need an interface beside the address to be reached).
pub fn bind_address(spec: &str, family: Ip) -> Result<(String, IpAddr)> {
    let addrs = nix::ifaddrs::getifaddrs()
        .map_err(|e| Error::refused(format!("--bind '{spec}': cannot list interfaces: {e}")))?;
    let mut other = None;
    for ifaddr in addrs {
        let Some((ip, prefix)) = interface_address(&ifaddr) else {
            continue;
        };
        let kind = if ip.is_ipv4() { "inet" } else { "inet6" };
        let line = format!("{} {kind} {ip}/{prefix}", ifaddr.interface_name);
        if !line.contains(spec) {
            continue;
        }
        if Ip::of(ip) == family {
            return Ok((ifaddr.interface_name, ip));
        }
        other.get_or_insert((ifaddr.interface_name, ip));
    }
    other.ok_or_else(|| Error::refused(format!("--bind '{spec}': no interface matched")))
}

/// An interface's address and prefix length; `None` for what is not an IP
/// address, or is an IPv6 link-local one.
fn interface_address(ifaddr: &nix::ifaddrs::InterfaceAddress) -> Option<(IpAddr, u32)> {
    let (address, netmask) = (ifaddr.address.as_ref()?, ifaddr.netmask.as_ref());
    if let Some(a) = address.as_sockaddr_in() {
        let prefix = netmask
            .and_then(|m| m.as_sockaddr_in())
            .map_or(32, |m| u32::from(m.ip()).count_ones());
        return Some((IpAddr::V4(a.ip()), prefix));
    }
    let a = address.as_sockaddr_in6()?.ip();
    if a.is_unicast_link_local() {
        return None;
    }
    let prefix = netmask
        .and_then(|m| m.as_sockaddr_in6())
        .map_or(128, |m| u128::from(m.ip()).count_ones());
    Some((IpAddr::V6(a), prefix))
}

/// Refuses a `--bind` address that is not the one the matrix gives peers for
/// this host: every request to us would go where nobody listens.
pub fn check_bind_matches(
    bound: IpAddr,
    interface: &str,
    me: &Host,
    matrix_addr: Option<SocketAddr>,
) -> Result<()> {
    match matrix_addr {
        Some(addr) if addr.ip() != bound => Err(Error::refused(format!(
            "--bind put this agent on {bound} ({interface}), but the matrix tells every peer that {} is at {} -- their requests would go where nobody listens: 100% loss, guaranteed. Bind the address the matrix names, or retarget the matrix (mx start --bind does both)",
            me.name,
            addr.ip()
        ))),
        _ => Ok(()),
    }
}
