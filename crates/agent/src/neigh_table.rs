//! The kernel's neighbour tables (ARP for IPv4, NDP for IPv6), read over
//! rtnetlink: how often each was full, and how many resolutions failed.
//!
//! A host that cannot resolve its peers' link-layer addresses cannot send
//! to them, and no counter of the interface or of UDP says why. The kernel
//! keeps one neighbour table a family, for every network namespace of the
//! machine, bounded by `net.ipv4.neigh.default.gc_thresh3` (IPv6:
//! `net.ipv6.neigh.default.gc_thresh3`, 1,024 by default). Past it, a new
//! entry cannot be made (the kernel logs "neighbor table overflow!") and
//! counts the table full; a resolution that got no answer counts as
//! failed.
//!
//! /proc/net/stat/arp_cache shows the same counters, but only in the first
//! namespace: an agent in a container or a lab's namespace reads them with
//! an `RTM_GETNEIGHTBL` dump (what `ip -s ntable` shows), which every
//! namespace may ask. The counters are the machine's, not the namespace's:
//! on hosts that share a kernel, each reports the same.

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

/// rtnetlink's message types and flags (linux/rtnetlink.h, linux/netlink.h).
const RTM_GETNEIGHTBL: u16 = 66;
const RTM_NEWNEIGHTBL: u16 = 64;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
/// The attributes of a table (linux/neighbour.h): its name, its hard
/// bound, its size now and its statistics.
const NDTA_NAME: u16 = 1;
const NDTA_THRESH3: u16 = 4;
const NDTA_CONFIG: u16 = 5;
const NDTA_STATS: u16 = 7;
/// Bytes of a netlink message header, and of the `struct ndtmsg` after it.
const NLMSG_HDRLEN: usize = 16;
const NDTMSG_LEN: usize = 4;

/// One neighbour table's figures, cumulative since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NeighTable {
    /// Entries now, and the bound past which no entry is made (gc_thresh3).
    pub entries: u32,
    pub thresh3: u32,
    /// Times an entry could not be made: the table was full.
    pub table_fulls: u64,
    /// Resolutions that got no answer.
    pub res_failed: u64,
}

impl NeighTable {
    /// The table of `family` (libc::AF_INET: arp_cache, libc::AF_INET6:
    /// ndisc_cache); `None` where rtnetlink cannot be asked or says no.
    pub fn read(family: i32) -> Option<NeighTable> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRoute,
        )
        .ok()?;
        sendto(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &dump_request(family as u8),
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )
        .ok()?;
        let mut table = None;
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = recv(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                &mut buf,
                MsgFlags::empty(),
            )
            .ok()?;
            match parse_messages(&buf[..n], &mut table) {
                Batch::More => continue,
                Batch::Done => return table,
                Batch::Failed => return None,
            }
        }
    }
}

