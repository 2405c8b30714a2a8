//! The kernel's side of the UDP fast path, and the crate's only `unsafe`:
//! the recvmmsg/sendmmsg calls, the C structs they read and write
//! (`mmsghdr`, `iovec`, control messages, `sockaddr_storage`), and one
//! getsockopt. Each type here is safe to use from outside: every pointer
//! the kernel is handed points into memory that outlives the call, and
//! nothing here allocates per datagram.
//!
//! - [`RecvSlots`] owns a receive batch's buffers together with the headers
//!   pointing into them, so no caller can point the kernel anywhere else.
//! - [`Outgoing`] builds one sendmmsg from borrowed pieces of memory: the
//!   borrows last until [`Outgoing::send`], so the pieces outlive the call.
//! - [`RawAddr`] is a socket address as the kernel reads it.

// The one room where `unsafe` is allowed (lib.rs denies it everywhere
// else): what cannot be said in safe Rust is said here, each block with
// the reason it holds.
#![allow(unsafe_code)]

use std::io;
use std::marker::PhantomData;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

use super::BATCH;

// libc exports these for some Linux targets only; the values are the ABI's
// (the control messages of GSO sends and GRO reads).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// SO_MEMINFO (include/uapi/asm-generic/socket.h; libc does not export it).
const SO_MEMINFO: libc::c_int = 55;
/// Entries of the SO_MEMINFO array (SK_MEMINFO_VARS).
const SK_MEMINFO_VARS: usize = 9;

const SOCKADDR_LEN: libc::socklen_t =
    std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

/// Room for one control message carrying one int (UDP_GRO) or u16 (UDP_SEGMENT):
/// CMSG_SPACE(4) on 64-bit Linux, laid out as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy)]
struct Control {
    hdr: libc::cmsghdr,
    data: [u8; 8],
}

const CONTROL_LEN: usize = std::mem::size_of::<Control>();

/// CMSG_SPACE(sizeof(struct timespec)) on 64-bit Linux: a header of 16
/// bytes and the 16 of a timespec.
const TIMESPEC_CONTROL_LEN: usize =
    std::mem::size_of::<libc::cmsghdr>() + std::mem::size_of::<libc::timespec>();

/// Room for the control messages one read may carry: UDP_GRO's segment size
/// and the TTL (IP_TTL) or hop limit (IPV6_HOPLIMIT), an int each, and
/// CMSG_SPACE(4) (24 bytes on 64-bit Linux) apiece; and the arrival time
/// (SCM_TIMESTAMPNS, a timespec). A read with less room than its messages
/// need loses the ones that do not fit (MSG_CTRUNC).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct RecvControl([u8; 2 * CONTROL_LEN + TIMESPEC_CONTROL_LEN]);

const RECV_CONTROL_LEN: usize = std::mem::size_of::<RecvControl>();

/// What the control messages of one received message said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Said {
    /// The segment size of a coalesced (GRO) message; `None` for a plain one.
    pub segment: Option<usize>,
    /// The TTL (IPv4) or hop limit (IPv6) it arrived with; 0 when the
    /// socket did not ask for it.
    pub ttl: u8,
    /// When it reached the host (the kernel's CLOCK_REALTIME stamp, ns
    /// since the Unix epoch); 0 when the socket did not ask for it.
    pub arrived_ns: u64,
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

