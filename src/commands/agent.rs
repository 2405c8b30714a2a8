//! `mx agent`: the flags of the per-host program, checked and turned into an
//! [`AgentConfig`], then the run itself ([`agent::run`]).
//!
//! Every rule on the agent's flags lives here, once: `mx agent` refuses its
//! own flags with them, and the controller (`mx start`, `mx run`, and
//! `mx reload` for the flags stamped on each host) refuses the flags it will
//! pass with [`check_flags`] before anything is copied, so both refuse with
//! the same words.

use crate::agent::config::{AgentConfig, MAX_STREAMS, MetricsAt, RunSettings};
use crate::agent::{self, disk};
use crate::cli::{AgentArgs, AgentFlags, WorkersArg};
use crate::error::{Error, Result};
use crate::units;

/// Runs the agent `args` ask for; returns its exit code.
pub fn run(args: &AgentArgs) -> Result<u8> {
    // The log first, so that a refusal below lands in it too: the fleet
    // starts agents with their output thrown away and reads the log.
    if let Some(log) = &args.log {
        agent::log_to(log)?;
    }
    if let Some(spec) = &args.trace {
        let tuples = agent::trace::parse(spec)?;
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_secs_f64(args.trace_for);
        agent::trace::run(&tuples, args.trace_probes, deadline, &mut std::io::stdout())?;
        return Ok(0);
    }
    let config = config(args)?;
    if args.prepare_disk {
        let prepared = agent::disk::file::prepare(&config.disk_file, config.run.disk_size)?;
        for line in prepared.lines() {
            println!("{line}");
        }
        return Ok(0);
    }
    agent::run(&config)
}

/// Refuses the agent flags no agent could run with: the settings they make,
/// thrown away.
pub fn check_flags(flags: &AgentFlags) -> Result<()> {
    settings(flags).map(drop)
}

/// The agent's run as `args` describe it, or the refusal of its first bad flag.
fn config(args: &AgentArgs) -> Result<AgentConfig> {
    let run = settings(&args.flags)?;
    Ok(AgentConfig {
        matrix: args.matrix.clone(),
        host: args.host.clone(),
        report: args.report.clone(),
        armed: args.armed,
        start_at: args.start_at,
        grace: grace(args.grace)?,
        disk_file: args.disk_file.clone(),
        run,
    })
}

/// The settings every agent of a run shares, checked in the order of the
/// flags' help.
fn settings(flags: &AgentFlags) -> Result<RunSettings> {
    if !(flags.interval > 0.0 && flags.interval.is_finite()) {
        return Err(Error::refused(format!(
            "--interval must be a positive number of seconds (got {})",
            units::g(flags.interval)
        )));
    }
    if !(flags.duration >= 0.0 && flags.duration.is_finite()) {
        return Err(Error::refused(format!(
            "--duration must be 0 (run until stopped) or a number of seconds (got {})",
            units::g(flags.duration)
        )));
    }
    let workers = match flags.workers {
        WorkersArg::Auto => None,
        WorkersArg::Count(n) => match usize::try_from(n) {
            Ok(count) if count >= 1 => Some(count),
            _ => {
                return Err(Error::refused(format!(
                    "--workers must be at least 1, or 'auto' (got {n})"
                )));
            }
        },
    };
    let streams = match u16::try_from(flags.streams) {
        _ if flags.streams < 1 => return Err(Error::refused("--streams must be at least 1")),
        Ok(streams) if streams <= MAX_STREAMS => streams,
        _ => {
            return Err(Error::refused(format!(
                "--streams above {MAX_STREAMS} is almost certainly a mistake (got {})",
                flags.streams
            )));
        }
    };
    let bytes = |flag: &str, bytes: i64, zero: &str| {
        usize::try_from(bytes).map_err(|_| {
            Error::refused(format!(
                "{flag} must be 0 ({zero}) or a number of bytes (got {bytes})"
            ))
        })
    };
    let sndbuf = bytes("--sndbuf", flags.sndbuf, "the kernel's default")?;
    let rcvbuf = bytes("--rcvbuf", flags.rcvbuf, "sized for the packets")?;
    let disk_size = match &flags.disk_size {
        None => disk::file::DEFAULT_SIZE,
        Some(text) => disk::file::parse_size(text).map_err(Error::refused)?,
    };
    let disk_depth = disk_depth(flags.disk_depth.n)?;
    Ok(RunSettings {
        interval: flags.interval,
        duration: flags.duration,
        workers,
        streams,
        sndbuf,
        rcvbuf,
        busy_poll: flags.busy_poll,
        no_gso: flags.no_gso,
        bind: flags.bind.clone(),
        disk_size,
        disk_depth,
        keep: agent::report_keep::parse(&flags.keep_report).map_err(Error::refused)?,
        metrics: flags.metrics.as_deref().map(metrics_addr).transpose()?,
        stamp_words: flags.to_args(),
    })
}

