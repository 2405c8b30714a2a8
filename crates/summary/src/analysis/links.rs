//! The directed link a fabric's loss sits on, from the paths of the streams
//! that lost and of those that did not.
//!
//! Each stream (a pair's source port, hashed by ECMP onto one path) crossed
//! a known path of directed links, and lost some of what it sent or none.
//! A link on the path of a stream that lost nothing, of enough packets that
//! the loss would have shown, is cleared. Of the links left, the one on the
//! most lossy paths not yet explained is named, with its evidence (so many
//! lossy streams cross it, no clean one does), and again until every lossy
//! path is explained: two faults give two links. Links that explain exactly
//! the same lossy streams cannot be told apart by these paths: they are
//! named together, with what would tell them apart (a stream that crosses
//! one and not the other). This is the vote of lossy flows over their paths
//! of Microsoft's 007 (NSDI 2018), with NetBouncer's clearing by clean
//! paths (NSDI 2019).
//!
//! The verdict is data: the render writes its words.

use std::collections::{BTreeMap, BTreeSet};

/// A directed link: from one device (a router, a host) to the next.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Link {
    pub from: String,
    pub to: String,
}

/// One stream's path and what it lost on it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamPath {
    /// The stream, as the render names it (`h1:40001 -> h3`).
    pub stream: String,
    /// Its directed links, in order.
    pub links: Vec<Link>,
    /// Packets it sent over the path, and of them lost.
    pub sent: u64,
    pub lost: u64,
}

/// What decides whether a stream lost, or lost nothing that would show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// A stream lost when it lost at least this many packets...
    pub min_lost: u64,
    /// ... and this share of what it sent.
    pub min_share: f64,
    /// A stream that lost nothing clears its links when it sent at least
    /// this many: fewer, and a link dropping a few percent could have
    /// spared it by chance.
    pub min_clean_sent: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_lost: 3,
            min_share: 0.001,
            min_clean_sent: 100,
        }
    }
}

/// One place the loss is: a link, or links these paths cannot tell apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    /// The link, or the links that explain exactly the same lossy streams
    /// (more than one: these paths cannot tell them apart).
    pub links: Vec<Link>,
    /// The lossy streams whose paths cross it.
    pub lossy_streams: Vec<String>,
    /// What they lost, and sent.
    pub lost: u64,
    pub sent: u64,
}

/// What the paths say of where the loss is.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The places, most lossy streams first.
    pub culprits: Vec<Culprit>,
    /// Lossy streams no link left uncleared explains (a loss that is not
    /// on a shared link: a host's own, or a link every clean stream also
    /// crossed with too few packets to show).
    pub unexplained: Vec<String>,
    /// How many streams were clean, and cleared their links.
    pub clean_streams: usize,
}

