//! The traced paths as a picture (`mx trace`, `paths.trace` beside the
//! reports): every device a sweep met, in columns by how far along the
//! path it answered (the host the leg left, then each TTL), and every
//! directed link a leg crossed, as wide as the legs that crossed it. The
//! link a finding names is drawn red. A picture of what was measured: a
//! silent hop is a gap, and no link is drawn across it.

use std::collections::{BTreeMap, BTreeSet};

use mx_report::paths::{HopKind, Traced};

use super::Picture;
use super::svg::Svg;
use crate::analysis::diagnosis::{Finding, Place};

/// Pixels between columns, and between the devices of a column.
const COLUMN: f64 = 190.0;
const ROW: f64 = 26.0;
const TOP: f64 = 44.0;
const LEFT: f64 = 70.0;

/// The picture of `traced`, with the links `findings` blame marked; `None`
/// without a trace.
pub fn picture(traced: Option<&Traced>, findings: &[Finding]) -> Option<Picture> {
    let traced = traced.filter(|t| t.paths.iter().any(|p| p.hops.is_ok()))?;
    let blamed: BTreeSet<(String, String)> = findings
        .iter()
        .flat_map(|f| &f.blames)
        .filter(|b| b.place == Place::Link)
        .filter_map(|b| Some((b.host.clone()?, b.peer.clone()?)))
        .collect();
    // Each device's column: the first place along any path it answered.
    let mut column: BTreeMap<String, usize> = BTreeMap::new();
    let mut links: BTreeMap<(String, String), usize> = BTreeMap::new();
    for p in &traced.paths {
        let Ok(hops) = &p.hops else { continue };
        let mut devices: Vec<Option<String>> = vec![Some(p.from.clone())];
        devices.extend(hops.iter().map(|h| match &h.kind {
            HopKind::Router(a) => Some(a.clone()),
            HopKind::Reached(_) => Some(p.to.clone()),
            HopKind::Silent => None,
        }));
        for (i, d) in devices.iter().enumerate() {
            if let Some(d) = d {
                let c = column.entry(d.clone()).or_insert(i);
                *c = (*c).min(i);
            }
        }
        for w in devices.windows(2) {
            if let (Some(a), Some(b)) = (&w[0], &w[1]) {
                *links.entry((a.clone(), b.clone())).or_default() += 1;
            }
        }
    }
    let mut rows: BTreeMap<usize, Vec<&String>> = BTreeMap::new();
    for (d, &c) in &column {
        rows.entry(c).or_default().push(d);
    }
    let at: BTreeMap<&String, (f64, f64)> = rows
        .iter()
        .flat_map(|(&c, devices)| {
            devices
                .iter()
                .enumerate()
                .map(move |(r, d)| (*d, (LEFT + c as f64 * COLUMN, TOP + r as f64 * ROW)))
        })
        .collect();
    let columns = rows.len().max(1) as f64;
    let tallest = rows.values().map(Vec::len).max().unwrap_or(1) as f64;
    let mut svg = Svg::new(
        LEFT * 2.0 + (columns - 1.0) * COLUMN,
        TOP + tallest * ROW + 10.0,
    );
    svg.title("Traced paths (mx trace): each stream's legs, hop by hop");
    let widest = links.values().copied().max().unwrap_or(1) as f64;
    for ((a, b), &legs) in &links {
        let (Some(&from), Some(&to)) = (at.get(a), at.get(b)) else {
            continue;
        };
        let width = 1.0 + 5.0 * legs as f64 / widest;
        let named = blamed.contains(&(a.clone(), b.clone()));
        let colour = if named { "#cb181d" } else { "#9e9e9e" };
        let title = if named {
            format!("{a} -> {b}: the link the loss sits on ({legs} legs crossed it)")
        } else {
            format!("{a} -> {b}: {legs} legs crossed it")
        };
        svg.polyline(
            &[from, to],
            &format!(
                r#"stroke="{colour}" stroke-width="{width:.1}" stroke-opacity="0.8" class="{}""#,
                if named { "named-link" } else { "link" }
            ),
            &title,
        );
    }
    for (d, &(x, y)) in &at {
        svg.rect(
            x - 4.0,
            y - 4.0,
            8.0,
            8.0,
            r##"fill="#08519c""##,
            Some(d.as_str()),
        );
        svg.text((x, y - 7.0), "middle", r##"fill="#333""##, d);
    }
    Some(Picture {
        file: "paths.svg".into(),
        title: "Traced paths".into(),
        svg: svg.finish("The traced paths of the lossy flows' streams"),
        note: Some(format!(
            "{} legs swept; red: the link a finding names",
            traced.paths.iter().filter(|p| p.hops.is_ok()).count()
        )),
    })
}
