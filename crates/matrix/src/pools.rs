//! Pools: named groups of hosts (the servers behind one top-of-rack switch),
//! and the pool-to-pool shapes `mx gen --pool A=a.txt --pool B=b.txt
//! --between A B` draws, the way a fabric is qualified (one TOR's nodes
//! stream to the other's, simplex or duplex).
//!
//! The matrix records its pools as comment lines that name hosts, so hand
//! edits to the grid, the rates or the column order leave them intact:
//!
//! ```text
//! # pool tor1: h1 h2 h3
//! # pool tor2: h4 h5 h6
//! # between=tor1,tor2 duplex=0 -- tor1 sends, tor2 answers
//! ```
//!
//! The shapes. Pool S (s senders) sends to pool R (r receivers); with
//! `duplex` R sends to S as well, by the same rule. Without `--peers` every
//! sender talks to every receiver. With `--peers K` (1 <= K <= r) the senders
//! and receivers are put in a seeded order, and the sender at position p
//! talks to the receivers at positions `(p*K + l*K + j) mod r`, j < K, in
//! layer l: the s*K flows of a layer are dealt round-robin over the
//! receivers, so each sender has exactly K distinct receivers and each
//! receiver is answering either floor(s*K/r) or ceil(s*K/r) senders (exactly
//! s*K/r when r divides it). With `--dwell`, layer l advances every sender by
//! K positions: over L = ceil(r/K) layers each sender meets every receiver
//! exactly once (the last layer holds the remainder r - K(L-1), or with
//! `--equal-layers` a full K that repeats the first ones). A duplex matrix
//! whose two directions have different cycles (pools of different sizes)
//! runs max of both; the shorter direction sits its extra layers out, or
//! with `--equal-layers` starts its cycle again.

use super::cpython_random::PyRandom;

/// One pool: its name and its hosts (matrix indices, in the pool line's order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub name: String,
    pub members: Vec<u32>,
}

/// Which two pools a pool-to-pool matrix connects (indices into the pools).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Between {
    pub senders: usize,
    pub receivers: usize,
    /// Receivers send to the senders' pool too.
    pub duplex: bool,
}

/// The pools of a matrix and, for a pool-to-pool matrix, the pair it connects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pools {
    pub pools: Vec<Pool>,
    pub between: Option<Between>,
}

impl Pools {
    /// For each of a matrix's `hosts`, the pool it belongs to.
    pub fn pool_of_each(&self, hosts: usize) -> Vec<Option<usize>> {
        let mut of = vec![None; hosts];
        for (i, pool) in self.pools.iter().enumerate() {
            for &h in &pool.members {
                of[h as usize] = Some(i);
            }
        }
        of
    }

    /// The directions of a pool-to-pool matrix, as (sender pool, receiver pool).
    pub fn directions(&self) -> Vec<(usize, usize)> {
        match self.between {
            None => Vec::new(),
            Some(b) if b.duplex => vec![(b.senders, b.receivers), (b.receivers, b.senders)],
            Some(b) => vec![(b.senders, b.receivers)],
        }
    }

    /// The largest K a pool-to-pool shape can use: every sender's K receivers
    /// are distinct hosts of the other pool.
    pub(crate) fn max_peers(&self) -> Option<usize> {
        self.directions()
            .iter()
            .map(|&(_, r)| self.pools[r].members.len())
            .min()
    }

    /// Layers a rotation at `peers` needs: the longer direction's cycle.
    pub fn layer_count(&self, peers: usize) -> usize {
        self.directions()
            .iter()
            .map(|&(_, r)| self.pools[r].members.len().div_ceil(peers))
            .max()
            .unwrap_or(1)
    }

    /// Checks pool names: letters, digits, `_`, `-` and `.`, as a pool line
    /// and a summary line can carry them.
    pub fn valid_name(name: &str) -> bool {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    }
}

/// One direction of a pool-to-pool plan: senders and receivers in their
/// seeded order, and how many layers its own cycle has.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Direction {
    senders: Vec<u32>,
    receivers: Vec<u32>,
    cycle: usize,
}

/// The flows of a pool-to-pool `--peers K` matrix in every layer (one layer
/// when it does not rotate), derived from the pools and the seed alone, as
/// every agent derives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolPlan {
    directions: Vec<Direction>,
    /// For each matrix host: (direction, position among its senders).
    position: Vec<Option<(usize, usize)>>,
    peers: usize,
    layers: usize,
    fill: bool,
}

