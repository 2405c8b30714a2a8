//! Round-trip times: a log-linear histogram with about 1% relative error.
//!
//! HdrHistogram with two significant digits: 128 linear sub-buckets per power
//! of two, so a reported percentile is within 0.8% of the true value (the
//! original's quarter-octave buckets read up to 25% high). Values are
//! nanoseconds from 1 ns to 100 s; slower replies are clamped to 100 s.
//! Workers record into a `u32`-counted histogram per flow; each interval they
//! hand over only the non-empty buckets ([`Compact`]), which the reporter merges
//! exactly, per peer and per host.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

const LOWEST_NS: u64 = 1;
const HIGHEST_NS: u64 = 100_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 2;

/// The non-empty buckets of a histogram: (a value in the bucket, count).
pub type Compact = Vec<(u64, u64)>;

/// A worker's per-flow histogram for the current interval.
pub struct FlowRtt(Histogram<u32>);

impl Default for FlowRtt {
    fn default() -> Self {
        FlowRtt(
            Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
                .expect("valid histogram bounds"),
        )
    }
}

impl FlowRtt {
    #[inline]
    pub fn record(&mut self, rtt_ns: u64) {
        self.0.saturating_record(rtt_ns.max(LOWEST_NS));
    }

    /// Records `count` round trips of `rtt_ns` each.
    #[inline]
    pub fn record_n(&mut self, rtt_ns: u64, count: u64) {
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        self.0.saturating_record_n(rtt_ns.max(LOWEST_NS), count);
    }

    /// The interval's buckets, and an empty histogram for the next one.
    pub fn take(&mut self) -> Compact {
        if self.0.is_empty() {
            // (Nothing to scan the ~4,000 buckets for.)
            return Compact::new();
        }
        let compact = self
            .0
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), u64::from(v.count_at_value())))
            .collect();
        self.0.reset();
        compact
    }
}

/// Histograms merged across flows, workers and streams.
#[derive(Clone)]
pub struct MergedRtt(Histogram<u64>);

impl std::fmt::Debug for MergedRtt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MergedRtt({} samples)", self.0.len())
    }
}

impl Default for MergedRtt {
    fn default() -> Self {
        MergedRtt(
            Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
                .expect("valid histogram bounds"),
        )
    }
}

impl MergedRtt {
    pub fn add(&mut self, compact: &Compact) {
        for &(value, count) in compact {
            self.0.saturating_record_n(value, count);
        }
    }

    pub fn merge(&mut self, other: &MergedRtt) {
        self.0.add(&other.0).expect("same bounds");
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The report's `rtt_hist` text: `ns:count` for each non-empty bucket,
    /// `;`-separated (`None` when empty). Summarize merges these exactly.
    pub fn encode(&self) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let mut text = String::new();
        for v in self.0.iter_recorded() {
            if !text.is_empty() {
                text.push(';');
            }
            let _ = write!(text, "{}:{}", v.value_iterated_to(), v.count_at_value());
        }
        Some(text)
    }

    /// Adds an `rtt_hist` text to this histogram; `Err` names what is malformed.
    pub fn add_encoded(&mut self, text: &str) -> Result<(), String> {
        for_each_bucket(text, |value, count| {
            self.0
                .saturating_record_n(value.clamp(LOWEST_NS, HIGHEST_NS), count);
        })
    }

    /// A histogram of decoded buckets, as [`decode_into`] gives them.
    pub fn of_buckets(buckets: &[(u64, u64)]) -> MergedRtt {
        let mut merged = MergedRtt::default();
        for &(value, count) in buckets {
            merged
                .0
                .saturating_record_n(value.clamp(LOWEST_NS, HIGHEST_NS), count);
        }
        merged
    }

    /// The distribution as (microseconds, fraction of samples at or below),
    /// one point per non-empty bucket, in order (empty when nothing was
    /// recorded): the CDF a picture draws.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let total = self.0.len() as f64;
        let mut below = 0u64;
        self.0
            .iter_recorded()
            .map(|v| {
                below += v.count_at_value();
                (v.value_iterated_to() as f64 / 1000.0, below as f64 / total)
            })
            .collect()
    }

    /// Calls `each(ns, count)` for every non-empty bucket, in order (the
    /// bucket's highest value, as [`MergedRtt::encode`] writes it).
    pub fn for_each_bucket(&self, mut each: impl FnMut(u64, u64)) {
        for v in self.0.iter_recorded() {
            each(v.value_iterated_to(), v.count_at_value());
        }
    }

    /// The `q` quantile (0..=1) in microseconds; `None` when nothing was recorded.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        (!self.0.is_empty()).then(|| self.0.value_at_quantile(q) as f64 / 1000.0)
    }
}

