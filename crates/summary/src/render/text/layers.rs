//! A layered run's sections: COVERAGE (the pairs a full cycle measures,
//! and those still unmeasured) and LAYERS (each layer's pairs, rate,
//! delivery and worst p99 in the window).

use std::fmt::Write as _;

use crate::analysis::aggregate::ReportSet;
use crate::analysis::coverage::{coverage, cycle_pairs, pair_measured};
use crate::analysis::figures::{Context, percent};
use mx_base::units::{self, micros, pps};

pub(crate) fn layered_sections(t: &mut String, set: &ReportSet, ctx: &Context) {
    if let (Some((measured, total, cycle)), Some(m)) = (coverage(set, ctx), ctx.matrix.as_ref()) {
        let rotation = m.config.rotation.expect("coverage needs a rotation");
        let _ = writeln!(
            t,
            "  COVERAGE  {measured} of {total} {} measured so far ({:.1}%)",
            if m.pools().between.is_some() {
                "cross-pool pairs"
            } else {
                "ordered pairs"
            },
            percent(measured as f64, total as f64)
        );
        let _ = writeln!(
            t,
            "            {} layers x {}s dwell = one full cycle every {}",
            rotation.layers,
            units::g(rotation.dwell),
            units::duration(cycle)
        );
        if measured < total {
            let name = |h: u32| &m.hosts()[h as usize].name;
            let missing: Vec<String> = cycle_pairs(m)
                .filter(|&pair| !pair_measured(set, m, pair))
                .map(|(s, d)| format!("{}->{}", name(s), name(d)))
                .collect();
            let shown = missing
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            let more = if missing.len() > 4 {
                format!(" (+{} more)", missing.len() - 4)
            } else {
                String::new()
            };
            let _ = writeln!(t, "            still unmeasured: {shown}{more}");
        }
        t.push('\n');
    }
    let total_layers = ctx
        .matrix
        .as_ref()
        .and_then(|m| m.config.rotation)
        .map_or(set.layers.len(), |r| r.layers as usize);
    let _ = writeln!(
        t,
        "  LAYERS in the window: {} of {total_layers}",
        set.layers.len()
    );
    let _ = writeln!(t, "    layer    pairs         sent   delivery  worst p99");
    let shown = if set.layers.len() > 11 {
        10
    } else {
        set.layers.len()
    };
    for (layer, agg) in set.layers.iter().take(shown) {
        let ticks = agg.ticks.len().max(1) as f64;
        // (Capped: in the original's reports a drain row can carry replies to
        // requests sent before the window; ours count them with their requests.)
        let delivery = if agg.sum_pps > 0.0 {
            format!("{:.2}%", (agg.sum_rep_pps / agg.sum_pps * 100.0).min(100.0))
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            t,
            "    {layer:>5}{:>9}{:>13}{delivery:>11}{:>11}",
            agg.pairs.len(),
            pps(agg.sum_pps / ticks),
            micros(agg.worst_p99)
        );
    }
    if set.layers.len() > shown {
        let _ = writeln!(t, "  ... {} more layers", set.layers.len() - shown);
    }
    t.push('\n');
}
