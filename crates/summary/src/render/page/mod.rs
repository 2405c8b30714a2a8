//! `mx report`: the summary as one self-contained HTML page, and its
//! pictures as SVG files for tickets (`--svg DIR`).
//!
//! The page needs nothing from the network: inline SVG and CSS, no script,
//! no font or image from anywhere, so it works from a laptop, a ticket
//! attachment or an air-gapped jump host. It opens with the findings (what
//! to do next, each with the hosts it blames), then the run, the summary's
//! text (the same words as `summarize`), the heatmaps (loss by leg and round
//! trip side by side, delivered against the target, RTT p99, coverage on a
//! layered run; the findings' hosts marked in each), the traced paths with
//! the link a finding names (after `mx trace`), the fleet over time
//! (sent and back against the target, loss by leg, the worst hosts apart,
//! RTT), and the RTT distribution.

pub mod findings;
pub mod heatmap;
pub mod maps;
pub mod paths;
pub mod series;
pub mod svg;
pub mod timeline;

use std::fmt::Write as _;

use crate::Summary;
use crate::compare::{Comparison, FigureChange, Verdict, render};
use crate::document::Document;
use series::cdf;
use svg::escape;

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
    let mut pictures = maps::heatmaps(summary);
    pictures.extend(timeline::pictures(summary, &doc));
    pictures.extend(paths::picture(
        summary.set.traced.as_ref(),
        summary.findings(),
    ));
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

// Pictures grow with the page: a figure starts at its drawn width (the
// flex-basis the page sets), takes its share of a row, and its SVG scales to
// the figure, so three 4-host heatmaps fill a 1400 px page side by side.
const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1800px}\
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}\
pre{background:#f7f7f7;padding:12px;overflow-x:auto;font-size:12px;line-height:1.35}\
table.run td{padding:2px 12px 2px 0;vertical-align:top}table.run td:first-child{color:#666}\
.note{color:#666;font-size:12px}\
.row{display:flex;flex-wrap:wrap;gap:8px 28px;align-items:flex-start}\
.row figure{margin:8px 0;flex-grow:1;flex-shrink:1;min-width:0}\
.row figure svg{display:block;width:100%;height:auto}\
ol.findings{padding-left:22px}li.finding{margin:6px 0 10px}li.finding p{margin:2px 0}\
.chip{display:inline-block;margin:2px 6px 2px 0;padding:1px 8px;border-radius:10px;font-size:12px;background:#deebf7;color:#08519c;border:1px solid #9ecae1}\
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
    findings::block(&mut h, summary.findings());
    run_table(&mut h, doc, made_at);
    h.push_str("<h2>Summary</h2>\n<pre>");
    h.push_str(&escape(&summary.text()));
    h.push_str("</pre>\n");
    if let Some(c) = before {
        comparison(&mut h, c);
    }
    let maps = |files: &'static [&'static str]| move |p: &Picture| files.contains(&p.file.as_str());
    section(
        &mut h,
        pictures,
        "Loss by leg (hover a cell for the pair and its figure)",
        Some(HOW_TO_READ_LOSS),
        &maps(&[
            "forward_loss_heatmap.svg",
            "return_loss_heatmap.svg",
            "loss_heatmap.svg",
        ]),
    );
    section(
        &mut h,
        pictures,
        "Delivered and round trip",
        None,
        &maps(&[
            "delivered_heatmap.svg",
            "rtt_p99_heatmap.svg",
            "coverage_heatmap.svg",
        ]),
    );
    section(
        &mut h,
        pictures,
        "Traced paths",
        Some(HOW_TO_READ_PATHS),
        &|p| p.file == "paths.svg",
    );
    section(&mut h, pictures, "Over time", None, &|p| {
        p.file.ends_with("_over_time.svg")
    });
    section(&mut h, pictures, "RTT distribution", None, &|p| {
        p.file == "rtt_cdf.svg"
    });
    h.push_str("<p class=\"note\">Made by mx; this page needs nothing from the network. Blank (hatched) cells were not measured; they are never 0.</p>\n</body></html>\n");
    h
}

/// How much wider than drawn a picture may grow to fill its row: a row of
/// two heatmaps is not blown up to half the page each.
const MAX_GROWTH: f64 = 1.25;

/// How to read the three loss heatmaps, said above them.
const HOW_TO_READ_LOSS: &str = "Packets lost on their way into a host darken its column in the forward leg and its row in the return leg; out of a host, its row forward and its column back; between one pair, one cell of each. The round trip holds both. Outlined in blue: what the findings above point at.";

/// How to read the traced paths, said above them.
const HOW_TO_READ_PATHS: &str = "Each lossy flow's streams, swept hop by hop both ways once the run ended (mx trace): the host a leg left on the left, then each router by the address that answered, then the host it reached. A link is as wide as the legs that crossed it; red: the link a finding names.";

/// The run: its shape, its span, and which mx made the page when.
fn run_table(h: &mut String, doc: &Document, made_at: &str) {
    let run = &doc.run;
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
            mx_base::units::local_clock((first - doc.span.interval_s) as f64),
            mx_base::units::local_clock(last as f64),
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
    h.push_str("</table>\n");
}

/// A heading and the pictures `which` chooses, side by side as the page's
/// width allows, each as wide as the others of its row: at least the
/// widest's drawn width until the page is narrower, at most a quarter wider
/// (nothing when none is chosen).
fn section(
    h: &mut String,
    pictures: &[Picture],
    name: &str,
    note: Option<&str>,
    which: &dyn Fn(&Picture) -> bool,
) {
    let chosen: Vec<&Picture> = pictures.iter().filter(|p| which(p)).collect();
    if chosen.is_empty() {
        return;
    }
    let _ = writeln!(h, "<h2>{}</h2>", escape(name));
    if let Some(note) = note {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(note));
    }
    h.push_str("<div class=\"row\">\n");
    let basis = chosen
        .iter()
        .map(|p| svg::drawn_width(&p.svg))
        .fold(0.0, f64::max);
    for p in chosen {
        let _ = write!(
            h,
            "<figure id=\"{}\" style=\"flex-basis:{basis:.0}px;max-width:{:.0}px\">{}",
            escape(&p.file.replace(".svg", "")),
            basis * MAX_GROWTH,
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
    h.push_str("</div>\n");
}
