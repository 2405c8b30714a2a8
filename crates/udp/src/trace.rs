//! The path of one UDP 5-tuple, hop by hop, as Paris traceroute takes it:
//! every probe carries the flow's own source port and destination, so a
//! fabric's ECMP hash puts each on the flow's own path, and only the TTL
//! changes. The router where a probe's TTL runs out answers with an ICMP
//! Time Exceeded, the destination with a Port Unreachable; the kernel
//! queues both on the probing socket (`IP_RECVERR`), read back with
//! `MSG_ERRQUEUE`. No raw socket, no privilege.
//!
//! A router answers from the address of the interface the probe came in
//! by where its `icmp_errors_use_inbound_ifaddr` is set (the link, then, not
//! the router alone); by default from the one its answer leaves by. IPv4
//! only, for now.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use socket2::{Domain, Protocol, Socket, Type};

/// What answered a probe of one TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// A router where the probe's TTL ran out (ICMP Time Exceeded).
    Router(Ipv4Addr),
    /// The destination, or a host that refused it there (any other ICMP
    /// error: port unreachable, host unreachable, ...), with the ICMP
    /// type and code.
    Reached { from: Ipv4Addr, icmp: (u8, u8) },
    /// Nothing within the wait (a router that does not answer, or one
    /// whose ICMP was rate-limited or lost).
    Silent,
}

/// ICMP's Time Exceeded.
const TIME_EXCEEDED: u8 = 11;

/// Probes from `from` (the flow's source address and port: bound here, so
/// it must be free) to `to`, TTL 1 up to `max_ttl`, waiting up to `wait`
/// for each answer; stops at the first hop that is not a router. Each
/// probe is `payload`.
pub fn trace(
    from: SocketAddrV4,
    to: SocketAddrV4,
    max_ttl: u8,
    wait: Duration,
    payload: &[u8],
) -> io::Result<Vec<Hop>> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.bind(&from.into())?;
    socket.connect(&to.into())?;
    setsockopt(&socket, sockopt::Ipv4RecvErr, &true)?;
    let mut hops = Vec::new();
    for ttl in 1..=max_ttl {
        setsockopt(&socket, sockopt::Ipv4Ttl, &libc::c_int::from(ttl))?;
        socket.send(payload)?;
        let hop = answer(&socket, to, wait)?;
        hops.push(hop);
        if !matches!(hop, Hop::Router(_) | Hop::Silent) {
            break;
        }
    }
    Ok(hops)
}

/// The first answer to the probe just sent: an error on the socket's queue,
/// or (a destination that answers) a datagram.
fn answer(socket: &Socket, to: SocketAddrV4, wait: Duration) -> io::Result<Hop> {
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Hop::Silent);
        }
        // POLLERR is always reported: an error queued, or a datagram.
        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(0) => return Ok(Hop::Silent),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if let Some(hop) = queued_error(socket)? {
            return Ok(hop);
        }
        // No error queued: a datagram from the destination itself.
        let mut buf = [0u8; 2048];
        match nix::sys::socket::recv(socket.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
            Ok(_) => {
                return Ok(Hop::Reached {
                    from: *to.ip(),
                    icmp: (0, 0),
                });
            }
            // Nothing yet, or an error queued since the look above (recv
            // fails with it): read it next time round.
            Err(_) => continue,
        }
    }
}

/// The ICMP error queued on `socket`, read without waiting (`None`: none).
fn queued_error(socket: &Socket) -> io::Result<Option<Hop>> {
    let mut buf = [0u8; 512];
    let mut iov = [io::IoSliceMut::new(&mut buf)];
    let mut space = nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in);
    let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
    let msg = match recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut space), flags) {
        Ok(msg) => msg,
        Err(nix::errno::Errno::EAGAIN) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::Ipv4RecvErr(err, Some(offender)) = cmsg {
            if err.ee_origin != libc::SO_EE_ORIGIN_ICMP {
                continue;
            }
            let from = Ipv4Addr::from(u32::from_be(offender.sin_addr.s_addr));
            return Ok(Some(if err.ee_type == TIME_EXCEEDED {
                Hop::Router(from)
            } else {
                Hop::Reached {
                    from,
                    icmp: (err.ee_type, err.ee_code),
                }
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn local(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
    }

    #[test]
    fn a_closed_port_one_hop_away_answers_port_unreachable() {
        // A port known free: bound, then let go.
        let closed = UdpSocket::bind(local(0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let hops = trace(local(0), local(closed), 4, Duration::from_secs(2), b"probe").unwrap();
        assert_eq!(
            hops,
            [Hop::Reached {
                from: Ipv4Addr::LOCALHOST,
                icmp: (3, 3)
            }]
        );
    }

    #[test]
    fn a_destination_that_answers_is_reached_and_the_probe_kept_its_source_port() {
        let responder = UdpSocket::bind(local(0)).unwrap();
        let to = match responder.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let (n, from) = responder.recv_from(&mut buf).unwrap();
            responder.send_to(&buf[..n], from).unwrap();
            from
        });
        let source = UdpSocket::bind(local(0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let hops = trace(local(source), to, 4, Duration::from_secs(2), b"probe").unwrap();
        assert_eq!(
            hops,
            [Hop::Reached {
                from: Ipv4Addr::LOCALHOST,
                icmp: (0, 0)
            }]
        );
        assert_eq!(
            echo.join().unwrap().port(),
            source,
            "the flow's own source port"
        );
    }

    #[test]
    fn a_source_port_in_use_is_refused() {
        let taken = UdpSocket::bind(local(0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let refused = trace(local(port), local(9), 1, Duration::from_millis(10), b"p");
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::AddrInUse);
    }
}
