//! `mx hints`: goal -> command. Without a sizing switch, a cheat sheet; with one,
//! the arithmetic for that rate across the server list, using our own
//! agent's per-worker figure ([`WORKER_EXCHANGES_PER_SECOND`]). Requests or
//! replies larger than the path MTU (`--mtu`) are called out, and the NIC's
//! figures count their fragments.
//!
//! `layout.rs` says which hosts the sizing is for (the server list's mesh,
//! one pool's, or pool to pool).

mod layout;

use std::io::Write;

use self::layout::Layout;
use crate::cli::{HintsArgs, PpsArg};
use crate::error::{Error, Result};
use crate::matrix::load::{
    Exchange, HostLoad, WORKER_EXCHANGES_PER_SECOND, pps_for_gbps, workers_needed,
};
use crate::units::{bits, pps};

use super::unpaced_ceiling;
use crate::matrix::load::fragments_line;

/// Above this many workers per host, a socket-based agent is the wrong tool.
const SOCKET_AGENT_WORKER_LIMIT: u64 = 32;
/// A NIC faster than this is not the common case any more.
const COMMON_NIC_BITS: f64 = 25e9;

pub fn run(args: &HintsArgs, out: &mut dyn Write) -> Result<u8> {
    args.mtu.checked()?;
    if args.pps_per_pair.is_none() && args.pps_per_host.is_none() && args.gbps_per_host.is_none() {
        out.write_all(CHEAT_SHEET.as_bytes())?;
        return Ok(0);
    }
    let (tx, rx) = args.sizes.checked()?;
    let layout = Layout::of(args)?;
    let exchange = Exchange::new(tx, rx, layout.ip, args.mtu.for_family(layout.ip)?);
    let Some(per_pair) = rate_per_pair(args, layout.peers, exchange)? else {
        return unpaced(args, &layout, exchange, out);
    };
    let sizing = Sizing::of(&layout, per_pair, exchange);
    print_loads(&layout, &sizing, exchange, out)?;
    fragment_lines(exchange, out)?;
    writeln!(out)?;
    writeln!(
        out,
        "  mx gen {} --pps {:.0} --tx-size {tx} --rx-size {rx}{}",
        layout.gen_flags,
        per_pair,
        args.mtu.flag()
    )?;
    writeln!(
        out,
        "  mx check{} --nic-gbps 25 --nic-mpps 15    # your NIC's real numbers",
        args.mtu.flag()
    )?;
    writeln!(out, "  mx run --for 60")?;
    worker_lines(
        sizing.workers,
        layout.peers,
        sizing.per_host,
        sizing.nic_bits,
        out,
    )?;
    writeln!(
        out,
        "  a smaller --tx-size raises packets/sec for the same bandwidth;"
    )?;
    writeln!(
        out,
        "  a bigger --rx-size makes the reply direction the heavy one."
    )?;
    Ok(0)
}

/// The requests per second per pair the sizing switches ask for, `None`
/// for unpaced (`max`). Precedence as the original: per pair, then per
/// host, then Gb/s per host.
fn rate_per_pair(args: &HintsArgs, peers: usize, exchange: Exchange) -> Result<Option<f64>> {
    Ok(Some(
        match (args.pps_per_pair, args.pps_per_host, args.gbps_per_host) {
            (Some(PpsArg::Max), _, _) | (None, Some(PpsArg::Max), _) => return Ok(None),
            (Some(PpsArg::Rate(x)), _, _) => positive("--pps-per-pair", x)?,
            (None, Some(PpsArg::Rate(x)), _) => positive("--pps-per-host", x)? / peers as f64,
            (None, None, Some(g)) => {
                pps_for_gbps(positive("--gbps-per-host", g)?, exchange.request) / peers as f64
            }
            (None, None, None) => unreachable!("checked by the caller"),
        },
    ))
}

