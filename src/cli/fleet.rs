//! The flags of the fleet lifecycle: what every fleet command takes
//! (`FleetArgs`: matrix, ssh user, remote directory, transport), the agent
//! binary to deploy, `--reports` (where collected reports live), and those of
//! `mx start`, `status`, `stop`, `clean`, `reload`, `doctor`, `logs` and
//! `collect`.

use std::path::PathBuf;

use clap::Args;

use super::agent::AgentFlags;

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

    /// Print the ssh and scp (or srun and sbcast) commands instead of running them:
    /// for the first two hosts (`--dry-run all`: for every one), with what each
    /// step would cost (hosts, waves of --jobs, bytes from this machine)
    #[arg(
        long,
        value_name = "all",
        num_args = 0..=1,
        default_missing_value = "first",
        value_parser = ["all", "first"],
        hide_possible_values = true
    )]
    pub dry_run: Option<String>,

    /// Run the fleet on this machine, one sandbox directory per host under DIR
    /// (every host on a loopback address: 127.x.y.z, or ::1): no ssh, no root
    #[arg(long, value_name = "DIR", env = "MX_LOCAL", hide_env_values = true)]
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

impl FleetArgs {
    /// Whether this is a dry run.
    pub fn dry_run(&self) -> bool {
        self.dry_run.is_some()
    }

    /// Whether a dry run shows every host's commands (`--dry-run all`).
    pub fn dry_run_all(&self) -> bool {
        self.dry_run.as_deref() == Some("all")
    }
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
    #[arg(long, value_name = "S", default_value_t = 0.0,
          value_parser = super::values::watch_seconds, allow_negative_numbers = true)]
    pub watch: f64,

    /// Print one JSON document per look (schema mx.status/1, in docs/json.md) instead of lines
    #[arg(long)]
    pub json: bool,

    /// One line per host, however many (past 100 hosts, status prints a line for the
    /// fleet and one per host that is not as the rest)
    #[arg(long)]
    pub each: bool,
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
    /// Also write the hosts that passed to FILE, one per line as the matrix
    /// names them: a server list for `mx gen --servers FILE`
    #[arg(long, value_name = "FILE")]
    pub ready_hosts: Option<PathBuf>,
    #[command(flatten)]
    pub disk_depth: super::agent::DiskDepthArg,
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
