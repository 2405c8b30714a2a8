//! The MXO1 header every request and reply starts with: 32 bytes, network byte
//! order, byte for byte the original tool's, so our agents and the
//! original's share a fleet and count each other correctly.
//!
//! | offset | size | field        | request                 | reply                  |
//! |--------|------|--------------|-------------------------|------------------------|
//! | 0      | 4    | magic        | `MXO1`                  | `MXO1`                 |
//! | 4      | 1    | kind         | 0                       | 1                      |
//! | 5      | 1    | flags        | interval tag (see below)| counted (see below)    |
//! | 6      | 2    | src index    | sender's matrix index   | responder's own index  |
//! | 8      | 4    | packet len   | tx_size                 | the reply's size       |
//! | 12     | 4    | reply len    | rx_size (reply to send) | responder's count      |
//! | 16     | 8    | seq          | per-socket, first = 1   | echoed                 |
//! | 24     | 8    | t_send       | sender's clock          | echoed untouched       |
//!
//! The rest of the datagram is padding (zeros). `t_send` is opaque to the
//! responder: our senders put nanoseconds of their monotonic clock there, the
//! original puts microseconds; each side only ever compares it with its own clock.
//!
//! The flags byte, which the original writes as 0 and never reads, carries our
//! sender's interval tag: bit 7 set, bits 0-6 the number of the report interval
//! the request is counted in (the interval's end on the wall clock divided by
//! its length, mod 128). The receiver counts the request in the same interval,
//! so a request in flight across a tick is counted on one side of it by both
//! hosts, and a receiver's count never exceeds what was sent (see
//! `agent::slots`). A request with bit 7 clear (the original's) is counted in
//! the interval it arrives in.
//!
//! In a reply, the original writes the flags and the reply length as 0 and
//! never reads them (nor do we, but for what follows). Our responders set
//! flags bit 7 ([`COUNTED`]) and put in the reply-length field their running
//! count, mod 2^32, of the requests that arrived on the flow the reply
//! answers (that sender's socket, duplicates left out), this request
//! included; and in flags bits 0-6 how many of them, mod 128, they left
//! unanswered on purpose (refused by plan, or a disk queue full:
//! `agent::budget`). With the sequence number the reply echoes, that tells
//! the sender both legs from its own counts alone: of the requests up to
//! that number, so many reached the responder, so many were refused, and so
//! many replies came back (`agent::legs`; STAMP, RFC 8762, and TWAMP, RFC
//! 5357, carry the reflector's own sequence number for the same reason). A
//! reply with bit 7 clear (the original's) carries no count.

#![forbid(unsafe_code)]
/// Bytes of the header every request and reply starts with: the smallest packet.
pub const MIN_PACKET_BYTES: u32 = HEADER_LEN as u32;
/// The largest UDP payload IPv4 carries (65535 - 20 IPv4 - 8 UDP).
pub const MAX_PACKET_BYTES: u32 = 65507;

pub const HEADER_LEN: usize = 32;
pub(crate) const MAGIC: [u8; 4] = *b"MXO1";
pub const KIND_REQUEST: u8 = 0;
pub const KIND_REPLY: u8 = 1;
/// Flags bit 7: the request carries its sender's interval tag in bits 0-6.
pub const TAGGED: u8 = 0x80;
/// The interval numbers a tag tells apart.
pub const TAG_MASK: u64 = 0x7f;
/// Flags bit 7 of a reply: its reply-length field holds the responder's
/// count of the flow's requests, and bits 0-6 its refusals (mod 128).
pub const COUNTED: u8 = 0x80;
/// The refusals a reply's flags hold.
pub const REFUSED_MASK: u8 = 0x7f;

/// What a counted reply says of its flow, up to the request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Requests that reached the responder, this one included (mod 2^32).
    pub arrived: u32,
    /// Of them, the ones it left unanswered on purpose (mod 128).
    pub refused: u8,
}
/// The bytes of a reply that hold the responder's count (the reply-length
/// field, big-endian).
pub const COUNT: std::ops::Range<usize> = 12..16;

/// A decoded header (kind-independent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    /// [`TAGGED`] | interval number mod 128 on our requests; 0 otherwise.
    pub flags: u8,
    pub src_index: u16,
    pub packet_len: u32,
    pub reply_len: u32,
    pub seq: u64,
    pub t_send: u64,
}

impl Header {
    pub fn request(src_index: u16, tx_size: u32, rx_size: u32, seq: u64, t_send: u64) -> Header {
        Header {
            kind: KIND_REQUEST,
            flags: 0,
            src_index,
            packet_len: tx_size,
            reply_len: rx_size,
            seq,
            t_send,
        }
    }

