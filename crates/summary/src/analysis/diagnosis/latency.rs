//! The round trip's tail: a p99 far above the p50 ([`is_tail`]), said only
//! when it persists, in most intervals of a host's flows (each interval's
//! p99 up where the fleet's tail is), never for a passing burst; and with
//! every cause the evidence fits.
//!
//! Where it sits says much: on most hosts' flows it is the fleet's (queues
//! in a shared fabric, or every host's scheduling); on a few hosts' flows
//! (the flows to and from them) it is theirs. A late agent is in every
//! host's flows, so its tail reaches most hosts: where the flows between
//! the others hold none near it, it is that agent's alone. A disk run's responders put
//! their disk's own p99 into every round trip; an agent short of CPU
//! answers late; a host whose agent fell behind its schedule by as much as
//! the tail, or whose hypervisor took its CPU (steal), ran its agent late,
//! which reads as a tail the network did not make. Where those fit as well
//! as queues in the network, both are named.

use std::collections::BTreeMap;

use super::super::aggregate::{P99Counts, ReportSet, TAIL_FLOOR_US, TAIL_RATIO, is_tail};
use super::super::figures::{Context, Figures};
use super::place::HostEvidence;
use super::says::{self, Says, TailCause};
use super::{Blame, Finding, Kind, Place};
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
    let bound = (TAIL_RATIO * p50).max(TAIL_FLOOR_US);
    let spread = TailSpread::of(&set.rtt_tails, bound, &[]);
    let mut tailed = persisting(&spread.by_host);
    if tailed.is_empty() {
        return None;
    }
    let mut fleet_wide = is_fleet_wide(tailed.len(), spread.by_host.len());
    // A few late agents are in every host's flows (each host sends to them
    // and hears from them): their tail can reach half the hosts or more.
    // Where the flows between the other hosts hold no tail near the
    // fleet's p99 (within TAIL_RATIO of it: a busy box's few ms beside an
    // agent's seconds make none of it), it is theirs.
    let late_ids: Vec<u32> = evidence
        .values()
        .filter(|e| ran_late(e, p99))
        .map(|e| e.id)
        .collect();
    let near_the_tail = bound.max(p99 / TAIL_RATIO);
    if fleet_wide && theirs_alone(&set.rtt_tails, near_the_tail, &late_ids) {
        fleet_wide = false;
        tailed = late_ids;
    }
    let where_ = if fleet_wide {
        says::TailSpread::Fleet {
            tail_intervals: spread.tail_intervals,
            intervals: spread.intervals,
            hosts: tailed.len(),
            of: spread.by_host.len(),
        }
    } else {
        says::TailSpread::Hosts {
            hosts: tailed.iter().map(|&h| set.name(h).to_string()).collect(),
        }
    };
    let said = |cause: TailCause| {
        let says = Says::Tail {
            p50_us: p50,
            p99_us: p99,
            spread: where_.clone(),
            cause,
        };
        Finding::new(Kind::Latency, says)
            .figure("rtt_p50_us", p50)
            .figure("rtt_p99_us", p99)
            .figure("tail_hosts", tailed.len() as f64)
    };
    if let Some((cause, host)) = disk_tail(set, ctx, figs, p50, p99) {
        return Some(said(cause).blame(Blame::host(set.name(host), Place::Disk)));
    }
    // Where the tail sits on a few hosts, only their agents count.
    let late: Vec<&HostEvidence> = evidence
        .values()
        .filter(|e| fleet_wide || tailed.contains(&e.id))
        .filter(|e| ran_late(e, p99))
        .collect();
    Some(match (late.is_empty(), fleet_wide) {
        (true, true) => said(TailCause::FabricQueues).blame(fabric()),
        (true, false) => queues_on_links(said, set, &tailed, evidence),
        (false, _) => agents_ran_late(said, set, &late, fleet_wide),
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
    /// Over the flows `rtt_tails` holds (keyed by (host, peer)), leaving
    /// out every flow to or from a host in `without`.
    fn of(rtt_tails: &BTreeMap<(u32, u32), P99Counts>, bound: f64, without: &[u32]) -> TailSpread {
        let mut spread = TailSpread {
            by_host: BTreeMap::new(),
            tail_intervals: 0,
            intervals: 0,
        };
        for (&(src, dst), counts) in rtt_tails {
            if without.contains(&src) || without.contains(&dst) {
                continue;
            }
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

/// Whether a tail is the `late` hosts' alone: they are fewer than half the
/// hosts, and the flows between the others were measured and hold no
/// persisting tail over `bound` (us). (Were the late hosts half the fleet
/// or more, or were no flow left to read, queues in the network would fit
/// as well.)
fn theirs_alone(rtt_tails: &BTreeMap<(u32, u32), P99Counts>, bound: f64, late: &[u32]) -> bool {
    let hosts = TailSpread::of(rtt_tails, bound, &[]).by_host.len();
    if late.is_empty() || is_fleet_wide(late.len(), hosts) {
        return false;
    }
    let others = TailSpread::of(rtt_tails, bound, late);
    others.intervals > 0 && persisting(&others.by_host).is_empty()
}

/// A host that ran its agent late: behind its schedule by as much as the
/// tail (`behind_ms` in ms, `p99` in µs), starved (far behind, or
/// throttled: a starved agent's reads wait longer than its sends, so its
/// round trips' tail can run seconds past how far its sends fell behind),
/// or with its CPU taken by the hypervisor.
fn ran_late(e: &HostEvidence, p99: f64) -> bool {
    e.behind_ms * 1000.0 >= p99 || e.starved() || e.steal_pct >= STEAL_PCT
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

/// A tail on a few hosts whose agents kept their schedule: queues on their
/// links. A host whose kernel dropped datagrams on their way out has a full
/// queue there: the same queue holds the rest up.
fn queues_on_links(
    said: impl Fn(TailCause) -> Finding,
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
    let mut f = said(TailCause::LinkQueues {
        queued: queued.iter().map(|q| q.to_string()).collect(),
    });
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
    said: impl Fn(TailCause) -> Finding,
    set: &ReportSet,
    late: &[&HostEvidence],
    fleet_wide: bool,
) -> Finding {
    let late_names: Vec<&str> = late.iter().map(|e| set.name(e.id)).collect();
    let behind = late.iter().map(|e| e.behind_ms).fold(0.0, f64::max);
    let steal = late.iter().map(|e| e.steal_pct).fold(0.0, f64::max);
    let cause = TailCause::AgentsLate {
        hosts: late_names.iter().map(|n| n.to_string()).collect(),
        behind_ms: behind,
        throttled: late.iter().any(|e| e.throttled_ms > 0.0),
        steal_pct: (steal >= STEAL_PCT).then_some(steal),
        fleet_wide,
    };
    let mut f = said(cause)
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
) -> Option<(TailCause, u32)> {
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
    let cause = TailCause::Disk {
        host: set.name(host).to_string(),
        io: io.to_string(),
        disk_p99_us: disk_p99,
        makes_the_tail: disk_p99 >= DISK_TAIL_SHARE * (p99 - p50),
    };
    Some((cause, host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_persists_on_a_host_in_half_its_intervals_or_more() {
        let by_host = BTreeMap::from([(1, (5, 10)), (2, (4, 10)), (3, (0, 0)), (4, (1, 1))]);
        assert_eq!(persisting(&by_host), vec![1, 4]);
    }

    /// Flows (host, peer) with `tail` of `all` intervals whose p99 is 10 ms
    /// (the rest 100 us).
    fn flows(each: &[((u32, u32), u32, u32)]) -> BTreeMap<(u32, u32), P99Counts> {
        each.iter()
            .map(|&(flow, tail, all)| {
                let mut c = P99Counts::default();
                (0..all).for_each(|i| c.add(if i < tail { 10_000.0 } else { 100.0 }));
                (flow, c)
            })
            .collect()
    }

    #[test]
    fn one_late_hosts_tail_in_every_hosts_flows_is_its_alone() {
        // A 4-host mesh where every flow to and from host 1 holds the tail:
        // each other host has 2 of its 6 flows tailed, and host 1 all of
        // its own. The flows between 2, 3 and 4 are clean.
        let mut each = vec![];
        for a in 1..=4u32 {
            for b in (1..=4u32).filter(|&b| b != a) {
                let tail = if a == 1 || b == 1 { 3 } else { 0 };
                each.push(((a, b), tail, 3));
            }
        }
        let mesh = flows(&each);
        assert!(theirs_alone(&mesh, 1_000.0, &[1]));
        // Not so where the flows between the others hold it too.
        let mut queued = each.clone();
        for f in queued.iter_mut().filter(|f| f.0 == (2, 3) || f.0 == (3, 2)) {
            f.1 = 3;
        }
        assert!(!theirs_alone(&flows(&queued), 1_000.0, &[1]));
        // A tail between the others far below the bound is none.
        assert!(theirs_alone(&flows(&queued), 1_000_000.0, &[1]));
        // Nor where the late hosts are half the fleet, or none.
        assert!(!theirs_alone(&mesh, 1_000.0, &[1, 2]));
        assert!(!theirs_alone(&mesh, 1_000.0, &[]));
        // Nor where no flow is left to read beside theirs.
        let star = flows(&[
            ((1, 2), 3, 3),
            ((2, 1), 3, 3),
            ((1, 3), 3, 3),
            ((3, 1), 3, 3),
        ]);
        assert!(!theirs_alone(&star, 1_000.0, &[1]));
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
            ..on_time.clone()
        };
        assert!(ran_late(&robbed, 2_001.0));
        // Starved (1.3 s behind, no quota): a 7 s tail is still its agent's,
        // its reads waiting longer than its sends.
        let starved = HostEvidence {
            behind_ms: 1_299.0,
            ..on_time.clone()
        };
        assert!(ran_late(&starved, 7_000_000.0));
        // 19 ms behind is not starved: a 30 ms tail is not its agent's.
        let behind = HostEvidence {
            behind_ms: 19.0,
            ..on_time
        };
        assert!(!ran_late(&behind, 30_000.0));
    }
}
