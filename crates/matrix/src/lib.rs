//! The traffic matrix (`matrix.csv`): who sends to whom, at what rate, with which
//! packet sizes. Everything about a run's traffic lives in this one file.
//!
//! ```text
//! # mx matrix v1 -- rows send, columns receive, cells are packets/sec
//! # tx_size=64 rx_size=512 port=5300
//! src\dst,10.0.0.10,10.0.0.11,10.0.0.12
//! 10.0.0.10,,20000,20000
//! 10.0.0.11,20000,,max
//! 10.0.0.12,20000,20000,
//! ```
//!
//! Rows send, columns receive. A cell is a packet rate; blank or 0 is no flow and
//! `max` is unpaced. `# key=value` lines anywhere in the file configure the run.
//! [`read`] parses it (tolerating hand edits), [`mod@write`] writes it as the original
//! tool does, [`build`] makes the shapes `mx gen` offers, [`schedule`] tells an
//! agent which flows it holds at a given moment of a layered run, and [`load`]
//! weighs what a matrix asks of every host's NIC and CPU.

#![forbid(unsafe_code)]

pub mod build;
pub(crate) mod cpython_random;
pub mod dscp;
pub mod family;
pub mod load;
pub mod pools;
pub mod read;
pub mod resolve;
pub mod run_print;
pub mod schedule;
pub mod selection;
pub mod servers;
pub mod shape;
pub mod slice;
pub mod token;
pub mod write;

use std::collections::HashMap;

pub use dscp::Dscp;
pub use mx_base::units::Ip;
pub use token::HostToken;

/// The sizes a packet can have: the wire header's, up to the largest UDP
/// payload IPv4 carries.
pub use mx_wire::{MAX_PACKET_BYTES, MIN_PACKET_BYTES};
pub(crate) const DEFAULT_PACKET_BYTES: u32 = 64;
pub const DEFAULT_PORT: u16 = 5300;
/// The wire header carries the sender's matrix index in 16 bits.
pub const MAX_HOSTS: usize = u16::MAX as usize;
/// Version of the file format, written in its first line (`# mx matrix v1`).
pub(crate) const FORMAT_VERSION: u32 = 1;
/// How a host's slice of a matrix begins ([`slice`]): what tells one from a
/// matrix, for the matrix reader to refuse and the agent to read.
pub(crate) const SLICE_MARK: &str = "# mx slice v";

/// Checks a request or reply size; the error names `what` (a key or a flag).
pub fn packet_size(what: &str, bytes: i64) -> Result<u32, String> {
    if (i64::from(MIN_PACKET_BYTES)..=i64::from(MAX_PACKET_BYTES)).contains(&bytes) {
        Ok(bytes as u32)
    } else {
        Err(format!(
            "{what} must be between {MIN_PACKET_BYTES} and {MAX_PACKET_BYTES} bytes (got {bytes})"
        ))
    }
}

/// A flow's packet rate in requests per second; `UNPACED` sends as fast as it can.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate(f64);

impl Rate {
    /// `max` in the file: no pacing.
    pub const UNPACED: Rate = Rate(f64::INFINITY);

    /// A paced rate; `pps` must be positive and finite.
    pub fn per_second(pps: f64) -> Rate {
        assert!(
            pps > 0.0 && pps.is_finite(),
            "a paced rate is positive and finite"
        );
        Rate(pps)
    }

    /// The target in packets per second, or `None` when unpaced.
    pub fn pps(self) -> Option<f64> {
        self.0.is_finite().then_some(self.0)
    }

    pub fn is_unpaced(self) -> bool {
        self.0.is_infinite()
    }
}

/// One flow of a row: requests to host `dst` at `rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub dst: u32,
    pub rate: Rate,
}

