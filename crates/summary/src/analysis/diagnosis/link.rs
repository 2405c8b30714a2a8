//! The link a path's loss sits on: the streams' traced paths
//! (`paths.trace`, `mx trace`) read with what each stream lost.
//!
//! Each traced leg of a stream is a chain of devices: the host it left, the
//! address that answered each TTL (a router's; where the routers answer
//! from the interface a probe came in by, that address is the link it came
//! over), then the host it reached. Its links go to
//! [`crate::analysis::links::locate`], with what the stream lost on that
//! leg: the links the lossy streams share and the clean ones avoid.
//!
//! Links that the same lossy streams cross and no clean one does (on two
//! leaves, a leaf's uplink to a spine and that spine's link down to the
//! other leaf) are told apart by the sweeps themselves, as fbtracert does:
//! a probe that expires at a router has crossed every link before it, so
//! the first router whose probes go unanswered (where the routers before it
//! answered theirs) sits at the far end of the lossy link. Where the probes
//! cannot tell either, both links are named, with what would.

use std::collections::{BTreeMap, HashMap};

use mx_report::paths::{HopKind, Leg as TracedLeg, TracedPath};

use super::super::aggregate::ReportSet;
use super::super::figures::FlowFigures;
use super::super::links::{self, Link, StreamPath, Thresholds};
use super::cells::Leg;
use super::paths::on_leg;
use super::says::{LinkLoss, LinkName, ProbeCount, Says};
use super::{Blame, Finding, Kind, Place};

/// Unanswered probes at a router stand out from those before it when they
/// are at least this many...
const PROBES_LOST: u16 = 3;
/// ... and the router before lost at most this share of what it lost.
const PROBES_SPARED: f64 = 0.25;

/// One finding per place the traced paths put the loss; none without a
/// trace of these reports' run.
pub fn findings(set: &ReportSet, flows: &[FlowFigures]) -> Vec<Finding> {
    let Some(traced) = &set.traced else {
        return Vec::new();
    };
    let by_pair: HashMap<(&str, &str), &FlowFigures> = flows
        .iter()
        .map(|f| ((set.name(f.host), set.name(f.peer)), f))
        .collect();
    let streams: Vec<(StreamPath, &TracedPath)> = traced
        .paths
        .iter()
        .filter_map(|p| Some((stream_path(p, &by_pair)?, p)))
        .collect();
    let paths: Vec<StreamPath> = streams.iter().map(|(s, _)| s.clone()).collect();
    let verdict = links::locate(&paths, Thresholds::default());
    let clean = verdict.clean_streams;
    verdict
        .culprits
        .iter()
        .map(|c| {
            let lossy: Vec<&(StreamPath, &TracedPath)> = streams
                .iter()
                .filter(|(s, _)| c.lossy_streams.contains(&s.stream))
                .collect();
            let ordered = in_path_order(&c.links, &lossy);
            let probes = probe_counts(&ordered, &lossy);
            let decided = decide(&probes, c.lost as f64 / c.sent.max(1) as f64);
            let says = Says::LinkLoss(LinkLoss {
                links: ordered.iter().map(name).collect(),
                decided_by_probes: decided,
                probes,
                lossy_streams: c.lossy_streams.clone(),
                clean_streams: clean,
                lost: c.lost as f64,
                sent: c.sent as f64,
                traced: traced.paths.len(),
            });
            let mut finding = Finding::new(Kind::Loss, says)
                .figure("lost_pkts", c.lost as f64)
                .figure("lossy_streams", c.lossy_streams.len() as f64)
                .figure("clean_streams", clean as f64);
            for link in decided.map_or(ordered.clone(), |i| vec![ordered[i].clone()]) {
                finding = finding.blame(Blame {
                    host: Some(link.from),
                    direction: None,
                    peer: Some(link.to),
                    place: Place::Link,
                });
            }
            finding
        })
        .collect()
}

