//! Intervals of a change: how far a difference between two runs could move
//! from noise alone, taken from the runs themselves.
//!
//! A run holds several units, intervals or flows, and the spread of a
//! figure between its units is its noise. Nothing here counts packets as
//! independent draws (a binomial): losses come in bursts, and a burst that
//! a count would read as thousands of separate pieces of evidence lands in
//! one interval, or one flow, and shows as that unit's spread. Two shapes:
//!
//! - [`two_samples`]: the runs' intervals taken independently (the fleet's
//!   figures: interval 7 of run A has nothing to do with interval 7 of run
//!   B, and every interval holds the same flows);
//! - [`paired`]: the same flows in both runs, taken together (a host's or a
//!   pool's figures: flow a -> d before is paired with a -> d after).
//!
//! The interval is the wider of two:
//!
//! - the bootstrap: the units resampled with replacement, the 2.5th to
//!   97.5th percentile of the resampled change (no distribution assumed);
//! - Student's t on the jackknife's standard error (each unit left out in
//!   turn), below [`STUDENT_BELOW`] units: from a handful of units the
//!   bootstrap only reshuffles the few values it has, and reads a certainty
//!   it does not have, where t pays for each unit missing (12.7 standard
//!   errors either side from 2 units, 3.2 from 4, 2.1 from 20).
//!
//! So two units a side give an interval (two are the fewest with a spread),
//! and a few units give a wide one. The generator is seeded: the same two
//! runs give the same interval every time, so a verdict does not flicker
//! between two invocations.

/// Resamples per interval: the 95% bounds move by well under a tenth of
/// their width between seeds at this count.
pub(crate) const RESAMPLES: usize = 2000;

/// The fewest units (intervals, flows) a side needs for an interval: one
/// unit has no spread to tell noise by.
pub const MIN_ITEMS: usize = 2;

/// From this many units a side up, Student's t is not taken: the bootstrap's
/// interval is within a few percent as wide (t at 97.5% is 2.05 on 29
/// degrees of freedom, the normal's 1.96), and the jackknife costs a figure
/// per unit left out, a million for a pool of a million flows.
pub const STUDENT_BELOW: usize = 30;

/// The fewest units the bootstrap is trusted with alone, when t cannot be
/// had (a unit left out leaves the figure undefined: the only flow with an
/// RTT, say).
const BOOTSTRAP_ALONE: usize = 5;

/// The seed of every bootstrap: runs, not dice, should decide a verdict.
const SEED: u64 = 0x6d78_636f_6d70;

/// A change and its 95% interval, in the change's own unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub change: f64,
    pub low: f64,
    pub high: f64,
}

impl Change {
    /// Whether the interval holds no change at all.
    pub(crate) fn spans_zero(&self) -> bool {
        self.low <= 0.0 && self.high >= 0.0
    }
}

/// The change from `a` to `b` of a figure `stat` computes over a sample of
/// indices, `change(a_figure, b_figure)`; the two runs' units taken
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
    let (whole_a, whole_b) = (stat_a(&all(a))?, stat_b(&all(b))?);
    let observed = change(whole_a, whole_b)?;
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
    let student = (a.min(b) < STUDENT_BELOW)
        .then(|| {
            // Each run's share of the change's variance, the other run
            // held at its whole figure.
            let va = jackknife(a, |idx| change(stat_a(idx)?, whole_b))?;
            let vb = jackknife(b, |idx| change(whole_a, stat_b(idx)?))?;
            Some(student_t(observed, va + vb, welch_df((va, a), (vb, b))))
        })
        .flatten();
    widest(observed, bounds(observed, changes), student, a.min(b))
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
    let changed = |idx: &[usize]| {
        let (a, b) = stat(idx)?;
        change(a, b)
    };
    let observed = changed(&all(n))?;
    let mut random = rand_mt::Mt64::new(SEED);
    let mut idx = vec![0; n];
    let mut changes = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        resample(&mut random, &mut idx);
        if let Some(c) = changed(&idx) {
            changes.push(c);
        }
    }
    let student = (n < STUDENT_BELOW)
        .then(|| Some(student_t(observed, jackknife(n, changed)?, (n - 1) as f64)))
        .flatten();
    widest(observed, bounds(observed, changes), student, n)
}

fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// Fills `idx` with indices drawn uniformly, with replacement, below its length.
fn resample(random: &mut rand_mt::Mt64, idx: &mut [usize]) {
    let n = idx.len() as u64;
    for slot in idx.iter_mut() {
        // Multiply-shift: uniform enough for n far below 2^32.
        *slot = ((u128::from(random.next_u64()) * u128::from(n)) >> 64) as usize;
    }
}

/// The bootstrap's interval: the 2.5th and 97.5th percentiles of the
/// resampled changes.
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

/// The jackknife's variance of `value` over `n` units: the value with each
/// unit left out in turn, their spread times (n - 1) / n. `None` when a
/// unit left out leaves it undefined.
fn jackknife(n: usize, value: impl Fn(&[usize]) -> Option<f64>) -> Option<f64> {
    let mut rest = Vec::with_capacity(n);
    let mut values = Vec::with_capacity(n);
    for out in 0..n {
        rest.clear();
        rest.extend((0..n).filter(|&i| i != out));
        values.push(value(&rest)?);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let squares: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
    Some(squares * (n - 1) as f64 / n as f64)
}

/// Welch and Satterthwaite's degrees of freedom of a sum of two variances,
/// each (variance, units it came from).
fn welch_df((va, na): (f64, usize), (vb, nb): (f64, usize)) -> f64 {
    let parts = va * va / (na - 1) as f64 + vb * vb / (nb - 1) as f64;
    if parts > 0.0 {
        (va + vb).powi(2) / parts
    } else {
        // No spread at all: the interval has no width, whatever t is.
        1.0
    }
}

/// The 95% interval of `change` from its variance, with Student's t on
/// `df` degrees of freedom.
fn student_t(change: f64, variance: f64, df: f64) -> Change {
    let half = t975(df) * variance.max(0.0).sqrt();
    Change {
        change,
        low: change - half,
        high: change + half,
    }
}

/// Student's t at 97.5% on `df` degrees of freedom, rounded down (fewer
/// is wider).
fn t975(df: f64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let df = df.floor().max(1.0);
    if df <= TABLE.len() as f64 {
        return TABLE[df as usize - 1];
    }
    // Cornish and Fisher's expansion about the normal's 97.5% point: within
    // 0.001 of the table's value at 30.
    let z: f64 = 1.959_964;
    z + (z.powi(3) + z) / (4.0 * df)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * df * df)
}

