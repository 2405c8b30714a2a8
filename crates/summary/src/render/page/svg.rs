//! A small SVG writer and the one piece of pixel arithmetic every chart of
//! the report shares: [`Plot`], a data rectangle with its two scales and
//! axes. Charts say what to draw in data units; only `Plot` turns data into
//! pixels, so no chart repeats that math.

use std::fmt::Write as _;

/// Text made safe inside an SVG/HTML element or attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The width an SVG of [`Svg::finish`] is drawn at, pixels (0 if none).
pub(crate) fn drawn_width(svg: &str) -> f64 {
    svg.split_once(" width=\"")
        .and_then(|(_, rest)| rest.split('"').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// An SVG document being written: elements appended in drawing order.
pub(crate) struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    pub fn new(width: f64, height: f64) -> Svg {
        Svg {
            width,
            height,
            body: String::new(),
        }
    }

    /// The picture's title, top left, as every picture of the page has it.
    pub fn title(&mut self, title: &str) {
        self.text(
            (0.0, 14.0),
            "start",
            r#"font-size="13" font-weight="bold""#,
            title,
        );
    }

    /// A rectangle; `title` is what hovering it shows (the SVG `<title>`).
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, style: &str, title: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" {style}"#
        );
        match title {
            Some(t) => {
                let _ = write!(self.body, "><title>{}</title></rect>", escape(t));
            }
            None => self.body.push_str("/>"),
        }
    }

    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), style: &str) {
        let _ = write!(
            self.body,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {style}/>"#
        );
    }

    /// Text at (x, y); `anchor` is start, middle or end.
    pub fn text(&mut self, (x, y): (f64, f64), anchor: &str, style: &str, text: &str) {
        let _ = write!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" {style}>{}</text>"#,
            escape(text)
        );
    }

    /// Text turned a quarter anticlockwise about (x, y) (a column's label).
    pub(crate) fn text_up(&mut self, (x, y): (f64, f64), style: &str, text: &str) {
        let _ = write!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" transform="rotate(-90 {x:.1} {y:.1})" {style}>{}</text>"#,
            escape(text)
        );
    }

    /// A polyline through `points` (pixels); nothing for fewer than two.
    pub fn polyline(&mut self, points: &[(f64, f64)], style: &str, title: &str) {
        if let [(x, y)] = points {
            // A lone value between gaps is a point, not a line: drawn as one.
            let _ = write!(
                self.body,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"none\" {style}><title>{}</title></circle>",
                escape(title)
            );
            return;
        }
        if points.len() < 2 {
            return;
        }
        self.body.push_str("<polyline points=\"");
        for (x, y) in points {
            let _ = write!(self.body, "{x:.1},{y:.1} ");
        }
        let _ = write!(
            self.body,
            "\" fill=\"none\" {style}><title>{}</title></polyline>",
            escape(title)
        );
    }

    /// Raw markup (a `<defs>` block).
    pub fn raw(&mut self, markup: &str) {
        self.body.push_str(markup);
    }

    /// The document, with `label` as its accessible name.
    pub fn finish(self, label: &str) -> String {
        format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" role="img" aria-label="{label}" font-family="sans-serif" font-size="11">{body}</svg>"#,
            w = self.width,
            h = self.height,
            label = escape(label),
            body = self.body
        )
    }
}

/// How data maps onto an axis.
#[derive(Debug, Clone, Copy)]
pub enum Scale {
    Linear {
        min: f64,
        max: f64,
    },
    /// Logarithmic (base 10); both bounds positive.
    Log {
        min: f64,
        max: f64,
    },
}

