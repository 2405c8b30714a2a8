//! Receiving: datagrams read in batches with recvmmsg, and GRO
//! super-datagrams cut back into the datagrams they carry.
//!
//! A batch copies only the first [`RECV_COPY`] bytes of each datagram (the
//! MXO1 header is all we read) and asks the kernel for the true length with
//! `MSG_TRUNC`, so an 8 KB reply costs a 64-byte copy and is still counted
//! to the byte; or it takes whole GRO super-datagrams (a socket with UDP_GRO
//! set gets up to 64 datagrams of one sender in one slot, their segment size
//! in a control message) and splits them. Nothing here allocates per packet.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;

use super::BATCH;
use super::sys::RecvSlots;

/// Bytes copied out of each received datagram: the header and some slack.
pub const RECV_COPY: usize = 64;

/// Buffer of a coalesced receive slot: a whole GRO super-datagram fits.
const COALESCED_SLOT: usize = 65536;

/// Slots of a coalesced receive batch: each may hold up to 64 datagrams.
const COALESCED_SLOTS: usize = 16;

/// Bytes between two coalesced slots beyond the slot itself. Slots 64 KiB
/// apart start in the same set of every cache level (a set's lines are 64 KiB
/// apart in a 512 KiB 8-way L2): the first kilobytes of 16 slots, those the
/// kernel copies a GRO message into, would evict one another. A skew of 17
/// cache lines per slot puts each slot's start in sets of its own.
const SLOT_SKEW: usize = 17 * 64;

/// One received datagram: the copied prefix, its true length and its sender.
pub struct Datagram<'a> {
    pub head: &'a [u8],
    pub len: usize,
    pub from: SocketAddr,
    /// The first datagram of its message. The rest of a message (a GRO
    /// super-datagram cut apart) come from the same sender: what is looked
    /// up per sender is looked up here.
    pub starts_message: bool,
    /// The TTL (IPv4) or hop limit (IPv6) it arrived with, the same for
    /// every datagram of a message; 0 on a socket that did not ask for it
    /// ([`count_hops`](super::count_hops)).
    pub ttl: u8,
    /// When its message reached the host (CLOCK_REALTIME, ns since the
    /// Unix epoch), the same for every datagram of a message; 0 on a
    /// socket that did not ask for it ([`stamp_arrivals`](super::stamp_arrivals)).
    pub arrived_ns: u64,
}

/// Buffers for one recvmmsg call, reused call after call.
///
/// Two shapes: [`headers`](Self::headers) copies the first [`RECV_COPY`] bytes
/// of up to [`BATCH`] datagrams (with `MSG_TRUNC` for their true length);
/// [`coalesced`](Self::coalesced) takes whole GRO super-datagrams and splits
/// them back into datagrams.
pub struct RecvBatch {
    raw: RecvSlots,
    /// Datagrams read in coalesced (GRO) messages of several, since the
    /// last [`take_coalesced`](Self::take_coalesced).
    read_coalesced: u64,
}

impl RecvBatch {
    /// Up to [`BATCH`] datagrams per call, [`RECV_COPY`] bytes of each copied.
    pub fn headers() -> Box<RecvBatch> {
        RecvBatch::with_slots(BATCH, RECV_COPY)
    }

    /// Up to 16 GRO super-datagrams (or plain datagrams) per call, whole.
    pub fn coalesced() -> Box<RecvBatch> {
        RecvBatch::with_slots(COALESCED_SLOTS, COALESCED_SLOT)
    }

    fn with_slots(slots: usize, slot_len: usize) -> Box<RecvBatch> {
        assert!(slots <= BATCH && slot_len >= RECV_COPY);
        // Coalesced slots are skewed ([`SLOT_SKEW`]); header slots are packed.
        let stride = if slot_len > RECV_COPY {
            slot_len + SLOT_SKEW
        } else {
            slot_len
        };
        Box::new(RecvBatch {
            raw: RecvSlots::new(slots, slot_len, stride),
            read_coalesced: 0,
        })
    }

    /// Whether the last call filled every slot (more may be waiting).
    pub fn was_full(&self) -> bool {
        self.raw.count() == self.raw.slots()
    }

