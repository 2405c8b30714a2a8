//! Findings about what was sent rather than lost: a host that sent less
//! than its rate and why (its CPU, the tool's own workers, its disk), a
//! disk that held the responders back, a layered run still short of a full
//! rotation, and the all-clear.

use std::collections::BTreeMap;

use super::super::aggregate::ReportSet;
use super::super::figures::{Fleet, HostFigures, percent};
use super::cells::Cells;
use super::place::{DISK_SUSPECT_PCT, HostEvidence};
use super::says::{BusyDisk, Says, ShortHost, ShortWhy};
use super::{Blame, Finding, Kind, Place};
use mx_matrix::load::WORKER_EXCHANGES_PER_SECOND;

/// The ramp mx suggests wherever it suggests one (the advice here, `mx
/// hints`, the docs; `summary::ramp` takes it from here): from half the
/// matrix's rates to three times them, 11 steps.
pub const SUGGESTED_RAMP: &str = "0.5:3";

/// A core this busy is not available to anything else.
const HOT_CORE_PCT: f64 = 85.0;
/// An agent worker this busy is the ceiling of its host.
const BUSY_WORKER_PCT: f64 = 75.0;
/// A disk that held a worker this much of its time is the host's ceiling.
const DISK_BOUND_PCT: f64 = 75.0;
/// A host that sent less than this share of its target fell short.
const SHORT_SHARE: f64 = 0.95;

/// Why a host fell short of its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cause {
    /// Its agent could not keep its schedule: behind, throttled.
    Starved,
    /// Its busiest core was full.
    HotCore,
    /// Its kernel dropped datagrams on their way out while its neighbour
    /// table was full or could not resolve: it could not reach its peers.
    Unresolved,
    /// Its kernel dropped datagrams on their way out: its egress (a rate
    /// cap, a full qdisc) held it back.
    Egress,
    /// Its disk held its requests (a disk run that reads them).
    Disk,
    /// Nothing it counted says why.
    Unknown,
}

