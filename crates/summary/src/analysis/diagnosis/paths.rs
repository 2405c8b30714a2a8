//! Loss on some of a flow's paths alone: the streams (`--streams`) that
//! lose and the ones that do not.
//!
//! A fabric of equal-cost paths hashes each packet's addresses and ports
//! to one path, so the S streams of a flow (S source ports) take up to S
//! paths, and every packet of a stream takes the same one. A host's own
//! trouble (its CPU, its sockets, its qdisc, its cable) hits every stream
//! of its flows alike. A link or switch port on one path hits the streams
//! that take it and spares the rest: a lossy leg whose loss sits on some
//! of its streams while the others, carrying enough to show it, lose
//! nothing, is a path's. Such a cell is taken out of the grid the host
//! patterns read ([`super::pattern`]): its loss names no host.
//!
//! A NIC's receive queues are picked by a hash of the same ports (RSS), so
//! where every such leg goes into one host, a queue of its NIC fits as
//! well; the finding says both.
//!
//! Each stream's legs come from its sender's counts (the responder's count
//! each reply carries, agent::legs): a stream of a peer whose replies carry
//! none (the original's agent) is not read here.

use std::collections::BTreeSet;

use super::super::aggregate::ReportSet;
use super::super::figures::FlowFigures;
use super::cells::{Cell, Cells, Leg, stands_out};
use super::says::{LegName, PathFlow, Says};
use super::{Blame, Direction, Finding, Kind, Place};

/// A clean stream must have carried enough to show the loss: at the lossy
/// streams' share, at least this many of its packets would have been lost.
/// A host-wide loss leaves a stream whole by chance about e^-SHOWN of the
/// time (Poisson): one stream in 20,000.
const SHOWN: f64 = 10.0;
/// A clean stream lost at most this share of what the lossy share would
/// have cost it: a path's fault spares it whole.
const SPARED: f64 = 0.1;
/// The lossy streams hold at least this share of the leg's loss.
const HELD: f64 = 0.95;

/// One lossy leg of a flow whose loss sits on some of its streams.
#[derive(Debug, Clone, PartialEq)]
pub struct PathCell {
    pub src: u32,
    pub dst: u32,
    pub leg: Leg,
    /// The source ports of the streams that lose, in order.
    pub lossy: Vec<u16>,
    /// How many streams the flow had (that carried the leg).
    pub streams: usize,
    /// Packets the lossy streams carried on the leg, and lost.
    pub at_risk: f64,
    pub lost: f64,
}

impl PathCell {
    /// The host the leg's packets left, and the one they went to.
    pub fn ends(&self) -> (u32, u32) {
        match self.leg {
            Leg::Requests => (self.src, self.dst),
            Leg::Replies => (self.dst, self.src),
        }
    }
}

/// A stream's packets at risk on `leg` and lost there; `None` where its
/// replies carried no count.
pub(super) fn on_leg(s: &mx_report::streams::StreamCounts, leg: Leg) -> Option<(f64, f64)> {
    let l = s.legs?;
    let (settled, fwd, ret) = (
        l.settled as f64,
        l.forward_lost as f64,
        l.return_lost as f64,
    );
    Some(match leg {
        Leg::Requests => (settled, fwd),
        Leg::Replies => ((settled - fwd).max(0.0), ret),
    })
}

/// The legs of `flows` that lose (beyond the run's noise, or at all on a
/// leg whose loss is everywhere: where every flow loses, the noise is the
/// loss) and whose loss sits on some of their streams alone.
pub fn confined(grid: &Cells, flows: &[FlowFigures]) -> Vec<PathCell> {
    let everywhere = grid.fabric_wide();
    let mut out = Vec::new();
    for f in flows {
        for leg in [Leg::Requests, Leg::Replies] {
            let lossy_cell = grid.cells.iter().any(|c| {
                c.src == f.host
                    && c.dst == f.peer
                    && c.leg == leg
                    && (c.lossy
                        || (everywhere.contains(&leg) && stands_out(c.lost, c.at_risk, 0.0)))
            });
            if lossy_cell && let Some(cell) = confined_leg(f, leg) {
                out.push(cell);
            }
        }
    }
    out
}

