//! Which intervals a summary counts: the steady part of the run.
//!
//! A fleet's first and last intervals are its own doing, not the network's:
//! an agent that is not listening yet, or no longer, turns its peers' requests
//! into loss. The agents mark every interval's host row with its `phase`
//! (report::Phase), and the summary keeps only whole intervals in which every
//! host was sending:
//!
//! - the span begins at the first interval in which every host that reported
//!   at all was sending (a host that came up late moves it, and is named);
//! - it ends at the run's planned end (the last whole interval of the hosts
//!   that ended as planned), else at the newest interval;
//! - inside it, an interval is left out when any host marked it an edge (a
//!   restart by `mx reload`) or wrote it only partially (no host row: an agent
//!   stopped mid-interval).
//!
//! A host that stopped reporting mid-run (a dead agent, a cut link) or never
//! came up is not an edge: the intervals after it went quiet stay in, and the
//! flows into it show as the loss they are (the advice names the host).
//!
//! The span is for runs whose agents shared a start instant and marked their
//! intervals. Reports without a single `phase` (the original's agents, an
//! older mx, a hand-made file) are read as the original reads them: every
//! interval of the window counts, the run's edges included.

use std::collections::{BTreeMap, BTreeSet};

use mx_report::Phase;

/// How a host's interface counts one direction of one interval, beside
/// its agent's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Counted {
    /// Its host row carries no interface counters.
    #[default]
    No,
    /// Its agent sent (read) nothing coalesced: the interface counted a
    /// packet a datagram, and its packets set against the agent's.
    Packets,
    /// Its agent sent (read) coalesced: a software interface counts a
    /// GSO/GRO message once, whatever its datagrams, so its payload bytes
    /// (its bytes less each packet's headers) set against the agent's.
    Bytes,
}

impl Counted {
    /// From a host row that carries the interface's counters or not, and
    /// the datagrams its agent sent (read) coalesced.
    pub fn of(nic: bool, coalesced: f64) -> Counted {
        match (nic, coalesced > 0.0) {
            (false, _) => Counted::No,
            (true, false) => Counted::Packets,
            (true, true) => Counted::Bytes,
        }
    }
}

/// What one host wrote for one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Mark {
    /// Its host row: complete (a measured `pps`), and the phase it gives.
    pub host_row: Option<Option<Phase>>,
    /// Any tx or rx row.
    pub flows: bool,
    /// The rate scale its host row says its flows ran at (`mx run --ramp`).
    pub rate_scale: Option<f64>,
    /// How its interface's counts of what it sent (`nic_tx`) and read
    /// (`nic_rx`) that interval set against its agent's.
    pub nic_tx: Counted,
    pub nic_rx: Counted,
    /// Its host row is the first of an agent `mx reload` began
    /// (`began_by`): an edge of the reload's making.
    pub reloaded: bool,
    /// Its host row is the first of a report cut to its newest rows
    /// (`began_by=keep`, the agents' `--keep-report`).
    pub cut: bool,
}

/// Every host's marks, by interval label (`ts`).
pub(crate) type Timeline = Vec<BTreeMap<i64, Mark>>;

/// Whether a host's interval counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Whole,
    Edge,
}

/// `last_or_restart`: the host wrote nothing after this interval, or began
/// again (a `start`) in the next.
fn status(mark: &Mark, first_host_row: bool, last_or_restart: bool) -> Status {
    match mark.host_row {
        Some(Some(phase)) if phase.is_whole() => Status::Whole,
        Some(Some(_)) => Status::Edge,
        // Unmarked reports: the first interval holds the agent's start.
        Some(None) if first_host_row => Status::Edge,
        Some(None) => Status::Whole,
        // Rows without a host row: an interval the agent did not finish (it
        // stopped in it), when nothing of it follows; mid-run, a worker whose
        // batch came too late to be merged (an agent short of CPU), which is
        // the run's to show, not an edge to hide.
        None if last_or_restart => Status::Edge,
        None => Status::Whole,
    }
}

/// The intervals a summary keeps, and what it left out.
#[derive(Debug, Clone, Default)]
pub struct Span {
    /// The kept interval labels.
    pub keep: BTreeSet<i64>,
    /// Intervals seen in the window's range that were left out.
    pub left_out: usize,
    /// No interval had every host sending: everything in the window is
    /// summarized as it is (and the header says so).
    pub no_steady: bool,
    /// Hosts whose first whole interval came after the others': (host, by how
    /// many seconds). A host `mx reload` started is not late: it is among
    /// `reloaded`.
    pub late: Vec<(u32, i64)>,
    /// The agents `mx reload` began: (host, the label of its first interval,
    /// whether it ran before: restarted, not started).
    pub reloaded: Vec<Reloaded>,
    /// Hosts whose report begins after its agent did: cut to its newest
    /// rows (`--keep-report`). Not late: their agents' first rows are gone.
    pub cut: Vec<u32>,
    /// The run ended as planned (some host marked its end).
    pub planned_end: bool,
    /// Some host marked its intervals' phase: the span is the steady part.
    /// Otherwise every interval of the window is kept, as it is.
    pub marked: bool,
}

