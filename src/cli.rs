//! The command line, declared once with clap's derive API. `mx help` and every
//! `--help` are rendered from these declarations, so the docs cannot drift from
//! the parser. Values are only parsed here; the commands validate them against
//! the data (server list, matrix) and refuse with the original's messages.
//!
//! Environment defaults are the original's (`MX_MATRIX`, `MX_SERVERS`, ...); an
//! empty variable counts as unset (`without_empty_env`), because clap would
//! otherwise take the empty string as the value.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

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

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (elvish and powershell too)
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write mx.1 and mx-COMMAND.1 for every command into DIR instead of printing mx.1
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct HelpArgs {
    /// Show only this command's page, as `mx COMMAND --help` does
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

/// `--servers`, shared by the commands that read the server list.
#[derive(Debug, Args)]
pub struct ServersArg {
    /// Server list: one host token per line (`name[=addr[:port]]`), # comments
    /// allowed; `slurm`: the nodes of the Slurm allocation this shell is in
    /// (./slurm reads a file so named)
    #[arg(
        long = "servers",
        value_name = "FILE",
        env = "MX_SERVERS",
        hide_env_values = true,
        default_value = "servers.txt"
    )]
    pub path: PathBuf,
}

/// `--pool NAME=FILE` (repeatable), `--between A B` and `--duplex`: the
/// pool-to-pool shapes of `mx gen`, and what `mx hints` sizes.
#[derive(Debug, Args, Default)]
pub struct PoolArgs {
    /// A named pool of servers (e.g. the hosts behind one top-of-rack switch):
    /// NAME=FILE, the file a server list as for --servers; repeat for each pool
    #[arg(long = "pool", value_name = "NAME=FILE", value_parser = parse_pool)]
    pub pools: Vec<(String, PathBuf)>,

    /// Pool to pool: hosts of FROM send, hosts of TO answer (no flow inside a
    /// pool); `--between A A` is the mesh inside pool A [default: the two pools]
    #[arg(long, num_args = 2, value_names = ["FROM", "TO"])]
    pub between: Option<Vec<String>>,

    /// Both pools send to each other (default: simplex, FROM sends)
    #[arg(long)]
    pub duplex: bool,
}

/// Parses `--pool NAME=FILE`.
pub fn parse_pool(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((name, file))
            if crate::matrix::pools::Pools::valid_name(name.trim()) && !file.trim().is_empty() =>
        {
            Ok((name.trim().to_string(), PathBuf::from(file.trim())))
        }
        _ => Err(format!(
            "want NAME=FILE, NAME of letters, digits, '_', '-' or '.' (got '{text}')"
        )),
    }
}

/// `--tx-size` and `--rx-size`, shared by the commands that shape packets.
#[derive(Debug, Args)]
pub struct PacketSizes {
    /// Bytes every request carries (the UDP payload, 32-byte header included; 32..65507)
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    pub tx_size: i64,

    /// Bytes every reply carries (32..65507)
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    pub rx_size: i64,
}

impl PacketSizes {
    /// The (request, reply) sizes, refused when out of range.
    pub fn checked(&self) -> crate::error::Result<(u32, u32)> {
        let check = |flag, bytes| {
            crate::matrix::packet_size(flag, bytes).map_err(crate::error::Error::refused)
        };
        Ok((
            check("--tx-size", self.tx_size)?,
            check("--rx-size", self.rx_size)?,
        ))
    }
}

/// `--mtu`, shared by the commands that weigh datagrams on the wire.
#[derive(Debug, Args)]
pub struct MtuArg {
    /// Path MTU in bytes: a datagram larger than it (with its IP and UDP headers)
    /// leaves as IP fragments, each a packet of its own at the NIC (576..65535;
    /// IPv6 hosts 1280 at least)
    // Text, read by `checked`: every value that is no MTU (out of range,
    // fractional, NaN, a word) gets the same one-line refusal.
    #[arg(
        long = "mtu",
        value_name = "BYTES",
        default_value_t = crate::plan::Mtu::DEFAULT.bytes().to_string(),
        allow_negative_numbers = true
    )]
    pub text: String,
}

