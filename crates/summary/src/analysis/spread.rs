//! Spread across flows: how evenly one direction's flows were served.
//!
//! This is the "mean and standard deviation" netperf users take of a fabric
//! test, computed on what mx measured instead of by awk over per-pair
//! outputs: per flow its delivered rate (requests that reached the receiver,
//! and replies that came back), then across flows the mean, the standard
//! deviation, the minimum, the median, the maximum and Jain's fairness index.
//!
//! The flows are the whole population of the run (not a sample of it), so the
//! standard deviation is the population's (divided by n). Jain's index is
//! (Σx)² / (n Σx²): 1 when every flow got the same rate, 1/n when one flow
//! got everything. A flow whose receiver wrote no rx rows has no forward
//! figure: it is left out of the forward spread and the count says so,
//! never counted as 0.

/// The spread of one figure across flows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Flows it is over.
    pub flows: usize,
    pub mean: f64,
    /// Population standard deviation.
    pub sd: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    /// Jain's fairness index, 1/n..=1; `None` when every flow read 0 (then
    /// fairness has no meaning: nothing was delivered to share).
    pub jain: Option<f64>,
}

impl Spread {
    /// The spread of `values` (one per flow); `None` for no flow.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let sum: f64 = values.iter().sum();
        let squares: f64 = values.iter().map(|v| v * v).sum();
        let mean = sum / n;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Some(Spread {
            flows: values.len(),
            mean,
            sd: variance.sqrt(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            median: mx_base::units::median(values)?,
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            jain: (squares > 0.0).then(|| (sum * sum / (n * squares)).min(1.0)),
        })
    }

    /// The same spread with every figure scaled by `k` (pps to bits per
    /// second: the index does not change with the unit).
    pub fn scaled(&self, k: f64) -> Spread {
        Spread {
            mean: self.mean * k,
            sd: self.sd * k,
            min: self.min * k,
            median: self.median * k,
            max: self.max * k,
            ..*self
        }
    }
}

/// A direction's flows, spread: requests delivered to the receivers and
/// replies back to the senders, in packets per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowSpread {
    /// Flows that sent in the span.
    pub flows: usize,
    /// Over the flows whose receiver counted what arrived (`flows` of them
    /// when every receiver reported); `None` when none did.
    pub delivered: Option<Spread>,
    pub back: Option<Spread>,
}

impl FlowSpread {
    /// The spread of the flows that sent in the span, each given as the
    /// requests per second that reached its receiver (`None`: its receiver
    /// did not count them) and the replies per second that came back.
    pub fn of(flows: impl Iterator<Item = (Option<f64>, f64)>) -> FlowSpread {
        let (mut delivered, mut back) = (Vec::new(), Vec::new());
        for (arrived, came_back) in flows {
            back.push(came_back);
            if let Some(arrived) = arrived {
                delivered.push(arrived);
            }
        }
        FlowSpread {
            flows: back.len(),
            delivered: Spread::of(&delivered),
            back: Spread::of(&back),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_flows_are_perfectly_fair() {
        let s = Spread::of(&[1000.0; 4]).unwrap();
        assert_eq!(
            (s.mean, s.sd, s.min, s.median, s.max),
            (1000.0, 0.0, 1000.0, 1000.0, 1000.0)
        );
        assert_eq!(s.jain, Some(1.0));
    }

    #[test]
    fn one_flow_taking_everything_is_one_over_n() {
        let s = Spread::of(&[0.0, 0.0, 0.0, 800.0]).unwrap();
        assert_eq!(s.jain, Some(0.25));
        assert_eq!(s.median, 0.0);
    }

    #[test]
    fn the_standard_deviation_is_the_populations() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population sd exactly 2.
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!((s.mean, s.sd, s.median), (5.0, 2.0, 4.5));
        // (40)^2 / (8 * 232)
        assert!((s.jain.unwrap() - 1600.0 / 1856.0).abs() < 1e-12);
    }

    #[test]
    fn nothing_delivered_has_no_fairness_and_no_flow_has_no_spread() {
        assert_eq!(Spread::of(&[0.0, 0.0]).unwrap().jain, None);
        assert_eq!(Spread::of(&[]), None);
    }
}