/// Calls `each(ns, count)` for the buckets of an `rtt_hist` text; `Err`
/// names the first malformed one (the buckets before it were given).
fn for_each_bucket(text: &str, mut each: impl FnMut(u64, u64)) -> Result<(), String> {
    for pair in text.split(';').filter(|p| !p.is_empty()) {
        let parsed = pair
            .split_once(':')
            .and_then(|(v, c)| Some((v.parse::<u64>().ok()?, c.parse::<u64>().ok()?)));
        let (value, count) = parsed.ok_or_else(|| format!("bad histogram bucket '{pair}'"))?;
        each(value, count);
    }
    Ok(())
}

/// Appends the buckets of an `rtt_hist` text to `buckets`, unmerged.
pub fn decode_into(text: &str, buckets: &mut Vec<(u64, u64)>) -> Result<(), String> {
    for_each_bucket(text, |value, count| buckets.push((value, count)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_within_one_percent() {
        let mut flow = FlowRtt::default();
        // 1..=10000 microseconds, one sample each.
        for us in 1..=10_000u64 {
            flow.record(us * 1000);
        }
        let mut merged = MergedRtt::default();
        merged.add(&flow.take());
        assert_eq!(merged.count(), 10_000);
        for (q, truth) in [(0.5, 5000.0), (0.99, 9900.0), (0.999, 9990.0)] {
            let got = merged.quantile_us(q).unwrap();
            assert!((got - truth).abs() / truth < 0.01, "q{q}: {got} vs {truth}");
        }
        // take() leaves the flow's histogram empty for the next interval.
        assert!(flow.take().is_empty());
        assert_eq!(MergedRtt::default().quantile_us(0.5), None);
    }

    #[test]
    fn the_report_encoding_round_trips_exactly() {
        let mut flow = FlowRtt::default();
        for ns in [15_000u64, 15_100, 15_100, 250_000, 9_000_000] {
            flow.record(ns);
        }
        let mut merged = MergedRtt::default();
        merged.add(&flow.take());
        let text = merged.encode().unwrap();
        assert!(!text.contains(','), "fits in a CSV cell unquoted");
        let mut back = MergedRtt::default();
        back.add_encoded(&text).unwrap();
        assert_eq!(back.encode().unwrap(), text);
        assert_eq!(back.count(), 5);
        assert!(back.add_encoded("12:x").is_err());
        assert_eq!(MergedRtt::default().encode(), None);
    }

    #[test]
    fn the_cdf_climbs_to_one_through_every_bucket() {
        let mut flow = FlowRtt::default();
        for ns in [10_000u64, 10_000, 20_000, 40_000] {
            flow.record(ns);
        }
        let mut merged = MergedRtt::default();
        merged.add(&flow.take());
        let cdf = merged.cdf();
        assert_eq!(cdf.len(), 3);
        assert_eq!(
            cdf.iter().map(|p| p.1).collect::<Vec<_>>(),
            [0.5, 0.75, 1.0]
        );
        assert!((cdf[0].0 - 10.0).abs() < 0.1 && (cdf[2].0 - 40.0).abs() < 0.4);
        assert!(MergedRtt::default().cdf().is_empty());
    }

    #[test]
    fn merging_is_exact() {
        let (mut a, mut b) = (FlowRtt::default(), FlowRtt::default());
        for _ in 0..99 {
            a.record(20_000);
        }
        b.record(5_000_000);
        let mut merged = MergedRtt::default();
        merged.add(&a.take());
        merged.add(&b.take());
        let p50 = merged.quantile_us(0.5).unwrap();
        let p999 = merged.quantile_us(0.999).unwrap();
        assert!((p50 - 20.0).abs() < 0.2, "{p50}");
        assert!((p999 - 5000.0).abs() < 50.0, "{p999}");
    }
}