impl MtuArg {
    /// The MTU, refused when it is no whole number in an IP path's range.
    pub fn checked(&self) -> crate::error::Result<crate::plan::Mtu> {
        let bytes: i64 = self.text.trim().parse().map_err(|_| {
            crate::error::Error::refused(format!(
                "--mtu wants a whole number of bytes, {}..{} (got '{}')",
                crate::plan::Mtu::MIN_IPV4,
                crate::plan::Mtu::MAX,
                self.text
            ))
        })?;
        crate::plan::Mtu::checked("--mtu", bytes).map_err(crate::error::Error::refused)
    }

    /// [`checked`](Self::checked), and at least IPv6's minimum for IPv6 hosts.
    pub fn for_family(&self, ip: crate::units::Ip) -> crate::error::Result<crate::plan::Mtu> {
        self.checked()?
            .for_family("--mtu", ip)
            .map_err(crate::error::Error::refused)
    }

    /// `--mtu N` for a suggested command line: empty for the default.
    pub fn flag(&self) -> String {
        match self.checked() {
            Ok(mtu) if mtu != crate::plan::Mtu::DEFAULT => format!(" --mtu {}", mtu.bytes()),
            _ => String::new(),
        }
    }
}

/// A packet rate on the command line: a number, or `max` for unpaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PpsArg {
    Rate(f64),
    Max,
}

/// Parses `--pps`: `max` (or `inf`, `unpaced`), or a number that is not negative.
pub fn parse_pps(text: &str) -> Result<PpsArg, String> {
    let t = text.trim();
    if ["max", "inf", "unpaced"]
        .iter()
        .any(|w| t.eq_ignore_ascii_case(w))
    {
        return Ok(PpsArg::Max);
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_nan() => Err(format!("'{text}' is not a packet rate (a number or 'max')")),
        Ok(v) if v < 0.0 => Err(format!("negative packet rate '{text}'")),
        Ok(v) => Ok(PpsArg::Rate(v)),
        Err(_) => Err(format!("'{text}' is not a packet rate (a number or 'max')")),
    }
}

/// `--workers`: `auto` or a count (at least 1: the agent command refuses less).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkersArg {
    Auto,
    Count(i64),
}

/// Parses `--workers`: `auto`, or a whole number (its range is checked by
/// [`check_flags`](crate::commands::agent::check_flags), so that a negative
/// count gets the same refusal as 0).
pub fn parse_workers(text: &str) -> Result<WorkersArg, String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("auto") {
        return Ok(WorkersArg::Auto);
    }
    match t.parse::<i64>() {
        Ok(n) => Ok(WorkersArg::Count(n)),
        Err(_) => Err(format!("--workers wants a number or 'auto' (got '{text}')")),
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Shapes: the full mesh (default); --peers K, a k-regular shuffle (K flows out and K in \
                  per host); --peers K --dwell T, K-peer layers rotated every T seconds so that one \
                  cycle measures every ordered pair exactly once."
)]
pub struct GenArgs {
    #[command(flatten)]
    pub servers: ServersArg,

    #[command(flatten)]
    pub pools: PoolArgs,

    /// Requests per second per pair, or 'max' for unpaced [default: 10000]
    #[arg(long, value_name = "N|max", value_parser = parse_pps, allow_negative_numbers = true,
          conflicts_with = "gbps")]
    pub pps: Option<PpsArg>,

    /// Size the rate from a per-host request budget in Gb/s on the wire instead
    #[arg(long, value_name = "G", allow_negative_numbers = true)]
    pub gbps: Option<f64>,

    #[command(flatten)]
    pub sizes: PacketSizes,

    #[command(flatten)]
    pub mtu: MtuArg,

    /// UDP port the agents listen on, for hosts whose token names none
    #[arg(long, value_name = "PORT", default_value_t = 5300,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,

    /// Where to write the matrix ('-' = standard output)
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "matrix.csv"
    )]
    pub output: PathBuf,

    /// Each host sends to and receives from exactly K shuffled peers instead of all N-1
    #[arg(long, value_name = "K")]
    pub peers: Option<i64>,

    /// Seed of the --peers shuffle (default: random; printed, and kept in the matrix)
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub seed: Option<i64>,

    /// Rotate through disjoint K-peer layers, T seconds each (needs --peers)
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub dwell: Option<f64>,

    /// Pad the short last layer with repeats so every layer carries exactly K peers
    #[arg(long)]
    pub equal_layers: bool,

    /// Put disks in the round trip: every request's payload (requests), every
    /// reply's (replies) or both is read from its sender's disk and written to
    /// its receiver's
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = parse_disk_mode)]
    pub disk: crate::matrix::DiskMode,

    /// Mark every request and reply with this traffic class: a DSCP 0..63 or its
    /// name (EF, AF11..AF43, CS0..CS7), kept as dscp=N in the matrix (0: best
    /// effort, unmarked)
    #[arg(long, value_name = "N|NAME", value_parser = parse_dscp, default_value = "0")]
    pub dscp: crate::matrix::Dscp,
}

