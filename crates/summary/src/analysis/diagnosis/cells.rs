//! Every flow's two legs as cells of the forward and return grids: the
//! packets that set out on the leg and the packets lost on it, and which
//! cells lose more than the run's noise.
//!
//! A flow a -> b has two legs. Its requests travel from a to b (the forward
//! leg: sent by a, counted arriving by b); the replies to them travel from
//! b to a (the return leg: sent by b for what arrived, counted back by a).
//! Each cell therefore has a direction of travel, `from` -> `to`, and a loss
//! on the path between two hosts shows in every cell whose packets crossed
//! it.
//!
//! The noise is the run's own: the loss of the cell a quarter of the way up
//! each leg's cells, lowest first (0 on a clean fabric, however busy). Not
//! the median: in a small fleet half the cells may share one host's fault
//! (two hosts have two cells a leg). A cell is lossy when its loss is beyond
//! that: at least [`MIN_LOST`] packets and [`FLOOR`] of what it carried,
//! [`STANDS_OUT`] times the median, and more than the median's count could
//! give by chance. A fault on one path among hundreds is found whatever its
//! share of the fleet's total; loss everywhere at once raises the median
//! itself, and is the fabric's ([`Cells::fabric_wide`]).

use super::super::aggregate::ReportSet;
use super::super::figures::FlowFigures;

/// Fewest packets lost on a cell for it to count: below this a burst of a
/// few packets at a host's start or end is not a pattern.
pub const MIN_LOST: f64 = 10.0;
/// Least share of a cell's packets lost for it to count (0.01%).
pub const FLOOR: f64 = 1e-4;
/// How many times the run's typical loss a cell must lose to stand out.
pub const STANDS_OUT: f64 = 3.0;
/// Standard deviations above the typical count a lossy cell must lie: the
/// typical loss, as a rate, gives `p0 n` losses with a spread of about
/// `sqrt(p0 n)` (binomial), and bursts widen it, hence 5 rather than 2.
const SIGMAS: f64 = 5.0;

/// Which leg of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Leg {
    /// The requests, from the flow's sender to its receiver.
    Requests,
    /// The replies, from the flow's receiver back to its sender.
    Replies,
}

impl Leg {
    pub fn index(self) -> usize {
        match self {
            Leg::Requests => 0,
            Leg::Replies => 1,
        }
    }
}

/// One leg of one flow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// The flow: its sender and receiver.
    pub src: u32,
    pub dst: u32,
    pub leg: Leg,
    /// Packets that set out on the leg, and those lost on it.
    pub at_risk: f64,
    pub lost: f64,
    /// Beyond the run's noise.
    pub lossy: bool,
}

impl Cell {
    /// The host its packets left.
    pub fn from(&self) -> u32 {
        match self.leg {
            Leg::Requests => self.src,
            Leg::Replies => self.dst,
        }
    }

    /// The host its packets were going to.
    pub fn to(&self) -> u32 {
        match self.leg {
            Leg::Requests => self.dst,
            Leg::Replies => self.src,
        }
    }

    /// Share lost, 0..=1.
    pub fn rate(&self) -> f64 {
        if self.at_risk > 0.0 {
            self.lost / self.at_risk
        } else {
            0.0
        }
    }
}

/// The run's cells, and its noise per leg.
#[derive(Debug, Clone, Default)]
pub struct Cells {
    pub cells: Vec<Cell>,
    /// The lower quartile of the cells' loss on each leg (requests,
    /// replies), 0..=1: the run's noise.
    pub typical: [f64; 2],
    /// Flows whose legs are unknown (the receiver wrote no rx rows): their
    /// round trip only, as (src, dst, sent, lost).
    pub round_trips: Vec<(u32, u32, f64, f64)>,
}

impl Cells {
    /// The cells of every flow of the span (the flows of hosts that went
    /// away are left out already, after they went).
    pub fn of(set: &ReportSet, flows: &[FlowFigures]) -> Cells {
        let mut cells = Vec::new();
        let mut round_trips = Vec::new();
        for f in flows {
            let p = &f.packets;
            if p.sent <= 0.0 {
                continue;
            }
            let back = p.back.min(p.sent);
            if !set.wrote_rx_rows(f.peer) {
                round_trips.push((f.host, f.peer, p.sent, p.sent - back));
                continue;
            }
            let arrived = p.arrived.unwrap_or(p.sent).clamp(back, p.sent);
            cells.push(Cell {
                src: f.host,
                dst: f.peer,
                leg: Leg::Requests,
                at_risk: p.sent,
                lost: p.sent - arrived,
                lossy: false,
            });
            cells.push(Cell {
                src: f.host,
                dst: f.peer,
                leg: Leg::Replies,
                at_risk: arrived,
                lost: arrived - back,
                lossy: false,
            });
        }
        Cells::judged(cells, round_trips)
    }

