//! One starved host, one finding. An agent starved of CPU loses what comes
//! into its host (it reads its sockets late, or they overflow) and what
//! goes out (it answers late, or hands its datagrams over late): the grid
//! reads that as a loss into the host and a loss out of it, each placed on
//! its CPU. They are one cause, said once: into the host, its CPU, with
//! the way out beside it.

use super::says::{Says, Why};
use super::{Direction, Finding, Kind};

/// `findings` with each host's starved loss into it and out of it joined
/// into one finding, where the loss into it was.
pub fn joined(findings: Vec<Finding>) -> Vec<Finding> {
    let mut slots: Vec<Option<Finding>> = findings.into_iter().map(Some).collect();
    for i in 0..slots.len() {
        let Some(host) = slots[i].as_ref().and_then(starved_into) else {
            continue;
        };
        let out = slots
            .iter()
            .position(|f| f.as_ref().and_then(starved_out_of).as_deref() == Some(host.as_str()));
        if let Some(j) = out {
            let out = slots[j].take().expect("found above");
            let into = slots[i].take().expect("found above");
            slots[i] = Some(join(into, out));
        }
    }
    slots.into_iter().flatten().collect()
}

/// The host whose loss into it `f` puts on its starved agent.
fn starved_into(f: &Finding) -> Option<String> {
    match &f.says {
        Says::HostLoss {
            host,
            direction: Direction::Into,
            why: Why::StarvedReader { .. },
            ..
        } => Some(host.clone()),
        _ => None,
    }
}

/// The host whose loss out of it `f` puts on its starved agent.
fn starved_out_of(f: &Finding) -> Option<String> {
    match &f.says {
        Says::HostLoss {
            host,
            direction: Direction::OutOf,
            why: Why::StarvedSender { .. } | Why::AnsweredLate { .. },
            ..
        } => Some(host.clone()),
        _ => None,
    }
}

/// One finding of both: the loss into the host's, its blames and figures,
/// its lost packets both ways.
fn join(into: Finding, out: Finding) -> Finding {
    let lost = |f: &Finding| f.figures.get("lost_pkts").copied().unwrap_or(0.0);
    let (lost_into, lost_out) = (lost(&into), lost(&out));
    let mut f = Finding::new(
        Kind::Loss,
        Says::StarvedHost {
            into: Box::new(into.says),
            out_of: Box::new(out.says),
        },
    );
    f.blames = into.blames;
    f.figures = into.figures;
    f.figure("lost_pkts", lost_into + lost_out)
        .figure("out_of_lost_pkts", lost_out)
}

#[cfg(test)]
mod tests {
    use super::super::says::{LegLoss, Starvation};
    use super::super::{Blame, Place};
    use super::*;

    fn host_loss(host: &str, direction: Direction, why: Why, lost: f64) -> Finding {
        let leg = LegLoss {
            peers: vec!["h2".into()],
            loss_pct: vec![5.0],
        };
        Finding::new(
            Kind::Loss,
            Says::HostLoss {
                host: host.into(),
                direction,
                requests: leg.clone(),
                replies: leg,
                lossy_requests: true,
                lossy_replies: true,
                lost,
                place_tells_legs: true,
                why,
            },
        )
        .figure("lost_pkts", lost)
        .blame(Blame::toward(host, direction, Place::Cpu))
    }

    fn starved() -> Starvation {
        Starvation {
            throttled_ms: None,
            behind_ms: Some(1_299.0),
        }
    }

    #[test]
    fn a_starved_host_s_loss_into_and_out_of_it_is_one_finding_into_it() {
        let into = host_loss(
            "h1",
            Direction::Into,
            Why::StarvedReader {
                host: "h1".into(),
                starved: starved(),
                dropped: 300.0,
                late: 700.0,
                disk_busy_pct: None,
            },
            1_000.0,
        );
        let out = host_loss(
            "h1",
            Direction::OutOf,
            Why::AnsweredLate {
                host: "h1".into(),
                starved: starved(),
                late_answers: 400.0,
            },
            400.0,
        );
        // Another host's loss out of it stays as it was.
        let other = host_loss(
            "h3",
            Direction::OutOf,
            Why::AnsweredLate {
                host: "h3".into(),
                starved: starved(),
                late_answers: 50.0,
            },
            50.0,
        );
        let joined = joined(vec![out, other.clone(), into]);
        assert_eq!(joined.len(), 2, "{joined:#?}");
        assert_eq!(joined[0], other);
        let one = &joined[1];
        assert!(matches!(one.says, Says::StarvedHost { .. }), "{one:?}");
        assert_eq!(
            one.blames,
            [Blame::toward("h1", Direction::Into, Place::Cpu)]
        );
        assert_eq!(one.figures["lost_pkts"], 1_400.0);
        assert_eq!(one.figures["out_of_lost_pkts"], 400.0);
    }
}
