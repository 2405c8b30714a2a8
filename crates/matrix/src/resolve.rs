//! Host names to addresses: a host's token is an IPv4 or IPv6 literal, or a
//! name the resolver turns into one. The controller resolves names once and
//! deploys a matrix of addresses, so the agents never need DNS.
//!
//! A name that resolves to both families takes the one its group of flows
//! needs ([`super::family`]): IPv4 unless a peer it is joined to has IPv6 only.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use super::family::{self, Offer};
use super::{Host, HostToken, Ip, Matrix, literal_family};
use mx_base::error::{Error, Result};

/// Every address `host` stands for: its literal, or what its name resolves to.
pub fn lookup(host: &Host) -> Vec<IpAddr> {
    if let Ok(ip) = host.addr.parse::<IpAddr>() {
        return vec![ip];
    }
    (host.addr.as_str(), host.port)
        .to_socket_addrs()
        .map(|addrs| addrs.map(|a| a.ip()).collect())
        .unwrap_or_default()
}

/// What each host can be reached by: a literal its family (no resolver
/// asked), a name the families it resolves to on this machine.
pub fn offers(hosts: &[Host]) -> Vec<Offer> {
    hosts
        .iter()
        .map(|h| match h.addr.parse() {
            Ok(ip) => Offer::of(&[ip]),
            Err(_) => Offer::of(&lookup(h)),
        })
        .collect()
}

/// The one IP version of `tokens` when a shape joins them all (what `mx gen`
/// draws, and `mx hints` sizes), names resolved here: `None` when none
/// resolves, `Err` with the reason when they have none in common.
pub fn one_family(tokens: &[HostToken], port: u16) -> std::result::Result<Option<Ip>, String> {
    let hosts: Vec<Host> = tokens
        .iter()
        .map(|t| Host::from_token(t.clone(), port))
        .collect();
    family::one_family(&hosts, &offers(&hosts))
}

/// The host's address and port: the literal, or the first address its name
/// resolves to in its family (the first IPv4, then IPv6, when its family is
/// not decided).
pub fn resolve(host: &Host) -> Option<SocketAddr> {
    let addrs = lookup(host);
    let wanted = |ip: Ip| addrs.iter().copied().find(|a| Ip::of(*a) == ip);
    let ip = match host.family {
        Some(family) => wanted(family),
        None => wanted(Ip::V4).or_else(|| wanted(Ip::V6)),
    }?;
    Some(SocketAddr::new(ip, host.port))
}

/// The matrix with every host's family decided, its names resolved on this
/// machine (literals need no resolver); a group of hosts joined by flows
/// with no family in common is refused, with the reason.
pub fn with_families(matrix: &Matrix) -> Result<Matrix> {
    let families = family::decide(matrix, &offers(matrix.hosts())).map_err(Error::refused)?;
    Ok(matrix.clone().with_families(&families))
}

/// [`with_families`], and the indices of the hosts whose names resolved to
/// no address on this machine (`mx start` refuses them; `check` names
/// them), from one lookup per name.
pub fn with_families_and_unresolved(matrix: &Matrix) -> Result<(Matrix, Vec<usize>)> {
    let offers = offers(matrix.hosts());
    let unresolved = (0..offers.len())
        .filter(|&i| offers[i] == Offer::default())
        .collect();
    let families = family::decide(matrix, &offers).map_err(Error::refused)?;
    Ok((matrix.clone().with_families(&families), unresolved))
}

/// [`with_families`] for reading what ran (summarize, export): a matrix that
/// cannot be decided is taken as it is.
pub fn families_or_as_is(matrix: Matrix) -> Matrix {
    with_families(&matrix).unwrap_or(matrix)
}

/// The matrix with every host name resolved to its address on the
/// controller, when any host is named rather than numbered: the agents never
/// need DNS (ssh still goes to the name). `None` when all are addresses.
/// Two names (or a name and an address) landing on one ip:port are refused:
/// one agent would answer for both; so are flows across families.
pub fn resolved(matrix: &Matrix) -> Result<Option<Matrix>> {
    if matrix
        .hosts()
        .iter()
        .all(|h| literal_family(&h.addr).is_some())
    {
        return Ok(None);
    }
    let decided = with_families(matrix)?;
    let mut addrs = Vec::new();
    for host in decided.hosts() {
        match resolve(host) {
            Some(addr) => addrs.push(addr.ip().to_string()),
            None => {
                return Err(Error::refused(format!(
                    "host '{}': '{}' does not resolve to an IP address on this machine -- fix the name or write the address in the matrix",
                    host.name, host.addr
                )));
            }
        }
    }
    let resolved = decided.retargeted(&addrs);
    if let Some((a, b)) = super::shared_endpoint(resolved.hosts()) {
        let (first, second) = (&matrix.hosts()[a], &matrix.hosts()[b]);
        return Err(Error::refused(format!(
            "hosts '{}' ({}) and '{}' ({}) both resolve to {} -- one agent would answer for both; give each host its own address or port",
            first.name,
            first.addr,
            second.name,
            second.addr,
            resolved.hosts()[a].endpoint()
        )));
    }
    Ok(Some(resolved))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(text: &str) -> Matrix {
        Matrix::parse(text.as_bytes(), "m.csv").unwrap()
    }

    #[test]
    fn literals_of_both_families_resolve_to_themselves() {
        let m = matrix("src\\dst,a=[::1]:5301,b=[::1]:5302\na,,1\nb,1,\n");
        assert_eq!(resolved(&m).unwrap(), None, "nothing to resolve");
        let hosts = m.hosts();
        assert_eq!(hosts[0].family, Some(Ip::V6));
        assert_eq!(resolve(&hosts[0]), Some("[::1]:5301".parse().unwrap()));
        assert_eq!(hosts[1].endpoint(), "[::1]:5302");
    }

    #[test]
    fn a_name_resolving_to_ipv6_is_deployed_as_a_bracketed_address() {
        // `localhost` resolves to 127.0.0.1 here; a group with an IPv6-only
        // peer still makes it IPv6 when it has ::1, else refuses it.
        let m = matrix("src\\dst,a=localhost:5301,b=[::1]:5302\na,,1\nb,1,\n");
        match resolved(&m) {
            Ok(Some(r)) => {
                assert_eq!(r.hosts()[0].token, "a=[::1]:5301");
                assert_eq!(r.hosts()[0].family, Some(Ip::V6));
                let again = Matrix::parse(&r.to_bytes()[..], "r.csv").unwrap();
                assert_eq!(again.hosts()[0].addr, "::1");
            }
            Err(e) => assert!(
                e.message().starts_with("flow a -> b crosses address families: a (IPv4 only, localhost has no IPv6 address)"),
                "{}",
                e.message()
            ),
            Ok(None) => panic!("a name to resolve"),
        }
    }
}
