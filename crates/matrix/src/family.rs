//! Address families in a matrix: which IP version each host's flows use, and
//! the matrices that cannot run because a flow would cross from one to the
//! other.
//!
//! A host has one address in the matrix, so it speaks one family to all its
//! peers: its literal's, or, for a name, one of the families it resolves to.
//! Hosts joined by flows (a connected group of the flow graph, in either
//! direction; every host of a layered matrix, whose layers join them all)
//! must therefore share a family. A group decides on IPv6 when a host of it
//! has IPv6 only, else on IPv4 (as mx always did); a group with a host that
//! is IPv4 only and one that is IPv6 only cannot run. Separate
//! groups may differ: one matrix can hold an IPv4 fleet and an IPv6 one that
//! never talk.

use std::net::IpAddr;

use super::{Host, Ip, Matrix, literal_family};

/// The families a host can be reached by; neither for a name that did not
/// resolve (it goes with its group, and fails where it is resolved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offer {
    pub v4: bool,
    pub v6: bool,
}

impl Offer {
    /// What the addresses a host resolved to offer.
    pub fn of(addrs: &[IpAddr]) -> Offer {
        Offer {
            v4: addrs.iter().any(IpAddr::is_ipv4),
            v6: addrs.iter().any(IpAddr::is_ipv6),
        }
    }

    /// The one family it has, if it has exactly one.
    fn only(self) -> Option<Ip> {
        match (self.v4, self.v6) {
            (true, false) => Some(Ip::V4),
            (false, true) => Some(Ip::V6),
            _ => None,
        }
    }
}

/// What each host of `matrix` offers as far as its text says: a literal its
/// family, a name nothing yet.
pub fn literal_offers(matrix: &Matrix) -> Vec<Offer> {
    matrix
        .hosts()
        .iter()
        .map(|h| {
            let family = literal_family(&h.addr);
            Offer {
                v4: family == Some(Ip::V4),
                v6: family == Some(Ip::V6),
            }
        })
        .collect()
}

/// The family of every host (`None` where its group has none decided: names
/// that did not resolve), or the one-line reason the matrix cannot run.
pub fn decide(matrix: &Matrix, offers: &[Offer]) -> Result<Vec<Option<Ip>>, String> {
    let n = matrix.host_count();
    assert_eq!(offers.len(), n);
    let mut groups = Groups::new(n);
    if matrix.config.rotation.is_some() {
        for i in 1..n {
            groups.join(0, i);
        }
    } else {
        for (src, row) in matrix.rows() {
            for cell in row {
                groups.join(src as usize, cell.dst as usize);
            }
        }
    }
    let roots: Vec<usize> = (0..n).map(|i| groups.root(i)).collect();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &root) in roots.iter().enumerate() {
        members[root].push(i);
    }
    let mut family = vec![None; n];
    for group in members.iter().filter(|m| !m.is_empty()) {
        let decided = group_family(group.iter().map(|&i| (i, offers[i])))
            .map_err(|(a, b)| crossing(matrix, offers, a, b))?;
        for &i in group {
            family[i] = decided;
        }
    }
    Ok(family)
}

/// The one family of `hosts` that a shape joins all together (what `mx gen`
/// draws), or why they cannot share one.
pub fn one_family(hosts: &[Host], offers: &[Offer]) -> Result<Option<Ip>, String> {
    group_family(offers.iter().copied().enumerate()).map_err(|(a, b)| {
        format!(
            "hosts {} and {} cannot share a matrix: its flows join every host, and a host speaks one address family to all its peers -- list hosts of one family (or make one matrix per family)",
            describe(&hosts[a], offers[a]),
            describe(&hosts[b], offers[b])
        )
    })
}