/// A traced leg as the link inference reads it: its links, and what its
/// stream sent and lost on that leg. `None` for a sweep that failed, or a
/// stream the reports do not count apart.
fn stream_path(
    p: &TracedPath,
    by_pair: &HashMap<(&str, &str), &FlowFigures>,
) -> Option<StreamPath> {
    let hops = p.hops.as_ref().ok()?;
    let (sender, responder, leg, label) = match p.leg {
        TracedLeg::Requests => (
            &p.from,
            &p.to,
            Leg::Requests,
            format!("{}:{} -> {}", p.from, p.sport, p.to),
        ),
        TracedLeg::Replies => (
            &p.to,
            &p.from,
            Leg::Replies,
            format!("{} -> {}:{}", p.from, p.to, p.sport),
        ),
    };
    let flow = by_pair.get(&(sender.as_str(), responder.as_str()))?;
    let stream = flow.streams.iter().find(|s| s.sport == p.sport)?;
    let (at_risk, lost) = on_leg(stream, leg)?;
    // The devices in order: the host left, each answer (the host reached
    // named by its matrix name), a silent TTL as a gap no link crosses.
    let mut devices: Vec<Option<String>> = vec![Some(p.from.clone())];
    devices.extend(hops.iter().map(|h| match &h.kind {
        HopKind::Router(a) => Some(a.clone()),
        HopKind::Reached(_) => Some(p.to.clone()),
        HopKind::Silent => None,
    }));
    let links = devices
        .windows(2)
        .filter_map(|w| match (&w[0], &w[1]) {
            (Some(from), Some(to)) => Some(Link {
                from: from.clone(),
                to: to.clone(),
            }),
            _ => None,
        })
        .collect();
    Some(StreamPath {
        stream: label,
        links,
        sent: at_risk.round() as u64,
        lost: lost.round() as u64,
    })
}

/// `links` in the order a lossy stream crosses them.
fn in_path_order(links: &[Link], lossy: &[&(StreamPath, &TracedPath)]) -> Vec<Link> {
    let order = lossy.first().map(|(s, _)| &s.links);
    let mut ordered = links.to_vec();
    ordered.sort_by_key(|l| order.and_then(|o| o.iter().position(|x| x == l)));
    ordered
}

/// For each link, the probes its lossy streams' sweeps sent to the device
/// at its far end and to the one at its near end, and how many went
/// unanswered (a host at the near end was not probed: none).
fn probe_counts(links: &[Link], lossy: &[&(StreamPath, &TracedPath)]) -> Vec<ProbeCount> {
    let mut at: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (_, traced) in lossy {
        for h in traced.hops.iter().flatten() {
            let device = match &h.kind {
                HopKind::Router(a) => a.as_str(),
                HopKind::Reached(_) => traced.to.as_str(),
                HopKind::Silent => continue,
            };
            let e = at.entry(device).or_default();
            e.0 += u64::from(h.sent);
            e.1 += u64::from(h.sent - h.answered.min(h.sent));
        }
    }
    links
        .iter()
        .map(|l| {
            let (far_sent, far_unanswered) = at.get(l.to.as_str()).copied().unwrap_or_default();
            let (near_sent, near_unanswered) = at.get(l.from.as_str()).copied().unwrap_or_default();
            ProbeCount {
                far_sent,
                far_unanswered,
                near_sent,
                near_unanswered,
            }
        })
        .collect()
}

/// The one link of several whose far end's probes went unanswered while
/// its near end's were answered, first in path order; `None` where the
/// probes do not single one out (one link alone needs no deciding).
///
/// `loss` is the share the lossy streams lost on their legs: probes that
/// cross the lossy link lose about as much (their answers come back by
/// other links). Where the routers ration their ICMP (most do: Linux sends
/// a destination a few, then one a second), every hop goes unanswered far
/// beyond that share, and the probes measure the routers, not the link:
/// they decide nothing then.
fn decide(probes: &[ProbeCount], loss: f64) -> Option<usize> {
    if probes.len() < 2 {
        return None;
    }
    let rationed = probes
        .iter()
        .any(|p| share(p.far_unanswered, p.far_sent) > RATIONED * loss + 0.02);
    if rationed {
        return None;
    }
    probes.iter().position(|p| {
        let far = share(p.far_unanswered, p.far_sent);
        let near = share(p.near_unanswered, p.near_sent);
        p.far_unanswered >= u64::from(PROBES_LOST) && near <= PROBES_SPARED * far
    })
}