/// Where `paths` put the loss.
pub fn locate(paths: &[StreamPath], thresholds: Thresholds) -> Verdict {
    let lossy = |p: &StreamPath| {
        p.lost >= thresholds.min_lost && p.lost as f64 >= thresholds.min_share * p.sent as f64
    };
    let clean = |p: &StreamPath| p.lost == 0 && p.sent >= thresholds.min_clean_sent;
    let cleared: BTreeSet<&Link> = paths
        .iter()
        .filter(|p| clean(p))
        .flat_map(|p| &p.links)
        .collect();
    // For each link not cleared, the lossy streams (by index) crossing it.
    let mut crossing: BTreeMap<&Link, BTreeSet<usize>> = BTreeMap::new();
    for (i, path) in paths.iter().enumerate().filter(|(_, p)| lossy(p)) {
        for link in path.links.iter().filter(|l| !cleared.contains(l)) {
            crossing.entry(link).or_default().insert(i);
        }
    }
    let mut left: BTreeSet<usize> = (0..paths.len()).filter(|&i| lossy(&paths[i])).collect();
    let mut culprits = Vec::new();
    while !left.is_empty() {
        // The link explaining the most lossy streams still unexplained.
        let best = crossing
            .iter()
            .map(|(link, streams)| (*link, streams.intersection(&left).count()))
            .filter(|&(_, n)| n > 0)
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)));
        let Some((best, _)) = best else { break };
        let explained: BTreeSet<usize> = crossing[best].clone();
        // Every link crossed by exactly these lossy streams: indistinguishable.
        let links: Vec<Link> = crossing
            .iter()
            .filter(|(_, streams)| **streams == explained)
            .map(|(link, _)| (*link).clone())
            .collect();
        culprits.push(Culprit {
            links,
            lossy_streams: explained.iter().map(|&i| paths[i].stream.clone()).collect(),
            lost: explained.iter().map(|&i| paths[i].lost).sum(),
            sent: explained.iter().map(|&i| paths[i].sent).sum(),
        });
        left = &left - &explained;
        crossing.retain(|_, streams| !streams.is_subset(&explained));
    }
    Verdict {
        culprits,
        unexplained: left.iter().map(|&i| paths[i].stream.clone()).collect(),
        clean_streams: paths.iter().filter(|p| clean(p)).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(from: &str, to: &str) -> Link {
        Link {
            from: from.to_string(),
            to: to.to_string(),
        }
    }

    /// A stream from a host of leaf `a` to one of leaf `b` through spine
    /// `s`, its loss `lost` of 1,000.
    fn stream(n: usize, a: &str, s: &str, b: &str, lost: u64) -> StreamPath {
        StreamPath {
            stream: format!("{a}:{n} -> {b}"),
            links: vec![link(a, s), link(s, b)],
            sent: 1000,
            lost,
        }
    }

    /// Every stream between three leaves over two spines, two a pair and
    /// spine, lossy where `drops` says (its loss, 0 for none).
    fn fabric(drops: impl Fn(&str, &str, &str) -> u64) -> Vec<StreamPath> {
        let mut paths = Vec::new();
        for a in ["l1", "l2", "l3"] {
            for b in ["l1", "l2", "l3"].into_iter().filter(|b| *b != a) {
                for s in ["s1", "s2"] {
                    for n in 0..2 {
                        paths.push(stream(paths.len() + n, a, s, b, drops(a, s, b)));
                    }
                }
            }
        }
        paths
    }

    #[test]
    fn one_lossy_link_is_named_alone_and_the_clean_streams_clear_the_rest() {
        // 10% on l1 -> s2: every stream from l1 through s2 loses.
        let paths = fabric(|a, s, _| if (a, s) == ("l1", "s2") { 100 } else { 0 });
        let verdict = locate(&paths, Thresholds::default());
        assert_eq!(verdict.culprits.len(), 1, "{verdict:?}");
        let culprit = &verdict.culprits[0];
        assert_eq!(culprit.links, vec![link("l1", "s2")]);
        assert_eq!(culprit.lossy_streams.len(), 4);
        assert_eq!((culprit.lost, culprit.sent), (400, 4000));
        assert!(verdict.unexplained.is_empty());
        assert_eq!(verdict.clean_streams, paths.len() - 4);
    }

    #[test]
    fn two_lossy_links_are_both_named() {
        let paths = fabric(|a, s, b| match (a, s, b) {
            ("l1", "s2", _) => 100,
            (_, "s1", "l3") => 50,
            _ => 0,
        });
        let verdict = locate(&paths, Thresholds::default());
        let named: Vec<&Vec<Link>> = verdict.culprits.iter().map(|c| &c.links).collect();
        assert_eq!(
            named,
            [&vec![link("l1", "s2")], &vec![link("s1", "l3")]],
            "{verdict:?}"
        );
        assert!(verdict.unexplained.is_empty());
    }

    #[test]
    fn links_the_paths_cannot_tell_apart_are_named_together() {
        // Two leaves: every stream from l1 through s2 also takes s2 -> l2,
        // and no other stream crosses s2 -> l2.
        let mut paths = Vec::new();
        for (a, b) in [("l1", "l2"), ("l2", "l1")] {
            for s in ["s1", "s2"] {
                for n in 0..4 {
                    let lost = if (a, s) == ("l1", "s2") { 100 } else { 0 };
                    paths.push(stream(n, a, s, b, lost));
                }
            }
        }
        let verdict = locate(&paths, Thresholds::default());
        assert_eq!(verdict.culprits.len(), 1, "{verdict:?}");
        assert_eq!(
            verdict.culprits[0].links,
            vec![link("l1", "s2"), link("s2", "l2")]
        );
    }

    #[test]
    fn a_clean_stream_of_too_few_packets_clears_nothing_and_noise_is_not_loss() {
        let mut paths = fabric(|a, s, _| if (a, s) == ("l1", "s2") { 100 } else { 0 });
        // A stream through the lossy link that sent 50 and lost none: too
        // few to clear l1 -> s2.
        paths.push(StreamPath {
            stream: "l1:99 -> l3".to_string(),
            links: vec![link("l1", "s2"), link("s2", "l3")],
            sent: 50,
            lost: 0,
        });
        // A stream that lost 1 of 1,000 elsewhere: under min_lost, not a
        // lossy stream, and it clears nothing either.
        paths.push(StreamPath {
            stream: "l3:98 -> l2".to_string(),
            links: vec![link("l3", "s1"), link("s1", "l2")],
            sent: 1000,
            lost: 1,
        });
        let verdict = locate(&paths, Thresholds::default());
        assert_eq!(verdict.culprits.len(), 1, "{verdict:?}");
        assert_eq!(verdict.culprits[0].links, vec![link("l1", "s2")]);
    }

    #[test]
    fn loss_on_no_shared_link_is_left_unexplained() {
        // One stream loses on a path every link of which clean streams
        // cleared: not a link's loss.
        let mut paths = fabric(|_, _, _| 0);
        paths[0].lost = 200;
        let verdict = locate(&paths, Thresholds::default());
        assert!(verdict.culprits.is_empty(), "{verdict:?}");
        assert_eq!(verdict.unexplained, vec![paths[0].stream.clone()]);
        // And a clean fabric has nothing to say at all.
        let verdict = locate(&fabric(|_, _, _| 0), Thresholds::default());
        assert!(verdict.culprits.is_empty() && verdict.unexplained.is_empty());
    }
}
