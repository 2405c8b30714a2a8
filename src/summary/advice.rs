//! WHAT TO DO NEXT: read the numbers, name the knob (facts.md 5, the rules in
//! their order). Each group adds at most its first matching entry.
//!
//! In a disk run a responder answers only once its disk has done its part,
//! so a disk that cannot keep up shows as a shortfall, as requests lost in the
//! responder's sockets and as a tail: the disk rules (facts.md 5: 1, 3c, 4a,
//! 5a, 6a) say that the disk, not the fabric, is short, from the hosts' own
//! `disk_busy_pct` (the busiest worker's share of time in disk I/O) and disk
//! p99. Where the CPU fits as well, both are named.

use super::aggregate::ReportSet;
use super::evidence::{self, DISK_SUSPECT_PCT, HostLoss};
use super::figures::{Context, Fleet, FlowFigures, HostFigures, percent};
use crate::matrix::DiskMode;
use crate::plan::WORKER_EXCHANGES_PER_SECOND;
use crate::units::{self, bits, pps};

/// A core this busy is not available to anything else.
const HOT_CORE_PCT: f64 = 85.0;
/// An agent worker this busy is the ceiling of its host.
const BUSY_WORKER_PCT: f64 = 75.0;
/// A disk that held a worker this much of its time is the host's ceiling.
const DISK_BOUND_PCT: f64 = 75.0;
/// A disk p99 at least this share of the tail's lift over the p50 makes
/// the tail; below it the disk's own time is a small part of it.
const DISK_TAIL_SHARE: f64 = 0.5;
/// Loss on one leg worth a hint.
const LEG_LOSS_PCT: f64 = 1.0;
/// A row or column is sick when its loss is this many times the fleet's typical.
const SICK_FACTOR: f64 = 5.0;

fn worst_by(
    hosts: &[HostFigures],
    key: impl Fn(&HostFigures) -> Option<f64>,
) -> Option<(&HostFigures, f64)> {
    // The first of equals wins, so ties name the first host in table order.
    hosts
        .iter()
        .filter_map(|h| key(h).map(|v| (h, v)))
        .fold(None, |best, (h, v)| match best {
            Some((_, b)) if b >= v => best,
            _ => Some((h, v)),
        })
}

/// Which leg a host's lost packets went missing on, from its flows' forward
/// and return figures (known when the receivers reported).
fn leg(flows: &[&FlowFigures], receiving: bool) -> &'static str {
    // Packets per second lost on each leg, over the flows whose receiver reported.
    let (forward, back) = flows
        .iter()
        .filter_map(|f| f.arrived.map(|arrived| (f, arrived)))
        .fold((0.0, 0.0), |(fwd, ret), (f, arrived)| {
            (
                fwd + (f.sent - arrived).max(0.0),
                ret + (arrived - f.back).max(0.0),
            )
        });
    match (forward > 3.0 * back, back > 3.0 * forward, receiving) {
        (true, _, true) => "; its requests are lost on the way in",
        (true, _, false) => "; its requests are lost on the way out",
        (_, true, true) => "; the requests arrive, its replies are lost on the way back",
        (_, true, false) => "; the requests arrive, the replies to it are lost on the way back",
        _ => "",
    }
}