/// Probes unanswered past this many times the streams' own loss (and two
/// points) were rationed by a router, not lost on the link.
const RATIONED: f64 = 3.0;

fn share(part: u64, whole: u64) -> f64 {
    part as f64 / whole.max(1) as f64
}

fn name(l: &Link) -> LinkName {
    LinkName {
        from: l.from.clone(),
        to: l.to.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probes(far: (u64, u64), near: (u64, u64)) -> ProbeCount {
        ProbeCount {
            far_sent: far.0,
            far_unanswered: far.1,
            near_sent: near.0,
            near_unanswered: near.1,
        }
    }

    #[test]
    fn a_traced_leg_is_its_links_with_what_its_stream_lost_on_that_leg() {
        use mx_report::paths::TracedHop;
        use mx_report::streams::{StreamCounts, StreamLegs};
        let flow = FlowFigures::of_streams(
            0,
            1,
            vec![StreamCounts {
                sport: 40001,
                sent: 1000,
                replies: 880,
                legs: Some(StreamLegs {
                    settled: 1000,
                    forward_lost: 100,
                    return_lost: 20,
                }),
            }],
        );
        let by_pair = HashMap::from([(("h1", "h3"), &flow)]);
        let hop = |ttl, kind| TracedHop {
            ttl,
            kind,
            sent: 10,
            answered: 9,
        };
        // The replies, swept from h3 back to h1's port; a silent router
        // between: no link is named across it.
        let traced = TracedPath {
            from: "h3".into(),
            to: "h1".into(),
            leg: TracedLeg::Replies,
            sport: 40001,
            hops: Ok(vec![
                hop(1, HopKind::Router("10.0.0.126".into())),
                hop(2, HopKind::Silent),
                hop(3, HopKind::Router("10.0.0.130".into())),
                hop(4, HopKind::Reached("10.0.0.1".into())),
            ]),
        };
        let path = stream_path(&traced, &by_pair).unwrap();
        assert_eq!(path.stream, "h3 -> h1:40001");
        let link = |from: &str, to: &str| Link {
            from: from.into(),
            to: to.into(),
        };
        assert_eq!(
            path.links,
            [link("h3", "10.0.0.126"), link("10.0.0.130", "h1")]
        );
        // The replies' leg: of the 900 requests that arrived, 20 replies lost.
        assert_eq!((path.sent, path.lost), (900, 20));
        // The requests' leg of another port: the reports count no such
        // stream, so it is not read.
        let other = TracedPath {
            from: "h1".into(),
            to: "h3".into(),
            leg: TracedLeg::Requests,
            sport: 40002,
            ..traced.clone()
        };
        assert_eq!(stream_path(&other, &by_pair), None);
        // A sweep that failed is not read either.
        let failed = TracedPath {
            hops: Err("Address in use".into()),
            ..traced
        };
        assert_eq!(stream_path(&failed, &by_pair), None);
    }

    #[test]
    fn the_first_link_whose_far_end_goes_unanswered_is_the_one() {
        // l1 -> s2 then s2 -> l2: s2's probes lose 10%, l1's none: the
        // first. (l2's lose as much as s2's: past the lossy link too.)
        let uplink = [probes((320, 32), (0, 0)), probes((320, 31), (320, 32))];
        assert_eq!(decide(&uplink, 0.1), Some(0));
        // s2's answered, l2's not: the second.
        let downlink = [probes((320, 0), (0, 0)), probes((320, 30), (320, 0))];
        assert_eq!(decide(&downlink, 0.1), Some(1));
        // Too few unanswered to tell: both stay named.
        let few = [probes((20, 2), (0, 0)), probes((20, 2), (20, 2))];
        assert_eq!(decide(&few, 0.1), None);
        // One link needs no deciding.
        assert_eq!(decide(&uplink[..1], 0.1), None);
        // Routers that ration their ICMP leave most probes unanswered at
        // every hop, past anything the streams lost: nothing decided.
        let rationed = [probes((320, 200), (0, 0)), probes((320, 210), (320, 200))];
        assert_eq!(decide(&rationed, 0.1), None);
    }
}