    /// Receives up to a batch without blocking; returns the messages read (a
    /// coalesced message holds several datagrams), `Ok(0)` when none is
    /// waiting. Errors other than "would block" are returned (e.g.
    /// ECONNREFUSED left on a connected socket by an ICMP port-unreachable).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        let count = self.raw.recv(fd)?;
        for i in 0..count {
            if let Some(segment) = self.raw.said(i).segment.filter(|&s| s > 0) {
                let len = self.raw.len(i);
                if len > segment {
                    self.read_coalesced += len.div_ceil(segment) as u64;
                }
            }
        }
        Ok(count)
    }

    /// Datagrams read in coalesced messages since the last call: a
    /// software interface (veth, loopback) counted each such message as one
    /// packet, so its counts and the datagrams compare only where this is 0.
    pub fn take_coalesced(&mut self) -> u64 {
        std::mem::take(&mut self.read_coalesced)
    }

    /// The datagrams of the last [`recv`](Self::recv), super-datagrams split.
    pub fn datagrams(&self) -> Datagrams<'_> {
        Datagrams {
            raw: &self.raw,
            next_message: 0,
            slot: &[],
            from: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            len: 0,
            segment: 1,
            ttl: 0,
            arrived_ns: 0,
            at: 0,
            end: 0,
        }
    }
}

/// The datagrams of one receive batch, in order: a plain message is one, a
/// GRO message is cut at its segment size (the last segment may be shorter).
/// A hand-written iterator: this runs once per datagram on the hot path.
pub struct Datagrams<'a> {
    raw: &'a RecvSlots,
    next_message: usize,
    /// The current message's slot, sender, length, segment size, TTL and
    /// arrival time.
    slot: &'a [u8],
    from: SocketAddr,
    len: usize,
    segment: usize,
    ttl: u8,
    arrived_ns: u64,
    /// Offset of the next datagram in the message, and where they end (an
    /// empty message still yields one, empty, datagram: a stray).
    at: usize,
    end: usize,
}

/// One GRO message read whole: `count` datagrams of `segment` bytes, back to
/// back in `bytes` (exactly: a shorter last one makes it no run).
pub struct Message<'a> {
    pub bytes: &'a [u8],
    pub segment: usize,
    pub count: usize,
    /// The TTL it arrived with ([`Datagram::ttl`]).
    pub ttl: u8,
    /// When it reached the host ([`Datagram::arrived_ns`]).
    pub arrived_ns: u64,
}

impl<'a> Datagrams<'a> {
    /// Right after the first datagram of a message: the whole message, when
    /// it holds several datagrams of one size and was copied whole (a
    /// coalesced batch).
    #[inline]
    pub fn message(&self) -> Option<Message<'a>> {
        let (len, segment) = (self.len, self.segment);
        if self.at != segment || segment >= len || len > self.slot.len() || len % segment != 0 {
            return None;
        }
        Some(Message {
            bytes: &self.slot[..len],
            segment,
            count: len / segment,
            ttl: self.ttl,
            arrived_ns: self.arrived_ns,
        })
    }

    /// Passes over the rest of the current message (taken whole).
    #[inline]
    pub fn skip_message(&mut self) {
        self.at = self.end;
    }
}

impl<'a> Iterator for Datagrams<'a> {
    type Item = Datagram<'a>;

