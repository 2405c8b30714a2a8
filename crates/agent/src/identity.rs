//! Who this agent is in the matrix, where its peers are, and what `--bind` means
//! on this host.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use mx_base::error::{Error, Result};
pub use mx_matrix::resolve::resolve;
use mx_matrix::{Host, Ip, Matrix};

/// True when `ip` is an address of this machine (a socket can bind to it).
pub(crate) fn is_local(ip: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Which matrix host this agent is: `--host`, else the hostname (full or short),
/// else the one matrix host whose address literal is a local address.
/// The refusals name the matrix's hosts, the first [`HOSTS_NAMED`] of them:
/// a 10,000-host matrix's would be a line of 100 kB.
pub(crate) fn who_am_i(matrix: &Matrix, host_flag: Option<&str>) -> Result<u32> {
    let names = || {
        let all: Vec<&str> = matrix.hosts().iter().map(|h| h.name.as_str()).collect();
        mx_base::units::names_list(&all, HOSTS_NAMED)
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

/// How many of the matrix's hosts a refusal names before it counts the rest.
const HOSTS_NAMED: usize = 20;

/// The interface and address `--bind SPEC` names: the first address whose
/// line of `ip -o addr show` (`2: eth1    inet 10.0.1.5/24 ...`) contains
/// SPEC, so an interface name, an address, or a prefix of one all work. An
/// address of `family` (this host's in the matrix) is taken before one of
/// the other; IPv6 link-local addresses are never taken (they need an
/// interface beside the address to be reached). Where `ip` cannot run (no
/// iproute2), the kernel's own list stands in, each address as the line
/// `<interface> inet <addr>/<prefix>`.
pub(crate) fn bind_address(spec: &str, family: Ip) -> Result<(String, IpAddr)> {
    let addresses = match ip_addr_show() {
        Some(listed) => listed,
        None => kernel_addresses()
            .map_err(|e| Error::refused(format!("--bind '{spec}': cannot list interfaces: {e}")))?,
    };
    let mut other = None;
    for (line, interface, ip) in addresses {
        if !line.contains(spec) {
            continue;
        }
        if Ip::of(ip) == family {
            return Ok((interface, ip));
        }
        other.get_or_insert((interface, ip));
    }
    other.ok_or_else(|| Error::refused(format!("--bind '{spec}': no interface matched")))
}

/// An address line, its interface and its address.
type Listed = (String, String, IpAddr);

/// `ip -o addr show`, one entry per address line (`<n>: <interface>
/// inet|inet6 <addr>/<prefix> ...`); `None` when it cannot run or fails.
fn ip_addr_show() -> Option<Vec<Listed>> {
    let out = std::process::Command::new("ip")
        .args(["-o", "addr", "show"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(parse_ip_addr_show(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_ip_addr_show(text: &str) -> Vec<Listed> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (interface, kind, address) = (fields.get(1)?, fields.get(2)?, fields.get(3)?);
            if *kind != "inet" && *kind != "inet6" {
                return None;
            }
            let ip: IpAddr = address.split('/').next()?.parse().ok()?;
            let link_local = matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local());
            (!link_local).then(|| (line.to_string(), interface.to_string(), ip))
        })
        .collect()
}

/// The kernel's interface addresses, each as `<interface> inet <addr>/<prefix>`.
fn kernel_addresses() -> nix::Result<Vec<Listed>> {
    Ok(nix::ifaddrs::getifaddrs()?
        .filter_map(|ifaddr| {
            let (ip, prefix) = interface_address(&ifaddr)?;
            let kind = if ip.is_ipv4() { "inet" } else { "inet6" };
            let line = format!("{} {kind} {ip}/{prefix}", ifaddr.interface_name);
            Some((line, ifaddr.interface_name, ip))
        })
        .collect())
}

/// The interface that holds address `ip`, else the one whose subnet holds
/// it (127.0.0.0/8 is loopback's, though `lo` carries only 127.0.0.1). Its
/// counters are what left and reached this host. `None` for a wildcard or a
/// NAT'd address.
pub(crate) fn interface_of(ip: IpAddr) -> Option<String> {
    let addrs: Vec<(String, IpAddr, u32)> = nix::ifaddrs::getifaddrs()
        .ok()?
        .filter_map(|i| interface_address(&i).map(|(a, p)| (i.interface_name, a, p)))
        .collect();
    let in_subnet = |a: IpAddr, prefix: u32| match (a, ip) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX.checked_shl(32 - prefix.min(32)).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX.checked_shl(128 - prefix.min(128)).unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    };
    let named = |want: &dyn Fn(&(String, IpAddr, u32)) -> bool| {
        addrs
            .iter()
            .find(|a| want(a))
            .map(|(name, _, _)| name.clone())
    };
    named(&|(_, a, _)| *a == ip).or_else(|| named(&|(_, a, p)| in_subnet(*a, *p)))
}

/// The interface that carries this agent's traffic: the one holding the
/// address it listens on, else the one its route to the first peer leaves
/// by. `None` when neither is known (no peer, a NAT'd address).
pub(crate) fn traffic_interface(
    local_ip: Option<IpAddr>,
    peers: &[Option<SocketAddr>],
) -> Option<String> {
    let ip = local_ip.or_else(|| peers.iter().flatten().find_map(|&p| route_source(p)))?;
    interface_of(ip)
}

/// The MTU of interface `name` (`/sys/class/net/<name>/mtu`).
pub(crate) fn interface_mtu(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The source address the kernel's routes pick toward `peer`: a UDP socket
/// connected to it learns its own address, and sends nothing.
pub(crate) fn route_source(peer: SocketAddr) -> Option<IpAddr> {
    let any = SocketAddr::new(Ip::of(peer.ip()).unspecified(), 0);
    let socket = UdpSocket::bind(any).ok()?;
    socket.connect(peer).ok()?;
    Some(socket.local_addr().ok()?.ip())
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
pub(crate) fn check_bind_matches(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A full mesh of `n` hosts h1..hn on 198.18.0.0/16 (no address of
    /// this machine's).
    fn mesh(n: usize) -> Matrix {
        let names: Vec<String> = (1..=n).map(|i| format!("h{i}=198.18.1.{i}")).collect();
        let mut text = format!("src\\dst,{}\n", names.join(","));
        for i in 1..=n {
            let cells: Vec<&str> = (1..=n).map(|j| if i == j { "" } else { "10" }).collect();
            text += &format!("h{i},{}\n", cells.join(","));
        }
        Matrix::parse(text.as_bytes(), "m.csv").unwrap()
    }

    #[test]
    fn a_refusal_names_twenty_hosts_and_counts_the_rest() {
        let why = |m: &Matrix| who_am_i(m, Some("nobody")).unwrap_err().to_string();
        // A small matrix's hosts are all named, as the original names them.
        assert!(
            why(&mesh(3)).contains("--host 'nobody' is not in the matrix (hosts: h1, h2, h3)"),
            "{}",
            why(&mesh(3))
        );
        let big = why(&mesh(500));
        assert!(big.contains("(hosts: h1, h2, "), "{big}");
        assert!(big.contains(", h20 and 480 more)"), "{big}");
        assert!(!big.contains("h21"), "{big}");
    }

    #[test]
    fn ip_addr_show_lines_give_their_interface_and_address() {
        let listed = parse_ip_addr_show(
            "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n\
             2: eth1    inet6 fe80::1/64 scope link \\       valid_lft forever\n\
             3: eth1    inet6 2001:db8::5/64 scope global \\       valid_lft forever\n\
             4: eth2    link/ether 00:11:22:33:44:55\n",
        );
        let got: Vec<(&str, String)> = listed
            .iter()
            .map(|(_, i, ip)| (i.as_str(), ip.to_string()))
            .collect();
        // The link-local address and the line that is no address are skipped.
        assert_eq!(
            got,
            [
                ("lo", "127.0.0.1".to_string()),
                ("eth1", "2001:db8::5".to_string())
            ]
        );
    }

    #[test]
    fn loopback_addresses_are_lo_s_by_its_subnet() {
        // lo holds 127.0.0.1/8: 127.77.0.3 is on it though not assigned.
        assert_eq!(
            interface_of("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(
            interface_of("127.77.0.3".parse().unwrap()).as_deref(),
            Some("lo")
        );
        // An address no interface's subnet holds (TEST-NET-3) has none.
        assert_eq!(interface_of("203.0.113.9".parse().unwrap()), None);
        let to_peer = SocketAddr::from(([127, 77, 0, 2], 5300));
        assert_eq!(
            traffic_interface(None, &[None, Some(to_peer)]).as_deref(),
            Some("lo")
        );
        assert!(interface_mtu("lo").is_some_and(|mtu| mtu >= 1500));
    }
}
