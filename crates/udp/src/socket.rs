//! Sockets: the responder's and a flow's UDP sockets as the agent opens
//! them, and their options (buffer sizes, GRO, the DSCP mark), asked and
//! read through the safe calls of `socket2` and `nix`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;

use nix::sys::socket::{setsockopt, sockopt};
use socket2::{Domain, Protocol, Socket, Type};

use super::sys;

/// Asks the kernel to hand this socket datagrams of one sender coalesced
/// (UDP_GRO): read them with a [`super::RecvBatch::coalesced`].
pub fn enable_gro(socket: &Socket) -> io::Result<()> {
    setsockopt(socket, sockopt::UdpGroSegment, &true).map_err(io::Error::from)
}

/// Marks every datagram `socket` sends with the traffic class `tos` (the
/// TOS byte: DSCP in the six high bits, ECN zero), which `label` names in
/// an error. IPv4 sockets take IP_TOS; IPv6 sockets take IPV6_TCLASS, and
/// IP_TOS as well, which Linux applies to what a dual-stack socket sends to
/// IPv4-mapped addresses. The default class (0) sets nothing. An error is
/// the kernel refusing: the caller fails on it, since a run that asked for
/// a class must never go out unmarked.
pub fn mark(socket: &Socket, tos: u8, label: &str) -> io::Result<()> {
    if tos == 0 {
        return Ok(());
    }
    let tos = u32::from(tos);
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
                "the kernel refuses to mark a socket {label} (IP_TOS / IPV6_TCLASS 0x{tos:02x}): {e}"
            ),
        )
    })
}

/// The TTL (IPv4) or hop limit (IPv6) every datagram of the agent's
/// leaves with, whatever the host's default (`net.ipv4.ip_default_ttl`):
/// what arrives with TTL `t` crossed `INITIAL_TTL - t` routers.
pub const INITIAL_TTL: u8 = 64;

/// Sends with [`INITIAL_TTL`], and asks the kernel for the TTL (IPv4) or
/// hop limit (IPv6) of every datagram `socket` receives, in a control
/// message beside it ([`super::Datagram::ttl`]): how many routers the
/// path it came by crossed, read where it arrives, at no cost to the
/// packets.
pub fn count_hops(socket: &Socket) -> io::Result<()> {
    let ttl = libc::c_int::from(INITIAL_TTL);
    if socket.domain()? == Domain::IPV6 {
        setsockopt(socket, sockopt::Ipv6Ttl, &ttl)?;
        setsockopt(socket, sockopt::Ipv6RecvHopLimit, &true)?;
    } else {
        setsockopt(socket, sockopt::Ipv4Ttl, &ttl)?;
        setsockopt(socket, sockopt::Ipv4RecvTtl, &true)?;
    }
    Ok(())
}

/// Asks the kernel to stamp every datagram `socket` receives with the time
/// it reached the host (SO_TIMESTAMPNS: CLOCK_REALTIME, taken as the packet
/// came in, before it waited in the socket's queue), in a control message
/// beside it ([`super::Datagram::arrived_ns`]): when it arrived, however
/// late the agent read it.
pub fn stamp_arrivals(socket: &Socket) -> io::Result<()> {
    setsockopt(socket, sockopt::ReceiveTimestampns, &true).map_err(io::Error::from)
}

/// The routers a datagram that arrived with TTL `ttl` (non-zero) crossed:
/// counted down from [`INITIAL_TTL`] where it is at most that (mx's own
/// agents), else from the next initial TTL systems use (128, 255).
pub fn hops_of_ttl(ttl: u8) -> u8 {
    let initial = match ttl {
        0..=INITIAL_TTL => INITIAL_TTL,
        65..=128 => 128,
        _ => 255,
    };
    initial - ttl
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

/// How many datagrams the kernel has dropped at this socket since it opened
/// because its receive buffer was full: the socket's `sk_drops`, the counter
/// SO_RXQ_OVFL would attach to every datagram, read here once per interval
/// with SO_MEMINFO (Linux 4.6+) instead, off the hot path. `None` where the
/// kernel cannot say.
pub fn socket_drops(fd: RawFd) -> Option<u64> {
    let drops = libc::SK_MEMINFO_DROPS as usize;
    let (info, filled) = sys::meminfo(fd)?;
    (filled > drops).then(|| u64::from(info[drops]))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{V4, V6, send_requests};
    use super::*;
    use std::os::fd::AsRawFd;

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
        let ef = 0xb8; // EF: code point 46
        let v4 = client_socket(Some(V4), SocketAddr::new(V4, 9), Buffers::default()).unwrap();
        mark(&v4, ef, "EF").unwrap();
        assert_eq!(v4.tos_v4().unwrap(), 0xb8);
        let v6 = client_socket(Some(V6), SocketAddr::new(V6, 9), Buffers::default()).unwrap();
        mark(&v6, ef, "EF").unwrap();
        assert_eq!(
            (v6.tclass_v6().unwrap(), v6.tos_v4().unwrap()),
            (0xb8, 0xb8)
        );
        // The default class touches nothing.
        let plain = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        mark(&plain, 0, "CS0").unwrap();
        assert_eq!(plain.tos_v4().unwrap(), 0);
    }

    #[test]
    fn a_socket_the_kernel_will_not_mark_is_an_error_naming_the_class() {
        // A Unix socket has no IP header: the kernel refuses IP_TOS on it, as
        // it would on an IP socket where the option were not allowed.
        let (unix, _) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let err = mark(
            &Socket::from(std::os::fd::OwnedFd::from(unix)),
            0xb8,
            "DSCP 46 (EF)",
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
    fn sockets_take_the_family_of_their_address() {
        let v6 = client_socket(Some(V6), SocketAddr::new(V6, 9), Buffers::default()).unwrap();
        assert_eq!(v6.domain().unwrap(), Domain::IPV6);
        assert!(v6.only_v6().unwrap(), "an IPv6 flow takes IPv6 alone");
        let v4 = responder_socket(SocketAddr::new(V4, 0), Buffers::default()).unwrap();
        assert_eq!(v4.domain().unwrap(), Domain::IPV4);
        // A local address of the other family cannot be bound.
        assert!(client_socket(Some(V4), SocketAddr::new(V6, 9), Buffers::default()).is_err());
    }
}
