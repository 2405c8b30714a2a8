//! The flags of `mx agent`, and the agent flags (`AgentFlags`) that the fleet
//! commands pass to every agent they start.

use std::path::PathBuf;

use clap::Args;

/// `--workers`: `auto` or a count (at least 1: the agent command refuses less).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkersArg {
    Auto,
    Count(i64),
}

/// Parses `--workers`: `auto`, or a whole number (its range is checked by
/// [`check_flags`](crate::commands::agent::check_flags), so that a negative
/// count gets the same refusal as 0).
pub(crate) fn parse_workers(text: &str) -> Result<WorkersArg, String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("auto") {
        return Ok(WorkersArg::Auto);
    }
    match t.parse::<i64>() {
        Ok(n) => Ok(WorkersArg::Count(n)),
        Err(_) => Err(format!("--workers wants a number or 'auto' (got '{text}')")),
    }
}

/// How the agents run: the flags `mx start` passes to every agent, and that
/// each agent stamps for `mx reload` to reuse.
#[derive(Debug, Clone, Args)]
pub struct AgentFlags {
    /// Seconds per report interval; rows land on wall-clock multiples of it
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 5.0,
        allow_negative_numbers = true
    )]
    pub interval: f64,

    /// Stop by itself after this many seconds (0 = run until signalled)
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub duration: f64,

    /// Worker threads: 'auto' = one per core, capped at flows x streams + 1
    #[arg(long, value_name = "auto|N", default_value = "auto",
          value_parser = parse_workers, allow_negative_numbers = true)]
    pub workers: WorkersArg,

    /// Sockets per peer; the pair's rate is split across them (1..256)
    #[arg(
        long,
        value_name = "S",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    pub streams: i64,

    /// Bind the traffic to this interface or address (fleet commands resolve it on
    /// every host and retarget the matrix; an agent refuses an address the matrix
    /// does not give it)
    #[arg(
        long,
        value_name = "IFACE|ADDR",
        env = "IPERF_BIND",
        hide_env_values = true
    )]
    pub bind: Option<String>,

    /// SO_SNDBUF of every socket, bytes (0 = kernel default)
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub sndbuf: i64,

    /// SO_RCVBUF of every socket, bytes (0 = sized for the packets: 8 MiB or 512
    /// requests on the responders, 4 MiB or 256 replies per flow)
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub rcvbuf: i64,

    /// Spin over the sockets instead of sleeping: lowest latency, one busy core per worker
    #[arg(long)]
    pub busy_poll: bool,

    /// One datagram per trip through the stack: no UDP GSO/GRO (by default runs of
    /// datagrams to one peer go as one GSO super-datagram, read back with GRO,
    /// where the kernel has them)
    #[arg(long)]
    pub no_gso: bool,

    /// Serve each agent's counts to Prometheus on this port (or ADDR:PORT),
    /// at /metrics, in the OpenMetrics text format
    #[arg(long, value_name = "[ADDR:]PORT", env = "MX_METRICS")]
    pub metrics: Option<String>,

    /// How much of its report each agent keeps: a size (512M, 2G) or an age
    /// (12h, 14d); past it the oldest rows are dropped. 0 keeps it all
    #[arg(long, value_name = "SIZE|AGE", default_value = crate::agent::report_keep::DEFAULT)]
    pub keep_report: String,

    /// Size of each host's data file in a disk run (K/M/G/T, binary; at least 1M;
    /// written once, reused by later runs)
    #[arg(long, value_name = "SIZE")]
    pub disk_size: Option<String>,

    #[command(flatten)]
    pub disk_depth: DiskDepthArg,
}

/// `--disk-depth`, on the agent's flags and on `mx doctor`'s (whose fd
/// check counts the disk threads' handles).
#[derive(Debug, Clone, Copy, Args)]
pub struct DiskDepthArg {
    /// Disk operations each worker keeps in flight in a disk run: a pool of N
    /// I/O threads per worker, so a host's queue depth is --workers x N (1..256)
    #[arg(
        long = "disk-depth",
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    pub n: i64,
}

