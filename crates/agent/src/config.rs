//! What an agent is asked to run, as plain values already checked: the
//! command layer (`mx agent`) builds an [`AgentConfig`] from its flags and
//! refuses what no agent could run with, so the agent itself never sees the
//! command line and never re-checks a value.

use std::path::PathBuf;

/// Most streams per pair: beyond this it is a typo, not a plan.
pub const MAX_STREAMS: u16 = 256;

/// One agent's run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// The matrix to run.
    pub matrix: PathBuf,
    /// Which matrix host this is; `None`: the hostname, else the one local
    /// address.
    pub host: Option<String>,
    /// Where the report rows are appended; the pid, stamp and control files
    /// sit beside it.
    pub report: PathBuf,
    /// Listen and answer, but send nothing until the fleet's start instant
    /// appears in the start control file.
    pub armed: bool,
    /// Begin sending at this wall-clock time (Unix seconds, rounded to a whole
    /// interval) instead of at once. Never set with `armed`.
    pub start_at: Option<f64>,
    /// Seconds the responders keep answering after the flows end: 0 or more,
    /// finite.
    pub grace: f64,
    /// The data file of a disk run (`--disk-file`), prepared at start when
    /// it is not there yet.
    pub disk_file: PathBuf,
    /// What every agent of the fleet runs alike.
    pub run: RunSettings,
}

/// Where an agent serves `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsAt {
    /// This port of the host's own address in the matrix (or its `--bind`
    /// address): where the fleet's targets file points Prometheus, and
    /// distinct for agents that share a machine.
    Port(u16),
    /// Exactly this address and port (`0.0.0.0:9464`: every address).
    Addr(std::net::SocketAddr),
}

/// The part of an agent's run the controller passes alike to every agent,
/// and each agent stamps for a reload to reuse.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings {
    /// Seconds per report interval: positive, finite.
    pub interval: f64,
    /// Seconds from the start to the end of the flows; 0 = until stopped.
    /// Finite, not negative.
    pub duration: f64,
    /// Worker threads asked for: `None` = one per core, else at least 1.
    pub workers: Option<usize>,
    /// Sockets per peer, 1..=[`MAX_STREAMS`]: the pair's rate is split
    /// across them.
    pub streams: u16,
    /// SO_SNDBUF of every socket, bytes; 0 = the kernel's default.
    pub sndbuf: usize,
    /// SO_RCVBUF of every socket, bytes; 0 = sized for the packets.
    pub rcvbuf: usize,
    /// Spin over the sockets instead of sleeping.
    pub busy_poll: bool,
    /// One datagram per trip through the stack: no UDP GSO/GRO.
    pub no_gso: bool,
    /// The interface or address every socket binds to (resolved by the agent,
    /// which refuses one the matrix does not give it).
    pub bind: Option<String>,
    /// Bytes of the data file of a disk run (`--disk-size`): whole blocks,
    /// at least 1 MiB.
    pub disk_size: u64,
    /// Disk operations each worker keeps in flight in a disk run
    /// (`--disk-depth`), 1..=[`crate::disk::engine::MAX_DEPTH`]: its pool of
    /// disk threads.
    pub disk_depth: usize,
    /// How much of its report the agent keeps (`--keep-report`).
    pub keep: crate::report_keep::Keep,
    /// Where the agent serves `/metrics` (`--metrics`); `None`: nowhere.
    pub metrics: Option<MetricsAt>,
    /// These settings as the words of an agent command line, written into
    /// the stamp for `mx reload` to pass again.
    pub stamp_words: Vec<String>,
}
