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
use mx_base::units::micros;
use mx_matrix::DiskMode;

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
    let (p50, p99) = median_and_tail(figs)?;
    if !is_tail(p50, p99) {
        return None;
    }
    let spread = TailSpread::of(set, (TAIL_RATIO * p50).max(TAIL_FLOOR_US));
    let tailed = persisting(&spread.by_host);
    if tailed.is_empty() {
        return None;
    }
    let fleet_wide = is_fleet_wide(tailed.len(), spread.by_host.len());
    let head = headline(set, &spread, &tailed, fleet_wide, p50, p99);
    let f = Finding::new(Kind::Latency, String::new())
        .figure("rtt_p50_us", p50)
        .figure("rtt_p99_us", p99)
        .figure("tail_hosts", tailed.len() as f64);
    if let Some((text, host)) = disk_tail(set, ctx, figs, p50, p99) {
        let f = Finding {
            text: format!("{head}, {text}"),
            ..f
        };
        return Some(f.blame(Blame::host(set.name(host), Place::Disk)));
    }
    // Where the tail sits on a few hosts, only their agents count.
    let late: Vec<&HostEvidence> = evidence
        .values()
        .filter(|e| fleet_wide || tailed.contains(&e.id))
        .filter(|e| ran_late(e, p99))
        .collect();
    Some(match (late.is_empty(), fleet_wide) {
        (true, true) => fabric_queues(f, &head),
        (true, false) => queues_on_links(f, &head, set, &tailed, evidence),
        (false, _) => agents_ran_late(f, &head, set, &late, fleet_wide),
    })
}

/// The fleet's p50 and p99 round trip (µs): from the merged histograms
/// where the reports carry them, else the worst flow's.
fn median_and_tail(figs: &Figures) -> Option<(f64, f64)> {
    match (figs.fleet.exact, figs.fleet.worst_flow) {
        (Some((p50, p99, _)), _) => Some((p50, p99)),
        (None, Some((_, _, Some(p50), p99))) => Some((p50, p99)),
        _ => None,
    }
}

/// Each host's flows, to it and from it: their intervals, and those in
/// which the flow's p99 reached the fleet's tail (its own median may be
/// slow too: a host that answers late slows all of its round trips).
struct TailSpread {
    /// Per host: (intervals with a tail, intervals).
    by_host: BTreeMap<u32, (u64, u64)>,
    /// Over every flow, each counted once.
    tail_intervals: u64,
    intervals: u64,
}

impl TailSpread {
    fn of(set: &ReportSet, bound: f64) -> TailSpread {
        let mut spread = TailSpread {
            by_host: BTreeMap::new(),
            tail_intervals: 0,
            intervals: 0,
        };
        for (&(src, dst), counts) in &set.rtt_tails {
            let (tail, all) = (counts.over(bound), counts.intervals);
            spread.tail_intervals += tail;
            spread.intervals += all;
            for h in [src, dst] {
                let e = spread.by_host.entry(h).or_default();
                e.0 += tail;
                e.1 += all;
            }
        }
        spread
    }
}

/// The hosts on whose flows the tail persists: a tail in at least
/// [`PERSISTS_SHARE`] of their intervals (a host with none counted has no
/// tail to show).
fn persisting(by_host: &BTreeMap<u32, (u64, u64)>) -> Vec<u32> {
    by_host
        .iter()
        .filter(|(_, (tail, all))| *all > 0 && *tail as f64 >= PERSISTS_SHARE * *all as f64)
        .map(|(&h, _)| h)
        .collect()
}

/// A tail on half the hosts or more is the fleet's, not theirs.
fn is_fleet_wide(tailed: usize, hosts: usize) -> bool {
    2 * tailed >= hosts
}

/// The sentence's opening: how far the p99 sits above the p50, and where.
fn headline(
    set: &ReportSet,
    spread: &TailSpread,
    tailed: &[u32],
    fleet_wide: bool,
    p50: f64,
    p99: f64,
) -> String {
    if fleet_wide {
        format!(
            "p99 ({}) is {:.0}x the p50 ({}), and the tail held in {} of {} flow intervals, on {} of {} hosts",
            micros(Some(p99)),
            p99 / p50,
            micros(Some(p50)),
            spread.tail_intervals,
            spread.intervals,
            tailed.len(),
            spread.by_host.len()
        )
    } else {
        let names: Vec<&str> = tailed.iter().map(|&h| set.name(h)).collect();
        format!(
            "p99 ({}) is {:.0}x the p50 ({}), and the tail sits on the flows to and from {}: in most of their intervals, and not the others'",
            micros(Some(p99)),
            p99 / p50,
            micros(Some(p50)),
            name_list(&names)
        )
    }
}