/// Hosts whose flows all lose far more than the fleet's typical flow: as
/// senders (a dark row of the grid), as receivers (a dark column), or both
/// (the host's own link is the bottleneck). "Typical" is the median flow that
/// does not touch the host: in a small fleet most flows may touch a sick one.
fn sick_lines(set: &ReportSet, flows: &[FlowFigures], losses: &[HostLoss]) -> Vec<String> {
    // A side whose loss the host counted itself is its own, not a cable's.
    let explained = |host: u32, receiving: bool| {
        losses.iter().any(|h| {
            h.id == host
                && if receiving {
                    h.explains_in() || h.nic_explains_in()
                } else {
                    h.explains_back()
                }
        })
    };
    let typical_without = |host: u32| {
        let others: Vec<f64> = flows
            .iter()
            .filter(|f| f.host != host && f.peer != host)
            .map(|f| f.loss)
            .collect();
        crate::units::median(&others)
    };
    // Host -> (its flows on that side, the least loss among them, the typical
    // loss elsewhere), sick ones only.
    let sick = |side: fn(&FlowFigures) -> u32| {
        let mut by_host: std::collections::BTreeMap<u32, Vec<&FlowFigures>> = Default::default();
        for f in flows {
            by_host.entry(side(f)).or_default().push(f);
        }
        by_host
            .into_iter()
            .filter(|(_, fs)| fs.len() >= 2)
            .filter_map(|(host, fs)| {
                let least = fs.iter().map(|f| f.loss).fold(f64::INFINITY, f64::min);
                let typical = typical_without(host)?;
                (least > LEG_LOSS_PCT && least > SICK_FACTOR * typical)
                    .then_some((host, (fs, least, typical)))
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let mut senders = sick(|f| f.host);
    let mut receivers = sick(|f| f.peer);
    senders.retain(|&h, _| !explained(h, false));
    receivers.retain(|&h, _| !explained(h, true));
    // Where the host's agent was short of CPU, or waited on its disk, the
    // evidence fits two causes: what it could not read in time is lost in the
    // host as well. Both are said. (A disk holds up a host's reading of
    // requests, so it is named where requests into the host are lost.)
    let look_at = |host: u32, receiving: bool, what: &str| {
        let loss = losses.iter().find(|h| h.id == host);
        let name = set.name(host);
        match (
            loss.filter(|h| h.starved()).and_then(evidence::starvation),
            loss.and_then(HostLoss::disk_waits).filter(|_| receiving),
        ) {
            (Some(why), None) => format!(
                "but {name}'s agent {why}, so what it could not read in time was lost in {name} too: give it the CPU first; if the loss stays, look at {what}"
            ),
            (None, Some(busy)) => format!(
                "but {name}'s busiest worker spent {busy:.0}% of its time in disk I/O, so requests it could not read while it waited on its disk were lost in {name} too: compare a run without --disk; if the loss stays, look at {what}"
            ),
            (Some(why), Some(busy)) => format!(
                "but {name}'s agent {why} and its busiest worker spent {busy:.0}% of its time in disk I/O, so what it could not read in time was lost in {name} too: give it the CPU and compare a run without --disk; if the loss stays, look at {what}"
            ),
            (None, None) => format!("look at {what}"),
        }
    };
    let mut lines = Vec::new();
    for (host, (out_flows, least_out, typical)) in &senders {
        let name = set.name(*host);
        lines.push(match receivers.get(host) {
            Some((_, least_in, _)) => format!(
                "{name} is the bottleneck: every flow it sends loses at least {least_out:.1}% and every flow into it at least {least_in:.1}%, while a typical flow loses {typical:.2}% -- {} (a dark row and column in `mx summarize --grid`)",
                look_at(*host, true, &format!("{name}'s own link: a rate cap, a saturated or failing NIC or switch port"))
            ),
            None => format!(
                "{name} is a sick sender: every flow it sends loses at least {least_out:.1}% while a typical flow loses {typical:.2}%{} -- {} (a dark row in `mx summarize --grid`)",
                leg(out_flows, false),
                look_at(*host, false, &format!("{name}'s NIC, cable and switch port"))
            ),
        });
    }
    for (host, (in_flows, least_in, typical)) in &receivers {
        if senders.contains_key(host) {
            continue;
        }
        let name = set.name(*host);
        lines.push(format!(
            "{name} is a sick receiver: every flow into it loses at least {least_in:.1}% while a typical flow loses {typical:.2}%{} -- {} (a dark column in `mx summarize --grid`)",
            leg(in_flows, true),
            look_at(*host, true, &format!("{name}'s NIC, cable and switch port"))
        ));
    }
    lines
}

/// Up to five names, then how many more.
fn name_list(names: &[&str]) -> String {
    let shown = names.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    match names.len() {
        n if n > 5 => format!("{shown} and {} more", n - 5),
        _ => shown,
    }
}

/// Hosts that stopped reporting before the rest (a dead agent, a cut link),
/// and matrix hosts that never reported.
fn silent_lines(set: &ReportSet, ctx: &Context) -> Vec<String> {
    let mut lines = Vec::new();
    let interval = set.interval.unwrap_or(1).max(1);
    for (&id, &last) in &set.last_seen {
        let behind = set.latest - last;
        if behind >= 2 * interval {
            let name = set.name(id);
            let starved = set
                .history
                .get(&id)
                .filter(|h| h.behind_ms >= evidence::STARVED_BEHIND_MS || h.throttled_ms > 0.0);
            lines.push(match starved {
                Some(h) => format!(
                    "{name} stopped reporting {behind}s before the others (its last row: ts={last}), and its rows say its agent fell up to {:.0} ms behind its send schedule{}: it was short of CPU, so its last rows may be late or lost rather than its agent dead -- `mx logs`. Flows into {name} since then show as loss",
                    h.behind_ms,
                    if h.throttled_ms > 0.0 {
                        format!(" and was throttled {:.0} ms by its cgroup's CPU quota", h.throttled_ms)
                    } else {
                        String::new()
                    }
                ),
                None => format!(
                    "{name} stopped reporting {behind}s before the others (its last row: ts={last}): its agent died or it is cut off -- `mx status` and `mx logs` say which. Flows into {name} since then show as loss"
                ),
            });
        }
    }
    if let Some(m) = &ctx.matrix {
        let never: Vec<&str> = m
            .hosts()
            .iter()
            .map(|h| h.name.as_str())
            .filter(|name| {
                set.id_of(name)
                    .is_none_or(|id| !set.last_seen.contains_key(&id))
            })
            .collect();
        if !never.is_empty() {
            lines.push(format!(
                "no report from {}: not started, unreachable, or its report was not collected -- `mx status`",
                name_list(&never)
            ));
        }
    }
    lines
}

/// What the advice rests on, measured once: the fleet's figures, the hosts
/// that were CPU bound, and the losses the hosts counted themselves.
struct Reading<'a> {
    set: &'a ReportSet,
    ctx: &'a Context,
    fleet: &'a Fleet,
    /// Requests sent below 95% of the target rate.
    short: bool,
    /// Requests sent, % of the target.
    achieved: f64,
    /// Hosts with a core at >= HOT_CORE_PCT.
    hot: Vec<&'a HostFigures>,
    /// The busiest agent worker at >= BUSY_WORKER_PCT, and its load.
    busy: Option<(&'a HostFigures, f64)>,
    losses: Vec<HostLoss>,
    /// Hosts by mean `disk_busy_pct`, highest first (disk runs only).
    disk_busy: Vec<(&'a HostFigures, f64)>,
}

impl Reading<'_> {
    fn starved(&self) -> impl Iterator<Item = &HostLoss> {
        self.losses.iter().filter(|h| h.starved())
    }

    /// Whether any host was short of CPU, by any measure.
    fn cpu_bound(&self) -> bool {
        !self.hot.is_empty() || self.busy.is_some() || self.starved().next().is_some()
    }

    /// Hosts whose busiest worker spent most of its time in disk I/O.
    fn disk_bound(&self) -> &[(&HostFigures, f64)] {
        let n = self
            .disk_busy
            .iter()
            .take_while(|(_, b)| *b >= DISK_BOUND_PCT)
            .count();
        &self.disk_busy[..n]
    }

    /// The busiest disk, when it held its worker enough to matter.
    fn disk_suspect(&self) -> Option<(&HostFigures, f64)> {
        self.disk_busy
            .first()
            .copied()
            .filter(|(_, b)| *b >= DISK_SUSPECT_PCT)
    }

    /// The disk named beside another cause (the disk-bound hosts have a
    /// line of their own): "; h2's busiest worker also spent 30% ...".
    fn disk_too(&self) -> String {
        match self.disk_suspect() {
            Some((h, busy)) if self.disk_bound().is_empty() => format!(
                "; {}'s busiest worker also spent {busy:.0}% of its time in disk I/O, so its disk may hold the rate down too",
                self.set.name(h.id)
            ),
            _ => String::new(),
        }
    }

    /// The disk p99 the round trip includes: the responders' reads
    /// (`replies`), writes (`requests`), else the larger; with its host and
    /// what it is.
    fn disk_p99(&self) -> Option<(u32, f64, &'static str)> {
        let d = self.fleet.disk.as_ref()?;
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
        match self.ctx.disk_mode() {
            Some(DiskMode::Replies) => read,
            Some(DiskMode::Requests) => write,
            _ => larger,
        }
        .filter(|(_, v, _)| *v > 0.0)
    }
}

/// Hosts by mean `disk_busy_pct`, highest first (ties in table order).
fn disk_busy(hosts: &[HostFigures]) -> Vec<(&HostFigures, f64)> {
    let mut busy: Vec<(&HostFigures, f64)> = hosts
        .iter()
        .filter_map(|h| h.disk.and_then(|d| d.busy).map(|b| (h, b)))
        .collect();
    busy.sort_by(|a, b| b.1.total_cmp(&a.1));
    busy
}

/// The advice lines, in facts.md 5's order.
pub fn advice(
    set: &ReportSet,
    ctx: &Context,
    fleet: &Fleet,
    hosts: &[HostFigures],
    flows: &[FlowFigures],
    coverage: Option<(usize, usize, f64)>,
) -> Vec<String> {
    let r = Reading {
        set,
        ctx,
        fleet,
        short: fleet.target > 0.0 && fleet.requests < 0.95 * fleet.target,
        achieved: percent(fleet.requests, fleet.target),
        hot: hosts
            .iter()
            .filter(|h| h.cpu_core.is_some_and(|c| c >= HOT_CORE_PCT))
            .collect(),
        busy: worst_by(hosts, |h| h.agent_cpu.filter(|&a| a >= BUSY_WORKER_PCT)),
        losses: evidence::host_losses(set, flows),
        disk_busy: disk_busy(hosts),
    };
    let mut out = Vec::new();
    // Hosts gone quiet come first: their peers' numbers depend on it.
    out.extend(silent_lines(set, ctx));
    // 1. Disks that cannot keep up.
    out.extend(disk_bound_line(&r));
    // 2. A layered run that has not yet measured every pair.
    out.extend(coverage.and_then(coverage_line));
    // 3. The tool or the CPU is the ceiling.
    out.extend(ceiling_lines(&r));
    // Losses the hosts counted themselves: theirs, not the wire's.
    out.extend(evidence::lines(set, &r.losses));
    // 4. and 5. Each leg's loss beyond what the hosts counted.
    out.extend(leg_lines(&r));
    // A sick row or column.
    out.extend(sick_lines(set, flows, &r.losses));
    // 6. The tail lifting off the median.
    out.extend(tail_line(&r));
    // 7. Nothing to fix.
    if out.is_empty() {
        out.push(all_clear_line(fleet));
    }
    out
}

/// Rule 1: hosts whose busiest worker spent most of its time in disk I/O;
/// the worst one named with its busy share, what its disk did and its
/// workers (each keeps one disk I/O in flight: the queue depth).
fn disk_bound_line(r: &Reading<'_>) -> Option<String> {
    let bound = r.disk_bound();
    let &(h, busy) = bound.first()?;
    let name = r.set.name(h.id);
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
    Some(format!(
        "{} host(s) mostly waiting on the disk: {name}'s busiest worker spent {busy:.0}% of its time in disk I/O{did}, with {workers} worker(s) keeping one I/O in flight each. The disk, not the fabric, is short: {raise} for a deeper disk queue, use a faster disk, or lower --pps",
        bound.len()
    ))
}

fn coverage_line((measured, total, cycle): (usize, usize, f64)) -> Option<String> {
    (measured < total).then(|| {
        format!(
            "coverage is {measured} of {total} pairs ({:.1}%): one full rotation takes {}; run at least that long: `mx run --for {}`",
            percent(measured as f64, total as f64),
            units::duration(cycle),
            (cycle + (cycle / 10.0).floor()) as u64
        )
    })
}

/// The tool's workers, a host's CPU, or a starved agent as the ceiling of
/// the rate; or a shortfall with CPU to spare.
fn ceiling_lines(r: &Reading<'_>) -> Vec<String> {
    let achieved = r.achieved;
    if let Some((h, agent)) = r.busy {
        let name = r.set.name(h.id);
        let prefix = if r.short {
            format!("sending {achieved:.1}% of target, and ")
        } else {
            String::new()
        };
        let first = format!(
            "{prefix}the busiest agent worker on {name} is at {agent:.0}% of a core: the tool is the ceiling here, not the network (one worker sends or answers ~{} of requests){}",
            pps(WORKER_EXCHANGES_PER_SECOND),
            r.disk_too()
        );
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
        return vec![first, second];
    }
    if !r.short {
        return Vec::new();
    }
    let line = if !r.hot.is_empty() {
        let names: Vec<&str> = r.hot.iter().take(3).map(|h| r.set.name(h.id)).collect();
        format!(
            "sending {achieved:.1}% of target and {} host(s) have a core at >= {HOT_CORE_PCT:.0}% ({}): the senders are CPU bound, not the network{}",
            r.hot.len(),
            names.join(", "),
            r.disk_too()
        )
    } else if let Some(h) = r.starved().next() {
        let why = evidence::starvation(h).unwrap_or_default();
        let name = r.set.name(h.id);
        match r.disk_suspect() {
            // A disk run's requests wait for their payload's read, which
            // puts a sender behind its schedule as surely as a lack of CPU.
            Some((d, busy)) => format!(
                "sending only {achieved:.1}% of target: {name}'s agent {why}, and {}'s busiest worker spent {busy:.0}% of its time in disk I/O: the shortfall is the CPU or the disk, not the network; a run without --disk tells which",
                r.set.name(d.id)
            ),
            None => format!(
                "sending only {achieved:.1}% of target: {name}'s agent {why}: it did not get the CPU to keep its schedule, so the shortfall is {name}'s CPU, not the network"
            ),
        }
    } else if !r.disk_bound().is_empty() {
        // Rule 1 said it: the disk is short.
        return Vec::new();
    } else if let Some((h, busy)) = r.disk_suspect() {
        format!(
            "sending only {achieved:.1}% of target with CPU to spare, and {}'s busiest worker spent {busy:.0}% of its time in disk I/O: the shortfall is the disk's, not the network's. A faster disk or more `mx start --workers` (one I/O in flight each) would lift it",
            r.set.name(h.id)
        )
    } else {
        format!(
            "sending only {achieved:.1}% of target with CPU to spare: a flow may have failed to open (`mx logs`), or the run was too short to ramp"
        )
    };
    vec![line]
}

/// Requests lost on the way out and replies lost on the way back, beyond
/// what the hosts counted themselves (those have their own lines).
fn leg_lines(r: &Reading<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let requests = r.fleet.packets.sent.max(1.0);
    let explained_in: f64 = r.losses.iter().map(HostLoss::explained_in).sum();
    let explained_back: f64 = r.losses.iter().map(HostLoss::explained_back).sum();
    let forward = r.fleet.forward_loss().unwrap_or(0.0) - explained_in / requests * 100.0;
    if forward > LEG_LOSS_PCT {
        out.push(if let Some((h, busy)) = r.disk_suspect() {
            let cpu = r.starved().next().map_or(String::new(), |s| {
                format!(
                    "; {}'s agent also {}, so its CPU fits too",
                    r.set.name(s.id),
                    evidence::starvation(s).unwrap_or_default()
                )
            });
            format!(
                "{forward:.2}% of requests never reached their receiver while {}'s busiest worker spent {busy:.0}% of its time in disk I/O: a responder waiting on its disk stops reading, and requests are likely lost on the receiving host{cpu}. Compare a run without --disk to tell the disk's share from the fabric's",
                r.set.name(h.id)
            )
        } else if !r.cpu_bound() {
            format!(
                "{forward:.2}% of requests never reached their receiver, with CPU to spare everywhere: the fabric is dropping. Lower --pps until it stops, or `mx summarize --grid g` and look for a dark row or column"
            )
        } else if let Some(h) = r.starved().next() {
            let count = r.starved().count();
            format!(
                "{forward:.2}% of requests were lost on the way in while {} short of CPU ({}'s agent {}): likely lost in software, on the receiving host, before the network is to blame",
                if count == 1 {
                    format!("{} was", r.set.name(h.id))
                } else {
                    format!("{count} hosts were")
                },
                r.set.name(h.id),
                evidence::starvation(h).unwrap_or_default()
            )
        } else {
            format!(
                "{forward:.2}% of requests were lost on the way in while receivers are busy: likely dropped in software, on the receiving host. Try `mx start --workers 4 --rcvbuf 16777216`"
            )
        });
    }
    let back = r.fleet.return_loss().unwrap_or(0.0) - explained_back / requests * 100.0;
    if back > LEG_LOSS_PCT {
        out.push(if let Some((h, busy)) = r.disk_suspect() {
            format!(
                "{back:.2}% of replies were lost on the way back while the requests arrived, and {}'s busiest worker spent {busy:.0}% of its time in disk I/O: replies wait for the disk, and one it holds past its interval's report counts as lost there. Compare a run without --disk to tell the disk's share from the reply path's",
                r.set.name(h.id)
            )
        } else {
            format!(
            "{back:.2}% of replies were lost on the way back while the requests arrived: the reply path only. Replies are {} bytes ({} on the wire); a smaller --rx-size would tell whether size is the problem",
            r.ctx.rx_size,
            bits(r.fleet.wire(r.fleet.replies, r.ctx.rx_size))
        )
        });
    }
    out
}

/// A p99 far above the p50: the responders' own disk in a disk run (its
/// p99 is in every round trip), queues in the fabric, or agents that
/// answered late while short of CPU (their own lines name them).
fn tail_line(r: &Reading<'_>) -> Option<String> {
    let (p50, p99) = match (r.fleet.exact, r.fleet.worst_flow) {
        (Some((p50, p99, _)), _) => (p50, p99),
        (None, Some((_, _, Some(p50), p99))) => (p50, p99),
        _ => return None,
    };
    if !(p50 > 0.0 && p99 > 5.0 * p50 && p99 > 1000.0) {
        return None;
    }
    let slow_answers: Vec<&str> = r
        .losses
        .iter()
        .filter(|h| h.explains_answers())
        .map(|h| r.set.name(h.id))
        .collect();
    let (p50_text, p99_text) = (units::micros(Some(p50)), units::micros(Some(p99)));
    let ratio = p99 / p50;
    if let Some((host, disk_p99, io)) = r.disk_p99() {
        let cpu = if slow_answers.is_empty() {
            String::new()
        } else {
            format!(
                ", and {} answered late while short of CPU",
                name_list(&slow_answers)
            )
        };
        // The disk's own p99 is in every round trip; where it is a small
        // part of the tail, the rest is waiting: for a busy disk (a worker
        // keeps one I/O in flight) or in queues.
        let what = if disk_p99 >= DISK_TAIL_SHARE * (p99 - p50) {
            "the tail includes the disk's own p99".to_string()
        } else {
            match r.disk_suspect() {
                Some((h, busy)) => format!(
                    "that is a small part of the tail, so most of it is waiting: on a busy disk ({}'s busiest worker spent {busy:.0}% of its time in disk I/O) or in queues",
                    r.set.name(h.id)
                ),
                None => {
                    "that is a small part of the tail: queues are building elsewhere".to_string()
                }
            }
        };
        return Some(format!(
            "p99 ({p99_text}) is {ratio:.0}x the p50 ({p50_text}), and {}'s disk {io} p99 is {} (its worst interval){cpu}: {what}. Rerun without --disk to see the network's tail alone",
            r.set.name(host),
            units::micros(Some(disk_p99))
        ));
    }
    Some(if slow_answers.is_empty() {
        format!(
            "p99 ({p99_text}) is {ratio:.0}x the p50 ({p50_text}): queues are building somewhere. Lower the rate until the tail collapses; that rate is the fabric's clean limit"
        )
    } else {
        format!(
            "p99 ({p99_text}) is {ratio:.0}x the p50 ({p50_text}), and {} answered late while short of CPU: that tail is those hosts' agents, not queues in the fabric. Give them the CPU, then read the latency again",
            name_list(&slow_answers)
        )
    })
}

fn all_clear_line(fleet: &Fleet) -> String {
    let req = fleet.requests;
    if fleet.target > 0.0 && req >= 0.98 * fleet.target && percent(fleet.replies, req) >= 99.5 {
        "everything is landing at the target rate: raise --pps (or `mx gen --pps max`) to find where it stops"
            .to_string()
    } else {
        "nothing looks wrong. `mx hints` lists what else to try".to_string()
    }
}

/// Wraps `text` to 78 columns: `    * ` before the first line, 6 spaces before the rest.
pub fn wrap(text: &str) -> String {
    const WIDTH: usize = 78;
    let mut out = String::new();
    let mut line = String::from("    * ");
    let mut fresh = true;
    for word in text.split_whitespace() {
        if !fresh && line.len() + 1 + word.len() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from("      ");
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}
