//! What counts as what: the rules a worker counts every datagram by, as
//! small pure functions on the counters of one interval.
//!
//! - A datagram that is not a whole MXO1 header of the kind expected (or,
//!   for a request, not from a host of the matrix, or not from a known
//!   source) is a stray, and counted as nothing else.
//! - A sequence number seen before is a duplicate: counted as such alone
//!   (not a request, not answered, not a reply, no RTT). One lower than the
//!   highest seen is out of order: counted so, and then as usual.
//! - A request counts in the interval its tag names, a reply in the
//!   interval its `t_send` falls in; when that interval was reported
//!   already, in the interval in progress as late instead (not as a request
//!   or reply there: the reported row counted it as lost).
//! - A request the source's budget refuses is over plan: counted, never
//!   answered. A reply is counted as sent when queued (unless late, or
//!   waiting on the disk), and taken back if the kernel refuses it.
//! - A flow's request is sent when the kernel takes it; one it refuses is a
//!   send error, and never sent.
//!
//! Everything here runs per datagram or per run of them: `#[inline]`, no
//! allocation.

use super::super::counters::{RxCounts, TxCounts};
use super::super::sequence::Arrival;
use super::super::slots::{self, RxSlot};
use super::super::udp::Sent;
use super::super::wire::{HEADER_LEN, Header, KIND_REPLY, KIND_REQUEST};

/// RTTs above this are not timing anything real (a garbled t_send).
pub(crate) const MAX_RTT_NS: u64 = 100_000_000_000;

/// What one flow socket counted in one interval (its RTTs go to its pair's
/// histograms: [`PairRtts`](super::super::pair_rtt::PairRtts)).
#[derive(Default)]
pub(crate) struct TxSlot {
    pub counts: TxCounts,
    pub rtt_max_ns: u64,
    pub rtt_min_ns: Option<u64>,
}

impl TxSlot {
    /// Times `n` replies that took `rtt` ns each (a GRO run of replies to
    /// one send batch shares one send time, so one RTT). `last` is the flow
    /// socket's previous RTT, kept across intervals: the jitter is the mean
    /// absolute difference between successive round trips (RFC 3550's
    /// measure, unsmoothed), and within a run the differences are 0.
    #[inline]
    pub fn time(&mut self, last: &mut Option<u64>, rtt: u64, n: u64) {
        let c = &mut self.counts;
        c.rtt_sum_ns += rtt * n;
        c.rtt_count += n;
        self.rtt_max_ns = self.rtt_max_ns.max(rtt);
        self.rtt_min_ns = Some(self.rtt_min_ns.map_or(rtt, |m| m.min(rtt)));
        match last.replace(rtt) {
            Some(before) => {
                c.jitter_sum_ns += rtt.abs_diff(before);
                c.jitter_count += n;
            }
            None => c.jitter_count += n - 1,
        }
    }
}

/// The round trip of a reply that came back at `now_ns` to a request sent
/// at `t_send`: none when the send time is in the future or implausibly far
/// back (a garbled `t_send` times nothing).
#[inline]
pub fn rtt_ns(now_ns: u64, t_send: u64) -> Option<u64> {
    now_ns.checked_sub(t_send).filter(|&r| r < MAX_RTT_NS)
}

/// The header of a datagram the responder counts as a request: a whole
/// request header from a host of the matrix (an index below `hosts`).
#[inline]
pub(crate) fn request_header(head: &[u8], len: usize, hosts: usize) -> Option<Header> {
    Header::decode(head)
        .filter(|h| h.kind == KIND_REQUEST && len >= HEADER_LEN && usize::from(h.src_index) < hosts)
}

/// The header of a datagram a flow counts as a reply: a whole reply header.
#[inline]
pub(crate) fn reply_header(head: &[u8], len: usize) -> Option<Header> {
    Header::decode(head).filter(|h| h.kind == KIND_REPLY && len >= HEADER_LEN)
}

/// Counts where an arrival falls in its sender's sequence: a duplicate in
/// `dup`, out of order in `ooo`. Whether it counts on: a duplicate does not.
#[inline]
pub(crate) fn count_order(arrival: Arrival, dup: &mut u64, ooo: &mut u64) -> bool {
    match arrival {
        Arrival::Duplicate => {
            *dup += 1;
            false
        }
        Arrival::OutOfOrder => {
            *ooo += 1;
            true
        }
        Arrival::InOrder => true,
    }
}

