//! The fleet's shared instants: one start and one end for every flow.
//!
//! `mx start` launches every agent armed (listening and answering, sending
//! nothing), and once every host is up it chooses the start instant: a whole
//! interval boundary far enough ahead for the "go" to reach every host first
//! (the margin). `mx stop` and `mx run` choose the end instant the same way,
//! and the responders keep answering a grace period past it. A host the go
//! reaches late starts late: its first interval is marked as an edge and left
//! out of summaries, and named; its lateness is never anyone's loss.
//!
//! The instants are wall-clock times, so the hosts' clocks must agree: each
//! launch (and `mx doctor`) prints the host's clock, and its offset from this
//! machine's is measured over ssh. Offsets past [`CLOCK_TOLERANCE`] widen the
//! margins (and say so); clocks further apart than the report's hold refuse
//! the run, since requests in flight could then not be counted in the
//! interval they were sent in.

use mx_base::error::{Error, Result};
use mx_report::hold_seconds;

/// Seconds of answering after the end instant when the clocks agree, and
/// between an order to end and that instant.
pub const START_MARGIN: f64 = 1.0;
/// The least time between choosing the start instant and that instant: the
/// go's fan-out to every host must fit in it. The go is one short step over
/// the shells the launch left open (0.12 s to 20 lab hosts sharing two
/// cores, 0.7 s to 200), and the margin is at least the launch's own
/// fan-out, the same steps over the same shells with more to do on each
/// host (it starts an agent there: 0.2 s to 20, 1.9 s to 200), which the
/// go has never been seen to outlast. An armed agent looks for the instant
/// every 20 ms. A host the go reaches late still ticks with the fleet, and
/// is named.
pub const MIN_START_MARGIN: f64 = 0.3;
/// Offsets from this machine's clock that need no widening, in seconds.
pub const CLOCK_TOLERANCE: f64 = 0.25;

/// The host's clock from a script's `clock=<unix seconds>` line.
pub fn clock_of(text: &str) -> Option<f64> {
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("clock=")?.parse::<f64>().ok())
        .filter(|t| t.is_finite())
}

/// A script's output without its `clock=` line.
pub fn without_clock(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim().starts_with("clock="))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Offset of a host's clock from this machine's, in seconds (positive: ahead).
#[derive(Debug, Clone, PartialEq)]
pub struct Offset {
    pub host: String,
    pub seconds: f64,
}

impl Offset {
    /// From a clock read during a remote step that was sent at `sent` and
    /// whose answer came back at `returned` (this machine's clock): the
    /// host read `remote` at some instant between the two, so its offset
    /// lies between `remote - returned` and `remote - sent`. The offset is
    /// the one of those nearest zero: what the step proves. A loaded
    /// controller or host can hold an answer back for tenths of a second
    /// (a 200-host lab on two cores: launch steps of 0.15-0.9 s); reading
    /// the clock against its return alone called every host behind by
    /// that much, and widened the margins for a skew that was not there.
    pub fn between(host: &str, remote: f64, sent: f64, returned: f64) -> Offset {
        let seconds = if remote > returned {
            remote - returned
        } else if remote < sent {
            remote - sent
        } else {
            0.0
        };
        Offset {
            host: host.to_string(),
            seconds,
        }
    }

    /// `+0.012s` / `-1.250s`; `0.000s` for an offset under half a
    /// millisecond either way (never `-0.000s`: no sign where none shows).
    pub fn text(&self) -> String {
        if self.seconds.abs() < 0.0005 {
            "0.000s".to_string()
        } else {
            format!("{:+.3}s", self.seconds)
        }
    }
}

/// How far ahead the start instant goes, and how long the responders answer
/// past the end, for a fleet with these clock offsets.
#[derive(Debug, Clone, PartialEq)]
pub struct Margins {
    pub start: f64,
    pub grace: f64,
    /// What was widened and why, to print.
    pub note: Option<String>,
}

/// The margins for `offsets` at report interval `interval`, when a fan-out
/// step to every host took `step_seconds`; refuses clocks further apart than
/// the report's hold. A host whose clock is ahead reaches the instant that
/// much sooner: the start margin grows by the most any is ahead.
pub fn margins(offsets: &[Offset], interval: f64, step_seconds: f64) -> Result<Margins> {
    let start = MIN_START_MARGIN.max(step_seconds);
    let (Some(ahead), Some(behind)) = (
        offsets
            .iter()
            .max_by(|a, b| a.seconds.total_cmp(&b.seconds)),
        offsets
            .iter()
            .min_by(|a, b| a.seconds.total_cmp(&b.seconds)),
    ) else {
        return Ok(Margins {
            start,
            grace: START_MARGIN,
            note: None,
        });
    };
    let spread = ahead.seconds - behind.seconds;
    let hold = hold_seconds(interval);
    if spread > hold {
        return Err(Error::refused(format!(
            "the hosts' clocks disagree by {spread:.3}s ({} {}, {} {} from this machine's, measured over ssh): more than the {hold}s an interval waits for packets in flight, so they could not be counted in the interval they were sent in -- fix time sync (NTP, chrony) on those hosts first",
            ahead.host,
            ahead.text(),
            behind.host,
            behind.text()
        )));
    }
    let worst = if ahead.seconds.abs() >= behind.seconds.abs() {
        ahead
    } else {
        behind
    };
    if worst.seconds.abs() <= CLOCK_TOLERANCE {
        return Ok(Margins {
            start: start + ahead.seconds.max(0.0),
            grace: START_MARGIN,
            note: None,
        });
    }
    let widened = Margins {
        start: start.max(START_MARGIN + 2.0 * worst.seconds.abs()),
        grace: START_MARGIN + spread,
        note: None,
    };
    Ok(Margins {
        note: Some(format!(
            "{}'s clock is {} off this machine's (measured over ssh): the start margin is widened to {:.1}s and the agents answer {:.1}s past the end",
            worst.host,
            worst.text(),
            widened.start,
            widened.grace
        )),
        ..widened
    })
}

