//! What was sent rather than lost, in words: hosts short of their rate and
//! why, the tool's own ceiling, a disk that held the responders, a layered
//! run short of a rotation, the all-clear.

use crate::analysis::diagnosis::says::{BusyDisk, ShortHost, ShortWhy};
use crate::analysis::figures::percent;
use crate::render::words::{count, name_list, pct};
use mx_base::units::{self, pps};

/// Hosts that sent less than their rate, and why.
pub fn short(hosts: &[ShortHost], why: &ShortWhy) -> String {
    let one = shortfall(hosts);
    let names: Vec<&str> = hosts.iter().map(|h| h.host.as_str()).collect();
    let they = if hosts.len() == 1 { "its" } else { "their" };
    match why {
        ShortWhy::Starved {
            behind_ms,
            throttled_ms,
            disk,
        } => {
            let why = fell_behind(&names, *behind_ms, *throttled_ms);
            match disk {
                Some(BusyDisk {
                    host: disk_host,
                    busy_pct: busy,
                }) => format!(
                    "{one}: {why}, and {disk_host}'s busiest worker spent {busy:.0}% of its time in disk I/O: the shortfall is the CPU or the disk, not the network; a run without --disk tells which"
                ),
                None => {
                    let (own, agents, need) = if names.len() == 1 {
                        ("its", "its agent", "it needs")
                    } else {
                        ("their", "the agents", "they need")
                    };
                    format!(
                        "{one}: {why}: {own} CPU, not the network -- give {agents} the CPU {need} (a quota, other load on the box), then rerun"
                    )
                }
            }
        }
        ShortWhy::HotCore { core_pct } => format!(
            "{one} with a core at {core_pct:.0}% or more: {they} CPU is the ceiling, not the network -- more cores, or fewer flows a host"
        ),
        ShortWhy::Egress { dropped } => {
            let them = if hosts.len() == 1 { "it" } else { "them" };
            format!(
                "{one}, and {they} kernel dropped {} datagrams on their way out (UDP SndbufErrors, the NIC's tx drops): {they} egress held {them} back, a rate cap or a full queue -- `tc -s qdisc show` there",
                count(*dropped),
            )
        }
        ShortWhy::Unresolved {
            dropped,
            table_fulls,
            res_failed,
        } => {
            let (it, them, resolve) = if hosts.len() == 1 {
                ("it", "it", "resolves")
            } else {
                ("they", "them", "resolve")
            };
            format!(
                "{one}, and {they} kernel dropped {} datagrams on their way out (UDP SndbufErrors) while {}: {it} could not resolve {they} peers' link-layer addresses, which held {them} back, not a qdisc -- raise gc_thresh3 (net.ipv4.neigh.default, net.ipv6.neigh.default) past the neighbours {it} {resolve} (`ip -s ntable show` there)",
                count(*dropped),
                super::place::neighbour_counts(they, "neighbour", *table_fulls, *res_failed)
            )
        }
        ShortWhy::Disk {
            disk:
                BusyDisk {
                    host: name,
                    busy_pct: busy,
                },
        } => format!(
            "{one} with CPU to spare, while {name}'s busiest worker spent {busy:.0}% of its time in disk I/O: the shortfall is the disk's, not the network's -- a faster disk or more `mx start --workers` (one I/O in flight each) would lift it"
        ),
        ShortWhy::Unknown => format!(
            "{one} with CPU to spare: a flow may have failed to open (`mx logs`), or the run was too short to ramp"
        ),
    }
}

