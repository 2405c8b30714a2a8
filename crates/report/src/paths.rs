//! `paths.trace`: the route of each traced stream, hop by hop, both ways.
//!
//! `mx trace` (and `mx run`, where a run's loss sat on some paths alone)
//! sweeps the TTL of each stream's own 5-tuple from the host that sends it:
//! a stream's requests from its sender's source port to the responder's
//! port, and its replies the other way, from the responder. Each hop is the
//! address that answered the probes of one TTL (a router's, by its ICMP
//! Time Exceeded; the destination's at the end), with the probes sent and
//! answered. The summary reads the file beside the reports to name the
//! link the lossy streams share and the clean ones avoid.
//!
//! Two forms, one per side:
//! - the line a host prints for one tuple ([`host_line`], read back by
//!   [`parse_host_line`]): `198.18.1.1:40000 198.18.1.65:5300 1=r198.18.1.62/5/5
//!   2=r198.18.1.131/4/5 3=-/0/2 4=d198.18.1.65/5/5`, or the tuple, `error`
//!   and why;
//! - the controller's `paths.trace` (CSV), one row per hop ([`write()`], [`read()`]):
//!   `traced_at,from,to,leg,sport,ttl,kind,hop,sent,answered`, `from` and
//!   `to` the hosts the leg's packets leave and reach, `sport` the stream's
//!   source port on its sender (the requests' source, the replies'
//!   destination), `kind` `router`, `reached`, `silent` or `error` (then
//!   `hop` says why, and `ttl` is 0).

use std::io::{self, Write};
use std::path::Path;

use mx_base::error::{Error, Result};

/// The file's name in the reports directory: CSV, named apart from the
/// reports (`<host>.csv`, which a host called `paths` would take).
pub const FILE: &str = "paths.trace";

const HEADER: &str = "traced_at,from,to,leg,sport,ttl,kind,hop,sent,answered";

/// Which leg of a stream a path carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Leg {
    /// Sender to responder.
    Requests,
    /// Responder back to sender.
    Replies,
}

impl Leg {
    pub fn word(self) -> &'static str {
        match self {
            Leg::Requests => "requests",
            Leg::Replies => "replies",
        }
    }

    fn parse(word: &str) -> Option<Leg> {
        match word {
            "requests" => Some(Leg::Requests),
            "replies" => Some(Leg::Replies),
            _ => None,
        }
    }
}

/// What answered the probes of one TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HopKind {
    /// A router (ICMP Time Exceeded) at this address.
    Router(String),
    /// The destination (its answer, or its ICMP error) at this address.
    Reached(String),
    /// Nothing answered.
    Silent,
}

/// One TTL of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedHop {
    pub ttl: u8,
    pub kind: HopKind,
    pub sent: u16,
    pub answered: u16,
}

impl TracedHop {
    /// The address that answered, if any.
    pub fn addr(&self) -> Option<&str> {
        match &self.kind {
            HopKind::Router(a) | HopKind::Reached(a) => Some(a),
            HopKind::Silent => None,
        }
    }
}

/// What the sweep of one tuple gave: its hops, or why it could not run.
pub type Sweep = std::result::Result<Vec<TracedHop>, String>;

/// One stream's leg, traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedPath {
    /// The hosts the leg's packets leave and reach (matrix names).
    pub from: String,
    pub to: String,
    pub leg: Leg,
    /// The stream's source port on its sender.
    pub sport: u16,
    pub hops: Sweep,
}

/// The host's line for the tuple `src` -> `dst` (`addr:port` each).
pub fn host_line(src: &str, dst: &str, sweep: &Sweep) -> String {
    let mut line = format!("{src} {dst}");
    match sweep {
        Ok(hops) => {
            for h in hops {
                let (mark, addr) = match &h.kind {
                    HopKind::Router(a) => ("r", a.as_str()),
                    HopKind::Reached(a) => ("d", a.as_str()),
                    HopKind::Silent => ("-", ""),
                };
                line.push_str(&format!(
                    " {}={mark}{addr}/{}/{}",
                    h.ttl, h.answered, h.sent
                ));
            }
        }
        Err(why) => {
            line.push_str(" error ");
            line.push_str(&why.replace(['\n', '\r'], " "));
        }
    }
    line
}