/// A host of the matrix, in header order (its index is its wire `src index`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The token as written in the header, kept verbatim for writing back.
    pub token: String,
    pub name: String,
    /// Address the controller reaches and peers send to (a name, or an IPv4 or
    /// IPv6 literal, without brackets).
    pub addr: String,
    /// The UDP port its agent listens on: the token's, else the matrix's `port=`.
    pub port: u16,
    /// The IP version peers reach it by: its literal's, or what its name
    /// resolved to ([`family::decide`]); `None` for a name not resolved.
    pub family: Option<Ip>,
}

impl Host {
    pub fn from_token(token: HostToken, default_port: u16) -> Host {
        Host {
            port: token.port.unwrap_or(default_port),
            family: literal_family(&token.addr),
            token: token.token,
            name: token.name,
            addr: token.addr,
        }
    }

    /// The IP version of its flows: IPv4 for a name not resolved.
    pub fn ip(&self) -> Ip {
        self.family.unwrap_or_default()
    }

    /// `addr:port`, the address in brackets when it is an IPv6 literal.
    pub fn endpoint(&self) -> String {
        endpoint(&self.addr, self.port)
    }
}

/// The family of an address literal; `None` for a name.
pub(crate) fn literal_family(addr: &str) -> Option<Ip> {
    addr.parse::<std::net::IpAddr>().ok().map(Ip::of)
}

/// `addr:port` as a host token writes it: `[2001:db8::10]:5300` for an IPv6
/// literal, `10.0.0.5:5300` or `web1:5300` otherwise.
pub fn endpoint(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// The seed of a `--peers K` shuffle (sparse or layered), as the header stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShuffleKey {
    pub peers: u32,
    pub seed: i64,
}

/// Where disks sit in the round trip (the original tool's `--disk`): every
/// request's payload, every reply's, or both, is read from its sender's disk
/// and written to its receiver's. The 32-byte header is never on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiskMode {
    #[default]
    Off,
    Requests,
    Replies,
    Both,
}

impl DiskMode {
    pub(crate) const NAMES: [&'static str; 4] = ["off", "requests", "replies", "both"];

    /// The mode a `disk=` value or `--disk` names (trimmed, any case).
    pub fn parse(text: &str) -> Option<DiskMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" => Some(DiskMode::Off),
            "requests" => Some(DiskMode::Requests),
            "replies" => Some(DiskMode::Replies),
            "both" => Some(DiskMode::Both),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn is_on(self) -> bool {
        self != DiskMode::Off
    }

    /// Request payloads go through disks: read by the requester before it
    /// sends, written by the responder before it replies.
    pub fn requests(self) -> bool {
        matches!(self, DiskMode::Requests | DiskMode::Both)
    }

    /// Reply payloads go through disks: read by the responder before it
    /// replies, written by the requester once the reply is timed.
    pub fn replies(self) -> bool {
        matches!(self, DiskMode::Replies | DiskMode::Both)
    }

    /// What the mode means, in the words the matrix comment and the logs use.
    pub fn sentence(self) -> Option<&'static str> {
        match self {
            DiskMode::Off => None,
            DiskMode::Requests => Some(
                "every request's payload is read from the requester's disk and written to the responder's",
            ),
            DiskMode::Replies => Some(
                "every reply's payload is read from the responder's disk and written to the requester's",
            ),
            DiskMode::Both => {
                Some("every payload is read from its sender's disk and written to its receiver's")
            }
        }
    }
}

/// The `--dwell` rotation: `layers` edge-disjoint layers held `dwell` seconds each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rotation {
    pub layers: u32,
    pub dwell: f64,
    /// `--equal-layers`: the short last layer is padded with repeats.
    pub fill: bool,
}

impl Rotation {
    /// Layers switch on report ticks, so the dwell must be a whole multiple
    /// of the agents' report interval (both in seconds; 1% slack for the
    /// decimals of a typed dwell). `Err` carries the nearest interval that
    /// fits, to suggest.
    pub fn fits_interval(&self, interval: f64) -> std::result::Result<(), f64> {
        let ratio = self.dwell / interval;
        if self.dwell >= interval && (ratio - ratio.round()).abs() <= 0.01 {
            return Ok(());
        }
        Err(self.dwell / ratio.round_ties_even().max(1.0))
    }
}

