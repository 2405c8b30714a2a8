//! The kernel UDP fast path: sockets, and datagrams moved in batches with
//! recvmmsg/sendmmsg. All of the agent's `unsafe` lives here, fenced behind
//! safe types that own their buffers; nothing here allocates per packet.
//!
//! - Receiving copies only the first [`RECV_COPY`] bytes of each datagram (the
//!   MXO1 header is all we read) and asks the kernel for the true length with
//!   `MSG_TRUNC`, so an 8 KB reply costs a 64-byte copy and is still counted
//!   to the byte.
//! - Sending lays a small datagram (up to [`CONTIGUOUS_MAX`] bytes) out whole,
//!   a run of them back to back, so the kernel copies one piece per message
//!   rather than two per datagram. A larger one is gathered from two pieces:
//!   its own 32-byte header and a shared, read-only slice of zeros for the
//!   padding, which is then never copied in user space.
//! - Addresses are IPv4 or IPv6: the batches hold a `sockaddr_storage` per
//!   datagram, read and written in place, so either family costs the same.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

use nix::sys::socket::{setsockopt, sockopt};
use nix::time::{ClockId, clock_gettime};
use socket2::{Domain, Protocol, Socket, Type};

use super::wire::HEADER_LEN;
use crate::matrix::{Dscp, MAX_PACKET_BYTES};

/// Datagrams per recvmmsg/sendmmsg call: the syscall's cost spread over many
/// datagrams. 256 is four full GSO messages ([`GSO_MAX_SEGMENTS`] each) in
/// one sendmmsg, and the most a `u8` index can name.
pub const BATCH: usize = 256;
// (A send batch names a datagram's address by its index in a u8.)
const _: () = assert!(BATCH <= 256);

/// Bytes copied out of each received datagram: the header and some slack.
pub const RECV_COPY: usize = 64;

/// Zeros that pad every datagram past its header, shared by all sends.
pub fn padding() -> Box<[u8]> {
    vec![0u8; MAX_PACKET_BYTES as usize].into_boxed_slice()
}

/// One received datagram: the copied prefix, its true length and its sender.
pub struct Datagram<'a> {
    pub head: &'a [u8],
    pub len: usize,
    pub from: SocketAddr,
    /// The first datagram of its message. The rest of a message (a GRO
    /// super-datagram cut apart) come from the same sender: what is looked
    /// up per sender is looked up here.
    pub starts_message: bool,
}

/// Most datagrams one GSO send carries (the kernel's UDP_MAX_SEGMENTS was 64
/// before Linux 6.9; 64 is accepted everywhere).
pub const GSO_MAX_SEGMENTS: usize = 64;

/// Largest UDP payload one (super-)datagram can carry: 65535 - 20 - 8 (IPv4;
/// IPv6 allows 20 more), the same bound the matrix puts on one packet.
const MAX_UDP_PAYLOAD: usize = MAX_PACKET_BYTES as usize;

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

/// Room for one control message carrying one int (UDP_GRO) or u16 (UDP_SEGMENT):
/// CMSG_SPACE(4) on 64-bit Linux, laid out as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy)]
struct Control {
    hdr: libc::cmsghdr,
    data: [u8; 8],
}

/// Buffers for one recvmmsg call, reused call after call.
///
/// Two shapes: [`headers`](Self::headers) copies the first [`RECV_COPY`] bytes
/// of up to [`BATCH`] datagrams (with `MSG_TRUNC` for their true length);
/// [`coalesced`](Self::coalesced) takes whole GRO super-datagrams (a socket with
/// UDP_GRO set gets up to 64 datagrams of one sender in one slot, their segment
/// size in a control message) and splits them back into datagrams.
pub struct RecvBatch {
    bufs: Box<[u8]>,
    slot_len: usize,
    /// Bytes from one slot's start to the next's (`slot_len`, skewed for
    /// coalesced slots: [`SLOT_SKEW`]).
    stride: usize,
    slots: usize,
    addrs: [libc::sockaddr_storage; BATCH],
    iovs: [libc::iovec; BATCH],
    controls: [Control; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
    count: usize,
    /// Datagrams read in coalesced (GRO) messages of several, since the
    /// last [`take_coalesced`](Self::take_coalesced).
    read_coalesced: u64,
}

// SAFETY: the raw pointers inside the mmsghdr/iovec arrays point into the
// batch itself (or the caller's padding) and are rewritten before every
// syscall; they are never dereferenced by Rust code. Moving a batch to
// another thread therefore moves nothing that is shared.
unsafe impl Send for RecvBatch {}
// SAFETY: as for RecvBatch.
unsafe impl Send for SendBatch {}

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
        let stride = if slot_len > RECV_COPY {
            slot_len + SLOT_SKEW
        } else {
            slot_len
        };
        // SAFETY: every field but `bufs` is plain old data (C structs made of
        // integers and pointers), for which all-zero bytes are a valid value;
        // `bufs` is written before the box is used.
        let mut batch: Box<RecvBatch> = unsafe {
            let mut b = Box::<RecvBatch>::new_zeroed();
            std::ptr::addr_of_mut!((*b.as_mut_ptr()).bufs)
                .write(vec![0u8; slots * stride].into_boxed_slice());
            b.assume_init()
        };
        batch.slot_len = slot_len;
        batch.stride = stride;
        batch.slots = slots;
        // The buffers never move: point the headers at them once. The kernel
        // writes back only msg_len, msg_namelen, msg_controllen and msg_flags,
        // which `recv` resets for the entries it used.
        for i in 0..slots {
            let buf = batch.bufs[i * stride..].as_mut_ptr();
            batch.iovs[i] = libc::iovec {
                iov_base: buf.cast(),
                iov_len: slot_len,
            };
            let name: *mut libc::sockaddr_storage = &mut batch.addrs[i];
            let iov: *mut libc::iovec = &mut batch.iovs[i];
            let control: *mut Control = &mut batch.controls[i];
            let hdr = &mut batch.hdrs[i].msg_hdr;
            hdr.msg_name = name.cast();
            hdr.msg_namelen = SOCKADDR_LEN;
            hdr.msg_iov = iov;
            hdr.msg_iovlen = 1;
            hdr.msg_control = control.cast();
            hdr.msg_controllen = CONTROL_LEN;
        }
        batch
    }

    /// Whether the last call filled every slot (more may be waiting).
    pub fn was_full(&self) -> bool {
        self.count == self.slots
    }

    /// Receives up to a batch without blocking; returns the messages read (a
    /// coalesced message holds several datagrams), `Ok(0)` when none is
    /// waiting. Errors other than "would block" are returned (e.g.
    /// ECONNREFUSED left on a connected socket by an ICMP port-unreachable).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for hdr in &mut self.hdrs[..self.count] {
            hdr.msg_hdr.msg_namelen = SOCKADDR_LEN;
            hdr.msg_hdr.msg_controllen = CONTROL_LEN;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        self.count = 0;
        // SAFETY: the first `slots` headers were initialised in `with_slots`;
        // their name, iovec and control pointers point into this boxed batch,
        // which outlives the call; the kernel writes at most `msg_namelen`,
        // `iov_len` and `msg_controllen` bytes through them.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.slots as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        self.count = batch_result(n)?;
        for i in 0..self.count {
            // Only a GRO message carries control data.
            if self.hdrs[i].msg_hdr.msg_controllen != 0
                && let Some(segment) = self.gro_segment(i).filter(|&s| s > 0)
            {
                let len = self.hdrs[i].msg_len as usize;
                if len > segment {
                    self.read_coalesced += len.div_ceil(segment) as u64;
                }
            }
        }
        Ok(self.count)
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
            batch: self,
            next_message: 0,
            slot: &[],
            from: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            len: 0,
            segment: 1,
            at: 0,
            end: 0,
        }
    }

    /// The segment size the kernel reported for a coalesced message `i`.
    fn gro_segment(&self, i: usize) -> Option<usize> {
        let hdr = &self.hdrs[i].msg_hdr;
        if hdr.msg_controllen == 0 {
            // The common case, and every one on a socket without UDP_GRO.
            return None;
        }
        // SAFETY: the CMSG_* helpers read within msg_control..+msg_controllen,
        // which the kernel filled (or left at zero length) in the last call.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == UDP_GRO {
                    let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                    return usize::try_from(data.read_unaligned()).ok();
                }
                cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
            }
        }
        None
    }
}

