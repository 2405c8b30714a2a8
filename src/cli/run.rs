//! The flags of `mx run` (a whole run in one command, `--ramp` to find the
//! limit) and `mx demo` (a whole run on local agents).

use std::path::PathBuf;

use clap::Args;

use super::fleet::{FleetArgs, RunFlags};
use super::results::SummarizeArgs;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub report: SummarizeArgs,
    /// Seconds to run (--duration wins when set)
    #[arg(long = "for", value_name = "S", default_value_t = 60.0,
          value_parser = super::values::seconds, allow_negative_numbers = true)]
    pub for_seconds: f64,
    /// Leave the agents running afterwards
    #[arg(long)]
    pub keep: bool,
    /// Do not sweep the paths of the streams whose loss sat on some paths
    /// alone (mx trace) once the agents have ended
    #[arg(long)]
    pub no_trace: bool,

    #[command(flatten)]
    pub ramp: RampArgs,
}

/// `mx run --ramp`: find the limit on the running fleet.
#[derive(Debug, Clone, Args)]
pub struct RampArgs {
    /// Find the limit: raise every flow's rate step by step, from FROM to TO
    /// times its matrix rate (e.g. 0.5:3), on the running fleet, and stop at
    /// the first step where delivery or the p99 tail falls short (a step
    /// that fell short while an agent was short of CPU is tried again, up to
    /// 3 tries)
    #[arg(long = "ramp", value_name = "FROM:TO")]
    pub range: Option<String>,

    /// The scale added at each step of the ramp [default: a tenth of TO - FROM]
    #[arg(long, value_name = "FACTOR", allow_negative_numbers = true)]
    pub ramp_step: Option<String>,

    /// Seconds each step of the ramp holds (whole intervals) [default: 3
    /// intervals]
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub ramp_hold: Option<String>,

    /// After the first step that falls short, bisect between it and the last
    /// that held, to within 2%
    #[arg(long)]
    pub bisect: bool,
}

/// When a ramp's step holds: `mx run --ramp` judges each step by these, and
/// `mx summarize` a ramp's steps read back from their reports.
#[derive(Debug, Clone, Args)]
pub struct StepHolds {
    /// A step holds while at least this % of the requests it offered come
    /// back [default: 99.9]
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub min_delivered: Option<String>,

    /// ... and while the fleet's p99 RTT stays at or under this (800us, 5ms,
    /// 0.2s) [default: not judged]
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub max_p99: Option<String>,
}

impl RunArgs {
    /// The ramp flags given on the command line besides --ramp.
    pub(crate) fn ramp_flags_given(&self) -> Vec<&'static str> {
        let (r, holds) = (&self.ramp, &self.report.holds);
        [
            ("--ramp-step", r.ramp_step.is_some()),
            ("--ramp-hold", r.ramp_hold.is_some()),
            ("--min-delivered", holds.min_delivered.is_some()),
            ("--max-p99", holds.max_p99.is_some()),
            ("--bisect", r.bisect),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }
}

impl RunArgs {
    pub fn fleet(&self) -> &FleetArgs {
        &self.report.fleet
    }
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Local hosts to run (127.77.0.1 ...)
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub hosts: u8,
    /// Seconds of traffic
    #[arg(long, value_name = "S", default_value_t = 12.0)]
    pub seconds: f64,
    /// Requests per second per pair
    #[arg(long, value_name = "N", default_value_t = 10000.0)]
    pub pps: f64,
    /// Where to work (default: a new temporary directory; it stays, with the report page in it)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
