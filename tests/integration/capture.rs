//! Packets read off the wire: an AF_PACKET socket on `lo` that keeps the UDP
//! datagrams to or from a range of ports, for the tests that check what the
//! kernel wrote into the IP header (the traffic class). Needs root
//! (CAP_NET_RAW).
//!
//! `lo` frames start with a 14-byte Ethernet header (zero MACs, a real
//! ethertype). The IPv4 TOS is byte 1 of the IP header; the IPv6 traffic
//! class spans the low nibble of byte 0 and the high nibble of byte 1. A
//! classic BPF filter, attached before the socket is bound, keeps everything
//! else (the loopback traffic of the tests running alongside) out of the
//! queue.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What one captured datagram said: its family, ports and traffic class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub v6: bool,
    pub src_port: u16,
    pub dst_port: u16,
    /// The TOS byte (IPv4) or traffic class (IPv6): DSCP << 2 | ECN.
    pub tos: u8,
}

pub struct Capture {
    fd: OwnedFd,
}

/// One classic BPF instruction.
fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Accepts IPv4 or IPv6 UDP (no IP options, no extension headers: the
/// kernel adds none to ours) whose source or destination port is in
/// `first..=last`, 256 bytes of it; drops the rest. Jumps are relative:
/// `jt`/`jf` count the instructions skipped.
fn filter(first: u16, last: u16) -> Vec<libc::sock_filter> {
    const LDH: u16 = 0x28; // ldh [k]
    const LDB: u16 = 0x30; // ldb [k]
    const LDX: u16 = 0x01; // ldx #k
    const LDH_X: u16 = 0x48; // ldh [x + k]
    const JA: u16 = 0x05;
    const JEQ: u16 = 0x15;
    const JGT: u16 = 0x25;
    const JGE: u16 = 0x35;
    const RET: u16 = 0x06;
    let (first, last) = (u32::from(first), u32::from(last));
    vec![
        op(LDH, 0, 0, 12),      //  0 ethertype
        op(JEQ, 0, 3, 0x0800),  //  1 IPv4? else 5
        op(LDB, 0, 0, 23),      //  2 its protocol
        op(LDX, 0, 0, 34),      //  3 UDP header at 14 + 20
        op(JA, 0, 0, 3),        //  4 -> 8
        op(JEQ, 0, 10, 0x86dd), //  5 IPv6? else drop
        op(LDB, 0, 0, 20),      //  6 its next header
        op(LDX, 0, 0, 54),      //  7 UDP header at 14 + 40
        op(JEQ, 0, 7, 17),      //  8 UDP? else drop
        op(LDH_X, 0, 0, 0),     //  9 source port
        op(JGE, 0, 1, first),   // 10 below the range: try the destination
        op(JGT, 0, 3, last),    // 11 within it: keep
        op(LDH_X, 0, 0, 2),     // 12 destination port
        op(JGE, 0, 2, first),   // 13 below: drop
        op(JGT, 1, 0, last),    // 14 above: drop, else keep
        op(RET, 0, 0, 256),     // 15 keep 256 bytes
        op(RET, 0, 0, 0),       // 16 drop
    ]
}

fn check(rc: libc::c_int, what: &str) {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
}

/// Sets socket option `name` (SOL_SOCKET) of `fd` to `value`.
fn set<T>(fd: &OwnedFd, name: libc::c_int, value: &T, what: &str) {
    // SAFETY: `value` is a live `T`, and the kernel reads that many bytes.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(rc, what);
}

impl Capture {
    /// Starts capturing, on `lo`, UDP to or from ports `first..=last`.
    pub fn udp_ports(first: u16, last: u16) -> Capture {
        // Protocol 0: the socket receives nothing until it is bound, so no
        // packet queues before the filter is in place.
        // SAFETY: socket() takes no pointers.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        check(fd, "AF_PACKET socket (root?)");
        // SAFETY: `fd` is a new socket nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let program = filter(first, last);
        let fprog = libc::sock_fprog {
            len: program.len() as u16,
            filter: program.as_ptr() as *mut libc::sock_filter,
        };
        set(&fd, libc::SO_ATTACH_FILTER, &fprog, "SO_ATTACH_FILTER");
        // Room for every datagram of a short test run, read at the end.
        let bytes: libc::c_int = 32 << 20;
        set(&fd, libc::SO_RCVBUFFORCE, &bytes, "SO_RCVBUFFORCE");
        // SAFETY: the name is a NUL-terminated literal.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        assert!(lo > 0, "no lo interface");
        // SAFETY: all-zero bytes are a valid sockaddr_ll (integers only).
        let mut at: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        at.sll_family = libc::AF_PACKET as u16;
        at.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        at.sll_ifindex = lo as i32;
        check(
            // SAFETY: the address points at `at`, of the size given.
            unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&at as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            },
            "bind to lo",
        );
        Capture { fd }
    }

    /// Every datagram captured so far. Each crosses `lo` twice (going out
    /// and coming in), so each is seen twice.
    pub fn drain(&self) -> Vec<Seen> {
        let mut seen = Vec::new();
        let mut frame = [0u8; 256];
        loop {
            // SAFETY: recv writes at most `frame.len()` bytes into `frame`.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    frame.as_mut_ptr().cast(),
                    frame.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
                return seen;
            }
            seen.extend(parse(&frame[..n as usize]));
        }
    }
}

/// The IP and UDP fields of one frame the filter kept.
fn parse(frame: &[u8]) -> Option<Seen> {
    let ip = frame.get(14..)?;
    let port = |at: usize| Some(u16::from_be_bytes([*ip.get(at)?, *ip.get(at + 1)?]));
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => Some(Seen {
            v6: false,
            src_port: port(20)?,
            dst_port: port(22)?,
            tos: ip[1],
        }),
        0x86dd => Some(Seen {
            v6: true,
            src_port: port(40)?,
            dst_port: port(42)?,
            tos: (ip[0] << 4) | (ip[1] >> 4),
        }),
        _ => None,
    }
}
