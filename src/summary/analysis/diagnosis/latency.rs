//! The round trip's tail: a p99 far above the p50 ([`is_tail`]), said only
//! when it persists, in most intervals of a host's flows (each interval's
//! p99 up where the fleet's tail is), never for a passing burst; and with
//! every cause the evidence fits.
//!
//! Where it sits says much: on most hosts' flows it is the fleet's (queues
//! in a shared fabric, or every host's scheduling); on a few hosts' flows
//! (the flows to and from them) it is theirs. A disk run's responders put
//! their disk's own p99 into every round trip; an agent short of CPU
//! answers late; a host whose agent fell behind its schedule by as much as
//! the tail, or whose hypervisor took its CPU (steal), ran its agent late,
//! which reads as a tail the network did not make. Where those fit as well
//! as queues in the network, both are named.

use std::collections::BTreeMap;

use super::super::aggregate::{ReportSet, TAIL_FLOOR_US, TAIL_RATIO, is_tail};
use super::super::figures::{Context, Figures};
use super::place::HostEvidence;
use super::{Blame, Finding, Kind, Place, name_list};
use crate::matrix::DiskMode;
use crate::units::micros;

/// Share of the intervals of a host's flows (to it and from it) whose p99
/// must be a tail for the tail to sit on that host.
const PERSISTS_SHARE: f64 = 0.5;
/// Steal (% of the CPU) that makes a host's scheduling a cause.
const STEAL_PCT: f64 = 1.0;
/// A disk p99 at least this share of the tail's lift over the p50 makes
/// the tail; below it the disk's own time is a small part of it.
const DISK_TAIL_SHARE: f64 = 0.5;

