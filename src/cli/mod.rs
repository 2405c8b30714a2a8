//! The command line, declared once with clap's derive API. `mx help` and every
//! `--help` are rendered from these declarations, so the docs cannot drift from
//! the parser. Values are only parsed here; the commands validate them against
//! the data (server list, matrix) and refuse with the original's messages.
//!
//! Environment defaults are the original's (`MX_MATRIX`, `MX_SERVERS`, ...); an
//! empty variable counts as unset (`without_empty_env`), because clap would
//! otherwise take the empty string as the value.
//!
//! Here: the top-level `Cli` and its `Command` enum, and [`command`], the
//! parser every caller uses. The flags live in one file per command group,
//! all re-exported here: `authoring.rs` (gen, check, hints), `agent.rs`,
//! `fleet.rs` (the fleet lifecycle: start, status, stop, clean, reload,
//! doctor, logs, collect, and the flags they share), `run.rs` (run, demo),
//! `results.rs` (summarize, report, compare, export) and `manual.rs` (help,
//! man, completions); `usage.rs` renders the argparse-style usage lines.

mod agent;
mod authoring;
mod fleet;
mod manual;
mod refusal;
mod results;
mod run;
mod usage;
mod values;

pub use agent::*;
pub use authoring::*;
pub use fleet::*;
pub use manual::*;
pub use refusal::refusal_line;
pub use results::*;
pub use run::*;
pub use usage::argparse_usage;

use clap::{CommandFactory, Parser, Subcommand};

/// `mx --version`: the version on a line of its own (`mx 2.2.0`, what
/// scripts parse), then the notice GNU tools print.
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nCopyright (C) 2026 the matrix-orchestrator authors",
    "\nLicense GPL-3.0-or-later <https://gnu.org/licenses/gpl.html>.",
    "\nThis is free software: you are free to change and redistribute it.",
    "\nThere is no warranty, to the extent permitted by law."
);

#[derive(Debug, Parser)]
#[command(
    name = "mx",
    version,
    long_version = LONG_VERSION,
    about = "Run a request/response UDP traffic matrix across a fleet of servers, and get \
             packets per second, loss (forward and return leg) and round-trip time back.",
    disable_help_subcommand = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build matrix.csv from the server list: who sends to whom, how fast, how big
    Gen(GenArgs),
    /// Will the NICs carry it? Per-host load of a matrix against your NIC's caps
    Check(CheckArgs),
    /// Goal -> command: the settings for what you want, with the arithmetic
    Hints(HintsArgs),
    /// The agent every host runs: answer requests, send the matrix's flows, report
    Agent(AgentArgs),
    /// Reports -> answers: pps, Gbps, loss by leg, RTT, per host, worst flows, advice
    Summarize(SummarizeArgs),
    /// The run as overlays for the datacenter floor-plan viewer (results TSV or NDJSON)
    Export(ExportArgs),
    /// Before/after: two runs side by side, each change with its noise and a verdict
    Compare(CompareArgs),
    /// One self-contained HTML page: the summary, heatmaps, the run over time, RTT
    Report(ReportArgs),
    /// Copy the agent and the matrix to every host and start the agents
    Start(StartArgs),
    /// One line per host: running (and how fast), NOT-RUNNING or NOT-DEPLOYED
    Status(StatusArgs),
    /// Stop the agents; reports and logs stay on the hosts
    Stop(StopArgs),
    /// Stop everything, delete the remote directory, and verify nothing is left
    Clean(CleanArgs),
    /// Push an edited matrix; restart only the hosts it changed, with their flags
    Reload(ReloadArgs),
    /// Is the fleet ready? ssh, architecture, cores, the hard fd limit, agents
    Doctor(DoctorArgs),
    /// Fetch every host's agent log
    Logs(LogsArgs),
    /// Fetch every host's report into --reports
    Collect(CollectArgs),
    /// After a run: sweep the lossy streams' paths hop by hop, both ways, and name the link
    Trace(TraceArgs),
    /// Always on: Prometheus targets, loss rules, alerts and a Grafana dashboard
    Monitor(MonitorArgs),
    /// start, hold --for S, summarize, stop: a whole run in one command
    Run(Box<RunArgs>),
    /// A whole run on local agents (127.77.0.x), no ssh and no root: try mx here
    Demo(DemoArgs),
    /// Every command, every switch, on one page
    Help(HelpArgs),
    /// Print the shell completion script for bash, zsh or fish
    Completions(CompletionsArgs),
    /// Print the manual page (mx.1), or write one per command into a directory
    Man(ManArgs),
}

/// Every help page opens with its usage line, lowercase as argparse prints it.
const HELP_TEMPLATE: &str =
    "{before-help}usage: {usage}\n\n{about-with-newline}\n{all-args}{after-help}";

/// The parser: the declarations above, with the original's argparse-style usage
/// line (`usage: mx start [-h] [--matrix FILE] ...`) on every command, generated
/// from those same declarations. Parse, render help and test through this.
pub fn command() -> clap::Command {
    let mut cli = Cli::command();
    let names: Vec<String> = cli
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in names {
        cli = cli.mut_subcommand(&name, |sub| {
            let usage = argparse_usage(&format!("mx {name}"), &sub);
            without_empty_env(sub)
                .override_usage(usage)
                .help_template(HELP_TEMPLATE)
        });
    }
    let usage = argparse_usage("mx", &cli);
    without_empty_env(cli)
        .override_usage(usage)
        .help_template(HELP_TEMPLATE)
}

/// The original treats an environment default set to "" (`MX_USER=`) as unset;
/// clap would take the empty string as the value, so an argument whose
/// variable is empty forgets its variable. Help names each variable and
/// never its value (`[env: MX_METRICS]`): clap writes `MX_METRICS=` for
/// one unset, which reads as set to nothing, and a value can be a secret.
fn without_empty_env(cmd: clap::Command) -> clap::Command {
    // In place: an argument taken out and put back would move in the help.
    cmd.mut_args(|arg| {
        let Some(name) = arg.get_env().map(std::ffi::OsStr::to_os_string) else {
            return arg;
        };
        let arg = arg.hide_env_values(true);
        if std::env::var_os(name).is_some_and(|value| value.is_empty()) {
            arg.env(None)
        } else {
            arg
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_parser_is_consistent() {
        Cli::command().debug_assert();
        command().debug_assert();
    }
}