/// A group's family: IPv4 when every host of it has an IPv4 address, else
/// IPv6; `None` when no host of it resolved; `Err` with a host that is IPv4
/// only and one that is IPv6 only.
fn group_family(
    members: impl Iterator<Item = (usize, Offer)>,
) -> Result<Option<Ip>, (usize, usize)> {
    let mut only: [Option<usize>; 2] = [None, None];
    let mut any = false;
    for (i, offer) in members {
        any |= offer.v4 || offer.v6;
        if let Some(ip) = offer.only() {
            only[ip as usize].get_or_insert(i);
        }
    }
    match only {
        [Some(a), Some(b)] => Err((a, b)),
        [_, Some(_)] => Ok(Some(Ip::V6)),
        _ if any => Ok(Some(Ip::V4)),
        _ => Ok(None),
    }
}

/// `a (IPv4, 10.0.0.1)`, or for a name bound to one family `web (IPv6 only,
/// web has no IPv4 address)`.
fn describe(host: &Host, offer: Offer) -> String {
    let ip = offer.only().unwrap_or_default();
    match literal_family(&host.addr) {
        Some(_) => format!("{} ({}, {})", host.name, ip.name(), host.addr),
        None => {
            let other = [Ip::V6, Ip::V4][ip as usize];
            format!(
                "{} ({} only, {} has no {} address)",
                host.name,
                ip.name(),
                host.addr,
                other.name()
            )
        }
    }
}

/// The reason hosts `a` (IPv4 only) and `b` (IPv6 only) of one group cannot
/// run: a flow between two hosts of different families when there is one,
/// else the two hosts.
fn crossing(matrix: &Matrix, offers: &[Offer], a: usize, b: usize) -> String {
    let hosts = matrix.hosts();
    let describe = |i: usize| describe(&hosts[i], offers[i]);
    let direct = matrix.rows().find_map(|(src, row)| {
        let src = src as usize;
        row.iter().map(|c| c.dst as usize).find_map(|dst| {
            match (offers[src].only(), offers[dst].only()) {
                (Some(x), Some(y)) if x != y => Some((src, dst)),
                _ => None,
            }
        })
    });
    match direct {
        Some((src, dst)) => format!(
            "flow {} -> {} crosses address families: {} cannot reach {} -- a host speaks one family to all its peers; give both hosts addresses of one family, or drop the flow",
            hosts[src].name,
            hosts[dst].name,
            describe(src),
            describe(dst)
        ),
        None => format!(
            "hosts {} and {} are joined by flows ({}), and a host speaks one address family to all its peers -- give them addresses of one family",
            describe(a),
            describe(b),
            if matrix.config.rotation.is_some() {
                "its layers join every host"
            } else {
                "through hosts that have both families"
            }
        ),
    }
}

/// Union-find over host indices.
struct Groups {
    parent: Vec<usize>,
}

