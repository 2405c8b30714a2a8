//! `mx report`: the summary as one self-contained HTML page, and its
//! pictures as SVG files for tickets (`--svg DIR`).
//!
//! The page needs nothing from the network: inline SVG and CSS, no script,
//! no font or image from anywhere, so it works from a laptop, a ticket
//! attachment or an air-gapped jump host. It holds the summary's text and
//! advice (the same words as `summarize`), the heatmaps of the loss,
//! delivered and RTT p99 grids (and coverage on a layered run), the fleet over
//! time (packets, loss by leg with the worst hosts on top, RTT), the RTT
//! distribution, and the run itself.

pub mod heatmap;
pub mod series;
pub mod svg;

use std::fmt::Write as _;

use super::Summary;
use super::compare::{Comparison, FigureChange, Verdict, render};
use super::document::Document;
use super::grids;
use heatmap::{Heatmap, heatmap};
use series::{Line, TimeAxis, cdf, over_time};
use svg::escape;

/// Hosts drawn on top of the fleet's loss line: the worst few.
const WORST_HOSTS: usize = 3;

/// One picture: its file name under `--svg DIR`, and the SVG.
pub struct Picture {
    pub file: String,
    pub svg: String,
    /// Said beside it (an aggregated heatmap says how).
    pub note: Option<String>,
    pub title: String,
}

/// The page and its pictures.
pub struct Page {
    pub html: String,
    pub pictures: Vec<Picture>,
}

/// The report page of `summary`; `made_at` is when (local time text);
/// `before`, this run compared with an earlier one (`mx report --compare`).
pub fn page(summary: &Summary, made_at: &str, before: Option<&Comparison>) -> Page {
    let doc = summary.document();
    let mut pictures = heatmaps(summary);
    pictures.extend(over_time_pictures(summary, &doc));
    let rtt = summary.set.fleet_rtt();
    if let Some(h) = rtt.filter(|h| h.count() > 0) {
        pictures.push(Picture {
            file: "rtt_cdf.svg".into(),
            title: "RTT distribution".into(),
            svg: cdf(
                "RTT distribution (every reply back in the span)",
                &h.cdf(),
                h.quantile_us(0.5),
                h.quantile_us(0.99),
            ),
            note: None,
        });
    }
    let html = html(summary, &doc, &pictures, made_at, before);
    Page { html, pictures }
}

/// The heatmaps, hosts in the grids' order.
fn heatmaps(summary: &Summary) -> Vec<Picture> {
    let (set, ctx) = (&summary.set, &summary.ctx);
    let order = grids::order(set, ctx);
    let labels: Vec<String> = order.iter().map(|&id| set.name(id).to_string()).collect();
    // The pools, as positions in that order (for aggregating a large grid).
    let pools: Vec<(String, Vec<usize>)> = ctx.matrix.as_ref().map_or(Vec::new(), |m| {
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
    });
    let mut out = Vec::new();
    let mut numeric = grids::numeric(set, ctx, &order);
    // Loss first: the grid an incident is about.
    numeric.sort_by_key(|g| g.file != "loss_grid.csv");
    for grid in numeric {
        let (title, unit, high_is_bad, decimals) = match grid.file {
            "loss_grid.csv" => (
                "Loss (round trip), sender row -> receiver column",
                "% lost",
                true,
                1,
            ),
            "delivered_grid.csv" => (
                "Delivered: requests arriving per second",
                "requests/s",
                false,
                0,
            ),
            "rtt_p99_grid.csv" => ("RTT p99 (each pair's worst interval)", "us", true, 0),
            "coverage_grid.csv" => (
                "Coverage: intervals each pair was measured",
                "intervals",
                false,
                0,
            ),
            _ => continue,
        };
        let (svg, note) = heatmap(
            &Heatmap {
                title,
                unit,
                labels: &labels,
                cells: &grid.cells,
                high_is_bad,
                decimals,
            },
            &pools,
        );
        out.push(Picture {
            file: grid.file.replace("_grid.csv", "_heatmap.svg"),
            title: title.to_string(),
            svg,
            note,
        });
    }
    out
}

