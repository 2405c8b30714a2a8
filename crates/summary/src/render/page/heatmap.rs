//! An N x N grid as a heatmap: rows send, columns receive, hosts in the
//! grids' order (pool by pool, then by name). A sick receiver is one dark
//! column, a sick sender one dark row, a bad uplink a block. Dark is always
//! bad (much loss, a long tail, little delivered). A cell that was not
//! measured is grey and hatched, never the colour of 0; hovering a cell shows
//! `src -> dst` and its figure with its unit (the cell's `<title>`). The hosts
//! the findings name have their labels marked, and the rows, columns or
//! cells they point at outlined, in the findings' colour.
//!
//! The grid is drawn large enough to read beside two others on a wide page
//! (small grids get big cells), and past [`MAX_HOSTS`] hosts, where the cells
//! would be under a pixel, it is aggregated into groups (the pools, or runs
//! of consecutive hosts in order), each cell the mean of its measured pairs,
//! and the page says so.
use super::svg::Svg;

/// The most hosts drawn one cell each.
pub const MAX_HOSTS: usize = 120;
/// Groups a large grid is cut into when it has no pools to group by.
const GROUPS: usize = 60;
/// The side of the drawn grid, pixels: never smaller (a few hosts get large
/// cells) nor larger (a hundred hosts still fit the page).
const SIDE_MIN: f64 = 360.0;
const SIDE_MAX: f64 = 720.0;
/// The colour of what the findings name: labels, outlines, the page's chips.
pub(crate) const NAMED: &str = "#08519c";

/// How values map to colours: light is good, dark is bad.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shade {
    /// 0 lightest, `top` and above darkest (loss, RTT).
    HighIsBad { top: f64 },
    /// `top` and above lightest, `floor` and below darkest (delivered
    /// against its target, coverage).
    LowIsBad { floor: f64, top: f64 },
    /// `floor` and below lightest, `top` and above darkest, on a log scale
    /// between (RTT: a pair at the fleet's best is light whatever it is,
    /// one ten times slower dark).
    AboveFloor { floor: f64, top: f64 },
}

impl Shade {
    /// Badness of `v`, 0..=1.
    fn badness(self, v: f64) -> f64 {
        let t = match self {
            Shade::HighIsBad { top } if top > 0.0 => v / top,
            Shade::HighIsBad { .. } => 0.0,
            Shade::LowIsBad { floor, top } if top > floor => (top - v) / (top - floor),
            Shade::LowIsBad { .. } => 0.0,
            Shade::AboveFloor { floor, top } if floor > 0.0 && top > floor && v > 0.0 => {
                (v / floor).ln() / (top / floor).ln()
            }
            Shade::AboveFloor { .. } => 0.0,
        };
        t.clamp(0.0, 1.0)
    }

    /// The values at the legend's light and dark ends.
    fn ends(self) -> (f64, f64) {
        match self {
            Shade::HighIsBad { top } => (0.0, top),
            Shade::LowIsBad { floor, top } => (top, floor),
            Shade::AboveFloor { floor, top } => (floor, top),
        }
    }
}

/// What a finding points at in one grid (indices in the grid's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Row(usize),
    Column(usize),
    Cell(usize, usize),
}

/// What the heatmap shows.
pub struct Heatmap<'a> {
    pub title: &'a str,
    pub labels: &'a [String],
    pub cells: &'a [Vec<Option<f64>>],
    pub shade: Shade,
    /// A value as a person reads it, with its unit (`5.1 % lost`, `10.3ms`):
    /// the hover text and the legend.
    pub show: &'a dyn Fn(f64) -> String,
    /// Decimals of a cell's `data-value`.
    pub decimals: usize,
    /// The hosts the findings name (indices into `labels`), and what they
    /// point at here.
    pub named: &'a [usize],
    pub marks: &'a [Mark],
}

/// Rows or columns of a drawn heatmap: a host, or a group of hosts.
struct Axis {
    labels: Vec<String>,
    /// Each drawn row's hosts (indices into the grid).
    members: Vec<Vec<usize>>,
}