fn confined_leg(f: &FlowFigures, leg: Leg) -> Option<PathCell> {
    let streams: Vec<(u16, f64, f64)> = f
        .streams
        .iter()
        .filter_map(|s| on_leg(s, leg).map(|(risk, lost)| (s.sport, risk, lost)))
        .filter(|&(_, risk, _)| risk > 0.0)
        .collect();
    if streams.len() < 2 {
        return None;
    }
    let (risk, lost) = streams
        .iter()
        .fold((0.0, 0.0), |(r, l), &(_, risk, lost)| (r + risk, l + lost));
    if lost <= 0.0 {
        return None;
    }
    let share = lost / risk;
    // Lossy: at least half the leg's share. Clean: enough to show it, and
    // spared it.
    let lossy: Vec<&(u16, f64, f64)> = streams
        .iter()
        .filter(|&&(_, r, l)| l > 0.0 && l / r >= share / 2.0)
        .collect();
    let clean = streams
        .iter()
        .filter(|&&(_, r, l)| {
            let would = r * lossy_share(&lossy);
            would >= SHOWN && l <= SPARED * would
        })
        .count();
    let lossy_lost: f64 = lossy.iter().map(|s| s.2).sum();
    if clean == 0 || lossy_lost < HELD * lost {
        return None;
    }
    Some(PathCell {
        src: f.host,
        dst: f.peer,
        leg,
        lossy: lossy.iter().map(|s| s.0).collect(),
        streams: streams.len(),
        at_risk: lossy.iter().map(|s| s.1).sum(),
        lost: lossy_lost,
    })
}

/// The share the lossy streams lose, together.
fn lossy_share(lossy: &[&(u16, f64, f64)]) -> f64 {
    let (r, l) = lossy
        .iter()
        .fold((0.0, 0.0), |(r, l), s| (r + s.1, l + s.2));
    if r > 0.0 { l / r } else { 0.0 }
}

/// What a pair's loss on the path between can say of its lossy `cells`'
/// streams: one each (their equal-cost paths cannot be told apart, and
/// `--streams` can), or how many, where every one of them lost on the leg;
/// 0 where it can say neither (no stream counted apart, or some lost
/// nothing). The fewest over the cells.
pub fn streams_said(set: &ReportSet, cells: &[&Cell]) -> usize {
    cells
        .iter()
        .map(|c| {
            let Some(t) = set.tx.get(&(c.src, c.dst)) else {
                return 0;
            };
            let every_one_lost = t
                .streams
                .values()
                .all(|s| on_leg(s, c.leg).is_some_and(|(_, lost)| lost > 0.0));
            if t.streams.len() == 1 || every_one_lost {
                t.streams.len()
            } else {
                0
            }
        })
        .min()
        .unwrap_or(0)
}

/// `grid` with the `paths`' cells read as clean: what the host patterns
/// and the fabric's reading take (a path's loss is neither a host's nor
/// everywhere's). The noise is judged again without them.
pub fn without(grid: &Cells, paths: &[PathCell]) -> Cells {
    let mut cells = grid.cells.clone();
    for c in &mut cells {
        if paths
            .iter()
            .any(|p| p.src == c.src && p.dst == c.dst && p.leg == c.leg)
        {
            c.lost = 0.0;
        }
    }
    Cells::judged(cells, grid.round_trips.clone())
}