/// Where a request tagged `tag` is counted, with interval `current` in
/// progress and `pending` waiting out its hold: its interval's rx slot, or,
/// when that interval was already reported, the current one's with `true`
/// (counted as late there).
#[inline]
pub(crate) fn request_slot(tag: Option<u8>, current: u64, pending: Option<u64>) -> (usize, bool) {
    match slots::rx_slot_of(tag, current, pending) {
        RxSlot::Counted(slot) => (slot, false),
        RxSlot::Late => (slots::rx_slot(current), true),
    }
}

/// `n` requests of one peer that arrived at `arrived_ns` (the kernel's
/// stamp; 0 for none), `bytes` in all: counted as requests, or as late
/// when their interval was reported already.
#[inline]
pub(crate) fn count_requests(
    counts: &mut RxCounts,
    late: bool,
    n: u64,
    bytes: u64,
    arrived_ns: u64,
) {
    if late {
        counts.late += n;
    } else {
        counts.requests += n;
        counts.request_bytes += bytes;
        counts.arrivals.saw(arrived_ns);
    }
}

/// Of `n` requests counted, `answered` get a reply of `reply_size` bytes
/// and the rest are over plan. The replies count as sent now when
/// `counted_now` (taken back by the flush if the kernel refuses them); not
/// for late requests (the reported row counted the replies to the requests
/// it counted) nor for replies that wait on the disk (counted when sent).
#[inline]
pub(crate) fn count_answers(
    counts: &mut RxCounts,
    n: u64,
    answered: u64,
    reply_size: usize,
    counted_now: bool,
) {
    counts.over_plan += n - answered;
    if counted_now {
        counts.replies += answered;
        counts.reply_bytes += answered * reply_size as u64;
    }
}

/// Whether interval `n` still counts replies, with interval `current` in
/// progress and `pending` waiting out its hold: it is not reported yet.
#[inline]
pub(crate) fn still_open(n: u64, current: u64, pending: Option<u64>) -> bool {
    n >= current || pending == Some(n)
}

/// The number of the interval whose rx slot is `slot`, with interval
/// `current` in progress: the request was counted in the previous one (while
/// it waits out its hold), this one, or the next ([`slots::rx_slot_of`]).
pub(crate) fn counted_interval(slot: usize, current: u64) -> u64 {
    [current, current + 1, current.saturating_sub(1)]
        .into_iter()
        .find(|&n| slots::rx_slot(n) == slot)
        .unwrap_or(current)
}

/// The tx slot a reply is counted in, by the send time its request carries.
#[derive(Clone, Copy)]
pub(crate) struct ReplyIntervals {
    /// The slot of the interval in progress, and when it began (monotonic ns).
    pub current: usize,
    pub began_ns: u64,
    /// The slot of the interval waiting out its hold, and when it began.
    pub previous: Option<(usize, u64)>,
}

impl ReplyIntervals {
    /// The interval a reply's request was sent in: this one, the one
    /// waiting to be reported, or one already reported (late: the current
    /// slot, with `true`).
    #[inline]
    pub fn of(&self, t_send: u64) -> (usize, bool) {
        if t_send >= self.began_ns {
            (self.current, false)
        } else {
            match self.previous {
                Some((slot, began)) if t_send >= began => (slot, false),
                _ => (self.current, true),
            }
        }
    }
}

/// `n` replies that came back, `bytes` in all: counted as replies, or as
/// late when their request's interval was reported already.
#[inline]
pub(crate) fn count_replies(counts: &mut TxCounts, late: bool, n: u64, bytes: u64) {
    if late {
        counts.late += n;
    } else {
        counts.replies += n;
        counts.reply_bytes += bytes;
    }
}

/// What one send of `tx_size`-byte requests counts: those the kernel took
/// as sent, those it refused as send errors (never as sent).
#[inline]
pub(crate) fn count_sent(counts: &mut TxCounts, outcome: &Sent, tx_size: u32) {
    counts.send_errors += (outcome.tried - outcome.sent) as u64;
    counts.sent += outcome.sent as u64;
    counts.sent_bytes += outcome.sent as u64 * u64::from(tx_size);
}