impl Axis {
    /// The drawn row holding host `i`.
    fn of(&self, i: usize) -> Option<usize> {
        self.members.iter().position(|m| m.contains(&i))
    }
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

/// Where the grid sits in its SVG, pixels.
struct Frame {
    left: f64,
    top: f64,
    cell: f64,
    side: f64,
    /// Label font size; `None`: cells too small to label.
    font: Option<f64>,
}

impl Frame {
    fn of(axis: &Axis) -> Frame {
        let n = axis.labels.len().max(1) as f64;
        let side = (n * 8.0).clamp(SIDE_MIN, SIDE_MAX);
        let cell = side / n;
        let font = (cell >= 7.0).then(|| (cell * 0.8).clamp(7.0, 12.0));
        let longest = axis
            .labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0) as f64;
        let margin = font.map_or(20.0, |f| (longest * f * 0.6 + 10.0).min(160.0));
        Frame {
            left: margin,
            top: margin + 24.0,
            cell,
            side,
            font,
        }
    }

    /// The pixel rectangle of drawn rows `rows` and columns `cols`.
    fn rect(&self, rows: (usize, usize), cols: (usize, usize)) -> (f64, f64, f64, f64) {
        (
            self.left + cols.0 as f64 * self.cell,
            self.top + rows.0 as f64 * self.cell,
            (cols.1 - cols.0 + 1) as f64 * self.cell,
            (rows.1 - rows.0 + 1) as f64 * self.cell,
        )
    }
}