/// A host's line back: its tuple (`src`, `dst`) and its sweep; `None` for a
/// line that is not one (a shell's noise).
pub fn parse_host_line(line: &str) -> Option<(String, String, Sweep)> {
    let mut words = line.split(' ');
    let (src, dst) = (words.next()?, words.next()?);
    if !src.contains(':') || !dst.contains(':') {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    if rest.first() == Some(&"error") {
        return Some((src.to_string(), dst.to_string(), Err(rest[1..].join(" "))));
    }
    let hops = rest
        .iter()
        .map(|w| parse_hop(w))
        .collect::<Option<Vec<_>>>()?;
    Some((src.to_string(), dst.to_string(), Ok(hops)))
}

/// `2=r198.18.1.131/4/5`.
fn parse_hop(word: &str) -> Option<TracedHop> {
    let (ttl, rest) = word.split_once('=')?;
    let mut parts = rest.rsplitn(3, '/');
    let sent = parts.next()?.parse().ok()?;
    let answered = parts.next()?.parse().ok()?;
    let who = parts.next()?;
    let kind = match who.split_at_checked(1)? {
        ("r", a) if !a.is_empty() => HopKind::Router(a.to_string()),
        ("d", a) if !a.is_empty() => HopKind::Reached(a.to_string()),
        ("-", "") => HopKind::Silent,
        _ => return None,
    };
    Some(TracedHop {
        ttl: ttl.parse().ok()?,
        kind,
        sent,
        answered,
    })
}

/// Writes `paths` as [`FILE`] at `path` (whole, or not at all), traced
/// at `traced_at` (unix seconds).
pub fn write(path: &Path, traced_at: i64, paths: &[TracedPath]) -> Result<()> {
    mx_base::files::write_atomically(path, |out| {
        writeln!(out, "{HEADER}")?;
        for p in paths {
            write_path(out, traced_at, p)?;
        }
        Ok(())
    })
}

fn write_path(out: &mut dyn Write, traced_at: i64, p: &TracedPath) -> io::Result<()> {
    let head = format!(
        "{traced_at},{},{},{},{}",
        field(&p.from),
        field(&p.to),
        p.leg.word(),
        p.sport
    );
    match &p.hops {
        Err(why) => writeln!(out, "{head},0,error,{},0,0", field(why)),
        Ok(hops) => {
            for h in hops {
                let (kind, addr) = match &h.kind {
                    HopKind::Router(a) => ("router", a.as_str()),
                    HopKind::Reached(a) => ("reached", a.as_str()),
                    HopKind::Silent => ("silent", ""),
                };
                writeln!(
                    out,
                    "{head},{},{kind},{},{},{}",
                    h.ttl,
                    field(addr),
                    h.sent,
                    h.answered
                )?;
            }
            Ok(())
        }
    }
}

/// A cell, quoted where it holds a comma or a quote.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// [`FILE`] read back: when it was traced, and its paths in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Traced {
    pub traced_at: i64,
    pub paths: Vec<TracedPath>,
}

