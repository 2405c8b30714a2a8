//! The loss findings: each pattern of the grid ([`super::pattern`]) with
//! the place its hosts' counts give it ([`super::place`]), and the loss the
//! whole fabric shares. A random drop is never answered with "lower the
//! rate" (it does nothing for one) nor a size below the run's: the advice
//! says where to look.

use std::collections::BTreeMap;

use super::super::aggregate::ReportSet;
use super::cells::{Cell, Cells, Leg, stands_out};
use super::pattern::{self, Pattern, on_leg};
use super::place::{self, HostEvidence, Located};
use super::says::{BusyDisk, FabricLeg, LegLoss, LegName, PairWay, RoundTrip, Says, Why};
use super::{Blame, Direction, Finding, Kind, Place};

/// Every loss finding, the largest loss first, the fabric's last.
pub fn findings(
    set: &ReportSet,
    grid: &Cells,
    evidence: &BTreeMap<u32, HostEvidence>,
) -> Vec<Finding> {
    let empty = HostEvidence::default();
    let of = |id: u32| evidence.get(&id).unwrap_or(&empty);
    let out: Vec<Finding> = pattern::read(grid)
        .iter()
        .map(|p| match p {
            Pattern::Host {
                host,
                direction,
                requests,
                replies,
                ..
            } => host_finding(
                set,
                grid,
                p,
                *host,
                *direction,
                (*requests, *replies),
                of(*host),
            ),
            Pattern::Pair { a, b, .. } => pair_finding(set, grid, p, (*a, *b), of),
        })
        .collect();
    let mut out = super::starved::joined(out);
    let unresolved = unresolved_senders(set, grid, evidence);
    if unresolved.is_empty() {
        out.extend(fabric_finding(set, grid, evidence));
    }
    out.extend(unresolved);
    out.extend(round_trip_findings(set, grid));
    out
}

/// Percent lost on each of `cells`.
fn rates<'a>(cells: impl Iterator<Item = &'a Cell>) -> Vec<f64> {
    cells.map(|c| c.rate() * 100.0).collect()
}

/// One end of a flow's cell: its sender or its receiver.
type EndOf = fn(&Cell) -> u32;

/// A leg as a finding names it.
fn leg_name(leg: Leg) -> LegName {
    match leg {
        Leg::Requests => LegName::Requests,
        Leg::Replies => LegName::Replies,
    }
}