impl AgentFlags {
    /// These flags as agent arguments: every one that differs from its default,
    /// `--interval` always.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut flags = vec!["--interval".to_string(), crate::units::g(self.interval)];
        if self.duration != 0.0 {
            flags.extend(["--duration".to_string(), crate::units::g(self.duration)]);
        }
        if let WorkersArg::Count(n) = self.workers {
            flags.extend(["--workers".to_string(), n.to_string()]);
        }
        if self.streams != 1 {
            flags.extend(["--streams".to_string(), self.streams.to_string()]);
        }
        if let Some(bind) = &self.bind {
            flags.extend(["--bind".to_string(), bind.clone()]);
        }
        if self.sndbuf != 0 {
            flags.extend(["--sndbuf".to_string(), self.sndbuf.to_string()]);
        }
        if self.rcvbuf != 0 {
            flags.extend(["--rcvbuf".to_string(), self.rcvbuf.to_string()]);
        }
        if self.busy_poll {
            flags.push("--busy-poll".to_string());
        }
        if self.no_gso {
            flags.push("--no-gso".to_string());
        }
        if let Some(size) = &self.disk_size {
            flags.extend(["--disk-size".to_string(), size.clone()]);
        }
        if self.disk_depth.n != 1 {
            flags.extend(["--disk-depth".to_string(), self.disk_depth.n.to_string()]);
        }
        if self.keep_report != crate::agent::report_keep::DEFAULT {
            flags.extend(["--keep-report".to_string(), self.keep_report.clone()]);
        }
        if let Some(metrics) = &self.metrics {
            flags.extend(["--metrics".to_string(), metrics.clone()]);
        }
        flags
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Writes report.csv (one row per flow per interval), and beside it agent.pid and \
                  agent.stamp (what it loaded, and these flags). SIGTERM or SIGINT: a final \
                  flush, then exit 0."
)]
pub struct AgentArgs {
    /// The matrix to run
    #[arg(long, value_name = "FILE", default_value = "matrix.csv")]
    pub matrix: PathBuf,

    /// Which matrix host this is (default: the hostname, else the one local address)
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,

    /// Where to append the report rows
    #[arg(long, value_name = "FILE", default_value = "report.csv")]
    pub report: PathBuf,

    /// Append the log (status lines, diagnostics) to FILE instead of stdout/stderr
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// Listen and answer, but send nothing until the fleet's start instant
    /// appears in agent.start beside the report (how `mx start` launches agents)
    #[arg(long, conflicts_with = "start_at")]
    pub armed: bool,

    /// Begin sending at this wall-clock time (Unix seconds; rounded to a whole
    /// interval) instead of at once
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub start_at: Option<f64>,

    /// Seconds the responder keeps answering after the flows end (--duration,
    /// or the end instant `mx stop` writes into agent.end)
    #[arg(long, value_name = "SECONDS", default_value_t = crate::agent::clock::DEFAULT_GRACE,
          allow_negative_numbers = true)]
    pub grace: f64,

    /// The data file of a disk run (its I/O goes to random blocks of it)
    #[arg(long, value_name = "FILE", default_value = "disk.dat")]
    pub disk_file: PathBuf,

    /// Write the data file (or find an earlier one of the right size), then exit
    #[arg(long)]
    pub prepare_disk: bool,

    /// Sweep the TTL of each tuple SRC:SPORT>DST:DPORT (`,` between), print
    /// its hops a line each, then exit: how `mx trace` reaches each host
    #[arg(long, value_name = "TUPLES", hide = true)]
    pub trace: Option<String>,

    /// Probes at each TTL of a --trace sweep
    #[arg(long, value_name = "N", hide = true,
          default_value_t = crate::agent::trace::DEFAULT_PROBES,
          value_parser = clap::value_parser!(u16).range(1..=100))]
    pub trace_probes: u16,

    /// Seconds the --trace sweeps may take in all; the tuples left are said
    /// not traced
    #[arg(long, value_name = "SECONDS", hide = true, default_value_t = 60.0,
          value_parser = super::values::seconds)]
    pub trace_for: f64,

    #[command(flatten)]
    pub flags: AgentFlags,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_is_auto_or_a_whole_number() {
        assert_eq!(parse_workers("auto"), Ok(WorkersArg::Auto));
        assert_eq!(parse_workers("4"), Ok(WorkersArg::Count(4)));
        assert_eq!(parse_workers("-1"), Ok(WorkersArg::Count(-1)));
        assert!(parse_workers("x").is_err());
    }
}
