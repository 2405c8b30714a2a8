//! The flags of matrix authoring: `mx gen`, `mx check` and `mx hints`, with
//! the groups they share (`--servers`, the pool flags, packet sizes, `--mtu`)
//! and the parsers of their values (`--pps`, `--pool`, `--dscp`, `--disk`).

use crate::matrix::load::FASTEST_NIC_PPS;
use std::path::PathBuf;

use clap::Args;

use crate::matrix::selection::Selection;

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

impl PoolArgs {
    /// The hosts these flags select, read and checked (`port` for tokens
    /// that name none).
    pub fn selection(&self, port: u16) -> crate::error::Result<Selection> {
        Selection::read(&self.pools, self.between.as_deref(), self.duplex, port)
    }
}

/// Parses `--pool NAME=FILE`.
pub(crate) fn parse_pool(text: &str) -> Result<(String, PathBuf), String> {
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
        default_value_t = crate::matrix::load::Mtu::DEFAULT.bytes().to_string(),
        allow_negative_numbers = true
    )]
    pub text: String,
}

impl MtuArg {
    /// The MTU, refused when it is no whole number in an IP path's range.
    pub fn checked(&self) -> crate::error::Result<crate::matrix::load::Mtu> {
        let bytes: i64 = self.text.trim().parse().map_err(|_| {
            crate::error::Error::refused(format!(
                "--mtu wants a whole number of bytes, {}..{} (got '{}')",
                crate::matrix::load::Mtu::MIN_IPV4,
                crate::matrix::load::Mtu::MAX,
                self.text
            ))
        })?;
        crate::matrix::load::Mtu::checked("--mtu", bytes).map_err(crate::error::Error::refused)
    }

    /// [`checked`](Self::checked), and at least IPv6's minimum for IPv6 hosts.
    pub fn for_family(
        &self,
        ip: crate::units::Ip,
    ) -> crate::error::Result<crate::matrix::load::Mtu> {
        self.checked()?
            .for_family("--mtu", ip)
            .map_err(crate::error::Error::refused)
    }

    /// `--mtu N` for a suggested command line: empty for the default.
    pub fn flag(&self) -> String {
        match self.checked() {
            Ok(mtu) if mtu != crate::matrix::load::Mtu::DEFAULT => {
                format!(" --mtu {}", mtu.bytes())
            }
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
pub(crate) fn parse_pps(text: &str) -> Result<PpsArg, String> {
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
        Ok(v) if v > FASTEST_NIC_PPS => Err(crate::matrix::load::beyond_any_nic(t)),
        Ok(v) => Ok(PpsArg::Rate(v)),
        Err(_) => Err(format!("'{text}' is not a packet rate (a number or 'max')")),
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
    #[arg(long, value_name = "G", value_parser = super::values::gbps, allow_negative_numbers = true)]
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
pub(crate) fn parse_dscp(text: &str) -> Result<crate::matrix::Dscp, String> {
    crate::matrix::Dscp::parse(text).map_err(|why| format!("--dscp wants {why} (got '{text}')"))
}

/// Parses `--disk`: off, requests, replies or both.
pub(crate) fn parse_disk_mode(text: &str) -> Result<crate::matrix::DiskMode, String> {
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
    #[arg(long, value_name = "G", value_parser = super::values::gbps, allow_negative_numbers = true)]
    pub nic_gbps: Option<f64>,

    /// NIC packet rate in millions of packets/s per direction
    #[arg(long, value_name = "M", value_parser = super::values::mpps, allow_negative_numbers = true)]
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
    #[arg(long, value_name = "N|max", value_parser = parse_pps, allow_negative_numbers = true)]
    pub pps_per_pair: Option<PpsArg>,

    /// Size the run for this many requests/s out of every host ('max': unpaced)
    #[arg(long, value_name = "N|max", value_parser = parse_pps, allow_negative_numbers = true)]
    pub pps_per_host: Option<PpsArg>,

    /// Size the run for this many Gb/s of requests out of every host (wire rate)
    #[arg(long, value_name = "G", value_parser = super::values::gbps, allow_negative_numbers = true)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

/// `mx monitor`: the files that wire an always-on fleet into Prometheus.
#[derive(Debug, Args)]
#[command(
    after_help = "Writes targets.json (file_sd), rules.yml (recording and alerting rules), \
                  prometheus.yml (a config that scrapes the one with the other) and \
                  dashboard.json (Grafana) into --dir. Start the agents with the same \
                  port: mx start --metrics PORT (or MX_METRICS)."
)]
pub struct MonitorArgs {
    /// The matrix the fleet runs
    #[arg(
        long,
        value_name = "FILE",
        env = "MX_MATRIX",
        hide_env_values = true,
        default_value = "matrix.csv"
    )]
    pub matrix: PathBuf,

    /// The port the agents serve /metrics on, as mx start --metrics was given it
    #[arg(long, value_name = "PORT", env = "MX_METRICS", default_value = "9464")]
    pub metrics: String,

    /// Where to write the files
    #[arg(long, value_name = "DIR", default_value = "monitor")]
    pub dir: PathBuf,

    /// Alert when a leg, or a host's legs in or out, lose more than this %
    #[arg(long, value_name = "PCT", default_value = "1",
          value_parser = super::values::percent, allow_negative_numbers = true)]
    pub loss_pct: f64,

    /// ... and at least this many packets over --window (at a few packets a
    /// second a share of a handful misleads)
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub min_lost: u64,

    /// ... for this long (a Prometheus duration: 30s, 5m, 1h)
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub alert_for: String,

    /// Alert when a host's RTT p99 is over this (800us, 5ms, 0.2s)
    #[arg(long, value_name = "DURATION", default_value = "10ms")]
    pub rtt_p99: String,

    /// The window loss and RTT are taken over (a Prometheus duration)
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub window: String,

    /// How often Prometheus scrapes the agents (a Prometheus duration)
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    pub scrape_interval: String,
}