/// The buffers of one recvmmsg call and the headers that point the kernel
/// at them: `slots` slots of `slot_len` bytes, `stride` bytes apart, each
/// with room for its sender's address and one control message.
pub(crate) struct RecvSlots {
    bufs: Box<[u8]>,
    slot_len: usize,
    stride: usize,
    slots: usize,
    /// Messages the last call read.
    count: usize,
    /// Where this value sat when its headers were last pointed at its own
    /// fields (0: never). The headers point into `self`, so a move (into its
    /// box, say) must point them again before the kernel writes through them.
    pointed_at: usize,
    addrs: [libc::sockaddr_storage; BATCH],
    iovs: [libc::iovec; BATCH],
    controls: [RecvControl; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
}

// SAFETY: the raw pointers inside the mmsghdr/iovec arrays point into the
// value itself (and its own buffers) and are checked, and pointed again if
// it moved, before every syscall; Rust code never dereferences them. Moving
// the value to another thread therefore moves nothing that is shared.
unsafe impl Send for RecvSlots {}

impl RecvSlots {
    pub fn new(slots: usize, slot_len: usize, stride: usize) -> RecvSlots {
        assert!(slots <= BATCH && slot_len <= stride);
        RecvSlots {
            bufs: vec![0u8; slots * stride].into_boxed_slice(),
            slot_len,
            stride,
            slots,
            count: 0,
            pointed_at: 0,
            // SAFETY: these are plain old data (C structs made of integers
            // and pointers), for which all-zero bytes are a valid value; the
            // pointers are set before any syscall sees them.
            addrs: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            iovs: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            controls: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            hdrs: unsafe { std::mem::zeroed() },
        }
    }

    /// Points every header at its slot, address and control room, as the
    /// kernel will find them.
    fn point(&mut self) {
        for i in 0..self.slots {
            let buf = self.bufs[i * self.stride..].as_mut_ptr();
            self.iovs[i] = libc::iovec {
                iov_base: buf.cast(),
                iov_len: self.slot_len,
            };
            let name: *mut libc::sockaddr_storage = &mut self.addrs[i];
            let iov: *mut libc::iovec = &mut self.iovs[i];
            let control: *mut RecvControl = &mut self.controls[i];
            let entry = &mut self.hdrs[i];
            entry.msg_len = 0;
            let hdr = &mut entry.msg_hdr;
            hdr.msg_name = name.cast();
            hdr.msg_namelen = SOCKADDR_LEN;
            hdr.msg_iov = iov;
            hdr.msg_iovlen = 1;
            hdr.msg_control = control.cast();
            hdr.msg_controllen = RECV_CONTROL_LEN;
            hdr.msg_flags = 0;
        }
        self.pointed_at = self as *const RecvSlots as usize;
    }

    /// Receives up to `slots` messages without blocking (`MSG_TRUNC`: each
    /// message's length is its true one, however much of it was copied);
    /// returns the messages read, `Ok(0)` when none is waiting.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        if self.pointed_at == self as *const RecvSlots as usize {
            // The kernel writes back only msg_len, msg_namelen,
            // msg_controllen and msg_flags: reset them where it wrote.
            for hdr in &mut self.hdrs[..self.count] {
                hdr.msg_hdr.msg_namelen = SOCKADDR_LEN;
                hdr.msg_hdr.msg_controllen = RECV_CONTROL_LEN;
                hdr.msg_hdr.msg_flags = 0;
                hdr.msg_len = 0;
            }
        } else {
            self.point();
        }
        self.count = 0;
        // SAFETY: the first `slots` headers were pointed (just now, or since
        // the last move) at this value's own address, iovec and control
        // entries, and the iovecs at `bufs`; all outlive the call, and the
        // kernel writes at most `msg_namelen`, `iov_len` and
        // `msg_controllen` bytes through them.
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
        Ok(self.count)
    }

    /// Messages the last [`recv`](Self::recv) read.
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Messages one call can read.
    #[inline]
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The true length of message `i` (past what its slot holds, if longer).
    #[inline]
    pub fn len(&self, i: usize) -> usize {
        self.hdrs[i].msg_len as usize
    }

    /// Slot `i`: the first `slot_len` bytes of message `i`.
    #[inline]
    pub fn slot(&self, i: usize) -> &[u8] {
        let at = i * self.stride;
        &self.bufs[at..at + self.slot_len]
    }

    /// The sender of message `i`.
    #[inline]
    pub fn sender(&self, i: usize) -> SocketAddr {
        read_sockaddr(&self.addrs[i])
    }

    /// What the control messages of message `i` said: its GRO segment size
    /// and the TTL it arrived with, each where the socket asked for it.
    #[inline]
    pub(crate) fn said(&self, i: usize) -> Said {
        let hdr = &self.hdrs[i].msg_hdr;
        let mut said = Said::default();
        if hdr.msg_controllen == 0 {
            // A socket that asked for neither.
            return said;
        }
        // SAFETY: the CMSG_* helpers read within msg_control..+msg_controllen,
        // which the kernel filled (or left at zero length) in the last call;
        // an int (a timespec) is read only from a message long enough to
        // hold one.
        unsafe {
            let whole = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
            let whole_timespec =
                libc::CMSG_LEN(std::mem::size_of::<libc::timespec>() as u32) as usize;
            let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
            while !cmsg.is_null() {
                let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                let holds_int = (*cmsg).cmsg_len as usize >= whole;
                match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS)
                        if (*cmsg).cmsg_len as usize >= whole_timespec =>
                    {
                        let ts = libc::CMSG_DATA(cmsg)
                            .cast::<libc::timespec>()
                            .read_unaligned();
                        said.arrived_ns = (ts.tv_sec as u64)
                            .saturating_mul(1_000_000_000)
                            .saturating_add(ts.tv_nsec as u64);
                    }
                    _ if !holds_int => {}
                    (libc::SOL_UDP, UDP_GRO) => {
                        said.segment = usize::try_from(data.read_unaligned()).ok();
                    }
                    (libc::IPPROTO_IP, libc::IP_TTL)
                    | (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT) => {
                        said.ttl = u8::try_from(data.read_unaligned()).unwrap_or(0);
                    }
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
            }
        }
        said
    }
}

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