fn host_finding(
    set: &ReportSet,
    grid: &Cells,
    p: &Pattern,
    host: u32,
    direction: Direction,
    (requests, replies): (bool, bool),
    evidence: &HostEvidence,
) -> Finding {
    let name = set.name(host);
    let req: Vec<&Cell> = on_leg(grid, p, Leg::Requests).collect();
    let rep: Vec<&Cell> = on_leg(grid, p, Leg::Replies).collect();
    let lost = p.lost(grid);
    let lost_replies: f64 = rep.iter().map(|c| c.lost).sum();
    // The flows' other ends, each once, by name.
    let others = |cells: &[&Cell], other: EndOf| -> Vec<String> {
        let mut names: Vec<String> = cells
            .iter()
            .map(|c| set.name(other(c)).to_string())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    let into = direction == Direction::Into;
    // Into h: requests of x -> h, replies of h -> x. Out of h: requests of
    // h -> x, replies of x -> h.
    let (src, dst): (EndOf, EndOf) = (|c| c.src, |c| c.dst);
    let (req_peer, rep_peer) = if into { (src, dst) } else { (dst, src) };
    let located = if into {
        place::into(evidence, name, lost)
    } else {
        place::out_of(evidence, name, lost, lost_replies)
    };
    let says = Says::HostLoss {
        host: name.to_string(),
        direction,
        requests: LegLoss {
            peers: others(&req, req_peer),
            loss_pct: rates(req.iter().copied()),
        },
        replies: LegLoss {
            peers: others(&rep, rep_peer),
            loss_pct: rates(rep.iter().copied()),
        },
        lossy_requests: requests,
        lossy_replies: replies,
        lost,
        place_tells_legs: located.explains_legs,
        why: located.why.clone(),
    };
    let mut f = Finding::new(Kind::Loss, says)
        .figure("lost_pkts", lost)
        .figure("flows", (req.len().max(rep.len())) as f64);
    if !req.is_empty() {
        f = f.figure("forward_loss_pct", leg_pct(&req));
    }
    if !rep.is_empty() {
        f = f.figure("return_loss_pct", leg_pct(&rep));
    }
    with_place(f, &located, |place| Blame::toward(name, direction, place))
}

/// Percent lost over `cells` together.
fn leg_pct(cells: &[&Cell]) -> f64 {
    let (lost, at_risk) = cells
        .iter()
        .fold((0.0, 0.0), |(l, a), c| (l + c.lost, a + c.at_risk));
    if at_risk > 0.0 {
        lost / at_risk * 100.0
    } else {
        0.0
    }
}

/// The finding with `located`'s figures, and one blame per place.
fn with_place(mut f: Finding, located: &Located, blame: impl Fn(Place) -> Blame) -> Finding {
    for &(name, value) in &located.figures {
        f = f.figure(name, value);
    }
    for &place in &located.places {
        f = f.blame(blame(place));
    }
    f
}

/// Packets between two hosts, and nowhere else: each way they were lost,
/// placed by the sending host's transmit counts and the receiving host's
/// receive counts where those cover the loss, else on the path between.
fn pair_finding<'a>(
    set: &ReportSet,
    grid: &Cells,
    p: &Pattern,
    (a, b): (u32, u32),
    of: impl Fn(u32) -> &'a HostEvidence,
) -> Finding {
    let mut ways = Vec::new();
    let mut blames = Vec::new();
    let mut figures = Vec::new();
    for (from, to) in [(a, b), (b, a)] {
        let cells: Vec<&Cell> = p
            .cells()
            .iter()
            .map(|&i| &grid.cells[i])
            .filter(|c| c.from() == from && c.to() == to)
            .collect();
        if cells.is_empty() {
            continue;
        }
        let (from_name, to_name) = (set.name(from), set.name(to));
        let lost: f64 = cells.iter().map(|c| c.lost).sum();
        // Host-wide counts that cover this pair's loss: the sender's way out
        // or the receiver's way in.
        let sent = place::out_of(of(from), from_name, lost, 0.0);
        let got = place::into(of(to), to_name, lost);
        let (located, host_side) =
            if sent.places == [Place::TransmitPath] || sent.places == [Place::NeighbourTable] {
                (sent, Some(from))
            } else if got.places.iter().all(|p| *p != Place::Wire) {
                (got, Some(to))
            } else {
                let streams = super::paths::streams_said(set, &cells);
                let why = Why::PathBetween {
                    from: from_name.to_string(),
                    to: to_name.to_string(),
                    streams,
                };
                (
                    Located {
                        places: vec![Place::Wire],
                        why,
                        figures: Vec::new(),
                        explains_legs: false,
                    },
                    None,
                )
            };
        for &place in &located.places {
            blames.push(match host_side {
                Some(h) if place != Place::Wire => Blame {
                    host: Some(set.name(h).to_string()),
                    direction: Some(if h == from {
                        Direction::OutOf
                    } else {
                        Direction::Into
                    }),
                    peer: Some(set.name(if h == from { to } else { from }).to_string()),
                    place,
                },
                _ => Blame {
                    host: Some(from_name.to_string()),
                    direction: Some(Direction::Between),
                    peer: Some(to_name.to_string()),
                    place,
                },
            });
        }
        figures.extend(located.figures);
        ways.push(PairWay {
            from: from_name.to_string(),
            to: to_name.to_string(),
            legs: cells
                .iter()
                .map(|c| (leg_name(c.leg), c.rate() * 100.0))
                .collect(),
            lost,
            why: located.why,
        });
    }
    let says = Says::PairLoss {
        a: set.name(a).to_string(),
        b: set.name(b).to_string(),
        ways,
    };
    let mut f = Finding::new(Kind::Loss, says).figure("lost_pkts", p.lost(grid));
    for (name, value) in figures {
        f = f.figure(name, value);
    }
    for blame in blames {
        f = f.blame(blame);
    }
    f
}

