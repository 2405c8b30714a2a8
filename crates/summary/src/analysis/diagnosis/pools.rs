//! Loss between two pools (racks): every lossy leg crosses from one pool to
//! the other, across most of their hosts, while the legs inside the pools
//! (and to any other pool), carrying enough to have shown it, lose nothing.
//! That is the racks' uplinks, the fabric ports they cross, or the fabric
//! between them: not one host, nor every one of them alone. Read once, as
//! "between pool A and pool B" (the dark block the grids draw), and taken
//! out of the grid the host patterns read.
//!
//! The pools are the matrix's (`# pool NAME: host ...`, `mx gen --pool`):
//! the servers behind one top-of-rack switch.

use std::collections::{BTreeSet, HashMap};

use super::super::aggregate::ReportSet;
use super::super::figures::Context;
use super::cells::{Cell, Cells};
use super::says::{PoolWay, Says};
use super::{Blame, Direction, Finding, Kind, Place};

/// A clean leg must have carried enough to show the loss: at the crossing
/// legs' share, at least this many of its packets would have been lost.
const SHOWN: f64 = 10.0;
/// A clean leg lost at most this share of what that would have cost it.
const SPARED: f64 = 0.1;

/// The loss of a run whose lossy legs all cross between two pools.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolCells {
    /// The two pools (indices into the matrix's pools), and their names.
    pub pools: (usize, usize),
    pub names: (String, String),
    /// Every leg that crosses between them (lossy or not).
    pub crossing: Vec<Cell>,
    /// The hosts of the first pool.
    pub first: BTreeSet<u32>,
    /// Legs inside the pools or to other pools that carried enough to have
    /// shown the loss, and lost none of it.
    pub clean_outside: usize,
}

/// The two pools every lossy leg of `grid` crosses between, when the loss
/// is theirs: it spans at least two hosts of each (one host's trouble is
/// read as that host's), covers at least half of the legs crossing one
/// way, and the legs that do not cross are spared it.
pub fn confined(set: &ReportSet, ctx: &Context, grid: &Cells) -> Option<PoolCells> {
    let m = ctx.matrix.as_ref()?;
    let pools = m.pools();
    if pools.pools.len() < 2 {
        return None;
    }
    let mut pool_of: HashMap<u32, usize> = HashMap::new();
    for (i, pool) in pools.pools.iter().enumerate() {
        for &h in &pool.members {
            if let Some(id) = set.id_of(&m.hosts()[h as usize].name) {
                pool_of.insert(id, i);
            }
        }
    }
    let names: Vec<String> = pools.pools.iter().map(|p| p.name.clone()).collect();
    confined_in(&pool_of, &names, grid)
}

/// [`confined`] over hosts in pools `pool_of` (by host id), named `names`.
fn confined_in(pool_of: &HashMap<u32, usize>, names: &[String], grid: &Cells) -> Option<PoolCells> {
    let ends = |c: &Cell| Some((*pool_of.get(&c.from())?, *pool_of.get(&c.to())?));
    let lossy: Vec<&Cell> = grid.cells.iter().filter(|c| c.lossy).collect();
    let mut pairs = BTreeSet::new();
    for c in &lossy {
        let (a, b) = ends(c)?;
        if a == b {
            return None;
        }
        pairs.insert((a.min(b), a.max(b)));
    }
    let &(a, b) = pairs.first()?;
    if pairs.len() > 1 {
        return None;
    }
    let crosses = |c: &Cell| ends(c).is_some_and(|(x, y)| (x.min(y), x.max(y)) == (a, b));
    let senders: BTreeSet<u32> = lossy.iter().map(|c| c.from()).collect();
    let receivers: BTreeSet<u32> = lossy.iter().map(|c| c.to()).collect();
    if senders.len() < 2 || receivers.len() < 2 {
        return None;
    }
    let one_way_mostly = [(a, b), (b, a)].into_iter().any(|way| {
        let legs: Vec<&Cell> = grid.cells.iter().filter(|c| ends(c) == Some(way)).collect();
        2 * legs.iter().filter(|c| c.lossy).count() >= legs.len() && !legs.is_empty()
    });
    if !one_way_mostly {
        return None;
    }
    let (lost, at_risk) = lossy
        .iter()
        .fold((0.0, 0.0), |(l, r), c| (l + c.lost, r + c.at_risk));
    let share = lost / at_risk.max(1.0);
    let clean_outside = grid
        .cells
        .iter()
        .filter(|c| !crosses(c))
        .filter(|c| {
            let would = c.at_risk * share;
            would >= SHOWN && c.lost <= SPARED * would
        })
        .count();
    if clean_outside == 0 {
        return None;
    }
    Some(PoolCells {
        pools: (a, b),
        names: (names[a].clone(), names[b].clone()),
        crossing: grid.cells.iter().filter(|c| crosses(c)).copied().collect(),
        first: pool_of
            .iter()
            .filter(|&(_, &p)| p == a)
            .map(|(&id, _)| id)
            .collect(),
        clean_outside,
    })
}

