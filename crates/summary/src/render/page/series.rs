//! Charts over time and of the RTT distribution, on [`Plot`]: lines of
//! values per interval (a gap where an interval has none), the intervals
//! left out shaded and labelled with why (the summary's edges, an interval
//! a host stopped in or had not written yet), and layer switches marked.
//! A rate is drawn on an axis around its values, not from 0, so that a
//! shortfall of a few percent is a visible step, not a line's width.

use super::svg::{Plot, Scale, Svg};
use mx_base::units::{local_clock, micros};

/// One line of a chart: a value per interval end (Unix seconds).
pub struct Line {
    pub name: String,
    pub colour: &'static str,
    /// Wider for the fleet, thinner for a host on top of it.
    pub width: f64,
    pub points: Vec<(i64, Option<f64>)>,
}

/// What a chart over time shows besides its lines.
pub(crate) struct TimeAxis<'a> {
    /// Every interval end of the run, edges included.
    pub all: &'a [i64],
    /// The intervals left out of the lines, and why (hover text).
    pub left_out: &'a [(i64, String)],
    /// Interval ends at which a new layer began (layered runs).
    pub switches: &'a [i64],
    pub interval_s: i64,
}

/// How a chart's y axis fits its values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fit {
    /// From 0 (loss, RTT: how far from nothing).
    FromZero,
    /// Around the values, at least this tall (rates: how far from each other).
    Around(f64),
}

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 250.0;