/// The wider of the bootstrap's interval and Student's; the bootstrap's
/// alone only from [`BOOTSTRAP_ALONE`] units up.
fn widest(
    change: f64,
    bootstrap: Option<Change>,
    student: Option<Change>,
    units: usize,
) -> Option<Change> {
    match (bootstrap, student) {
        (Some(b), Some(t)) => Some(Change {
            change,
            low: b.low.min(t.low),
            high: b.high.max(t.high),
        }),
        (None, Some(t)) => Some(t),
        (Some(b), None) => (units >= BOOTSTRAP_ALONE).then_some(b),
        (None, None) => None,
    }
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
    fn one_item_gives_no_interval() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            two_samples(1, 4, |i| mean(&a, i), |i| mean(&a, i), |x, y| Some(y - x)),
            None
        );
        assert_eq!(paired(1, |_| Some((1.0, 2.0)), |x, y| Some(y - x)), None);
    }

    /// Loss in points over `flows` paired flows, each (sent, lost before,
    /// lost after).
    fn paired_loss(flows: &[(f64, f64, f64)]) -> Option<Change> {
        let stat = |idx: &[usize]| {
            let sent: f64 = idx.iter().map(|&i| flows[i].0).sum();
            let before: f64 = idx.iter().map(|&i| flows[i].1).sum();
            let after: f64 = idx.iter().map(|&i| flows[i].2).sum();
            Some((before / sent * 100.0, after / sent * 100.0))
        };
        paired(flows.len(), stat, |x, y| Some(y - x))
    }

    #[test]
    fn three_flows_that_all_moved_are_judged() {
        // A host sending 3 flows of 100k requests (5 kpps for 20 s), each
        // losing 5% more after: a bootstrap alone wanted 5 flows; t on 2
        // degrees of freedom judges them, as their changes agree.
        let c = paired_loss(&[
            (100e3, 10.0, 5_010.0),
            (100e3, 3.0, 4_980.0),
            (100e3, 0.0, 5_040.0),
        ])
        .unwrap();
        assert!(!c.spans_zero(), "{c:?}");
        assert!(c.low > 4.5 && c.high < 5.6, "{c:?}");
    }

    #[test]
    fn one_flow_of_three_that_moved_is_not_the_host() {
        // The flow to one sick peer lost 5%, its other two nothing: the
        // host's flows did not move as one.
        let c =
            paired_loss(&[(100e3, 0.0, 5_000.0), (100e3, 0.0, 2.0), (100e3, 1.0, 0.0)]).unwrap();
        assert!(c.spans_zero(), "{c:?}");
    }

    #[test]
    fn a_few_units_pay_for_their_fewness() {
        // Four intervals a side, the same +-1 noise, B 5 higher: judged, but
        // over a wider interval than 30 intervals a side give (t on about 6
        // degrees of freedom, not the bootstrap's reading of four values).
        let noise = [-1.0, 1.0, 0.5, -0.5];
        let a: Vec<f64> = noise.iter().map(|n| 100.0 + n).collect();
        let b: Vec<f64> = a.iter().map(|v| v + 5.0).collect();
        let few = two_samples(4, 4, |i| mean(&a, i), |i| mean(&b, i), |x, y| Some(y - x)).unwrap();
        assert!(!few.spans_zero(), "{few:?}");
        // Each mean's standard error is sd / 2 = 0.456; t(6 df) = 2.447.
        let half = 2.447 * (2.0 * 0.456_f64.powi(2)).sqrt();
        assert!(few.high - few.change >= half * 0.99, "{few:?}");
        assert!(few.change - few.low >= half * 0.99, "{few:?}");
    }

    #[test]
    fn a_burst_in_one_interval_of_four_is_not_a_change() {
        // Loss in points per interval: B had one burst of 2% in one of its
        // four 5 s intervals. Counted as 300k independent requests it would
        // be a certain +0.5 points; as intervals, it is one interval's luck.
        let a = [0.01, 0.0, 0.02, 0.01];
        let b = [0.0, 2.0, 0.01, 0.0];
        let c = two_samples(4, 4, |i| mean(&a, i), |i| mean(&b, i), |x, y| Some(y - x)).unwrap();
        assert!((c.change - 0.4925).abs() < 1e-9, "{c:?}");
        assert!(c.spans_zero(), "{c:?}");
    }

    #[test]
    fn student_t_at_97_5_percent() {
        assert_eq!(t975(1.0), 12.706);
        assert_eq!(t975(3.9), 3.182);
        assert_eq!(t975(0.4), 12.706);
        assert_eq!(t975(30.0), 2.042);
        assert!((t975(31.0) - 2.040).abs() < 0.001, "{}", t975(31.0));
        assert!((t975(60.0) - 2.000).abs() < 0.001, "{}", t975(60.0));
        assert!((t975(1e9) - 1.960).abs() < 0.001);
    }

    #[test]
    fn the_same_runs_give_the_same_interval() {
        let a: Vec<f64> = (0..10).map(f64::from).collect();
        let run = || two_samples(10, 10, |i| mean(&a, i), |i| mean(&a, i), |x, y| Some(y - x));
        assert_eq!(run(), run());
    }
}
