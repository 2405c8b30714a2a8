//! How much of a layered run's cycle the reports measured: the ordered (or
//! cross-pool) pairs one cycle covers, and which of them have rows.

use super::aggregate::ReportSet;
use super::figures::Context;
use mx_matrix::Matrix;

/// The pairs one cycle of a layered matrix measures: every ordered pair, or
/// for a pool-to-pool matrix every cross-pool pair of its directions.
pub(crate) fn cycle_pairs(m: &Matrix) -> Box<dyn Iterator<Item = (u32, u32)> + '_> {
    let pools = m.pools();
    if pools.between.is_some() {
        return Box::new(pools.directions().into_iter().flat_map(move |(from, to)| {
            let to = &pools.pools[to].members;
            pools.pools[from]
                .members
                .iter()
                .flat_map(move |&s| to.iter().map(move |&d| (s, d)))
        }));
    }
    let n = m.host_count() as u32;
    Box::new((0..n).flat_map(move |s| (0..n).filter(move |&d| d != s).map(move |d| (s, d))))
}

/// Whether the reports measured pair (src, dst) of matrix `m`.
pub(crate) fn pair_measured(set: &ReportSet, m: &Matrix, (src, dst): (u32, u32)) -> bool {
    let name = |h: u32| &m.hosts()[h as usize].name;
    matches!((set.id_of(name(src)), set.id_of(name(dst))), (Some(a), Some(b)) if set.coverage.contains_key(&(a, b)))
}

/// Coverage of a layered run over its whole history: (measured, total, cycle s).
pub fn coverage(set: &ReportSet, ctx: &Context) -> Option<(usize, usize, f64)> {
    let m = ctx.matrix.as_ref()?;
    let rotation = m.config.rotation?;
    let (mut measured_pairs, mut total) = (0, 0);
    for pair in cycle_pairs(m) {
        total += 1;
        if pair_measured(set, m, pair) {
            measured_pairs += 1;
        }
    }
    Some((
        measured_pairs,
        total,
        f64::from(rotation.layers) * rotation.dwell,
    ))
}
