//! The kernel UDP fast path: sockets, and datagrams moved in batches with
//! recvmmsg/sendmmsg. All of the agent's `unsafe` lives here, fenced behind
//! safe types that own their buffers; nothing here allocates per packet.
//!
//! - Receiving copies only the first [`RECV_COPY`] bytes of each datagram (the
//!   MXO1 header is all we read) and asks the kernel for the true length with
//!   `MSG_TRUNC`, so an 8 KB reply costs a 64-byte copy and is still counted
//!   to the byte.
//! - Sending gathers each datagram from two pieces: its own 32-byte header and
//!   a shared, read-only slice of zeros for the padding. Payload is never copied.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

use crate::matrix::MAX_PACKET_BYTES;
use crate::wire::HEADER_LEN;

/// Datagrams per recvmmsg/sendmmsg call. 64 amortises the syscall to a few
/// percent of the per-packet cost (lab-notes.md measured batches of 64).
pub const BATCH: usize = 64;

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
    pub from: SocketAddrV4,
}

/// Buffers for one recvmmsg call, reused call after call.
pub struct RecvBatch {
    bufs: [[u8; RECV_COPY]; BATCH],
    addrs: [libc::sockaddr_in; BATCH],
    iovs: [libc::iovec; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
    count: usize,
}

// SAFETY: the raw pointers inside the mmsghdr/iovec arrays point into the
// batch itself (or the caller's padding) and are rewritten before every
// syscall; they are never dereferenced by Rust code. Moving a batch to
// another thread therefore moves nothing that is shared.
unsafe impl Send for RecvBatch {}
// SAFETY: as for RecvBatch.
unsafe impl Send for SendBatch {}

impl RecvBatch {
    pub fn new() -> Box<RecvBatch> {
        // SAFETY: every field is plain old data (byte arrays and C structs made of
        // integers and pointers), for which all-zero bytes are a valid value.
        let mut batch: Box<RecvBatch> = unsafe { Box::new(std::mem::zeroed()) };
        // The buffers live in the box and never move: point the headers at
        // them once. The kernel writes back only msg_len, msg_namelen and
        // msg_flags, which `recv` resets for the entries it used.
        for i in 0..BATCH {
            batch.iovs[i] = libc::iovec {
                iov_base: batch.bufs[i].as_mut_ptr().cast(),
                iov_len: RECV_COPY,
            };
            let name: *mut libc::sockaddr_in = &mut batch.addrs[i];
            let iov: *mut libc::iovec = &mut batch.iovs[i];
            let hdr = &mut batch.hdrs[i].msg_hdr;
            hdr.msg_name = name.cast();
            hdr.msg_namelen = SOCKADDR_IN_LEN;
            hdr.msg_iov = iov;
            hdr.msg_iovlen = 1;
        }
        batch
    }

    /// Receives up to [`BATCH`] datagrams without blocking. `Ok(0)` when none is
    /// waiting; errors other than "would block" are returned (e.g. ECONNREFUSED
    /// left on a connected socket by an ICMP port-unreachable).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for hdr in &mut self.hdrs[..self.count] {
            hdr.msg_hdr.msg_namelen = SOCKADDR_IN_LEN;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        self.count = 0;
        // SAFETY: `hdrs` holds BATCH headers initialised in `new`, whose name and
        // iovec pointers point into this boxed batch, which outlives the call;
        // the kernel writes at most `msg_namelen` and `iov_len` bytes through them.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        self.count = batch_result(n)?;
        Ok(self.count)
    }

    /// The `i`-th datagram of the last [`recv`](Self::recv).
    pub fn get(&self, i: usize) -> Datagram<'_> {
        assert!(i < self.count);
        // With MSG_TRUNC, msg_len is the datagram's real length, even when only
        // RECV_COPY bytes of it were copied.
        let len = self.hdrs[i].msg_len as usize;
        let addr = &self.addrs[i];
        Datagram {
            head: &self.bufs[i][..len.min(RECV_COPY)],
            len,
            from: SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
                u16::from_be(addr.sin_port),
            ),
        }
    }
}

const SOCKADDR_IN_LEN: libc::socklen_t =
    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// Datagrams queued for one sendmmsg call: headers here, padding shared.
pub struct SendBatch {
    headers: [[u8; HEADER_LEN]; BATCH],
    sizes: [usize; BATCH],
    addrs: [libc::sockaddr_in; BATCH],
    has_addr: [bool; BATCH],
    iovs: [[libc::iovec; 2]; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
    len: usize,
}

impl SendBatch {
    pub fn new() -> Box<SendBatch> {
        // SAFETY: as for RecvBatch: plain data, all-zero is valid.
        unsafe { Box::new(std::mem::zeroed()) }
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
    }