    #[inline]
    fn next(&mut self) -> Option<Datagram<'a>> {
        while self.at >= self.end {
            let i = self.next_message;
            let raw = self.raw;
            if i >= raw.count() {
                return None;
            }
            self.next_message += 1;
            // With MSG_TRUNC, the length is the real one even when only part
            // of it was copied.
            self.len = raw.len(i);
            let said = raw.said(i);
            self.segment = said.segment.unwrap_or(self.len).max(1);
            self.ttl = said.ttl;
            self.arrived_ns = said.arrived_ns;
            self.slot = raw.slot(i);
            self.from = raw.sender(i);
            self.at = 0;
            self.end = self.len.max(1);
        }
        let at = self.at;
        let starts_message = at == 0;
        let len = self.segment.min(self.len.saturating_sub(at));
        let head_end = (at + len.min(RECV_COPY)).min(self.slot.len());
        self.at += self.segment;
        Some(Datagram {
            head: &self.slot[at.min(head_end)..head_end],
            len,
            from: self.from,
            starts_message,
            ttl: self.ttl,
            arrived_ns: self.arrived_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::enable_gro;
    use super::super::testing::{bound, receive, send_requests};
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn a_batch_crosses_loopback_with_exact_sizes_and_addresses() {
        // IPv4 and IPv6 alike: the sender's address read back from either.
        for at in ["127.0.0.1:0", "[::1]:0"] {
            let rx = UdpSocket::bind(at).unwrap();
            let sizes = [32usize, 64, 1400, 8192, 65507];
            send_requests(bound(&rx), &sizes, false);
            let (got, _) = receive(&rx, &mut RecvBatch::headers(), sizes.len());
            assert_eq!(got, [(32, 1), (64, 2), (1400, 3), (8192, 4), (65507, 5)]);
        }
    }

    #[test]
    fn gso_super_datagrams_are_split_back_exactly_by_a_gro_receiver() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_gro(&socket2::SockRef::from(&rx)).unwrap();
        // 60 equal requests go as one super-datagram, then a run of three
        // 8192-byte ones, then one odd size on its own: 64 in one batch.
        let mut sizes = vec![64usize; 60];
        sizes.extend([8192, 8192, 8192, 100]);
        assert!(
            send_requests(bound(&rx), &sizes, true),
            "GSO stays on over loopback"
        );
        let (got, calls) = receive(&rx, &mut RecvBatch::coalesced(), sizes.len());
        let want: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| (s, i as u64 + 1))
            .collect();
        assert_eq!(got, want);
        // Whole runs arrived coalesced: at most 3 messages, in one call.
        assert_eq!(calls, 1);
    }

    #[test]
    fn ipv6_gso_super_datagrams_are_split_back_by_a_gro_receiver() {
        // GSO and GRO work over IPv6 as over IPv4.
        let rx = UdpSocket::bind("[::1]:0").unwrap();
        enable_gro(&socket2::SockRef::from(&rx)).unwrap();
        let mut sizes = vec![64usize; 60];
        sizes.extend([8192, 8192, 8192, 100]);
        assert!(send_requests(bound(&rx), &sizes, true), "GSO stays on");
        let (got, calls) = receive(&rx, &mut RecvBatch::coalesced(), sizes.len());
        assert_eq!(got.len(), 64);
        assert_eq!(calls, 1);
    }

    /// Every datagram's TTL, read beside it: the sender's (mx's own, set by
    /// [`count_hops`](super::super::count_hops)) on loopback, where no
    /// router counts it down; and in a GRO read, beside the segment size,
    /// both in one control buffer. A socket that did not ask reads 0.
    #[test]
    fn a_socket_counting_hops_reads_each_datagram_s_ttl_beside_its_segment_size() {
        use super::super::{INITIAL_TTL, count_hops, hops_of_ttl};
        for at in ["127.0.0.1:0", "[::1]:0"] {
            let rx = UdpSocket::bind(at).unwrap();
            let rx_ref = socket2::SockRef::from(&rx);
            count_hops(&rx_ref).unwrap();
            enable_gro(&rx_ref).unwrap();
            // What it sends leaves with the TTL it counts from.
            let sends_with = if at.starts_with('[') {
                rx_ref.unicast_hops_v6().unwrap()
            } else {
                rx_ref.ttl_v4().unwrap()
            };
            assert_eq!(sends_with, u32::from(INITIAL_TTL));
            let mut sizes = vec![64usize; 60];
            sizes.extend([100, 1000]);
            assert!(send_requests(bound(&rx), &sizes, true), "GSO stays on");
            let mut batch = RecvBatch::coalesced();
            let mut got = Vec::new();
            while got.len() < sizes.len() {
                batch.recv(std::os::fd::AsRawFd::as_raw_fd(&rx)).unwrap();
                got.extend(batch.datagrams().map(|d| (d.len, d.ttl)));
            }
            let want: Vec<_> = sizes.iter().map(|&s| (s, INITIAL_TTL)).collect();
            assert_eq!(got, want, "{at}");
            assert_eq!(hops_of_ttl(got[0].1), 0);
            // Asked for nothing: no TTL.
            let plain = UdpSocket::bind(at).unwrap();
            send_requests(bound(&plain), &[64, 64], false);
            let mut headers = RecvBatch::headers();
            let mut ttls = Vec::new();
            while ttls.len() < 2 {
                headers
                    .recv(std::os::fd::AsRawFd::as_raw_fd(&plain))
                    .unwrap();
                ttls.extend(headers.datagrams().map(|d| d.ttl));
            }
            assert_eq!(ttls, [0, 0], "{at}");
        }
    }

