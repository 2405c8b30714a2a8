//! The shapes `mx gen` draws: the `--peers K` k-regular shuffle and the `--dwell`
//! layers, both built as shifts on one seeded relabelling of the hosts.
//!
//! Host at position p of the relabelling (`relabel[p]` is its matrix index) sends,
//! for each shift s, to `relabel[(p + s) mod N]`. K distinct non-zero shifts on one
//! permutation give exactly K flows out and K in per host, no self-loops and no
//! repeated pair. The N-1 possible shifts together are the complete digraph, so
//! dealing them K at a time gives ceil((N-1)/K) edge-disjoint layers that measure
//! every ordered pair exactly once per cycle.

use super::cpython_random::PyRandom;

/// A seeded relabelling of the hosts plus the shifts that make edges on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShiftGraph {
    /// `relabel[p]` = matrix index of the host at position p.
    pub relabel: Vec<u32>,
    /// `position[h]` = position of matrix host h (the inverse of `relabel`).
    pub position: Vec<u32>,
}

impl ShiftGraph {
    fn from_relabel(relabel: Vec<u32>) -> ShiftGraph {
        let mut position = vec![0u32; relabel.len()];
        for (p, &h) in relabel.iter().enumerate() {
            position[h as usize] = p as u32;
        }
        ShiftGraph { relabel, position }
    }

    pub fn hosts(&self) -> usize {
        self.relabel.len()
    }

    /// The receiver of host `src`'s flow along shift `shift`.
    pub fn target(&self, src: u32, shift: u32) -> u32 {
        let n = self.relabel.len();
        let p = self.position[src as usize] as usize;
        self.relabel[(p + shift as usize) % n]
    }
}

/// The `--peers K` graph without `--dwell`: the relabelling and K shifts drawn with
/// `random.sample(range(1, N), K)` right after the relabelling's shuffle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KRegular {
    pub graph: ShiftGraph,
    pub shifts: Vec<u32>,
}

impl KRegular {
    pub fn new(hosts: usize, peers: usize, seed: i64) -> KRegular {
        assert!(peers >= 1 && peers < hosts, "peers must be in 1..N-1");
        let mut rng = PyRandom::new(seed);
        let graph = ShiftGraph::from_relabel(shuffled_hosts(&mut rng, hosts));
        let population: Vec<u32> = (1..hosts as u32).collect();
        let shifts = rng.sample(&population, peers);
        KRegular { graph, shifts }
    }

    /// Host `src`'s receivers, in shift order.
    pub fn targets(&self, src: u32) -> impl Iterator<Item = u32> + '_ {
        self.shifts.iter().map(move |&s| self.graph.target(src, s))
    }
}

/// The `--peers K --dwell T` rotation: the relabelling, then all N-1 shifts shuffled
/// and dealt K at a time into layers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerPlan {
    pub graph: ShiftGraph,
    /// The shifts of each layer. Without fill the last one holds the remainder
    /// R = (N-1) - K(L-1); with fill it is padded with the first K-R shifts.
    pub layers: Vec<Vec<u32>>,
    pub peers: usize,
    pub fill: bool,
}

impl LayerPlan {
    pub fn new(hosts: usize, peers: usize, seed: i64, fill: bool) -> LayerPlan {
        assert!(peers >= 1 && peers < hosts, "peers must be in 1..N-1");
        let mut rng = PyRandom::new(seed);
        let graph = ShiftGraph::from_relabel(shuffled_hosts(&mut rng, hosts));
        let mut shifts: Vec<u32> = (1..hosts as u32).collect();
        rng.shuffle(&mut shifts);
        let mut layers: Vec<Vec<u32>> = shifts.chunks(peers).map(<[u32]>::to_vec).collect();
        if fill && layers.len() > 1 {
            let last = layers.last_mut().expect("at least two layers");
            let short = peers - last.len();
            last.extend_from_slice(&shifts[..short]);
        }
        LayerPlan {
            graph,
            layers,
            peers,
            fill,
        }
    }

    /// L = ceil((N-1)/K), the number of layers N hosts at K peers deal into.
    pub fn layer_count(hosts: usize, peers: usize) -> usize {
        (hosts - 1).div_ceil(peers)
    }