/// The tail finding, when the tail persists.
pub fn findings(
    set: &ReportSet,
    ctx: &Context,
    figs: &Figures,
    evidence: &BTreeMap<u32, HostEvidence>,
) -> Option<Finding> {
    let fleet = &figs.fleet;
    let (p50, p99) = match (fleet.exact, fleet.worst_flow) {
        (Some((p50, p99, _)), _) => (p50, p99),
        (None, Some((_, _, Some(p50), p99))) => (p50, p99),
        _ => return None,
    };
    if !is_tail(p50, p99) {
        return None;
    }
    // Each host's flows, to it and from it: their intervals, and those in
    // which the flow's p99 reached the fleet's tail (its own median may be
    // slow too: a host that answers late slows all of its round trips).
    let bound = (TAIL_RATIO * p50).max(TAIL_FLOOR_US);
    let mut by_host: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut tail_intervals = 0;
    let mut intervals = 0;
    for (&(src, dst), counts) in &set.rtt_tails {
        let (tail, all) = (counts.over(bound), counts.intervals);
        tail_intervals += tail;
        intervals += all;
        for h in [src, dst] {
            let e = by_host.entry(h).or_default();
            e.0 += tail;
            e.1 += all;
        }
    }
    let tailed: Vec<u32> = by_host
        .iter()
        .filter(|(_, (tail, all))| *all > 0 && *tail as f64 >= PERSISTS_SHARE * *all as f64)
        .map(|(&h, _)| h)
        .collect();
    if tailed.is_empty() {
        return None;
    }
    let fleet_wide = 2 * tailed.len() >= by_host.len();
    let names: Vec<&str> = tailed.iter().map(|&h| set.name(h)).collect();
    let head = if fleet_wide {
        format!(
            "p99 ({}) is {:.0}x the p50 ({}), and the tail held in {tail_intervals} of {intervals} flow intervals, on {} of {} hosts",
            micros(Some(p99)),
            p99 / p50,
            micros(Some(p50)),
            tailed.len(),
            by_host.len()
        )
    } else {
        format!(
            "p99 ({}) is {:.0}x the p50 ({}), and the tail sits on the flows to and from {}: in most of their intervals, and not the others'",
            micros(Some(p99)),
            p99 / p50,
            micros(Some(p50)),
            name_list(&names)
        )
    };
    let mut f = Finding::new(Kind::Latency, String::new())
        .figure("rtt_p50_us", p50)
        .figure("rtt_p99_us", p99)
        .figure("tail_hosts", tailed.len() as f64);
    if let Some((text, host)) = disk_tail(set, ctx, figs, p50, p99) {
        f.text = format!("{head}, {text}");
        return Some(f.blame(Blame::host(set.name(host), Place::Disk)));
    }
    // Hosts that ran their agents late: behind their schedule by as much as
    // the tail, throttled, or with their CPU taken by the hypervisor. Where
    // the tail sits on a few hosts, only theirs count.
    let late: Vec<&HostEvidence> = evidence
        .values()
        .filter(|e| fleet_wide || tailed.contains(&e.id))
        .filter(|e| e.behind_ms * 1000.0 >= p99 || e.throttled_ms > 0.0 || e.steal_pct >= STEAL_PCT)
        .collect();
    let fabric = Blame {
        host: None,
        direction: None,
        peer: None,
        place: Place::FabricWide,
    };
    if late.is_empty() {
        if fleet_wide {
            f.text = format!(
                "{head}, and every agent kept its schedule: queues are building in the network -- `mx run --ramp` finds the rate at which the tail begins; below it the fabric is clean"
            );
            return Some(f.blame(fabric));
        }
        // A host whose kernel dropped datagrams on their way out has a full
        // queue there: the same queue holds the rest up.
        let queued: Vec<&str> = tailed
            .iter()
            .filter(|h| {
                evidence
                    .get(h)
                    .is_some_and(|e| e.sndbuf_errors + e.nic_tx_drops > 0.0)
            })
            .map(|&h| set.name(h))
            .collect();
        f.text = if queued.is_empty() {
            format!(
                "{head}, and their agents kept their schedule: queues on their links -- their NIC's rings, their switch ports, the path to them"
            )
        } else {
            format!(
                "{head}, and their agents kept their schedule: queues -- {} dropped datagrams on the way out (a full qdisc), and what it did not drop waited in that queue",
                name_list(&queued)
            )
        };
        for name in names {
            let place = if queued.contains(&name) {
                Place::TransmitPath
            } else {
                Place::Wire
            };
            f = f.blame(Blame::host(name, place));
        }
        return Some(f);
    }
    let late_names: Vec<&str> = late.iter().map(|e| set.name(e.id)).collect();
    let behind = late.iter().map(|e| e.behind_ms).fold(0.0, f64::max);
    let steal = late.iter().map(|e| e.steal_pct).fold(0.0, f64::max);
    let (agents, own, them) = if late_names.len() == 1 {
        (format!("{}'s agent", late_names[0]), "its", "it")
    } else {
        (
            format!("the agents of {}", name_list(&late_names)),
            "their",
            "them",
        )
    };
    let throttled = late.iter().any(|e| e.throttled_ms > 0.0);
    let mut how = format!("{agents} fell up to {behind:.0} ms behind {own} send schedule");
    if throttled {
        how.push_str(", held off by a CPU quota");
    }
    if steal >= STEAL_PCT {
        how.push_str(&format!(
            ", and the hypervisor took up to {steal:.1}% of {own} CPU"
        ));
    }
    f.text = if fleet_wide {
        format!(
            "{head}. Queues in the network fit, and so does the hosts' own scheduling: {how}, so a busy CPU ran {them} late, which reads as a tail -- give the agents idle cores (or find where it begins with `mx run --ramp`); a tail that stays is the network's"
        )
    } else {
        format!(
            "{head}. {how}: {own} CPU ran {them} late, which reads as a tail on every flow {them} answer or send -- give {them} the CPU, then read the latency again; a tail that stays is queues on {own} links"
        )
    };
    f = f.figure("behind_ms", behind).figure("steal_pct", steal);
    if fleet_wide {
        f = f.blame(fabric);
    }
    for name in late_names {
        f = f.blame(Blame::host(name, Place::Cpu));
    }
    Some(f)
}

/// A disk run's tail: the responders' disk p99 is in every round trip.
fn disk_tail(
    set: &ReportSet,
    ctx: &Context,
    figs: &Figures,
    p50: f64,
    p99: f64,
) -> Option<(String, u32)> {
    let d = figs.fleet.disk.as_ref()?;
    let read = d
        .read_p99_host
        .zip(d.read.p99_us)
        .map(|(h, v)| (h, v, "read"));
    let write = d
        .write_p99_host
        .zip(d.write.p99_us)
        .map(|(h, v)| (h, v, "write"));
    let larger = match (read, write) {
        (Some(r), Some(w)) => Some(if w.1 > r.1 { w } else { r }),
        (r, w) => r.or(w),
    };
    let (host, disk_p99, io) = match ctx.disk_mode() {
        Some(DiskMode::Replies) => read,
        Some(DiskMode::Requests) => write,
        _ => larger,
    }
    .filter(|(_, v, _)| *v > 0.0)?;
    let what = if disk_p99 >= DISK_TAIL_SHARE * (p99 - p50) {
        "the tail includes the disk's own p99"
    } else {
        "that is a small part of the tail, so most of it is waiting: on a busy disk or in queues"
    };
    Some((
        format!(
            "and {}'s disk {io} p99 is {} (its worst interval): {what}. Rerun without --disk to see the network's tail alone",
            set.name(host),
            micros(Some(disk_p99))
        ),
        host,
    ))
}
