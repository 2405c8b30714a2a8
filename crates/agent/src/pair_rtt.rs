//! The RTT histograms of a worker's flows, one set per pair they belong to.
//!
//! A pair's streams are separate sockets, with their own sequence numbers and
//! counts, but one row of the report: the reporter merges their RTTs per
//! (peer, layer) anyway. So the streams of a pair in one worker record into
//! one histogram per tx slot, not one each. A histogram with 1% buckets from
//! 1 ns to 100 s holds ~16 KB of counts: 1,000 streams to 4 peers kept 32 MB
//! of them, where 4 pairs need 128 KB.

use rustc_hash::FxHashMap;

use super::slots::TX_SLOTS;
use mx_report::rtt::{Compact, FlowRtt};

/// A pair: a peer, and the layer its flows belong to (`None`: a fixed matrix).
pub type Pair = (u32, Option<u32>);

/// One pair's histograms, an interval's worth per tx slot.
#[derive(Default)]
struct Histograms {
    /// Flow sockets (live or draining) recording into them; 0: free, ready
    /// for the next pair that needs a set.
    flows: usize,
    slots: [FlowRtt; TX_SLOTS],
}

/// The sets of a worker, found by a flow through the index [`join`](Self::join)
/// gave it (the per-reply path does no lookup).
#[derive(Default)]
pub(crate) struct PairRtts {
    sets: Vec<Histograms>,
    by_pair: FxHashMap<Pair, usize>,
}

impl PairRtts {
    /// A flow of `pair` opens: the index of the set it records into, shared
    /// with the pair's other flows in this worker.
    pub fn join(&mut self, pair: Pair) -> usize {
        let at = match self.by_pair.get(&pair) {
            Some(&at) => at,
            None => {
                let at = match self.sets.iter().position(|s| s.flows == 0) {
                    Some(free) => free,
                    None => {
                        self.sets.push(Histograms::default());
                        self.sets.len() - 1
                    }
                };
                self.by_pair.insert(pair, at);
                at
            }
        };
        self.sets[at].flows += 1;
        at
    }

    /// A flow of `pair`, recording into set `at`, closes: the set is freed
    /// (emptied, for reuse) with the pair's last flow.
    pub fn leave(&mut self, pair: Pair, at: usize) {
        let set = &mut self.sets[at];
        set.flows -= 1;
        if set.flows == 0 {
            for slot in &mut set.slots {
                slot.take();
            }
            self.by_pair.remove(&pair);
        }
    }

    /// The histogram of set `at` for tx slot `tx`.
    #[inline]
    pub fn slot(&mut self, at: usize, tx: usize) -> &mut FlowRtt {
        &mut self.sets[at].slots[tx]
    }

    /// What set `at` recorded in tx slot `tx`, left empty: the first of the
    /// pair's flows to report an interval carries the pair's RTTs, the
    /// others nothing (the reporter merges them per pair).
    pub fn take(&mut self, at: usize, tx: usize) -> Compact {
        self.sets[at].slots[tx].take()
    }

    /// Empties every set (the run starts: what came before is not timed).
    pub fn clear(&mut self) {
        for set in &mut self.sets {
            for slot in &mut set.slots {
                slot.take();
            }
        }
    }

    /// Sets in use.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.by_pair.len()
    }
}

/// RTTs waiting to be recorded: a run of equal ones, recorded once.
///
/// The replies of one read share one arrival time, and the requests of one
/// send batch one send time: a GRO message of replies is typically up to 64
/// equal RTTs in a row. A histogram record was ~11 ns of the ~110 ns of user
/// time an agent spent per round trip (perf, 2 Mpps per flow); a run costs
/// one. Flush before the histograms are read.
#[derive(Debug, Default)]
pub(crate) struct RttRun {
    set: usize,
    tx: usize,
    rtt_ns: u64,
    count: u64,
}

