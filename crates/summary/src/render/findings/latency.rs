//! The round trip's tail in words: how far the p99 sits above the p50,
//! where, and every cause it fits.

use crate::analysis::diagnosis::says::{TailCause, TailSpread};
use crate::render::words::name_list;
use mx_base::units::micros;

/// The tail finding.
pub fn tail(p50: f64, p99: f64, spread: &TailSpread, cause: &TailCause) -> String {
    let head = headline(p50, p99, spread);
    match cause {
        TailCause::Disk {
            host,
            io,
            disk_p99_us,
            makes_the_tail,
        } => {
            let what = if *makes_the_tail {
                "the tail includes the disk's own p99"
            } else {
                "that is a small part of the tail, so most of it is waiting: on a busy disk or in queues"
            };
            format!(
                "{head}, and {host}'s disk {io} p99 is {} (its worst interval): {what}. Rerun without --disk to see the network's tail alone",
                micros(Some(*disk_p99_us))
            )
        }
        TailCause::FabricQueues => format!(
            "{head}, and every agent kept its schedule: queues are building in the network -- `mx run --ramp` finds the rate at which the tail begins; below it the fabric is clean"
        ),
        TailCause::LinkQueues { queued } if queued.is_empty() => format!(
            "{head}, and their agents kept their schedule: queues on their links -- their NIC's rings, their switch ports, the path to them"
        ),
        TailCause::LinkQueues { queued } => format!(
            "{head}, and their agents kept their schedule: queues -- {} dropped datagrams on the way out (a full qdisc), and what it did not drop waited in that queue",
            name_list(queued)
        ),
        TailCause::AgentsLate {
            hosts,
            behind_ms: behind,
            throttled,
            steal_pct,
            fleet_wide,
        } => {
            let (agents, own, them, they_answer) = if hosts.len() == 1 {
                (
                    format!("{}'s agent", hosts[0]),
                    "its",
                    "it",
                    "it answers or sends",
                )
            } else {
                (
                    format!("the agents of {}", name_list(hosts)),
                    "their",
                    "them",
                    "they answer or send",
                )
            };
            let mut how = format!("{agents} fell up to {behind:.0} ms behind {own} send schedule");
            if *throttled {
                how.push_str(", held off by a CPU quota");
            }
            if let Some(steal) = steal_pct {
                how.push_str(&format!(
                    ", and the hypervisor took up to {steal:.1}% of {own} CPU"
                ));
            }
            if *fleet_wide {
                format!(
                    "{head}. Queues in the network fit, and so does the hosts' own scheduling: {how}, so a busy CPU ran {them} late, which reads as a tail -- give the agents idle cores (or find where it begins with `mx run --ramp`); a tail that stays is the network's"
                )
            } else {
                format!(
                    "{head}. {how}: {own} CPU ran {them} late, which reads as a tail on every flow {they_answer} -- give {them} the CPU, then read the latency again; a tail that stays is queues on {own} links"
                )
            }
        }
    }
}

/// The sentence's opening: how far the p99 sits above the p50, and where.
fn headline(p50: f64, p99: f64, spread: &TailSpread) -> String {
    match spread {
        TailSpread::Fleet {
            tail_intervals,
            intervals,
            hosts,
            of,
        } => format!(
            "p99 ({}) is {:.0}x the p50 ({}), and the tail held in {tail_intervals} of {intervals} flow intervals, on {hosts} of {of} hosts",
            micros(Some(p99)),
            p99 / p50,
            micros(Some(p50)),
        ),
        TailSpread::Hosts { hosts } => format!(
            "p99 ({}) is {:.0}x the p50 ({}), and the tail sits on the flows to and from {}: in most of their intervals, and not the others'",
            micros(Some(p99)),
            p99 / p50,
            micros(Some(p50)),
            name_list(hosts)
        ),
    }
}