/// The `# key=value` header of a matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Request size in bytes, header included.
    pub tx_size: u32,
    /// Reply size in bytes, header included.
    pub rx_size: u32,
    /// Default UDP port for hosts whose token names none.
    pub port: u16,
    /// Present when the matrix was drawn with `--peers` (and both keys survive).
    pub shuffle: Option<ShuffleKey>,
    /// Present when the matrix is layered (`layers` > 1); then `shuffle` is too.
    pub rotation: Option<Rotation>,
    /// Disks in the round trip (`disk=`; off when absent).
    pub disk: DiskMode,
    /// The class every request and reply is marked with (`dscp=`; the
    /// default class when absent).
    pub dscp: Dscp,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tx_size: DEFAULT_PACKET_BYTES,
            rx_size: DEFAULT_PACKET_BYTES,
            port: DEFAULT_PORT,
            shuffle: None,
            rotation: None,
            disk: DiskMode::Off,
            dscp: Dscp::default(),
        }
    }
}

/// A loaded or generated matrix. Rows are sparse (a 10,000-host `--peers 8` matrix
/// holds 80,000 cells, not 100 million), sorted by receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub config: Config,
    hosts: Vec<Host>,
    rows: Vec<Vec<Cell>>,
    by_name: HashMap<String, u32>,
    /// What the reader accepted but ignored (a value on the diagonal, a cell
    /// past the header's last host), one line each naming the file and line.
    warnings: Vec<String>,
    /// Its pools (`# pool` lines), and the two a pool-to-pool matrix connects.
    pools: pools::Pools,
}

/// The first two hosts (by index) at one address and UDP port: one agent would
/// bind it and answer for both. Literals compare as addresses (`2001:db8::10`
/// is `2001:DB8:0::10`), names as text without case; the port is the
/// effective one, so `10.0.0.5` and `10.0.0.5:5301` are two hosts. Names that resolve to one
/// address are caught where they are resolved (`mx start`).
pub fn shared_endpoint(hosts: &[Host]) -> Option<(usize, usize)> {
    let mut seen: HashMap<(String, u16), usize> = HashMap::with_capacity(hosts.len());
    for (i, host) in hosts.iter().enumerate() {
        let addr = host.addr.trim();
        let key = match addr.parse::<std::net::IpAddr>() {
            Ok(ip) => ip.to_string(),
            Err(_) => addr.to_ascii_lowercase(),
        };
        match seen.entry((key, host.port)) {
            std::collections::hash_map::Entry::Occupied(first) => return Some((*first.get(), i)),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(i);
            }
        }
    }
    None
}

/// The refusal for two hosts [`shared_endpoint`] found.
pub fn shared_endpoint_message(first: &Host, second: &Host) -> String {
    format!(
        "hosts '{}' and '{}' are both at {} -- one agent would answer for both; give each host its own address or port",
        first.name,
        second.name,
        first.endpoint()
    )
}