    /// Host `src`'s receivers in layer `layer`, in shift order.
    pub fn targets(&self, src: u32, layer: usize) -> impl Iterator<Item = u32> + '_ {
        self.layers[layer]
            .iter()
            .map(move |&s| self.graph.target(src, s))
    }

    /// Shifts the last layer holds before any fill: (N-1) - K(L-1).
    pub fn remainder(&self) -> usize {
        let n = self.graph.hosts();
        (n - 1) - self.peers * (self.layers.len() - 1)
    }
}

/// The layers of a layered matrix: shifts on the whole mesh, or a
/// pool-to-pool plan ([`super::pools`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layers {
    Mesh(LayerPlan),
    Pools(super::pools::PoolPlan),
}

impl Layers {
    pub fn count(&self) -> usize {
        match self {
            Layers::Mesh(plan) => plan.layers.len(),
            Layers::Pools(plan) => plan.layer_count(),
        }
    }

    /// Host `src`'s receivers in `layer`, without allocating.
    pub fn targets(&self, src: u32, layer: usize) -> impl Iterator<Item = u32> + '_ {
        let (mesh, pools) = match self {
            Layers::Mesh(plan) => (Some(plan.targets(src, layer)), None),
            Layers::Pools(plan) => (None, Some(plan.targets(src, layer))),
        };
        mesh.into_iter()
            .flatten()
            .chain(pools.into_iter().flatten())
    }
}

/// `shuffle(list(range(N)))`: the relabelling, always the first use of the seed.
fn shuffled_hosts(rng: &mut PyRandom, hosts: usize) -> Vec<u32> {
    let mut relabel: Vec<u32> = (0..hosts as u32).collect();
    rng.shuffle(&mut relabel);
    relabel
}

#[cfg(test)]
mod tests {
    use super::*;

    // Draws of the original tool (CPython's `random.Random`): ours must repeat
    // them exactly.
    #[test]
    fn sparse_vector_n11_k3_seed5() {
        let g = KRegular::new(11, 3, 5);
        assert_eq!(g.graph.relabel, [10, 2, 8, 7, 1, 3, 6, 0, 5, 4, 9]);
        assert_eq!(g.shifts, [6, 8, 4]);
    }

    #[test]
    fn layer_vectors() {
        let p = LayerPlan::new(11, 3, 5, false);
        assert_eq!(
            p.layers,
            [vec![7, 3, 10], vec![2, 1, 5], vec![9, 4, 8], vec![6]]
        );
        assert_eq!(p.remainder(), 1);
        let filled = LayerPlan::new(11, 3, 5, true);
        assert_eq!(filled.layers[3], [6, 7, 3]);
        assert_eq!(filled.layers[..3], p.layers[..3]);

        let p = LayerPlan::new(5, 2, 7, false);
        assert_eq!(p.graph.relabel, [4, 0, 3, 1, 2]);
        assert_eq!(p.layers, [vec![2, 4], vec![3, 1]]);

        let p = LayerPlan::new(4, 1, 3, false);
        assert_eq!(p.graph.relabel, [3, 0, 2, 1]);
        assert_eq!(p.layers, [vec![1], vec![3], vec![2]]);
    }

    #[test]
    fn the_sparse_graph_and_layer_zero_differ_for_one_seed() {
        // Different draws follow the same relabelling.
        let sparse = KRegular::new(11, 3, 5);
        let layered = LayerPlan::new(11, 3, 5, false);
        assert_eq!(sparse.graph, layered.graph);
        assert_ne!(sparse.shifts, layered.layers[0]);
    }

    #[test]
    fn targets_follow_the_position_formula() {
        // N=5, K=2, seed 7: relabel [4,0,3,1,2]; host 4 is at position 0, and layer 0
        // holds shifts [2,4]: 4 sends to relabel[2]=3 and relabel[4]=2.
        let p = LayerPlan::new(5, 2, 7, false);
        assert_eq!(p.targets(4, 0).collect::<Vec<_>>(), [3, 2]);
        assert_eq!(LayerPlan::layer_count(5, 2), 2);
        assert_eq!(LayerPlan::layer_count(11, 3), 4);
    }
}
