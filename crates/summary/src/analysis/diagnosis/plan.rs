//! Requests a receiver left unanswered by plan: a source sent it past what
//! the receiver's matrix plans for that source, plus headroom
//! (agent::budget). Not the network's loss, and not nothing: either the
//! source runs another matrix than its receiver (an edit not deployed to
//! every host), or something else sends from the source's address.

use super::says::Says;
use super::{Blame, Direction, Finding, Kind, Place};
use crate::analysis::aggregate::ReportSet;
use crate::analysis::figures::FlowFigures;

/// One finding per receiver that refused requests, naming its sources (most
/// refused first) with what each sent it and what came back.
pub fn findings(set: &ReportSet, flows: &[FlowFigures]) -> Vec<Finding> {
    let mut by_receiver: std::collections::BTreeMap<u32, Vec<(&FlowFigures, f64)>> =
        Default::default();
    for f in flows {
        if f.packets.refused > 0.0 {
            by_receiver
                .entry(f.peer)
                .or_default()
                .push((f, f.packets.refused));
        }
    }
    let mut out = Vec::new();
    for (receiver, mut sources) in by_receiver {
        sources.sort_by(|a, b| b.1.total_cmp(&a.1));
        let to = set.name(receiver);
        let refused: f64 = sources.iter().map(|(_, n)| n).sum();
        let (first, _) = sources[0];
        let says = Says::Refused {
            receiver: to.to_string(),
            sources: sources
                .iter()
                .map(|(f, _)| set.name(f.host).to_string())
                .collect(),
            sent_pps: first.sent,
            back_pps: first.back,
            headroom_pct: mx_matrix::load::ANSWER_HEADROOM * 100.0,
            refused,
        };
        let mut finding = Finding::new(Kind::Plan, says)
            .figure("refused_pkts", refused)
            .figure("sent_pps", first.sent)
            .figure("back_pps", first.back);
        for (f, _) in &sources {
            finding = finding.blame(Blame {
                host: Some(set.name(f.host).to_string()),
                direction: Some(Direction::Between),
                peer: Some(to.to_string()),
                place: Place::Plan,
            });
        }
        out.push(finding);
    }
    out
}