/// A chart of `lines` over the run's time, its y axis fitted by `fit` and
/// its values formatted by `fmt`.
pub(crate) fn over_time(
    title: &str,
    lines: &[Line],
    time: &TimeAxis<'_>,
    fit: Fit,
    fmt: &dyn Fn(f64) -> String,
) -> String {
    let (Some(&first), Some(&last)) = (time.all.first(), time.all.last()) else {
        return String::new();
    };
    // From the first point: an interval is drawn at its label (its end),
    // and an axis that began an interval earlier would open on nothing.
    let start = first as f64;
    let plot = Plot {
        left: 70.0,
        top: 28.0,
        width: WIDTH - 100.0,
        height: HEIGHT - 70.0,
        x: Scale::Linear {
            min: start,
            max: (last as f64).max(start + 1.0),
        },
        y: {
            let values = lines
                .iter()
                .flat_map(|l| l.points.iter().filter_map(|p| p.1));
            match fit {
                Fit::FromZero => Scale::linear_from_zero(values),
                Fit::Around(span) => Scale::around(values, span),
            }
        },
    };
    let mut svg = Svg::new(WIDTH, HEIGHT);
    svg.title(title);
    // Left out first, under everything: an interval ends at its label.
    for (ts, why) in time.left_out {
        let ts = *ts;
        // The first interval's span lies before the axis: shown from it.
        let (x0, x1) = (
            plot.x_px((ts - time.interval_s) as f64).max(plot.left),
            plot.x_px(ts as f64),
        );
        svg.rect(
            x0,
            plot.top,
            (x1 - x0).max(1.0),
            plot.height,
            r##"fill="#eeeeee" class="edge""##,
            Some(&format!("{}: left out: {why}", local_clock(ts as f64))),
        );
    }
    plot.axes(&mut svg, &|v| local_clock(v), fmt);
    for &ts in time
        .switches
        .iter()
        .filter(|&&ts| ts - time.interval_s >= first)
    {
        let x = plot.x_px((ts - time.interval_s) as f64);
        svg.line(
            (x, plot.top),
            (x, plot.top + plot.height),
            r##"stroke="#6a51a3" stroke-dasharray="3,3" class="switch""##,
        );
    }
    for line in lines {
        // A gap (no value) breaks the line.
        let mut segment: Vec<(f64, f64)> = Vec::new();
        let style = format!(r#"stroke="{}" stroke-width="{}""#, line.colour, line.width);
        for (ts, v) in &line.points {
            match v {
                Some(v) => segment.push(plot.at(*ts as f64, *v)),
                None => {
                    svg.polyline(&segment, &style, &line.name);
                    segment.clear();
                }
            }
        }
        svg.polyline(&segment, &style, &line.name);
    }
    legend(&mut svg, lines, time);
    svg.finish(title)
}

/// The lines' names under the chart, and the marks' meaning when present.
fn legend(svg: &mut Svg, lines: &[Line], time: &TimeAxis<'_>) {
    let mut x = 70.0;
    let y = HEIGHT - 10.0;
    for line in lines {
        svg.line(
            (x, y - 4.0),
            (x + 16.0, y - 4.0),
            &format!(
                r#"stroke="{}" stroke-width="{}""#,
                line.colour,
                line.width.max(2.0)
            ),
        );
        svg.text((x + 20.0, y), "start", "", &line.name);
        x += 30.0 + 6.5 * line.name.chars().count() as f64;
    }
    if !time.left_out.is_empty() {
        svg.rect(x, y - 9.0, 12.0, 10.0, r##"fill="#eeeeee""##, None);
        svg.text((x + 16.0, y), "start", "", "left out");
        x += 70.0;
    }
    if !time.switches.is_empty() {
        svg.line(
            (x, y - 9.0),
            (x, y + 1.0),
            r##"stroke="#6a51a3" stroke-dasharray="3,3""##,
        );
        svg.text((x + 6.0, y), "start", "", "layer switch");
    }
}

/// The RTT distribution: the share of replies back within each RTT, RTT on
/// a log scale, p50 and p99 marked.
pub fn cdf(title: &str, points: &[(f64, f64)], p50: Option<f64>, p99: Option<f64>) -> String {
    let (Some(lo), Some(hi)) = (points.first(), points.last()) else {
        return String::new();
    };
    let plot = Plot {
        left: 60.0,
        top: 28.0,
        width: WIDTH - 90.0,
        height: HEIGHT - 70.0,
        x: Scale::Log {
            min: (lo.0 * 0.8).max(0.1),
            max: (hi.0 * 1.25).max(lo.0 + 1.0),
        },
        y: Scale::Linear { min: 0.0, max: 1.0 },
    };
    let mut svg = Svg::new(WIDTH, HEIGHT);
    svg.title(title);
    plot.axes(&mut svg, &|v| micros(Some(v)), &|v| {
        format!("{:.0}%", v * 100.0)
    });
    // A step per bucket: the share climbs at each bucket's value.
    let mut steps = Vec::with_capacity(points.len() * 2);
    let mut below = 0.0;
    for &(us, share) in points {
        steps.push(plot.at(us, below));
        steps.push(plot.at(us, share));
        below = share;
    }
    svg.polyline(
        &steps,
        r##"stroke="#08519c" stroke-width="2""##,
        "share of replies back within this RTT",
    );
    for (name, value) in [("p50", p50), ("p99", p99)] {
        if let Some(v) = value {
            let x = plot.x_px(v);
            svg.line(
                (x, plot.top),
                (x, plot.top + plot.height),
                r##"stroke="#cb181d" stroke-dasharray="4,3""##,
            );
            svg.text(
                (x + 3.0, plot.top + 12.0),
                "start",
                r##"fill="#cb181d""##,
                &format!("{name} {}", micros(Some(v))),
            );
        }
    }
    svg.text(
        (plot.left, HEIGHT - 10.0),
        "start",
        r##"fill="#555""##,
        "RTT (log scale), share of replies back within it; exact, from every host's histogram",
    );
    svg.finish(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_runs_from_the_first_point_and_a_left_out_first_interval_stays_inside() {
        let all = [100, 105, 110, 115];
        let left_out = [(100, "the run's start".to_string())];
        let line = Line {
            name: "fleet".to_string(),
            colour: "#000",
            width: 2.0,
            points: all.iter().map(|&ts| (ts, Some(1.0))).collect(),
        };
        let time = TimeAxis {
            all: &all,
            left_out: &left_out,
            switches: &[],
            interval_s: 5,
        };
        let svg = over_time("t", &[line], &time, Fit::FromZero, &|v| format!("{v}"));
        // The first point sits on the axis's left edge (70 px in).
        let points = svg.split("<polyline points=\"").nth(1).unwrap();
        assert!(points.starts_with("70.0,"), "{points}");
        // The first interval's shading begins there too, not left of it.
        let shade = svg.split("class=\"edge\"").next().unwrap();
        let rect = shade.rsplit("<rect").next().unwrap();
        assert!(rect.contains("x=\"70.0\""), "{rect}");
    }
}
