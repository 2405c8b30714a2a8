//! `mx agent --trace`: the host's side of `mx trace`. Sweeps the TTL of each
//! tuple it is given (a stream's own source and destination, so that a
//! fabric's ECMP hash takes each probe down the stream's path) and prints
//! one line per tuple ([`mx_report::paths::host_line`]), in the order
//! given, for the controller to read back.
//!
//! Bounded, so that a trace never loads a fabric or outstays its ssh
//! session: [`AT_ONCE`] sweeps at a time, each with one probe in flight
//! and its probes at least [`GAP`] apart (a router's ICMP is rate-limited,
//! and the sweeps must not be what loads it), and the host's sweeps stop
//! at their deadline, the tuples left said so.

use std::io::Write;
use std::net::SocketAddrV4;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mx_base::error::{Error, Result};
use mx_report::paths::{HopKind, Sweep, TracedHop, host_line};
use mx_udp::trace::{self, Hop};

/// The highest TTL tried: past any datacenter fabric's depth.
pub const MAX_TTL: u8 = 16;
/// How long a probe's answer is waited for: a datacenter's round trips
/// are well under a millisecond, and a router's ICMP comes from its slow
/// path within a few.
pub const WAIT: Duration = Duration::from_millis(100);
/// Sweeps a host runs at once, each with one probe in flight: a lossy
/// path costs a wait per probe lost.
pub const AT_ONCE: usize = 8;
/// The least time between two probes of one host.
pub const GAP: Duration = Duration::from_millis(1);
/// Probes at each TTL when not given: enough that a link dropping a tenth
/// of what crosses it shows, over the streams that cross it.
pub const DEFAULT_PROBES: u16 = 10;
/// The most tuples one host is asked to trace in one call.
pub const MAX_TUPLES: usize = 512;

/// The tuples of `spec`: `SRC:SPORT>DST:DPORT` (IPv4), `,` between them.
pub fn parse(spec: &str) -> Result<Vec<(SocketAddrV4, SocketAddrV4)>> {
    let tuples: Vec<(SocketAddrV4, SocketAddrV4)> = spec
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            let (src, dst) = t.trim().split_once('>').ok_or_else(|| bad(t))?;
            Ok((
                src.parse().map_err(|_| bad(t))?,
                dst.parse().map_err(|_| bad(t))?,
            ))
        })
        .collect::<Result<_>>()?;
    if tuples.is_empty() || tuples.len() > MAX_TUPLES {
        return Err(Error::refused(format!(
            "--trace: want 1 to {MAX_TUPLES} tuples, not {}",
            tuples.len()
        )));
    }
    Ok(tuples)
}

fn bad(tuple: &str) -> Error {
    Error::refused(format!(
        "--trace '{tuple}': want SRC:SPORT>DST:DPORT, IPv4 (198.18.1.1:40000>198.18.1.65:5300)"
    ))
}

/// Sweeps each of `tuples` with `probes` probes a TTL until `deadline`,
/// [`AT_ONCE`] at a time, then prints a line for each to `out`, in the
/// order given.
pub fn run(
    tuples: &[(SocketAddrV4, SocketAddrV4)],
    probes: u16,
    deadline: Instant,
    out: &mut dyn Write,
) -> Result<()> {
    let sweep = trace::Sweep {
        max_ttl: MAX_TTL,
        probes,
        wait: WAIT,
        gap: GAP,
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Sweep>>> = Mutex::new(vec![None; tuples.len()]);
    std::thread::scope(|scope| {
        for _ in 0..AT_ONCE.min(tuples.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((src, dst)) = tuples.get(i) else {
                        break;
                    };
                    let result = sweep_one(*src, *dst, &sweep, deadline);
                    results.lock().expect("no panics hold this lock")[i] = Some(result);
                }
            });
        }
    });
    let results = results.into_inner().expect("no panics hold this lock");
    let print = |e: std::io::Error| Error::refused(format!("cannot print a trace: {e}"));
    for ((src, dst), result) in tuples.iter().zip(results) {
        let result = result.expect("every tuple swept");
        writeln!(
            out,
            "{}",
            host_line(&src.to_string(), &dst.to_string(), &result)
        )
        .map_err(print)?;
    }
    out.flush().map_err(print)
}

/// One tuple's sweep, or why it did not run.
fn sweep_one(
    src: SocketAddrV4,
    dst: SocketAddrV4,
    sweep: &trace::Sweep,
    deadline: Instant,
) -> Sweep {
    if Instant::now() >= deadline {
        return Err("not traced: the host's time for its traces ran out".to_string());
    }
    trace::trace_counted(src, dst, sweep, b"mx trace probe")
        .map(|hops| hops.iter().map(traced).collect())
        .map_err(|e| format!("{src} -> {dst}: {e}"))
}

fn traced(h: &trace::HopCount) -> TracedHop {
    TracedHop {
        ttl: h.ttl,
        kind: match h.hop {
            Hop::Router(a) => HopKind::Router(a.to_string()),
            Hop::Reached { from, .. } => HopKind::Reached(from.to_string()),
            Hop::Silent => HopKind::Silent,
        },
        sent: h.sent,
        answered: h.answered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_report::paths::parse_host_line;

    #[test]
    fn tuples_are_read_and_a_bad_one_is_named() {
        let t = parse("127.0.0.1:40000>127.0.0.2:5300, 127.0.0.1:40001>127.0.0.2:5300").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].0.port(), 40001);
        let refused = parse("127.0.0.1:40000>127.0.0.2").unwrap_err().to_string();
        assert!(
            refused.contains("--trace '127.0.0.1:40000>127.0.0.2': want SRC:SPORT>DST:DPORT"),
            "{refused}"
        );
        assert!(parse("").is_err());
    }

    #[test]
    fn each_tuple_gets_its_line_and_a_spent_deadline_says_so() {
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to: SocketAddrV4 = match closed.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            other => panic!("{other}"),
        };
        drop(closed);
        let from: SocketAddrV4 = "127.0.0.1:0".parse().unwrap();
        let mut out = Vec::new();
        run(
            &[(from, to)],
            3,
            Instant::now() + Duration::from_secs(30),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let (_, dst, sweep) = parse_host_line(text.trim_end()).unwrap();
        assert_eq!(dst, to.to_string());
        assert_eq!(
            sweep.unwrap(),
            [TracedHop {
                ttl: 1,
                kind: HopKind::Reached("127.0.0.1".into()),
                sent: 3,
                answered: 3
            }]
        );
        let mut out = Vec::new();
        run(&[(from, to)], 3, Instant::now(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(" error not traced: the host's time"),
            "{text}"
        );
    }
}