impl Matrix {
    /// Assembles a matrix. Callers guarantee unique host names, rows sorted by `dst`
    /// with no self-flows, and one row per host.
    pub fn from_parts(config: Config, hosts: Vec<Host>, rows: Vec<Vec<Cell>>) -> Matrix {
        assert_eq!(hosts.len(), rows.len(), "one row per host");
        debug_assert!(rows.iter().enumerate().all(|(src, row)| {
            row.windows(2).all(|w| w[0].dst < w[1].dst) && row.iter().all(|c| c.dst as usize != src)
        }));
        let by_name = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.clone(), i as u32))
            .collect();
        Matrix {
            config,
            hosts,
            rows,
            by_name,
            warnings: Vec::new(),
            pools: pools::Pools::default(),
        }
    }

    /// The same matrix with its pools recorded; `pools` holds indices of
    /// this matrix's hosts.
    pub fn with_pools(mut self, pools: pools::Pools) -> Matrix {
        self.pools = pools;
        self
    }

    /// Its pools (empty for a matrix without `# pool` lines).
    pub fn pools(&self) -> &pools::Pools {
        &self.pools
    }

    /// What the reader accepted but ignored, one line each (`m.csv:4: cell a -> a:
    /// ...`); empty for a matrix `mx gen` wrote.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Prints the warnings to stderr as `mx: warning: <file>:<line>: ...`, for
    /// the commands a person watches (check, start, run, reload, doctor).
    pub fn print_warnings(&self) {
        for warning in &self.warnings {
            eprintln!("mx: warning: {warning}");
        }
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// Matrix index of the host named `name`.
    pub fn index_of(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// Host `src`'s flows as the grid holds them (layer 0 of a layered matrix).
    pub fn row(&self, src: u32) -> &[Cell] {
        &self.rows[src as usize]
    }

    pub fn rows(&self) -> impl Iterator<Item = (u32, &[Cell])> {
        self.rows
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u32, r.as_slice()))
    }

    /// Flows in the grid (for a layered matrix, in layer 0).
    pub fn flow_count(&self) -> usize {
        self.rows.iter().map(Vec::len).sum()
    }

    /// Flows of the grid that are unpaced (`max`).
    pub fn unpaced_count(&self) -> usize {
        self.rows
            .iter()
            .flatten()
            .filter(|c| c.rate.is_unpaced())
            .count()
    }

    /// The per-pair rate a layered matrix holds in every layer: the first cell of the row.
    pub fn row_rate(&self, src: u32) -> Option<Rate> {
        self.rows[src as usize].first().map(|c| c.rate)
    }

    /// `64 bytes out -> 512 bytes back`, as every summary line says it.
    pub fn sizes_phrase(&self) -> String {
        format!(
            "{} bytes out -> {} bytes back",
            self.config.tx_size, self.config.rx_size
        )
    }

    /// The same matrix with every host at a new address (its port kept): what
    /// `--bind` deploys, so peers send to each other's data-plane addresses.
    pub fn retargeted(&self, addrs: &[String]) -> Matrix {
        assert_eq!(addrs.len(), self.hosts.len());
        let hosts = self
            .hosts
            .iter()
            .zip(addrs)
            .map(|(h, addr)| Host {
                token: format!("{}={}", h.name, endpoint(addr, h.port)),
                name: h.name.clone(),
                addr: addr.clone(),
                port: h.port,
                family: literal_family(addr).or(h.family),
            })
            .collect();
        Matrix::from_parts(self.config.clone(), hosts, self.rows.clone())
            .with_pools(self.pools.clone())
    }

    /// The same matrix with every host's family as [`family::decide`] gave it.
    pub fn with_families(mut self, families: &[Option<Ip>]) -> Matrix {
        assert_eq!(families.len(), self.hosts.len());
        for (host, family) in self.hosts.iter_mut().zip(families) {
            host.family = *family;
        }
        self
    }

    /// The family every host uses when all use one (IPv4 for names not
    /// resolved); `None` for a matrix of an IPv4 group and an IPv6 one.
    pub fn ip(&self) -> Option<Ip> {
        let first = self.hosts.first().map_or(Ip::V4, Host::ip);
        self.hosts.iter().all(|h| h.ip() == first).then_some(first)
    }

    /// The layers of a layered matrix, derived from its seed (and its pools,
    /// for a pool-to-pool matrix).
    pub(crate) fn layer_plan(&self) -> Option<shape::Layers> {
        let (key, rotation) = (self.config.shuffle?, self.config.rotation?);
        let (peers, seed, fill) = (key.peers as usize, key.seed, rotation.fill);
        Some(if self.pools.between.is_some() {
            shape::Layers::Pools(pools::PoolPlan::new(
                &self.pools,
                self.host_count(),
                peers,
                seed,
                fill,
            ))
        } else {
            shape::Layers::Mesh(shape::LayerPlan::new(self.host_count(), peers, seed, fill))
        })
    }
}