    /// The reply to `request`, sent by the host at `own_index`, never larger
    /// than `most` bytes (the matrix's rx_size): a request may ask for any
    /// size, and a responder that gave it would amplify whatever spoofed it.
    pub fn reply_to(request: &Header, own_index: u16, most: u32) -> Header {
        Header {
            kind: KIND_REPLY,
            flags: 0,
            src_index: own_index,
            packet_len: request.reply_size().min(most.max(MIN_PACKET_BYTES)),
            reply_len: 0,
            seq: request.seq,
            t_send: request.t_send,
        }
    }

    /// This request, tagged with the sender's report interval number.
    pub fn in_interval(mut self, interval: u64) -> Header {
        self.flags = TAGGED | (interval & TAG_MASK) as u8;
        self
    }

    /// This reply, carrying the responder's tally of its flow: `arrived`,
    /// the requests it has had so far, its own request included (kept mod
    /// 2^32), and `refused`, those it left unanswered (kept mod 128).
    pub fn counting(mut self, arrived: u64, refused: u64) -> Header {
        self.flags = COUNTED | (refused as u8 & REFUSED_MASK);
        self.reply_len = arrived as u32;
        self
    }

    /// The responder's tally a reply carries; `None` for a reply that
    /// carries none (the original's) and for a request.
    pub fn tally(&self) -> Option<Tally> {
        (self.kind == KIND_REPLY && self.flags & COUNTED != 0).then_some(Tally {
            arrived: self.reply_len,
            refused: self.flags & REFUSED_MASK,
        })
    }

    /// The interval tag (0..=127) of a request from one of our senders.
    pub fn interval_tag(&self) -> Option<u8> {
        (self.flags & TAGGED != 0).then_some(self.flags & TAG_MASK as u8)
    }

    /// The size the reply to this request must have: its reply-length field,
    /// clamped to what a datagram can carry and the header needs.
    pub fn reply_size(&self) -> u32 {
        self.reply_len.clamp(MIN_PACKET_BYTES, MAX_PACKET_BYTES)
    }

    pub fn encode(&self, out: &mut [u8; HEADER_LEN]) {
        out[0..4].copy_from_slice(&MAGIC);
        out[4] = self.kind;
        out[5] = self.flags;
        out[6..8].copy_from_slice(&self.src_index.to_be_bytes());
        out[8..12].copy_from_slice(&self.packet_len.to_be_bytes());
        out[12..16].copy_from_slice(&self.reply_len.to_be_bytes());
        out[16..24].copy_from_slice(&self.seq.to_be_bytes());
        out[24..32].copy_from_slice(&self.t_send.to_be_bytes());
    }

    /// Decodes the first 32 bytes of a datagram; `None` when it is too short or
    /// does not carry the MXO1 magic.
    pub fn decode(datagram: &[u8]) -> Option<Header> {
        let h: &[u8; HEADER_LEN] = datagram.get(..HEADER_LEN)?.try_into().ok()?;
        if h[0..4] != MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_be_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        Some(Header {
            kind: h[4],
            flags: h[5],
            src_index: u16::from_be_bytes([h[6], h[7]]),
            packet_len: u32_at(8),
            reply_len: u32_at(12),
            seq: u64_at(16),
            t_send: u64_at(24),
        })
    }
}

/// The bytes of a header a reply copies from its request unchanged: the
/// sequence number and the send time it echoes.
pub const ECHOED: std::ops::Range<usize> = 16..32;

/// The first 16 bytes of a header but the count field, as a mask over them
/// read in native byte order.
const BESIDE_COUNT: u128 = {
    let mut bytes = [0xff_u8; 16];
    let mut i = COUNT.start;
    while i < COUNT.end {
        bytes[i] = 0;
        i += 1;
    }
    u128::from_ne_bytes(bytes)
};

