//! The lossy cells read host by host: which losses belong to one host's
//! way in or way out, which to one pair, and which to no one in particular.
//!
//! A drop on the way *into* host h loses the requests of every flow x -> h
//! (a column of the forward grid) and the replies to every flow h -> x (a
//! row of the return grid). A drop on the way *out of* h loses the requests
//! of every flow h -> x (a row of the forward grid) and the replies to every
//! flow x -> h (a column of the return grid). Either leg alone says what
//! the drop picks (the requests' port or size, say). What no host's
//! pattern takes is a pair's: its packets from one host to the other.
//!
//! Two hosts alone cannot tell "into b" from "out of a": every packet that
//! goes into b comes out of a. Their loss is the pair's, and the hosts'
//! own counts ([`super::place`]) say which end, if either.

use std::collections::BTreeMap;

use super::Direction;
use super::cells::{Cell, Cells, Leg};

/// A share of a host's cells on one side that must be lossy for the host
/// to be the place: a dark row or column, not two cells of twenty.
const DARK_SHARE: f64 = 0.75;
/// The fewest lossy cells that make a row or column.
const DARK_CELLS: usize = 2;

/// A loss the grid shows, with the cells it rests on (indexes into
/// [`Cells::cells`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// Packets into or out of `host`; `legs` says on which legs its side was
    /// dark (requests, replies).
    Host {
        host: u32,
        direction: Direction,
        requests: bool,
        replies: bool,
        cells: Vec<usize>,
    },
    /// Packets between two hosts that no host pattern explains: the cells
    /// travelling from `a` to `b`, and from `b` to `a`.
    Pair { a: u32, b: u32, cells: Vec<usize> },
}

impl Pattern {
    pub fn cells(&self) -> &[usize] {
        match self {
            Pattern::Host { cells, .. } | Pattern::Pair { cells, .. } => cells,
        }
    }

    /// Packets lost on its cells.
    pub fn lost(&self, grid: &Cells) -> f64 {
        self.cells().iter().map(|&i| grid.cells[i].lost).sum()
    }
}

/// The cells of one side of a host: lossy ones and all of them.
#[derive(Debug, Default)]
struct Side {
    lossy: Vec<usize>,
    all: usize,
}

impl Side {
    fn dark(&self) -> bool {
        self.lossy.len() >= DARK_CELLS && self.lossy.len() as f64 >= DARK_SHARE * self.all as f64
    }
}

/// The four sides of each host: requests and replies coming into it, and
/// going out of it.
#[derive(Debug, Default)]
struct Sides {
    into: [Side; 2],
    out_of: [Side; 2],
}

/// Reads the grid: host patterns first (largest loss first), then the pairs
/// their cells leave over.
pub fn read(grid: &Cells) -> Vec<Pattern> {
    let mut sides: BTreeMap<u32, Sides> = BTreeMap::new();
    for (i, c) in grid.cells.iter().enumerate() {
        let leg = c.leg.index();
        let into = &mut sides.entry(c.to()).or_default().into[leg];
        into.all += 1;
        if c.lossy {
            into.lossy.push(i);
        }
        let out = &mut sides.entry(c.from()).or_default().out_of[leg];
        out.all += 1;
        if c.lossy {
            out.lossy.push(i);
        }
    }
    let mut patterns = Vec::new();
    for (&host, s) in &sides {
        for (direction, legs) in [(Direction::Into, &s.into), (Direction::OutOf, &s.out_of)] {
            let [requests, replies] = [legs[0].dark(), legs[1].dark()];
            if !(requests || replies) {
                continue;
            }
            let mut cells: Vec<usize> = legs
                .iter()
                .filter(|side| side.dark())
                .flat_map(|side| side.lossy.iter().copied())
                .collect();
            cells.sort_unstable();
            patterns.push(Pattern::Host {
                host,
                direction,
                requests,
                replies,
                cells,
            });
        }
    }
    let explained: Vec<bool> = {
        let mut e = vec![false; grid.cells.len()];
        for p in &patterns {
            for &i in p.cells() {
                e[i] = true;
            }
        }
        e
    };
    let mut pairs: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (i, c) in grid.cells.iter().enumerate() {
        if c.lossy && !explained[i] {
            let key = (c.from().min(c.to()), c.from().max(c.to()));
            pairs.entry(key).or_default().push(i);
        }
    }
    patterns.extend(
        pairs
            .into_iter()
            .map(|((a, b), cells)| Pattern::Pair { a, b, cells }),
    );
    patterns.sort_by(|x, y| y.lost(grid).total_cmp(&x.lost(grid)));
    patterns
}