/// `grid` with the legs crossing between the pools read as clean: what the
/// host patterns take (the pools' loss is neither a host's nor everyone's).
pub fn without(grid: &Cells, pools: &PoolCells) -> Cells {
    let mut cells = grid.cells.clone();
    for c in &mut cells {
        if pools
            .crossing
            .iter()
            .any(|x| (x.src, x.dst, x.leg) == (c.src, c.dst, c.leg))
        {
            c.lost = 0.0;
        }
    }
    Cells::judged(cells, grid.round_trips.clone())
}

/// The finding: each way across, what it lost.
pub fn finding(pools: &PoolCells) -> Finding {
    let (a, b) = &pools.names;
    let ways: Vec<PoolWay> = [(a, b, true), (b, a, false)]
        .into_iter()
        .map(|(from, to, a_to_b)| {
            let legs: Vec<&Cell> = pools
                .crossing
                .iter()
                .filter(|c| pools.first.contains(&c.from()) == a_to_b)
                .collect();
            let lossy = legs.iter().filter(|c| c.lossy).count();
            let (lost, at_risk) = legs
                .iter()
                .fold((0.0, 0.0), |(l, r), c| (l + c.lost, r + c.at_risk));
            PoolWay {
                from: from.clone(),
                to: to.clone(),
                lossy_legs: lossy,
                legs: legs.len(),
                lost,
                lost_pct: if at_risk > 0.0 {
                    lost / at_risk * 100.0
                } else {
                    0.0
                },
            }
        })
        .collect();
    let lost: f64 = ways.iter().map(|w| w.lost).sum();
    Finding::new(
        Kind::Loss,
        Says::PoolLoss {
            ways,
            clean_outside: pools.clean_outside,
        },
    )
    .figure("lost_pkts", lost)
    .blame(Blame {
        host: Some(a.clone()),
        direction: Some(Direction::Between),
        peer: Some(b.clone()),
        place: Place::Pools,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hosts 0-2 in pool A, 3-5 in pool B, a full mesh losing `drop(from,
    /// to)` of the packets crossing from `from` to `to` on either leg.
    fn mesh(drop: impl Fn(u32, u32) -> f64) -> Cells {
        super::super::cells::mesh(6, |from, to, _| drop(from, to))
    }

    fn pools() -> (HashMap<u32, usize>, Vec<String>) {
        let pool_of = (0..6).map(|h| (h, usize::from(h >= 3))).collect();
        (pool_of, vec!["tor1".to_string(), "tor2".to_string()])
    }

    #[test]
    fn loss_on_every_leg_from_one_pool_to_the_other_is_between_them() {
        let (pool_of, names) = pools();
        let grid = mesh(|from, to| if from < 3 && to >= 3 { 0.05 } else { 0.0 });
        let p = confined_in(&pool_of, &names, &grid).expect("between the pools");
        assert_eq!(p.names, ("tor1".to_string(), "tor2".to_string()));
        // 9 flows each way across, two legs each.
        assert_eq!(p.crossing.len(), 36);
        // The 24 legs inside the pools (6 flows in each) are spared.
        assert_eq!(p.clean_outside, 24);
        let f = finding(&p);
        let Says::PoolLoss { ways, .. } = &f.says else {
            panic!("{f:?}")
        };
        assert_eq!((ways[0].lossy_legs, ways[0].legs), (18, 18));
        assert_eq!((ways[1].lossy_legs, ways[1].legs), (0, 18));
        assert!((ways[0].lost_pct - 5.0).abs() < 0.01, "{ways:?}");
        assert_eq!(f.blames[0].place, Place::Pools);
        // The host patterns read the grid without those legs: nothing left.
        assert!(!without(&grid, &p).cells.iter().any(|c| c.lossy));
    }

    #[test]
    fn one_host_s_loss_or_loss_inside_a_pool_is_not_the_pools() {
        let (pool_of, names) = pools();
        // Only host 0's legs to the other pool: one sender, its own trouble.
        let one = mesh(|from, to| if from == 0 && to >= 3 { 0.05 } else { 0.0 });
        assert_eq!(confined_in(&pool_of, &names, &one), None);
        // Across and inside pool A: not confined to the crossing.
        let inside = mesh(|from, to| if from < 3 && to != from { 0.05 } else { 0.0 });
        assert_eq!(confined_in(&pool_of, &names, &inside), None);
        // A clean run: nothing.
        assert_eq!(confined_in(&pool_of, &names, &mesh(|_, _| 0.0)), None);
        // Every leg crosses (a pool-to-pool matrix): nothing spared to
        // compare with, so nothing said of the pools.
        let across = mesh(|from, to| if (from < 3) != (to < 3) { 0.05 } else { 0.0 });
        let only_crossing = Cells::judged(
            across
                .cells
                .iter()
                .filter(|c| (c.src < 3) != (c.dst < 3))
                .copied()
                .collect(),
            Vec::new(),
        );
        assert_eq!(confined_in(&pool_of, &names, &only_crossing), None);
    }
}