/// The header of the first of `n` datagrams of `segment` bytes each, back
/// to back in `bytes` (a GRO message), when they are one clean run: the
/// first decodes as `kind`, and each one after carries the same header but
/// for a sequence number one higher, a responder's count one higher where
/// the first carries one ([`COUNTED`]), and (with `same_t_send`) the same
/// send time. `None` when any differs, is short, or the numbers would wrap:
/// the caller then takes the datagrams one by one.
///
/// Why: a run is what a peer's send batch becomes on the way, and counting
/// it once instead of datagram by datagram is most of an agent's own time
/// per round trip saved. Checking it costs a compare of 16 bytes and a
/// number or two per datagram.
pub fn decode_run(
    bytes: &[u8],
    segment: usize,
    n: usize,
    kind: u8,
    same_t_send: bool,
) -> Option<Header> {
    if segment < HEADER_LEN || n < 2 || bytes.len() < n.checked_mul(segment)? {
        return None;
    }
    let first = Header::decode(bytes).filter(|h| h.kind == kind)?;
    first.seq.checked_add(n as u64 - 1)?;
    // A counted reply's count field steps with its sequence number (mod
    // 2^32); every other field but the echoed ones is the first's.
    let count = first.tally().map(|t| t.arrived);
    let u128_at = |at: usize| u128::from_ne_bytes(bytes[at..at + 16].try_into().expect("16 bytes"));
    let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    // With a count, bytes 12..16 are compared apart: masked out here.
    let mask = if count.is_some() {
        BESIDE_COUNT
    } else {
        u128::MAX
    };
    let (fixed, t_send) = (u128_at(0) & mask, u64_at(24));
    for k in 1..n {
        let at = k * segment;
        if u128_at(at) & mask != fixed
            || u64::from_be(u64_at(at + 16)) != first.seq + k as u64
            || count.is_some_and(|c| u32_at(at + COUNT.start) != c.wrapping_add(k as u32))
            || (same_t_send && u64_at(at + 24) != t_send)
        {
            return None;
        }
    }
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_one_header_with_numbers_one_apart() {
        let run = |seqs: &[u64], t_sends: &[u64], segment: usize| -> Vec<u8> {
            let mut bytes = vec![0u8; seqs.len() * segment];
            for (k, (&seq, &t)) in seqs.iter().zip(t_sends).enumerate() {
                let h: &mut [u8; HEADER_LEN] = (&mut bytes[k * segment..k * segment + HEADER_LEN])
                    .try_into()
                    .unwrap();
                Header::request(3, segment as u32, 64, seq, t)
                    .in_interval(5)
                    .encode(h);
            }
            bytes
        };
        let clean = run(&[7, 8, 9], &[1, 1, 1], 64);
        let first = decode_run(&clean, 64, 3, KIND_REQUEST, true).unwrap();
        assert_eq!((first.seq, first.t_send, first.src_index), (7, 1, 3));
        // Replies are not requests.
        assert_eq!(decode_run(&clean, 64, 3, KIND_REPLY, true), None);
        // A gap, a repeat, or numbers out of order: not a run.
        for seqs in [[7, 9, 10], [7, 7, 8], [8, 7, 9]] {
            assert_eq!(
                decode_run(&run(&seqs, &[1; 3], 64), 64, 3, KIND_REQUEST, false),
                None
            );
        }
        // Send times may differ, unless they must not.
        let mixed = run(&[7, 8, 9], &[1, 1, 2], 64);
        assert!(decode_run(&mixed, 64, 3, KIND_REQUEST, false).is_some());
        assert_eq!(decode_run(&mixed, 64, 3, KIND_REQUEST, true), None);
        // Another field of one header differs (its interval tag).
        let mut tagged = clean.clone();
        tagged[64 + 5] ^= 1;
        assert_eq!(decode_run(&tagged, 64, 3, KIND_REQUEST, false), None);
        // Fewer bytes than n segments, a segment shorter than a header, one
        // datagram, and a sequence number that would wrap.
        assert_eq!(decode_run(&clean[..150], 64, 3, KIND_REQUEST, false), None);
        assert_eq!(decode_run(&clean, 16, 3, KIND_REQUEST, false), None);
        assert_eq!(decode_run(&clean, 64, 1, KIND_REQUEST, false), None);
        let wraps = run(&[u64::MAX - 1, u64::MAX], &[1, 1], 64);
        assert!(decode_run(&wraps, 64, 2, KIND_REQUEST, false).is_some());
        assert_eq!(decode_run(&wraps, 64, 3, KIND_REQUEST, false), None);
    }

    #[test]
    fn request_bytes_are_the_originals() {
        let mut buf = [0u8; HEADER_LEN];
        Header::request(3, 64, 8192, 1, 0x0102_0304_0506_0708).encode(&mut buf);
        // struct.pack("!4sBBHIIQQ", b"MXO1", 0, 0, 3, 64, 8192, 1, 0x0102030405060708)
        let want: [u8; 32] = [
            b'M', b'X', b'O', b'1', 0, 0, 0, 3, 0, 0, 0, 64, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 1,
            1, 2, 3, 4, 5, 6, 7, 8,
        ];
        assert_eq!(buf, want);
        assert_eq!(
            Header::decode(&buf),
            Some(Header::request(3, 64, 8192, 1, 0x0102_0304_0506_0708))
        );
    }

    #[test]
    fn a_reply_echoes_seq_and_t_send() {
        let req = Header::request(7, 64, 512, 99, 123_456);
        let rep = Header::reply_to(&req, 2, MAX_PACKET_BYTES);
        assert_eq!(
            (rep.kind, rep.src_index, rep.packet_len, rep.reply_len),
            (KIND_REPLY, 2, 512, 0)
        );
        assert_eq!((rep.seq, rep.t_send), (99, 123_456));
        // Byte for byte, what it echoes.
        let (mut req_bytes, mut rep_bytes) = ([0u8; HEADER_LEN], [0u8; HEADER_LEN]);
        req.encode(&mut req_bytes);
        rep.encode(&mut rep_bytes);
        assert_eq!(req_bytes[ECHOED], rep_bytes[ECHOED]);
        // The reply size is clamped to what a datagram carries.
        assert_eq!(Header::request(0, 64, 5, 1, 0).reply_size(), 32);
        assert_eq!(Header::request(0, 64, 1 << 20, 1, 0).reply_size(), 65507);
        // A reply is never larger than the plan's, whatever the request asks.
        let greedy = Header::request(0, 32, 65_507, 1, 0);
        assert_eq!(Header::reply_to(&greedy, 1, 64).packet_len, 64);
        assert_eq!(
            Header::reply_to(&Header::request(0, 64, 48, 1, 0), 1, 64).packet_len,
            48
        );
    }

    #[test]
    fn the_interval_tag_rides_in_the_flags_byte() {
        let mut buf = [0u8; HEADER_LEN];
        let req = Header::request(3, 64, 64, 1, 5).in_interval(1_796_003_023);
        req.encode(&mut buf);
        assert_eq!(buf[5], 0x80 | (1_796_003_023u64 % 128) as u8);
        let back = Header::decode(&buf).unwrap();
        assert_eq!(back.interval_tag(), Some((1_796_003_023u64 % 128) as u8));
        // The original's requests (flags 0) carry none, and replies echo none.
        assert_eq!(Header::request(3, 64, 64, 1, 5).interval_tag(), None);
        assert_eq!(Header::reply_to(&req, 1, MAX_PACKET_BYTES).flags, 0);
    }

    #[test]
    fn a_counted_reply_carries_the_responder_s_count_where_the_original_writes_0() {
        let req = Header::request(7, 64, 512, 99, 123).in_interval(5);
        let rep = Header::reply_to(&req, 2, MAX_PACKET_BYTES).counting((1 << 32) + 41, 130);
        let mut bytes = [0u8; HEADER_LEN];
        rep.encode(&mut bytes);
        assert_eq!(bytes[5], COUNTED | 2);
        assert_eq!(bytes[COUNT], 41u32.to_be_bytes());
        let back = Header::decode(&bytes).unwrap();
        assert_eq!(
            back.tally(),
            Some(Tally {
                arrived: 41,
                refused: 2
            })
        );
        // What it echoes and its size are the uncounted reply's.
        assert_eq!((back.seq, back.t_send, back.packet_len), (99, 123, 512));
        // The original's reply (flags and reply length 0) carries none, and
        // a request's flags byte is its interval tag, not a count.
        assert_eq!(Header::reply_to(&req, 2, MAX_PACKET_BYTES).tally(), None);
        assert_eq!(req.tally(), None);
    }

    #[test]
    fn a_run_of_counted_replies_steps_its_count_with_its_numbers() {
        let run = |counts: &[u32]| -> Vec<u8> {
            let mut bytes = vec![0u8; counts.len() * 64];
            for (k, &count) in counts.iter().enumerate() {
                let h: &mut [u8; HEADER_LEN] = (&mut bytes[k * 64..k * 64 + HEADER_LEN])
                    .try_into()
                    .unwrap();
                let req = Header::request(3, 64, 64, 10 + k as u64, 1);
                Header::reply_to(&req, 1, 64)
                    .counting(u64::from(count), 3)
                    .encode(h);
            }
            bytes
        };
        let first = decode_run(&run(&[5, 6, 7]), 64, 3, KIND_REPLY, true).unwrap();
        assert_eq!((first.seq, first.tally().map(|t| t.arrived)), (10, Some(5)));
        // Across the 2^32 wrap of the count too.
        assert!(decode_run(&run(&[u32::MAX, 0, 1]), 64, 3, KIND_REPLY, true).is_some());
        // A count that does not step with the numbers: not a run.
        for counts in [[5, 5, 6], [5, 7, 8], [5, 6, 6]] {
            assert_eq!(decode_run(&run(&counts), 64, 3, KIND_REPLY, true), None);
        }
    }

    #[test]
    fn short_or_foreign_datagrams_do_not_decode() {
        assert_eq!(Header::decode(&[0u8; 31]), None);
        let mut buf = [0u8; 40];
        buf[..4].copy_from_slice(b"MXO2");
        assert_eq!(Header::decode(&buf), None);
    }
}