    /// Judges each cell against the noise of its leg.
    pub fn judged(mut cells: Vec<Cell>, round_trips: Vec<(u32, u32, f64, f64)>) -> Cells {
        let typical = [Leg::Requests, Leg::Replies].map(|leg| {
            let mut rates: Vec<f64> = cells
                .iter()
                .filter(|c| c.leg == leg && c.at_risk > 0.0)
                .map(Cell::rate)
                .collect();
            rates.sort_by(f64::total_cmp);
            rates
                .get((rates.len().saturating_sub(1)) / 4)
                .copied()
                .unwrap_or(0.0)
        });
        for c in &mut cells {
            c.lossy = stands_out(c.lost, c.at_risk, typical[c.leg.index()]);
        }
        Cells {
            cells,
            typical,
            round_trips,
        }
    }

    /// The legs on which loss is the fabric's own: three cells in four
    /// lose [`FLOOR`] or more, and more than half at least [`MIN_LOST`]
    /// packets.
    pub fn fabric_wide(&self) -> Vec<Leg> {
        [Leg::Requests, Leg::Replies]
            .into_iter()
            .filter(|&leg| {
                let typical = self.typical[leg.index()];
                let lossy_everywhere = self
                    .cells
                    .iter()
                    .filter(|c| c.leg == leg)
                    .filter(|c| c.lost >= MIN_LOST && c.rate() >= FLOOR)
                    .count();
                let all = self.cells.iter().filter(|c| c.leg == leg).count();
                typical >= FLOOR && 2 * lossy_everywhere > all
            })
            .collect()
    }

    /// Whether any cell lost anything beyond the noise, or the fabric as a
    /// whole did.
    pub(crate) fn any_loss(&self) -> bool {
        self.cells.iter().any(|c| c.lossy)
            || !self.fabric_wide().is_empty()
            || self
                .round_trips
                .iter()
                .any(|&(_, _, sent, lost)| stands_out(lost, sent, 0.0))
    }
}

/// Whether `lost` of `at_risk` lies beyond what a typical loss rate of
/// `typical` explains.
pub(crate) fn stands_out(lost: f64, at_risk: f64, typical: f64) -> bool {
    if at_risk <= 0.0 || lost < MIN_LOST {
        return false;
    }
    let rate = lost / at_risk;
    let expected = typical * at_risk;
    rate >= FLOOR
        && rate >= STANDS_OUT * typical
        && lost > expected + SIGMAS * expected.max(1.0).sqrt()
}

/// A full mesh of `n` hosts, 100,000 requests a flow, losing `drop(from,
/// to, leg)` of the packets crossing from `from` to `to` on `leg` (the
/// tests of what is read from the grid).
#[cfg(test)]
pub(crate) fn mesh(n: u32, drop: impl Fn(u32, u32, Leg) -> f64) -> Cells {
    let mut cells = Vec::new();
    for s in 0..n {
        for d in (0..n).filter(|&d| d != s) {
            let sent = 100_000.0;
            let fwd = drop(s, d, Leg::Requests);
            let arrived = sent * (1.0 - fwd);
            let ret = drop(d, s, Leg::Replies);
            for (leg, at_risk, rate) in [(Leg::Requests, sent, fwd), (Leg::Replies, arrived, ret)] {
                cells.push(Cell {
                    src: s,
                    dst: d,
                    leg,
                    at_risk,
                    lost: (at_risk * rate).round(),
                    lossy: false,
                });
            }
        }
    }
    Cells::judged(cells, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn cell(src: u32, dst: u32, leg: Leg, at_risk: f64, lost: f64) -> Cell {
        Cell {
            src,
            dst,
            leg,
            at_risk,
            lost,
            lossy: false,
        }
    }

    #[test]
    fn a_cell_is_lossy_beyond_the_runs_noise_only() {
        // Nothing lost elsewhere: 20 of 100,000 (0.02%) stands out.
        assert!(stands_out(20.0, 100_000.0, 0.0));
        // A handful of packets is not a pattern, nor is 0.005%.
        assert!(!stands_out(9.0, 1_000.0, 0.0));
        assert!(!stands_out(5.0, 100_000.0, 0.0));
        // 1% everywhere: a cell at 1.1% does not stand out, one at 5% does.
        assert!(!stands_out(1_100.0, 100_000.0, 0.01));
        assert!(stands_out(5_000.0, 100_000.0, 0.01));
    }

    #[test]
    fn a_leg_lossy_everywhere_is_the_fabrics() {
        let mut cells = Vec::new();
        for (s, d) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
            cells.push(cell(s, d, Leg::Requests, 100_000.0, 1_000.0));
            cells.push(cell(s, d, Leg::Replies, 99_000.0, 0.0));
        }
        let grid = Cells::judged(cells, Vec::new());
        assert_eq!(grid.fabric_wide(), vec![Leg::Requests]);
        assert!(grid.cells.iter().all(|c| !c.lossy), "none stands out");
        assert!(grid.any_loss());
    }

    #[test]
    fn directions_of_travel_follow_the_leg() {
        let req = cell(1, 2, Leg::Requests, 1.0, 0.0);
        let rep = cell(1, 2, Leg::Replies, 1.0, 0.0);
        assert_eq!((req.from(), req.to()), (1, 2));
        assert_eq!((rep.from(), rep.to()), (2, 1));
    }
}
