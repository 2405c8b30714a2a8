//! What the tests of the fast path share: loopback addresses, and requests
//! sent and read back through the batches.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use super::{Buffers, RecvBatch, SendBatch, client_socket};
use mx_wire::Header;

pub const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);
pub const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

pub fn bound(socket: &UdpSocket) -> SocketAddr {
    socket.local_addr().unwrap()
}

/// Sends one request per `sizes` entry on a fresh connected socket.
pub fn send_requests(to: SocketAddr, sizes: &[usize], gso: bool) -> bool {
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
pub fn receive(rx: &UdpSocket, recv: &mut RecvBatch, want: usize) -> (Vec<(usize, u64)>, usize) {
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