impl Span {
    pub fn first(&self) -> Option<i64> {
        self.keep.first().copied()
    }

    pub fn last(&self) -> Option<i64> {
        self.keep.last().copied()
    }

    pub fn contains(&self, ts: i64) -> bool {
        self.keep.contains(&ts)
    }
}

/// An agent `mx reload` began, as its first host row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reloaded {
    pub host: u32,
    /// The label (end) of its first interval.
    pub ts: i64,
    /// The host had reported before: the reload restarted it.
    pub restarted: bool,
}

/// Every agent `mx reload` began, in `timeline`'s order of hosts, then time.
fn reloads(timeline: &Timeline) -> Vec<Reloaded> {
    let mut reloaded = Vec::new();
    for (host, marks) in timeline.iter().enumerate() {
        let first = marks.keys().next().copied();
        for (&ts, _) in marks.iter().filter(|(_, m)| m.reloaded) {
            reloaded.push(Reloaded {
                host: host as u32,
                ts,
                restarted: first.is_some_and(|first| first < ts),
            });
        }
    }
    reloaded
}

/// The hosts whose report begins with a row marked cut (`--keep-report`): its
/// agent's first rows are gone, not late.
fn cut_reports(timeline: &Timeline) -> Vec<u32> {
    timeline
        .iter()
        .enumerate()
        .filter(|(_, marks)| {
            marks
                .values()
                .find(|m| m.host_row.is_some())
                .is_some_and(|m| m.cut)
        })
        .map(|(host, _)| host as u32)
        .collect()
}

/// One step of a ramp (`mx run --ramp`): the intervals its figures come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The rate scale the step ran at.
    pub scale: f64,
    /// The labels (interval ends) of its time: after `after`, up to `until`.
    pub after: i64,
    pub until: i64,
}

/// Two rate scales are one when they agree to the report's 4 decimals.
pub(crate) fn same_scale(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.5e-4
}

impl Step {
    /// Whether interval `ts` is one of the step's: within its time, and
    /// every host that wrote anything for it wrote its whole host row at
    /// the step's scale (a host the order reached late ran the interval at
    /// another, and a host row left out cannot say).
    fn holds(&self, ts: i64, timeline: &Timeline) -> bool {
        ts > self.after
            && ts <= self.until
            && timeline.iter().all(|marks| {
                marks.get(&ts).is_none_or(|m| {
                    m.host_row.is_some() && m.rate_scale.is_some_and(|s| same_scale(s, self.scale))
                })
            })
    }
}

/// The part of `span` that is `step`'s: its whole intervals (steady, every
/// host sending) entirely at the step's scale. Nothing when the span had no
/// steady interval at all. The intervals of the step's time that are not
/// kept are counted as left out.
pub fn step_span(span: Span, timeline: &Timeline, step: &Step) -> Span {
    let keep: BTreeSet<i64> = if span.no_steady {
        BTreeSet::new()
    } else {
        span.keep
            .iter()
            .copied()
            .filter(|&ts| step.holds(ts, timeline))
            .collect()
    };
    let in_time: BTreeSet<i64> = timeline
        .iter()
        .flat_map(|m| m.range(step.after.saturating_add(1)..=step.until))
        .map(|(&ts, _)| ts)
        .collect();
    Span {
        left_out: in_time.len() - in_time.intersection(&keep).count(),
        keep,
        no_steady: false,
        ..span
    }
}

