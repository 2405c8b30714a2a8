//! An N x N grid as a heatmap: rows send, columns receive, hosts in the
//! grids' order (pool by pool, then by name). A sick receiver is one dark
//! column, a sick sender one dark row, a bad uplink a block. Dark is always
//! bad (much loss, a long tail, little delivered). A cell that was not
//! measured is grey and hatched, never the colour of 0; hovering a cell shows
//! `src -> dst` and its figure with its unit (the cell's `<title>`).
//!
//! Past [`MAX_HOSTS`] hosts the cells would be under a pixel: the grid is
//! aggregated into groups (the pools, or runs of consecutive hosts in
//! order), each cell the mean of its measured pairs, and the page says so.

use super::svg::Svg;

/// The most hosts drawn one cell each.
pub const MAX_HOSTS: usize = 120;
/// Groups a large grid is cut into when it has no pools to group by.
const GROUPS: usize = 60;

/// What the heatmap shows.
pub struct Heatmap<'a> {
    pub title: &'a str,
    /// The figure and unit of a cell, for its hover text (`% lost`).
    pub unit: &'a str,
    pub labels: &'a [String],
    pub cells: &'a [Vec<Option<f64>>],
    /// Whether a high value is bad (loss, RTT) or good (delivered).
    pub high_is_bad: bool,
    /// Cell values' format.
    pub decimals: usize,
}

/// Rows or columns of a drawn heatmap: a host, or a group of hosts.
struct Axis {
    labels: Vec<String>,
    /// Each drawn row's hosts (indices into the grid).
    members: Vec<Vec<usize>>,
}

/// How the grid is drawn: one cell per host, or per group (`pools`: each
/// pool's name and members, in grid order).
fn axis(labels: &[String], pools: &[(String, Vec<usize>)]) -> (Axis, Option<String>) {
    let n = labels.len();
    if n <= MAX_HOSTS {
        return (
            Axis {
                labels: labels.to_vec(),
                members: (0..n).map(|i| vec![i]).collect(),
            },
            None,
        );
    }
    if pools.len() >= 2 {
        let note = format!(
            "{n} hosts: aggregated to its {} pools, each cell the mean of its measured host pairs",
            pools.len()
        );
        let axis = Axis {
            labels: pools.iter().map(|(name, _)| name.clone()).collect(),
            members: pools.iter().map(|(_, m)| m.clone()).collect(),
        };
        return (axis, Some(note));
    }
    let size = n.div_ceil(GROUPS);
    let members: Vec<Vec<usize>> = (0..n)
        .step_by(size)
        .map(|start| (start..(start + size).min(n)).collect())
        .collect();
    let labels = members
        .iter()
        .map(|m| format!("{}..{}", labels[m[0]], labels[m[m.len() - 1]]))
        .collect();
    let note = format!(
        "{n} hosts: aggregated to groups of {size} consecutive hosts in this order, each cell the mean of its measured host pairs"
    );
    (Axis { labels, members }, Some(note))
}

/// The mean of the measured cells between two groups, and how many there were.
fn group_mean(cells: &[Vec<Option<f64>>], rows: &[usize], cols: &[usize]) -> Option<(f64, usize)> {
    let (mut sum, mut n) = (0.0, 0);
    for &r in rows {
        for &c in cols {
            if let Some(v) = cells[r][c] {
                sum += v;
                n += 1;
            }
        }
    }
    (n > 0).then(|| (sum / n as f64, n))
}