/// Loss that every flow shares, which the senders' own kernels dropped
/// while the neighbour tables were full or could not resolve: each such
/// host could not resolve its peers (on a kernel shared by many hosts, or
/// a flat L2 domain past `gc_thresh3`, most of them at once), its loss out
/// of it named there rather than the fabric's. Empty where the kernels'
/// drops do not cover half of the shared loss, or no table counted.
fn unresolved_senders(
    set: &ReportSet,
    grid: &Cells,
    evidence: &BTreeMap<u32, HostEvidence>,
) -> Vec<Finding> {
    let legs = grid.fabric_wide();
    let shared: f64 = grid
        .cells
        .iter()
        .filter(|c| legs.contains(&c.leg))
        .map(|c| c.lost)
        .sum();
    let senders: Vec<&HostEvidence> = evidence
        .values()
        .filter(|e| {
            e.sndbuf_errors > 0.0 && (e.neigh_table_fulls > 0.0 || e.neigh_res_failed > 0.0)
        })
        .collect();
    let dropped: f64 = senders.iter().map(|e| e.sndbuf_errors).sum();
    if legs.is_empty() || shared <= 0.0 || dropped < 0.5 * shared {
        return Vec::new();
    }
    let mut out: Vec<Finding> = senders
        .iter()
        .filter_map(|e| {
            // Every cell that lost packets which left this host.
            let cells: Vec<usize> = (0..grid.cells.len())
                .filter(|&i| grid.cells[i].from() == e.id && grid.cells[i].lost > 0.0)
                .collect();
            let has = |leg| cells.iter().any(|&i| grid.cells[i].leg == leg);
            let legs = (has(Leg::Requests), has(Leg::Replies));
            let p = Pattern::Host {
                host: e.id,
                direction: Direction::OutOf,
                requests: legs.0,
                replies: legs.1,
                cells,
            };
            let f = host_finding(set, grid, &p, e.id, Direction::OutOf, legs, e);
            (p.lost(grid) > 0.0).then_some(f)
        })
        .collect();
    let lost = |f: &Finding| f.figures.get("lost_pkts").copied().unwrap_or(0.0);
    out.sort_by(|a, b| lost(b).total_cmp(&lost(a)));
    out
}