/// The span of `timeline`, keeping the newest `window` seconds of it (0: all).
pub fn span(timeline: &Timeline, window: f64) -> Span {
    let marked = timeline
        .iter()
        .flat_map(BTreeMap::values)
        .any(|m| matches!(m.host_row, Some(Some(_))));
    if !marked {
        return unmarked(timeline, window);
    }
    let statuses = statuses(timeline);
    let first_whole: Vec<Option<i64>> = statuses
        .iter()
        .map(|s| {
            s.iter()
                .find(|(_, st)| **st == Status::Whole)
                .map(|(&ts, _)| ts)
        })
        .collect();
    let every_ts: BTreeSet<i64> = timeline.iter().flat_map(|m| m.keys().copied()).collect();
    let Some(&latest) = every_ts.last() else {
        return Span::default();
    };
    let begin = first_whole.iter().flatten().max().copied();
    let ended = planned_ends(timeline, &statuses);
    let end = ended.iter().min().copied().unwrap_or(latest);
    let from = if window > 0.0 {
        end - window as i64
    } else {
        i64::MIN
    };
    let candidates: BTreeSet<i64> = every_ts.range(from.saturating_add(1)..).copied().collect();
    let keep: BTreeSet<i64> = match begin {
        Some(begin) => candidates
            .iter()
            .copied()
            .filter(|&ts| ts >= begin && ts <= end)
            .filter(|ts| {
                statuses
                    .iter()
                    .all(|s| s.get(ts).is_none_or(|st| *st == Status::Whole))
            })
            .collect(),
        None => BTreeSet::new(),
    };
    let reloaded = reloads(timeline);
    let cut = cut_reports(timeline);
    // A host reload started, whose first whole interval is its reload's,
    // did not come up late: reload began it then. Nor did a host whose
    // report was cut to its newest rows.
    let late: Vec<(u32, i64)> = late_hosts(&first_whole)
        .into_iter()
        .filter(|&(host, _)| {
            !reloaded
                .iter()
                .any(|r| r.host == host && first_whole[host as usize].is_some_and(|f| r.ts <= f))
                && !cut.contains(&host)
        })
        .collect();
    let planned_end = !ended.is_empty();
    if keep.is_empty() {
        // Nothing steady (a run of one interval, say): the window as it is.
        let latest_from = if window > 0.0 {
            latest - window as i64
        } else {
            i64::MIN
        };
        return Span {
            keep: every_ts
                .range(latest_from.saturating_add(1)..)
                .copied()
                .collect(),
            left_out: 0,
            no_steady: true,
            late,
            reloaded,
            cut,
            planned_end,
            marked,
        };
    }
    let window_start = if window > 0.0 {
        keep.last().copied().unwrap_or(end) - window as i64
    } else {
        i64::MIN
    };
    let left_out = every_ts
        .range(window_start.saturating_add(1)..)
        .filter(|ts| !keep.contains(ts))
        .count();
    Span {
        keep,
        left_out,
        no_steady: false,
        late,
        reloaded,
        cut,
        planned_end,
        marked,
    }
}

/// Each host's intervals (in `timeline`'s order), each whole or an edge by
/// [`status`]: by the phase the host marked it with, else by where it sits
/// among the host's own rows.
fn statuses(timeline: &Timeline) -> Vec<BTreeMap<i64, Status>> {
    let mut statuses: Vec<BTreeMap<i64, Status>> = Vec::with_capacity(timeline.len());
    for marks in timeline {
        let mut first = true;
        let mut by_ts = BTreeMap::new();
        let mut iter = marks.iter().peekable();
        while let Some((&ts, mark)) = iter.next() {
            let last_or_restart = iter
                .peek()
                .is_none_or(|(_, next)| next.host_row == Some(Some(Phase::Start)));
            let s = status(mark, first && mark.host_row.is_some(), last_or_restart);
            first &= mark.host_row.is_none();
            by_ts.insert(ts, s);
        }
        statuses.push(by_ts);
    }
    statuses
}

/// The planned ends: the last whole interval of each host that marked its
/// last or end interval.
fn planned_ends(timeline: &Timeline, statuses: &[BTreeMap<i64, Status>]) -> Vec<i64> {
    timeline
        .iter()
        .zip(statuses)
        .filter(|(marks, _)| {
            marks
                .values()
                .any(|m| matches!(m.host_row, Some(Some(Phase::Last | Phase::End))))
        })
        .filter_map(|(_, s)| {
            s.iter()
                .rev()
                .find(|(_, st)| **st == Status::Whole)
                .map(|(&ts, _)| ts)
        })
        .collect()
}

/// The hosts whose first whole interval came after the earliest host's,
/// each with how far behind it (seconds), from each host's first whole
/// interval.
fn late_hosts(first_whole: &[Option<i64>]) -> Vec<(u32, i64)> {
    let earliest_first = first_whole.iter().flatten().min().copied();
    first_whole
        .iter()
        .enumerate()
        .filter_map(|(id, f)| {
            let f = (*f)?;
            let behind = f - earliest_first?;
            (behind > 0).then_some((id as u32, behind))
        })
        .collect()
}

