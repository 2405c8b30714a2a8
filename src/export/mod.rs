//! `mx export`: a run as overlays for the datacenter floor-plan viewer, one
//! sample per host per overlay: `test <TAB> target <TAB> value [<TAB> k=v ...]`,
//! with `!test` lines that carry each overlay's unit, direction, decimals,
//! pinned scale and preset aggregation.
//!
//! The numbers are summarize's ([`crate::summary::analysis::figures`]), by the same rules:
//! an overlay is emitted only when the number behind it was measured, never as
//! a zero that a rack average would swallow.
//!
//! [`samples`] builds the samples, [`mod@format`] writes them (TSV or NDJSON),
//! [`notes`] says which host lost which overlay and why, [`names`] checks what
//! a results line may hold.

pub mod format;
pub mod names;
pub mod notes;
pub mod overlays;
pub mod samples;

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::matrix::Matrix;
use crate::summary::analysis::aggregate::ReportSet;
use crate::summary::analysis::figures::{self, Context, HostFigures};
use crate::units;

use overlays::Overlay;

/// One exported value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub overlay: Overlay,
    pub target: String,
    pub value: Value,
    pub extras: Vec<(&'static str, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Text(&'static str),
}

/// What an export is asked for, validated.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub window: f64,
    pub raw: bool,
    pub peers: bool,
    pub nic_gbps: Option<f64>,
    /// `--names`: mx host name -> floor-plan target.
    pub names: HashMap<String, String>,
    pub target_prefix: String,
    pub test_prefix: String,
    pub run: Option<String>,
    pub no_meta: bool,
}

/// An export: its samples, and what its header and notes say.
pub struct Export {
    pub samples: Vec<Sample>,
    /// The hosts of the window (summarize's figures), by name.
    pub hosts: Vec<HostFigures>,
    /// Hosts whose rows all predate the window, and matrix hosts that never
    /// reported.
    pub silent: Vec<String>,
    pub never: Vec<String>,
    /// `--peers` on a fixed matrix folds the flows into pps/loss/rtt_p99.
    pub fold: bool,
    /// Which host lost which overlay, and why (said on stderr).
    pub notes: Vec<String>,
    tx_size: u32,
    rx_size: u32,
    rotation: Option<crate::matrix::Rotation>,
    disk: Option<&'static str>,
    dscp: Option<crate::matrix::Dscp>,
    from: i64,
    to: i64,
}

impl Export {
    /// Whether anything was measured (more than states).
    pub fn measured(&self) -> bool {
        self.samples.iter().any(|s| s.overlay != overlays::STATE)
    }

    fn header<'a>(&'a self, opts: &Options, silent: &'a [&'a str]) -> format::Header<'a> {
        format::Header {
            hosts: self.hosts.len(),
            window: opts.window,
            samples: self.samples.len(),
            tx_size: self.tx_size,
            rx_size: self.rx_size,
            rotation: self.rotation,
            disk: self.disk,
            dscp: self.dscp,
            from: self.from,
            to: self.to,
            nic_gbps: opts.nic_gbps,
            line_util: format!("{}{}", opts.test_prefix, overlays::LINE_UTIL.name),
            silent,
            never: &self.never,
        }
    }
}

/// The export of a report set: pure, but for `--raw`, which reads the
/// reports in `dir` again for their per-interval rows.
pub fn build(set: &ReportSet, ctx: &Context, opts: &Options, dir: &Path) -> Result<Export> {
    let prefix = &opts.target_prefix;
    let target_of = |host: &str| {
        format!(
            "{prefix}{}",
            opts.names.get(host).map_or(host, String::as_str)
        )
    };
    let mut hosts = figures::hosts(set, ctx);
    hosts.sort_by(|a, b| set.name(a.id).cmp(set.name(b.id)));
    let mut b = samples::Builder {
        samples: Vec::new(),
        target_of: &target_of,
        run: opts.run.as_deref(),
        dscp: ctx.dscp(),
    };
    let fold = opts.peers && !ctx.layered;
    if opts.raw {
        samples::raw_samples(&mut b, dir, set)?;
    }
    samples::host_samples(&mut b, set, ctx, opts, &hosts, fold);
    // Did each host report? Silent: rows only before the window.
    for h in &hosts {
        b.state(set.name(h.id), "REPORTING");
    }
    let mut silent: Vec<String> = set
        .last_seen
        .keys()
        .filter(|id| !hosts.iter().any(|h| h.id == **id))
        .map(|&id| set.name(id).to_string())
        .collect();
    silent.sort_unstable();
    for host in &silent {
        b.state(host, "SILENT");
    }
    if opts.peers {
        samples::peer_samples(&mut b, set, &figures::flows(set, ctx), fold);
    }
    let never: Vec<String> = ctx.matrix.as_ref().map_or(Vec::new(), |m| {
        m.hosts()
            .iter()
            .filter(|h| {
                set.id_of(&h.name)
                    .is_none_or(|id| !set.last_seen.contains_key(&id))
            })
            .map(|h| h.name.clone())
            .collect()
    });
    for host in &never {
        b.state(host, "NO-DATA");
    }
    Ok(Export {
        samples: b.samples,
        hosts,
        silent,
        never,
        fold,
        notes: Vec::new(),
        tx_size: ctx.tx_size,
        rx_size: ctx.rx_size,
        rotation: ctx.matrix.as_ref().and_then(|m| m.config.rotation),
        disk: ctx.disk_mode().map(crate::matrix::DiskMode::name),
        dscp: ctx.dscp(),
        from: set.earliest_in_window.unwrap_or(set.latest),
        to: set.latest,
    })
}

/// The export of the reports in `dir`: read over `opts.window`, named by
/// `matrix` when there is one, its notes said. Pure but for reading them.
pub(crate) fn from_reports(dir: &Path, matrix: Option<Matrix>, opts: &Options) -> Result<Export> {
    let mut set = ReportSet::read(dir, opts.window, false)?;
    if set.rows_in_window == 0 {
        return Err(Error::refused(format!(
            "no rows in the last {}s -- widen --window, or --window 0 for the whole history",
            units::g(opts.window)
        )));
    }
    if let Some(m) = &matrix {
        for h in m.hosts() {
            set.id(&h.name);
        }
    }
    // A host name left as it is must be clean too (a matrix never holds such
    // a name; a report might).
    let fix = format!(
        "no matrix host can be named so: check the reports in {}/",
        dir.display()
    );
    for name in &set.names {
        if !opts.names.contains_key(name) {
            names::check_field("host name", name, &fix)?;
        }
    }
    let ctx = Context::new(&set, matrix);
    let mut export = build(&set, &ctx, opts, dir)?;
    export.notes = notes::gap_notes(opts, &set, &export);
    Ok(export)
}
