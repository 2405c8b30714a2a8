//! Duplicate and out-of-order detection on per-socket sequence numbers.
//!
//! Every client socket numbers its requests 1, 2, 3, ...; replies echo the
//! number. A window of the last [`WINDOW`] numbers remembers which arrived: a
//! number seen twice is a duplicate, one arriving after a higher one is out of
//! order. Numbers older than the window cannot be told apart and count as out
//! of order (a fabric that reorders by more than 1024 packets has bigger news).

/// Sequence numbers remembered behind the highest one seen.
pub const WINDOW: u64 = 1024;
const WORDS: usize = (WINDOW / 64) as usize;

#[derive(Debug, Clone, Default)]
pub(crate) struct SeqWindow {
    highest: u64,
    /// Bit (s % WINDOW) is set when s, within WINDOW of `highest`, has arrived.
    seen: [u64; WORDS],
}

/// What one arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    InOrder,
    OutOfOrder,
    Duplicate,
}

impl SeqWindow {
    /// The highest sequence number seen (0 before the first).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// Starts the window afresh when `seq` is 1 and the window is past its
    /// first [`WINDOW`] numbers: a new socket on a reused port numbers from 1
    /// again. (A 1 arriving twice early on is a duplicate, not a restart.)
    #[inline]
    pub(crate) fn restart_if_renumbered(&mut self, seq: u64) {
        if seq == 1 && self.highest > WINDOW {
            *self = SeqWindow::default();
        }
    }

    pub(crate) fn observe(&mut self, seq: u64) -> Arrival {
        // The next number, as nearly every arrival is: nothing skipped to
        // clear. (Its bit may still hold seq - WINDOW's: `set` overwrites it.)
        if self.highest.checked_add(1) == Some(seq) {
            self.highest = seq;
            self.set(seq);
            return Arrival::InOrder;
        }
        if seq > self.highest {
            // Clear the bits of the numbers skipped over: they leave the window.
            let gap = seq - self.highest;
            if gap >= WINDOW {
                self.seen = [0; WORDS];
            } else {
                for s in self.highest + 1..seq {
                    self.clear(s);
                }
            }
            self.highest = seq;
            self.set(seq);
            return Arrival::InOrder;
        }
        if self.highest - seq >= WINDOW {
            return Arrival::OutOfOrder;
        }
        if self.is_set(seq) {
            Arrival::Duplicate
        } else {
            self.set(seq);
            Arrival::OutOfOrder
        }
    }

    /// `n` numbers from `first` on, one after another, when `first` is
    /// higher than any seen: all in order, as `observe` of each would say.
    /// Returns false, having observed nothing, otherwise.
    pub(crate) fn observe_run(&mut self, first: u64, n: u64) -> bool {
        if first <= self.highest || n == 0 {
            return false;
        }
        // The last is first + n - 1: first + n may not fit in a u64.
        let Some(last) = first.checked_add(n - 1) else {
            return false;
        };
        self.observe(first);
        for seq in first + 1..=last {
            self.highest = seq;
            self.set(seq);
        }
        true
    }

    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    fn set(&mut self, seq: u64) {
        let (w, b) = Self::bit(seq);
        self.seen[w] |= b;
    }

    fn clear(&mut self, seq: u64) {
        let (w, b) = Self::bit(seq);
        self.seen[w] &= !b;
    }

    fn is_set(&self, seq: u64) -> bool {
        let (w, b) = Self::bit(seq);
        self.seen[w] & b != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Arrival::*;

    #[test]
    fn a_1_restarts_the_window_only_past_its_first_numbers() {
        let mut w = SeqWindow::default();
        for seq in 1..=WINDOW {
            w.observe(seq);
        }
        // Early on, a 1 again is a duplicate.
        w.restart_if_renumbered(1);
        assert_eq!(w.observe(1), Duplicate);
        w.observe(WINDOW + 1);
        // Another number than 1 never restarts it.
        w.restart_if_renumbered(2);
        assert_eq!(w.highest(), WINDOW + 1);
        w.restart_if_renumbered(1);
        assert_eq!((w.highest(), w.observe(1)), (0, InOrder));
    }

    #[test]
    fn in_order_duplicates_and_reordering() {
        let mut w = SeqWindow::default();
        let got: Vec<Arrival> = [1, 2, 4, 3, 3, 5, 2, 5]
            .iter()
            .map(|&s| w.observe(s))
            .collect();
        assert_eq!(
            got,
            [
                InOrder, InOrder, InOrder, OutOfOrder, Duplicate, InOrder, Duplicate, Duplicate
            ]
        );
    }

    #[test]
    fn losses_are_neither() {
        let mut w = SeqWindow::default();
        let got: Vec<Arrival> = [1, 5, 9, 2000].iter().map(|&s| w.observe(s)).collect();
        assert_eq!(got, [InOrder; 4]);
        // A number that fell out of the window is late, not a duplicate.
        assert_eq!(w.observe(9), OutOfOrder);
        // One skipped over but still in the window arrives late.
        assert_eq!(w.observe(1999), OutOfOrder);
        assert_eq!(w.observe(1999), Duplicate);
    }

    #[test]
    fn a_run_is_as_many_arrivals_in_order() {
        let (mut one_by_one, mut run) = (SeqWindow::default(), SeqWindow::default());
        for w in [&mut one_by_one, &mut run] {
            for s in [1, 2, 3] {
                w.observe(s);
            }
        }
        // 4 and 5 lost, 6..=1500 arrive.
        for s in 6..=1500 {
            assert_eq!(one_by_one.observe(s), InOrder);
        }
        assert!(run.observe_run(6, 1495));
        assert_eq!(run.highest(), 1500);
        // Not a run: its first was seen, or is below the highest.
        assert!(!run.observe_run(1500, 2));
        assert!(!run.observe_run(1000, 2));
        assert_eq!(run.highest(), 1500);
        for s in [5, 476, 477, 1000, 1500, 1501] {
            assert_eq!(one_by_one.observe(s), run.observe(s), "seq {s}");
        }
        // A run ending on the highest number there is; one past it is none.
        let mut top = SeqWindow::default();
        assert!(top.observe_run(u64::MAX - 63, 64));
        assert_eq!(top.highest(), u64::MAX);
        assert!(!SeqWindow::default().observe_run(u64::MAX - 62, 64));
        // After it, 0 is not the next number: an old one, out of order.
        assert_eq!(top.observe(0), OutOfOrder);
    }

    #[test]
    fn the_window_slides_without_stale_bits() {
        let mut w = SeqWindow::default();
        for s in 1..=3000 {
            assert_eq!(w.observe(s), InOrder);
        }
        // 3000 - 1024 + 1 = 1977 is the oldest remembered: seen, so a duplicate.
        assert_eq!(w.observe(1977), Duplicate);
    }
}