/// The cells of `pattern` on `leg`.
pub(crate) fn on_leg<'a>(
    grid: &'a Cells,
    pattern: &'a Pattern,
    leg: Leg,
) -> impl Iterator<Item = &'a Cell> {
    pattern
        .cells()
        .iter()
        .map(|&i| &grid.cells[i])
        .filter(move |c| c.leg == leg)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::cells::mesh;

    fn hosts(patterns: &[Pattern]) -> Vec<(u32, Direction, bool, bool)> {
        patterns
            .iter()
            .filter_map(|p| match p {
                Pattern::Host {
                    host,
                    direction,
                    requests,
                    replies,
                    ..
                } => Some((*host, *direction, *requests, *replies)),
                Pattern::Pair { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_drop_into_a_host_is_its_column_forward_and_row_back() {
        // Everything arriving at host 1 loses 5%: requests to it, replies to it.
        let grid = mesh(4, |_, to, _| if to == 1 { 0.05 } else { 0.0 });
        let patterns = read(&grid);
        assert_eq!(hosts(&patterns), vec![(1, Direction::Into, true, true)]);
        assert_eq!(patterns.len(), 1, "{patterns:?}");
        assert_eq!(patterns[0].cells().len(), 6);
    }

    #[test]
    fn a_drop_out_of_a_host_is_its_row_forward_and_column_back() {
        let grid = mesh(4, |from, _, _| if from == 2 { 0.05 } else { 0.0 });
        assert_eq!(hosts(&read(&grid)), vec![(2, Direction::OutOf, true, true)]);
    }

    #[test]
    fn requests_only_into_a_host_are_its_forward_leg_alone() {
        let grid = mesh(3, |_, to, leg| {
            if to == 1 && leg == Leg::Requests {
                0.05
            } else {
                0.0
            }
        });
        assert_eq!(hosts(&read(&grid)), vec![(1, Direction::Into, true, false)]);
    }

    #[test]
    fn one_sick_path_among_many_is_a_pair_however_small_its_share() {
        // 20 hosts, 380 flows: the packets from 3 to 7 lose 2%, a 0.005%
        // share of the fleet's packets.
        let grid = mesh(
            20,
            |from, to, _| if (from, to) == (3, 7) { 0.02 } else { 0.0 },
        );
        let patterns = read(&grid);
        assert_eq!(patterns.len(), 1, "{patterns:?}");
        match &patterns[0] {
            Pattern::Pair { a, b, cells } => {
                assert_eq!((*a, *b), (3, 7));
                // Requests of 3 -> 7 and replies of 7 -> 3.
                assert_eq!(cells.len(), 2);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn two_hosts_alone_are_a_pair_not_a_host() {
        let grid = mesh(2, |_, to, _| if to == 1 { 0.05 } else { 0.0 });
        let patterns = read(&grid);
        assert!(hosts(&patterns).is_empty(), "{patterns:?}");
        assert!(matches!(patterns[..], [Pattern::Pair { a: 0, b: 1, .. }]));
    }

    #[test]
    fn a_clean_grid_has_no_pattern() {
        assert!(read(&mesh(5, |_, _, _| 0.0)).is_empty());
    }
}
