//! WHAT TO DO NEXT as data: each finding names the hosts, the direction
//! (into a host, out of it, between one pair) and the place (the wire, a
//! host's receive or transmit path, its CPU, its disk, its agent having
//! stopped, a host out of reach), with the figures it rests on, and what
//! it says as data ([`says::Says`]). No words are written here: the text,
//! `--json` and the report page all render these [`Finding`]s
//! (`render::findings`).
//!
//! How it reads a run:
//! - [`cells`]: every flow's two legs (its requests, the replies to them)
//!   as packets at risk and packets lost, and which of them lose more than
//!   the run's noise;
//! - [`pattern`]: the grid of those cells read host by host: a column of
//!   forward loss plus a row of return loss is loss *into* a host, a row of
//!   forward plus a column of return is loss *out of* it, a lone cell is a
//!   pair, loss everywhere is the fabric's;
//! - [`place`]: what each host's kernel counted (its interface, its
//!   sockets, its qdisc) and whether its agent had the CPU, which puts the
//!   loss on the wire or in the host;
//! - [`paths`]: legs whose loss sits on some of their streams (source
//!   ports), sparing the rest: one path of an ECMP fabric, no host's;
//! - [`loss`], [`rate`], [`latency`], [`departures`], [`plan`], [`routes`]:
//!   the findings.

pub mod cells;
pub mod departures;
pub mod latency;
pub mod link;
pub mod loss;
pub mod paths;
pub mod pattern;
pub mod place;
pub mod plan;
pub mod pools;
pub mod rate;
pub mod routes;
pub mod says;
pub mod starved;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::aggregate::ReportSet;
use super::figures::{Context, Figures};
pub use says::Says;

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Packets lost: where, and which way.
    Loss,
    /// An agent that stopped, a host out of reach or that never reported.
    Agent,
    /// Less sent than asked, and why (the tool, a CPU).
    Rate,
    /// A disk that held the responders back (a disk run).
    Disk,
    /// A layered run that has not measured every pair yet.
    Coverage,
    /// The round trip's tail.
    Latency,
    /// Requests a receiver refused: their source sent past its plan there.
    Plan,
    /// A route that changed its length mid-run.
    Route,
    /// Nothing to fix.
    Clear,
}

/// Which way the packets were going where they were lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Direction {
    #[serde(rename = "into")]
    Into,
    #[serde(rename = "out of")]
    OutOf,
    #[serde(rename = "between")]
    Between,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Into => "into",
            Direction::OutOf => "out of",
            Direction::Between => "between",
        }
    }
}

/// Where, by the evidence, the trouble sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Place {
    /// Outside the hosts: a cable, a switch port, the switch.
    #[serde(rename = "wire")]
    Wire,
    /// In a host, between its NIC and its agent: the NIC's rx drops, a host
    /// firewall, its IP stack, its sockets' buffers.
    #[serde(rename = "receive path")]
    ReceivePath,
    /// In a host, between its agent and the wire: its qdisc (a rate cap, a
    /// full queue), its NIC's tx drops.
    #[serde(rename = "transmit path")]
    TransmitPath,
    /// In a host: its kernel's neighbour table (ARP, NDP), full or unable
    /// to resolve its peers, so that it could not send to them.
    #[serde(rename = "neighbour table")]
    NeighbourTable,
    /// A host's CPU: its agent could not run when it had to.
    #[serde(rename = "cpu")]
    Cpu,
    /// A host's disk, in a disk run.
    #[serde(rename = "disk")]
    Disk,
    /// A host's agent stopped before the run's end.
    #[serde(rename = "agent stopped")]
    AgentStopped,
    /// A host mx could not reach to collect its report.
    #[serde(rename = "unreachable")]
    Unreachable,
    /// Everywhere at once: no host or pair stands out.
    #[serde(rename = "fabric-wide")]
    FabricWide,
    /// On some of the fabric's paths between two hosts: the streams that
    /// take them lose, the others do not.
    #[serde(rename = "path")]
    Path,
    /// One directed link of the fabric (or one of a few these paths cannot
    /// tell apart): from `host` (a device) to `peer`, by the traced paths.
    #[serde(rename = "link")]
    Link,
    /// Between two pools (racks) of the matrix, `host` and `peer` naming
    /// the pools: their uplinks, or the fabric between them.
    #[serde(rename = "between pools")]
    Pools,
    /// Past the receiver's plan: the source runs another matrix, or its
    /// address is spoofed.
    #[serde(rename = "plan")]
    Plan,
    /// The route from `host` to `peer`: it changed its length mid-run.
    #[serde(rename = "route")]
    Route,
}

impl Place {
    /// Its words, as `--json` writes them.
    pub fn as_str(self) -> &'static str {
        match self {
            Place::Wire => "wire",
            Place::ReceivePath => "receive path",
            Place::TransmitPath => "transmit path",
            Place::NeighbourTable => "neighbour table",
            Place::Cpu => "cpu",
            Place::Disk => "disk",
            Place::AgentStopped => "agent stopped",
            Place::Unreachable => "unreachable",
            Place::FabricWide => "fabric-wide",
            Place::Path => "path",
            Place::Link => "link",
            Place::Pools => "between pools",
            Place::Plan => "plan",
            Place::Route => "route",
        }
    }
}

