//! `--grid DIR`: N x N CSVs in the matrix's own order (rows send, columns
//! receive): a dark row is a sick sender, a dark column a sick receiver. A cell
//! is blank where nothing was measured, never 0. The corner cell says what the
//! cells are, and in which unit (`src\dst % lost`, ...).
//!
//! Loss comes as the round trip and as its two legs. A flow's forward leg is
//! its requests (row -> column), its return leg the replies (column -> row),
//! so packets lost on their way into a host darken its column in the forward
//! grid and its row in the return grid; out of a host, the other way round;
//! one sick pair, one cell of each.

use std::fmt::Write as _;

use std::collections::BTreeMap;

use crate::analysis::aggregate::ReportSet;
use crate::analysis::figures::{Context, FlowFigures, Packets};

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

/// One N x N figure: rows send, columns receive, in [`order`]; `None` on
/// the diagonal and where nothing was measured (never 0).
pub struct Grid {
    /// Its CSV file's name.
    pub file: &'static str,
    /// What a cell is, with its unit (the CSV's corner cell).
    pub what: &'static str,
    /// Whether its cells count (coverage: intervals) rather than measure.
    pub counts: bool,
    pub cells: Vec<Vec<Option<f64>>>,
}

impl Grid {
    fn of(
        order: &[u32],
        file: &'static str,
        what: &'static str,
        cell: impl Fn(u32, u32) -> Option<f64>,
    ) -> Grid {
        let cells = order
            .iter()
            .map(|&src| {
                order
                    .iter()
                    .map(|&dst| if src == dst { None } else { cell(src, dst) })
                    .collect()
            })
            .collect();
        Grid {
            file,
            what,
            counts: false,
            cells,
        }
    }

    /// The grid as CSV (CRLF, as the original writes it): a header of the
    /// hosts, then a row per sender, one decimal (counts whole).
    fn csv(&self, set: &ReportSet, order: &[u32]) -> String {
        let mut text = format!("src\\dst {}", self.what);
        for &id in order {
            text.push(',');
            text.push_str(set.name(id));
        }
        text.push_str("\r\n");
        for (&src, row) in order.iter().zip(&self.cells) {
            text.push_str(set.name(src));
            for cell in row {
                text.push(',');
                if let Some(v) = cell {
                    let _ = if self.counts {
                        write!(text, "{v:.0}")
                    } else {
                        write!(text, "{v:.1}")
                    };
                }
            }
            text.push_str("\r\n");
        }
        text
    }
}

/// The grids in [`order`]: pps, delivered, loss (round trip, forward leg,
/// return leg), rtt p99, and coverage on a layered run. `flows` are the
/// summary's, whose legs the per-leg grids show.
pub fn numeric(set: &ReportSet, ctx: &Context, order: &[u32], flows: &[FlowFigures]) -> Vec<Grid> {
    let by_pair: BTreeMap<(u32, u32), &FlowFigures> =
        flows.iter().map(|f| ((f.host, f.peer), f)).collect();
    let leg = |s: u32, d: u32, loss: fn(&FlowFigures) -> Option<f64>| {
        by_pair.get(&(s, d)).and_then(|f| loss(f))
    };
    let mut grids = vec![
        Grid::of(order, "pps_grid.csv", "requests/s sent", |s, d| {
            set.tx.get(&(s, d)).and_then(|p| p.pps.get())
        }),
        Grid::of(order, "delivered_grid.csv", "requests/s arrived", |s, d| {
            set.rx.get(&(d, s)).and_then(|p| p.pps.get())
        }),
        Grid::of(order, "loss_grid.csv", "% lost (round trip)", |s, d| {
            // Of the requests sent, the share whose replies never came back
            // (less those refused by plan: not lost).
            let p = Packets::of_pair(set, s, d, set.tx.get(&(s, d))?);
            p.delivery().map(|d| (1.0 - d).max(0.0) * 100.0)
        }),
        Grid::of(
            order,
            "forward_loss_grid.csv",
            "% lost (forward leg)",
            |s, d| leg(s, d, FlowFigures::forward_loss),
        ),
        Grid::of(
            order,
            "return_loss_grid.csv",
            "% lost (return leg)",
            |s, d| leg(s, d, FlowFigures::return_loss),
        ),
        Grid::of(
            order,
            "rtt_p99_grid.csv",
            "RTT p99 us (the pair's worst interval)",
            |s, d| set.tx.get(&(s, d)).and_then(|p| p.p99),
        ),
    ];
    if ctx.layered {
        let mut coverage = Grid::of(order, "coverage_grid.csv", "intervals measured", |s, d| {
            set.coverage.get(&(s, d)).map(|&n| n as f64)
        });
        coverage.counts = true;
        grids.push(coverage);
    }
    grids
}

/// Each pair's requests arriving as a percentage of what its sender was
/// asked to send (blank: unpaced, or its receiver wrote nothing): a cap or a
/// drop shows against the target, whatever the rate.
pub(crate) fn delivered_of_target(set: &ReportSet, order: &[u32]) -> Grid {
    Grid::of(
        order,
        "delivered_pct_grid.csv",
        "% of target arrived",
        |s, d| {
            let target = set.tx.get(&(s, d))?.target.get().filter(|t| *t > 0.0)?;
            let arrived = set.rx.get(&(d, s))?.pps.get()?;
            Some(arrived / target * 100.0)
        },
    )
}

/// The grids as CSV, by file name.
pub fn grids(set: &ReportSet, ctx: &Context, flows: &[FlowFigures]) -> Vec<(&'static str, String)> {
    let order = order(set, ctx);
    numeric(set, ctx, &order, flows)
        .iter()
        .map(|g| (g.file, g.csv(set, &order)))
        .collect()
}