/// Reads [`FILE`] at `path`; `None` when there is none.
pub fn read(path: &Path) -> Result<Option<Traced>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, "cannot read", &e)),
    };
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| Error::refused(format!("{}: {e}", path.display())))?
        .clone();
    if header.iter().collect::<Vec<_>>().join(",") != HEADER {
        return Err(Error::refused(format!(
            "{}: line 1: not a paths file (want the header {HEADER})",
            path.display()
        )));
    }
    let mut traced = Traced::default();
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let bad = |what: &str| Error::refused(format!("{}: line {line}: {what}", path.display()));
        let r = record.map_err(|e| bad(&e.to_string()))?;
        let num = |k: usize| -> Result<i64> {
            r[k].parse::<i64>()
                .map_err(|_| bad(&format!("'{}' is not a number", &r[k])))
        };
        traced.traced_at = num(0)?;
        let leg = Leg::parse(&r[3]).ok_or_else(|| bad(&format!("leg '{}'", &r[3])))?;
        let sport = u16::try_from(num(4)?).map_err(|_| bad("a port is 1 to 65535"))?;
        let (from, to) = (r[1].to_string(), r[2].to_string());
        let hop = || -> Result<TracedHop> {
            let kind = match &r[6] {
                "router" => HopKind::Router(r[7].to_string()),
                "reached" => HopKind::Reached(r[7].to_string()),
                "silent" => HopKind::Silent,
                other => return Err(bad(&format!("kind '{other}'"))),
            };
            Ok(TracedHop {
                ttl: u8::try_from(num(5)?).map_err(|_| bad("a TTL is 1 to 255"))?,
                kind,
                sent: u16::try_from(num(8)?).map_err(|_| bad("probes sent"))?,
                answered: u16::try_from(num(9)?).map_err(|_| bad("probes answered"))?,
            })
        };
        let same = traced.paths.last().is_some_and(|p: &TracedPath| {
            (p.from.as_str(), p.to.as_str(), p.leg, p.sport) == (&from, &to, leg, sport)
                && p.hops.is_ok()
        });
        if &r[6] == "error" {
            traced.paths.push(TracedPath {
                from,
                to,
                leg,
                sport,
                hops: Err(r[7].to_string()),
            });
        } else if same {
            let last = traced.paths.last_mut().expect("same: there is one");
            last.hops.as_mut().expect("same: hops").push(hop()?);
        } else {
            traced.paths.push(TracedPath {
                from,
                to,
                leg,
                sport,
                hops: Ok(vec![hop()?]),
            });
        }
    }
    Ok(Some(traced))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hops() -> Vec<TracedHop> {
        let hop = |ttl, kind, answered| TracedHop {
            ttl,
            kind,
            sent: 5,
            answered,
        };
        vec![
            hop(1, HopKind::Router("198.18.1.62".into()), 5),
            hop(2, HopKind::Router("198.18.1.131".into()), 4),
            TracedHop {
                ttl: 3,
                kind: HopKind::Silent,
                sent: 2,
                answered: 0,
            },
            hop(4, HopKind::Reached("198.18.1.65".into()), 5),
        ]
    }

    #[test]
    fn a_host_line_reads_back_as_it_was_written() {
        let line = host_line("198.18.1.1:40000", "198.18.1.65:5300", &Ok(hops()));
        assert_eq!(
            line,
            "198.18.1.1:40000 198.18.1.65:5300 1=r198.18.1.62/5/5 2=r198.18.1.131/4/5 3=-/0/2 4=d198.18.1.65/5/5"
        );
        assert_eq!(
            parse_host_line(&line),
            Some((
                "198.18.1.1:40000".into(),
                "198.18.1.65:5300".into(),
                Ok(hops())
            ))
        );
        let refused = host_line("a:1", "b:2", &Err("Address in use\n(os error 98)".into()));
        assert_eq!(refused, "a:1 b:2 error Address in use (os error 98)");
        assert_eq!(
            parse_host_line(&refused).unwrap().2,
            Err("Address in use (os error 98)".to_string())
        );
        assert_eq!(parse_host_line("started"), None);
        assert_eq!(parse_host_line("a:1 b:2 7=x/1/1"), None);
    }

    #[test]
    fn paths_csv_reads_back_path_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(FILE);
        let paths = vec![
            TracedPath {
                from: "h1".into(),
                to: "h3".into(),
                leg: Leg::Requests,
                sport: 40000,
                hops: Ok(hops()),
            },
            TracedPath {
                from: "h3".into(),
                to: "h1".into(),
                leg: Leg::Replies,
                sport: 40000,
                hops: Err("bind 198.18.1.65:5300: Address in use, say".into()),
            },
            TracedPath {
                from: "h3".into(),
                to: "h1".into(),
                leg: Leg::Replies,
                sport: 40001,
                hops: Ok(hops()),
            },
        ];
        write(&file, 1_796_616_000, &paths).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with(&format!(
                "{HEADER}\n1796616000,h1,h3,requests,40000,1,router,198.18.1.62,5,5\n"
            )),
            "{text}"
        );
        assert!(text.contains("\n1796616000,h3,h1,replies,40000,0,error,\"bind 198.18.1.65:5300: Address in use, say\",0,0\n"), "{text}");
        let back = read(&file).unwrap().unwrap();
        assert_eq!(back.traced_at, 1_796_616_000);
        assert_eq!(back.paths, paths);
        assert_eq!(read(&dir.path().join("none.trace")).unwrap(), None);
        std::fs::write(&file, "ts,host\n").unwrap();
        let refused = read(&file).unwrap_err().to_string();
        assert!(refused.contains("line 1: not a paths file"), "{refused}");
    }
}