/// Loss that every flow shares: no host or pair stands out. In a disk run
/// the responders' disks fit as well: a reply held past its interval's
/// report counts as lost there.
fn fabric_finding(
    set: &ReportSet,
    grid: &Cells,
    evidence: &BTreeMap<u32, HostEvidence>,
) -> Option<Finding> {
    let legs = grid.fabric_wide();
    if legs.is_empty() {
        return None;
    }
    let mut fabric_legs = Vec::new();
    let mut figures = Vec::new();
    for leg in legs {
        let typical = grid.typical[leg.index()] * 100.0;
        let all: Vec<f64> = grid
            .cells
            .iter()
            .filter(|c| c.leg == leg)
            .map(|c| c.rate() * 100.0)
            .collect();
        let key = match leg {
            Leg::Requests => "forward_loss_pct",
            Leg::Replies => "return_loss_pct",
        };
        fabric_legs.push(FabricLeg {
            leg: leg_name(leg),
            typical_pct: typical,
            flows_pct: all,
        });
        figures.push((key, typical));
    }
    let disk = evidence
        .values()
        .filter_map(|e| e.disk_waits().map(|busy| (e.id, busy)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(host, busy)| BusyDisk {
            host: set.name(host).to_string(),
            busy_pct: busy,
        });
    let disk_host = disk.as_ref().map(|d| d.host.clone());
    let says = Says::FabricLoss {
        legs: fabric_legs,
        disk,
    };
    let mut f = Finding::new(Kind::Loss, says).blame(Blame {
        host: None,
        direction: None,
        peer: None,
        place: Place::FabricWide,
    });
    for (key, value) in figures {
        f = f.figure(key, value);
    }
    if let Some(host) = disk_host {
        f = f.blame(Blame::host(&host, Place::Disk));
    }
    Some(f)
}

/// Flows whose receiver wrote no rx rows lose their round trip somewhere:
/// which leg is not known.
fn round_trip_findings(set: &ReportSet, grid: &Cells) -> Vec<Finding> {
    let lossy: Vec<&(u32, u32, f64, f64)> = grid
        .round_trips
        .iter()
        .filter(|&&(_, _, sent, lost)| stands_out(lost, sent, 0.0))
        .collect();
    if lossy.is_empty() {
        return Vec::new();
    }
    let flows: Vec<RoundTrip> = lossy
        .iter()
        .map(|&&(s, d, sent, lost)| RoundTrip {
            src: set.name(s).to_string(),
            dst: set.name(d).to_string(),
            loss_pct: lost / sent * 100.0,
        })
        .collect();
    vec![Finding::new(Kind::Loss, Says::RoundTrips { flows }).figure("flows", lossy.len() as f64)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnosis::cells::Cell;
    use crate::render::findings::text;

    fn set(n: u32) -> ReportSet {
        let mut set = ReportSet::default();
        for i in 1..=n {
            set.id(&format!("h{i}"));
        }
        set
    }

    fn mesh(n: u32, drop: impl Fn(u32, u32, Leg) -> f64) -> Cells {
        let mut cells = Vec::new();
        for s in 0..n {
            for d in (0..n).filter(|&d| d != s) {
                let sent = 100_000.0;
                let arrived = sent * (1.0 - drop(s, d, Leg::Requests));
                let back_lost = arrived * drop(d, s, Leg::Replies);
                cells.push(Cell {
                    src: s,
                    dst: d,
                    leg: Leg::Requests,
                    at_risk: sent,
                    lost: sent - arrived,
                    lossy: false,
                });
                cells.push(Cell {
                    src: s,
                    dst: d,
                    leg: Leg::Replies,
                    at_risk: arrived,
                    lost: back_lost,
                    lossy: false,
                });
            }
        }
        Cells::judged(cells, Vec::new())
    }

    /// Packets lost on the cells `which` picks.
    fn lost_where(grid: &Cells, which: impl Fn(&Cell) -> bool) -> f64 {
        grid.cells.iter().filter(|c| which(c)).map(|c| c.lost).sum()
    }

    fn blames(f: &[Finding]) -> Vec<Blame> {
        f.iter().flat_map(|f| f.blames.clone()).collect()
    }

    fn blame(
        host: Option<&str>,
        direction: Option<Direction>,
        peer: Option<&str>,
        place: Place,
    ) -> Blame {
        Blame {
            host: host.map(str::to_string),
            direction,
            peer: peer.map(str::to_string),
            place,
        }
    }

    #[test]
    fn a_firewall_drop_into_a_host_is_its_receive_path_and_a_wire_drop_the_wire() {
        let set = set(4);
        let grid = mesh(4, |_, to, _| if to == 1 { 0.05 } else { 0.0 });
        let lost = lost_where(&grid, |c| c.to() == 1);
        // h2's interface counted them all arriving: dropped inside it.
        let mut evidence = BTreeMap::new();
        evidence.insert(
            1,
            HostEvidence {
                id: 1,
                nic: Some("eth0".into()),
                rx_gap: Some(lost + 40.0),
                tx_gap: Some(0.0),
                ..HostEvidence::default()
            },
        );
        let fw = findings(&set, &grid, &evidence);
        assert_eq!(
            blames(&fw),
            vec![blame(
                Some("h2"),
                Some(Direction::Into),
                None,
                Place::ReceivePath
            )]
        );
        assert!(
            text(&fw[0]).starts_with("packets into h2 are lost"),
            "{}",
            text(&fw[0])
        );
        assert!(text(&fw[0]).contains("after its NIC"), "{}", text(&fw[0]));
        // Its interface counted what its agent read: the wire.
        evidence.get_mut(&1).unwrap().rx_gap = Some(30.0);
        let wire = findings(&set, &grid, &evidence);
        assert_eq!(
            blames(&wire),
            vec![blame(Some("h2"), Some(Direction::Into), None, Place::Wire)]
        );
        for f in fw.iter().chain(&wire) {
            assert!(
                !text(f).contains("--pps") && !text(f).contains("lower"),
                "{}",
                text(f)
            );
        }
        // Counts that cannot be compared (GSO): both places, said so.
        let e = evidence.get_mut(&1).unwrap();
        (e.rx_gap, e.nic_counted) = (None, true);
        let both = findings(&set, &grid, &evidence);
        assert_eq!(both[0].blames.len(), 2);
        assert!(text(&both[0]).contains("--no-gso"), "{}", text(&both[0]));
    }

    #[test]
    fn a_rate_cap_out_of_a_host_is_its_transmit_path() {
        let set = set(4);
        let grid = mesh(4, |from, _, _| if from == 1 { 0.2 } else { 0.0 });
        let lost = lost_where(&grid, |c| c.from() == 1);
        let mut evidence = BTreeMap::new();
        evidence.insert(
            1,
            HostEvidence {
                id: 1,
                sndbuf_errors: lost,
                tx_gap: Some(lost),
                egress_bps: Some(20e6),
                nic: Some("eth1".into()),
                ..HostEvidence::default()
            },
        );
        let f = findings(&set, &grid, &evidence);
        assert_eq!(
            blames(&f),
            vec![blame(
                Some("h2"),
                Some(Direction::OutOf),
                None,
                Place::TransmitPath
            )]
        );
        assert!(
            text(&f[0]).contains("eth1") && text(&f[0]).contains("20.0 Mbps"),
            "{}",
            text(&f[0])
        );
    }

    #[test]
    fn a_starved_agent_whose_interface_lags_its_count_is_its_cpu_not_its_egress() {
        // The replies out of h2 go missing, its interface sent fewer than
        // its agent counted, its kernel dropped none, and its agent sat
        // under a CPU quota: it handed them over late.
        let set = set(4);
        let grid = mesh(4, |from, _, leg| {
            if from == 1 && leg == Leg::Replies {
                0.4
            } else {
                0.0
            }
        });
        let lost = lost_where(&grid, |c| c.dst == 1 && c.leg == Leg::Replies);
        let mut evidence = BTreeMap::new();
        let starved = HostEvidence {
            id: 1,
            tx_gap: Some(lost),
            throttled_ms: 7941.0,
            behind_ms: 2481.0,
            nic: Some("eth0".into()),
            ..HostEvidence::default()
        };
        evidence.insert(1, starved.clone());
        let f = findings(&set, &grid, &evidence);
        assert!(
            blames(&f).iter().all(|b| b.place == Place::Cpu),
            "{:?}",
            blames(&f)
        );
        // The same gap with the kernel's own drops is its egress.
        evidence.insert(
            1,
            HostEvidence {
                sndbuf_errors: lost,
                ..starved
            },
        );
        let f = findings(&set, &grid, &evidence);
        assert!(
            blames(&f).iter().any(|b| b.place == Place::TransmitPath),
            "{:?}",
            blames(&f)
        );
    }

    #[test]
    fn one_sick_path_is_named_with_its_direction() {
        let set = set(5);
        let grid = mesh(
            5,
            |from, to, _| if (from, to) == (2, 4) { 0.02 } else { 0.0 },
        );
        let f = findings(&set, &grid, &BTreeMap::new());
        assert_eq!(
            blames(&f),
            vec![blame(
                Some("h3"),
                Some(Direction::Between),
                Some("h5"),
                Place::Wire
            )]
        );
        assert!(
            text(&f[0]).starts_with("between h3 and h5 alone: packets from h3 to h5"),
            "{}",
            text(&f[0])
        );
    }

    #[test]
    fn loss_everywhere_that_the_senders_kernels_dropped_for_a_full_neighbour_table_is_theirs() {
        // Every host lost 1% of what it sent, and its kernel dropped it
        // (UDP SndbufErrors) while the machine's neighbour table was full.
        let set = set(4);
        let grid = mesh(4, |_, _, leg| if leg == Leg::Requests { 0.01 } else { 0.0 });
        let out_of = |h: u32| lost_where(&grid, |c| c.from() == h);
        let evidence: BTreeMap<u32, HostEvidence> = (0..4)
            .map(|h| {
                let e = HostEvidence {
                    id: h,
                    sndbuf_errors: out_of(h),
                    tx_gap: Some(out_of(h)),
                    nic_counted: true,
                    neigh_table_fulls: 9_000.0,
                    ..HostEvidence::default()
                };
                (h, e)
            })
            .collect();
        let f = findings(&set, &grid, &evidence);
        let mut want: Vec<Blame> = (1..=4)
            .map(|i| {
                let host = format!("h{i}");
                blame(
                    Some(&host),
                    Some(Direction::OutOf),
                    None,
                    Place::NeighbourTable,
                )
            })
            .collect();
        let mut got = blames(&f);
        got.sort();
        want.sort();
        assert_eq!(got, want);
        // The same drops with tables that counted nothing: the fabric's
        // finding stands (the hosts' egress is not read into it here).
        let quiet: BTreeMap<u32, HostEvidence> = evidence
            .into_iter()
            .map(|(h, e)| {
                let e = HostEvidence {
                    neigh_table_fulls: 0.0,
                    ..e
                };
                (h, e)
            })
            .collect();
        let f = findings(&set, &grid, &quiet);
        assert_eq!(blames(&f), vec![blame(None, None, None, Place::FabricWide)]);
    }

    #[test]
    fn loss_everywhere_is_the_fabrics() {
        let set = set(4);
        let grid = mesh(4, |_, _, leg| if leg == Leg::Requests { 0.01 } else { 0.0 });
        let f = findings(&set, &grid, &BTreeMap::new());
        assert_eq!(blames(&f), vec![blame(None, None, None, Place::FabricWide)]);
        assert_eq!(f[0].figures["forward_loss_pct"], 1.0);
    }
}