/// The datagrams of one receive batch, in order: a plain message is one, a
/// GRO message is cut at its segment size (the last segment may be shorter).
/// A hand-written iterator: this runs once per datagram on the hot path.
pub struct Datagrams<'a> {
    batch: &'a RecvBatch,
    next_message: usize,
    /// The current message's slot, sender, length and segment size.
    slot: &'a [u8],
    from: SocketAddr,
    len: usize,
    segment: usize,
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
            let batch = self.batch;
            if i >= batch.count {
                return None;
            }
            self.next_message += 1;
            // With MSG_TRUNC, msg_len is the real length even when only part
            // of it was copied.
            self.len = batch.hdrs[i].msg_len as usize;
            self.segment = batch.gro_segment(i).unwrap_or(self.len).max(1);
            let at = i * batch.stride;
            self.slot = &batch.bufs[at..at + batch.slot_len];
            self.from = read_sockaddr(&batch.addrs[i]);
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
        })
    }
}

const SOCKADDR_LEN: libc::socklen_t =
    std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

/// The address the kernel wrote into `storage` (AF_INET or AF_INET6; a
/// flow label it might carry is left out, so one sender is one key).
#[inline]
fn read_sockaddr(storage: &libc::sockaddr_storage) -> SocketAddr {
    if i32::from(storage.ss_family) == libc::AF_INET6 {
        // SAFETY: sockaddr_storage is large and aligned enough for every
        // sockaddr, and the family says this one is a sockaddr_in6.
        let a =
            unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
        SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(a.sin6_addr.s6_addr),
            u16::from_be(a.sin6_port),
            0,
            a.sin6_scope_id,
        ))
    } else {
        // SAFETY: as above; anything but AF_INET6 on these sockets is AF_INET.
        let a = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
        SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
            u16::from_be(a.sin_port),
        ))
    }
}

/// Writes `addr` into `storage` as the kernel reads it; returns its length.
#[inline]
fn write_sockaddr(addr: SocketAddr, storage: &mut libc::sockaddr_storage) -> libc::socklen_t {
    let at = (storage as *mut libc::sockaddr_storage).cast::<u8>();
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: the storage is large and aligned enough for any sockaddr.
            unsafe { at.cast::<libc::sockaddr_in>().write(sin) };
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above.
            unsafe { at.cast::<libc::sockaddr_in6>().write(sin6) };
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}
const CONTROL_LEN: usize = std::mem::size_of::<Control>();
// libc exports these for some Linux targets only; the values are the ABI's
// (the control messages of GSO sends and GRO reads).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Largest datagram sent as one contiguous piece of memory (header and
/// padding copied together into [`SendBatch`]'s frames); larger ones are
/// gathered from their header and the shared padding, uncopied.
///
/// Why: the kernel copies a message's iovecs one by one, and for a small
/// datagram the per-iovec cost is most of it. Two iovecs per 64-byte
/// datagram made `_copy_from_iter` a third of a GSO agent's time (perf, 64 B
/// at 700 kpps per flow); one iovec for a run of 64 datagrams is one copy of
/// 4 KB, as in the raw GSO loop. Past a couple of KB the bytes themselves
/// dominate, and copying the padding here first would copy them twice.
pub const CONTIGUOUS_MAX: usize = 2048;