/// One cause a finding names: a host (or none, fabric-wide), the direction
/// of the packets, the peer of a pair, and the place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Blame {
    pub host: Option<String>,
    pub direction: Option<Direction>,
    pub peer: Option<String>,
    #[serde(rename = "where")]
    pub place: Place,
}

impl Blame {
    /// A host's own trouble, no direction (its CPU, its agent).
    pub fn host(name: &str, place: Place) -> Blame {
        Blame {
            host: Some(name.to_string()),
            direction: None,
            peer: None,
            place,
        }
    }

    /// Loss `direction` a host.
    pub fn toward(name: &str, direction: Direction, place: Place) -> Blame {
        Blame {
            direction: Some(direction),
            ..Blame::host(name, place)
        }
    }
}

/// One piece of advice: what it says (as data), whom it blames, and the
/// figures it rests on (by name, with the unit in the name: `_pct`,
/// `_pkts`, `_ms`).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub kind: Kind,
    pub says: Says,
    pub blames: Vec<Blame>,
    pub figures: BTreeMap<String, f64>,
}

impl Finding {
    pub fn new(kind: Kind, says: Says) -> Finding {
        Finding {
            kind,
            says,
            blames: Vec::new(),
            figures: BTreeMap::new(),
        }
    }

    pub fn blame(mut self, blame: Blame) -> Finding {
        if !self.blames.contains(&blame) {
            self.blames.push(blame);
        }
        self
    }

    pub fn figure(mut self, name: &str, value: f64) -> Finding {
        self.figures
            .insert(name.to_string(), mx_base::units::six_places(value));
        self
    }

    /// The hosts it names, for a picture to mark.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.blames
            .iter()
            .flat_map(|b| b.host.iter().chain(b.peer.iter()))
            .map(String::as_str)
    }
}

/// Every finding of a run, most urgent first: hosts gone (their peers'
/// numbers depend on it), disks that cannot keep up, coverage, the losses
/// (largest first), rates held down, the tail; the all-clear when there is
/// nothing else.
pub(crate) fn diagnose(
    set: &ReportSet,
    ctx: &Context,
    figs: &Figures,
    coverage: Option<(usize, usize, f64)>,
) -> Vec<Finding> {
    let evidence = place::HostEvidence::of_all(set, ctx);
    let mut out = Vec::new();
    out.extend(departures::findings(set, ctx));
    out.extend(rate::disk_bound(set, &figs.hosts));
    out.extend(coverage.and_then(rate::coverage));
    out.extend(plan::findings(set, &figs.flows));
    let grid = cells::Cells::of(set, &figs.flows);
    // Legs whose loss sits on some of their streams are a path's: the host
    // patterns read the grid without them.
    let on_paths = paths::confined(&grid, &figs.flows);
    // Legs that all cross between two pools are the racks' (read once, on
    // the whole grid): the host patterns read the grid without them too.
    let between_pools = pools::confined(set, ctx, &grid);
    let mut host_grid = paths::without(&grid, &on_paths);
    if let Some(p) = &between_pools {
        host_grid = pools::without(&host_grid, p);
    }
    out.extend(loss::findings(set, &host_grid, &evidence));
    out.extend(between_pools.as_ref().map(pools::finding));
    out.extend(paths::findings(set, &on_paths));
    if !on_paths.is_empty() {
        out.extend(link::findings(set, &figs.flows));
    }
    out.extend(rate::findings(set, &figs.hosts, &evidence));
    out.extend(latency::findings(set, ctx, figs, &evidence));
    // A route that changed is worth saying, not a fault by itself: the
    // all-clear still stands beside it.
    let routes = routes::findings(set);
    if !out.iter().any(|f| f.kind != Kind::Coverage) {
        out.push(rate::all_clear(&figs.fleet, &grid));
    }
    out.extend(routes);
    out
}

/// Packets lost that the hosts' own counts put inside a host (its sockets,
/// its CPU, its disk, its receive or transmit path): the loss that is not
/// the network's. A finding that names the wire beside the host is not
/// counted.
pub fn lost_in_hosts(findings: &[Finding]) -> f64 {
    findings
        .iter()
        .filter(|f| f.kind == Kind::Loss && !f.blames.is_empty())
        .filter(|f| {
            f.blames.iter().all(|b| {
                !matches!(
                    b.place,
                    Place::Wire | Place::FabricWide | Place::Path | Place::Link
                )
            })
        })
        .filter_map(|f| f.figures.get("lost_pkts"))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blames_serialize_with_the_issue_words() {
        let b = Blame::toward("h2", Direction::OutOf, Place::TransmitPath);
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            r#"{"host":"h2","direction":"out of","peer":null,"where":"transmit path"}"#
        );
        let f = Finding::new(Kind::Clear, Says::NeverHeard { hosts: Vec::new() })
            .blame(b.clone())
            .blame(b);
        assert_eq!(f.blames.len(), 1, "one blame once");
        for place in [Place::Wire, Place::AgentStopped, Place::FabricWide] {
            let json = serde_json::to_string(&place).unwrap();
            assert_eq!(json, format!("\"{}\"", place.as_str()));
        }
    }
}
