//! The page's heatmaps: which grids, in which order, on which colour scale,
//! with which units, and what the findings point at in each.
//!
//! Loss comes three times, on one scale so that a colour means the same
//! loss in each: the forward leg, the return leg and the round trip, side by
//! side, so that loss into a host (its forward column, its return row), out
//! of it (the other way round) and on one pair (a cell) look different.
//! Delivered is drawn against the target (a cap or a drop is a shortfall
//! whatever the rate), on a scale from 100% down to 90% and below, so that
//! 94% and 100% are different colours.

use super::Picture;
use super::findings::{Leg, marks, named};
use super::heatmap::{Heatmap, Shade, heatmap};
use crate::Summary;
use crate::render::grids::{self, Grid};
use mx_base::units::micros;

/// The loss scale's darkest colour is never under this: a run's noise
/// (0.01%) stays light instead of taking the darkest red.
const LOSS_TOP_MIN: f64 = 1.0;
/// Delivered's darkest colour: this share of the target and below.
const DELIVERED_FLOOR: f64 = 90.0;
/// RTT's darkest colour: this many times the fleet's best pair's p99, and
/// more (the lightest is the best pair's: a fleet whose pairs all sit near
/// it is light, however many microseconds that is).
const RTT_DARK_TIMES: f64 = 10.0;

/// How one grid is drawn.
struct Drawn {
    grid: Grid,
    picture: &'static str,
    title: &'static str,
    leg: Leg,
    shade: Shade,
    show: fn(f64) -> String,
    decimals: usize,
}

fn lost(v: f64) -> String {
    format!("{v:.1} % lost")
}

fn of_target(v: f64) -> String {
    format!("{v:.1}% of target")
}

fn rtt(v: f64) -> String {
    micros(Some(v))
}

fn intervals(v: f64) -> String {
    format!("{v:.0} intervals")
}

/// The largest measured value of `grids`.
fn largest<'a>(grids: impl Iterator<Item = &'a Grid>) -> f64 {
    grids
        .flat_map(|g| g.cells.iter().flatten().flatten())
        .fold(0.0f64, |m, v| m.max(*v))
}

/// The smallest measured value of `grid` above 0.
fn smallest(grid: &Grid) -> f64 {
    grid.cells
        .iter()
        .flatten()
        .flatten()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min)
}

/// RTT from the fleet's best pair (lightest) to ten times it (darkest).
fn rtt_shade(grid: &Grid) -> Shade {
    let floor = smallest(grid);
    if !floor.is_finite() {
        return Shade::HighIsBad { top: 0.0 };
    }
    Shade::AboveFloor {
        floor,
        top: floor * RTT_DARK_TIMES,
    }
}

/// The grids the page draws, in its order: the loss legs and round trip,
/// then delivered, RTT p99 and coverage.
fn drawn(summary: &Summary, order: &[u32]) -> Vec<Drawn> {
    let (set, ctx) = (&summary.set, &summary.ctx);
    let mut by_file: Vec<Grid> = grids::numeric(set, ctx, order, &summary.figs.flows);
    let mut take = |file: &str| {
        let at = by_file.iter().position(|g| g.file == file)?;
        Some(by_file.swap_remove(at))
    };
    let (Some(forward), Some(back), Some(round_trip), Some(p99)) = (
        take("forward_loss_grid.csv"),
        take("return_loss_grid.csv"),
        take("loss_grid.csv"),
        take("rtt_p99_grid.csv"),
    ) else {
        return Vec::new();
    };
    let coverage = take("coverage_grid.csv");
    let loss = Shade::HighIsBad {
        top: largest([&forward, &back, &round_trip].into_iter()).max(LOSS_TOP_MIN),
    };
    let loss_map = |grid, picture, title, leg| Drawn {
        grid,
        picture,
        title,
        leg,
        shade: loss,
        show: lost,
        decimals: 1,
    };
    let mut out = vec![
        loss_map(
            forward,
            "forward_loss_heatmap.svg",
            "Forward leg: requests lost, row -> column",
            Leg::Forward,
        ),
        loss_map(
            back,
            "return_loss_heatmap.svg",
            "Return leg: replies lost, column -> row",
            Leg::Return,
        ),
        loss_map(
            round_trip,
            "loss_heatmap.svg",
            "Round trip: lost either way, row -> column",
            Leg::RoundTrip,
        ),
        delivered(grids::delivered_of_target(set, order)),
        Drawn {
            shade: rtt_shade(&p99),
            grid: p99,
            picture: "rtt_p99_heatmap.svg",
            title: "RTT p99 (each pair's worst interval)",
            leg: Leg::Neither,
            show: rtt,
            decimals: 0,
        },
    ];
    out.extend(coverage.map(|grid| Drawn {
        shade: Shade::LowIsBad {
            floor: 0.0,
            top: largest([&grid].into_iter()),
        },
        grid,
        picture: "coverage_heatmap.svg",
        title: "Coverage: intervals each pair was measured",
        leg: Leg::Neither,
        show: intervals,
        decimals: 0,
    }));
    out
}

/// Delivered against the target: 100% light, 90% and below dark.
fn delivered(grid: Grid) -> Drawn {
    Drawn {
        grid,
        picture: "delivered_heatmap.svg",
        title: "Delivered: requests arriving, % of target",
        leg: Leg::Forward,
        shade: Shade::LowIsBad {
            floor: DELIVERED_FLOOR,
            top: 100.0,
        },
        show: of_target,
        decimals: 1,
    }
}

/// The pools, as positions in `order` (for aggregating a large grid).
fn pools(summary: &Summary, order: &[u32]) -> Vec<(String, Vec<usize>)> {
    let set = &summary.set;
    let Some(m) = summary.ctx.matrix.as_ref() else {
        return Vec::new();
    };
    m.pools()
        .pools
        .iter()
        .map(|p| {
            let at: Vec<usize> = p
                .members
                .iter()
                .filter_map(|&h| {
                    let id = set.id_of(&m.hosts()[h as usize].name)?;
                    order.iter().position(|&o| o == id)
                })
                .collect();
            (p.name.clone(), at)
        })
        .collect()
}

/// The heatmaps, hosts in the grids' order, the findings' hosts marked.
pub fn heatmaps(summary: &Summary) -> Vec<Picture> {
    let set = &summary.set;
    let order = grids::order(set, &summary.ctx);
    let labels: Vec<String> = order.iter().map(|&id| set.name(id).to_string()).collect();
    let pools = pools(summary, &order);
    let findings = summary.findings();
    let named = named(findings, &labels);
    drawn(summary, &order)
        .into_iter()
        .map(|d| {
            let marks = marks(findings, &labels, d.leg);
            let (svg, note) = heatmap(
                &Heatmap {
                    title: d.title,
                    labels: &labels,
                    cells: &d.grid.cells,
                    shade: d.shade,
                    show: &d.show,
                    decimals: d.decimals,
                    named: &named,
                    marks: &marks,
                },
                &pools,
            );
            Picture {
                file: d.picture.to_string(),
                title: d.title.to_string(),
                svg,
                note,
            }
        })
        .collect()
}