/// A host that ran its agent late: behind its schedule by as much as the
/// tail (`behind_ms` in ms, `p99` in µs), throttled, or with its CPU taken
/// by the hypervisor.
fn ran_late(e: &HostEvidence, p99: f64) -> bool {
    e.behind_ms * 1000.0 >= p99 || e.throttled_ms > 0.0 || e.steal_pct >= STEAL_PCT
}

/// The whole fabric, no host in particular.
fn fabric() -> Blame {
    Blame {
        host: None,
        direction: None,
        peer: None,
        place: Place::FabricWide,
    }
}

/// A tail on most hosts, every agent on time: the network's queues.
fn fabric_queues(f: Finding, head: &str) -> Finding {
    Finding {
        text: format!(
            "{head}, and every agent kept its schedule: queues are building in the network -- `mx run --ramp` finds the rate at which the tail begins; below it the fabric is clean"
        ),
        ..f
    }
    .blame(fabric())
}

/// A tail on a few hosts whose agents kept their schedule: queues on their
/// links. A host whose kernel dropped datagrams on their way out has a full
/// queue there: the same queue holds the rest up.
fn queues_on_links(
    f: Finding,
    head: &str,
    set: &ReportSet,
    tailed: &[u32],
    evidence: &BTreeMap<u32, HostEvidence>,
) -> Finding {
    let queued: Vec<&str> = tailed
        .iter()
        .filter(|h| {
            evidence
                .get(h)
                .is_some_and(|e| e.sndbuf_errors + e.nic_tx_drops > 0.0)
        })
        .map(|&h| set.name(h))
        .collect();
    let text = if queued.is_empty() {
        format!(
            "{head}, and their agents kept their schedule: queues on their links -- their NIC's rings, their switch ports, the path to them"
        )
    } else {
        format!(
            "{head}, and their agents kept their schedule: queues -- {} dropped datagrams on the way out (a full qdisc), and what it did not drop waited in that queue",
            name_list(&queued)
        )
    };
    let mut f = Finding { text, ..f };
    for &h in tailed {
        let name = set.name(h);
        let place = if queued.contains(&name) {
            Place::TransmitPath
        } else {
            Place::Wire
        };
        f = f.blame(Blame::host(name, place));
    }
    f
}

/// Agents that ran late, which reads as a tail the network did not make;
/// where the tail is the fleet's, queues in the network fit as well.
fn agents_ran_late(
    f: Finding,
    head: &str,
    set: &ReportSet,
    late: &[&HostEvidence],
    fleet_wide: bool,
) -> Finding {
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
    let mut how = format!("{agents} fell up to {behind:.0} ms behind {own} send schedule");
    if late.iter().any(|e| e.throttled_ms > 0.0) {
        how.push_str(", held off by a CPU quota");
    }
    if steal >= STEAL_PCT {
        how.push_str(&format!(
            ", and the hypervisor took up to {steal:.1}% of {own} CPU"
        ));
    }
    let text = if fleet_wide {
        format!(
            "{head}. Queues in the network fit, and so does the hosts' own scheduling: {how}, so a busy CPU ran {them} late, which reads as a tail -- give the agents idle cores (or find where it begins with `mx run --ramp`); a tail that stays is the network's"
        )
    } else {
        format!(
            "{head}. {how}: {own} CPU ran {them} late, which reads as a tail on every flow {them} answer or send -- give {them} the CPU, then read the latency again; a tail that stays is queues on {own} links"
        )
    };
    let mut f = Finding { text, ..f }
        .figure("behind_ms", behind)
        .figure("steal_pct", steal);
    if fleet_wide {
        f = f.blame(fabric());
    }
    for name in late_names {
        f = f.blame(Blame::host(name, Place::Cpu));
    }
    f
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_persists_on_a_host_in_half_its_intervals_or_more() {
        let by_host = BTreeMap::from([(1, (5, 10)), (2, (4, 10)), (3, (0, 0)), (4, (1, 1))]);
        assert_eq!(persisting(&by_host), vec![1, 4]);
    }

    #[test]
    fn a_tail_on_half_the_hosts_or_more_is_the_fleets() {
        assert!(is_fleet_wide(2, 4));
        assert!(is_fleet_wide(3, 5));
        assert!(!is_fleet_wide(2, 5));
        assert!(!is_fleet_wide(1, 4));
    }

    #[test]
    fn an_agent_ran_late_when_behind_by_the_tail_throttled_or_robbed() {
        let on_time = HostEvidence {
            behind_ms: 2.0,
            steal_pct: 0.9,
            ..HostEvidence::default()
        };
        // p99 in µs, behind in ms.
        assert!(!ran_late(&on_time, 2_001.0));
        assert!(ran_late(&on_time, 2_000.0));
        let throttled = HostEvidence {
            throttled_ms: 0.1,
            ..on_time.clone()
        };
        assert!(ran_late(&throttled, 2_001.0));
        let robbed = HostEvidence {
            steal_pct: STEAL_PCT,
            ..on_time
        };
        assert!(ran_late(&robbed, 2_001.0));
    }
}
