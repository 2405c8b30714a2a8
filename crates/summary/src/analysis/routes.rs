//! The routes between hosts, by their length: the fewest and the most
//! routers the datagrams from one host to another crossed, interval by
//! interval (the `hops` and `hops_max` of the receiving host's rows: its tx
//! rows for the replies, its rx rows for the requests, both from the peer),
//! and where that changed. A route that changes length mid-run is a route
//! change: a link or router on the way went down or came back, or a route
//! was moved. Equal-cost paths of one length never read as one.

use serde::Serialize;

/// The most ranges a way keeps ([`Route::ranges`]): a route that flaps
/// keeps its first ones, and counts the rest ([`Route::changes`]).
const MAX_RANGES: usize = 8;

/// The fewest and the most routers crossed in an interval (equal where
/// every datagram came one way, or all ways were one length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Hops {
    pub fewest: u32,
    pub most: u32,
}

impl Hops {
    /// Both ranges at once: the interval's datagrams came by either.
    fn widen(self, other: Hops) -> Hops {
        Hops {
            fewest: self.fewest.min(other.fewest),
            most: self.most.max(other.most),
        }
    }
}

/// One way's hop counts over a span, read in its receiver's report order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Route {
    /// The interval being read, and its range so far (its tx and rx rows
    /// both count).
    open: Option<(i64, Hops)>,
    /// The range of the interval read before it.
    last: Option<Hops>,
    /// The ranges the way went through, in order, each changed from the
    /// one before: one for a route that held.
    pub ranges: Vec<Hops>,
    /// The first interval whose range was not the one before it.
    pub changed_at: Option<i64>,
    /// Times the range changed from one interval to the next.
    pub changes: u32,
}

impl Route {
    /// A row of interval `ts` whose datagrams crossed `hops`. Rows come in
    /// order of their interval (one host's report); an older one is not
    /// read (a report cut and started over).
    pub fn saw(&mut self, ts: i64, hops: Hops) {
        match self.open {
            Some((open, range)) if open == ts => self.open = Some((ts, range.widen(hops))),
            Some((open, _)) if ts < open => {}
            _ => {
                self.close();
                self.open = Some((ts, hops));
            }
        }
    }

    /// Ends the interval being read: its range is the way's next, if it
    /// changed.
    pub fn close(&mut self) {
        let Some((ts, range)) = self.open.take() else {
            return;
        };
        match self.last.replace(range) {
            None => self.ranges.push(range),
            Some(last) if last == range => {}
            Some(_) => {
                self.changes += 1;
                self.changed_at.get_or_insert(ts);
                if self.ranges.len() < MAX_RANGES {
                    self.ranges.push(range);
                }
            }
        }
    }

    /// Whether the way's length changed over the span.
    pub fn changed(&self) -> bool {
        self.changes > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hops(fewest: u32, most: u32) -> Hops {
        Hops { fewest, most }
    }

    fn route(rows: &[(i64, u32, u32)]) -> Route {
        let mut r = Route::default();
        for &(ts, a, b) in rows {
            r.saw(ts, hops(a, b));
        }
        r.close();
        r
    }

    #[test]
    fn a_route_that_holds_its_length_is_no_change() {
        // Two rows an interval (tx and rx), equal-cost paths of one length.
        let r = route(&[(10, 2, 2), (10, 2, 2), (15, 2, 2), (20, 2, 2)]);
        assert!(!r.changed());
        assert_eq!(r.ranges, [hops(2, 2)]);
        // Streams over paths of two lengths, every interval: no change.
        let r = route(&[(10, 2, 3), (15, 3, 3), (15, 2, 2), (20, 2, 3)]);
        assert!(!r.changed(), "{r:?}");
    }

    #[test]
    fn a_route_that_grows_is_a_change_at_its_first_interval_that_differs() {
        // The link went down inside interval 20: it read both lengths.
        let r = route(&[(10, 2, 2), (15, 2, 2), (20, 2, 3), (25, 3, 3), (30, 3, 3)]);
        assert!(r.changed());
        assert_eq!(r.changed_at, Some(20));
        assert_eq!(r.ranges, [hops(2, 2), hops(2, 3), hops(3, 3)]);
        assert_eq!(r.changes, 2);
    }

    #[test]
    fn a_route_that_flaps_keeps_its_first_ranges_and_counts_every_change() {
        let mut rows = Vec::new();
        for i in 0..40 {
            let n = 2 + (i % 2) as u32;
            rows.push((i * 5, n, n));
        }
        let r = route(&rows);
        assert_eq!(r.changes, 39);
        assert_eq!(r.ranges.len(), MAX_RANGES);
        assert_eq!(r.changed_at, Some(5));
    }

    #[test]
    fn an_older_row_is_not_read() {
        let r = route(&[(10, 2, 2), (15, 2, 2), (5, 7, 7), (20, 2, 2)]);
        assert!(!r.changed());
    }
}
