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
use super::{Blame, Direction, Finding, Kind, Place, count, name_list, pct, pct_range};

/// Every loss finding, the largest loss first, the fabric's last.
pub fn findings(
    set: &ReportSet,
    grid: &Cells,
    evidence: &BTreeMap<u32, HostEvidence>,
) -> Vec<Finding> {
    let empty = HostEvidence::default();
    let of = |id: u32| evidence.get(&id).unwrap_or(&empty);
    let mut out: Vec<Finding> = pattern::read(grid)
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
    out.extend(fabric_finding(set, grid, evidence));
    out.extend(round_trip_findings(set, grid));
    out
}

/// Percent lost on each of `cells`.
fn rates<'a>(cells: impl Iterator<Item = &'a Cell>) -> Vec<f64> {
    cells.map(|c| c.rate() * 100.0).collect()
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
    // The flows' other ends, as they read in the sentence.
    let others = |cells: &[&Cell], other: fn(&Cell) -> u32| -> String {
        let mut names: Vec<&str> = cells.iter().map(|c| set.name(other(c))).collect();
        names.sort_unstable();
        names.dedup();
        name_list(&names)
    };
    let into = direction == Direction::Into;
    // Into h: requests of x -> h, replies of h -> x. Out of h: requests of
    // h -> x, replies of x -> h.
    let req_flows = if into {
        format!("{} -> {name}", others(&req, |c| c.src))
    } else {
        format!("{name} -> {}", others(&req, |c| c.dst))
    };
    let rep_flows = if into {
        format!("{name} -> {}", others(&rep, |c| c.dst))
    } else {
        format!("{} -> {name}", others(&rep, |c| c.src))
    };
    let way = if into { "into" } else { "out of" };
    let req_part = format!(
        "{} of the requests of every flow {} it ({req_flows})",
        pct_range(rates(req.iter().copied())),
        if into { "into" } else { "from" }
    );
    let rep_part = format!(
        "{} of the replies {} ({rep_flows}, on the way back)",
        pct_range(rates(rep.iter().copied())),
        if into {
            "to every flow it sends"
        } else {
            "it sends back to every flow into it"
        }
    );
    let located = if into {
        place::into(evidence, name, lost)
    } else {
        place::out_of(evidence, name, lost, lost_replies)
    };
    // One leg alone, where the place does not explain it: something tells
    // requests from replies (their port, their size).
    let picked = |what: &str| {
        if located.explains_legs {
            String::new()
        } else {
            format!(" -- something that tells them apart drops them: {what}")
        }
    };
    let what = match (requests, replies) {
        (true, true) => format!(
            "packets {way} {name} are lost: {req_part} and {rep_part}, {} packets in all",
            count(lost)
        ),
        (true, false) => format!(
            "requests {way} {name} are lost, and only requests: {req_part}, while {}{}",
            if into {
                "the replies it gets back arrive whole"
            } else {
                "the replies it sends arrive whole"
            },
            picked("their port (a firewall or ACL rule on the agents' port), or their size")
        ),
        _ => format!(
            "replies {way} {name} are lost, and only replies: {rep_part}, while {}{}",
            if into {
                "the requests it gets arrive whole"
            } else {
                "the requests it sends arrive whole"
            },
            picked("their source port (a firewall or ACL rule), or their size")
        ),
    };
    let mut f = Finding::new(Kind::Loss, format!("{what}; {}", located.why))
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
    let mut parts = Vec::new();
    let mut blames = Vec::new();
    let mut f = Finding::new(Kind::Loss, String::new()).figure("lost_pkts", p.lost(grid));
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
        let legs: Vec<String> = cells
            .iter()
            .map(|c| match c.leg {
                Leg::Requests => format!(
                    "{} of the requests of {from_name} -> {to_name}",
                    pct(c.rate() * 100.0) + "%"
                ),
                Leg::Replies => format!(
                    "{} of the replies of {to_name} -> {from_name}",
                    pct(c.rate() * 100.0) + "%"
                ),
            })
            .collect();
        // Host-wide counts that cover this pair's loss: the sender's way out
        // or the receiver's way in.
        let sent = place::out_of(of(from), from_name, lost, 0.0);
        let got = place::into(of(to), to_name, lost);
        let (located, host_side) = if sent.places == [Place::TransmitPath] {
            (sent, Some(from))
        } else if got.places.iter().all(|p| *p != Place::Wire) {
            (got, Some(to))
        } else {
            (
                Located {
                    places: vec![Place::Wire],
                    why: format!(
                        "{from_name}'s and {to_name}'s other flows are clean, so it is this path: a link or a switch between them, a route, an ACL -- compare the path's hops (traceroute, the switches' counters)"
                    ),
                    figures: Vec::new(),
                    explains_legs: false,
                },
                None,
            )
        };
        parts.push(format!(
            "packets from {from_name} to {to_name} are lost: {} ({} packets); {}",
            legs.join(" and "),
            count(lost),
            located.why
        ));
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
        for (name, value) in located.figures {
            f = f.figure(name, value);
        }
    }
    f.text = format!(
        "between {} and {} alone: {}",
        set.name(a),
        set.name(b),
        parts.join(". And ")
    );
    for blame in blames {
        f = f.blame(blame);
    }
    f
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
    let mut parts = Vec::new();
    let mut f = Finding::new(Kind::Loss, String::new()).blame(Blame {
        host: None,
        direction: None,
        peer: None,
        place: Place::FabricWide,
    });
    for leg in legs {
        let typical = grid.typical[leg.index()] * 100.0;
        let all: Vec<f64> = grid
            .cells
            .iter()
            .filter(|c| c.leg == leg)
            .map(|c| c.rate() * 100.0)
            .collect();
        let (what, key) = match leg {
            Leg::Requests => ("requests", "forward_loss_pct"),
            Leg::Replies => ("replies", "return_loss_pct"),
        };
        parts.push(format!(
            "the typical flow loses {}% of its {what} ({} across the flows)",
            pct(typical),
            pct_range(all)
        ));
        f = f.figure(key, typical);
    }
    f.text = format!(
        "loss everywhere: {}, and no host or pair stands out from it. It is the fabric's as a whole (a shared link or switch, a policer every path crosses), or every host's alike -- compare the switches' discard counters, and a run across fewer hops",
        parts.join("; ")
    );
    let disk = evidence
        .values()
        .filter_map(|e| e.disk_waits().map(|busy| (e.id, busy)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((host, busy)) = disk {
        let name = set.name(host);
        f.text.push_str(&format!(
            ". Or the disk: {name}'s busiest worker spent {busy:.0}% of its time in disk I/O, and replies wait for it (one it holds past its interval's report counts as lost) -- compare a run without --disk to tell the disk's share from the fabric's"
        ));
        f = f.blame(Blame::host(name, Place::Disk));
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
    let flows: Vec<String> = lossy
        .iter()
        .map(|&&(s, d, sent, lost)| {
            format!(
                "{} -> {} ({}%)",
                set.name(s),
                set.name(d),
                pct(lost / sent * 100.0)
            )
        })
        .collect();
    vec![Finding::new(
        Kind::Loss,
        format!(
            "{} lose replies: their receivers wrote no rx rows (reports without them), so which leg lost them is not known -- collect the receivers' reports",
            name_list(&flows)
        ),
    )
    .figure("flows", lossy.len() as f64)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnosis::cells::Cell;

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
            fw[0].text.starts_with("packets into h2 are lost"),
            "{}",
            fw[0].text
        );
        assert!(fw[0].text.contains("after its NIC"), "{}", fw[0].text);
        // Its interface counted what its agent read: the wire.
        evidence.get_mut(&1).unwrap().rx_gap = Some(30.0);
        let wire = findings(&set, &grid, &evidence);
        assert_eq!(
            blames(&wire),
            vec![blame(Some("h2"), Some(Direction::Into), None, Place::Wire)]
        );
        for f in fw.iter().chain(&wire) {
            assert!(
                !f.text.contains("--pps") && !f.text.contains("lower"),
                "{}",
                f.text
            );
        }
        // Counts that cannot be compared (GSO): both places, said so.
        let e = evidence.get_mut(&1).unwrap();
        (e.rx_gap, e.nic_counted) = (None, true);
        let both = findings(&set, &grid, &evidence);
        assert_eq!(both[0].blames.len(), 2);
        assert!(both[0].text.contains("--no-gso"), "{}", both[0].text);
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
            f[0].text.contains("eth1") && f[0].text.contains("20.0 Mbps"),
            "{}",
            f[0].text
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
            f[0].text
                .starts_with("between h3 and h5 alone: packets from h3 to h5"),
            "{}",
            f[0].text
        );
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
