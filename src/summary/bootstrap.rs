//! Bootstrap intervals: how far a difference between two runs could move
//! from noise alone, taken from the runs themselves.
//!
//! A run holds many intervals (and many flows); resampling them with
//! replacement and recomputing the figure gives its sampling spread without
//! assuming a distribution. Two shapes:
//!
//! - [`two_samples`]: the runs' intervals resampled independently (the
//!   fleet's figures: interval 7 of run A has nothing to do with interval 7
//!   of run B);
//! - [`paired`]: the same flows in both runs, resampled together (a host's
//!   or a pool's figures: flow a -> d before is paired with a -> d after).
//!
//! The interval is the 2.5th to 97.5th percentile of the resampled change.
//! The generator is seeded: the same two runs give the same interval every
//! time, so a verdict does not flicker between two invocations.

/// Resamples per interval: the 95% bounds move by well under a tenth of
/// their width between seeds at this count.
pub const RESAMPLES: usize = 2000;

/// The fewest items (intervals, flows) a side needs for an interval: the
/// bootstrap of fewer than this resamples a handful of values and reads a
/// certainty it does not have.
pub const MIN_ITEMS: usize = 5;

/// The seed of every bootstrap: runs, not dice, should decide a verdict.
const SEED: u64 = 0x6d78_636f_6d70;

/// A change and its 95% bootstrap interval, in the change's own unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub change: f64,
    pub low: f64,
    pub high: f64,
}

impl Change {
    /// Whether the interval holds no change at all.
    pub fn spans_zero(&self) -> bool {
        self.low <= 0.0 && self.high >= 0.0
    }
}

/// The change from `a` to `b` of a figure `stat` computes over a sample of
/// indices, `change(a_figure, b_figure)`; both samples resampled
/// independently. `None` when the figure or the change is undefined on the
/// whole runs (nothing measured), or a side has fewer than [`MIN_ITEMS`].
pub fn two_samples(
    a: usize,
    b: usize,
    stat_a: impl Fn(&[usize]) -> Option<f64>,
    stat_b: impl Fn(&[usize]) -> Option<f64>,
    change: impl Fn(f64, f64) -> Option<f64>,
) -> Option<Change> {
    if a < MIN_ITEMS || b < MIN_ITEMS {
        return None;
    }
    let all = |n: usize| (0..n).collect::<Vec<usize>>();
    let observed = change(stat_a(&all(a))?, stat_b(&all(b))?)?;
    let mut random = rand_mt::Mt64::new(SEED);
    let (mut ia, mut ib) = (vec![0; a], vec![0; b]);
    let mut changes = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        resample(&mut random, &mut ia);
        resample(&mut random, &mut ib);
        if let (Some(x), Some(y)) = (stat_a(&ia), stat_b(&ib))
            && let Some(c) = change(x, y)
        {
            changes.push(c);
        }
    }
    bounds(observed, changes)
}

/// The change of a figure over `n` paired items (flows measured in both
/// runs): `stat(indices)` gives (figure in a, figure in b) over those items;
/// `None` as [`two_samples`].
pub fn paired(
    n: usize,
    stat: impl Fn(&[usize]) -> Option<(f64, f64)>,
    change: impl Fn(f64, f64) -> Option<f64>,
) -> Option<Change> {
    if n < MIN_ITEMS {
        return None;
    }
    let all: Vec<usize> = (0..n).collect();
    let (a, b) = stat(&all)?;
    let observed = change(a, b)?;
    let mut random = rand_mt::Mt64::new(SEED);
    let mut idx = vec![0; n];
    let mut changes = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        resample(&mut random, &mut idx);
        if let Some((a, b)) = stat(&idx)
            && let Some(c) = change(a, b)
        {
            changes.push(c);
        }
    }
    bounds(observed, changes)
}

/// Fills `idx` with indices drawn uniformly, with replacement, below its length.
fn resample(random: &mut rand_mt::Mt64, idx: &mut [usize]) {
    let n = idx.len() as u64;
    for slot in idx.iter_mut() {
        // Multiply-shift: uniform enough for n far below 2^32.
        *slot = ((u128::from(random.next_u64()) * u128::from(n)) >> 64) as usize;
    }
}

fn bounds(change: f64, mut changes: Vec<f64>) -> Option<Change> {
    if changes.is_empty() {
        return None;
    }
    changes.sort_by(f64::total_cmp);
    let at = |q: f64| changes[((changes.len() - 1) as f64 * q).round() as usize];
    Some(Change {
        change,
        low: at(0.025),
        high: at(0.975),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(values: &[f64], idx: &[usize]) -> Option<f64> {
        (!idx.is_empty()).then(|| idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len() as f64)
    }

    #[test]
    fn a_shift_far_beyond_the_noise_is_outside_the_interval() {
        // Two runs of 30 intervals, the second 5 higher, noise +-1.
        let a: Vec<f64> = (0..30).map(|i| 100.0 + f64::from(i % 3) - 1.0).collect();
        let b: Vec<f64> = a.iter().map(|v| v + 5.0).collect();
        let c = two_samples(30, 30, |i| mean(&a, i), |i| mean(&b, i), |x, y| Some(y - x)).unwrap();
        assert!((c.change - 5.0).abs() < 1e-9);
        assert!(!c.spans_zero(), "{c:?}");
        assert!(c.low > 4.0 && c.high < 6.0, "{c:?}");
    }

    #[test]
    fn the_same_noise_twice_spans_zero() {
        let a: Vec<f64> = (0..30).map(|i| 100.0 + f64::from((i * 7) % 11)).collect();
        let b: Vec<f64> = (0..30).map(|i| 100.0 + f64::from((i * 5) % 11)).collect();
        let c = two_samples(30, 30, |i| mean(&a, i), |i| mean(&b, i), |x, y| Some(y - x)).unwrap();
        assert!(c.spans_zero(), "{c:?}");
    }

    #[test]
    fn pairing_removes_what_the_flows_share() {
        // Flows differ a lot from each other, but each moved by exactly +1:
        // paired, the change is certain.
        let a: Vec<f64> = (0..20).map(|i| f64::from(i) * 100.0).collect();
        let stat = |idx: &[usize]| {
            let sa: f64 = idx.iter().map(|&i| a[i]).sum();
            let sb: f64 = idx.iter().map(|&i| a[i] + 1.0).sum();
            Some((sa / idx.len() as f64, sb / idx.len() as f64))
        };
        let c = paired(20, stat, |x, y| Some(y - x)).unwrap();
        assert_eq!((c.change, c.low, c.high), (1.0, 1.0, 1.0));
    }

    #[test]
    fn too_few_items_give_no_interval() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            two_samples(4, 4, |i| mean(&a, i), |i| mean(&a, i), |x, y| Some(y - x)),
            None
        );
        assert_eq!(paired(4, |_| Some((1.0, 2.0)), |x, y| Some(y - x)), None);
    }

    #[test]
    fn the_same_runs_give_the_same_interval() {
        let a: Vec<f64> = (0..10).map(f64::from).collect();
        let run = || two_samples(10, 10, |i| mean(&a, i), |i| mean(&a, i), |x, y| Some(y - x));
        assert_eq!(run(), run());
    }
}