    /// Size in bytes of the `i`-th queued datagram.
    pub fn size(&self, i: usize) -> usize {
        assert!(i < self.len);
        self.sizes[i]
    }

    /// Queues a datagram of `size` bytes (32..=65507) whose header is written by
    /// `fill`; `to` is its destination, `None` on a connected socket.
    pub fn push(
        &mut self,
        size: usize,
        to: Option<SocketAddrV4>,
        fill: impl FnOnce(&mut [u8; HEADER_LEN]),
    ) {
        assert!(self.len < BATCH, "send batch is full");
        assert!((HEADER_LEN..=MAX_PACKET_BYTES as usize).contains(&size));
        let i = self.len;
        fill(&mut self.headers[i]);
        self.sizes[i] = size;
        self.has_addr[i] = to.is_some();
        if let Some(to) = to {
            self.addrs[i] = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: to.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*to.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
        }
        self.len += 1;
    }

    /// Sends the queued datagrams with one sendmmsg; returns how many the kernel
    /// took (the first n, in order). The batch is left as it was: the caller
    /// clears it, or drops what was not sent.
    pub fn send(&mut self, fd: RawFd, padding: &[u8]) -> io::Result<usize> {
        if self.len == 0 {
            return Ok(0);
        }
        for i in 0..self.len {
            let pad = self.sizes[i] - HEADER_LEN;
            assert!(pad <= padding.len());
            self.iovs[i] = [
                libc::iovec {
                    iov_base: self.headers[i].as_mut_ptr().cast(),
                    iov_len: HEADER_LEN,
                },
                libc::iovec {
                    // The kernel only reads through this pointer.
                    iov_base: padding.as_ptr() as *mut libc::c_void,
                    iov_len: pad,
                },
            ];
            let hdr = &mut self.hdrs[i].msg_hdr;
            if self.has_addr[i] {
                hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_in).cast();
                hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            } else {
                hdr.msg_name = std::ptr::null_mut();
                hdr.msg_namelen = 0;
            }
            hdr.msg_iov = self.iovs[i].as_mut_ptr();
            hdr.msg_iovlen = if pad == 0 { 1 } else { 2 };
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
            hdr.msg_flags = 0;
        }
        // SAFETY: the first `len` headers are initialised above and point into
        // `self` and `padding`, both alive for the call; the kernel only reads them.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.len as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        batch_result(n)
    }
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
    let force = if recv {
        libc::SO_RCVBUFFORCE
    } else {
        libc::SO_SNDBUFFORCE
    };
    let value = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live c_int.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            force,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    if recv {
        socket.set_recv_buffer_size(bytes)
    } else {
        socket.set_send_buffer_size(bytes)
    }
}

/// A worker's responder socket: bound to the agent's port with SO_REUSEPORT, so
/// the kernel spreads arriving requests over the workers by 4-tuple hash.
pub fn responder_socket(bind: SocketAddrV4, buffers: Buffers) -> io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
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
    local: Option<Ipv4Addr>,
    peer: SocketAddrV4,
    buffers: Buffers,
) -> io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    set_buffer(&socket, true, buffers.recv)?;
    set_buffer(&socket, false, buffers.send)?;
    socket.set_nonblocking(true)?;
    if let Some(ip) = local {
        socket.bind(&SocketAddrV4::new(ip, 0).into())?;
    }
    socket.connect(&peer.into())?;
    Ok(socket)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Monotonic clock in nanoseconds: what requests carry as `t_send`.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time this thread has used, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Header;
    use std::net::UdpSocket;

    #[test]
    fn a_batch_crosses_loopback_with_exact_sizes_and_addresses() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = match rx.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let tx = client_socket(Some(Ipv4Addr::LOCALHOST), to, Buffers::default()).unwrap();
        let pad = padding();
        let mut batch = SendBatch::new();
        let sizes = [32usize, 64, 1400, 8192, 65507];
        for (i, &size) in sizes.iter().enumerate() {
            batch.push(size, None, |h| {
                Header::request(1, size as u32, 64, i as u64 + 1, 7).encode(h)
            });
        }
        assert_eq!(batch.send(tx.as_raw_fd(), &pad).unwrap(), sizes.len());

        let mut recv = RecvBatch::new();
        let mut got = Vec::new();
        while got.len() < sizes.len() {
            let n = recv.recv(rx.as_raw_fd()).unwrap();
            for i in 0..n {
                let d = recv.get(i);
                let h = Header::decode(d.head).unwrap();
                assert_eq!(d.from.ip(), &Ipv4Addr::LOCALHOST);
                assert_eq!(h.packet_len as usize, d.len);
                got.push((d.len, h.seq));
            }
        }
        assert_eq!(got, [(32, 1), (64, 2), (1400, 3), (8192, 4), (65507, 5)]);
    }
}
