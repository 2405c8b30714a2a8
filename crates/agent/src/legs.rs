//! Both legs of one flow, from the sender's own counts.
//!
//! Every reply of ours carries the responder's running count of the flow's
//! requests that reached it, up to the one it answers ([`wire::COUNTED`]),
//! and of those it left unanswered on purpose (over the sender's budget, a
//! full disk queue). So a reply to request `s` carrying count `c` says: of
//! the requests up to `s`, `s - c` never arrived. Of those that did and
//! were not refused, the ones whose replies never came back were lost on
//! the way back. A refusal is the responder's own doing, never the
//! network's: it counts on no leg. Requests past the newest
//! reply's number are in flight, or lost with nothing to tell yet: a later
//! reply settles them. The sender thus splits its loss into the forward and
//! the return leg from its counters alone, never dividing one host's count
//! by another's (taken at another instant), as STAMP (RFC 8762) and TWAMP
//! (RFC 5357) split near-end and far-end loss with the reflector's own
//! sequence number.
//!
//! The reckoning starts at the first counted reply: what came before it is
//! not told (the responder may have come up after the sender). It starts
//! over, keeping what it has settled, when a count goes back (the responder
//! restarted, or forgot the flow after a long silence). A flow whose replies
//! carry no count (the original's agent) has no reckoning: its legs are
//! left to the two hosts' reports.
//!
//! A request that overtakes an earlier one on the way out, or a reply that
//! overtakes an earlier one on the way back, moves a packet between the
//! legs until the next reply in order puts it back. What is reported never
//! goes down (a counter), so such a moment can stand in the report as one
//! packet too many, and no more than the deepest such overtaking.
//!
//! [`wire::COUNTED`]: super::wire::COUNTED

use super::wire::{REFUSED_MASK, Tally};

/// What a flow settled since the last report: the report's own figures
/// of a stream's legs.
pub use mx_report::streams::StreamLegs as LegCounts;

/// One flow socket's reckoning of its two legs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Legs {
    /// The newest counted reply: its request's number, how many requests
    /// up to it never arrived as its count says (`seq - count`, a
    /// difference taken mod 2^32, as the count travels), and the refusals
    /// it carried (mod 128).
    newest: Option<(u64, i64, u8)>,
    /// Replies to requests at or below this number are not counted back:
    /// they belong before the reckoning (re)started.
    floor: u64,
    /// Since the reckoning began: requests settled, of them not arrived
    /// (it can dip while a request has overtaken another), refused, and
    /// replies back.
    settled: u64,
    missing: i64,
    refused: u64,
    back: u64,
    /// What has been reported: it never goes down.
    reported: LegCounts,
    /// A reply came without a count.
    uncounted: bool,
}

impl Legs {
    /// `n` replies in order, the first answering request `seq` and each
    /// after it the next request (a GRO run), that carried the first's
    /// `tally` (one more arrived for each after it) or none. Duplicates are
    /// not passed here.
    #[inline]
    pub fn replies(&mut self, seq: u64, n: u64, tally: Option<Tally>) {
        let Some(tally) = tally else {
            self.uncounted = true;
            return;
        };
        let last = seq + (n - 1);
        // The same for every reply of a run: its numbers and counts step together.
        let missing = i64::from((seq as u32).wrapping_sub(tally.arrived) as i32);
        match self.newest {
            Some((high, before, refused)) if last > high => {
                let newer = last - high;
                // `last` arrived, so its count must be past the newest's:
                // fewer of the requests since may be missing than were
                // sent. Otherwise the count went back or stood still: the
                // responder started over (or a new worker's socket took
                // the flow, counting from zero, and reached the count the
                // old one had). So does this.
                if missing - before < newer as i64 {
                    self.settled += newer;
                    self.missing += missing - before;
                    self.refused += u64::from(tally.refused.wrapping_sub(refused) & REFUSED_MASK);
                    self.back += self.above_floor(seq, last);
                    self.newest = Some((last, missing, tally.refused));
                    return;
                }
            }
            // A reply that came after a newer one: its request was settled
            // already, as not arrived or as answered; now it is back.
            Some(_) => {
                self.back += self.above_floor(seq, last);
                return;
            }
            None => {}
        }
        // The reckoning (re)starts at the first reply of the run; the rest
        // of the run settles after it.
        self.floor = seq;
        let rest = last - seq;
        self.settled += rest;
        self.back += rest;
        self.newest = Some((last, missing, tally.refused));
    }