/// A datagram's destination as the kernel reads it; none (length 0) on a
/// connected socket.
#[derive(Clone, Copy)]
pub(crate) struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    /// No address.
    pub(crate) const NONE: RawAddr = RawAddr {
        // SAFETY: sockaddr_storage is integers only: all-zero is a value.
        storage: unsafe { std::mem::zeroed() },
        len: 0,
    };

    /// Writes `to` as the kernel reads it (`None`: no address).
    #[inline]
    pub fn set(&mut self, to: Option<SocketAddr>) {
        self.len = match to {
            Some(to) => write_sockaddr(to, &mut self.storage),
            None => 0,
        };
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

/// Room for the messages of one sendmmsg call: up to [`BATCH`] messages of
/// up to two pieces per datagram. Reused call after call; filled through an
/// [`Outgoing`].
pub(crate) struct MsgVec {
    iovs: [libc::iovec; 2 * BATCH],
    controls: [Control; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
}

// SAFETY: the raw pointers inside are rewritten by every `Outgoing` before
// the kernel reads them and never dereferenced by Rust code: moving the
// value to another thread moves nothing that is shared.
unsafe impl Send for MsgVec {}

impl MsgVec {
    pub fn new() -> MsgVec {
        // SAFETY: C structs of integers and pointers: all-zero is a value,
        // and no pointer here is read before an `Outgoing` writes it.
        unsafe { std::mem::zeroed() }
    }

    /// Starts the messages of one call, each of pieces borrowed for `'a`.
    #[inline]
    pub fn start<'a>(&'a mut self) -> Outgoing<'a> {
        Outgoing {
            vec: self,
            messages: 0,
            iov: 0,
            first_iov: 0,
            pieces: PhantomData,
        }
    }
}

/// One sendmmsg being laid out: pieces of memory, then the message they
/// make, message after message. The pieces and addresses are borrowed until
/// [`send`](Self::send), so every pointer handed to the kernel is alive.
pub(crate) struct Outgoing<'a> {
    vec: &'a mut MsgVec,
    messages: usize,
    iov: usize,
    /// The first piece of the message being laid out.
    first_iov: usize,
    pieces: PhantomData<&'a [u8]>,
}

impl<'a> Outgoing<'a> {
    /// Messages laid out so far.
    #[inline]
    pub fn messages(&self) -> usize {
        self.messages
    }