/// Datagrams queued for one sendmmsg call, each its header and then the
/// batch's padding.
///
/// A datagram of up to [`CONTIGUOUS_MAX`] bytes is written whole into
/// `frames` when pushed, after the one before it, so that a run of them is
/// one piece of memory for the kernel to copy, and a send that the kernel
/// took only part of resumes without laying anything out again. Its padding
/// is written only where `frames` does not already hold it: batches of one
/// size (nearly all of them) lay their padding out once, and each datagram
/// after costs its 32-byte header.
pub struct SendBatch {
    /// `BATCH * CONTIGUOUS_MAX` bytes: the contiguous datagrams, in order.
    frames: Box<[u8]>,
    /// What pads every datagram past its header (zeros, or the file data of
    /// a disk run): [`padding_mut`](Self::padding_mut) changes it.
    padding: Box<[u8]>,
    /// The padding already in `frames`: datagrams of `laid_size` bytes at
    /// `i * laid_size` for every `i < laid_count`.
    laid_size: usize,
    laid_count: usize,
    /// Every datagram pushed since `clear` was `laid_size` bytes and
    /// contiguous: the i-th sits at `i * laid_size`.
    uniform: bool,
    /// Where in `frames` the next contiguous datagram goes.
    next_frame: usize,
    /// Where in `frames` each contiguous datagram is.
    frame_at: [u32; BATCH],
    /// Headers of the datagrams too large for `frames`, gathered with the
    /// padding when sent.
    headers: [[u8; HEADER_LEN]; BATCH],
    sizes: [usize; BATCH],
    addrs: [libc::sockaddr_storage; BATCH],
    /// Length of each datagram's address; 0 for none (a connected socket).
    addr_lens: [libc::socklen_t; BATCH],
    /// Which entry of `addrs` holds each datagram's destination: its own, or
    /// (pushed with [`push_joined`](Self::push_joined)) the one before's.
    addr_of: [u8; BATCH],
    /// At the first datagram of each run (datagrams of one size to one
    /// destination, as many as one GSO message carries): the run's length.
    /// Runs are cut as datagrams are pushed, so a send reads one entry per
    /// message, not one per datagram (a memcmp of addresses per datagram was
    /// 6% of a GSO agent's own time, a scan of flags per datagram 3%).
    run_len: [u8; BATCH],
    /// The run being extended: its first datagram, and the most it may hold.
    run_from: usize,
    run_most: usize,
    /// The destination of the last datagram pushed.
    previous_to: Option<SocketAddr>,
    /// Two per datagram (header, padding); a message points at a run of them.
    iovs: [libc::iovec; 2 * BATCH],
    controls: [Control; BATCH],
    /// Datagrams carried by each message of the last call.
    segments: [usize; BATCH],
    /// Which datagrams the last `send` got into the kernel.
    sent: [bool; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
    len: usize,
    /// Datagrams the kernel took in GSO messages of several, since the last
    /// [`take_coalesced`](Self::take_coalesced).
    sent_coalesced: u64,
}

impl SendBatch {
    /// An empty batch whose datagrams are padded with zeros.
    pub fn new() -> Box<SendBatch> {
        // SAFETY: every field but `frames`, `padding` and `previous_to` is
        // plain old data, for which all-zero bytes are a valid value (and
        // `uniform` false, `laid_count` 0: nothing laid out); those three are
        // written before the box is used.
        unsafe {
            let mut b = Box::<SendBatch>::new_zeroed();
            std::ptr::addr_of_mut!((*b.as_mut_ptr()).frames)
                .write(vec![0u8; BATCH * CONTIGUOUS_MAX].into_boxed_slice());
            std::ptr::addr_of_mut!((*b.as_mut_ptr()).padding).write(padding());
            std::ptr::addr_of_mut!((*b.as_mut_ptr()).previous_to).write(None);
            b.assume_init()
        }
    }

    /// The padding, to fill with other bytes (a disk run's file data): what
    /// was laid out with the old bytes is laid out again.
    pub fn padding_mut(&mut self) -> &mut [u8] {
        self.laid_count = 0;
        &mut self.padding
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len == BATCH
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.next_frame = 0;
        self.uniform = true;
    }

    /// Size in bytes of the `i`-th queued datagram.
    pub fn size(&self, i: usize) -> usize {
        assert!(i < self.len);
        self.sizes[i]
    }

    /// Queues a datagram of `size` bytes (32..=65507) whose header is written by
    /// `fill`; `to` is its destination, `None` on a connected socket.
    #[inline]
    pub fn push(
        &mut self,
        size: usize,
        to: Option<SocketAddr>,
        fill: impl FnOnce(&mut [u8; HEADER_LEN]),
    ) {
        let i = self.len;
        let joins = i > 0 && self.previous_to == to && self.sizes[i - 1] == size;
        fill(self.place(size, joins));
        self.addr_lens[i] = match to {
            Some(to) => write_sockaddr(to, &mut self.addrs[i]),
            None => 0,
        };
        self.addr_of[i] = i as u8;
        self.previous_to = to;
    }

    /// Queues a datagram to where the last one pushed goes (the next reply
    /// to one sender): its address is neither written nor compared again.
    #[inline]
    pub fn push_joined(&mut self, size: usize, fill: impl FnOnce(&mut [u8; HEADER_LEN])) {
        assert!(self.len > 0, "a joined datagram follows another");
        let i = self.len;
        let joins = self.sizes[i - 1] == size;
        fill(self.place(size, joins));
        self.addr_of[i] = self.addr_of[i - 1];
    }

    /// Queues `n` datagrams of `size` bytes to where the last one pushed
    /// goes, the `k`-th's header written by `fill(k, ..)`: what `n` calls of
    /// [`push_joined`](Self::push_joined) queue, with the bookkeeping done
    /// once for the `n` (sizes, addresses, runs, frames) rather than datagram
    /// by datagram, where the batch is laid out in `size` already. The
    /// replies to a GRO message of requests, a flow's batch of requests.
    ///
    /// Why: at a few Mpps per flow a worker's core is the limit; queued
    /// this way, the agents' user time per round trip at 2-6 Mpps is a third
    /// less than queued one by one (docs/performance.md).
    pub fn push_joined_run(
        &mut self,
        n: usize,
        size: usize,
        mut fill: impl FnMut(usize, &mut [u8; HEADER_LEN]),
    ) {
        assert!(self.len > 0, "a joined datagram follows another");
        assert!(self.len + n <= BATCH, "send batch is full");
        let i = self.len;
        // One alone gains nothing from the run's bookkeeping (a request
        // answered by itself, `--no-gso`).
        if !(n > 1 && self.uniform && size == self.laid_size && size == self.sizes[i - 1]) {
            for k in 0..n {
                self.push_joined(size, |h| fill(k, h));
            }
            return;
        }
        // Uniform in `size` (so `size <= CONTIGUOUS_MAX`): the k-th goes at
        // `first + k * size`, and every frame below `laid_count` holds its
        // padding.
        let end = i + n;
        self.sizes[i..end].fill(size);
        let to = self.addr_of[i - 1];
        self.addr_of[i..end].fill(to);
        // The open run takes what it has room for; new runs, the rest.
        let mut next = i;
        while next < end {
            if next - self.run_from >= self.run_most {
                self.run_from = next;
                self.run_len[next] = 0;
            }
            let take = (self.run_most - (next - self.run_from)).min(end - next);
            debug_assert!(take > 0, "a run cut with no room taken");
            self.run_len[self.run_from] += take as u8;
            next += take;
        }
        let first = self.next_frame;
        for (k, at) in self.frame_at[i..end].iter_mut().enumerate() {
            *at = (first + k * size) as u32;
        }
        self.next_frame = first + n * size;
        for k in self.laid_count.max(i)..end {
            let at = first + (k - i) * size;
            self.frames[at + HEADER_LEN..at + size]
                .copy_from_slice(&self.padding[..size - HEADER_LEN]);
        }
        self.laid_count = self.laid_count.max(end);
        self.len = end;
        for (k, frame) in self.frames[first..first + n * size]
            .chunks_exact_mut(size)
            .enumerate()
        {
            fill(
                k,
                (&mut frame[..HEADER_LEN])
                    .try_into()
                    .expect("HEADER_LEN bytes"),
            );
        }
    }

