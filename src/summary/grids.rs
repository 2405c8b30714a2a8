//! `--grid DIR`: N x N CSVs in the matrix's own order (rows send, columns
//! receive): a dark row is a sick sender, a dark column a sick receiver. A cell
//! is blank where nothing was measured, never 0. The corner cell says what the
//! cells are, and in which unit (`src\dst % lost`, ...).

use std::fmt::Write as _;

use super::aggregate::ReportSet;
use super::figures::Context;

/// Host ids in grid order: pool by pool when the matrix has pools (so the
/// cross-pool flows make blocks), then the matrix's order, else sorted by
/// name; hosts only in the reports come after the matrix's.
pub fn order(set: &ReportSet, ctx: &Context) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    if let Some(m) = &ctx.matrix {
        let pool_of = m.pools().pool_of_each(m.host_count());
        let pooled = m
            .pools()
            .pools
            .iter()
            .flat_map(|p| p.members.iter().copied());
        let rest = (0..m.host_count() as u32).filter(|&h| pool_of[h as usize].is_none());
        for h in pooled.chain(rest) {
            if let Some(id) = set.id_of(&m.hosts()[h as usize].name) {
                ids.push(id);
            }
        }
    }
    let mut rest: Vec<u32> = set
        .window_hosts()
        .into_iter()
        .filter(|id| !ids.contains(id))
        .collect();
    rest.sort_by(|a, b| set.name(*a).cmp(set.name(*b)));
    ids.extend(rest);
    ids
}

/// One grid as CSV (CRLF, as the original writes it): a header of the hosts
/// in `order`, then a row per sender whose cells are `cell(src, dst)`, blank
/// on the diagonal and where nothing was measured. `what` names the figure
/// in the corner cell (`src\dst loss %`).
fn grid_text(
    set: &ReportSet,
    order: &[u32],
    what: &str,
    cell: impl Fn(u32, u32) -> Option<String>,
) -> String {
    let mut text = format!("src\\dst {what}");
    for &id in order {
        text.push(',');
        text.push_str(set.name(id));
    }
    text.push_str("\r\n");
    for &src in order {
        text.push_str(set.name(src));
        for &dst in order {
            text.push(',');
            if src != dst
                && let Some(value) = cell(src, dst)
            {
                text.push_str(&value);
            }
        }
        text.push_str("\r\n");
    }
    text
}

fn one_decimal(v: f64) -> String {
    let mut s = String::new();
    let _ = write!(s, "{v:.1}");
    s
}

/// The grids, by file name: pps, delivered, loss, rtt p99, and coverage on
/// a layered run.
pub fn grids(set: &ReportSet, ctx: &Context) -> Vec<(&'static str, String)> {
    let order = order(set, ctx);
    let mut grids: Vec<(&'static str, String)> = vec![
        (
            "pps_grid.csv",
            grid_text(set, &order, "requests/s sent", |s, d| {
                set.tx
                    .get(&(s, d))
                    .and_then(|p| p.pps.get())
                    .map(one_decimal)
            }),
        ),
        (
            "delivered_grid.csv",
            grid_text(set, &order, "requests/s arrived", |s, d| {
                set.rx
                    .get(&(d, s))
                    .and_then(|p| p.pps.get())
                    .map(one_decimal)
            }),
        ),
        (
            "loss_grid.csv",
            grid_text(set, &order, "% lost (round trip)", |s, d| {
                // Of the requests sent, the share whose replies never came back.
                let p = set.tx.get(&(s, d))?;
                (p.sent > 0.0).then(|| one_decimal((1.0 - p.back / p.sent).max(0.0) * 100.0))
            }),
        ),
        (
            "rtt_p99_grid.csv",
            grid_text(
                set,
                &order,
                "RTT p99 us (the pair's worst interval)",
                |s, d| set.tx.get(&(s, d)).and_then(|p| p.p99).map(one_decimal),
            ),
        ),
    ];
    if ctx.layered {
        grids.push((
            "coverage_grid.csv",
            grid_text(set, &order, "intervals measured", |s, d| {
                set.coverage.get(&(s, d)).map(|n| n.to_string())
            }),
        ));
    }
    grids
}