/// A colour from light (good) to dark (bad) for `t` in 0..=1 of badness.
fn colour(t: f64) -> String {
    // Light sand to deep red: 0 is visibly a colour, distinct from the
    // grey of "not measured".
    let (a, b) = ((255.0, 245.0, 225.0), (127.0, 0.0, 0.0));
    let t = t.clamp(0.0, 1.0);
    let mix = |x: f64, y: f64| (x + (y - x) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// The heatmap as SVG, and the note to print beside it when aggregated.
pub fn heatmap(h: &Heatmap<'_>, pools: &[(String, Vec<usize>)]) -> (String, Option<String>) {
    let (axis, note) = axis(h.labels, pools);
    let n = axis.labels.len().max(1);
    let cell = (640.0 / n as f64).clamp(6.0, 28.0);
    let labelled = cell >= 8.0;
    let longest = axis
        .labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let margin = if labelled {
        (longest * 6.5 + 10.0).min(160.0)
    } else {
        20.0
    };
    let (left, top) = (margin, margin + 24.0);
    let side = cell * n as f64;
    // Room for the legend (150 px tall) and the title, however few the hosts.
    let width = (left + side + 150.0).max(h.title.chars().count() as f64 * 7.5 + 10.0);
    let mut svg = Svg::new(width, top + side.max(150.0) + 20.0);
    svg.raw(r##"<defs><pattern id="blank" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#e6e6e6"/><line x1="0" y1="0" x2="0" y2="6" stroke="#bdbdbd" stroke-width="2"/></pattern></defs>"##);
    svg.title(h.title);
    // The scale: 0 to the largest measured value.
    let values: Vec<Vec<Option<(f64, usize)>>> = axis
        .members
        .iter()
        .map(|rows| {
            axis.members
                .iter()
                .map(|cols| group_mean(h.cells, rows, cols))
                .collect()
        })
        .collect();
    let max = values
        .iter()
        .flatten()
        .flatten()
        .map(|(v, _)| *v)
        .fold(0.0f64, f64::max);
    let badness = |v: f64| {
        let t = if max > 0.0 { v / max } else { 0.0 };
        if h.high_is_bad { t } else { 1.0 - t }
    };
    let fmt = |v: f64| format!("{v:.prec$}", prec = h.decimals);
    for (r, row) in values.iter().enumerate() {
        let y = top + r as f64 * cell;
        for (c, value) in row.iter().enumerate() {
            let x = left + c as f64 * cell;
            let pair = format!("{} -> {}", axis.labels[r], axis.labels[c]);
            let diagonal = axis.members[r] == axis.members[c] && axis.members[r].len() == 1;
            let (style, title) = match value {
                _ if diagonal => (r##"fill="#ffffff" class="self""##.to_string(), None),
                Some((v, pairs)) => {
                    let of = if *pairs > 1 {
                        format!(" (mean of {pairs} host pairs)")
                    } else {
                        String::new()
                    };
                    (
                        format!(
                            r#"fill="{}" class="cell" data-value="{}""#,
                            colour(badness(*v)),
                            fmt(*v)
                        ),
                        Some(format!("{pair}: {} {}{of}", fmt(*v), h.unit)),
                    )
                }
                None => (
                    r#"fill="url(#blank)" class="cell blank""#.to_string(),
                    Some(format!("{pair}: not measured")),
                ),
            };
            svg.rect(x, y, cell, cell, &style, title.as_deref());
        }
        if labelled {
            svg.text((left - 4.0, y + cell * 0.7), "end", "", &axis.labels[r]);
            svg.text_up(
                (left + r as f64 * cell + cell * 0.7, top - 4.0),
                "",
                &axis.labels[r],
            );
        }
    }
    // The legend: light to dark, the unit, and what hatched means.
    let lx = left + side + 16.0;
    for i in 0..10 {
        let t = f64::from(i) / 9.0;
        svg.rect(
            lx,
            top + f64::from(i) * 12.0,
            14.0,
            12.0,
            &format!(r#"fill="{}""#, colour(t)),
            None,
        );
    }
    let (first, last) = if h.high_is_bad {
        (0.0, max)
    } else {
        (max, 0.0)
    };
    svg.text(
        (lx + 18.0, top + 10.0),
        "start",
        "",
        &format!("{} {}", fmt(first), h.unit),
    );
    svg.text(
        (lx + 18.0, top + 118.0),
        "start",
        "",
        &format!("{} {}", fmt(last), h.unit),
    );
    svg.rect(lx, top + 134.0, 14.0, 12.0, r#"fill="url(#blank)""#, None);
    svg.text((lx + 18.0, top + 144.0), "start", "", "not measured");
    (svg.finish(h.title), note)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("h{i}")).collect()
    }

    #[test]
    fn every_pair_is_a_cell_and_blank_is_not_zero() {
        let names = labels(3);
        let cells = vec![
            vec![None, Some(0.0), Some(20.0)],
            vec![Some(0.0), None, None],
            vec![Some(0.0), Some(0.0), None],
        ];
        let (svg, note) = heatmap(
            &Heatmap {
                title: "loss",
                unit: "% lost",
                labels: &names,
                cells: &cells,
                high_is_bad: true,
                decimals: 1,
            },
            &[],
        );
        assert!(note.is_none());
        // Six pairs: five measured, one blank; the diagonal is no pair.
        assert_eq!(svg.matches(r#"class="cell""#).count(), 5, "{svg}");
        assert_eq!(svg.matches(r#"class="cell blank""#).count(), 1);
        assert_eq!(svg.matches(r#"class="self""#).count(), 3);
        assert!(
            svg.contains("<title>h1 -&gt; h3: 20.0 % lost</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>h2 -&gt; h3: not measured</title>"));
        // 0 is the lightest colour, 20 (the largest) the darkest.
        assert!(
            svg.contains(r##"fill="#fff5e1" class="cell" data-value="0.0""##),
            "{svg}"
        );
        assert!(svg.contains(r##"fill="#7f0000" class="cell" data-value="20.0""##));
    }

    #[test]
    fn a_large_grid_is_aggregated_and_says_so() {
        let names = labels(300);
        let cells = vec![vec![Some(1.0); 300]; 300];
        let h = Heatmap {
            title: "loss",
            unit: "%",
            labels: &names,
            cells: &cells,
            high_is_bad: true,
            decimals: 1,
        };
        let (svg, note) = heatmap(&h, &[]);
        assert_eq!(svg.matches(r#"class="cell""#).count(), 60 * 60);
        assert!(note.unwrap().contains("groups of 5 consecutive hosts"));
        let pools = vec![
            ("tor1".to_string(), (0..150).collect()),
            ("tor2".to_string(), (150..300).collect()),
        ];
        let (svg, note) = heatmap(&h, &pools);
        assert_eq!(svg.matches(r#"class="cell""#).count(), 4);
        assert!(note.unwrap().contains("aggregated to its 2 pools"));
        assert!(svg.contains("tor1 -&gt; tor2: 1.0 % (mean of 22500 host pairs)"));
    }
}