/// The heatmap as SVG, and the note to print beside it when aggregated.
pub fn heatmap(h: &Heatmap<'_>, pools: &[(String, Vec<usize>)]) -> (String, Option<String>) {
    let (axis, note) = axis(h.labels, pools);
    let frame = Frame::of(&axis);
    let width = (frame.left + frame.side + 12.0).max(h.title.chars().count() as f64 * 7.5 + 10.0);
    let mut svg = Svg::new(width, frame.top + frame.side + 64.0);
    svg.raw(r##"<defs><pattern id="blank" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#e6e6e6"/><line x1="0" y1="0" x2="0" y2="6" stroke="#bdbdbd" stroke-width="2"/></pattern></defs>"##);
    svg.title(h.title);
    cells(&mut svg, h, &axis, &frame);
    labels(&mut svg, h, &axis, &frame);
    outlines(&mut svg, h, &axis, &frame);
    legend(&mut svg, h, &frame);
    (svg.finish(h.title), note)
}

/// Every drawn cell: its colour, value and hover text.
fn cells(svg: &mut Svg, h: &Heatmap<'_>, axis: &Axis, frame: &Frame) {
    let fmt = |v: f64| format!("{v:.prec$}", prec = h.decimals);
    for (r, rows) in axis.members.iter().enumerate() {
        for (c, cols) in axis.members.iter().enumerate() {
            let (x, y, w, ht) = frame.rect((r, r), (c, c));
            let pair = format!("{} -> {}", axis.labels[r], axis.labels[c]);
            let diagonal = r == c && rows.len() == 1;
            let (style, title) = match group_mean(h.cells, rows, cols) {
                _ if diagonal => (r##"fill="#ffffff" class="self""##.to_string(), None),
                Some((v, pairs)) => {
                    let of = if pairs > 1 {
                        format!(" (mean of {pairs} host pairs)")
                    } else {
                        String::new()
                    };
                    (
                        format!(
                            r#"fill="{}" class="cell" data-value="{}""#,
                            colour(h.shade.badness(v)),
                            fmt(v)
                        ),
                        Some(format!("{pair}: {}{of}", (h.show)(v))),
                    )
                }
                None => (
                    r#"fill="url(#blank)" class="cell blank""#.to_string(),
                    Some(format!("{pair}: not measured")),
                ),
            };
            svg.rect(x, y, w, ht, &style, title.as_deref());
        }
    }
}

/// Row and column labels, those of the hosts the findings name marked.
fn labels(svg: &mut Svg, h: &Heatmap<'_>, axis: &Axis, frame: &Frame) {
    let Some(font) = frame.font else {
        return;
    };
    for (i, label) in axis.labels.iter().enumerate() {
        let named = axis.members[i].iter().any(|m| h.named.contains(m));
        let style = if named {
            format!(r#"font-size="{font:.1}" font-weight="bold" fill="{NAMED}" class="named""#)
        } else {
            format!(r#"font-size="{font:.1}""#)
        };
        let (x, y, _, _) = frame.rect((i, i), (i, i));
        svg.text(
            (frame.left - 4.0, y + frame.cell / 2.0 + font * 0.35),
            "end",
            &style,
            label,
        );
        svg.text_up(
            (x + frame.cell / 2.0 + font * 0.35, frame.top - 4.0),
            &style,
            label,
        );
    }
}

/// An outline around each row, column or cell the findings point at.
fn outlines(svg: &mut Svg, h: &Heatmap<'_>, axis: &Axis, frame: &Frame) {
    let last = axis.labels.len().saturating_sub(1);
    for mark in h.marks {
        let (rows, cols) = match *mark {
            Mark::Row(r) => (axis.of(r).map(|r| (r, r)), Some((0, last))),
            Mark::Column(c) => (Some((0, last)), axis.of(c).map(|c| (c, c))),
            Mark::Cell(r, c) => (axis.of(r).map(|r| (r, r)), axis.of(c).map(|c| (c, c))),
        };
        let (Some(rows), Some(cols)) = (rows, cols) else {
            continue;
        };
        let (x, y, w, ht) = frame.rect(rows, cols);
        svg.rect(
            x,
            y,
            w,
            ht,
            &format!(r#"fill="none" stroke="{NAMED}" stroke-width="2.5" class="marked""#),
            None,
        );
    }
}

/// The legend under the grid: light to dark with the values at both ends,
/// and what hatched means.
fn legend(svg: &mut Svg, h: &Heatmap<'_>, frame: &Frame) {
    const SWATCH: f64 = 26.0;
    let (x, y) = (frame.left, frame.top + frame.side + 12.0);
    for i in 0..10 {
        let t = f64::from(i) / 9.0;
        let style = format!(r#"fill="{}""#, colour(t));
        svg.rect(x + f64::from(i) * SWATCH, y, SWATCH, 12.0, &style, None);
    }
    let (light, dark) = h.shade.ends();
    // What lies past a scale's floor is as dark as the floor.
    let past = match h.shade {
        Shade::LowIsBad { floor, .. } if floor > 0.0 => " or less",
        Shade::AboveFloor { .. } => " or more",
        _ => "",
    };
    svg.text((x, y + 26.0), "start", "", &(h.show)(light));
    svg.text(
        (x + 10.0 * SWATCH, y + 26.0),
        "end",
        "",
        &format!("{}{past}", (h.show)(dark)),
    );
    svg.rect(x, y + 34.0, 14.0, 12.0, r#"fill="url(#blank)""#, None);
    svg.text((x + 18.0, y + 44.0), "start", "", "not measured");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("h{i}")).collect()
    }

    fn lost(v: f64) -> String {
        format!("{v:.1} % lost")
    }

    fn loss_map<'a>(
        names: &'a [String],
        cells: &'a [Vec<Option<f64>>],
        named: &'a [usize],
        marks: &'a [Mark],
    ) -> Heatmap<'a> {
        Heatmap {
            title: "loss",
            labels: names,
            cells,
            shade: Shade::HighIsBad { top: 20.0 },
            show: &lost,
            decimals: 1,
            named,
            marks,
        }
    }

    #[test]
    fn an_rtt_scale_is_light_at_the_fleet_s_best_and_dark_at_ten_times_it() {
        let rtt = Shade::AboveFloor {
            floor: 1000.0,
            top: 10_000.0,
        };
        assert_eq!(rtt.badness(1000.0), 0.0);
        // A healthy fleet (1.0 to 1.1 ms) is light everywhere.
        assert!(rtt.badness(1100.0) < 0.05, "{}", rtt.badness(1100.0));
        assert!((rtt.badness(3162.0) - 0.5).abs() < 0.01);
        assert_eq!(rtt.badness(10_000.0), 1.0);
        assert_eq!(rtt.badness(80_000.0), 1.0);
        assert_eq!(rtt.ends(), (1000.0, 10_000.0));
    }

    #[test]
    fn every_pair_is_a_cell_and_blank_is_not_zero() {
        let names = labels(3);
        let cells = vec![
            vec![None, Some(0.0), Some(20.0)],
            vec![Some(0.0), None, None],
            vec![Some(0.0), Some(0.0), None],
        ];
        let (svg, note) = heatmap(&loss_map(&names, &cells, &[], &[]), &[]);
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
        // 0 is the lightest colour, 20 (the top) the darkest.
        assert!(
            svg.contains(r##"fill="#fff5e1" class="cell" data-value="0.0""##),
            "{svg}"
        );
        assert!(svg.contains(r##"fill="#7f0000" class="cell" data-value="20.0""##));
        assert_eq!(svg.matches("class=\"named\"").count(), 0);
    }

    #[test]
    fn a_few_hosts_get_large_cells() {
        let names = labels(4);
        let cells = vec![vec![Some(1.0); 4]; 4];
        let (svg, _) = heatmap(&loss_map(&names, &cells, &[], &[]), &[]);
        // 4 hosts on a 360 px side: cells of 90 px, not 28.
        assert!(svg.contains(r#"width="90.0" height="90.0""#), "{svg}");
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next()?.parse().ok())
            .unwrap();
        assert!(width >= 380.0, "{width}");
    }

    #[test]
    fn named_hosts_are_marked_and_their_rows_columns_and_cells_outlined() {
        let names = labels(4);
        let cells = vec![vec![Some(0.0); 4]; 4];
        let marks = [Mark::Column(3), Mark::Row(1), Mark::Cell(0, 2)];
        let (svg, _) = heatmap(&loss_map(&names, &cells, &[3], &marks), &[]);
        // h4's label twice (its row and its column), bold in the findings' colour.
        assert_eq!(svg.matches(r#"class="named">h4<"#).count(), 2, "{svg}");
        let outlines: Vec<&str> = svg
            .split("<rect ")
            .filter(|r| r.contains(r#"class="marked""#))
            .collect();
        assert_eq!(outlines.len(), 3, "{svg}");
        // Column h4: one cell wide, the grid tall; row h2 the other way; h1 -> h3 one cell.
        assert!(
            outlines[0].contains(r#"width="90.0" height="360.0""#),
            "{}",
            outlines[0]
        );
        assert!(
            outlines[1].contains(r#"width="360.0" height="90.0""#),
            "{}",
            outlines[1]
        );
        assert!(
            outlines[2].contains(r#"width="90.0" height="90.0""#),
            "{}",
            outlines[2]
        );
    }

    #[test]
    fn short_of_target_is_dark_and_a_few_percent_show() {
        let shade = Shade::LowIsBad {
            floor: 90.0,
            top: 100.0,
        };
        assert_eq!(shade.badness(100.0), 0.0);
        assert_eq!(shade.badness(101.0), 0.0);
        assert!((shade.badness(94.0) - 0.6).abs() < 1e-9);
        assert_eq!(shade.badness(50.0), 1.0);
        assert_ne!(colour(shade.badness(94.0)), colour(shade.badness(100.0)));
    }

    #[test]
    fn a_large_grid_is_aggregated_and_says_so() {
        let names = labels(300);
        let cells = vec![vec![Some(1.0); 300]; 300];
        let h = loss_map(&names, &cells, &[7], &[Mark::Column(7)]);
        let (svg, note) = heatmap(&h, &[]);
        assert_eq!(svg.matches(r#"class="cell""#).count(), 60 * 60);
        assert!(note.unwrap().contains("groups of 5 consecutive hosts"));
        // h8 is in the second group: its column is outlined there.
        assert!(svg.contains(r#"class="named">h6..h10<"#), "{svg}");
        let pools = vec![
            ("tor1".to_string(), (0..150).collect()),
            ("tor2".to_string(), (150..300).collect()),
        ];
        let (svg, note) = heatmap(&h, &pools);
        assert_eq!(svg.matches(r#"class="cell""#).count(), 4);
        assert!(note.unwrap().contains("aggregated to its 2 pools"));
        assert!(svg.contains("tor1 -&gt; tor2: 1.0 % lost (mean of 22500 host pairs)"));
    }
}
