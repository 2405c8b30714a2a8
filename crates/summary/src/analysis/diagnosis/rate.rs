//! Findings about what was sent rather than lost: a host that sent less
//! than its rate and why (its CPU, the tool's own workers, its disk), a
//! disk that held the responders back, a layered run still short of a full
//! rotation, and the all-clear.

use std::collections::BTreeMap;

use super::super::aggregate::ReportSet;
use super::super::figures::{Fleet, HostFigures, percent};
use super::cells::Cells;
use super::place::{DISK_SUSPECT_PCT, HostEvidence};
use super::{Blame, Finding, Kind, Place, pct};
use mx_base::units::{self, pps};
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
    let they = if hosts.len() == 1 { "its" } else { "their" };
    let one = shortfall(set, hosts, &names);
    let f = Finding::new(Kind::Rate, String::new()).figure("sent_pct_of_target", worst);
    match cause {
        Cause::Starved => starved(f, &one, set, hosts, &names),
        Cause::HotCore => on_cpu(
            Finding {
                text: format!(
                    "{one} with a core at {HOT_CORE_PCT:.0}% or more: {they} CPU is the ceiling, not the network -- more cores, or fewer flows a host"
                ),
                ..f
            },
            &names,
        ),
        Cause::Egress => egress(f, &one, hosts, &names),
        Cause::Disk => disk_held(f, &one, set, hosts, busiest_disk),
        Cause::Unknown => Finding {
            text: format!(
                "{one} with CPU to spare: a flow may have failed to open (`mx logs`), or the run was too short to ramp"
            ),
            ..f
        },
    }
}