/// The start instant: the first whole interval boundary at least `margin`
/// seconds after `now`.
pub fn start_instant(now: f64, interval: f64, margin: f64) -> f64 {
    ((now + margin) / interval).ceil() * interval
}

/// A fleet's start instant, `margin` seconds from `now` at the least. A run
/// of a set length (`mx run --for`, `--duration`, a ramp's steps: `lasts`)
/// begins on a whole interval boundary, so that it lasts whole intervals.
/// An open-ended one begins at the margin itself: its agents tick on the
/// boundaries from the first (0.5 to 1.5 intervals on), and `mx start`,
/// which returns once the flows have begun, waits no interval (5 s by
/// default) for a boundary to come round.
pub fn begin(now: f64, interval: f64, margin: f64, lasts: bool) -> f64 {
    if lasts {
        start_instant(now, interval, margin)
    } else {
        now + margin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(list: &[(&str, f64)]) -> Vec<Offset> {
        list.iter()
            .map(|&(h, s)| Offset {
                host: h.to_string(),
                seconds: s,
            })
            .collect()
    }

    #[test]
    fn an_offset_says_its_sign_only_where_a_digit_shows() {
        let text = |s| offsets(&[("a", s)])[0].text();
        assert_eq!(text(-0.0001), "0.000s");
        assert_eq!(text(0.0), "0.000s");
        assert_eq!(text(0.012), "+0.012s");
        assert_eq!(text(-1.25), "-1.250s");
    }

    #[test]
    fn clocks_that_agree_keep_the_margins() {
        let m = margins(&offsets(&[("a", 0.002), ("b", -0.010)]), 5.0, 0.1).unwrap();
        assert_eq!(
            (m.start, m.grace, m.note),
            (MIN_START_MARGIN + 0.002, START_MARGIN, None)
        );
        // Behind only: the go has the whole margin to reach them.
        let m = margins(&offsets(&[("a", -0.2), ("b", -0.010)]), 5.0, 0.1).unwrap();
        assert_eq!(m.start, MIN_START_MARGIN);
        // A slow fan-out widens the start margin with it.
        assert_eq!(margins(&[], 1.0, 2.0).unwrap().start, 2.0);
    }

    #[test]
    fn a_clock_off_widens_the_margins_and_says_so() {
        let m = margins(&offsets(&[("a", 0.0), ("h3", -0.4)]), 5.0, 0.3).unwrap();
        assert!((m.start - 1.8).abs() < 1e-9, "{m:?}");
        assert!((m.grace - 1.4).abs() < 1e-9, "{m:?}");
        let note = m.note.unwrap();
        assert!(note.starts_with("h3's clock is -0.400s off"), "{note}");
    }

    #[test]
    fn clocks_further_apart_than_the_hold_are_refused() {
        let e = margins(&offsets(&[("a", 0.3), ("b", -0.3)]), 5.0, 0.3).unwrap_err();
        assert!(
            e.message()
                .contains("disagree by 0.600s (a +0.300s, b -0.300s"),
            "{}",
            e.message()
        );
        assert!(e.message().contains("NTP"));
    }

    #[test]
    fn the_start_is_a_whole_boundary_past_the_margin() {
        assert_eq!(start_instant(1000.2, 5.0, 1.0), 1005.0);
        assert_eq!(start_instant(1004.5, 5.0, 1.0), 1010.0);
        assert_eq!(start_instant(1000.0, 1.0, 1.0), 1001.0);
        // A run of a set length begins on a boundary; an open-ended one at
        // the margin.
        assert_eq!(begin(1000.2, 5.0, 0.5, true), 1005.0);
        assert_eq!(begin(1000.2, 5.0, 0.5, false), 1000.7);
    }

    #[test]
    fn clock_lines_are_read_and_dropped() {
        let text = "started\nclock=1796003022.125000000";
        assert_eq!(clock_of(text), Some(1_796_003_022.125));
        assert_eq!(without_clock(text), "started");
        assert_eq!(clock_of("started"), None);
        let o = Offset {
            host: "a".into(),
            seconds: 0.4,
        };
        assert_eq!(o.text(), "+0.400s");
    }

    #[test]
    fn an_offset_is_what_the_step_proves_however_late_its_answer() {
        let at = |remote: f64| Offset::between("h", remote, 100.0, 100.5).seconds;
        // Read within the step's span: a late answer, not a clock off.
        assert_eq!(at(100.1), 0.0);
        assert_eq!(at(100.0), 0.0);
        // Read after it came back here: ahead by at least that much.
        assert!((at(101.0) - 0.5).abs() < 1e-9);
        // Read before it was sent: behind by at least that much.
        assert!((at(99.2) + 0.8).abs() < 1e-9);
    }
}