/// The tool's own ceiling, and each host that sent less than asked, by cause.
pub fn findings(
    set: &ReportSet,
    hosts: &[HostFigures],
    evidence: &BTreeMap<u32, HostEvidence>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let (target, sent) = hosts
        .iter()
        .fold((0.0, 0.0), |(t, s), h| (t + h.target, s + h.sent));
    let fleet_short = (target > 0.0 && sent < SHORT_SHARE * target).then(|| percent(sent, target));
    out.extend(busy_worker(set, hosts, fleet_short));
    let busiest_disk = evidence
        .values()
        .filter_map(|e| e.disk_waits().map(|busy| (e.id, busy)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let mut short: BTreeMap<Cause, Vec<(&HostFigures, Option<&HostEvidence>)>> = BTreeMap::new();
    for h in hosts {
        if h.target <= 0.0 || h.sent >= SHORT_SHARE * h.target {
            continue;
        }
        // A worker at its ceiling says why already.
        if h.agent_cpu.is_some_and(|a| a >= BUSY_WORKER_PCT) {
            continue;
        }
        let e = evidence.get(&h.id);
        let cause = if e.is_some_and(HostEvidence::starved) {
            Cause::Starved
        } else if h.cpu_core.is_some_and(|c| c >= HOT_CORE_PCT) {
            Cause::HotCore
        } else if e.is_some_and(|e| {
            e.sndbuf_errors >= super::cells::MIN_LOST
                && (e.neigh_table_fulls > 0.0 || e.neigh_res_failed > 0.0)
        }) {
            Cause::Unresolved
        } else if e.is_some_and(|e| e.sndbuf_errors + e.nic_tx_drops >= super::cells::MIN_LOST) {
            Cause::Egress
        } else if e.and_then(HostEvidence::disk_waits).is_some() || busiest_disk.is_some() {
            // A disk run's requests and replies wait on a disk: its own, or
            // its peers' (they answer only once their disk has done its part).
            Cause::Disk
        } else {
            Cause::Unknown
        };
        short.entry(cause).or_default().push((h, e));
    }
    for (cause, hosts) in short {
        out.push(short_finding(set, cause, &hosts, busiest_disk));
    }
    out
}

/// One cause's hosts short of their rate; `busiest_disk` is the host whose
/// disk held its worker longest, when that mattered (a disk run).
fn short_finding(
    set: &ReportSet,
    cause: Cause,
    hosts: &[(&HostFigures, Option<&HostEvidence>)],
    busiest_disk: Option<(u32, f64)>,
) -> Finding {
    let names: Vec<&str> = hosts.iter().map(|(h, _)| set.name(h.id)).collect();
    let worst = hosts
        .iter()
        .map(|(h, _)| percent(h.sent, h.target))
        .fold(f64::INFINITY, f64::min);
    let short: Vec<ShortHost> = hosts
        .iter()
        .map(|(h, _)| ShortHost {
            host: set.name(h.id).to_string(),
            sent_pps: h.sent,
            target_pps: h.target,
        })
        .collect();
    let said = |why: ShortWhy| {
        Finding::new(
            Kind::Rate,
            Says::Short {
                hosts: short.clone(),
                why,
            },
        )
        .figure("sent_pct_of_target", worst)
    };
    match cause {
        Cause::Starved => starved(said, set, hosts, &names),
        Cause::HotCore => on_cpu(
            said(ShortWhy::HotCore {
                core_pct: HOT_CORE_PCT,
            }),
            &names,
        ),
        Cause::Egress => egress(said, hosts, &names),
        Cause::Unresolved => unresolved(said, hosts, &names),
        Cause::Disk => {
            let (disk_host, busy) = busiest_disk.unwrap_or((hosts[0].0.id, DISK_SUSPECT_PCT));
            disk_held(said, set.name(disk_host), busy)
        }
        Cause::Unknown => said(ShortWhy::Unknown),
    }
}

/// Each host named, its CPU blamed.
fn on_cpu(mut f: Finding, names: &[&str]) -> Finding {
    for name in names {
        f = f.blame(Blame::host(name, Place::Cpu));
    }
    f
}

/// Agents that could not keep their schedule. A disk run's requests wait
/// for their payload's read, which puts a sender behind its schedule as
/// surely as a lack of CPU: a host whose disk held its worker is named
/// with its disk (the first such), ahead of the CPUs.
fn starved(
    said: impl Fn(ShortWhy) -> Finding,
    set: &ReportSet,
    hosts: &[(&HostFigures, Option<&HostEvidence>)],
    names: &[&str],
) -> Finding {
    let behind = hosts
        .iter()
        .filter_map(|(_, e)| e.map(|e| e.behind_ms))
        .fold(0.0, f64::max);
    let throttled: f64 = hosts
        .iter()
        .filter_map(|(_, e)| e.map(|e| e.throttled_ms))
        .sum();
    let disk = hosts.iter().find_map(|(h, e)| {
        Some(BusyDisk {
            host: set.name(h.id).to_string(),
            busy_pct: (*e)?.disk_waits()?,
        })
    });
    let disk_host = disk.as_ref().map(|d| d.host.clone());
    let mut f = said(ShortWhy::Starved {
        behind_ms: behind,
        throttled_ms: throttled,
        disk,
    })
    .figure("behind_ms", behind);
    if throttled > 0.0 {
        f = f.figure("throttled_ms", throttled);
    }
    if let Some(host) = disk_host {
        f = f.blame(Blame::host(&host, Place::Disk));
    }
    on_cpu(f, names)
}

/// Kernels that dropped datagrams on their way out: each host's egress,
/// blamed toward the traffic leaving it.
fn egress(
    said: impl Fn(ShortWhy) -> Finding,
    hosts: &[(&HostFigures, Option<&HostEvidence>)],
    names: &[&str],
) -> Finding {
    let dropped: f64 = hosts
        .iter()
        .filter_map(|(_, e)| e.map(|e| e.sndbuf_errors + e.nic_tx_drops))
        .sum();
    let mut f = said(ShortWhy::Egress { dropped }).figure("udp_sndbuf_errors_pkts", dropped);
    for name in names {
        f = f.blame(Blame::toward(
            name,
            super::Direction::OutOf,
            Place::TransmitPath,
        ));
    }
    f
}

/// Kernels that dropped datagrams on their way out while their neighbour
/// tables were full or could not resolve: each host's neighbour table.
fn unresolved(
    said: impl Fn(ShortWhy) -> Finding,
    hosts: &[(&HostFigures, Option<&HostEvidence>)],
    names: &[&str],
) -> Finding {
    let sum =
        |of: fn(&HostEvidence) -> f64| -> f64 { hosts.iter().filter_map(|(_, e)| e.map(of)).sum() };
    // The tables are the machine's: hosts sharing one kernel count the
    // same fulls, so the most any host counted, not their sum.
    let most = |of: fn(&HostEvidence) -> f64| -> f64 {
        hosts
            .iter()
            .filter_map(|(_, e)| e.map(of))
            .fold(0.0, f64::max)
    };
    let dropped = sum(|e| e.sndbuf_errors);
    let table_fulls = most(|e| e.neigh_table_fulls);
    let res_failed = most(|e| e.neigh_res_failed);
    let mut f = said(ShortWhy::Unresolved {
        dropped,
        table_fulls,
        res_failed,
    })
    .figure("udp_sndbuf_errors_pkts", dropped)
    .figure("neigh_table_fulls", table_fulls)
    .figure("neigh_res_failed", res_failed);
    for name in names {
        f = f.blame(Blame::toward(
            name,
            super::Direction::OutOf,
            Place::NeighbourTable,
        ));
    }
    f
}

/// Hosts with CPU to spare in a disk run: the busiest disk is named (a
/// host's requests and replies wait on its own disk or its peers'); with
/// no disk measured busy, the first host's, at the suspect share.
fn disk_held(said: impl Fn(ShortWhy) -> Finding, name: &str, busy: f64) -> Finding {
    said(ShortWhy::Disk {
        disk: BusyDisk {
            host: name.to_string(),
            busy_pct: busy,
        },
    })
    .blame(Blame::host(name, Place::Disk))
}

/// The tool's workers as the ceiling: the busiest worker nearly a full
/// core, and what would lift it.
fn busy_worker(set: &ReportSet, hosts: &[HostFigures], fleet_short: Option<f64>) -> Vec<Finding> {
    // The first of equals wins, so ties name the first host in table order.
    let Some((h, agent)) = hosts
        .iter()
        .filter_map(|h| {
            h.agent_cpu
                .filter(|&a| a >= BUSY_WORKER_PCT)
                .map(|a| (h, a))
        })
        .fold(
            None,
            |best: Option<(&HostFigures, f64)>, (h, a)| match best {
                Some((_, b)) if b >= a => best,
                _ => Some((h, a)),
            },
        )
    else {
        return Vec::new();
    };
    let name = set.name(h.id);
    let first = Finding::new(
        Kind::Rate,
        Says::BusyWorker {
            host: name.to_string(),
            agent_cpu_pct: agent,
            fleet_sent_pct: fleet_short,
            worker_pps: WORKER_EXCHANGES_PER_SECOND,
        },
    )
    .figure("agent_cpu_pct", agent)
    .blame(Blame::host(name, Place::Cpu));
    let second = Finding::new(
        Kind::Rate,
        Says::MoreWorkers {
            host: name.to_string(),
            workers: h.workers.unwrap_or(1),
            peers: h.peers,
        },
    );
    vec![first, second]
}

/// Hosts whose busiest worker spent most of its time in disk I/O (its disk
/// threads' time: its queue of `--disk-depth` operations full): the worst
/// one named with its busy share, what its disk did, its workers and the
/// operations each kept in flight (together, the queue depth).
pub(crate) fn disk_bound(set: &ReportSet, hosts: &[HostFigures]) -> Option<Finding> {
    let mut bound: Vec<(&HostFigures, f64)> = hosts
        .iter()
        .filter_map(|h| h.disk.and_then(|d| d.busy).map(|b| (h, b)))
        .filter(|(_, b)| *b >= DISK_BOUND_PCT)
        .collect();
    bound.sort_by(|a, b| b.1.total_cmp(&a.1));
    let &(h, busy) = bound.first()?;
    let name = set.name(h.id);
    let iops = h.disk.map(|d| {
        let ops = d.read.iops.unwrap_or(0.0) + d.write.iops.unwrap_or(0.0);
        let weighted: f64 = [d.read, d.write]
            .iter()
            .filter_map(|s| Some(s.avg_us? * s.iops?))
            .sum();
        (ops, (ops > 0.0).then(|| weighted / ops))
    });
    let says = Says::DiskBound {
        hosts: bound.len(),
        host: name.to_string(),
        busy_pct: busy,
        iops,
        workers: h.workers,
        depth: h.disk.and_then(|d| d.depth),
    };
    let mut f = Finding::new(Kind::Disk, says).figure("disk_busy_pct", busy);
    if let Some(depth) = h.disk.and_then(|d| d.depth) {
        f = f.figure("disk_depth", f64::from(depth));
    }
    for (h, _) in &bound {
        f = f.blame(Blame::host(set.name(h.id), Place::Disk));
    }
    Some(f)
}

/// A layered run that has not yet measured every pair.
pub fn coverage((measured, total, cycle): (usize, usize, f64)) -> Option<Finding> {
    (measured < total).then(|| {
        let says = Says::Coverage {
            measured,
            total,
            rotation_s: cycle,
        };
        Finding::new(Kind::Coverage, says)
            .figure("coverage_pct", percent(measured as f64, total as f64))
    })
}

/// Nothing to fix: every flow within the run's noise.
pub fn all_clear(fleet: &Fleet, grid: &Cells) -> Finding {
    let req = fleet.requests;
    let landing =
        fleet.target > 0.0 && req >= 0.98 * fleet.target && percent(fleet.replies, req) >= 99.5;
    let says = Says::AllClear {
        landing: landing && !grid.any_loss(),
        ramp: SUGGESTED_RAMP.to_string(),
    };
    Finding::new(Kind::Clear, says)
}