/// The fleet over time: packets, loss by leg (the worst hosts on top), RTT.
fn over_time_pictures(summary: &Summary, doc: &Document) -> Vec<Picture> {
    let set = &summary.set;
    let secs = doc.span.interval_s.max(1) as f64;
    let all: Vec<i64> = set.all_ts.iter().copied().collect();
    let edges: Vec<i64> = all
        .iter()
        .copied()
        .filter(|ts| !set.span.contains(*ts))
        .collect();
    let mut switches = Vec::new();
    let mut last_layer = None;
    for (&ts, &layer) in &set.interval_layer {
        if last_layer.is_some_and(|l| l != layer) {
            switches.push(ts);
        }
        last_layer = Some(layer);
    }
    let time = TimeAxis {
        all: &all,
        edges: &edges,
        switches: &switches,
        interval_s: doc.span.interval_s.max(1),
    };
    let fleet =
        |f: &dyn Fn(&super::document::IntervalDoc) -> Option<f64>| -> Vec<(i64, Option<f64>)> {
            doc.intervals.iter().map(|i| (i.ts, f(i))).collect()
        };
    let packets = vec![
        Line {
            name: "requests sent".into(),
            colour: "#08519c",
            width: 2.0,
            points: fleet(&|i| Some(i.requests / secs)),
        },
        Line {
            name: "replies back".into(),
            colour: "#31a354",
            width: 2.0,
            points: fleet(&|i| Some(i.replies / secs)),
        },
    ];
    let mut loss = vec![
        Line {
            name: "fleet: forward".into(),
            colour: "#cb181d",
            width: 2.5,
            points: fleet(&|i| i.forward_loss_pct()),
        },
        Line {
            name: "fleet: on the way back".into(),
            colour: "#fd8d3c",
            width: 2.5,
            points: fleet(&|i| Some((i.loss_pct()? - i.forward_loss_pct()?).max(0.0))),
        },
    ];
    // The worst hosts by loss, each its own round-trip loss per interval.
    let host_colours = ["#54278f", "#737373", "#2171b5"];
    for (h, colour) in summary
        .figs
        .hosts
        .iter()
        .filter(|h| h.loss > 0.0)
        .take(WORST_HOSTS)
        .zip(host_colours)
    {
        let points = doc
            .intervals
            .iter()
            .map(|i| {
                let own = set.host_intervals.get(&(h.id, i.ts));
                (
                    i.ts,
                    own.and_then(|&(sent, back)| super::document::loss(sent, back)),
                )
            })
            .collect();
        loss.push(Line {
            name: format!("{} (round trip)", set.name(h.id)),
            colour,
            width: 1.2,
            points,
        });
    }
    let rtt = vec![
        Line {
            name: "p50".into(),
            colour: "#08519c",
            width: 2.0,
            points: fleet(&|i| i.rtt_p50_us),
        },
        Line {
            name: "p99".into(),
            colour: "#cb181d",
            width: 2.0,
            points: fleet(&|i| i.rtt_p99_us),
        },
    ];
    let rates = |v: f64| crate::units::pps(v);
    let percent = |v: f64| format!("{v:.1}%");
    let us = |v: f64| crate::units::micros(Some(v));
    let mut out = vec![
        Picture {
            file: "packets_over_time.svg".into(),
            title: "Packets per second".into(),
            svg: over_time("Packets per second, fleet", &packets, &time, &rates),
            note: None,
        },
        Picture {
            file: "loss_over_time.svg".into(),
            title: "Loss by leg".into(),
            svg: over_time(
                "Loss by leg, fleet, and the worst hosts",
                &loss,
                &time,
                &percent,
            ),
            note: None,
        },
    ];
    if doc.intervals.iter().any(|i| i.rtt_p50_us.is_some()) {
        out.push(Picture {
            file: "rtt_over_time.svg".into(),
            title: "RTT".into(),
            svg: over_time(
                "RTT p50 and p99, fleet (exact per interval)",
                &rtt,
                &time,
                &us,
            ),
            note: None,
        });
    }
    out.retain(|p| !p.svg.is_empty());
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}\
pre{background:#f7f7f7;padding:12px;overflow-x:auto;font-size:12px;line-height:1.35}\
table.run td{padding:2px 12px 2px 0;vertical-align:top}table.run td:first-child{color:#666}\
.note{color:#666;font-size:12px}figure{margin:16px 0}\
table.change{border-collapse:collapse;font-size:13px}table.change td,table.change th{padding:3px 10px;text-align:right}\
table.change td:first-child,table.change th:first-child{text-align:left}\
td.worse{background:#fcbba1;font-weight:bold}td.better{background:#c7e9c0;font-weight:bold}";

/// How many hosts and flows the comparison's text lists.
const COMPARE_TOP: usize = 10;

/// "Before and after": the fleet's (and each pool's) figures, A against
/// this run, the verdicts coloured, then the comparison's text whole.
fn comparison(h: &mut String, c: &Comparison) {
    let _ = writeln!(
        h,
        "<h2>Before and after</h2>\n<p>A: {} ({} intervals); B: {} ({} intervals). Each change with its 95% interval; a verdict past the floors ({}% of a rate, {} points of loss, {}% of RTT).</p>",
        escape(&c.a.source),
        c.a.intervals,
        escape(&c.b.source),
        c.b.intervals,
        c.floors.rate_pct,
        c.floors.loss_pts,
        c.floors.rtt_pct
    );
    let table = |h: &mut String, id: &str, figures: &[FigureChange]| {
        let _ = writeln!(
            h,
            "<table class=\"change\" id=\"{}\"><tr><th>{}</th><th>A</th><th>B</th><th>change, 95% interval</th><th>verdict</th></tr>",
            escape(id),
            escape(id)
        );
        for f in figures {
            let [a, b, change, verdict] = f.cells();
            let class = match f.verdict {
                Verdict::Worse => "worse",
                Verdict::Better => "better",
                _ => "",
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td></tr>",
                escape(f.figure),
                escape(&a),
                escape(&b),
                escape(&change),
                escape(&verdict)
            );
        }
        h.push_str("</table>\n");
    };
    table(h, "fleet", &c.fleet);
    for pool in &c.pools {
        table(h, &format!("pool {}", pool.name), &pool.figures);
    }
    let _ = writeln!(h, "<pre>{}</pre>", escape(&render(c, COMPARE_TOP)));
}

/// The whole page.
fn html(
    summary: &Summary,
    doc: &Document,
    pictures: &[Picture],
    made_at: &str,
    before: Option<&Comparison>,
) -> String {
    let mut h = String::new();
    let run = &doc.run;
    let title = format!(
        "mx report: {} hosts, {} flows, {} -> {} bytes",
        run.hosts, run.flows, run.request_bytes, run.reply_bytes
    );
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    h.push_str("<h2>The run</h2>\n<table class=\"run\">\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(h, "<tr><td>{}</td><td>{}</td></tr>", escape(k), escape(&v));
    };
    row(
        "hosts, flows",
        format!("{} hosts, {} flows", run.hosts, run.flows),
    );
    row(
        "sizes",
        format!(
            "{} bytes out -> {} bytes back",
            run.request_bytes, run.reply_bytes
        ),
    );
    let shape = match (run.layered, doc.pools.is_empty()) {
        (true, _) => "layered: the pairs rotate (rates are time averages)",
        (false, false) => "pool to pool",
        (false, true) => "fixed",
    };
    row("shape", shape.to_string());
    if !doc.pools.is_empty() {
        let pools: Vec<String> = doc
            .pools
            .iter()
            .map(|p| format!("{} -> {}", p.from, p.to))
            .collect();
        row("pools", pools.join(", "));
    }
    if let Some(dscp) = &run.dscp {
        row("class", dscp.clone());
    }
    let span = match (doc.span.first_ts, doc.span.last_ts) {
        (Some(first), Some(last)) => format!(
            "{} to {}, {} interval(s) of {}s{}",
            crate::units::local_clock((first - doc.span.interval_s) as f64),
            crate::units::local_clock(last as f64),
            doc.span.intervals,
            doc.span.interval_s,
            match doc.span.left_out {
                0 => String::new(),
                n => format!("; {n} edge interval(s) left out"),
            }
        ),
        _ => "no steady interval".to_string(),
    };
    row("span", span);
    row("mx", format!("{} (report made {made_at})", doc.mx_version));
    h.push_str("</table>\n<h2>Summary</h2>\n<pre>");
    h.push_str(&escape(&summary.text()));
    h.push_str(&escape(&summary.what_to_do_next()));
    h.push_str("</pre>\n");
    if let Some(c) = before {
        comparison(&mut h, c);
    }
    let section = |h: &mut String, name: &str, which: &dyn Fn(&Picture) -> bool| {
        let chosen: Vec<&Picture> = pictures.iter().filter(|p| which(p)).collect();
        if chosen.is_empty() {
            return;
        }
        let _ = writeln!(h, "<h2>{}</h2>", escape(name));
        for p in chosen {
            let _ = write!(
                h,
                "<figure id=\"{}\">{}",
                escape(&p.file.replace(".svg", "")),
                p.svg
            );
            if let Some(note) = &p.note {
                let _ = write!(
                    h,
                    "<figcaption class=\"note\">{}</figcaption>",
                    escape(note)
                );
            }
            h.push_str("</figure>\n");
        }
    };
    section(
        &mut h,
        "Grids (hover a cell for the pair and its figure)",
        &|p| p.file.ends_with("_heatmap.svg"),
    );
    section(&mut h, "Over time", &|p| p.file.ends_with("_over_time.svg"));
    section(&mut h, "RTT distribution", &|p| p.file == "rtt_cdf.svg");
    h.push_str("<p class=\"note\">Made by mx; this page needs nothing from the network. Blank (hatched) cells were not measured; they are never 0.</p>\n</body></html>\n");
    h
}
