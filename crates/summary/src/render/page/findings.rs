//! The findings on the page: each one's words with its blames as chips
//! (`h2 into · receive path`), and what each points at in the heatmaps, so
//! that the picture and the words agree.
//!
//! A blame says which way the packets were going where they were lost:
//! into a host (from anyone, or from its peer), out of it, or from one host
//! to another. Packets going from A to B are the requests of flow A -> B
//! (the forward grid's cell A, B) and the replies of flow B -> A (the return
//! grid's cell B, A). So loss into a host is its column in the forward grid
//! and its row in the return grid; out of it, the other way round; a pair,
//! one cell of each.

use std::fmt::Write as _;

use super::heatmap::Mark;
use super::svg::escape;
use crate::analysis::diagnosis::{Blame, Direction, Finding, Kind};

/// Which packets of a flow a grid shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    /// Its requests, sender (row) to receiver (column): forward loss, delivered.
    Forward,
    /// Its replies, receiver (column) back to sender (row).
    Return,
    /// Both: round-trip loss.
    RoundTrip,
    /// Neither alone (RTT, coverage): hosts are named, nothing outlined.
    Neither,
}

/// One chip's words: who, which way, and where.
pub fn chip(b: &Blame) -> String {
    let who = match (&b.host, b.direction, &b.peer) {
        (None, _, _) => String::new(),
        (Some(h), Some(Direction::Between), Some(p)) => format!("{h} -> {p}"),
        (Some(h), Some(Direction::Into), Some(p)) => format!("{h} into (from {p})"),
        (Some(h), Some(Direction::OutOf), Some(p)) => format!("{h} out of (to {p})"),
        (Some(h), Some(d), _) => format!("{h} {}", d.as_str()),
        // A link, from one device to the next.
        (Some(h), None, Some(p)) => format!("{h} -> {p}"),
        (Some(h), None, None) => h.clone(),
    };
    let place = b.place.as_str();
    if who.is_empty() {
        place.to_string()
    } else {
        format!("{who} · {place}")
    }
}

/// The findings block at the top of the page: what to do next, most urgent
/// first, each with the hosts it names.
pub fn block(h: &mut String, findings: &[Finding]) {
    h.push_str("<section id=\"findings\"><h2>What to do next</h2>\n<ol class=\"findings\">\n");
    for f in findings {
        let _ = write!(
            h,
            "<li class=\"finding {}\"><p>{}</p>",
            kind_class(f.kind),
            escape(&crate::render::findings::text(f))
        );
        if !f.blames.is_empty() {
            h.push_str("<p class=\"chips\">");
            for b in &f.blames {
                let _ = write!(h, "<span class=\"chip\">{}</span> ", escape(&chip(b)));
            }
            h.push_str("</p>");
        }
        h.push_str("</li>\n");
    }
    h.push_str("</ol></section>\n");
}

fn kind_class(kind: Kind) -> &'static str {
    match kind {
        Kind::Loss => "loss",
        Kind::Agent => "agent",
        Kind::Rate => "rate",
        Kind::Disk => "disk",
        Kind::Coverage => "coverage",
        Kind::Latency => "latency",
        Kind::Plan => "plan",
        Kind::Route => "route",
        Kind::Clear => "clear",
    }
}