/// What a rate per pair asks of the hosts in a layout.
struct Sizing {
    per_pair: f64,
    /// Requests/s out of a sender.
    per_host: f64,
    /// Requests/s into the busiest receiver.
    in_host: f64,
    /// The busier NIC direction of the busiest host, bits/s on the wire.
    nic_bits: f64,
    /// IP packets/s each way at the busiest host's NIC, fragments counted.
    nic_packets: f64,
    /// Worker threads a host needs.
    workers: u64,
}

impl Sizing {
    fn of(layout: &Layout, per_pair: f64, exchange: Exchange) -> Sizing {
        let per_host = per_pair * layout.peers as f64;
        let in_host = per_pair * layout.in_flows as f64;
        // A host of a simplex pool matrix either sends or answers; every other
        // host does both. Its NIC's busier direction is what it must carry.
        let hosts = if layout.both_ways {
            vec![HostLoad {
                out_pps: per_host,
                in_pps: in_host,
                unpaced: false,
            }]
        } else {
            vec![
                HostLoad {
                    out_pps: per_host,
                    ..HostLoad::default()
                },
                HostLoad {
                    in_pps: in_host,
                    ..HostLoad::default()
                },
            ]
        };
        let busiest = heaviest(&hosts, HostLoad::datagrams);
        Sizing {
            per_pair,
            per_host,
            in_host,
            nic_bits: heaviest(&hosts, |h| h.out_wire(&exchange).max(h.in_wire(&exchange))),
            nic_packets: heaviest(&hosts, |h| h.packets(&exchange)),
            // A worker moves ~WORKER_EXCHANGES_PER_SECOND exchanges;
            // `workers_needed` counts a host's requests out and as many answered.
            workers: workers_needed(busiest / 2.0),
        }
    }
}

/// The load lines: per pair, per host (or per sender and receiver), per NIC
/// direction and the fleet's total.
fn print_loads(
    layout: &Layout,
    sizing: &Sizing,
    exchange: Exchange,
    out: &mut dyn Write,
) -> Result<()> {
    let peers = layout.peers;
    writeln!(
        out,
        "to get that across {} hosts ({} flows):",
        layout.hosts, layout.flows
    )?;
    writeln!(out)?;
    writeln!(out, "  per pair        {}", pps(sizing.per_pair))?;
    if layout.pooled {
        writeln!(
            out,
            "  per sender      {} of requests out ({peers} peer{}), the replies back",
            pps(sizing.per_host),
            if peers == 1 { "" } else { "s" }
        )?;
        writeln!(
            out,
            "  per receiver    up to {} of requests in ({} sender{}), as many replies out",
            pps(sizing.in_host),
            layout.in_flows,
            if layout.in_flows == 1 { "" } else { "s" }
        )?;
    } else {
        writeln!(
            out,
            "  per host        {} of requests out, {} of replies back",
            pps(sizing.per_host),
            pps(sizing.per_host)
        )?;
    }
    writeln!(
        out,
        "                  {} per NIC direction (requests one way, replies the other, framing included)",
        bits(sizing.nic_bits)
    )?;
    if exchange.request.fragmented() || exchange.reply.fragmented() {
        writeln!(
            out,
            "                  {} per NIC direction in IP packets, every fragment counted",
            pps(sizing.nic_packets)
        )?;
    }
    let fleet = sizing.per_pair * layout.flows as f64;
    writeln!(
        out,
        "  fleet total     {} requests + {} replies",
        pps(fleet),
        pps(fleet)
    )?;
    Ok(())
}