/// The sentence's opening: `h1 sent 26.2% of its rate (3.9 of 15.0 kpps)`,
/// or for several `h1 and h3 sent less than their rate (h1 94.6%, h3
/// 94.6%)`, with the shares of the first five only.
fn shortfall(
    set: &ReportSet,
    hosts: &[(&HostFigures, Option<&HostEvidence>)],
    names: &[&str],
) -> String {
    match hosts {
        [(h, _)] => format!(
            "{} sent {}% of its rate ({} of {})",
            set.name(h.id),
            pct(percent(h.sent, h.target)),
            pps(h.sent),
            pps(h.target)
        ),
        _ => {
            let shares: Vec<String> = hosts
                .iter()
                .take(5)
                .map(|(h, _)| format!("{} {}%", set.name(h.id), pct(percent(h.sent, h.target))))
                .collect();
            format!(
                "{} sent less than their rate ({})",
                super::name_list(names),
                shares.join(", ")
            )
        }
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
    f: Finding,
    one: &str,
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
    let mut f = f.figure("behind_ms", behind);
    if throttled > 0.0 {
        f = f.figure("throttled_ms", throttled);
    }
    let why = fell_behind(names, behind, throttled);
    let disk = hosts
        .iter()
        .find_map(|(h, e)| Some((set.name(h.id), (*e)?.disk_waits()?)));
    let text = if let Some((disk_host, busy)) = disk {
        f = f.blame(Blame::host(disk_host, Place::Disk));
        format!(
            "{one}: {why}, and {disk_host}'s busiest worker spent {busy:.0}% of its time in disk I/O: the shortfall is the CPU or the disk, not the network; a run without --disk tells which"
        )
    } else {
        let (own, agents, need) = if names.len() == 1 {
            ("its", "its agent", "it needs")
        } else {
            ("their", "the agents", "they need")
        };
        format!(
            "{one}: {why}: {own} CPU, not the network -- give {agents} the CPU {need} (a quota, other load on the box), then rerun"
        )
    };
    on_cpu(Finding { text, ..f }, names)
}

/// What starved agents' own figures say: how far behind their schedule
/// they fell, and their cgroup's throttling summed over the hosts.
fn fell_behind(names: &[&str], behind: f64, throttled: f64) -> String {
    let (agents, own) = if names.len() == 1 {
        (format!("{}'s agent", names[0]), "its")
    } else {
        ("their agents".to_string(), "their")
    };
    if throttled > 0.0 {
        format!(
            "{agents} {} throttled {throttled:.0} ms by a cgroup's CPU quota and fell up to {behind:.0} ms behind {own} send schedule",
            if names.len() == 1 { "was" } else { "were" }
        )
    } else {
        format!("{agents} fell up to {behind:.0} ms behind {own} send schedule")
    }
}

/// Kernels that dropped datagrams on their way out: each host's egress,
/// blamed toward the traffic leaving it.
fn egress(
    f: Finding,
    one: &str,
    hosts: &[(&HostFigures, Option<&HostEvidence>)],
    names: &[&str],
) -> Finding {
    let dropped: f64 = hosts
        .iter()
        .filter_map(|(_, e)| e.map(|e| e.sndbuf_errors + e.nic_tx_drops))
        .sum();
    let mut f = f.figure("udp_sndbuf_errors_pkts", dropped);
    for name in names {
        f = f.blame(Blame::toward(
            name,
            super::Direction::OutOf,
            Place::TransmitPath,
        ));
    }
    let (they, them) = if hosts.len() == 1 {
        ("its", "it")
    } else {
        ("their", "them")
    };
    Finding {
        text: format!(
            "{one}, and {they} kernel dropped {} datagrams on their way out (UDP SndbufErrors, the NIC's tx drops): {they} egress held {them} back, a rate cap or a full queue -- `tc -s qdisc show` there",
            super::count(dropped),
        ),
        ..f
    }
}

/// Hosts with CPU to spare in a disk run: the busiest disk is named (a
/// host's requests and replies wait on its own disk or its peers'); with
/// no disk measured busy, the first host's, at the suspect share.
fn disk_held(
    f: Finding,
    one: &str,
    set: &ReportSet,
    hosts: &[(&HostFigures, Option<&HostEvidence>)],
    busiest_disk: Option<(u32, f64)>,
) -> Finding {
    let (disk_host, busy) = busiest_disk.unwrap_or((hosts[0].0.id, DISK_SUSPECT_PCT));
    let name = set.name(disk_host);
    Finding {
        text: format!(
            "{one} with CPU to spare, while {name}'s busiest worker spent {busy:.0}% of its time in disk I/O: the shortfall is the disk's, not the network's -- a faster disk or more `mx start --workers` (one I/O in flight each) would lift it"
        ),
        ..f
    }
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
    let prefix = fleet_short.map_or(String::new(), |p| {
        format!("sending {p:.1}% of target, and ")
    });
    let first = Finding::new(
        Kind::Rate,
        format!(
            "{prefix}the busiest agent worker on {name} is at {agent:.0}% of a core: the tool is the ceiling here, not the network (one worker sends or answers ~{} of requests)",
            pps(WORKER_EXCHANGES_PER_SECOND)
        ),
    )
    .figure("agent_cpu_pct", agent)
    .blame(Blame::host(name, Place::Cpu));
    let workers = h.workers.unwrap_or(1);
    let second = if workers as usize <= h.peers + 1 {
        format!(
            "{name} is running {workers} worker(s) for {} peer(s): workers are capped at flows + 1, so more of them cannot help until each pair has more sockets. Add `mx start --streams 8`",
            h.peers
        )
    } else {
        format!(
            "raise `mx start --workers {}` while {name} has spare cores; past that, add hosts or lower --pps",
            workers * 2
        )
    };
    vec![first, Finding::new(Kind::Rate, second)]
}

/// Hosts whose busiest worker spent most of its time in disk I/O: the worst
/// one named with its busy share, what its disk did and its workers (each
/// keeps one disk I/O in flight: the queue depth).
pub fn disk_bound(set: &ReportSet, hosts: &[HostFigures]) -> Option<Finding> {
    let mut bound: Vec<(&HostFigures, f64)> = hosts
        .iter()
        .filter_map(|h| h.disk.and_then(|d| d.busy).map(|b| (h, b)))
        .filter(|(_, b)| *b >= DISK_BOUND_PCT)
        .collect();
    bound.sort_by(|a, b| b.1.total_cmp(&a.1));
    let &(h, busy) = bound.first()?;
    let name = set.name(h.id);
    let did = h.disk.map_or(String::new(), |d| {
        let ops = d.read.iops.unwrap_or(0.0) + d.write.iops.unwrap_or(0.0);
        let weighted: f64 = [d.read, d.write]
            .iter()
            .filter_map(|s| Some(s.avg_us? * s.iops?))
            .sum();
        let avg = (ops > 0.0).then(|| weighted / ops);
        format!(
            " ({} IOPS at {} each on average)",
            units::ops(ops),
            units::micros(avg)
        )
    });
    let workers = h.workers.map_or("its".to_string(), |w| w.to_string());
    let raise = h
        .workers
        .map_or("raise `mx start --workers`".to_string(), |w| {
            format!("raise `mx start --workers {}`", w * 2)
        });
    let mut f = Finding::new(
        Kind::Disk,
        format!(
            "{} host(s) mostly waiting on the disk: {name}'s busiest worker spent {busy:.0}% of its time in disk I/O{did}, with {workers} worker(s) keeping one I/O in flight each. The disk, not the fabric, is short: {raise} for a deeper disk queue, use a faster disk, or lower --pps",
            bound.len()
        ),
    )
    .figure("disk_busy_pct", busy);
    for (h, _) in &bound {
        f = f.blame(Blame::host(set.name(h.id), Place::Disk));
    }
    Some(f)
}

/// A layered run that has not yet measured every pair.
pub fn coverage((measured, total, cycle): (usize, usize, f64)) -> Option<Finding> {
    (measured < total).then(|| {
        Finding::new(
            Kind::Coverage,
            format!(
                "coverage is {measured} of {total} pairs ({:.1}%): one full rotation takes {}; run at least that long: `mx run --for {}`",
                percent(measured as f64, total as f64),
                units::duration(cycle),
                (cycle + (cycle / 10.0).floor()) as u64
            ),
        )
        .figure("coverage_pct", percent(measured as f64, total as f64))
    })
}

/// Nothing to fix: every flow within the run's noise.
pub fn all_clear(fleet: &Fleet, grid: &Cells) -> Finding {
    let req = fleet.requests;
    let landing =
        fleet.target > 0.0 && req >= 0.98 * fleet.target && percent(fleet.replies, req) >= 99.5;
    let ramp = SUGGESTED_RAMP;
    let text = if landing && !grid.any_loss() {
        format!(
            "everything is landing at the target rate, on every flow: raise --pps (or `mx gen --pps max`) to find where it stops, or let `mx run --ramp {ramp}` climb to it step by step"
        )
    } else {
        format!(
            "nothing looks wrong: no flow loses more than the run's noise. `mx hints` lists what else to try; `mx run --ramp {ramp}` finds the rate where loss or the tail begins"
        )
    };
    Finding::new(Kind::Clear, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hosts h1..hn, ids from 0.
    fn set(n: u32) -> ReportSet {
        let mut set = ReportSet::default();
        for i in 1..=n {
            set.id(&format!("h{i}"));
        }
        set
    }

    fn host(id: u32, sent: f64) -> HostFigures {
        HostFigures {
            id,
            sent,
            target: 1000.0,
            ..HostFigures::default()
        }
    }

    #[test]
    fn a_shortfall_names_one_host_in_full_and_the_shares_of_five_at_most() {
        let set = set(6);
        let one = [(&host(0, 500.0), None)];
        assert_eq!(
            shortfall(&set, &one, &["h1"]),
            "h1 sent 50.0% of its rate (500 pps of 1.0 kpps)"
        );
        let figs: Vec<HostFigures> = (0..6).map(|i| host(i, 900.0)).collect();
        let hosts: Vec<_> = figs.iter().map(|h| (h, None)).collect();
        let names: Vec<&str> = figs.iter().map(|h| set.name(h.id)).collect();
        let text = shortfall(&set, &hosts, &names);
        assert!(text.contains("h5 90.0%)"), "{text}");
        assert!(!text.contains("h6 90.0%"), "{text}");
    }

    #[test]
    fn starved_agents_say_their_throttling_only_when_there_was_some() {
        assert_eq!(
            fell_behind(&["h1"], 310.0, 0.0),
            "h1's agent fell up to 310 ms behind its send schedule"
        );
        assert_eq!(
            fell_behind(&["h1", "h2"], 310.0, 420.0),
            "their agents were throttled 420 ms by a cgroup's CPU quota and fell up to 310 ms behind their send schedule"
        );
    }
}