    /// Every datagram's arrival time, read beside its TTL and segment size
    /// (the three in one control buffer): when it reached the host, not
    /// when it was read, 300 ms later. A socket that did not ask reads 0.
    #[test]
    fn a_socket_stamping_arrivals_reads_when_each_datagram_came_not_when_it_was_read() {
        use super::super::{INITIAL_TTL, count_hops, stamp_arrivals};
        let wall_ns = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        };
        for at in ["127.0.0.1:0", "[::1]:0"] {
            let rx = UdpSocket::bind(at).unwrap();
            let rx_ref = socket2::SockRef::from(&rx);
            count_hops(&rx_ref).unwrap();
            enable_gro(&rx_ref).unwrap();
            stamp_arrivals(&rx_ref).unwrap();
            let mut sizes = vec![64usize; 60];
            sizes.extend([100, 1000]);
            let before = wall_ns();
            assert!(send_requests(bound(&rx), &sizes, true), "GSO stays on");
            let after = wall_ns();
            std::thread::sleep(std::time::Duration::from_millis(300));
            let mut batch = RecvBatch::coalesced();
            let mut got = Vec::new();
            while got.len() < sizes.len() {
                batch.recv(std::os::fd::AsRawFd::as_raw_fd(&rx)).unwrap();
                got.extend(batch.datagrams().map(|d| (d.len, d.ttl, d.arrived_ns)));
            }
            for &(len, ttl, arrived) in &got {
                assert_eq!(ttl, INITIAL_TTL, "{at}");
                assert!(
                    (before..=after).contains(&arrived),
                    "{at}: a {len}-byte datagram stamped {arrived}, sent in {before}..={after}"
                );
            }
            // Asked for nothing: no time.
            let plain = UdpSocket::bind(at).unwrap();
            send_requests(bound(&plain), &[64], false);
            let mut headers = RecvBatch::headers();
            while headers
                .recv(std::os::fd::AsRawFd::as_raw_fd(&plain))
                .unwrap()
                == 0
            {}
            let stamps: Vec<u64> = headers.datagrams().map(|d| d.arrived_ns).collect();
            assert_eq!(stamps, [0], "{at}");
        }
    }

    #[test]
    fn hops_count_down_from_the_initial_ttl_systems_use() {
        use super::super::hops_of_ttl;
        assert_eq!(
            [64, 61, 1, 128, 120, 255, 250].map(hops_of_ttl),
            [0, 3, 63, 0, 8, 0, 5]
        );
    }

    #[test]
    fn a_coalesced_batch_reads_plain_datagrams_too() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        send_requests(bound(&rx), &[32, 1000, 65507], false);
        let (got, _) = receive(&rx, &mut RecvBatch::coalesced(), 3);
        assert_eq!(got, [(32, 1), (1000, 2), (65507, 3)]);
    }

    #[test]
    fn coalesced_slots_start_in_cache_sets_of_their_own() {
        // The sets of a 512 KiB 8-way L2 with 64-byte lines: 1024 of them,
        // addresses 64 KiB apart share one. perf saw slots 64 KiB apart make
        // the kernel's copy into them (`_copy_to_iter`) 18% of a GSO agent's
        // time instead of 6%.
        let batch = RecvBatch::coalesced();
        let slots: Vec<&[u8]> = (0..batch.raw.slots()).map(|i| batch.raw.slot(i)).collect();
        let sets: std::collections::HashSet<usize> = slots
            .iter()
            .map(|slot| (slot.as_ptr() as usize / 64) % 1024)
            .collect();
        assert_eq!(sets.len(), COALESCED_SLOTS);
        // Every slot still holds a whole super-datagram, apart from the next.
        for pair in slots.windows(2) {
            let gap = pair[1].as_ptr() as usize - pair[0].as_ptr() as usize;
            assert!(gap >= COALESCED_SLOT && pair[0].len() == COALESCED_SLOT);
        }
    }
}
