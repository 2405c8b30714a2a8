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

/// What the probes of one TTL drew: the first answer, and how many of
/// them were answered at all. Sent over a lossy link, a share of them and
/// of their answers is lost before or after the hop: the first hop whose
/// probes go unanswered is where a sweep over the lossy streams starts
/// seeing the loss (fbtracert's reading).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopCount {
    /// The TTL, from 1.
    pub ttl: u8,
    /// The first answer of its probes; `Silent` when none came.
    pub hop: Hop,
    pub sent: u16,
    pub answered: u16,
}

/// A TTL whose first this many probes all go unanswered is silent, and
/// its other probes are not sent. Not fewer: over a link that drops a
/// fifth of what crosses it, two probes in a row are lost one time in 25,
/// and five one time in 3,125.
pub const SILENT_AFTER: u16 = 5;

/// How many TTLs in a row may go unanswered before the sweep gives up (a
/// destination that drops what it does not expect, a router that never
/// answers): past them, more TTLs only cost their waits.
pub const SILENT_TTLS: usize = 3;

/// ICMP's Time Exceeded.
const TIME_EXCEEDED: u8 = 11;

/// Probes from `from` (the flow's source address and port: bound here, so
/// it must be free) to `to`, TTL 1 up to `max_ttl`, waiting up to `wait`
/// for each answer; stops at the first hop that is not a router. Each
/// probe is `payload`. One probe a TTL; [`trace_counted`] sends more.
pub fn trace(
    from: SocketAddrV4,
    to: SocketAddrV4,
    max_ttl: u8,
    wait: Duration,
    payload: &[u8],
) -> io::Result<Vec<Hop>> {
    let sweep = Sweep {
        max_ttl,
        probes: 1,
        wait,
        gap: Duration::ZERO,
    };
    Ok(trace_counted(from, to, &sweep, payload)?
        .into_iter()
        .map(|h| h.hop)
        .collect())
}

/// How a TTL sweep probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sweep {
    /// The highest TTL tried.
    pub max_ttl: u8,
    /// Probes sent at each TTL (the first [`SILENT_AFTER`] unanswered: the
    /// TTL is silent, and the rest are not sent).
    pub probes: u16,
    /// The longest wait for each probe's answer.
    pub wait: Duration,
    /// The least time between two probes: a router's ICMP is rate-limited,
    /// and a sweep must not be what loads it.
    pub gap: Duration,
}

/// [`trace`] with `sweep.probes` probes at each TTL, each hop's answers
/// counted. Stops after the first TTL the destination answered, or after
/// [`SILENT_TTLS`] silent ones in a row. An answer that comes after its
/// probe's wait is dropped before the next probe, not counted for it.
pub fn trace_counted(
    from: SocketAddrV4,
    to: SocketAddrV4,
    sweep: &Sweep,
    payload: &[u8],
) -> io::Result<Vec<HopCount>> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    // Sweeps of several streams' replies leave from one responder port at
    // once, each connected to its own stream: the kernel hands each its own
    // ICMP by the full 4-tuple. A port another socket holds without
    // SO_REUSEADDR is still refused.
    socket.set_reuse_address(true)?;
    socket.bind(&from.into())?;
    socket.connect(&to.into())?;
    setsockopt(&socket, sockopt::Ipv4RecvErr, &true)?;
    let mut hops = Vec::new();
    let mut silent_in_a_row = 0;
    for ttl in 1..=sweep.max_ttl {
        setsockopt(&socket, sockopt::Ipv4Ttl, &libc::c_int::from(ttl))?;
        let mut count = HopCount {
            ttl,
            hop: Hop::Silent,
            sent: 0,
            answered: 0,
        };
        while count.sent < sweep.probes.max(1) {
            if count.sent == SILENT_AFTER && count.answered == 0 {
                break;
            }
            if count.sent > 0 || ttl > 1 {
                std::thread::sleep(sweep.gap);
            }
            drain(&socket)?;
            socket.send(payload)?;
            count.sent += 1;
            let hop = answer(&socket, to, sweep.wait)?;
            if hop != Hop::Silent {
                count.answered += 1;
                if count.hop == Hop::Silent {
                    count.hop = hop;
                }
            }
        }
        hops.push(count);
        if !matches!(count.hop, Hop::Router(_) | Hop::Silent) {
            break;
        }
        silent_in_a_row = if count.hop == Hop::Silent {
            silent_in_a_row + 1
        } else {
            0
        };
        if silent_in_a_row == SILENT_TTLS {
            break;
        }
    }
    Ok(hops)
}

/// Drops what is queued on `socket` (answers that came after their wait).
fn drain(socket: &Socket) -> io::Result<()> {
    while queued_error(socket)?.is_some() {}
    let mut buf = [0u8; 2048];
    while nix::sys::socket::recv(socket.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT).is_ok() {}
    Ok(())
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
    fn each_ttl_sends_its_probes_and_counts_their_answers() {
        let closed = UdpSocket::bind(local(0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let sweep = Sweep {
            max_ttl: 4,
            probes: 5,
            wait: Duration::from_secs(2),
            gap: Duration::from_millis(1),
        };
        let hops = trace_counted(local(0), local(closed), &sweep, b"probe").unwrap();
        assert_eq!(
            hops,
            [HopCount {
                ttl: 1,
                hop: Hop::Reached {
                    from: Ipv4Addr::LOCALHOST,
                    icmp: (3, 3)
                },
                sent: 5,
                answered: 5,
            }]
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
