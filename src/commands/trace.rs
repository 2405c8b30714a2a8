//! `mx trace`: the paths of the streams whose loss sat on some of a flow's
//! paths alone, swept hop by hop in both directions from the hosts that
//! send them, into `paths.trace` beside the reports; the summary then names
//! the link the lossy streams share and the clean ones avoid.
//!
//! Each stream is swept on its own 5-tuple (its sender's source port, its
//! responder's port), so that the fabric's ECMP hash takes every probe down
//! the stream's own path: its requests from the sender, its replies from
//! the responder. The sweeps bind those ports, so they run once the agents
//! have ended (after `mx run`, or `mx stop`): an agent still running holds
//! them, and its host says so for each of its streams.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use crate::agent::trace::MAX_TUPLES;
use crate::cli::TraceArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::collect::missed_reports;
use crate::fleet::{Fleet, scripts};
use crate::matrix::Host;
use crate::report::paths::{self, Leg, TracedPath, parse_host_line};
use crate::summary::analysis::diagnosis::Place;
use crate::summary::{Options, StreamToTrace, Summary};
use crate::units::{self, wall_now};

/// What a trace sweeps, and how.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Seconds of the newest reports read for the lossy streams (0: all).
    pub window: f64,
    /// Every stream of every flow, not only the lossy flows'.
    pub all: bool,
    /// Probes a TTL.
    pub probes: u16,
    /// Seconds each host's sweeps may take.
    pub seconds: f64,
}

pub fn run(args: &TraceArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
    let dir = &args.reports.dir;
    if !args.no_collect && !missed_reports(&fleet, dir, out)?.is_empty() {
        writeln!(
            out,
            "[mx] trace: the streams of the hosts above are read from the reports already in {}/",
            dir.display()
        )?;
    }
    let plan = Plan {
        window: args.window,
        all: args.all,
        probes: args.probes,
        seconds: args.trace_for,
    };
    let Some(code) = trace_lossy(&fleet, dir, &plan, out)? else {
        writeln!(
            out,
            "[mx] trace: nothing to trace -- no flow's loss sat on some of its paths alone (--all sweeps every stream)"
        )?;
        return Ok(0);
    };
    if fleet.dry_run {
        return Ok(code);
    }
    let after = Summary::read(dir, Some(fleet.matrix.clone()), options(plan.window))?;
    let on_a_link =
        |f: &&crate::summary::document::FindingDoc| f.blames.iter().any(|b| b.place == Place::Link);
    for f in after.document().findings.iter().filter(on_a_link) {
        writeln!(out, "[mx] the paths say: {}", f.text)?;
    }
    Ok(code)
}

/// A summary's options for reading which streams to sweep.
fn options(window: f64) -> Options {
    Options {
        window,
        top: 0,
        top_hosts: 0,
        series: false,
    }
}

/// The most streams one trace sweeps: at 10,000 hosts a lossy link can sit
/// on the paths of thousands of flows, and a few hundred of its streams,
/// with the clean streams of their flows, name it. Each is swept twice.
pub const MAX_STREAMS: usize = 1024;

/// `streams` (in flows, each flow's streams together), whole flows from the
/// first until the next would pass `cap` (the first always, cut to `cap`).
fn whole_flows_up_to(streams: &[StreamToTrace], cap: usize) -> Vec<StreamToTrace> {
    let mut kept: Vec<StreamToTrace> = Vec::new();
    for flow in streams.chunk_by(|a, b| (&a.sender, &a.responder) == (&b.sender, &b.responder)) {
        if kept.len() + flow.len() > cap {
            if kept.is_empty() {
                kept.extend_from_slice(&flow[..cap]);
            }
            break;
        }
        kept.extend_from_slice(flow);
    }
    kept
}

/// One leg to sweep: from which host, the tuple, and what it is.
struct Sweep {
    host: usize,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    path: TracedPath,
}