impl Scale {
    /// A linear scale from 0 (or the data's minimum, if below) to the data's
    /// maximum with a little headroom; a flat 0..1 when there is no data.
    pub(crate) fn linear_from_zero(values: impl Iterator<Item = f64>) -> Scale {
        let (mut lo, mut hi) = (0.0f64, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !hi.is_finite() || hi <= lo {
            hi = lo + 1.0;
        }
        Scale::Linear {
            min: lo,
            max: hi * 1.05,
        }
    }

    /// A linear scale around the data, not from 0: at least `min_span` tall,
    /// so that a change of a few percent of a rate fills a good part of the
    /// chart instead of a line's width (a flat 0..1 when there is no data).
    pub fn around(values: impl Iterator<Item = f64>, min_span: f64) -> Scale {
        let (lo, hi) = values
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        if !lo.is_finite() {
            return Scale::Linear { min: 0.0, max: 1.0 };
        }
        let grow = (min_span - (hi - lo)).max(0.0) / 2.0;
        let (lo, hi) = (lo - grow, hi + grow);
        let pad = (hi - lo) * 0.08;
        Scale::Linear {
            min: lo - pad,
            max: hi + pad,
        }
    }

    /// Where `v` falls, 0..=1 along the axis.
    fn fraction(self, v: f64) -> f64 {
        let f = match self {
            Scale::Linear { min, max } => (v - min) / (max - min),
            Scale::Log { min, max } => (v.max(min).ln() - min.ln()) / (max.ln() - min.ln()),
        };
        f.clamp(0.0, 1.0)
    }

    /// Tick values: about five round numbers (powers of ten on a log scale).
    fn ticks(self) -> Vec<f64> {
        match self {
            Scale::Linear { min, max } => {
                let raw = (max - min) / 5.0;
                let magnitude = 10f64.powf(raw.log10().floor());
                let step = [1.0, 2.0, 5.0, 10.0]
                    .into_iter()
                    .map(|m| m * magnitude)
                    .find(|s| *s >= raw)
                    .unwrap_or(magnitude * 10.0);
                let mut t = (min / step).ceil() * step;
                let mut out = Vec::new();
                while t <= max + step * 1e-9 {
                    out.push(t);
                    t += step;
                }
                out
            }
            Scale::Log { min, max } => {
                let mut out = Vec::new();
                let mut t = 10f64.powf(min.log10().ceil());
                while t <= max {
                    out.push(t);
                    t *= 10.0;
                }
                out
            }
        }
    }
}

/// A chart's data rectangle inside its SVG: x and y scales, pixels.
pub struct Plot {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub x: Scale,
    pub y: Scale,
}

impl Plot {
    /// The pixel of data point (x, y).
    pub fn at(&self, x: f64, y: f64) -> (f64, f64) {
        (
            self.left + self.x.fraction(x) * self.width,
            self.top + (1.0 - self.y.fraction(y)) * self.height,
        )
    }

    /// The pixel column of data x.
    pub(crate) fn x_px(&self, x: f64) -> f64 {
        self.at(x, 0.0).0
    }

    /// The frame, grid lines and tick labels, `x_label(v)`/`y_label(v)`
    /// formatting a tick's value.
    pub(crate) fn axes(
        &self,
        svg: &mut Svg,
        x_label: &dyn Fn(f64) -> String,
        y_label: &dyn Fn(f64) -> String,
    ) {
        let bottom = self.top + self.height;
        for v in self.y.ticks() {
            let (_, y) = self.at(0.0, v);
            svg.line(
                (self.left, y),
                (self.left + self.width, y),
                r##"stroke="#e4e4e4""##,
            );
            svg.text(
                (self.left - 4.0, y + 4.0),
                "end",
                r##"fill="#555""##,
                &y_label(v),
            );
        }
        for v in self.x.ticks() {
            let x = self.x_px(v);
            svg.line((x, bottom), (x, bottom + 4.0), r##"stroke="#888""##);
            svg.text(
                (x, bottom + 16.0),
                "middle",
                r##"fill="#555""##,
                &x_label(v),
            );
        }
        svg.rect(
            self.left,
            self.top,
            self.width,
            self.height,
            r##"fill="none" stroke="#888""##,
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_svg_says_its_width() {
        assert_eq!(drawn_width(&Svg::new(412.0, 30.0).finish("x")), 412.0);
        assert_eq!(drawn_width("<p>"), 0.0);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn linear_ticks_are_round_and_cover_the_range() {
        let s = Scale::Linear {
            min: 0.0,
            max: 95.0,
        };
        assert_eq!(s.ticks(), [0.0, 20.0, 40.0, 60.0, 80.0]);
        let log = Scale::Log {
            min: 3.0,
            max: 5000.0,
        };
        assert_eq!(log.ticks(), [10.0, 100.0, 1000.0]);
    }

    #[test]
    fn a_scale_around_the_data_makes_two_percent_a_good_part_of_it() {
        let Scale::Linear { min, max } = Scale::around([98.0, 100.0].into_iter(), 5.0) else {
            panic!("linear");
        };
        assert!(min > 90.0 && max < 105.0, "{min}..{max}");
        assert!(2.0 / (max - min) > 0.3, "{min}..{max}");
        // Wide data keeps its own range.
        let Scale::Linear { min, max } = Scale::around([10.0, 60.0].into_iter(), 5.0) else {
            panic!("linear");
        };
        assert!(min < 10.0 && min > 5.0 && max > 60.0 && max < 65.0);
    }

    #[test]
    fn the_plot_puts_the_minimum_bottom_left() {
        let p = Plot {
            left: 10.0,
            top: 5.0,
            width: 100.0,
            height: 50.0,
            x: Scale::Linear {
                min: 0.0,
                max: 10.0,
            },
            y: Scale::Linear { min: 0.0, max: 1.0 },
        };
        assert_eq!(p.at(0.0, 0.0), (10.0, 55.0));
        assert_eq!(p.at(10.0, 1.0), (110.0, 5.0));
        // Outside the range: clamped to the frame.
        assert_eq!(p.at(20.0, -1.0), (110.0, 55.0));
    }
}
