//! The kernel UDP fast path: sockets, and datagrams moved in batches with
//! recvmmsg/sendmmsg, fenced behind safe types that own their buffers;
//! nothing here allocates per packet.
//!
//! - [`recv`]: batches read with recvmmsg, GRO super-datagrams cut apart;
//! - [`send`]: batches written with sendmmsg, runs sent as GSO
//!   super-datagrams;
//! - [`socket`]: the sockets and their options;
//! - [`trace`]: the path of one 5-tuple, hop by hop (TTL probes);
//! - `sys`: the structs and calls the kernel takes, the crate's only
//!   `unsafe`.
//!
//! Addresses are IPv4 or IPv6: the batches hold a `sockaddr_storage` per
//! datagram, read and written in place, so either family costs the same.

// `unsafe` lives in one module of the whole project: `sys`, the structs and
// calls the kernel takes; every other crate forbids it.
#![deny(unsafe_code)]

pub mod recv;
pub mod send;
pub mod socket;
mod sys;
#[cfg(test)]
mod testing;
pub mod trace;

pub use recv::{Datagram, Datagrams, Message, RECV_COPY, RecvBatch};
pub use send::{CONTIGUOUS_MAX, SendBatch, Sent, padding};
pub use socket::{
    Buffers, INITIAL_TTL, client_socket, count_hops, enable_gro, hops_of_ttl, kernel_coalesces,
    mark, responder_socket, socket_drops, stamp_arrivals,
};

use nix::time::{ClockId, clock_gettime};

use mx_wire::MAX_PACKET_BYTES;

/// Datagrams per recvmmsg/sendmmsg call: the syscall's cost spread over many
/// datagrams. 256 is four full GSO messages ([`GSO_MAX_SEGMENTS`] each) in
/// one sendmmsg, and the most a `u8` index can name.
pub const BATCH: usize = 256;
// (A send batch names a datagram's address by its index in a u8.)
const _: () = assert!(BATCH <= 256);

/// Most datagrams one GSO send carries (the kernel's UDP_MAX_SEGMENTS was 64
/// before Linux 6.9; 64 is accepted everywhere).
pub const GSO_MAX_SEGMENTS: usize = 64;

/// Largest UDP payload one (super-)datagram can carry: 65535 - 20 - 8 (IPv4;
/// IPv6 allows 20 more), the same bound the matrix puts on one packet.
const MAX_UDP_PAYLOAD: usize = MAX_PACKET_BYTES as usize;

/// Whether GSO/GRO can carry datagrams of `size` bytes: two must fit in one.
pub fn coalescible(size: usize) -> bool {
    size * 2 <= MAX_UDP_PAYLOAD
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
