//! Which hosts `mx hints` sizes a run for: the mesh of the server list or
//! of one pool, or pool to pool, with the `mx gen` flags that draw it.

use crate::cli::{HintsArgs, PoolArgs};
use crate::error::{Error, Result};
use crate::matrix::pools::Between;
use crate::matrix::selection::Selection;
use crate::matrix::{DEFAULT_PORT, HostToken, resolve};
use crate::units::Ip;

/// The shape a sizing is for: the mesh of the server list (or of one pool),
/// or pool to pool.
pub(super) struct Layout {
    pub(super) hosts: usize,
    pub(super) flows: usize,
    /// Flows out of a sender.
    pub(super) peers: usize,
    /// Flows into the busiest receiver.
    pub(super) in_flows: usize,
    /// Every host sends and answers (a mesh, or a duplex of pools).
    pub(super) both_ways: bool,
    pub(super) pooled: bool,
    /// The flags that make this shape with `mx gen`.
    pub(super) gen_flags: String,
    /// The IP version of the hosts (their headers are on the wire).
    pub(super) ip: Ip,
}

impl Layout {
    /// The layout the flags describe: the server list's mesh, one pool's, or
    /// pool to pool.
    pub(super) fn of(args: &HintsArgs) -> Result<Layout> {
        match args.pools.selection(DEFAULT_PORT)? {
            Selection::Servers => {
                let servers = &args.servers.path;
                if servers != std::path::Path::new("slurm") && !servers.exists() {
                    return Err(Error::refused(format!(
                        "sizing a run needs the server list: --servers {} not found",
                        servers.display()
                    )));
                }
                let tokens = crate::commands::read_server_list(servers)?;
                Layout::mesh(
                    args.peers,
                    tokens.len(),
                    format!("--servers {}", servers.display()),
                    family(&tokens)?,
                )
            }
            Selection::Inside { hosts, .. } => Layout::mesh(
                args.peers,
                hosts.len(),
                pool_flags(&args.pools),
                family(&hosts)?,
            ),
            Selection::Between { pools, between } => {
                Layout::between(args.peers, &pools, between, pool_flags(&args.pools))
            }
        }
    }

    /// The mesh of `n` hosts, each sending to `peers` of the others (all
    /// N-1 by default); `gen_flags` are the flags that name the hosts.
    fn mesh(peers: Option<i64>, n: usize, gen_flags: String, ip: Ip) -> Result<Layout> {
        let k = match peers {
            None => n - 1,
            Some(k) if k >= 1 && (k as usize) < n => k as usize,
            Some(k) => {
                return Err(Error::refused(format!(
                    "--peers must be between 1 and {} for {n} hosts (got {k})",
                    n - 1
                )));
            }
        };
        Ok(Layout {
            hosts: n,
            flows: n * k,
            peers: k,
            in_flows: k,
            both_ways: true,
            pooled: false,
            gen_flags: format!("{gen_flags}{}", peers_flag(peers)),
            ip,
        })
    }

    /// Pool to pool: `pools[0]` sends to `pools[1]` (and back with duplex),
    /// each sender to `peers` hosts of the other pool (all by default).
    fn between(
        peers: Option<i64>,
        pools: &[(String, Vec<HostToken>)],
        between: Between,
        gen_flags: String,
    ) -> Result<Layout> {
        let all: Vec<HostToken> = pools.iter().flat_map(|(_, h)| h.iter().cloned()).collect();
        let ip = family(&all)?;
        let (a, b) = (pools[0].1.len(), pools[1].1.len());
        let most = if between.duplex { a.min(b) } else { b };
        let k = match peers {
            None if between.duplex => a.max(b),
            None => b,
            Some(k) if k >= 1 && (k as usize) <= most => k as usize,
            Some(k) => {
                return Err(Error::refused(format!(
                    "--peers must be between 1 and {most} here: a sender's peers are distinct hosts of the other pool (got {k})"
                )));
            }
        };
        // Without --peers every sender meets all of the other pool.
        let out_of = |senders: usize, receivers: usize| match peers {
            None => (senders * receivers, senders),
            Some(_) => (senders * k, (senders * k).div_ceil(receivers)),
        };
        let (ab, into_b) = out_of(a, b);
        let (flows, in_flows) = if between.duplex {
            let (ba, into_a) = out_of(b, a);
            (ab + ba, into_b.max(into_a))
        } else {
            (ab, into_b)
        };
        Ok(Layout {
            hosts: a + b,
            flows,
            peers: k,
            in_flows,
            both_ways: between.duplex,
            pooled: true,
            gen_flags: format!("{gen_flags}{}", peers_flag(peers)),
            ip,
        })
    }
}

/// ` --peers K` when given, for a suggested `mx gen`.
fn peers_flag(peers: Option<i64>) -> String {
    peers.map_or(String::new(), |k| format!(" --peers {k}"))
}

/// The pool flags as given, for a suggested `mx gen`.
fn pool_flags(args: &PoolArgs) -> String {
    let mut flags: Vec<String> = args
        .pools
        .iter()
        .map(|(name, file)| format!("--pool {name}={}", file.display()))
        .collect();
    if let Some(between) = &args.between {
        flags.push(format!("--between {}", between.join(" ")));
    }
    if args.duplex {
        flags.push("--duplex".to_string());
    }
    flags.join(" ")
}

/// The IP version of `tokens`' hosts (refused when they mix the two).
fn family(tokens: &[HostToken]) -> Result<Ip> {
    Ok(resolve::one_family(tokens, DEFAULT_PORT)
        .map_err(Error::refused)?
        .unwrap_or_default())
}