/// An `RTM_GETNEIGHTBL` dump of `family`'s tables.
fn dump_request(family: u8) -> [u8; NLMSG_HDRLEN + NDTMSG_LEN] {
    let mut m = [0u8; NLMSG_HDRLEN + NDTMSG_LEN];
    m[0..4].copy_from_slice(&((NLMSG_HDRLEN + NDTMSG_LEN) as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&RTM_GETNEIGHTBL.to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m[8..12].copy_from_slice(&1u32.to_ne_bytes());
    m[NLMSG_HDRLEN] = family;
    m
}

/// What one read of the dump held.
#[derive(Debug, PartialEq, Eq)]
enum Batch {
    More,
    Done,
    Failed,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Netlink aligns messages and attributes to 4 bytes.
fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The messages of one read; the table's own message (the one with
/// statistics: the others are its per-interface parameters) fills `table`.
fn parse_messages(buf: &[u8], table: &mut Option<NeighTable>) -> Batch {
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let (Some(len), Some(kind)) = (u32_at(buf, at), u16_at(buf, at + 4)) else {
            return Batch::Failed;
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return Batch::Failed;
        }
        match kind {
            NLMSG_DONE => return Batch::Done,
            NLMSG_ERROR => return Batch::Failed,
            RTM_NEWNEIGHTBL => {
                let attrs = buf
                    .get(at + NLMSG_HDRLEN + NDTMSG_LEN..at + len)
                    .unwrap_or(&[]);
                if let Some(t) = parse_table(attrs) {
                    *table = Some(t);
                }
            }
            _ => {}
        }
        at += align4(len);
    }
    Batch::More
}

/// A table's attributes; `None` for a message without statistics.
fn parse_table(attrs: &[u8]) -> Option<NeighTable> {
    let mut t = NeighTable::default();
    let mut has_stats = false;
    let mut at = 0;
    while at + 4 <= attrs.len() {
        let len = u16_at(attrs, at)? as usize;
        let kind = u16_at(attrs, at + 2)? & 0x3fff;
        if len < 4 || at + len > attrs.len() {
            return None;
        }
        let value = &attrs[at + 4..at + len];
        match kind {
            NDTA_THRESH3 => t.thresh3 = u32_at(value, 0)?,
            // struct ndt_config: key_len, entry_size (u16 each), entries.
            NDTA_CONFIG => t.entries = u32_at(value, 4)?,
            // struct ndt_stats: allocs, destroys, hash_grows, res_failed,
            // lookups, hits, rcv_probes_mcast, rcv_probes_ucast,
            // periodic_gc_runs, forced_gc_runs, table_fulls (u64 each).
            NDTA_STATS => {
                t.res_failed = u64_at(value, 3 * 8)?;
                t.table_fulls = u64_at(value, 10 * 8)?;
                has_stats = true;
            }
            NDTA_NAME => {}
            _ => {}
        }
        at += align4(len);
    }
    has_stats.then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attribute of `kind` holding `value`, padded.
    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(align4(a.len()), 0);
        a
    }

    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn the_tables_own_message_gives_its_size_bound_and_counters() {
        let mut stats = [0u8; 11 * 8];
        stats[3 * 8..4 * 8].copy_from_slice(&44u64.to_ne_bytes());
        stats[10 * 8..11 * 8].copy_from_slice(&7u64.to_ne_bytes());
        let mut config = [0u8; 32];
        config[4..8].copy_from_slice(&46u32.to_ne_bytes());
        let mut table = vec![2, 0, 0, 0];
        table.extend(attr(NDTA_NAME, b"arp_cache\0"));
        table.extend(attr(NDTA_THRESH3, &1024u32.to_ne_bytes()));
        table.extend(attr(NDTA_CONFIG, &config));
        table.extend(attr(NDTA_STATS, &stats));
        // A per-interface message carries parameters, no statistics.
        let mut per_dev = vec![2, 0, 0, 0];
        per_dev.extend(attr(NDTA_NAME, b"arp_cache\0"));
        let mut buf = message(RTM_NEWNEIGHTBL, &table);
        buf.extend(message(RTM_NEWNEIGHTBL, &per_dev));
        let mut got = None;
        assert_eq!(parse_messages(&buf, &mut got), Batch::More);
        assert_eq!(
            got,
            Some(NeighTable {
                entries: 46,
                thresh3: 1024,
                table_fulls: 7,
                res_failed: 44,
            })
        );
        assert_eq!(
            parse_messages(&message(NLMSG_DONE, &[0; 4]), &mut got),
            Batch::Done
        );
        assert_eq!(
            parse_messages(&message(NLMSG_ERROR, &[0; 20]), &mut got),
            Batch::Failed
        );
    }

    #[test]
    fn this_machines_arp_table_is_read_from_any_namespace() {
        // rtnetlink answers every process: the table exists wherever IPv4
        // does, with a bound of at least one entry.
        let t = NeighTable::read(libc::AF_INET).expect("arp_cache over rtnetlink");
        assert!(t.thresh3 > 0, "{t:?}");
    }
}
