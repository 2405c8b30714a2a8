//! `mx summarize` and everything read from a reports directory: the
//! answer, as text, JSON, grids and a page, and the two tools built on it,
//! `compare` and the ramp's verdicts.
//!
//! Where it departs from the original tool's text, it departs towards
//! honesty: a blank is never averaged as zero, percentiles are never
//! averaged (the fleet's come exactly from histograms when the reports carry
//! them, else the worst flow's worst interval is shown and said to be, as is
//! the worst host's disk p99), and `--window 0` means the whole history.
//!
//! Two layers, data flowing one way:
//!
//! - [`analysis`]: pure numbers. [`analysis::aggregate`] reads the reports
//!   in two streaming passes, the steady intervals ([`analysis::span`])
//!   then the counts over them; [`analysis::figures`] computes every figure
//!   once, and [`analysis::diagnosis`] reads them into findings (WHAT TO DO
//!   NEXT).
//! - [`render`]: the same numbers written out: [`render::text`] (what
//!   `summarize` prints), [`render::grids`] (the N x N CSVs) and
//!   [`render::page`] (`mx report`'s HTML). Rendering reads analysis, never
//!   the reverse.
//!
//! Beside them, [`document`] is the summary as data (`--json`, and what
//! [`compare`] reads back), and [`ramp`] judges the steps of `mx run
//! --ramp`. [`Summary`] is the front door: read once, then ask it for any
//! of these.

#![forbid(unsafe_code)]

pub mod analysis;
pub mod compare;
pub mod document;
pub mod ramp;
pub mod render;

use std::path::Path;

use mx_base::error::{Error, Result};
use mx_base::units;
use mx_matrix::Matrix;

use analysis::aggregate::{ReportSet, Roster};
use analysis::coverage::coverage;
use analysis::diagnosis::{self, Finding};
use analysis::figures::{Context, Figures};

/// What a summary shows.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Seconds of history read, back from the newest row (0: all of it).
    pub window: f64,
    /// Rows of the worst-flows table.
    pub top: usize,
    /// Rows of the host table.
    pub top_hosts: usize,
    /// Keep each interval's RTT (the JSON document's interval series).
    pub series: bool,
}

/// One stream to sweep both ways (`mx trace`): its requests from the
/// sender's `sport` to the responder, its replies back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamToTrace {
    pub sender: String,
    pub responder: String,
    pub sport: u16,
}

/// The summary of a reports directory: the rows of its span, and every
/// figure, computed once.
pub struct Summary {
    set: ReportSet,
    ctx: Context,
    figs: Figures,
    opts: Options,
    findings: Vec<Finding>,
}

impl Summary {
    /// Reads the reports in `dir`; `matrix` gives names, order and layers
    /// when there is one (a summary of reports alone still works).
    pub fn read(dir: &Path, matrix: Option<Matrix>, opts: Options) -> Result<Summary> {
        Summary::read_collected(dir, matrix, opts, &[])
    }

    /// [`Summary::read`], knowing which hosts' reports could not be
    /// collected just now (ssh could not reach them): a host among them
    /// whose report ends early, or is missing, is named unreachable.
    pub fn read_collected(
        dir: &Path,
        matrix: Option<Matrix>,
        opts: Options,
        unreachable: &[String],
    ) -> Result<Summary> {
        let roster = Roster {
            hosts: matrix
                .as_ref()
                .map(|m| m.hosts().iter().map(|h| h.name.clone()).collect())
                .unwrap_or_default(),
            unreachable: unreachable.to_vec(),
        };
        let mut set = ReportSet::read_in(dir, opts.window, opts.series, None, &roster)?;
        if let Some(m) = &matrix {
            for host in m.hosts() {
                set.id(&host.name);
            }
        }
        if set.tx.is_empty() {
            return Err(Error::refused(format!(
                "no client rows in the last {}s -- are the agents still running?",
                units::g(opts.window)
            )));
        }
        let ctx = Context::new(&set, matrix);
        let figs = Figures::compute(&set, &ctx);
        let findings = diagnosis::diagnose(&set, &ctx, &figs, coverage(&set, &ctx));
        Ok(Summary {
            set,
            ctx,
            figs,
            opts,
            findings,
        })
    }

    /// The steps of a ramp (`mx run --ramp`) among the summarized
    /// intervals, which are to be summarized one by one; empty when the
    /// run was not a ramp.
    /// The steps of a ramp's reports: the ramp's own `record`
    /// ([`ramp::recorded::RECORD_FILE`]'s text) when it is these reports',
    /// with `true`; else as the rows' scales show them. Empty: not a ramp.
    pub fn ramp_steps(
        &self,
        record: Option<&str>,
    ) -> (Vec<(analysis::span::Step, ramp::Kind)>, bool) {
        let (timeline, span) = (self.set.timeline(), &self.set.span);
        let from_rows = ramp::recorded::steps(timeline, span);
        if from_rows.is_empty() {
            return (from_rows, false);
        }
        match record.and_then(|text| ramp::recorded::from_record(text, timeline, span)) {
            Some(steps) => (steps, true),
            None => (from_rows, false),
        }
    }

    /// The report interval in seconds (1 when a single tick cannot say).
    pub fn interval(&self) -> f64 {
        self.set.interval.unwrap_or(1) as f64
    }

    /// The text above WHAT TO DO NEXT.
    pub fn text(&self) -> String {
        render::text::render(&self.set, &self.ctx, &self.figs, &self.opts)
    }

    /// The N x N grids, by file name, and whether a coverage grid is among
    /// them (a layered run).
    pub fn grids(&self) -> (Vec<(&'static str, String)>, bool) {
        (
            render::grids::grids(&self.set, &self.ctx, &self.figs.flows),
            self.ctx.layered,
        )
    }

    /// WHAT TO DO NEXT and its advice.
    pub fn what_to_do_next(&self) -> String {
        render::text::what_to_do_next(&self.findings)
    }

    /// The findings WHAT TO DO NEXT says, as data.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The streams `mx trace` sweeps, both ways: every stream of each flow
    /// whose loss sat on some of its paths alone (its lossy streams and its
    /// clean ones, which clear the links they cross); with `all`, of every
    /// flow. In the order of the flows, then of their ports.
    pub fn streams_to_trace(&self, all: bool) -> Vec<StreamToTrace> {
        use analysis::diagnosis::says::LegName;
        let lossy: std::collections::BTreeSet<(&str, &str)> = self
            .findings
            .iter()
            .filter_map(|f| match &f.says {
                diagnosis::Says::PathLoss { leg, flows, .. } => Some((leg, flows)),
                _ => None,
            })
            .flat_map(|(leg, flows)| {
                flows.iter().map(move |p| match leg {
                    LegName::Requests => (p.from.as_str(), p.to.as_str()),
                    LegName::Replies => (p.to.as_str(), p.from.as_str()),
                })
            })
            .collect();
        self.figs
            .flows
            .iter()
            .map(|f| (self.set.name(f.host), self.set.name(f.peer), f))
            .filter(|(sender, responder, _)| all || lossy.contains(&(*sender, *responder)))
            .flat_map(|(sender, responder, f)| {
                f.streams.iter().map(move |s| StreamToTrace {
                    sender: sender.to_string(),
                    responder: responder.to_string(),
                    sport: s.sport,
                })
            })
            .collect()
    }

    /// Every figure as one document (`--json`, and what `compare` reads).
    pub fn document(&self) -> document::Document {
        let findings = render::findings::docs(&self.findings);
        document::document(&self.set, &self.ctx, &self.figs, findings)
    }
}
