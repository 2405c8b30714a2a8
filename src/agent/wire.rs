//! The MXO1 header every request and reply starts with: 32 bytes, network byte
//! order, byte for byte the original tool's, so our agents and the
//! original's share a fleet and count each other correctly.
//!
//! | offset | size | field        | request                 | reply                  |
//! |--------|------|--------------|-------------------------|------------------------|
//! | 0      | 4    | magic        | `MXO1`                  | `MXO1`                 |
//! | 4      | 1    | kind         | 0                       | 1                      |
//! | 5      | 1    | flags        | interval tag (see below)| 0                      |
//! | 6      | 2    | src index    | sender's matrix index   | responder's own index  |
//! | 8      | 4    | packet len   | tx_size                 | the reply's size       |
//! | 12     | 4    | reply len    | rx_size (reply to send) | 0                      |
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
use crate::matrix::{MAX_PACKET_BYTES, MIN_PACKET_BYTES};

pub const HEADER_LEN: usize = 32;
pub const MAGIC: [u8; 4] = *b"MXO1";
pub const KIND_REQUEST: u8 = 0;
pub const KIND_REPLY: u8 = 1;
/// Flags bit 7: the request carries its sender's interval tag in bits 0-6.
pub const TAGGED: u8 = 0x80;
/// The interval numbers a tag tells apart.
pub const TAG_MASK: u64 = 0x7f;

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

/// The header of the first of `n` datagrams of `segment` bytes each, back
/// to back in `bytes` (a GRO message), when they are one clean run: the
/// first decodes as `kind`, and each one after carries the same header but
/// for a sequence number one higher (and, with `same_t_send`, the same send
/// time). `None` when any differs, is short, or the numbers would wrap:
/// the caller then takes the datagrams one by one.
///
/// Why: a run is what a peer's send batch becomes on the way, and counting
/// it once instead of datagram by datagram is most of an agent's own time
/// per round trip saved. Checking it costs a compare of 16 bytes and a
/// number per datagram.
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
    let u128_at = |at: usize| u128::from_ne_bytes(bytes[at..at + 16].try_into().expect("16 bytes"));
    let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let (fixed, t_send) = (u128_at(0), u64_at(24));
    for k in 1..n {
        let at = k * segment;
        if u128_at(at) != fixed
            || u64::from_be(u64_at(at + 16)) != first.seq + k as u64
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
    fn short_or_foreign_datagrams_do_not_decode() {
        assert_eq!(Header::decode(&[0u8; 31]), None);
        let mut buf = [0u8; 40];
        buf[..4].copy_from_slice(b"MXO2");
        assert_eq!(Header::decode(&buf), None);
    }
}