/// The workers a host needs at `per_host` exchanges per second over `peers`
/// flows, how to ask for them, and what a socket agent or a common NIC
/// cannot carry.
fn worker_lines(
    need: u64,
    peers: usize,
    per_host: f64,
    nic: f64,
    out: &mut dyn Write,
) -> Result<()> {
    if need > 1 {
        writeln!(out)?;
        writeln!(
            out,
            "  that needs about {need} worker threads per host (one worker sends or answers"
        )?;
        writeln!(
            out,
            "  ~{} of requests, and each host does both):",
            pps(WORKER_EXCHANGES_PER_SECOND)
        )?;
        // Workers are capped at flows x streams + 1: a host holds `peers` flows.
        let streams = (need - 1).div_ceil(peers as u64);
        if streams > 1 {
            writeln!(
                out,
                "      mx start --workers {need} --streams {streams}    # needs >= {need} cores per host"
            )?;
            writeln!(
                out,
                "  workers are capped at flows + 1, and a host has {peers} flow(s): --streams {streams}"
            )?;
            writeln!(
                out,
                "  splits each pair over {streams} sockets so all {need} workers get a share."
            )?;
        } else {
            writeln!(
                out,
                "      mx start --workers {need}        # needs >= {need} cores per host"
            )?;
            writeln!(
                out,
                "  `--workers auto` starts one per core: enough when the host has {need}."
            )?;
        }
    }
    if need > SOCKET_AGENT_WORKER_LIMIT {
        writeln!(
            out,
            "  heads up: {} per host is a lot to ask of a socket-based agent.",
            pps(per_host)
        )?;
        writeln!(
            out,
            "  Beyond a few Mpps per box the kernel's UDP path is the limit: spread the load"
        )?;
        writeln!(
            out,
            "  over more hosts, or measure with a kernel-bypass tool (AF_XDP, DPDK)."
        )?;
    }
    if nic > COMMON_NIC_BITS {
        writeln!(
            out,
            "  heads up: {} per host needs a 40/100G NIC.",
            bits(nic)
        )?;
    }
    Ok(())
}

/// The largest `figure` of any of `hosts`.
fn heaviest(hosts: &[HostLoad], figure: impl Fn(&HostLoad) -> f64) -> f64 {
    hosts.iter().map(figure).fold(0.0, f64::max)
}