/// Parses `--dscp`: a number 0..63 or a name.
pub fn parse_dscp(text: &str) -> Result<crate::matrix::Dscp, String> {
    crate::matrix::Dscp::parse(text).map_err(|why| format!("--dscp wants {why} (got '{text}')"))
}

/// Parses `--disk`: off, requests, replies or both.
pub fn parse_disk_mode(text: &str) -> Result<crate::matrix::DiskMode, String> {
    crate::matrix::DiskMode::parse(text)
        .ok_or_else(|| format!("--disk wants off, requests, replies or both (got '{text}')"))
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The matrix to check
    #[arg(
        long,
        value_name = "FILE",
        env = "MX_MATRIX",
        hide_env_values = true,
        default_value = "matrix.csv"
    )]
    pub matrix: PathBuf,

    /// NIC line rate in Gb/s per direction; a host over it is flagged
    #[arg(long, value_name = "G")]
    pub nic_gbps: Option<f64>,

    /// NIC packet rate in millions of packets/s per direction
    #[arg(long, value_name = "M")]
    pub nic_mpps: Option<f64>,

    /// Hosts to list, busiest first (caps are checked on every host)
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub top: usize,

    #[command(flatten)]
    pub mtu: MtuArg,

    /// Print one JSON document (schema mx.check/1, in docs/json.md) instead of the text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Without a sizing switch, prints the cheat sheet: goal -> command.")]
pub struct HintsArgs {
    #[command(flatten)]
    pub servers: ServersArg,

    #[command(flatten)]
    pub pools: PoolArgs,

    /// Size the run for this many requests/s per pair ('max': unpaced, what is known of it)
    #[arg(long, value_name = "N|max", value_parser = parse_pps)]
    pub pps_per_pair: Option<PpsArg>,

    /// Size the run for this many requests/s out of every host ('max': unpaced)
    #[arg(long, value_name = "N|max", value_parser = parse_pps)]
    pub pps_per_host: Option<PpsArg>,

    /// Size the run for this many Gb/s of requests out of every host (wire rate)
    #[arg(long, value_name = "G")]
    pub gbps_per_host: Option<f64>,

    /// Peers per host the run will use (default: all N-1, the full mesh; with
    /// --between, every host of the other pool)
    #[arg(long, value_name = "K")]
    pub peers: Option<i64>,

    #[command(flatten)]
    pub sizes: PacketSizes,

    #[command(flatten)]
    pub mtu: MtuArg,
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

    /// Size of each host's data file in a disk run (K/M/G/T, binary; at least 1M;
    /// written once, reused by later runs)
    #[arg(long, value_name = "SIZE")]
    pub disk_size: Option<String>,
}