    /// Takes the next entry for a datagram of `size` bytes (`joins`: it may
    /// go in the previous one's GSO message): lays out its padding where
    /// `frames` does not hold it yet, and returns where its header goes.
    // Always: called for every datagram, and not inlined it cost a third of
    // its own instructions in saving and restoring registers.
    #[inline(always)]
    fn place(&mut self, size: usize, joins: bool) -> &mut [u8; HEADER_LEN] {
        assert!(self.len < BATCH, "send batch is full");
        assert!((HEADER_LEN..=MAX_PACKET_BYTES as usize).contains(&size));
        let i = self.len;
        self.sizes[i] = size;
        if joins && i - self.run_from < self.run_most {
            self.run_len[self.run_from] += 1;
        } else {
            self.run_from = i;
            self.run_most = (MAX_UDP_PAYLOAD / size).min(GSO_MAX_SEGMENTS);
            self.run_len[i] = 1;
        }
        self.len += 1;
        if size > CONTIGUOUS_MAX {
            // Gathered from its header and the padding: nothing in `frames`,
            // but the next contiguous one is no longer at i * size.
            self.uniform = false;
            return &mut self.headers[i];
        }
        let at = self.next_frame;
        self.next_frame += size;
        self.frame_at[i] = at as u32;
        if self.uniform && size == self.laid_size {
            if i >= self.laid_count {
                // i == laid_count: those before it are laid out.
                self.frames[at + HEADER_LEN..at + size]
                    .copy_from_slice(&self.padding[..size - HEADER_LEN]);
                self.laid_count = i + 1;
            }
        } else {
            self.uniform = false;
            self.frames[at + HEADER_LEN..at + size]
                .copy_from_slice(&self.padding[..size - HEADER_LEN]);
            // Those wholly before `at` keep their padding; this one wrote
            // over the rest.
            if let Some(before) = at.checked_div(self.laid_size) {
                self.laid_count = self.laid_count.min(before);
            }
            if i == 0 {
                // The first of its batch starts a layout of its size.
                (self.laid_size, self.laid_count, self.uniform) = (size, 1, true);
            }
        }
        (&mut self.frames[at..at + HEADER_LEN])
            .try_into()
            .expect("HEADER_LEN bytes")
    }

    /// Sends the queued datagrams, in order, until the kernel would block; the
    /// batch is left as it was (the caller clears it). A datagram the kernel
    /// refuses (EPERM from a firewall drop, ENETUNREACH, ...) is skipped and
    /// the rest still go: one refusal must not take the batch with it.
    /// [`was_sent`](Self::was_sent) tells which went.
    ///
    /// With `*gso`, each run of equal-size datagrams to one destination goes as
    /// one GSO super-datagram (UDP_SEGMENT): one trip down the stack for up to
    /// 64 datagrams, cut apart by the NIC, or kept whole over loopback and
    /// veth to a receiver with UDP_GRO. A route that cannot segment (EINVAL:
    /// segment over the path MTU; EIO: no checksum offload) turns `*gso` off
    /// and the rest goes one datagram per message.
    pub fn send(&mut self, fd: RawFd, gso: &mut bool) -> Sent {
        let mut outcome = Sent::default();
        self.sent[..self.len].fill(false);
        while outcome.tried < self.len {
            let at = outcome.tried;
            match self.send_from(fd, at, *gso) {
                Ok(0) => break,
                Ok(n) => {
                    self.sent[at..at + n].fill(true);
                    outcome.tried += n;
                    outcome.sent += n;
                }
                Err(e) if *gso && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EIO)) => {
                    *gso = false;
                }
                Err(e) => {
                    // The first message failed: its datagrams are refused.
                    let refused = self.segments[0];
                    self.sent[at..at + refused].fill(false);
                    outcome.tried += refused;
                    outcome.error.get_or_insert(e);
                }
            }
        }
        outcome
    }

    /// Whether the `i`-th datagram went in the last [`send`](Self::send).
    pub fn was_sent(&self, i: usize) -> bool {
        i < self.len && self.sent[i]
    }

    /// One sendmmsg of the datagrams from `start` on; returns datagrams taken.
    fn send_from(&mut self, fd: RawFd, start: usize, gso: bool) -> io::Result<usize> {
        let mut messages = 0;
        let mut iov = 0;
        let mut i = start;
        while i < self.len {
            let size = self.sizes[i];
            // Every message but the last a GSO send took ends a run, so
            // with GSO `i` starts one.
            let end = if gso {
                i + usize::from(self.run_len[i])
            } else {
                i + 1
            };
            debug_assert!(end > i && end <= self.len);
            let first_iov = iov;
            if size <= CONTIGUOUS_MAX {
                // The run in one piece: laid out one after another when pushed.
                let at = self.frame_at[i] as usize;
                let run = &mut self.frames[at..at + (end - i) * size];
                self.iovs[iov] = libc::iovec {
                    iov_base: run.as_mut_ptr().cast(),
                    iov_len: run.len(),
                };
                iov += 1;
            } else {
                let pad = size - HEADER_LEN;
                for header in &mut self.headers[i..end] {
                    self.iovs[iov] = libc::iovec {
                        iov_base: header.as_mut_ptr().cast(),
                        iov_len: HEADER_LEN,
                    };
                    iov += 1;
                    self.iovs[iov] = libc::iovec {
                        // The kernel only reads through this pointer.
                        iov_base: self.padding.as_ptr() as *mut libc::c_void,
                        iov_len: pad,
                    };
                    iov += 1;
                }
            }
            let hdr = &mut self.hdrs[messages].msg_hdr;
            let addr = usize::from(self.addr_of[i]);
            if self.addr_lens[addr] > 0 {
                hdr.msg_name = (&mut self.addrs[addr] as *mut libc::sockaddr_storage).cast();
                hdr.msg_namelen = self.addr_lens[addr];
            } else {
                hdr.msg_name = std::ptr::null_mut();
                hdr.msg_namelen = 0;
            }
            hdr.msg_iov = self.iovs[first_iov..].as_mut_ptr();
            hdr.msg_iovlen = iov - first_iov;
            if end - i > 1 {
                let control = &mut self.controls[messages];
                control.hdr.cmsg_level = libc::SOL_UDP;
                control.hdr.cmsg_type = UDP_SEGMENT;
                // SAFETY: CMSG_LEN is arithmetic on its argument.
                control.hdr.cmsg_len = unsafe { libc::CMSG_LEN(2) } as usize;
                control.data[..2].copy_from_slice(&(size as u16).to_ne_bytes());
                hdr.msg_control = (control as *mut Control).cast();
                hdr.msg_controllen = CONTROL_LEN;
            } else {
                hdr.msg_control = std::ptr::null_mut();
                hdr.msg_controllen = 0;
            }
            hdr.msg_flags = 0;
            self.segments[messages] = end - i;
            messages += 1;
            i = end;
        }
        // SAFETY: the first `messages` headers are initialised above and point
        // into `self`, alive for the call; the kernel only reads them.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                messages as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        let sent = batch_result(n)?;
        self.sent_coalesced += self.segments[..sent]
            .iter()
            .filter(|&&k| k > 1)
            .sum::<usize>() as u64;
        Ok(self.segments[..sent].iter().sum())
    }

    /// Datagrams sent in GSO messages of several since the last call: a
    /// software interface (veth, loopback) counts each such message as one
    /// packet, so its counts and the datagrams compare only where this is 0.
    pub fn take_coalesced(&mut self) -> u64 {
        std::mem::take(&mut self.sent_coalesced)
    }
}