/// The sentence's opening: `h1 sent 26.2% of its rate (3.9 of 15.0 kpps)`,
/// or for several `h1 and h3 sent less than their rate (h1 94.6%, h3
/// 94.6%)`, with the shares of the first five only.
fn shortfall(hosts: &[ShortHost]) -> String {
    match hosts {
        [h] => format!(
            "{} sent {}% of its rate ({} of {})",
            h.host,
            pct(percent(h.sent_pps, h.target_pps)),
            pps(h.sent_pps),
            pps(h.target_pps)
        ),
        _ => {
            let names: Vec<&str> = hosts.iter().map(|h| h.host.as_str()).collect();
            let shares: Vec<String> = hosts
                .iter()
                .take(5)
                .map(|h| format!("{} {}%", h.host, pct(percent(h.sent_pps, h.target_pps))))
                .collect();
            format!(
                "{} sent less than their rate ({})",
                name_list(&names),
                shares.join(", ")
            )
        }
    }
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

/// The busiest agent worker near a full core.
pub(crate) fn busy_worker(
    name: &str,
    agent: f64,
    fleet_sent_pct: Option<f64>,
    worker_pps: f64,
) -> String {
    let prefix = fleet_sent_pct.map_or(String::new(), |p| {
        format!("sending {p:.1}% of target, and ")
    });
    format!(
        "{prefix}the busiest agent worker on {name} is at {agent:.0}% of a core: the tool is the ceiling here, not the network (one worker sends or answers ~{} of requests)",
        pps(worker_pps)
    )
}

/// What would lift a busy worker on `name`.
pub(crate) fn more_workers(name: &str, workers: u32, peers: usize) -> String {
    if workers as usize <= peers + 1 {
        format!(
            "{name} is running {workers} worker(s) for {peers} peer(s): workers are capped at flows + 1, so more of them cannot help until each pair has more sockets. Add `mx start --streams 8`"
        )
    } else {
        format!(
            "raise `mx start --workers {}` while {name} has spare cores; past that, add hosts or lower --pps",
            workers * 2
        )
    }
}

/// Hosts mostly waiting on the disk: their workers' queues of disk
/// operations full. The lever is more operations in flight per worker
/// (`--disk-depth`, 8 from one, else twice as many), or more workers.
pub(crate) fn disk_bound(
    hosts: usize,
    name: &str,
    busy: f64,
    iops: Option<(f64, Option<f64>)>,
    workers: Option<u32>,
    depth: Option<u32>,
) -> String {
    let did = iops.map_or(String::new(), |(ops, avg)| {
        format!(
            " ({} IOPS at {} each on average)",
            units::ops(ops),
            units::micros(avg)
        )
    });
    let depth = depth.unwrap_or(1).max(1);
    let (spent, keeping) = if depth == 1 {
        (
            format!("{name}'s busiest worker spent {busy:.0}% of its time in disk I/O"),
            "one I/O".to_string(),
        )
    } else {
        (
            format!(
                "the {depth} disk threads of {name}'s busiest worker spent {busy:.0}% of their time in I/O"
            ),
            format!("{depth} I/Os"),
        )
    };
    let deeper = (depth * 2).max(8);
    let (workers, more) = match workers {
        Some(w) => (w.to_string(), format!("`--workers {}`", w * 2)),
        None => ("its".to_string(), "more `--workers`".to_string()),
    };
    format!(
        "{hosts} host(s) mostly waiting on the disk: {spent}{did}, with {workers} worker(s) keeping {keeping} in flight each, so their disk queue stayed full. The disk, not the fabric, is short: raise `mx start --disk-depth {deeper}` for more I/O in flight at once (or {more}), use a faster disk, or lower --pps"
    )
}

/// A layered run short of a full rotation.
pub fn coverage(measured: usize, total: usize, cycle: f64) -> String {
    format!(
        "coverage is {measured} of {total} pairs ({:.1}%): one full rotation takes {}; run at least that long: `mx run --for {}`",
        percent(measured as f64, total as f64),
        units::duration(cycle),
        (cycle + (cycle / 10.0).floor()) as u64
    )
}

/// Nothing to fix.
pub fn all_clear(landing: bool, ramp: &str) -> String {
    if landing {
        format!(
            "everything is landing at the target rate, on every flow: raise --pps (or `mx gen --pps max`) to find where it stops, or let `mx run --ramp {ramp}` climb to it step by step"
        )
    } else {
        format!(
            "nothing looks wrong: no flow loses more than the run's noise. `mx hints` lists what else to try; `mx run --ramp {ramp}` finds the rate where loss or the tail begins"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, sent: f64) -> ShortHost {
        ShortHost {
            host: name.to_string(),
            sent_pps: sent,
            target_pps: 1000.0,
        }
    }

    #[test]
    fn a_shortfall_names_one_host_in_full_and_the_shares_of_five_at_most() {
        assert_eq!(
            shortfall(&[host("h1", 500.0)]),
            "h1 sent 50.0% of its rate (500 pps of 1.0 kpps)"
        );
        let hosts: Vec<ShortHost> = (1..=6).map(|i| host(&format!("h{i}"), 900.0)).collect();
        let text = shortfall(&hosts);
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