    /// The replies among requests `seq..=last` above the floor.
    fn above_floor(&self, seq: u64, last: u64) -> u64 {
        last.saturating_sub(self.floor.max(seq - 1))
    }

    /// What was settled since the last call; `None` when nothing is
    /// reckoned (no counted reply yet).
    pub fn take(&mut self) -> Option<LegCounts> {
        self.newest?;
        let forward = self.missing.max(0) as u64;
        let accounted = self.back as i64 + self.missing + self.refused as i64;
        let ret = (self.settled as i64 - accounted).max(0) as u64;
        let now = LegCounts {
            settled: self.settled,
            forward_lost: forward.max(self.reported.forward_lost),
            return_lost: ret.max(self.reported.return_lost),
        };
        let delta = LegCounts {
            settled: now.settled - self.reported.settled,
            forward_lost: now.forward_lost - self.reported.forward_lost,
            return_lost: now.return_lost - self.reported.return_lost,
        };
        self.reported = now;
        Some(delta)
    }

    /// A reply came without a count (the original's agent answers so).
    pub fn uncounted(&self) -> bool {
        self.uncounted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply's tally: `arrived` requests, none refused.
    fn counted(arrived: u32) -> Option<Tally> {
        Some(Tally {
            arrived,
            refused: 0,
        })
    }

    /// A responder that counts what arrives, and the replies that come back:
    /// request i is lost forward when `forward(i)`, its reply when `back(i)`.
    /// Returns the legs after requests 1..=n, and the truth up to the last
    /// reply that came back (after the first).
    fn flow(
        n: u64,
        forward: impl Fn(u64) -> bool,
        back: impl Fn(u64) -> bool,
    ) -> (Legs, LegCounts) {
        let mut legs = Legs::default();
        let (mut arrived, mut first, mut truth) = (0u64, None, LegCounts::default());
        let mut pending = LegCounts::default();
        for seq in 1..=n {
            if !forward(seq) {
                arrived += 1;
            }
            if first.is_some() {
                pending.settled += 1;
                pending.forward_lost += u64::from(forward(seq));
                pending.return_lost += u64::from(!forward(seq) && back(seq));
            }
            if !forward(seq) && !back(seq) {
                legs.replies(seq, 1, counted(arrived as u32));
                if first.is_none() {
                    first = Some(seq);
                } else {
                    truth.add(&pending);
                    pending = LegCounts::default();
                }
            }
        }
        (legs, truth)
    }

    #[test]
    fn each_leg_s_loss_is_told_apart_from_the_sender_s_counts_alone() {
        // 1 in 20 requests lost on the way out, 1 in 50 replies on the way back.
        let (mut legs, truth) = flow(10_000, |i| i % 20 == 7, |i| i % 50 == 3);
        let got = legs.take().unwrap();
        assert_eq!(got, truth);
        assert_eq!((got.forward_lost, got.return_lost), (500, 200));
        // Nothing new: nothing more to say.
        assert_eq!(legs.take(), Some(LegCounts::default()));
    }

    #[test]
    fn requests_in_flight_are_not_counted_lost() {
        let mut legs = Legs::default();
        for seq in 1..=10 {
            legs.replies(seq, 1, counted(seq as u32));
        }
        // 11..=20 are sent and not answered yet: nothing settled past 10.
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 9,
                ..LegCounts::default()
            })
        );
        // 21 comes back with a count of 21: 11..=20 all arrived, and their
        // replies are lost.
        legs.replies(21, 1, counted(21));
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 11,
                forward_lost: 0,
                return_lost: 10
            })
        );
    }

    #[test]
    fn a_run_of_replies_counts_as_its_replies_one_by_one() {
        let (mut one, mut run) = (Legs::default(), Legs::default());
        for (seq, count) in [(1, 1), (2, 2), (3, 3), (5, 4), (6, 5), (7, 6)] {
            one.replies(seq, 1, counted(count));
        }
        run.replies(1, 3, counted(1));
        run.replies(5, 3, counted(4));
        assert_eq!(one.take(), run.take());
    }

    #[test]
    fn before_the_first_counted_reply_nothing_is_told() {
        let mut legs = Legs::default();
        assert_eq!(legs.take(), None);
        // The responder came up at request 101: the first 100 are not lost to it.
        legs.replies(101, 1, counted(1));
        legs.replies(102, 1, counted(2));
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 1,
                ..LegCounts::default()
            })
        );
    }

    #[test]
    fn a_responder_that_starts_over_starts_the_reckoning_over_and_keeps_what_was_settled() {
        let mut legs = Legs::default();
        for seq in 1..=100 {
            // 50 lost forward before the restart.
            if seq != 50 {
                legs.replies(seq, 1, counted((seq - u64::from(seq > 50)) as u32));
            }
        }
        // Restarted: 101..=200 unanswered, then counts from 1 again.
        for (i, seq) in (201..=300).enumerate() {
            legs.replies(seq, 1, counted(i as u32 + 1));
        }
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 99 + 99,
                forward_lost: 1,
                return_lost: 0
            })
        );
    }

    #[test]
    fn a_count_that_stands_still_is_a_responder_started_over() {
        // A restarted responder's first worker counted request 1 of the
        // flow; a second worker's socket, bound a moment later, took the
        // flow and counted request 2 as its first too. Request 2 arrived:
        // a count that did not grow says the count began again, and no
        // request is missing.
        let mut legs = Legs::default();
        legs.replies(1, 1, counted(1));
        legs.replies(2, 1, counted(1));
        legs.replies(3, 1, counted(2));
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 1,
                ..LegCounts::default()
            })
        );
    }

    #[test]
    fn a_request_that_overtook_another_moves_a_packet_between_legs_for_a_moment() {
        let mut legs = Legs::default();
        for seq in 1..=10 {
            legs.replies(seq, 1, counted(seq as u32));
        }
        // 12 arrived before 11: 12's reply says one missing; 11's says none.
        legs.replies(12, 1, counted(11));
        legs.replies(11, 1, counted(12));
        legs.replies(13, 1, counted(13));
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 12,
                ..LegCounts::default()
            })
        );
        // Reported in the middle of it, the moment stays as one packet.
        let mut legs = Legs::default();
        for seq in 1..=10 {
            legs.replies(seq, 1, counted(seq as u32));
        }
        legs.replies(12, 1, counted(11));
        assert_eq!(legs.take().unwrap().forward_lost, 1);
        legs.replies(11, 1, counted(12));
        legs.replies(13, 1, counted(13));
        assert_eq!(legs.take().unwrap().forward_lost, 0);
    }

    #[test]
    fn counts_that_wrap_past_2_to_the_32_still_tell_the_legs() {
        let mut legs = Legs::default();
        let start = (1u64 << 32) - 5;
        for seq in start..start + 10 {
            // 3 lost forward before the numbering began here.
            legs.replies(seq, 1, counted((seq - 3) as u32));
        }
        legs.replies(start + 11, 1, counted((start + 11 - 4) as u32));
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 11,
                forward_lost: 1,
                return_lost: 0
            })
        );
    }

    #[test]
    fn requests_the_responder_refused_are_lost_on_no_leg() {
        let mut legs = Legs::default();
        let tally = |arrived, refused| {
            Some(Tally {
                arrived,
                refused: refused as u8 & REFUSED_MASK,
            })
        };
        legs.replies(1, 1, tally(1, 0));
        // 2..=100 arrive and are refused, 101 is answered; 102..=201
        // refused, 202 answered: 199 refused in all, past the 128 the
        // replies' 7 bits hold, but under 128 between two replies.
        for (seq, refused) in [(101, 99), (202, 199)] {
            legs.replies(seq, 1, tally(seq as u32, refused));
        }
        assert_eq!(
            legs.take(),
            Some(LegCounts {
                settled: 201,
                ..LegCounts::default()
            })
        );
    }

    #[test]
    fn replies_without_a_count_reckon_nothing_and_say_so() {
        let mut legs = Legs::default();
        legs.replies(1, 4, None);
        assert!(legs.uncounted());
        assert_eq!(legs.take(), None);
    }
}