impl PoolPlan {
    /// The plan for `pools` (a pool-to-pool set) over `hosts` matrix hosts.
    /// The seed orders the sender pool, then the receiver pool (and for a
    /// duplex matrix, the reverse direction's the same way).
    pub fn new(pools: &Pools, hosts: usize, peers: usize, seed: i64, fill: bool) -> PoolPlan {
        assert!(peers >= 1, "peers is at least 1");
        let mut rng = PyRandom::new(seed);
        let mut position = vec![None; hosts];
        let mut directions = Vec::new();
        for (d, (s, r)) in pools.directions().into_iter().enumerate() {
            let mut senders = pools.pools[s].members.clone();
            let mut receivers = pools.pools[r].members.clone();
            rng.shuffle(&mut senders);
            rng.shuffle(&mut receivers);
            assert!(peers <= receivers.len(), "peers is at most the receivers");
            for (p, &h) in senders.iter().enumerate() {
                position[h as usize] = Some((d, p));
            }
            let cycle = receivers.len().div_ceil(peers);
            directions.push(Direction {
                senders,
                receivers,
                cycle,
            });
        }
        let layers = directions.iter().map(|d| d.cycle).max().unwrap_or(1);
        PoolPlan {
            directions,
            position,
            peers,
            layers,
            fill,
        }
    }

    pub fn layer_count(&self) -> usize {
        self.layers
    }

    /// Host `src`'s receivers in `layer` (none for a host that sends nothing).
    pub fn targets(&self, src: u32, layer: usize) -> impl Iterator<Item = u32> + '_ {
        let (direction, p) = match self.position.get(src as usize).copied().flatten() {
            Some((d, p)) => (Some(&self.directions[d]), p),
            None => (None, 0),
        };
        let (start, count, receivers) = match direction {
            None => (0, 0, &[][..]),
            Some(d) => {
                let r = d.receivers.len();
                // A direction past its own cycle: idle, or around again with fill.
                let own = if layer < d.cycle {
                    Some(layer)
                } else if self.fill {
                    Some(layer % d.cycle)
                } else {
                    None
                };
                match own {
                    None => (0, 0, &d.receivers[..]),
                    Some(l) => {
                        let last = l + 1 == d.cycle;
                        let count = if last && !self.fill {
                            r - self.peers * (d.cycle - 1)
                        } else {
                            self.peers
                        };
                        (
                            (p * self.peers + l * self.peers) % r,
                            count,
                            &d.receivers[..],
                        )
                    }
                }
            }
        };
        (0..count).map(move |j| receivers[(start + j) % receivers.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(a: usize, b: usize, duplex: bool) -> Pools {
        Pools {
            pools: vec![
                Pool {
                    name: "a".into(),
                    members: (0..a as u32).collect(),
                },
                Pool {
                    name: "b".into(),
                    members: (a as u32..(a + b) as u32).collect(),
                },
            ],
            between: Some(Between {
                senders: 0,
                receivers: 1,
                duplex,
            }),
        }
    }

    #[test]
    fn a_sender_deals_its_peers_round_robin() {
        // 2 senders, 4 receivers, K=2: the 4 flows cover each receiver once.
        let pools = two(2, 4, false);
        let plan = PoolPlan::new(&pools, 6, 2, 1, false);
        let mut got: Vec<u32> = (0..2).flat_map(|s| plan.targets(s, 0)).collect();
        got.sort_unstable();
        assert_eq!(got, [2, 3, 4, 5]);
        assert_eq!(plan.layer_count(), 2);
        assert_eq!(plan.targets(2, 0).count(), 0, "receivers send nothing");
    }

    #[test]
    fn a_duplex_of_unequal_pools_idles_the_short_direction() {
        // a=2 receives from b's 4 senders in 1 layer at K=2; a's senders need 2.
        let pools = two(2, 4, true);
        let plan = PoolPlan::new(&pools, 6, 2, 3, false);
        assert_eq!(plan.layer_count(), 2);
        assert_eq!(plan.targets(3, 0).count(), 2);
        assert_eq!(plan.targets(3, 1).count(), 0);
        let filled = PoolPlan::new(&pools, 6, 2, 3, true);
        assert_eq!(
            filled.targets(3, 1).collect::<Vec<_>>(),
            filled.targets(3, 0).collect::<Vec<_>>()
        );
    }
}