/// The requests and replies over the path MTU, one line each after a blank
/// line (nothing when both leave whole).
fn fragment_lines(exchange: Exchange, out: &mut dyn Write) -> Result<()> {
    let lines: Vec<String> = [("requests", exchange.request), ("replies", exchange.reply)]
        .into_iter()
        .filter_map(|(what, d)| fragments_line(what, d.payload, d.mtu, &[d.ip]))
        .collect();
    if !lines.is_empty() {
        writeln!(out)?;
    }
    for line in lines {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// `--pps-per-pair max`: nothing to size, so say what is known, the commands,
/// and how to find the rate that a paced run can then be sized for.
fn unpaced(
    args: &HintsArgs,
    layout: &Layout,
    exchange: Exchange,
    out: &mut dyn Write,
) -> Result<u8> {
    writeln!(
        out,
        "unpaced across {} hosts ({} flows): every sender goes as fast as it can, so the",
        layout.hosts, layout.flows
    )?;
    writeln!(
        out,
        "offered load is whatever the senders manage: there is no rate to size NICs or workers by."
    )?;
    fragment_lines(exchange, out)?;
    writeln!(out)?;
    writeln!(
        out,
        "  mx gen {} --pps max --tx-size {} --rx-size {}{}",
        layout.gen_flags,
        exchange.request.payload,
        exchange.reply.payload,
        args.mtu.flag()
    )?;
    writeln!(out)?;
    for line in unpaced_ceiling("the ceiling", "mx run --for 60") {
        writeln!(out, "  {line}")?;
    }
    writeln!(
        out,
        "  `mx hints --pps-per-host N` then sizes a paced run at the rate the senders reached."
    )?;
    Ok(0)
}

fn positive(flag: &str, value: f64) -> Result<f64> {
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(Error::refused(format!(
            "{flag} must be greater than 0 (got {value})"
        )))
    }
}

const CHEAT_SHEET: &str = "\
mx hints -- what you want, and the command that gets it

RUN SOMETHING RIGHT NOW
  mx gen --servers servers.txt --pps 20000 && mx run --for 60

SMALL PACKETS, HIGH PACKET RATE
  mx gen --servers servers.txt --pps max --tx-size 64 --rx-size 64
  mx start --workers auto                # one worker thread per core
  mx summarize                           # unpaced, so `sent` is how far each host got
                                         # (`agent` near 100%: mx is the limit)

ASYMMETRIC REQUEST/RESPONSE (small ask, large answer)
  mx gen --servers servers.txt --pps 5000 --tx-size 128 --rx-size 8192
  mx summarize                           # the two directions are reported apart

PUT THE DISKS IN THE LOOP (what a storage client sees: network + the server's disk)
  mx gen --servers servers.txt --pps 2000 --rx-size 4096 --disk replies   # a storage read
  mx gen --servers servers.txt --pps 2000 --tx-size 4096 --disk requests  # a storage write
  mx check                               # the IOPS and MB/s each host's disk is asked for
  mx run --for 60 --disk-size 4G         # each host's data file: written once, reused

A FIXED BANDWIDTH INSTEAD OF A FIXED PACKET RATE
  mx gen --servers servers.txt --gbps 10 --tx-size 1400   # per host, on the wire

FIND THE FABRIC'S LIMIT
  mx gen --servers servers.txt --pps 20000
  mx run --ramp 0.5:3 --bisect --max-p99 5ms # raises every rate step by step on the
                                             # running fleet: the highest that held,
                                             # and what set the limit (host, leg, place)
  # by hand: mx run --for 120 at 50000, then 100000, ...: the last rate that
  # delivers cleanly is the answer; p99 lifts off p50 first

SUSTAINED EQUAL LOAD ON EVERY SERVER, WITHOUT THE FULL MESH
  mx gen --servers servers.txt --peers 8 --pps 100000 --seed 42
  mx start --streams 4                   # 4 sockets (ECMP paths) per pair

ONE RACK AGAINST ANOTHER (TOP-OF-RACK TO TOP-OF-RACK)
  mx gen --pool tor1=tor1.txt --pool tor2=tor2.txt --between tor1 tor2 --gbps 0.9
  mx gen --pool tor1=tor1.txt --pool tor2=tor2.txt --duplex --peers 4 --dwell 15
  mx summarize --grid g                  # POOL lines: what crossed, loss by leg

EVERY PAIR MEASURED, ONLY K SOCKETS PER HOST
  mx gen --servers servers.txt --peers 8 --pps 20000 --dwell 15
  mx run --for 2000 && mx summarize --grid g    # >= one full cycle

ONLY SOME PAIRS, OR DIFFERENT RATES PER PAIR
  edit matrix.csv: blank a cell to drop that flow, change a cell for its own
  rate, write max for unpaced; then mx start (or mx reload on a running fleet)

PIN THE TRAFFIC TO ONE NIC
  mx start --bind eth1                   # an interface name or an address

WATCH IT LIVE
  mx status --watch 5

SEE WHERE IT HURTS
  mx summarize --grid g                  # N x N grids, each leg apart: WHAT TO DO
                                         # NEXT names the host, the way (into, out
                                         # of, between) and the place
  mx report -o report.html               # the same, as pictures

GET THE LOGS / STOP / LEAVE NO TRACE
  mx logs && mx stop && mx clean

ONE CORE PEGGED WHILE THE REST OF THE BOX IDLES
  mx start --streams 8 --workers 32      # more sockets per pair to spread

WHEN THE NUMBERS DISAPPOINT
  mx check --nic-gbps 25 --nic-mpps 15   # was it possible at all?
  mx summarize                           # WHAT TO DO NEXT reads the numbers

SIZE A RUN BEFORE RUNNING IT
  mx hints --servers servers.txt --pps-per-host 2000000 --tx-size 64
";