/// What one [`SendBatch::send`] did: the first `tried` datagrams were
/// offered to the kernel, `sent` of them taken; the rest of the batch waits
/// for the socket to drain.
#[derive(Debug, Default)]
pub struct Sent {
    pub tried: usize,
    pub sent: usize,
    /// The first refusal, if any datagram was refused.
    pub error: Option<io::Error>,
}

/// Asks the kernel to hand this socket datagrams of one sender coalesced
/// (UDP_GRO): read them with a [`RecvBatch::coalesced`].
pub fn enable_gro(socket: &Socket) -> io::Result<()> {
    setsockopt(socket, sockopt::UdpGroSegment, &true).map_err(io::Error::from)
}

/// Marks every datagram `socket` sends with the traffic class `dscp` (the
/// TOS byte: DSCP in the six high bits, ECN zero). IPv4 sockets take IP_TOS;
/// IPv6 sockets take IPV6_TCLASS, and IP_TOS as well, which Linux applies to
/// what a dual-stack socket sends to IPv4-mapped addresses. The default class
/// sets nothing. An error is the kernel refusing: the caller fails on it,
/// since a run that asked for a class must never go out unmarked.
pub fn mark(socket: &Socket, dscp: Dscp) -> io::Result<()> {
    if dscp.is_default() {
        return Ok(());
    }
    let tos = u32::from(dscp.tos());
    let set = || -> io::Result<()> {
        if socket.domain()? == Domain::IPV6 {
            socket.set_tclass_v6(tos)?;
        }
        socket.set_tos_v4(tos)
    };
    set().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "the kernel refuses to mark a socket {} (IP_TOS / IPV6_TCLASS 0x{tos:02x}): {e}",
                dscp.label()
            ),
        )
    })
}

/// Whether this kernel has UDP GSO (Linux 4.18) and GRO (5.0). Asked of a
/// throwaway socket: a kernel without UDP_SEGMENT would not refuse the control
/// message, it would ignore it and send each run as one big datagram.
pub fn kernel_coalesces() -> bool {
    let Ok(socket) = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)) else {
        return false;
    };
    setsockopt(&socket, sockopt::UdpGsoSegment, &0).is_ok()
        && setsockopt(&socket, sockopt::UdpGroSegment, &true).is_ok()
}

/// Whether GSO/GRO can carry datagrams of `size` bytes: two must fit in one.
pub fn coalescible(size: usize) -> bool {
    size * 2 <= MAX_UDP_PAYLOAD
}

/// A recvmmsg/sendmmsg return value: datagrams moved, 0 for "would block".
fn batch_result(n: libc::c_int) -> io::Result<usize> {
    if n >= 0 {
        return Ok(n as usize);
    }
    let err = io::Error::last_os_error();
    if err.kind() == io::ErrorKind::WouldBlock {
        Ok(0)
    } else {
        Err(err)
    }
}

/// Socket buffer sizes asked for with `--sndbuf` / `--rcvbuf` (0 = kernel default).
#[derive(Debug, Clone, Copy, Default)]
pub struct Buffers {
    pub send: usize,
    pub recv: usize,
}

/// Sets SO_RCVBUF/SO_SNDBUF, first with the FORCE variant so that root is not
/// capped by net.core.[rw]mem_max (no sysctl is changed: the size is this
/// socket's alone); without the privilege, the plain option and the cap apply.
fn set_buffer(socket: &Socket, recv: bool, bytes: usize) -> io::Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let bytes = bytes.min(i32::MAX as usize);
    let forced = if recv {
        setsockopt(socket, sockopt::RcvBufForce, &bytes)
    } else {
        setsockopt(socket, sockopt::SndBufForce, &bytes)
    };
    if forced.is_ok() {
        return Ok(());
    }
    if recv {
        socket.set_recv_buffer_size(bytes)
    } else {
        socket.set_send_buffer_size(bytes)
    }
}

/// A UDP socket of `addr`'s family; an IPv6 one takes IPv6 alone (a host
/// speaks one family to all its peers, see `matrix::family`).
fn udp_socket(addr: &SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    Ok(socket)
}

/// A worker's responder socket: bound to the agent's port with SO_REUSEPORT, so
/// the kernel spreads arriving requests over the workers by 4-tuple hash.
pub fn responder_socket(bind: SocketAddr, buffers: Buffers) -> io::Result<Socket> {
    let socket = udp_socket(&bind)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    set_buffer(&socket, true, buffers.recv)?;
    set_buffer(&socket, false, buffers.send)?;
    socket.set_nonblocking(true)?;
    socket.bind(&bind.into())?;
    Ok(socket)
}

/// A flow's client socket: bound to `local` (port 0 = ephemeral) so requests
/// leave from this host's matrix address, and connected to the peer, so the
/// kernel delivers only that peer's datagrams to it.
pub fn client_socket(
    local: Option<IpAddr>,
    peer: SocketAddr,
    buffers: Buffers,
) -> io::Result<Socket> {
    let socket = udp_socket(&peer)?;
    set_buffer(&socket, true, buffers.recv)?;
    set_buffer(&socket, false, buffers.send)?;
    socket.set_nonblocking(true)?;
    if let Some(ip) = local {
        socket.bind(&SocketAddr::new(ip, 0).into())?;
    }
    socket.connect(&peer.into())?;
    Ok(socket)
}