/// The non-empty per-peer counts of one rx slot, which is left empty.
pub(crate) fn take_rx(slot: &mut [RxCounts]) -> Vec<(u32, RxCounts)> {
    slot.iter_mut()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(|(peer, c)| (peer as u32, std::mem::take(c)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::super::sequence::SeqWindow;
    use super::super::super::wire::KIND_REPLY;
    use super::*;

    #[test]
    fn jitter_is_the_mean_difference_of_successive_round_trips() {
        let (mut slot, mut last) = (TxSlot::default(), None);
        // 100, then a run of 3 at 130 (one send time), then 90 us.
        slot.time(&mut last, 100_000, 1);
        slot.time(&mut last, 130_000, 3);
        slot.time(&mut last, 90_000, 1);
        let c = &slot.counts;
        assert_eq!((c.rtt_count, c.rtt_sum_ns), (5, 580_000));
        // Differences: 30, 0, 0, 40 us over the 4 replies that had one before.
        assert_eq!((c.jitter_sum_ns, c.jitter_count), (70_000, 4));
        assert_eq!((slot.rtt_min_ns, slot.rtt_max_ns), (Some(90_000), 130_000));
        // The next interval's first reply is measured against the last one.
        let mut next = TxSlot::default();
        next.time(&mut last, 95_000, 1);
        assert_eq!(
            (next.counts.jitter_sum_ns, next.counts.jitter_count),
            (5_000, 1)
        );
    }

    fn header(kind: u8, src: u16) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        let mut header = Header::request(src, 64, 64, 1, 1);
        header.kind = kind;
        header.encode(&mut h);
        h
    }

    #[test]
    fn a_request_is_a_whole_request_header_from_a_host_of_the_matrix() {
        let good = header(KIND_REQUEST, 2);
        assert_eq!(request_header(&good, 64, 3).map(|h| h.src_index), Some(2));
        // Any other kind, a datagram shorter than a header, a host index
        // past the matrix, or no MXO1 magic: a stray.
        assert!(request_header(&header(KIND_REPLY, 2), 64, 3).is_none());
        assert!(request_header(&good, HEADER_LEN - 1, 3).is_none());
        assert!(request_header(&good, 64, 2).is_none());
        assert!(request_header(&[0u8; HEADER_LEN], 64, 3).is_none());
    }

    #[test]
    fn a_reply_is_a_whole_reply_header() {
        let good = header(KIND_REPLY, 9);
        assert!(reply_header(&good, HEADER_LEN).is_some());
        assert!(reply_header(&header(KIND_REQUEST, 0), 64).is_none());
        assert!(reply_header(&good, HEADER_LEN - 1).is_none());
        assert!(reply_header(&good[..HEADER_LEN - 1], 64).is_none());
    }

    #[test]
    fn a_duplicate_counts_as_a_duplicate_alone_and_out_of_order_counts_on() {
        let mut window = SeqWindow::default();
        let (mut dup, mut ooo) = (0, 0);
        let on: Vec<bool> = [1, 2, 4, 3, 3, 5]
            .into_iter()
            .map(|seq| count_order(window.observe(seq), &mut dup, &mut ooo))
            .collect();
        assert_eq!(on, [true, true, true, true, false, true]);
        assert_eq!((dup, ooo), (1, 1));
    }

    #[test]
    fn a_request_counts_in_the_interval_it_names_or_late_in_the_one_in_progress() {
        let tag = |n: u64| {
            Header::request(0, 64, 64, 1, 1)
                .in_interval(n)
                .interval_tag()
        };
        let current = 10;
        assert_eq!(
            request_slot(tag(10), current, Some(9)),
            (slots::rx_slot(10), false)
        );
        // A peer whose clock runs ahead: the next interval's row.
        assert_eq!(
            request_slot(tag(11), current, None),
            (slots::rx_slot(11), false)
        );
        // The previous interval, while it waits out its hold: its own row.
        assert_eq!(
            request_slot(tag(9), current, Some(9)),
            (slots::rx_slot(9), false)
        );
        // Reported already: late, in the row of the interval in progress.
        assert_eq!(
            request_slot(tag(9), current, None),
            (slots::rx_slot(10), true)
        );
        // Untagged (the original's requests): where they arrive.
        assert_eq!(
            request_slot(None, current, None),
            (slots::rx_slot(10), false)
        );
    }

    #[test]
    fn requests_count_as_requests_or_as_late_never_both() {
        let mut c = RxCounts::default();
        count_requests(&mut c, false, 3, 300, 0);
        count_requests(&mut c, true, 2, 200, 0);
        assert_eq!((c.requests, c.request_bytes, c.late), (3, 300, 2));
    }

    #[test]
    fn requests_the_budget_refuses_are_over_plan_and_only_answered_ones_count_replies() {
        let mut c = RxCounts::default();
        count_answers(&mut c, 5, 3, 100, true);
        assert_eq!((c.over_plan, c.replies, c.reply_bytes), (2, 3, 300));
        // Late, or waiting on the disk: over plan still counted, the replies
        // not (yet).
        let mut later = RxCounts::default();
        count_answers(&mut later, 4, 1, 100, false);
        assert_eq!(
            (later.over_plan, later.replies, later.reply_bytes),
            (3, 0, 0)
        );
    }

    #[test]
    fn a_reply_from_the_disk_counts_only_while_its_interval_is_open() {
        // Interval 10 in progress, 9 waiting out its hold.
        assert!(still_open(10, 10, Some(9)));
        assert!(still_open(11, 10, Some(9)));
        assert!(still_open(9, 10, Some(9)));
        // 9 reported already, or one before the pending one.
        assert!(!still_open(9, 10, None));
        assert!(!still_open(8, 10, Some(9)));
    }

    #[test]
    fn an_rx_row_names_the_interval_it_counts() {
        for current in [0u64, 1, 10, 1_001] {
            for n in [current.saturating_sub(1), current, current + 1] {
                assert_eq!(counted_interval(slots::rx_slot(n), current), n);
            }
        }
    }

    #[test]
    fn a_reply_counts_in_the_interval_its_request_was_sent_in_or_late() {
        let intervals = ReplyIntervals {
            current: 1,
            began_ns: 2_000,
            previous: Some((0, 1_000)),
        };
        assert_eq!(intervals.of(2_000), (1, false));
        assert_eq!(intervals.of(1_999), (0, false));
        assert_eq!(intervals.of(1_000), (0, false));
        // Sent in an interval reported already.
        assert_eq!(intervals.of(999), (1, true));
        let none_waiting = ReplyIntervals {
            previous: None,
            ..intervals
        };
        assert_eq!(none_waiting.of(1_999), (1, true));
    }

    #[test]
    fn replies_count_as_replies_or_as_late_never_both() {
        let mut c = TxCounts::default();
        count_replies(&mut c, false, 64, 64 * 100);
        count_replies(&mut c, true, 3, 300);
        assert_eq!((c.replies, c.reply_bytes, c.late), (64, 6_400, 3));
    }

    #[test]
    fn requests_the_kernel_refused_are_send_errors_never_sent() {
        let mut c = TxCounts::default();
        let outcome = Sent {
            tried: 5,
            sent: 3,
            error: None,
        };
        count_sent(&mut c, &outcome, 100);
        assert_eq!((c.sent, c.sent_bytes, c.send_errors), (3, 300, 2));
    }

    #[test]
    fn an_rtt_is_timed_only_from_a_plausible_send_time_in_the_past() {
        assert_eq!(rtt_ns(1_000, 400), Some(600));
        assert_eq!(rtt_ns(1_000, 1_000), Some(0));
        assert_eq!(rtt_ns(1_000, 1_001), None, "sent in the future");
        assert_eq!(rtt_ns(MAX_RTT_NS + 5, 5), None, "implausibly far back");
        assert_eq!(rtt_ns(MAX_RTT_NS + 5, 6), Some(MAX_RTT_NS - 1));
    }

    #[test]
    fn an_rx_slot_is_taken_whole_and_names_only_peers_with_counts() {
        let mut row = vec![RxCounts::default(); 3];
        row[2].requests = 4;
        row[0].over_plan = 1;
        let taken = take_rx(&mut row);
        assert_eq!(taken.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(taken[1].1.requests, 4);
        assert!(row.iter().all(RxCounts::is_empty));
    }
}
