//! The layer schedule: which flows a host holds at a given wall-clock moment.
//!
//! A layered matrix has no control channel. Every agent derives the same layers
//! from the seed and switches on its own clock: `layer = floor((t + 0.01) / dwell)
//! mod L`, t in Unix seconds, as the original tool computes it, so agents of
//! both switch together. The 10 ms nudge makes a timer that
//! fires a hair early on a layer boundary land in the new layer, not the old one.
//! In every layer a host sends at its row's rate (the first cell of its grid row).

use super::shape::Layers;
use super::{Cell, Matrix};

/// Slack added to the clock before dividing by the dwell, in seconds.
const BOUNDARY_SLACK_SECONDS: f64 = 0.01;

/// The layer in force at Unix time `unix_seconds`, for `layers` layers of `dwell` s.
pub fn layer_at(unix_seconds: f64, dwell: f64, layers: usize) -> usize {
    let slot = ((unix_seconds + BOUNDARY_SLACK_SECONDS) / dwell).floor();
    slot.rem_euclid(layers as f64) as usize
}

/// A host's flows at one moment, and the layer they belong to (`None` for a
/// matrix that does not rotate).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerFlows {
    pub layer: Option<usize>,
    pub flows: Vec<Cell>,
}

/// The schedule of one matrix: fixed, or rotating through derived layers.
pub struct Schedule<'m> {
    matrix: &'m Matrix,
    rotation: Option<(Layers, f64)>,
}

impl<'m> Schedule<'m> {
    pub fn new(matrix: &'m Matrix) -> Schedule<'m> {
        let rotation = matrix
            .layer_plan()
            .zip(matrix.config.rotation.map(|r| r.dwell));
        Schedule { matrix, rotation }
    }

    pub fn layer_count(&self) -> usize {
        self.rotation.as_ref().map_or(1, |(plan, _)| plan.count())
    }

    /// Seconds per full rotation, for a layered matrix.
    pub fn cycle_seconds(&self) -> Option<f64> {
        self.rotation
            .as_ref()
            .map(|(plan, dwell)| plan.count() as f64 * dwell)
    }

    /// The layer in force at `unix_seconds` (`None` when the matrix does not rotate).
    pub fn layer_at(&self, unix_seconds: f64) -> Option<usize> {
        self.rotation
            .as_ref()
            .map(|(plan, dwell)| layer_at(unix_seconds, *dwell, plan.count()))
    }

    /// Host `src`'s flows in `layer`, in the layer's shift order (unsorted); no
    /// allocation, for callers that walk every layer (`mx check`).
    pub fn layer_flows(&self, src: u32, layer: usize) -> impl Iterator<Item = Cell> + '_ {
        let (fixed, rotating) = match &self.rotation {
            None => (self.matrix.row(src), None),
            Some((plan, _)) => (
                &[][..],
                self.matrix
                    .row_rate(src)
                    .map(|rate| plan.targets(src, layer).map(move |dst| Cell { dst, rate })),
            ),
        };
        fixed.iter().copied().chain(rotating.into_iter().flatten())
    }

    /// Host `src`'s flows in `layer`, sorted by receiver.
    pub fn flows_in_layer(&self, src: u32, layer: usize) -> Vec<Cell> {
        let mut flows: Vec<Cell> = self.layer_flows(src, layer).collect();
        flows.sort_unstable_by_key(|c| c.dst);
        flows
    }

    /// Host `src`'s flows at wall-clock time `unix_seconds`.
    pub fn at(&self, src: u32, unix_seconds: f64) -> LayerFlows {
        match self.layer_at(unix_seconds) {
            None => LayerFlows {
                layer: None,
                flows: self.matrix.row(src).to_vec(),
            },
            Some(layer) => LayerFlows {
                layer: Some(layer),
                flows: self.flows_in_layer(src, layer),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_at_uses_the_wall_clock_formula() {
        // 4 layers of 15 s: a 60 s cycle.
        assert_eq!(layer_at(0.0, 15.0, 4), 0);
        assert_eq!(layer_at(14.98, 15.0, 4), 0);
        // A timer firing 5 ms before the boundary already reads the new layer.
        assert_eq!(layer_at(14.995, 15.0, 4), 1);
        assert_eq!(layer_at(59.0, 15.0, 4), 3);
        assert_eq!(layer_at(60.0, 15.0, 4), 0);
        assert_eq!(layer_at(1_796_003_022.0, 15.0, 4), (1_796_003_022 / 15) % 4);
    }
}