/// Reports without phase marks: every interval of the newest `window`
/// seconds (0: all of them), nothing left out.
fn unmarked(timeline: &Timeline, window: f64) -> Span {
    let every_ts: BTreeSet<i64> = timeline.iter().flat_map(|m| m.keys().copied()).collect();
    let Some(&latest) = every_ts.last() else {
        return Span::default();
    };
    let from = if window > 0.0 {
        latest - window as i64
    } else {
        i64::MIN
    };
    Span {
        keep: every_ts.range(from.saturating_add(1)..).copied().collect(),
        ..Span::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(marks: &[(i64, Option<Phase>, bool)]) -> BTreeMap<i64, Mark> {
        marks
            .iter()
            .map(|&(ts, phase, complete)| {
                (
                    ts,
                    Mark {
                        host_row: complete.then_some(phase),
                        flows: true,
                        rate_scale: None,
                        ..Mark::default()
                    },
                )
            })
            .collect()
    }

    const S: Option<Phase> = Some(Phase::Steady);

    #[test]
    fn a_clean_run_keeps_every_interval_between_its_edges() {
        let a = host(&[(1, S, true), (2, S, true), (3, Some(Phase::Last), true)]);
        let b = host(&[(1, S, true), (2, S, true), (3, Some(Phase::Last), true)]);
        let span = span(&vec![a, b], 60.0);
        assert_eq!(span.keep, BTreeSet::from([1, 2, 3]));
        assert_eq!(
            (span.left_out, span.no_steady, span.planned_end),
            (0, false, true)
        );
    }

    #[test]
    fn a_late_host_moves_the_start_and_is_named() {
        let a = host(&[(1, S, true), (2, S, true), (3, S, true), (4, S, true)]);
        let b = host(&[(2, Some(Phase::Start), true), (3, S, true), (4, S, true)]);
        let span = span(&vec![a, b], 0.0);
        assert_eq!(span.keep, BTreeSet::from([3, 4]));
        assert_eq!(span.left_out, 2);
        assert_eq!(span.late, vec![(1, 2)]);
    }

    #[test]
    fn a_planned_end_ends_the_span_and_later_rows_are_left_out() {
        let a = host(&[(1, S, true), (2, Some(Phase::Last), true)]);
        // b's end order came late: it sent on for another interval.
        let b = host(&[(1, S, true), (2, S, true), (3, Some(Phase::End), true)]);
        let span = span(&vec![a, b], 0.0);
        assert_eq!(span.keep, BTreeSet::from([1, 2]));
        assert_eq!(span.left_out, 1);
    }

    #[test]
    fn a_dead_host_is_not_an_edge_and_a_restart_is() {
        // c died after 2 (no end marked): 3 and 4 stay in.
        let a = host(&[(1, S, true), (2, S, true), (3, S, true), (4, S, true)]);
        let c = host(&[(1, S, true), (2, S, true)]);
        assert_eq!(
            span(&vec![a.clone(), c], 0.0).keep,
            BTreeSet::from([1, 2, 3, 4])
        );
        // d was restarted by reload at 3: its partial old interval and its
        // new start are left out, the rest stays.
        let mut d = host(&[(1, S, true), (2, S, true), (4, S, true)]);
        d.insert(
            3,
            Mark {
                host_row: Some(Some(Phase::Start)),
                flows: true,
                rate_scale: None,
                ..Mark::default()
            },
        );
        assert_eq!(span(&vec![a, d], 0.0).keep, BTreeSet::from([1, 2, 4]));
    }

    #[test]
    fn a_host_reload_began_is_named_as_reload_s_not_as_late() {
        let reloaded = |marks: &mut BTreeMap<i64, Mark>, ts: i64| {
            marks.get_mut(&ts).unwrap().reloaded = true;
        };
        let a = host(&[(1, S, true), (2, S, true), (3, S, true), (4, S, true)]);
        // b ran from 1 and reload restarted it at 3; c, new in the matrix,
        // reload started at 3.
        let mut b = host(&[(1, S, true), (3, S, true), (4, S, true)]);
        reloaded(&mut b, 3);
        let mut c = host(&[(3, S, true), (4, S, true)]);
        reloaded(&mut c, 3);
        let span = span(&vec![a.clone(), b, c.clone()], 0.0);
        assert_eq!(span.late, []);
        let began = |r: &Reloaded| (r.host, r.ts, r.restarted);
        assert_eq!(
            span.reloaded.iter().map(began).collect::<Vec<_>>(),
            [(1, 3, true), (2, 3, false)]
        );
        // Without the mark, c came up late.
        let mut unmarked = c;
        unmarked.get_mut(&3).unwrap().reloaded = false;
        assert_eq!(super::span(&vec![a, unmarked], 0.0).late, [(1, 2)]);
    }

    #[test]
    fn a_partial_interval_mid_run_is_counted_not_hidden() {
        // b's workers were too slow for the reporter at 2 (no host row): an
        // agent short of CPU, whose losses the summary must show.
        let a = host(&[(1, S, true), (2, S, true), (3, S, true)]);
        let b = host(&[(1, S, true), (2, S, false), (3, S, true)]);
        assert_eq!(span(&vec![a, b], 0.0).keep, BTreeSet::from([1, 2, 3]));
    }

    #[test]
    fn unmarked_reports_keep_every_interval_of_the_window_as_the_original_reads_them() {
        // The original's agents (and hand-made files) mark no phase: their
        // edges cannot be told, so nothing is cut: alpha's 1000 and 1002 and
        // beta's lone 1000 all count with --window 0.
        let alpha = host(&[(1000, None, true), (1002, None, true)]);
        let beta = host(&[(1000, None, true)]);
        let whole = span(&vec![alpha.clone(), beta.clone()], 0.0);
        assert_eq!(whole.keep, BTreeSet::from([1000, 1002]));
        assert_eq!(
            (whole.left_out, whole.marked, whole.no_steady),
            (0, false, false)
        );
        // A window keeps the newest seconds, from the newest interval.
        let newest = span(&vec![alpha, beta], 1.0);
        assert_eq!(newest.keep, BTreeSet::from([1002]));
        // One marked host makes it a run of ours: the steady span.
        let ours = host(&[(1000, S, true), (1002, S, true)]);
        assert!(span(&vec![ours], 0.0).marked);
    }

    #[test]
    fn the_window_counts_back_from_the_spans_end() {
        let marks: Vec<(i64, Option<Phase>, bool)> = (1..=10).map(|t| (t, S, true)).collect();
        let span = span(&vec![host(&marks)], 3.0);
        assert_eq!(span.keep, BTreeSet::from([8, 9, 10]));
        assert_eq!(span.left_out, 0);
    }

    /// A host whose intervals `(ts, scale)` are steady and whole.
    fn ramped(marks: &[(i64, Option<f64>)]) -> BTreeMap<i64, Mark> {
        marks
            .iter()
            .map(|&(ts, rate_scale)| {
                (
                    ts,
                    Mark {
                        host_row: Some(S),
                        flows: true,
                        rate_scale,
                        ..Mark::default()
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_step_keeps_only_its_whole_intervals_at_its_scale() {
        let a = ramped(&[
            (1, Some(1.0)),
            (2, Some(1.0)),
            (3, Some(1.5)),
            (4, Some(1.5)),
            (5, Some(1.5)),
        ]);
        // b had the order for 1.5 an interval late: its 3 ran at 1.0.
        let b = ramped(&[
            (1, Some(1.0)),
            (2, Some(1.0)),
            (3, Some(1.0)),
            (4, Some(1.5)),
            (5, Some(1.5)),
        ]);
        let timeline = vec![a, b];
        let whole = span(&timeline, 0.0);
        let step = |scale, after, until| Step {
            scale,
            after,
            until,
        };
        let first = step_span(whole.clone(), &timeline, &step(1.0, 0, 2));
        assert_eq!((first.keep, first.left_out), (BTreeSet::from([1, 2]), 0));
        let second = step_span(whole.clone(), &timeline, &step(1.5, 2, 5));
        assert_eq!((second.keep, second.left_out), (BTreeSet::from([4, 5]), 1));
        // The report's 4 decimals are the same scale.
        let third = step_span(whole.clone(), &timeline, &step(1.50001, 2, 4));
        assert_eq!(third.keep, BTreeSet::from([4]));
        // A host row without a scale (workers at two) is at no step.
        let mut c = ramped(&[(1, Some(1.0)), (2, None)]);
        c.insert(
            3,
            Mark {
                host_row: None,
                flows: true,
                ..Mark::default()
            },
        );
        let timeline = vec![ramped(&[(1, Some(1.0)), (2, Some(1.0)), (3, Some(1.0))]), c];
        let kept = step_span(span(&timeline, 0.0), &timeline, &step(1.0, 0, 3));
        assert_eq!(kept.keep, BTreeSet::from([1]));
        // Nothing steady: no step holds anything.
        let edge = vec![host(&[(1, Some(Phase::Start), true)])];
        assert!(
            step_span(span(&edge, 0.0), &edge, &step(1.0, 0, 1))
                .keep
                .is_empty()
        );
    }

    #[test]
    fn nothing_steady_keeps_the_window_as_it_is() {
        let a = host(&[(1, Some(Phase::Start), true)]);
        let span = span(&vec![a], 60.0);
        assert!(span.no_steady);
        assert_eq!(span.keep, BTreeSet::from([1]));
    }
}