/// SO_MEMINFO (include/uapi/asm-generic/socket.h; libc does not export it).
const SO_MEMINFO: libc::c_int = 55;
/// Entries of the SO_MEMINFO array (SK_MEMINFO_VARS).
const SK_MEMINFO_VARS: usize = 9;

/// How many datagrams the kernel has dropped at this socket since it opened
/// because its receive buffer was full: the socket's `sk_drops`, the counter
/// SO_RXQ_OVFL would attach to every datagram, read here once per interval
/// with SO_MEMINFO (Linux 4.6+) instead, off the hot path. `None` where the
/// kernel cannot say.
pub fn socket_drops(fd: RawFd) -> Option<u64> {
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`, which is
    // that large, and stores the length it wrote in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let drops = libc::SK_MEMINFO_DROPS as usize;
    (rc == 0 && len as usize >= (drops + 1) * 4).then(|| u64::from(info[drops]))
}

fn clock_ns(clock: ClockId) -> u64 {
    // These clocks always exist on Linux; a failure reads as 0.
    clock_gettime(clock).map_or(0, |ts| {
        ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
    })
}

/// Monotonic clock in nanoseconds: what requests carry as `t_send`.
pub fn monotonic_ns() -> u64 {
    clock_ns(ClockId::CLOCK_MONOTONIC)
}

/// CPU time this thread has used, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

#[cfg(test)]
mod tests {
    use super::super::wire::Header;
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn bound(socket: &UdpSocket) -> SocketAddr {
        socket.local_addr().unwrap()
    }

    const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);
    const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    /// Sends one request per `sizes` entry on a fresh connected socket.
    fn send_requests(to: SocketAddr, sizes: &[usize], gso: bool) -> bool {
        let tx = client_socket(Some(to.ip()), to, Buffers::default()).unwrap();
        let mut batch = SendBatch::new();
        for (i, &size) in sizes.iter().enumerate() {
            batch.push(size, None, |h| {
                Header::request(1, size as u32, 64, i as u64 + 1, 7).encode(h)
            });
        }
        let mut gso = gso;
        assert_eq!(batch.send(tx.as_raw_fd(), &mut gso).sent, sizes.len());
        gso
    }

    /// Reads `want` datagrams: (length, seq) each, checking header and sender.
    fn receive(rx: &UdpSocket, recv: &mut RecvBatch, want: usize) -> (Vec<(usize, u64)>, usize) {
        let mut got = Vec::new();
        let mut calls = 0;
        while got.len() < want {
            let n = recv.recv(rx.as_raw_fd()).unwrap();
            calls += usize::from(n > 0);
            for d in recv.datagrams() {
                let h = Header::decode(d.head).unwrap();
                assert_eq!(d.from.ip(), rx.local_addr().unwrap().ip());
                assert_eq!(h.packet_len as usize, d.len);
                got.push((d.len, h.seq));
            }
        }
        (got, calls)
    }

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
    fn a_refused_datagram_is_skipped_and_the_rest_still_go() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = bound(&rx);
        let tx = responder_socket(SocketAddr::new(V4, 0), Buffers::default()).unwrap();
        let mut batch = SendBatch::new();
        // The kernel refuses a datagram to port 0 (EINVAL), and only that one.
        let port_zero = SocketAddr::new(V4, 0);
        for (seq, dest) in [(1, to), (2, port_zero), (3, to), (4, to)] {
            batch.push(64, Some(dest), |h| {
                Header::request(1, 64, 64, seq, 7).encode(h)
            });
        }
        let mut gso = false;
        let outcome = batch.send(tx.as_raw_fd(), &mut gso);
        assert_eq!((outcome.tried, outcome.sent), (4, 3));
        assert!(outcome.error.is_some());
        let flags: Vec<bool> = (0..4).map(|i| batch.was_sent(i)).collect();
        assert_eq!(flags, [true, false, true, true]);
        let (got, _) = receive(&rx, &mut RecvBatch::headers(), 3);
        assert_eq!(got, [(64, 1), (64, 3), (64, 4)]);
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
    fn every_datagram_is_its_header_then_the_padding_laid_out_whole_or_gathered() {
        // Sizes each side of CONTIGUOUS_MAX, with GSO and without, read by a
        // plain socket: byte for byte, the header and then the padding's
        // first bytes (a pattern, so a misplaced copy shows).
        let pattern: Box<[u8]> = (0..MAX_PACKET_BYTES as usize)
            .map(|i| (i % 251) as u8)
            .collect();
        let sizes = [64usize, 64, 64, CONTIGUOUS_MAX, CONTIGUOUS_MAX + 1, 8192];
        for gso in [false, true] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let tx = client_socket(Some(V4), bound(&rx), Buffers::default()).unwrap();
            let mut batch = SendBatch::new();
            batch.padding_mut().copy_from_slice(&pattern);
            for (i, &size) in sizes.iter().enumerate() {
                batch.push(size, None, |h| {
                    Header::request(1, size as u32, 64, i as u64 + 1, 7).encode(h)
                });
            }
            let mut gso_on = gso;
            let sent = batch.send(tx.as_raw_fd(), &mut gso_on).sent;
            assert_eq!(sent, sizes.len());
            let mut buf = vec![0u8; 65536];
            for (i, &size) in sizes.iter().enumerate() {
                let n = rx.recv(&mut buf).unwrap();
                assert_eq!(n, size, "gso {gso}, datagram {i}");
                let h = Header::decode(&buf[..HEADER_LEN]).unwrap();
                assert_eq!(h.seq, i as u64 + 1);
                assert!(
                    buf[HEADER_LEN..n] == pattern[..n - HEADER_LEN],
                    "gso {gso}, datagram {i}: the padding"
                );
            }
        }
    }

    #[test]
    fn padding_laid_out_by_one_batch_serves_the_next_only_where_it_still_holds() {
        // One batch reused as the agent reuses it: runs of one size, then
        // sizes that write over part of what was laid out, then the first
        // size again (longer than before), new padding bytes, and a
        // datagram too large for the frames first. Every datagram must carry,
        // byte for byte, its header and then the padding in force.
        let pattern = |salt: usize| -> Vec<u8> {
            (0..MAX_PACKET_BYTES as usize)
                .map(|i| ((i + salt) % 251) as u8)
                .collect()
        };
        let batches: [&[usize]; 11] = [
            &[64; 5],
            &[64; 3],
            &[100, 64, 64],
            &[64; 8],
            &[64, 100, 64],
            &[64; 4],
            &[64; 4],
            &[64, 100, 64],
            &[4000, 64, 64],
            &[64; 4],
            &[48, 48, 64, 64, 64],
        ];
        for gso in [false, true] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let tx = client_socket(Some(V4), bound(&rx), Buffers::default()).unwrap();
            let mut batch = SendBatch::new();
            let mut seq = 0u64;
            let mut buf = vec![0u8; 65536];
            for (b, sizes) in batches.iter().enumerate() {
                // New padding before the seventh batch: all laid out again.
                let salt = if b >= 6 { 7 } else { 0 };
                if b == 6 {
                    batch.padding_mut().copy_from_slice(&pattern(salt));
                } else if b == 0 {
                    batch.padding_mut().copy_from_slice(&pattern(0));
                }
                batch.clear();
                for &size in *sizes {
                    seq += 1;
                    batch.push(size, None, |h| {
                        Header::request(1, size as u32, 64, seq, 7).encode(h)
                    });
                }
                let mut gso_on = gso;
                assert_eq!(batch.send(tx.as_raw_fd(), &mut gso_on).sent, sizes.len());
                let want = pattern(salt);
                for (i, &size) in sizes.iter().enumerate() {
                    let n = rx.recv(&mut buf).unwrap();
                    assert_eq!(n, size, "gso {gso}, batch {b}, datagram {i}");
                    assert_eq!(
                        Header::decode(&buf[..HEADER_LEN]).unwrap().seq,
                        seq - (sizes.len() - 1 - i) as u64
                    );
                    assert!(
                        buf[HEADER_LEN..n] == want[..n - HEADER_LEN],
                        "gso {gso}, batch {b}, datagram {i}: the padding"
                    );
                }
            }
        }
    }

    #[test]
    fn gso_to_a_plain_receiver_arrives_as_single_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        send_requests(bound(&rx), &[200; 10], true);
        let (got, _) = receive(&rx, &mut RecvBatch::headers(), 10);
        assert_eq!(got, (1..=10).map(|seq| (200, seq)).collect::<Vec<_>>());
    }

    #[test]
    fn a_full_receive_buffer_is_counted_as_socket_drops() {
        let rx = responder_socket(
            SocketAddr::new(V4, 0),
            Buffers {
                send: 0,
                recv: 4096,
            },
        )
        .unwrap();
        let to = rx.local_addr().unwrap().as_socket().unwrap();
        assert_eq!(socket_drops(rx.as_raw_fd()), Some(0));
        // A few KiB of buffer cannot hold 200 unread datagrams of 1000 bytes.
        for _ in 0..4 {
            send_requests(to, &[1000; 50], false);
        }
        let drops = socket_drops(rx.as_raw_fd()).unwrap();
        assert!(drops > 100, "{drops} dropped");
    }

    #[test]
    fn marking_sets_the_tos_byte_for_the_sockets_family() {
        let ef = Dscp::parse("EF").unwrap();
        let v4 = client_socket(Some(V4), SocketAddr::new(V4, 9), Buffers::default()).unwrap();
        mark(&v4, ef).unwrap();
        assert_eq!(v4.tos_v4().unwrap(), 0xb8);
        let v6 = client_socket(Some(V6), SocketAddr::new(V6, 9), Buffers::default()).unwrap();
        mark(&v6, ef).unwrap();
        assert_eq!(
            (v6.tclass_v6().unwrap(), v6.tos_v4().unwrap()),
            (0xb8, 0xb8)
        );
        // The default class touches nothing.
        let plain = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        mark(&plain, Dscp::default()).unwrap();
        assert_eq!(plain.tos_v4().unwrap(), 0);
    }

    #[test]
    fn a_socket_the_kernel_will_not_mark_is_an_error_naming_the_class() {
        // A Unix socket has no IP header: the kernel refuses IP_TOS on it, as
        // it would on an IP socket where the option were not allowed.
        let (unix, _) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let err = mark(
            &Socket::from(std::os::fd::OwnedFd::from(unix)),
            Dscp::parse("46").unwrap(),
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "the kernel refuses to mark a socket DSCP 46 (EF) (IP_TOS / IPV6_TCLASS 0xb8): "
            ),
            "{err}"
        );
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

    #[test]
    fn replies_go_to_each_ipv6_sender_and_name_it() {
        // A responder on ::1 answers two senders: each reply goes to its own
        // sender (a run to one destination never takes the other's datagrams),
        // and each sender is read back as the address it sent from.
        let responder = responder_socket(SocketAddr::new(V6, 0), Buffers::default()).unwrap();
        let at = responder.local_addr().unwrap().as_socket().unwrap();
        assert!(at.is_ipv6());
        let (a, b) = (
            UdpSocket::bind("[::1]:0").unwrap(),
            UdpSocket::bind("[::1]:0").unwrap(),
        );
        a.send_to(&[0u8; 32], at).unwrap();
        b.send_to(&[0u8; 32], at).unwrap();
        let mut recv = RecvBatch::headers();
        let mut from = Vec::new();
        while from.len() < 2 {
            recv.recv(responder.as_raw_fd()).unwrap();
            from.extend(recv.datagrams().map(|d| d.from));
        }
        from.sort();
        let mut want = vec![bound(&a), bound(&b)];
        want.sort();
        assert_eq!(from, want);
        let mut batch = SendBatch::new();
        for (seq, to) in [(1, want[0]), (2, want[0]), (3, want[1])] {
            batch.push(64, Some(to), |h| {
                Header::request(1, 64, 64, seq, 7).encode(h)
            });
        }
        let mut gso = true;
        let sent = batch.send(responder.as_raw_fd(), &mut gso);
        assert_eq!(sent.sent, 3);
        let seqs = |s: &UdpSocket, want| {
            s.set_nonblocking(false).unwrap();
            // A reply sent to the wrong socket never comes: fail, not hang.
            s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let mut buf = [0u8; 128];
            (0..want)
                .map(|_| {
                    let (n, from) = s.recv_from(&mut buf).expect("a reply in 2 s");
                    assert_eq!((n, from), (64, at));
                    Header::decode(&buf[..n]).unwrap().seq
                })
                .collect::<Vec<_>>()
        };
        let first = if bound(&a) == want[0] { &a } else { &b };
        let second = if bound(&a) == want[0] { &b } else { &a };
        assert_eq!(seqs(first, 2), [1, 2]);
        assert_eq!(seqs(second, 1), [3]);
    }

    #[test]
    fn sockets_take_the_family_of_their_address() {
        let v6 = client_socket(Some(V6), SocketAddr::new(V6, 9), Buffers::default()).unwrap();
        assert_eq!(v6.domain().unwrap(), Domain::IPV6);
        assert!(v6.only_v6().unwrap(), "an IPv6 flow takes IPv6 alone");
        let v4 = responder_socket(SocketAddr::new(V4, 0), Buffers::default()).unwrap();
        assert_eq!(v4.domain().unwrap(), Domain::IPV4);
        // A local address of the other family cannot be bound.
        assert!(client_socket(Some(V4), SocketAddr::new(V6, 9), Buffers::default()).is_err());
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
        let sets: std::collections::HashSet<usize> = batch.iovs[..batch.slots]
            .iter()
            .map(|iov| (iov.iov_base as usize / 64) % 1024)
            .collect();
        assert_eq!(sets.len(), COALESCED_SLOTS);
        // Every slot still holds a whole super-datagram, apart from the next.
        for pair in batch.iovs[..batch.slots].windows(2) {
            let gap = pair[1].iov_base as usize - pair[0].iov_base as usize;
            assert!(gap >= COALESCED_SLOT && pair[0].iov_len == COALESCED_SLOT);
        }
    }

    #[test]
    fn a_joined_run_queues_what_as_many_joined_pushes_queue() {
        // The same datagrams queued two ways: one push_joined each, and
        // push_joined_run. 64-byte runs past the 64 one GSO message carries
        // (and past a batch laid out before in that size), a 2,000-byte run
        // past its 32 (the batch no longer of one size: queued one by one),
        // and a datagram too large for the frames. Both batches send the same
        // messages, and the same datagrams arrive.
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // 177 datagrams at once: past the default 208 KiB of skbs.
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(1 << 20)
            .unwrap();
        let responder = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = bound(&rx);
        let pieces: [(usize, usize); 5] = [(64, 100), (64, 30), (2000, 40), (3000, 2), (64, 5)];
        // The messages a GSO send makes of the batch: its runs.
        let runs = |batch: &SendBatch| {
            let (mut runs, mut i) = (Vec::new(), 0);
            while i < batch.len {
                runs.push(batch.run_len[i]);
                i += usize::from(batch.run_len[i]);
            }
            runs
        };
        let queue = |batch: &mut SendBatch, by_run: bool| {
            batch.clear();
            let mut seq = 0u64;
            for (size, n) in pieces {
                let fill = |seq: u64| {
                    move |h: &mut [u8; HEADER_LEN]| {
                        Header::request(1, size as u32, 64, seq, 7).encode(h)
                    }
                };
                seq += 1;
                if batch.is_empty() {
                    batch.push(size, Some(to), fill(seq));
                } else {
                    batch.push_joined(size, fill(seq));
                }
                if by_run {
                    let from = seq;
                    batch.push_joined_run(n - 1, size, |k, h| fill(from + 1 + k as u64)(h));
                    seq += n as u64 - 1;
                } else {
                    for _ in 1..n {
                        seq += 1;
                        batch.push_joined(size, fill(seq));
                    }
                }
            }
            seq
        };
        let mut recv = RecvBatch::headers();
        for gso in [true, false] {
            let mut messages = Vec::new();
            let mut arrived = Vec::new();
            for by_run in [false, true] {
                // The second round finds the frames laid out by the first.
                let mut batch = SendBatch::new();
                for _ in 0..2 {
                    let queued = queue(&mut batch, by_run);
                    assert_eq!(batch.len() as u64, queued);
                    let mut on = gso;
                    let sent = batch.send(responder.as_raw_fd(), &mut on);
                    assert_eq!((sent.sent, on), (batch.len(), gso));
                    messages.push(runs(&batch));
                    let mut got = Vec::new();
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                    while got.len() < batch.len() && std::time::Instant::now() < deadline {
                        recv.recv(rx.as_raw_fd()).unwrap();
                        for d in recv.datagrams() {
                            got.push((d.len, Header::decode(d.head).unwrap().seq));
                        }
                    }
                    arrived.push(got);
                }
            }
            // 130 of 64 bytes in runs of up to 64, 40 of 2,000 in runs of
            // up to 32, then the 3,000-byte pair and the last five.
            for m in &messages {
                assert_eq!(m, &[64, 64, 2, 32, 8, 2, 5], "gso {gso}");
            }
            assert_eq!(arrived[0].len(), 177);
            for got in &arrived[1..] {
                assert_eq!(got, &arrived[0], "gso {gso}");
            }
        }
    }

    #[test]
    fn joined_datagrams_go_where_the_first_of_their_run_went_across_cut_runs() {
        // 40 replies to one receiver, the first addressed, the rest joined:
        // a size change cuts them (seq 30), and with GSO so does the most
        // one super-datagram carries (32 of 2,000 bytes): the later runs go
        // with the first's address. Then a second receiver, addressed, and
        // its joined replies.
        let (a, b) = (
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        );
        let responder = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fill = |seq: u64, size: usize| {
            move |h: &mut [u8; HEADER_LEN]| Header::request(1, size as u32, 64, seq, 7).encode(h)
        };
        for gso in [true, false] {
            let mut batch = SendBatch::new();
            let mut want_a = Vec::new();
            for seq in 1..=40 {
                let size = if seq == 30 { 100 } else { 2000 };
                if seq == 1 {
                    batch.push(size, Some(bound(&a)), fill(seq, size));
                } else {
                    batch.push_joined(size, fill(seq, size));
                }
                want_a.push((size, seq));
            }
            batch.push(64, Some(bound(&b)), fill(41, 64));
            for seq in 42..=50 {
                batch.push_joined(64, fill(seq, 64));
            }
            let mut on = gso;
            let sent = batch.send(responder.as_raw_fd(), &mut on);
            assert_eq!((sent.sent, on), (50, gso));
            let mut recv = RecvBatch::headers();
            let mut read = |s: &UdpSocket, want: usize| {
                let mut got = Vec::new();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while got.len() < want && std::time::Instant::now() < deadline {
                    recv.recv(s.as_raw_fd()).unwrap();
                    for d in recv.datagrams() {
                        assert_eq!(d.from, bound(&responder));
                        got.push((d.len, Header::decode(d.head).unwrap().seq));
                    }
                }
                got
            };
            assert_eq!(read(&a, 40), want_a, "gso {gso}");
            let want_b: Vec<_> = (41..=50).map(|seq| (64, seq)).collect();
            assert_eq!(read(&b, 10), want_b, "gso {gso}");
        }
    }
}
