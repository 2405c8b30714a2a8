//! The flags of the commands that read reports: `mx summarize`, `report`,
//! `compare`, `export` and `trace`.

use std::path::PathBuf;

use clap::Args;

use super::fleet::{FleetArgs, ReportsDir};

/// Which to trust when reports and the matrix beside them disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Trust {
    /// The reports, read alone: the matrix beside them is left out.
    Reports,
    /// The matrix: its names, order and rates, over reports of another run.
    Matrix,
}

/// The reports a command reads, and which to trust when they and the
/// matrix disagree: `mx summarize`, `report` and `export` alike.
#[derive(Debug, Clone, Args)]
pub struct ReadReports {
    #[command(flatten)]
    pub reports: ReportsDir,

    /// When the reports were written by agents running another matrix than
    /// --matrix (another run's): summarize them anyway, trusting `reports`
    /// (read alone, without the matrix) or `matrix`
    #[arg(long, value_name = "WHICH")]
    pub trust: Option<Trust>,
}

#[derive(Debug, Clone, Args)]
pub struct SummarizeArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,

    #[command(flatten)]
    pub read: ReadReports,

    /// Seconds of the newest reports to summarize (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 60.0,
          value_parser = super::values::seconds_or_zero, allow_negative_numbers = true)]
    pub window: f64,

    /// Worst flows to list
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,

    /// Hosts to list, worst delivery first
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub top_hosts: usize,

    /// Also write N x N grids (pps, delivered, loss, rtt_p99; coverage) into DIR
    #[arg(long, value_name = "DIR")]
    pub grid: Option<PathBuf>,

    /// Use the reports already in --reports; do not collect first
    #[arg(long)]
    pub no_collect: bool,

    /// Print one JSON document (schema mx.summary/1, in docs/json.md; a
    /// ramp's: mx.ramp/1) instead of the text
    #[arg(long)]
    pub json: bool,

    /// Over a ramp (mx run --ramp): when each step held
    #[command(flatten)]
    pub holds: super::StepHolds,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Run it once the agents have ended (mx run does, when a run's loss sat on some \
                  paths alone): each sweep binds its stream's own ports. Writes paths.trace \
                  beside the reports, which summarize, report and --json then read."
)]
pub struct TraceArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,

    #[command(flatten)]
    pub reports: ReportsDir,

    /// Seconds of the newest reports read for the lossy streams (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 60.0,
          value_parser = super::values::seconds_or_zero, allow_negative_numbers = true)]
    pub window: f64,

    /// Sweep every stream of every flow, not only the flows whose loss sat on some paths
    #[arg(long)]
    pub all: bool,

    /// Probes at each TTL (a link that drops a tenth of what crosses it shows over tens)
    #[arg(long, value_name = "N", default_value_t = crate::agent::trace::DEFAULT_PROBES,
          value_parser = clap::value_parser!(u16).range(1..=100))]
    pub probes: u16,

    /// Seconds each host's sweeps may take; the streams left are said not traced
    #[arg(long = "for", value_name = "S", default_value_t = 60.0,
          value_parser = super::values::seconds, allow_negative_numbers = true)]
    pub trace_for: f64,

    /// Use the reports already in --reports; do not collect first
    #[arg(long)]
    pub no_collect: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,

    #[command(flatten)]
    pub read: ReadReports,

    /// Seconds of the newest reports to show (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 0.0,
          value_parser = super::values::seconds_or_zero, allow_negative_numbers = true)]
    pub window: f64,

    /// Use the reports already in --reports; do not collect first
    #[arg(long)]
    pub no_collect: bool,

    /// The page to write
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "report.html"
    )]
    pub output: PathBuf,

    /// Also write each heatmap and chart as its own SVG file into DIR
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,

    /// Compare this run with an earlier one (a reports directory, or a summary saved with `summarize --json`), as `mx compare RUN` this would
    #[arg(long, value_name = "RUN")]
    pub compare: Option<PathBuf>,

    /// With --compare: compare runs of different shapes anyway
    #[arg(long, requires = "compare")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The run before: a reports directory, or a summary saved with `summarize --json`
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// The run after, the same way
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// The matrix of both runs, for pool names (used when there; reports alone work)
    #[arg(
        long,
        value_name = "FILE",
        env = "MX_MATRIX",
        hide_env_values = true,
        default_value = crate::fleet::DEFAULT_MATRIX
    )]
    pub matrix: PathBuf,

    /// Seconds of each reports directory's newest reports (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 0.0,
          value_parser = super::values::seconds_or_zero, allow_negative_numbers = true)]
    pub window: f64,

    /// Compare runs of different shapes (hosts, flows, sizes, class) anyway
    #[arg(long)]
    pub force: bool,

    /// Hosts and flows to list
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,

    /// Print one JSON document (schema mx.compare/1, in docs/json.md) instead of the text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,

    #[command(flatten)]
    pub read: ReadReports,

    /// Seconds of the newest reports to reduce over (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 60.0,
          value_parser = super::values::seconds_or_zero, allow_negative_numbers = true)]
    pub window: f64,

    /// Use the reports already in --reports (and the matrix is optional); do not collect first
    #[arg(long)]
    pub no_collect: bool,

    /// Where to write ('-' = standard output)
    #[arg(short = 'o', long = "output", value_name = "FILE", default_value = "-")]
    pub output: PathBuf,

    /// Append to --output instead of replacing it
    #[arg(long)]
    pub append: bool,

    /// NDJSON instead of the viewer's TSV
    #[arg(long)]
    pub json: bool,

    /// Also one sample per host per interval (tagged ts=) for the host-row figures
    #[arg(long)]
    pub raw: bool,

    /// Also one sample per flow, tagged peer= (and layer= on layered runs)
    #[arg(long)]
    pub peers: bool,

    /// NIC line rate in Gb/s: adds line_util and pins the Gb/s overlays to 0..G
    #[arg(long, value_name = "G", value_parser = super::values::gbps, allow_negative_numbers = true)]
    pub nic_gbps: Option<f64>,

    /// File of `mxname target` lines mapping host names to floor-plan targets
    #[arg(long, value_name = "FILE")]
    pub names: Option<PathBuf>,

    /// Prefix for every target (e.g. DH1/A/)
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub target_prefix: String,

    /// Prefix for every overlay name
    #[arg(long, value_name = "PREFIX", default_value = "mx_")]
    pub test_prefix: String,

    /// Tag every sample run=LABEL
    #[arg(long, value_name = "LABEL")]
    pub run: Option<String>,

    /// Leave out the !test lines
    #[arg(long)]
    pub no_meta: bool,
}
