//! Hosts that went away before the run's end, named for what they are: an
//! agent that stopped (its report ends with no end marked), a host mx could
//! not reach to collect its report, a host that never reported. Their flows
//! after they went are left out of every figure, never counted as the
//! network's loss (the aggregate did that); here they are said.

use super::super::aggregate::{Departure, Gone, ReportSet};
use super::super::figures::Context;
use super::place::STARVED_BEHIND_MS;
use super::says::{self, Says};
use super::{Blame, Finding, Kind, Place};

/// The share of its silence a stopped agent's worst stall (how far it fell
/// behind its schedule, or its cgroup's throttling) must reach for "short
/// of CPU, its last rows late" to fit beside "stopped": an agent that fell
/// 74 ms behind has not gone 5 s without writing a row for want of CPU.
const STALL_OF_THE_SILENCE: f64 = 0.25;

/// One finding per host gone, and one for the hosts never heard from.
pub fn findings(set: &ReportSet, _ctx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut never: Vec<&str> = Vec::new();
    for (&id, d) in &set.gone {
        let name = set.name(id);
        match d.last {
            None => never.push(name),
            Some(last) => out.push(gone_finding(set, id, name, d, last)),
        }
    }
    if !never.is_empty() {
        let hosts = never.iter().map(|n| n.to_string()).collect();
        let mut f = Finding::new(Kind::Agent, Says::NeverHeard { hosts });
        for name in never {
            f = f.blame(Blame::host(name, Place::Unreachable));
        }
        out.push(f);
    }
    out
}

fn gone_finding(set: &ReportSet, id: u32, name: &str, d: &Departure, last: i64) -> Finding {
    let behind = set.latest - last;
    let silence_ms = behind as f64 * 1000.0;
    let starved = set.history.get(&id).filter(|h| {
        (h.behind_ms >= STARVED_BEHIND_MS || h.throttled_ms > 0.0)
            && h.behind_ms.max(h.throttled_ms) >= STALL_OF_THE_SILENCE * silence_ms
    });
    let (gone, place) = match d.why {
        Gone::Stopped => match starved {
            Some(h) => (
                says::Gone::StoppedStarved {
                    behind_ms: h.behind_ms,
                    throttled_ms: (h.throttled_ms > 0.0).then_some(h.throttled_ms),
                },
                Place::AgentStopped,
            ),
            None => (says::Gone::Stopped, Place::AgentStopped),
        },
        Gone::Unreachable => (says::Gone::Unreachable, Place::Unreachable),
        Gone::Silent => (says::Gone::Silent, Place::AgentStopped),
    };
    let says = Says::Gone {
        host: name.to_string(),
        last_ts: last,
        before_end_s: behind,
        left_out: d.left_out,
        gone,
    };
    let mut f = Finding::new(Kind::Agent, says)
        .figure("last_ts", last as f64)
        .figure("seconds_before_the_end", behind as f64)
        .blame(Blame::host(name, place));
    if starved.is_some() && d.why == Gone::Stopped {
        f = f.blame(Blame::host(name, Place::Cpu));
    }
    f
}