/// Sweeps the streams `plan` picks from the reports in `dir` and writes
/// `paths.trace` there. Returns the exit code (1 when a host's sweeps could
/// not run), or `None` when there was nothing to sweep.
pub fn trace_lossy(
    fleet: &Fleet,
    dir: &Path,
    plan: &Plan,
    out: &mut dyn Write,
) -> Result<Option<u8>> {
    let summary = Summary::read(dir, Some(fleet.matrix.clone()), options(plan.window))?;
    let every = summary.streams_to_trace(plan.all);
    if every.is_empty() {
        return Ok(None);
    }
    let streams = whole_flows_up_to(&every, MAX_STREAMS);
    if streams.len() < every.len() {
        writeln!(
            out,
            "[mx] trace: {} of the {} streams, whole flows up to {MAX_STREAMS}: a link shows in a few hundred",
            streams.len(),
            every.len()
        )?;
    }
    let (sweeps, skipped) = sweeps_of(fleet, &streams);
    for why in &skipped {
        writeln!(out, "[mx] trace: {why}")?;
    }
    let hosts: std::collections::BTreeSet<usize> = sweeps.iter().map(|s| s.host).collect();
    writeln!(
        out,
        "[mx] trace: {} streams, both ways: {} sweeps from {} hosts, {} probes a TTL, at most {}s a host each way",
        streams.len(),
        sweeps.len(),
        hosts.len(),
        plan.probes,
        units::g(plan.seconds)
    )?;
    out.flush()?;
    // The requests' sweeps first, then the replies': a stream's two sweeps
    // at once would each bind the port the other's probes go to, and read
    // them as the destination's answer.
    let mut traced = Vec::new();
    let mut failed = Vec::new();
    for leg in [Leg::Requests, Leg::Replies] {
        let round: Vec<&Sweep> = sweeps.iter().filter(|s| s.path.leg == leg).collect();
        let (paths, hosts_failed) = sweep_round(fleet, &round, plan);
        traced.extend(paths);
        failed.extend(hosts_failed);
    }
    if fleet.dry_run {
        return Ok(Some(0));
    }
    let file = dir.join(paths::FILE);
    let whole = traced.iter().filter(|p| p.hops.is_ok()).count();
    // Nothing swept writes nothing: an earlier trace stays as it was.
    let written = if whole > 0 {
        paths::write(&file, wall_now().ceil() as i64, &traced)?;
        format!(", written to {}", file.display())
    } else {
        String::new()
    };
    writeln!(
        out,
        "[mx] trace: {whole} of {} legs swept{written}",
        traced.len()
    )?;
    for why in traced.iter().filter_map(|p| p.hops.as_ref().err()).take(3) {
        writeln!(out, "[mx] trace: not swept: {why}")?;
    }
    // A host that failed both rounds is named once.
    let mut named = std::collections::BTreeSet::new();
    failed.retain(|f| named.insert(f.split(" (").next().unwrap_or(f).to_string()));
    if !failed.is_empty() {
        writeln!(out, "[mx] trace: FAILED on {}", failed.join(", "))?;
    }
    Ok(Some(if failed.is_empty() { 0 } else { EXIT_PROBLEMS }))
}

/// Runs `sweeps` on their hosts, `--jobs` hosts at a time; returns each
/// sweep as its host gave it, in order, and the hosts whose sweeps could
/// not run (`name (why)`).
fn sweep_round(fleet: &Fleet, sweeps: &[&Sweep], plan: &Plan) -> (Vec<TracedPath>, Vec<String>) {
    let mut by_host: BTreeMap<usize, Vec<&Sweep>> = BTreeMap::new();
    for s in sweeps {
        by_host.entry(s.host).or_default().push(s);
    }
    let hosts: Vec<usize> = by_host.keys().copied().collect();
    let tuples: HashMap<&str, String> = by_host
        .iter()
        .map(|(&h, list)| {
            let spec: Vec<String> = list
                .iter()
                .map(|s| format!("{}>{}", s.src, s.dst))
                .collect();
            (fleet.matrix.hosts()[h].name.as_str(), spec.join(","))
        })
        .collect();
    let timeout = Duration::from_secs_f64(plan.seconds + 30.0);
    let outcomes = fleet.each(&hosts, |host| {
        let spec = tuples.get(host.name.as_str()).map_or("", String::as_str);
        let script = scripts::trace(&fleet.dir(host), spec, plan.probes, plan.seconds);
        fleet.transport.run(host, &script, timeout)
    });
    let mut traced = Vec::new();
    let mut failed = Vec::new();
    for (&h, outcome) in hosts.iter().zip(&outcomes) {
        let mut said: HashMap<(String, String), paths::Sweep> = outcome
            .text
            .lines()
            .filter_map(parse_host_line)
            .map(|(src, dst, sweep)| ((src, dst), sweep))
            .collect();
        if !outcome.ok() {
            let first = outcome.text.lines().next().unwrap_or("no answer");
            failed.push(format!("{} ({first})", fleet.matrix.hosts()[h].name));
        }
        for s in &by_host[&h] {
            let sweep = said
                .remove(&(s.src.to_string(), s.dst.to_string()))
                .unwrap_or_else(|| Err("the host gave no line for it".to_string()));
            traced.push(TracedPath {
                hops: sweep,
                ..s.path.clone()
            });
        }
    }
    (traced, failed)
}

