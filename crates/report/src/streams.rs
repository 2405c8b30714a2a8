//! The `streams` cell of a tx row: the row's figures per stream.
//!
//! `--streams S` sends to a peer from S sockets, each from its own source
//! port, so that an ECMP fabric hashes them over up to S paths. The row
//! sums them; this cell keeps each apart, so that one sick path among a
//! pair's S reads as the loss of the streams that take it, not as a share
//! of it smeared over the pair.
//!
//! One stream is `sport:sent:replies`, or `sport:sent:replies:settled:fwd:ret`
//! where the replies carried the responder's counts (agent::legs): the
//! source port, the requests sent in the interval, the replies to them that
//! came back in time, and the requests settled in the interval, of them
//! lost on the way out and on the way back. Streams are in order of port,
//! `;` between them. The cell is blank where nothing was counted per
//! stream (an agent before this column, the original's).

use std::fmt::Write as _;

/// One stream's figures in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamCounts {
    /// The stream socket's source port.
    pub sport: u16,
    pub sent: u64,
    pub replies: u64,
    /// Both legs from the replies' counts; `None`: none was counted.
    pub legs: Option<StreamLegs>,
}

/// A stream's settled requests and, of them, those lost on each leg.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamLegs {
    /// Requests whose fate is known: up to the newest reply's number.
    pub settled: u64,
    /// Of them, requests that never reached the responder.
    pub forward_lost: u64,
    /// Of them, requests that reached it whose replies never came back.
    pub return_lost: u64,
}

impl StreamLegs {
    pub fn add(&mut self, o: &StreamLegs) {
        self.settled += o.settled;
        self.forward_lost += o.forward_lost;
        self.return_lost += o.return_lost;
    }
}

impl StreamCounts {
    /// Adds `o`'s figures (the same stream, another interval or worker).
    pub fn add(&mut self, o: &StreamCounts) {
        self.sent += o.sent;
        self.replies += o.replies;
        if let Some(l) = &o.legs {
            self.legs.get_or_insert_default().add(l);
        }
    }
}

/// Appends the cell for `streams`, given in order of port, to `out`.
pub fn write(streams: &[StreamCounts], out: &mut String) {
    for (i, s) in streams.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        let _ = write!(out, "{}:{}:{}", s.sport, s.sent, s.replies);
        if let Some(l) = s.legs {
            let _ = write!(out, ":{}:{}:{}", l.settled, l.forward_lost, l.return_lost);
        }
    }
}

/// The streams of a cell; `None` when a stream in it does not read.
pub fn parse(cell: &str) -> Option<Vec<StreamCounts>> {
    if cell.is_empty() {
        return Some(Vec::new());
    }
    cell.split(';').map(parse_one).collect()
}

fn parse_one(text: &str) -> Option<StreamCounts> {
    let mut fields = text.split(':');
    let sport = fields.next()?.parse().ok()?;
    let sent = fields.next()?.parse().ok()?;
    let replies = fields.next()?.parse().ok()?;
    let rest: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let legs = match rest[..] {
        [] => None,
        [settled, forward_lost, return_lost] => Some(StreamLegs {
            settled,
            forward_lost,
            return_lost,
        }),
        _ => return None,
    };
    Some(StreamCounts {
        sport,
        sent,
        replies,
        legs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_reads_back_as_written() {
        let streams = [
            StreamCounts {
                sport: 39_001,
                sent: 500,
                replies: 500,
                legs: None,
            },
            StreamCounts {
                sport: 40_002,
                sent: 500,
                replies: 450,
                legs: Some(StreamLegs {
                    settled: 499,
                    forward_lost: 40,
                    return_lost: 10,
                }),
            },
        ];
        let mut cell = String::new();
        write(&streams, &mut cell);
        assert_eq!(cell, "39001:500:500;40002:500:450:499:40:10");
        assert_eq!(parse(&cell).unwrap(), streams.to_vec());
        assert_eq!(parse(""), Some(Vec::new()));
    }

    #[test]
    fn a_cell_that_does_not_read_is_none() {
        for bad in [
            "1:2",
            "x:1:2",
            "1:2:3:4",
            "1:2:3:4:5:6:7",
            "70000:1:1",
            "1:2:3;",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