impl AgentFlags {
    /// These flags as agent arguments: every one that differs from its default,
    /// `--interval` always.
    pub fn to_args(&self) -> Vec<String> {
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

    #[command(flatten)]
    pub flags: AgentFlags,
}

/// The flags every fleet command takes.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// The run's matrix
    #[arg(
        long,
        value_name = "FILE",
        env = "MX_MATRIX",
        hide_env_values = true,
        default_value = crate::fleet::DEFAULT_MATRIX
    )]
    pub matrix: PathBuf,

    /// ssh user (default: MX_USER, then SSH_USER, then your ssh config)
    #[arg(long, value_name = "USER", env = "MX_USER", hide_env_values = true)]
    pub user: Option<String>,

    /// Hosts handled at once
    #[arg(
        long,
        value_name = "N",
        env = "MX_JOBS",
        hide_env_values = true,
        default_value_t = 64
    )]
    pub jobs: usize,

    /// The one directory mx uses on every host (deleted by mx clean); a fleet
    /// per directory, so two runs (e.g. two traffic classes) go side by side
    #[arg(
        long,
        value_name = "DIR",
        env = "MX_REMOTE_DIR",
        hide_env_values = true,
        default_value = crate::fleet::DEFAULT_REMOTE_DIR
    )]
    pub remote_dir: String,

    /// Print the ssh and scp (or srun and sbcast) commands instead of running them
    #[arg(long)]
    pub dry_run: bool,

    /// Run the fleet on this machine, one sandbox directory per host under DIR
    /// (hosts on 127.0.0.x): no ssh, no root
    #[arg(long, value_name = "DIR")]
    pub local: Option<PathBuf>,

    /// How the hosts are reached: ssh, or slurm (inside an allocation, its
    /// nodes through srun and sbcast: see `mx gen --servers slurm`)
    #[arg(
        long,
        value_name = "ssh|slurm",
        env = "MX_VIA",
        hide_env_values = true,
        default_value = "ssh",
        hide_possible_values = true
    )]
    pub via: Via,

    // Hidden, as in the original: no usage line or page shows it, and `mx help`
    // lists MX_SSH with this text instead of pointing at the switch.
    /// The ssh command every fleet command runs, split at whitespace (e.g. "ssh -F my_config")
    #[arg(
        long,
        hide = true,
        env = "MX_SSH",
        hide_env_values = true,
        default_value = "ssh"
    )]
    pub ssh: String,

    // Hidden, as in the original: no usage line or page shows it, and `mx help`
    // lists MX_SCP with this text instead of pointing at the switch.
    /// The scp command every fleet command runs, split at whitespace (e.g. "scp -F my_config")
    #[arg(
        long,
        hide = true,
        env = "MX_SCP",
        hide_env_values = true,
        default_value = "scp"
    )]
    pub scp: String,
}

/// How a fleet command reaches its hosts (`--via`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Via {
    /// The system's OpenSSH (MX_SSH, MX_SCP).
    #[default]
    Ssh,
    /// The nodes of the Slurm allocation this shell is in: srun, sbcast.
    Slurm,
}

/// `--agent`: the executable deployed as the agent on every host.
#[derive(Debug, Clone, Args)]
pub struct AgentBinary {
    /// The agent executable to deploy (default: this mx)
    #[arg(
        long = "agent",
        value_name = "PATH",
        env = "MX_AGENT",
        hide_env_values = true
    )]
    pub path: Option<PathBuf>,

    /// Accepted from mx 1.x (the Python tool) and ignored: the agent is mx itself, so
    /// no interpreter runs on the hosts (--agent chooses the executable)
    #[arg(long, value_name = "PYTHON", env = "MX_PYTHON", hide_env_values = true)]
    pub python: Option<String>,
}

/// What `--python` on the command line gets: one line on stderr, then the command
/// goes on. `MX_PYTHON` in the environment is accepted silently (a profile written
/// for the original should not nag on every command).
pub const PYTHON_IGNORED: &str = "--python has no effect here: the agent is mx itself, no interpreter runs on the hosts (ignored)";

/// Whether `--python` was given on the command line (not through `MX_PYTHON`).
pub fn python_on_command_line(matches: &clap::ArgMatches) -> bool {
    matches.subcommand().is_some_and(|(_, sub)| {
        sub.ids().any(|id| id.as_str() == "python")
            && sub.value_source("python") == Some(clap::parser::ValueSource::CommandLine)
    })
}

impl AgentBinary {
    /// The file to deploy: --agent, else this very executable.
    pub fn resolve(&self) -> crate::error::Result<PathBuf> {
        match &self.path {
            Some(path) => Ok(path.clone()),
            None => std::env::current_exe().map_err(|e| {
                crate::error::Error::refused(format!("cannot find mx's own executable: {e}"))
            }),
        }
    }
}

/// What the agents are started with.
#[derive(Debug, Clone, Args)]
pub struct RunFlags {
    #[command(flatten)]
    pub agent_flags: AgentFlags,

    /// Start what is already on the hosts; copy nothing
    #[arg(long)]
    pub no_deploy: bool,