impl RttRun {
    /// One RTT of `rtt_ns` for set `set`, tx slot `tx`.
    #[cfg(test)]
    pub fn record(&mut self, rtts: &mut PairRtts, set: usize, tx: usize, rtt_ns: u64) {
        self.record_n(rtts, set, tx, rtt_ns, 1);
    }

    /// `count` RTTs of `rtt_ns` each.
    #[inline]
    pub fn record_n(
        &mut self,
        rtts: &mut PairRtts,
        set: usize,
        tx: usize,
        rtt_ns: u64,
        count: u64,
    ) {
        if self.count > 0 && self.rtt_ns == rtt_ns && self.tx == tx && self.set == set {
            self.count += count;
            return;
        }
        self.flush(rtts);
        *self = RttRun {
            set,
            tx,
            rtt_ns,
            count,
        };
    }

    /// Records the run into its histogram; the run is left empty.
    pub fn flush(&mut self, rtts: &mut PairRtts) {
        if self.count > 0 {
            rtts.slot(self.set, self.tx)
                .record_n(self.rtt_ns, self.count);
            self.count = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streams_of_a_pair_share_a_set_and_the_pair_reports_its_rtts_once() {
        let mut rtts = PairRtts::default();
        let a = rtts.join((1, None));
        let b = rtts.join((1, None));
        let other = rtts.join((2, None));
        assert_eq!(a, b);
        assert_ne!(a, other);
        assert_eq!(rtts.in_use(), 2);
        rtts.slot(a, 0).record(10_000);
        rtts.slot(b, 0).record(20_000);
        rtts.slot(a, 1).record(30_000);
        // Both streams' RTTs, once: the second flow to report finds it taken.
        let first = rtts.take(a, 0);
        assert_eq!(first.iter().map(|(_, n)| n).sum::<u64>(), 2);
        assert!(rtts.take(b, 0).is_empty());
        // The other slot (the next interval) is kept apart.
        assert_eq!(rtts.take(a, 1).len(), 1);
        assert!(rtts.take(other, 0).is_empty());
    }

    #[test]
    fn a_pair_in_another_layer_has_its_own_set_and_a_freed_set_is_reused_empty() {
        let mut rtts = PairRtts::default();
        let old = rtts.join((1, Some(0)));
        let new = rtts.join((1, Some(1)));
        assert_ne!(old, new);
        rtts.slot(old, 0).record(10_000);
        rtts.leave((1, Some(0)), old);
        assert_eq!(rtts.in_use(), 1);
        let next = rtts.join((3, Some(2)));
        assert_eq!(next, old, "the freed set is reused");
        assert!(rtts.take(next, 0).is_empty(), "and starts empty");
        // A set stays while one of its flows does.
        let again = rtts.join((1, Some(1)));
        assert_eq!(again, new);
        rtts.leave((1, Some(1)), new);
        assert_eq!(rtts.in_use(), 2);
        rtts.leave((1, Some(1)), new);
        assert_eq!(rtts.in_use(), 1);
    }

    #[test]
    fn a_run_of_equal_rtts_is_recorded_once_with_its_count_and_each_change_starts_a_run() {
        let mut rtts = PairRtts::default();
        let a = rtts.join((1, None));
        let b = rtts.join((2, None));
        let mut run = RttRun::default();
        for rtt in [50_000, 50_000, 50_000, 70_000, 50_000] {
            run.record(&mut rtts, a, 0, rtt);
        }
        run.record(&mut rtts, a, 1, 50_000);
        run.record(&mut rtts, b, 1, 50_000);
        // The last run waits for its flush; a second flush adds nothing.
        run.flush(&mut rtts);
        run.flush(&mut rtts);
        let counts = |c: Compact| c.iter().map(|&(_, n)| n).collect::<Vec<_>>();
        assert_eq!(counts(rtts.take(a, 0)), vec![4, 1]);
        assert_eq!(counts(rtts.take(a, 1)), vec![1]);
        assert_eq!(counts(rtts.take(b, 1)), vec![1]);
        assert!(rtts.take(b, 0).is_empty());
    }
}
