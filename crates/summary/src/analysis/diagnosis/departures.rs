//! Hosts that went away before the run's end, named for what they are: an
//! agent that stopped (its report ends with no end marked), a host mx could
//! not reach to collect its report, a host that never reported. Their flows
//! after they went are left out of every figure, never counted as the
//! network's loss (the aggregate did that); here they are said.

use super::super::aggregate::{Departure, Gone, ReportSet};
use super::super::figures::Context;
use super::place::STARVED_BEHIND_MS;
use super::{Blame, Finding, Kind, Place, name_list};
use mx_base::units::local_clock;

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
        let mut f = Finding::new(
            Kind::Agent,
            format!(
                "no report from {} and not one reply or request from it in the run: not started, or out of reach (`mx status`, `mx doctor`); its flows are left out",
                name_list(&never)
            ),
        );
        for name in never {
            f = f.blame(Blame::host(name, Place::Unreachable));
        }
        out.push(f);
    }
    out
}

fn gone_finding(set: &ReportSet, id: u32, name: &str, d: &Departure, last: i64) -> Finding {
    let when = local_clock(last as f64);
    let behind = set.latest - last;
    let left_out = if d.left_out > 0 {
        format!(
            "; its flows after it ({} flow interval(s)) are left out, not counted as loss",
            d.left_out
        )
    } else {
        "; its flows after it are left out, not counted as loss".to_string()
    };
    let starved = set
        .history
        .get(&id)
        .filter(|h| h.behind_ms >= STARVED_BEHIND_MS || h.throttled_ms > 0.0);
    let mut f = Finding::new(Kind::Agent, String::new())
        .figure("last_ts", last as f64)
        .figure("seconds_before_the_end", behind as f64);
    let (text, place) = match d.why {
        Gone::Stopped => match starved {
            Some(h) => (
                format!(
                    "{name}'s report ends at {when}, {behind}s before the others', with no end marked, and its rows say its agent fell up to {:.0} ms behind its send schedule{}: it was short of CPU, so its last rows may be late or lost rather than its agent dead -- `mx logs`{left_out}",
                    h.behind_ms,
                    if h.throttled_ms > 0.0 {
                        format!(
                            " and was throttled {:.0} ms by its cgroup's CPU quota",
                            h.throttled_ms
                        )
                    } else {
                        String::new()
                    }
                ),
                Place::AgentStopped,
            ),
            None => (
                format!(
                    "{name}'s agent stopped at {when}, {behind}s before the others: its report ends there with no end marked (killed, crashed, or its host went down) -- `mx logs` and `mx status` say which{left_out}"
                ),
                Place::AgentStopped,
            ),
        },
        Gone::Unreachable => (
            format!(
                "{name} could not be reached to collect its report, and was last heard from at {when}, {behind}s before the end: its agent went down with it, or it is cut off -- `mx status` and `mx doctor`{left_out}"
            ),
            Place::Unreachable,
        ),
        Gone::Silent => (
            format!(
                "no report from {name}, whose peers last heard from it at {when}, {behind}s before the end: its agent stopped or it was cut off, and its report was not collected -- `mx status`{left_out}"
            ),
            Place::AgentStopped,
        ),
    };
    f.text = text;
    f = f.blame(Blame::host(name, place));
    if starved.is_some() && d.why == Gone::Stopped {
        f = f.blame(Blame::host(name, Place::Cpu));
    }
    f
}