    #[command(flatten)]
    pub agent: AgentBinary,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub run: RunFlags,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Refresh every S seconds (0 = once)
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub watch: f64,

    /// Print one JSON document per look (schema mx.status/1, in docs/json.md) instead of lines
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
}

#[derive(Debug, Args)]
pub struct CleanArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Do not ask
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct ReloadArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// The --bind the run was started with, so the matrix is retargeted the same way
    #[arg(
        long,
        value_name = "IFACE|ADDR",
        env = "IPERF_BIND",
        hide_env_values = true
    )]
    pub bind: Option<String>,
    #[command(flatten)]
    pub agent: AgentBinary,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub agent: AgentBinary,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Where the logs go (`<host>.log`)
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "logs"
    )]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub reports: ReportsDir,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub run: RunFlags,
    #[command(flatten)]
    pub report: SummarizeArgs,
    /// Seconds to run (--duration wins when set)
    #[arg(long = "for", value_name = "S", default_value_t = 60.0)]
    pub for_seconds: f64,
    /// Leave the agents running afterwards
    #[arg(long)]
    pub keep: bool,

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

    /// A step holds while at least this % of the requests it offered come
    /// back [default: 99.9]
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub min_delivered: Option<String>,

    /// ... and while the fleet's p99 RTT stays at or under this (800us, 5ms,
    /// 0.2s) [default: not judged]
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub max_p99: Option<String>,

    /// After the first step that falls short, bisect between it and the last
    /// that held, to within 2%
    #[arg(long)]
    pub bisect: bool,
}

impl RampArgs {
    /// The ramp flags given on the command line besides --ramp.
    pub fn others_given(&self) -> Vec<&'static str> {
        [
            ("--ramp-step", self.ramp_step.is_some()),
            ("--ramp-hold", self.ramp_hold.is_some()),
            ("--min-delivered", self.min_delivered.is_some()),
            ("--max-p99", self.max_p99.is_some()),
            ("--bisect", self.bisect),
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
    /// Where to work (default: a new temporary directory, removed afterwards)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `--reports`: where collected reports live, one `<host>.csv` per host.
#[derive(Debug, Clone, Args)]
pub struct ReportsDir {
    /// Directory of report files (`<host>.csv`)
    #[arg(
        long = "reports",
        value_name = "DIR",
        env = "MX_REPORTS",
        hide_env_values = true,
        default_value = "reports"
    )]
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct SummarizeArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,

    #[command(flatten)]
    pub reports: ReportsDir,

    /// Seconds of the newest reports to summarize (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 60.0)]
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

    /// Print one JSON document (schema mx.summary/1, in docs/json.md) instead of the text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,

    #[command(flatten)]
    pub reports: ReportsDir,

    /// Seconds of the newest reports to show (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 0.0)]
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
    #[arg(long, value_name = "S", default_value_t = 0.0)]
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
    pub reports: ReportsDir,

