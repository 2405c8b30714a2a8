//! Round-trip times as Prometheus histograms: fixed exponential buckets,
//! filled an interval at a time from the reporter's merged histograms (one
//! add per non-empty bucket, never one per packet).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

use mx_report::rtt::MergedRtt;

/// The host's buckets, in seconds: 16 us doubling to 4.2 s (19 bounds, and
/// +Inf). Prometheus cannot merge histograms of other bounds, so these are
/// fixed for every agent and every version.
pub(crate) const HOST_BOUNDS: [f64; 19] = bounds::<19>(1);

/// A peer's buckets: every other host bound, 16 us quadrupling to 4.2 s (10
/// bounds, and +Inf). A peer's histogram costs 13 series (with its sum and
/// count), not 22, which bounds a fleet's count (docs/always-on.md).
pub(crate) const PEER_BOUNDS: [f64; 10] = bounds::<10>(2);

/// `N` bounds from 16 us, each `2^doublings` times the one before.
const fn bounds<const N: usize>(doublings: u32) -> [f64; N] {
    let mut out = [0.0; N];
    let mut i = 0;
    while i < N {
        out[i] = (16u64 << (i as u32 * doublings)) as f64 / 1e6;
        i += 1;
    }
    out
}

/// A histogram of round trips over fixed bounds (seconds), counting since
/// the agent started. Clones share the counts (a handle, as a counter's).
#[derive(Debug, Clone)]
pub(crate) struct RttHistogram(Arc<Counts>);

#[derive(Debug)]
struct Counts {
    bounds: &'static [f64],
    /// One count per bound, then the +Inf bucket (not cumulative).
    counts: Vec<AtomicU64>,
    /// Sum of the round trips, in nanoseconds (each taken at its
    /// histogram bucket's value: within 1% of the true sum).
    sum_ns: AtomicU64,
    count: AtomicU64,
}

impl RttHistogram {
    pub fn new(bounds: &'static [f64]) -> RttHistogram {
        RttHistogram(Arc::new(Counts {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }))
    }

    pub fn host() -> RttHistogram {
        RttHistogram::new(&HOST_BOUNDS)
    }

    pub fn peer() -> RttHistogram {
        RttHistogram::new(&PEER_BOUNDS)
    }

    /// Adds an interval's round trips.
    pub fn add(&self, rtt: &MergedRtt) {
        let h = &self.0;
        let (mut sum, mut count) = (0u64, 0u64);
        rtt.for_each_bucket(|ns, n| {
            let seconds = ns as f64 / 1e9;
            let at = h.bounds.partition_point(|&bound| bound < seconds);
            h.counts[at].fetch_add(n, Ordering::Relaxed);
            sum = sum.saturating_add(ns.saturating_mul(n));
            count += n;
        });
        h.sum_ns.fetch_add(sum, Ordering::Relaxed);
        h.count.fetch_add(count, Ordering::Relaxed);
    }
}

/// A peer's: what a family of peers makes for each new peer.
impl Default for RttHistogram {
    fn default() -> RttHistogram {
        RttHistogram::peer()
    }
}

impl TypedMetric for RttHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for RttHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let h = &self.0;
        let buckets: Vec<(f64, u64)> = h
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(&h.counts)
            .map(|(bound, n)| (bound, n.load(Ordering::Relaxed)))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(
            h.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
            h.count.load(Ordering::Relaxed),
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_run_from_16_us_to_seconds_and_a_peer_s_are_every_other_host_s() {
        assert_eq!(HOST_BOUNDS[0], 16e-6);
        assert_eq!(HOST_BOUNDS[1], 32e-6);
        assert!((HOST_BOUNDS[18] - 4.194304).abs() < 1e-9);
        for (i, bound) in PEER_BOUNDS.iter().enumerate() {
            assert_eq!(*bound, HOST_BOUNDS[2 * i]);
        }
    }

    #[test]
    fn an_interval_s_round_trips_land_in_the_bucket_at_or_above_them() {
        let h = RttHistogram::host();
        // 10 at 20 us (<= 32 us), 5 at 1 ms (<= 1.024 ms), 1 at 100 s (+Inf).
        h.add(&MergedRtt::of_buckets(&[
            (20_000, 10),
            (1_000_000, 5),
            (100_000_000_000, 1),
        ]));
        let n = |i: usize| h.0.counts[i].load(Ordering::Relaxed);
        assert_eq!((n(0), n(1)), (0, 10));
        assert_eq!(n(HOST_BOUNDS.partition_point(|&b| b < 1e-3)), 5);
        assert_eq!(n(HOST_BOUNDS.len()), 1);
        assert_eq!(h.0.count.load(Ordering::Relaxed), 16);
        // Each at its bucket's value, within 1%.
        let sum = h.0.sum_ns.load(Ordering::Relaxed) as f64;
        let want = 10.0 * 20e3 + 5.0 * 1e6 + 100e9;
        assert!((sum / want - 1.0).abs() < 0.01, "{sum} vs {want}");
    }
}
