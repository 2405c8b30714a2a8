//! Which host lost which overlays, and why: the notes on stderr after the
//! export's summary line.

use super::format::{few, local_time};
use super::overlays::{self, Overlay};
use super::{Export, Options};
use crate::summary::analysis::aggregate::ReportSet;
use crate::summary::analysis::figures::HostFigures;

/// Notes of one kind past this many are summed up in one line.
const NOTES_PER_KIND: usize = 10;

/// Which host lost which overlays, and why (after the summary line):
/// no rx rows of its own (served, egress, line utilization); the loss split,
/// naming the peers that left it unknown; in a disk run, no disk figures;
/// nothing but a SILENT or NO-DATA state.
pub(crate) fn gap_notes(opts: &Options, set: &ReportSet, export: &Export) -> Vec<String> {
    let (hosts, silent, never) = (&export.hosts, &export.silent, &export.never);
    let name = |o: &Overlay| format!("{}{}", opts.test_prefix, o.name);
    let names = |overlays: &[Overlay]| overlays.iter().map(&name).collect::<Vec<_>>().join(" / ");
    let mut by_name: Vec<&HostFigures> = hosts.iter().collect();
    by_name.sort_by(|a, b| set.name(a.id).cmp(set.name(b.id)));
    let mut served = vec![overlays::SERVED_PPS, overlays::EGRESS_GBPS];
    if opts.nic_gbps.is_some() {
        served.push(overlays::LINE_UTIL);
    }
    let no_rx: Vec<(String, String)> = by_name
        .iter()
        .filter(|h| !h.has_rx)
        .map(|h| {
            (
                set.name(h.id).to_string(),
                format!(
                    "{} has no {}: its report holds no rx rows in the window (no requests counted arriving from any peer)",
                    set.name(h.id),
                    names(&served)
                ),
            )
        })
        .collect();
    let split = names(&[overlays::FORWARD_LOSS, overlays::RETURN_LOSS]);
    let no_split: Vec<(String, String)> = by_name
        .iter()
        .filter(|h| h.sent > 0.0 && h.arrived.is_none())
        .map(|h| {
            let mut peers: Vec<&str> = h.forward_gaps.iter().map(|&p| set.name(p)).collect();
            peers.sort_unstable();
            let what = "wrote no rx row about it";
            let why = match peers.len() {
                0 => "it has no flow of its own in the window".to_string(),
                1 => format!("peer {} {what}", peers[0]),
                n => format!("{n} peers {} {what}", few(&peers)),
            };
            (
                set.name(h.id).to_string(),
                format!(
                    "{} has no {split}: the loss split is unknown ({why})",
                    set.name(h.id),
                ),
            )
        })
        .collect();
    let no_disk = no_disk_notes(set, &by_name, &names);
    let silent_notes: Vec<(String, String)> = silent
        .iter()
        .map(|host| {
            let last = set
                .id_of(host)
                .and_then(|id| set.last_seen.get(&id))
                .map_or(String::new(), |ts| {
                    format!(" (ts {ts}, {})", local_time(*ts))
                });
            (
                host.to_string(),
                format!(
                    "{host} has only {}=SILENT: its last row{last} is before the window",
                    name(&overlays::STATE)
                ),
            )
        })
        .collect();
    let never_notes: Vec<(String, String)> = never
        .iter()
        .map(|host| {
            (
                host.clone(),
                format!(
                    "{host} has only {}=NO-DATA: it is in the matrix and never reported",
                    name(&overlays::STATE)
                ),
            )
        })
        .collect();
    let mut lines = Vec::new();
    for notes in [no_rx, no_split, no_disk, silent_notes, never_notes] {
        let shown = notes.len().min(NOTES_PER_KIND);
        lines.extend(notes[..shown].iter().map(|(_, line)| line.clone()));
        if notes.len() > shown {
            let rest: Vec<&str> = notes[shown..].iter().map(|(h, _)| h.as_str()).collect();
            lines.push(format!(
                "and {} more host(s) the same way: {}",
                rest.len(),
                few(&rest)
            ));
        }
    }
    lines
}

/// In a disk run, the hosts whose disk cells are blank: they have no disk
/// overlays (not measured, never 0).
fn no_disk_notes(
    set: &ReportSet,
    by_name: &[&HostFigures],
    names: &dyn Fn(&[Overlay]) -> String,
) -> Vec<(String, String)> {
    if !by_name.iter().any(|h| h.disk.is_some()) {
        return Vec::new();
    }
    let disk = names(&[
        overlays::DISK_READ_MBS,
        overlays::DISK_WRITE_MBS,
        overlays::DISK_READ_IOPS,
        overlays::DISK_WRITE_IOPS,
        overlays::DISK_READ_P99,
        overlays::DISK_WRITE_P99,
        overlays::DISK_BUSY,
    ]);
    by_name
        .iter()
        .filter(|h| h.disk.is_none())
        .map(|h| {
            let host = set.name(h.id);
            (
                host.to_string(),
                format!("{host} has no {disk}: its host rows in the window carry no disk figures"),
            )
        })
        .collect()
}