    /// Adds `bytes` to the message being laid out.
    #[inline]
    pub fn piece(&mut self, bytes: &'a [u8]) {
        self.vec.iovs[self.iov] = libc::iovec {
            // The kernel only reads through this pointer.
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        self.iov += 1;
    }

    /// Ends the message: the pieces added since the last one, to `to`, cut
    /// by the kernel into datagrams of `segment` bytes (UDP_SEGMENT, GSO)
    /// when given.
    #[inline]
    pub fn message(&mut self, to: &'a RawAddr, segment: Option<u16>) {
        let messages = self.messages;
        let hdr = &mut self.vec.hdrs[messages].msg_hdr;
        if to.len > 0 {
            // The kernel only reads the address.
            hdr.msg_name = (&to.storage as *const libc::sockaddr_storage)
                .cast_mut()
                .cast();
            hdr.msg_namelen = to.len;
        } else {
            hdr.msg_name = std::ptr::null_mut();
            hdr.msg_namelen = 0;
        }
        hdr.msg_iov = self.vec.iovs[self.first_iov..].as_mut_ptr();
        hdr.msg_iovlen = self.iov - self.first_iov;
        if let Some(segment) = segment {
            let control = &mut self.vec.controls[messages];
            control.hdr.cmsg_level = libc::SOL_UDP;
            control.hdr.cmsg_type = UDP_SEGMENT;
            // SAFETY: CMSG_LEN is arithmetic on its argument.
            control.hdr.cmsg_len = unsafe { libc::CMSG_LEN(2) } as usize;
            control.data[..2].copy_from_slice(&segment.to_ne_bytes());
            hdr.msg_control = (control as *mut Control).cast();
            hdr.msg_controllen = CONTROL_LEN;
        } else {
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
        }
        hdr.msg_flags = 0;
        self.messages += 1;
        self.first_iov = self.iov;
    }

    /// One sendmmsg of the messages laid out, without blocking; returns the
    /// messages the kernel took, 0 when it would block.
    pub fn send(self, fd: RawFd) -> io::Result<usize> {
        // SAFETY: the first `messages` headers were written by `message`
        // in this `Outgoing`, and point at its iovecs and controls and at
        // pieces and addresses borrowed for as long as it lives; the kernel
        // only reads them.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                self.vec.hdrs.as_mut_ptr(),
                self.messages as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        batch_result(n)
    }
}

/// The socket's SO_MEMINFO array (Linux 4.6+) and how many of its entries
/// the kernel filled; `None` where it refuses.
pub(crate) fn meminfo(fd: RawFd) -> Option<([u32; SK_MEMINFO_VARS], usize)> {
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
    (rc == 0).then_some((info, len as usize / std::mem::size_of::<u32>()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn an_address_reads_back_as_it_was_written_in_either_family() {
        let v6: SocketAddr = "[fe80::1%3]:7300".parse().unwrap();
        for to in ["127.0.0.2:9".parse().unwrap(), v6] {
            let mut raw = RawAddr::NONE;
            raw.set(Some(to));
            assert!(raw.len > 0);
            assert_eq!(read_sockaddr(&raw.storage), to);
            raw.set(None);
            assert_eq!(raw.len, 0, "none: no address for a connected socket");
        }
    }

    #[test]
    fn receive_slots_moved_after_a_call_point_the_kernel_at_their_new_place() {
        // The headers point into the value: moved (here into a box, as a
        // batch is), the next call must see them pointed again.
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut slots = RecvSlots::new(4, 64, 64);
        tx.send_to(&[1u8; 40], rx.local_addr().unwrap()).unwrap();
        while slots.recv(rx.as_raw_fd()).unwrap() == 0 {}
        assert_eq!((slots.len(0), slots.slot(0)[0]), (40, 1));
        let mut moved = Box::new(slots);
        tx.send_to(&[2u8; 100], rx.local_addr().unwrap()).unwrap();
        while moved.recv(rx.as_raw_fd()).unwrap() == 0 {}
        assert_eq!(moved.count(), 1);
        assert_eq!(moved.len(0), 100);
        assert_eq!(moved.slot(0), [2u8; 64]);
        assert_eq!(moved.sender(0), tx.local_addr().unwrap());
        assert_eq!(moved.said(0).segment, None);
    }
}