/// One finding per leg: the flows whose loss on it sits on some of their
/// streams, most lost first.
pub fn findings(set: &ReportSet, paths: &[PathCell]) -> Vec<Finding> {
    let mut out = Vec::new();
    for leg in [Leg::Requests, Leg::Replies] {
        let mut cells: Vec<&PathCell> = paths.iter().filter(|p| p.leg == leg).collect();
        if cells.is_empty() {
            continue;
        }
        cells.sort_by(|a, b| b.lost.total_cmp(&a.lost));
        let receivers: BTreeSet<u32> = cells.iter().map(|c| c.ends().1).collect();
        let one_receiver = (receivers.len() == 1 && cells.len() > 1)
            .then(|| set.name(*receivers.first().expect("one")).to_string());
        let flows: Vec<PathFlow> = cells
            .iter()
            .map(|c| {
                let (from, to) = c.ends();
                PathFlow {
                    from: set.name(from).to_string(),
                    to: set.name(to).to_string(),
                    lossy_ports: c.lossy.clone(),
                    streams: c.streams,
                    lost: c.lost,
                    lost_pct: c.lost / c.at_risk * 100.0,
                }
            })
            .collect();
        let lost: f64 = cells.iter().map(|c| c.lost).sum();
        let lossy_streams: usize = cells.iter().map(|c| c.lossy.len()).sum();
        let streams: usize = cells.iter().map(|c| c.streams).sum();
        let says = Says::PathLoss {
            leg: match leg {
                Leg::Requests => LegName::Requests,
                Leg::Replies => LegName::Replies,
            },
            flows: flows.clone(),
            one_receiver,
        };
        let mut finding = Finding::new(Kind::Loss, says)
            .figure("lost_pkts", lost)
            .figure("lossy_streams", lossy_streams as f64)
            .figure("streams", streams as f64);
        for f in &flows {
            finding = finding.blame(Blame {
                host: Some(f.from.clone()),
                direction: Some(Direction::Between),
                peer: Some(f.to.clone()),
                place: Place::Path,
            });
        }
        out.push(finding);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_report::streams::{StreamCounts, StreamLegs};

    fn stream(sport: u16, settled: u64, fwd: u64, ret: u64) -> StreamCounts {
        StreamCounts {
            sport,
            sent: settled,
            replies: settled - fwd - ret,
            legs: Some(StreamLegs {
                settled,
                forward_lost: fwd,
                return_lost: ret,
            }),
        }
    }

    fn flow(streams: Vec<StreamCounts>) -> FlowFigures {
        FlowFigures::of_streams(0, 1, streams)
    }

    fn lossy_grid(leg: Leg) -> Cells {
        Cells {
            cells: vec![Cell {
                src: 0,
                dst: 1,
                leg,
                at_risk: 1.0,
                lost: 1.0,
                lossy: true,
            }],
            ..Cells::default()
        }
    }

    #[test]
    fn loss_on_half_the_streams_and_none_on_the_rest_is_a_path_s() {
        let f = flow(vec![
            stream(40_000, 5_000, 500, 0),
            stream(40_001, 5_000, 0, 0),
            stream(40_002, 5_000, 480, 0),
            stream(40_003, 5_000, 0, 0),
        ]);
        let paths = confined(&lossy_grid(Leg::Requests), &[f]);
        assert_eq!(paths.len(), 1);
        assert_eq!(paths[0].lossy, vec![40_000, 40_002]);
        assert_eq!((paths[0].streams, paths[0].lost), (4, 980.0));
        let cleared = without(&lossy_grid(Leg::Requests), &paths);
        assert!(cleared.cells.iter().all(|c| !c.lossy && c.lost == 0.0));
        assert!(cleared.fabric_wide().is_empty());
    }

    #[test]
    fn a_lone_flow_s_loss_on_some_streams_is_a_path_s_not_everywhere_s() {
        // One flow: the noise is its own loss, so the grid finds no cell
        // standing out, and the leg lossy everywhere.
        let mut grid = lossy_grid(Leg::Requests);
        grid.cells[0] = Cell {
            at_risk: 20_000.0,
            lost: 980.0,
            ..grid.cells[0]
        };
        let grid = Cells::judged(grid.cells, Vec::new());
        assert_eq!(grid.fabric_wide(), vec![Leg::Requests]);
        let f = flow(vec![
            stream(40_000, 5_000, 500, 0),
            stream(40_001, 5_000, 0, 0),
            stream(40_002, 5_000, 480, 0),
            stream(40_003, 5_000, 0, 0),
        ]);
        let paths = confined(&grid, &[f]);
        assert_eq!(paths.len(), 1);
        assert!(without(&grid, &paths).fabric_wide().is_empty());
    }

    #[test]
    fn loss_on_every_stream_alike_is_no_path_s() {
        // 1% on each: a host's or the fabric's, whatever the path.
        let f = flow((0..4).map(|i| stream(40_000 + i, 5_000, 50, 0)).collect());
        assert!(confined(&lossy_grid(Leg::Requests), &[f]).is_empty());
        // One stream (--streams 1): nothing to compare.
        let f = flow(vec![stream(40_000, 5_000, 500, 0)]);
        assert!(confined(&lossy_grid(Leg::Requests), &[f]).is_empty());
    }

    #[test]
    fn a_clean_stream_must_have_carried_enough_to_show_the_loss() {
        // 10% on one stream; the other carried 20 packets (2 would have
        // been lost): it proves nothing.
        let f = flow(vec![
            stream(40_000, 5_000, 500, 0),
            stream(40_001, 20, 0, 0),
        ]);
        assert!(confined(&lossy_grid(Leg::Requests), &[f]).is_empty());
    }

    #[test]
    fn replies_lost_on_some_streams_are_their_leg_s_and_a_leg_the_grid_found_clean_is_left() {
        let f = flow(vec![
            stream(40_000, 5_000, 0, 400),
            stream(40_001, 5_000, 0, 0),
        ]);
        let paths = confined(&lossy_grid(Leg::Replies), std::slice::from_ref(&f));
        assert_eq!(paths.len(), 1);
        assert_eq!((paths[0].leg, paths[0].ends()), (Leg::Replies, (1, 0)));
        assert!(confined(&lossy_grid(Leg::Requests), &[f]).is_empty());
    }
}
