//! Route changes: ways whose datagrams crossed more routers, or fewer, in
//! some intervals than in others ([`crate::analysis::routes`]), one finding
//! for each group of ways that changed alike (the same lengths, from the
//! same interval): a link that goes down moves every way that crossed it
//! at once.

use std::collections::BTreeMap;

use super::says::RouteWay;
use super::{Blame, Finding, Kind, Place, Says};
use crate::analysis::aggregate::ReportSet;
use crate::analysis::routes::Hops;

/// A finding for each group of ways whose route changed alike, earliest
/// first (then the largest group).
pub fn findings(set: &ReportSet) -> Vec<Finding> {
    let mut groups: BTreeMap<(i64, Vec<Hops>), (Vec<RouteWay>, u32)> = BTreeMap::new();
    for (&(from, to), route) in &set.routes {
        let Some(at) = route.changed_at else {
            continue;
        };
        let group = groups.entry((at, route.ranges.clone())).or_default();
        group.0.push(RouteWay {
            from: set.name(from).to_string(),
            to: set.name(to).to_string(),
        });
        group.1 = group.1.max(route.changes);
    }
    let mut out: Vec<((i64, usize), Finding)> = groups
        .into_iter()
        .map(|((at, hops), (ways, changes))| {
            let order = (at, usize::MAX - ways.len());
            (order, finding(at, hops, ways, changes))
        })
        .collect();
    out.sort_by_key(|(order, _)| *order);
    out.into_iter().map(|(_, f)| f).collect()
}

fn finding(at: i64, hops: Vec<Hops>, ways: Vec<RouteWay>, changes: u32) -> Finding {
    let (first, last) = (hops[0], hops[hops.len() - 1]);
    let n = ways.len();
    let blames: Vec<Blame> = ways
        .iter()
        .map(|w| Blame {
            host: Some(w.from.clone()),
            direction: None,
            peer: Some(w.to.clone()),
            place: Place::Route,
        })
        .collect();
    let mut f = Finding::new(
        Kind::Route,
        Says::RouteChange {
            ways,
            hops,
            at,
            changes,
        },
    )
    .figure("ways", n as f64)
    .figure("hops_before", f64::from(first.fewest))
    .figure("hops_before_max", f64::from(first.most))
    .figure("hops_after", f64::from(last.fewest))
    .figure("hops_after_max", f64::from(last.most))
    .figure("changes", f64::from(changes));
    for b in blames {
        f = f.blame(b);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::routes::Route;

    /// A way (from, to) and its rows: (interval, routers crossed).
    type Way<'a> = ((&'a str, &'a str), &'a [(i64, u32)]);

    fn set(routes: &[Way<'_>]) -> ReportSet {
        let mut set = ReportSet::default();
        for ((from, to), rows) in routes {
            let key = (set.id(from), set.id(to));
            let route: &mut Route = set.routes.entry(key).or_default();
            for &(ts, n) in rows.iter() {
                route.saw(ts, Hops { fewest: n, most: n });
            }
            route.close();
        }
        set
    }

    #[test]
    fn ways_that_changed_alike_are_one_finding_naming_each_way() {
        let down: &[(i64, u32)] = &[(10, 2), (15, 2), (20, 3), (25, 3)];
        let held: &[(i64, u32)] = &[(10, 3), (15, 3), (20, 3), (25, 3)];
        let set = set(&[
            (("h1", "h3"), down),
            (("h3", "h1"), down),
            (("h1", "h2"), held),
        ]);
        let found = findings(&set);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.kind, Kind::Route);
        let ways: Vec<(String, String)> = f
            .blames
            .iter()
            .map(|b| (b.host.clone().unwrap(), b.peer.clone().unwrap()))
            .collect();
        assert_eq!(
            ways,
            [("h1".into(), "h3".into()), ("h3".into(), "h1".into())]
        );
        assert!(f.blames.iter().all(|b| b.place == Place::Route));
        assert_eq!(f.figures["hops_before"], 2.0);
        assert_eq!(f.figures["hops_after"], 3.0);
        assert!(matches!(&f.says, Says::RouteChange { at: 20, .. }));
    }

    #[test]
    fn ways_that_changed_differently_or_never_are_apart_or_unsaid() {
        let set = set(&[
            (("h1", "h3"), &[(10, 2), (15, 3)]),
            (("h2", "h4"), &[(10, 2), (15, 2), (20, 1)]),
            (("h1", "h2"), &[(10, 1), (15, 1)]),
        ]);
        let found = findings(&set);
        assert_eq!(found.len(), 2);
        assert!(matches!(&found[0].says, Says::RouteChange { at: 15, .. }));
        assert!(matches!(&found[1].says, Says::RouteChange { at: 20, .. }));
    }
}