    /// Seconds of the newest reports to reduce over (0 = the whole history)
    #[arg(long, value_name = "S", default_value_t = 60.0)]
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
    #[arg(long, value_name = "G")]
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

/// Every help page opens with its usage line, lowercase as argparse prints it.
const HELP_TEMPLATE: &str =
    "{before-help}usage: {usage}\n\n{about-with-newline}\n{all-args}{after-help}";

/// argparse's usage width: an 80-column terminal less its 2-column margin.
const USAGE_WIDTH: usize = 78;

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
/// variable is empty forgets its variable.
fn without_empty_env(mut cmd: clap::Command) -> clap::Command {
    let empty: Vec<clap::Id> = cmd
        .get_arguments()
        .filter(|arg| {
            arg.get_env()
                .and_then(std::env::var_os)
                .is_some_and(|value| value.is_empty())
        })
        .map(|arg| arg.get_id().clone())
        .collect();
    for id in empty {
        cmd = cmd.mut_arg(id, |arg| arg.env(None));
    }
    cmd
}

/// `cmd`'s usage as argparse writes it, without the `usage: ` prefix: `-h`, then
/// each visible switch in declaration order (`[--matrix FILE]`, `[-y]`, required
/// ones bare, switches that conflict as `[--pps N|max | --gbps G]`), then the
/// positionals and the sub-commands (`{gen,check,...} ...`); wrapped to 78
/// columns under the first switch, as argparse does.
pub fn argparse_usage(prog: &str, cmd: &clap::Command) -> String {
    let visible: Vec<&clap::Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
    // Conflicts are declared on one side; a group is the same from either.
    let partners = |arg: &clap::Arg| -> Vec<&clap::Arg> {
        visible
            .iter()
            .copied()
            .filter(|other| other.get_id() != arg.get_id() && !other.is_positional())
            .filter(|other| {
                let conflicts = |a: &clap::Arg, b: &clap::Arg| {
                    cmd.get_arg_conflicts_with(a)
                        .iter()
                        .any(|c| c.get_id() == b.get_id())
                };
                conflicts(arg, other) || conflicts(other, arg)
            })
            .collect()
    };
    let mut options: Vec<String> = Vec::new();
    if !cmd.is_disable_help_flag_set() {
        options.push("[-h]".to_string());
    }
    if cmd.get_version().is_some() && !cmd.is_disable_version_flag_set() {
        options.push("[-V]".to_string());
    }
    let mut placed: Vec<&clap::Id> = Vec::new();
    for arg in visible.iter().filter(|a| !a.is_positional()) {
        if placed.contains(&arg.get_id()) {
            continue;
        }
        let mut group = vec![*arg];
        group.extend(partners(arg));
        group.retain(|a| !placed.contains(&a.get_id()));
        placed.extend(group.iter().map(|a| a.get_id()));
        let text = group
            .iter()
            .map(|a| switch_usage(a))
            .collect::<Vec<_>>()
            .join(" | ");
        if group.len() == 1 && arg.is_required_set() {
            options.push(text);
        } else {
            options.push(format!("[{text}]"));
        }
    }
    let mut positionals: Vec<String> = visible
        .iter()
        .filter(|a| a.is_positional())
        .map(|a| {
            let name = value_names(a);
            if a.is_required_set() {
                name
            } else {
                format!("[{name}]")
            }
        })
        .collect();
    let commands: Vec<&str> = cmd
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .map(|sub| sub.get_name())
        .collect();
    if !commands.is_empty() {
        positionals.push(format!("{{{}}}", commands.join(",")));
        positionals.push("...".to_string());
    }
    wrap_usage(prog, &options, &positionals)
}

/// One switch as argparse shows it: its first option string (the short one when
/// there is one), then its value names.
fn switch_usage(arg: &clap::Arg) -> String {
    let flag = match (arg.get_short(), arg.get_long()) {
        (Some(short), _) => format!("-{short}"),
        (None, Some(long)) => format!("--{long}"),
        (None, None) => arg.get_id().to_string(),
    };
    if arg.get_action().takes_values() {
        format!("{flag} {}", value_names(arg))
    } else {
        flag
    }
}

fn value_names(arg: &clap::Arg) -> String {
    match arg.get_value_names() {
        Some(names) if !names.is_empty() => names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        _ => arg.get_id().as_str().to_uppercase(),
    }
}

/// argparse's `_format_usage` wrapping: when `usage: prog parts` is too wide, the
/// parts continue on lines indented under the first one (or, for a long prog,
/// under the prog itself).
fn wrap_usage(prog: &str, options: &[String], positionals: &[String]) -> String {
    const PREFIX: &str = "usage: ";
    let all: Vec<&str> = std::iter::once(prog)
        .chain(options.iter().map(String::as_str))
        .chain(positionals.iter().map(String::as_str))
        .collect();
    let one_line = all.join(" ");
    if PREFIX.len() + one_line.len() <= USAGE_WIDTH {
        return one_line;
    }
    // Lines of `parts`, each starting at column `indent` (the first one after
    // the prefix when `first` is its width).
    let lines_of = |parts: &[&str], indent: usize, first: Option<usize>| -> Vec<String> {
        let mut lines = Vec::new();
        let mut line: Vec<&str> = Vec::new();
        let mut len = first.unwrap_or(indent).saturating_sub(1);
        for part in parts {
            if len + 1 + part.len() > USAGE_WIDTH && !line.is_empty() {
                lines.push(line.join(" "));
                line.clear();
                len = indent.saturating_sub(1);
            }
            line.push(part);
            len += part.len() + 1;
        }
        if !line.is_empty() {
            lines.push(line.join(" "));
        }
        lines
    };
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let positionals: Vec<&str> = positionals.iter().map(String::as_str).collect();
    let (indent, mut lines) = if (PREFIX.len() + prog.len()) as f64 <= 0.75 * USAGE_WIDTH as f64 {
        let indent = PREFIX.len() + prog.len() + 1;
        let mut head = vec![prog];
        let lines = if options.is_empty() {
            head.extend(&positionals);
            lines_of(&head, indent, Some(PREFIX.len()))
        } else {
            head.extend(&options);
            let mut lines = lines_of(&head, indent, Some(PREFIX.len()));
            lines.extend(lines_of(&positionals, indent, None));
            lines
        };
        (indent, lines)
    } else {
        let indent = PREFIX.len();
        let mut lines = vec![prog.to_string()];
        lines.extend(lines_of(&options, indent, None));
        lines.extend(lines_of(&positionals, indent, None));
        (indent, lines)
    };
    let pad = " ".repeat(indent);
    for line in lines.iter_mut().skip(1) {
        line.insert_str(0, &pad);
    }
    lines.join("\n")
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

    #[test]
    fn usage_lines_are_argparse_style() {
        let cli = command();
        let clean = cli.find_subcommand("clean").unwrap();
        let usage = argparse_usage("mx clean", clean);
        assert!(
            usage.starts_with("mx clean [-h] [--matrix FILE] [--user USER] [--jobs N]"),
            "{usage}"
        );
        assert!(usage.ends_with(" [-y]"), "{usage}");
        // Wrapped under the first switch, no line wider than argparse's 78.
        for line in usage.lines().skip(1) {
            assert!(line.starts_with(&" ".repeat("usage: mx clean ".len())));
            assert!(!line[16..].starts_with(' '), "{line:?}");
        }
        // The first line is printed after `usage: `; the others carry their
        // indent (argparse wraps each line, indent included, at 78).
        assert!(usage.lines().enumerate().all(|(i, l)| {
            let prefix = if i == 0 { "usage: ".len() } else { 0 };
            prefix + l.len() <= 78 || !l.contains(' ')
        }));
        // Conflicting switches share one bracket.
        let gen_usage = argparse_usage("mx gen", cli.find_subcommand("gen").unwrap());
        assert!(
            gen_usage.contains("[--pps N|max | --gbps G]"),
            "{gen_usage}"
        );
        assert!(gen_usage.contains("[-o FILE]"), "{gen_usage}");
        // Hidden switches stay hidden.
        assert!(!usage.contains("--ssh"));
        let top = argparse_usage("mx", &cli);
        // argparse gives the sub-commands lines of their own once it wraps.
        assert!(
            top.starts_with("mx [-h] [-V]\n          {gen,check,"),
            "{top}"
        );
        assert!(top.ends_with("}\n          ..."), "{top}");
        for sub in cli.get_subcommands() {
            assert!(
                top.contains(&format!(",{},", sub.get_name()))
                    || top.contains(&format!("{{{},", sub.get_name()))
                    || top.contains(&format!(",{}}}", sub.get_name())),
                "{} missing: {top}",
                sub.get_name()
            );
        }
    }

    #[test]
    fn short_usage_fits_on_one_line() {
        assert_eq!(
            wrap_usage("mx x", &["[-h]".into(), "[--a B]".into()], &[]),
            "mx x [-h] [--a B]"
        );
    }

    #[test]
    fn pps_values() {
        assert_eq!(parse_pps("max"), Ok(PpsArg::Max));
        assert_eq!(parse_pps("MAX"), Ok(PpsArg::Max));
        assert_eq!(parse_pps("2500"), Ok(PpsArg::Rate(2500.0)));
        assert_eq!(
            parse_pps("-5"),
            Err("negative packet rate '-5'".to_string())
        );
        assert!(parse_pps("fast").is_err());
    }

    #[test]
    fn workers_is_auto_or_a_whole_number() {
        assert_eq!(parse_workers("auto"), Ok(WorkersArg::Auto));
        assert_eq!(parse_workers("4"), Ok(WorkersArg::Count(4)));
        assert_eq!(parse_workers("-1"), Ok(WorkersArg::Count(-1)));
        assert!(parse_workers("x").is_err());
    }
}