impl Groups {
    fn new(n: usize) -> Groups {
        Groups {
            parent: (0..n).collect(),
        }
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.root(a), self.root(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(text: &str) -> Matrix {
        Matrix::parse(text.as_bytes(), "m.csv").unwrap()
    }

    fn names(offers: &[(bool, bool)]) -> Vec<Offer> {
        offers.iter().map(|&(v4, v6)| Offer { v4, v6 }).collect()
    }

    #[test]
    fn literals_give_their_family_and_groups_may_differ() {
        // a <-> b over IPv4, c <-> d over IPv6, never meeting: fine.
        let m = matrix(
            "src\\dst,a=10.0.0.1,b=10.0.0.2,c=[fd00::3]:5300,d=fd00::4\n\
             a,,1,,\nb,1,,,\nc,,,,1\nd,,,1,\n",
        );
        let got = decide(&m, &literal_offers(&m)).unwrap();
        assert_eq!(
            got,
            [Some(Ip::V4), Some(Ip::V4), Some(Ip::V6), Some(Ip::V6)]
        );
    }

    #[test]
    fn names_take_their_groups_family_and_ipv4_when_free() {
        let m = matrix("src\\dst,a,b,c\na,,1,\nb,1,,\nc,1,,\n");
        // Both names dual-stack: IPv4, as mx always resolved.
        let got = decide(&m, &names(&[(true, true), (true, true), (true, true)])).unwrap();
        assert_eq!(got, [Some(Ip::V4); 3]);
        // One of the group has IPv6 only: the group is IPv6.
        let got = decide(&m, &names(&[(true, true), (false, true), (true, true)])).unwrap();
        assert_eq!(got, [Some(Ip::V6); 3]);
        // A name that did not resolve follows its group, or stays undecided.
        let got = decide(&m, &names(&[(false, false), (false, true), (false, false)])).unwrap();
        assert_eq!(got, [Some(Ip::V6); 3]);
        let got = decide(&m, &names(&[(false, false), (true, true), (false, false)])).unwrap();
        assert_eq!(got, [Some(Ip::V4); 3]);
        let got = decide(&m, &names(&[(false, false); 3])).unwrap();
        assert_eq!(got, [None; 3]);
    }

    #[test]
    fn a_flow_across_families_is_refused_naming_it() {
        // Literals: the reader refuses, naming the file.
        let err = Matrix::parse(
            b"src\\dst,a=10.0.0.1,b=[2001:db8::10]:5300\na,,100\nb,,\n",
            "m.csv",
        )
        .unwrap_err();
        assert_eq!(
            err.message(),
            "m.csv: flow a -> b crosses address families: a (IPv4, 10.0.0.1) cannot reach b (IPv6, 2001:db8::10) -- a host speaks one family to all its peers; give both hosts addresses of one family, or drop the flow"
        );
        // Joined through another host (a name): the two bound hosts are named.
        let err = Matrix::parse(
            b"src\\dst,a=10.0.0.1,web,c=fd00::3\na,,1,\nweb,,,1\nc,,,\n",
            "m.csv",
        )
        .unwrap_err();
        assert_eq!(
            err.message(),
            "m.csv: hosts a (IPv4, 10.0.0.1) and c (IPv6, fd00::3) are joined by flows (through hosts that have both families), and a host speaks one address family to all its peers -- give them addresses of one family"
        );
        // A name bound to one family by what it resolves to is said to be.
        let m = matrix("src\\dst,a=10.0.0.1,v6only\na,,1\nv6only,,\n");
        let mut offers = literal_offers(&m);
        offers[1] = Offer {
            v4: false,
            v6: true,
        };
        let err = decide(&m, &offers).unwrap_err();
        assert_eq!(
            err,
            "flow a -> v6only crosses address families: a (IPv4, 10.0.0.1) cannot reach v6only (IPv6 only, v6only has no IPv4 address) -- a host speaks one family to all its peers; give both hosts addresses of one family, or drop the flow"
        );
        // A layered matrix's layers join every host, whatever its grid says.
        let err = Matrix::parse(
            b"# layers=2 peers=1 seed=1 dwell=10\nsrc\\dst,a=10.0.0.1,b=10.0.0.2,c=fd00::3\na,,1,\nb,1,,\nc,,,\n",
            "m.csv",
        )
        .unwrap_err();
        assert!(
            err.message().contains("(its layers join every host)"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn gen_hosts_share_one_family() {
        let hosts: Vec<Host> = ["a=10.0.0.1", "b=[fd00::2]:5300", "c"]
            .iter()
            .map(|t| Host::from_token(super::super::HostToken::parse(t).unwrap(), 5300))
            .collect();
        let offers = [
            Offer {
                v4: true,
                v6: false,
            },
            Offer {
                v4: false,
                v6: true,
            },
            Offer::default(),
        ];
        assert_eq!(one_family(&hosts[1..], &offers[1..]), Ok(Some(Ip::V6)));
        assert_eq!(one_family(&hosts[2..], &offers[2..]), Ok(None));
        assert_eq!(
            one_family(&hosts, &offers).unwrap_err(),
            "hosts a (IPv4, 10.0.0.1) and b (IPv6, fd00::2) cannot share a matrix: its flows join every host, and a host speaks one address family to all its peers -- list hosts of one family (or make one matrix per family)"
        );
    }
}