/// Each stream's two sweeps (its requests from its sender, its replies
/// from its responder), at most [`MAX_TUPLES`] a host; and what was left
/// out, and why.
fn sweeps_of(fleet: &Fleet, streams: &[StreamToTrace]) -> (Vec<Sweep>, Vec<String>) {
    let hosts = fleet.matrix.hosts();
    let index: HashMap<&str, usize> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (h.name.as_str(), i))
        .collect();
    let mut addrs: HashMap<usize, Option<Ipv4Addr>> = HashMap::new();
    let mut v4 = |i: usize| *addrs.entry(i).or_insert_with(|| ipv4_of(&hosts[i]));
    let mut sweeps = Vec::new();
    let mut per_host: HashMap<usize, usize> = HashMap::new();
    let (mut not_v4, mut over) = (BTreeMap::new(), BTreeMap::new());
    for s in streams {
        let (Some(&a), Some(&b)) = (
            index.get(s.sender.as_str()),
            index.get(s.responder.as_str()),
        ) else {
            continue;
        };
        let (Some(a_ip), Some(b_ip)) = (v4(a), v4(b)) else {
            *not_v4
                .entry((s.sender.clone(), s.responder.clone()))
                .or_insert(0) += 1;
            continue;
        };
        let sender = SocketAddrV4::new(a_ip, s.sport);
        let responder = SocketAddrV4::new(b_ip, hosts[b].port);
        for (host, src, dst, leg, from, to) in [
            (a, sender, responder, Leg::Requests, &s.sender, &s.responder),
            (b, responder, sender, Leg::Replies, &s.responder, &s.sender),
        ] {
            let n = per_host.entry(host).or_insert(0);
            if *n == MAX_TUPLES {
                *over.entry(hosts[host].name.clone()).or_insert(0) += 1;
                continue;
            }
            *n += 1;
            sweeps.push(Sweep {
                host,
                src,
                dst,
                path: TracedPath {
                    from: from.clone(),
                    to: to.clone(),
                    leg,
                    sport: s.sport,
                    hops: Ok(Vec::new()),
                },
            });
        }
    }
    let mut skipped: Vec<String> = not_v4
        .iter()
        .map(|((a, b), n)| {
            format!(
                "{n} streams of {a} -> {b} not traced: a sweep needs IPv4 addresses at both ends"
            )
        })
        .collect();
    skipped.extend(over.iter().map(|(h, n)| {
        format!("{n} sweeps from {h} left out: at most {MAX_TUPLES} a host (fewer flows, or without --all)")
    }));
    (sweeps, skipped)
}

/// The IPv4 address peers reach `host` by: its literal, or its name
/// resolved here; `None` for an IPv6 host.
fn ipv4_of(host: &Host) -> Option<Ipv4Addr> {
    if let Ok(ip) = host.addr.parse::<Ipv4Addr>() {
        return Some(ip);
    }
    (host.addr.as_str(), 0)
        .to_socket_addrs()
        .ok()?
        .find_map(|a| match a {
            std::net::SocketAddr::V4(v4) => Some(*v4.ip()),
            std::net::SocketAddr::V6(_) => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(sender: &str, responder: &str, ports: std::ops::Range<u16>) -> Vec<StreamToTrace> {
        ports
            .map(|sport| StreamToTrace {
                sender: sender.into(),
                responder: responder.into(),
                sport,
            })
            .collect()
    }

    #[test]
    fn a_trace_takes_whole_flows_up_to_its_cap() {
        let streams = [
            flow("h1", "h3", 40_000..40_016),
            flow("h2", "h3", 40_000..40_016),
            flow("h1", "h4", 40_000..40_016),
        ]
        .concat();
        assert_eq!(whole_flows_up_to(&streams, 1024).len(), 48);
        // 40 holds two whole flows of 16, not a third cut short.
        let two = whole_flows_up_to(&streams, 40);
        assert_eq!(two.len(), 32);
        assert_eq!(two[16].sender, "h2");
        // A first flow past the cap alone is cut to it.
        assert_eq!(whole_flows_up_to(&streams, 10).len(), 10);
    }
}