/// `--disk-depth`: disk operations in flight per worker, 1 to
/// [`disk::engine::MAX_DEPTH`].
pub(crate) fn disk_depth(depth: i64) -> Result<usize> {
    match usize::try_from(depth) {
        Ok(n) if (1..=disk::engine::MAX_DEPTH).contains(&n) => Ok(n),
        _ => Err(Error::refused(format!(
            "--disk-depth must be 1 to {} disk operations in flight per worker (got {depth})",
            disk::engine::MAX_DEPTH
        ))),
    }
}

/// `--metrics`: a port (on the host's own address) or ADDR:PORT.
pub(crate) fn metrics_addr(text: &str) -> Result<MetricsAt> {
    let refused = || {
        Error::refused(format!(
            "--metrics '{text}': want the port to serve /metrics on (9464), or ADDR:PORT (10.0.0.1:9464, [::]:9464)"
        ))
    };
    let t = text.trim();
    if let Ok(port) = t.parse::<u64>() {
        return match u16::try_from(port) {
            Ok(0) => Err(Error::refused(format!(
                "--metrics '{text}': port 0 is no port: give 1 to 65535 (9464 is Prometheus's custom)"
            ))),
            Ok(port) => Ok(MetricsAt::Port(port)),
            Err(_) => Err(Error::refused(format!(
                "--metrics '{text}': a port is 1 to 65535"
            ))),
        };
    }
    t.parse::<std::net::SocketAddr>()
        .ok()
        .filter(|a| a.port() != 0)
        .map(MetricsAt::Addr)
        .ok_or_else(refused)
}

/// Refuses a `--grace` the agent could not keep (the agent's own flag: the
/// controller writes the grace into the control files itself).
fn grace(seconds: f64) -> Result<f64> {
    if !(seconds >= 0.0 && seconds.is_finite()) {
        return Err(Error::refused(format!(
            "--grace must be 0 or a number of seconds (got {})",
            units::g(seconds)
        )));
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The agent's flags as `mx agent` parses them.
    fn args(words: &[&str]) -> AgentArgs {
        #[derive(Parser)]
        struct Line {
            #[command(flatten)]
            agent: AgentArgs,
        }
        Line::try_parse_from(std::iter::once("mx").chain(words.iter().copied()))
            .unwrap()
            .agent
    }

    fn refusal(words: &[&str]) -> String {
        config(&args(words)).unwrap_err().to_string()
    }

    #[test]
    fn the_defaults_make_a_config_with_the_interval_stamped() {
        let config = config(&args(&[])).unwrap();
        assert_eq!(config.run.workers, None);
        assert_eq!(config.run.streams, 1);
        assert_eq!((config.run.sndbuf, config.run.rcvbuf), (0, 0));
        assert_eq!(config.run.stamp_words, ["--interval", "5"]);
        // One disk operation in flight per worker, as before the flag.
        assert_eq!(config.run.disk_depth, 1);
        let deep = super::config(&args(&["--disk-depth", "8"])).unwrap();
        assert_eq!(deep.run.disk_depth, 8);
        // Stamped for reload, which passes it on.
        assert_eq!(
            deep.run.stamp_words,
            ["--interval", "5", "--disk-depth", "8"]
        );
    }

    #[test]
    fn every_bad_flag_is_refused_in_its_own_words() {
        for (words, says) in [
            (&["--interval", "0"][..], "--interval must be a positive"),
            (&["--duration", "-1"], "--duration must be 0"),
            (
                &["--workers", "0"],
                "--workers must be at least 1, or 'auto' (got 0)",
            ),
            (&["--workers", "-3"], "(got -3)"),
            (&["--streams", "0"], "--streams must be at least 1"),
            (&["--streams", "257"], "--streams above 256"),
            (&["--streams", "70000"], "(got 70000)"),
            (
                &["--sndbuf", "-1"],
                "--sndbuf must be 0 (the kernel's default)",
            ),
            (
                &["--rcvbuf", "-1"],
                "--rcvbuf must be 0 (sized for the packets)",
            ),
            (&["--grace", "-1"], "--grace must be 0 or a number"),
            (
                &["--disk-depth", "0"],
                "--disk-depth must be 1 to 256 disk operations in flight per worker (got 0)",
            ),
            (&["--disk-depth", "1000"], "--disk-depth must be 1 to 256"),
            (&["--disk-depth", "-2"], "(got -2)"),
        ] {
            assert!(
                refusal(words).contains(says),
                "{words:?}: {}",
                refusal(words)
            );
        }
        let flags = args(&["--streams", "0"]).flags;
        assert_eq!(
            check_flags(&flags).unwrap_err().to_string(),
            refusal(&["--streams", "0"])
        );
    }

    #[test]
    fn the_flags_are_refused_before_the_grace() {
        assert!(refusal(&["--grace", "-1", "--interval", "0"]).contains("--interval"));
    }
}