/// The hosts the findings name, as indices into `labels`.
pub fn named(findings: &[Finding], labels: &[String]) -> Vec<usize> {
    let mut out: Vec<usize> = findings
        .iter()
        .flat_map(Finding::hosts)
        .filter_map(|name| labels.iter().position(|l| l == name))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Where the lost packets were going: from a host (or anyone) to a host
/// (or anyone). `None` for a blame with no direction (a CPU, an agent).
fn travel(b: &Blame) -> Option<(Option<&str>, Option<&str>)> {
    let host = b.host.as_deref()?;
    let peer = b.peer.as_deref();
    match b.direction? {
        Direction::Into => Some((peer, Some(host))),
        Direction::OutOf | Direction::Between => Some((Some(host), peer)),
    }
}

/// What the findings point at in a grid of `leg`, hosts in `labels`' order.
pub fn marks(findings: &[Finding], labels: &[String], leg: Leg) -> Vec<Mark> {
    let at = |name: Option<&str>| name.and_then(|n| labels.iter().position(|l| l == n));
    let mut out = Vec::new();
    for (from, to) in findings.iter().flat_map(|f| &f.blames).filter_map(travel) {
        let (from, to) = (at(from), at(to));
        let cells = match leg {
            Leg::Forward => vec![(from, to)],
            Leg::Return => vec![(to, from)],
            Leg::RoundTrip => vec![(from, to), (to, from)],
            Leg::Neither => Vec::new(),
        };
        for cell in cells {
            let mark = match cell {
                (Some(r), Some(c)) => Mark::Cell(r, c),
                (Some(r), None) => Mark::Row(r),
                (None, Some(c)) => Mark::Column(c),
                (None, None) => continue,
            };
            if !out.contains(&mark) {
                out.push(mark);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnosis::{Place, Says};

    fn names() -> Vec<String> {
        ["a", "b", "c", "d"].map(String::from).to_vec()
    }

    fn finding(blames: &[Blame]) -> Finding {
        blames.iter().fold(
            Finding::new(
                Kind::Loss,
                Says::NeverHeard {
                    hosts: vec!["d".into()],
                },
            ),
            |f, b| f.blame(b.clone()),
        )
    }

    #[test]
    fn into_a_host_is_its_forward_column_and_its_return_row() {
        let f = [finding(&[Blame::toward(
            "d",
            Direction::Into,
            Place::ReceivePath,
        )])];
        assert_eq!(marks(&f, &names(), Leg::Forward), [Mark::Column(3)]);
        assert_eq!(marks(&f, &names(), Leg::Return), [Mark::Row(3)]);
        assert_eq!(
            marks(&f, &names(), Leg::RoundTrip),
            [Mark::Column(3), Mark::Row(3)]
        );
        assert_eq!(marks(&f, &names(), Leg::Neither), []);
        assert_eq!(named(&f, &names()), [3]);
        assert_eq!(chip(&f[0].blames[0]), "d into · receive path");
    }

    #[test]
    fn out_of_a_host_and_a_pair_point_the_other_way_and_at_cells() {
        let out_of_b = Blame::toward("b", Direction::OutOf, Place::TransmitPath);
        let a_to_c = Blame {
            host: Some("a".into()),
            direction: Some(Direction::Between),
            peer: Some("c".into()),
            place: Place::Wire,
        };
        let f = [finding(&[out_of_b, a_to_c.clone()])];
        assert_eq!(
            marks(&f, &names(), Leg::Forward),
            [Mark::Row(1), Mark::Cell(0, 2)]
        );
        assert_eq!(
            marks(&f, &names(), Leg::Return),
            [Mark::Column(1), Mark::Cell(2, 0)]
        );
        assert_eq!(chip(&a_to_c), "a -> c · wire");
        // A host's own trouble has no direction: named, nothing outlined.
        let cpu = [finding(&[Blame::host("c", Place::Cpu)])];
        assert_eq!(marks(&cpu, &names(), Leg::RoundTrip), []);
        assert_eq!(named(&cpu, &names()), [2]);
        assert_eq!(chip(&cpu[0].blames[0]), "c · cpu");
    }

    #[test]
    fn the_block_lists_each_finding_with_its_chips() {
        let f = [finding(&[Blame::toward("d", Direction::Into, Place::Wire)])];
        let mut h = String::new();
        block(&mut h, &f);
        assert!(
            h.contains("<li class=\"finding loss\"><p>no report from d and not one reply"),
            "{h}"
        );
        assert!(
            h.contains("<span class=\"chip\">d into · wire</span>"),
            "{h}"
        );
    }
}
