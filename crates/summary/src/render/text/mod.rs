//! The summary as text, as `mx summarize` prints it. The text is the
//! original tool's, line for line: the header (`header.rs`: what was
//! covered, the span), the fleet lines (`fleet.rs`, and in a disk run the
//! DISK lines), the per-host table and the worst flows (`tables.rs`), the
//! layered sections (`layers.rs`), and WHAT TO DO NEXT.

mod fleet;
mod header;
mod layers;
mod tables;

use std::fmt::Write as _;

use crate::Options;
use crate::analysis::aggregate::ReportSet;
use crate::analysis::diagnosis::Finding;
use crate::analysis::figures::{Context, Figures};
use fleet::{
    disk_lines, extra_rtt_lines, fleet_lines, pool_lines, refused_line, rtt_text, spread_lines,
};
use header::header_lines;
use layers::layered_sections;
pub use tables::HOST_COLUMNS;
use tables::{host_table, worst_flows};

/// The summary's text above WHAT TO DO NEXT: the header, the fleet lines,
/// the host table, the worst flows, the layered sections.
pub fn render(set: &ReportSet, ctx: &Context, figs: &Figures, opts: &Options) -> String {
    let mut t = String::new();
    header_lines(&mut t, set, ctx, figs, opts);
    t.push('\n');
    fleet_lines(&mut t, ctx, &figs.fleet);
    refused_line(&mut t, set, &figs.fleet);
    let _ = writeln!(t, "  {:<10}{}", "RTT", rtt_text(set, &figs.fleet));
    extra_rtt_lines(&mut t, &figs.fleet);
    spread_lines(&mut t, "  ", ctx, &figs.fleet, &figs.spread);
    pool_lines(&mut t, set, ctx, &figs.pools);
    if let Some(disk) = &figs.fleet.disk {
        disk_lines(&mut t, set, ctx, disk);
    }
    t.push('\n');
    host_table(&mut t, set, &figs.hosts, opts.top_hosts);
    worst_flows(&mut t, set, &figs.flows, opts.top);
    if ctx.layered {
        layered_sections(&mut t, set, ctx);
    }
    t
}

/// WHAT TO DO NEXT and its advice: each finding wrapped as a bullet.
pub fn what_to_do_next(findings: &[Finding]) -> String {
    let mut text = String::from("  WHAT TO DO NEXT\n");
    for finding in findings {
        text.push_str(&wrap(&super::findings::text(finding)));
    }
    text
}

/// Wraps `text` to 78 columns: `    * ` before the first line, 6 spaces before the rest.
pub fn wrap(text: &str) -> String {
    const WIDTH: usize = 78;
    let mut out = String::new();
    let mut line = String::from("    * ");
    let mut fresh = true;
    for word in text.split_whitespace() {
        if !fresh && line.len() + 1 + word.len() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from("      ");
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}
