//! How much of its report an agent keeps (`--keep-report`): a fleet always on for
//! weeks must never fill a disk. Past its bound the report is cut to its
//! newest rows, in place (the kept rows copied to a side file renamed over
//! it), so that everything that reads `report.csv` (collect, status, the
//! summary) reads the kept window as it reads any report.
//!
//! A size bound keeps between half of it and all of it; an age bound keeps
//! between the age and one and a half times it. The cut is made between
//! ticks by the reporter, never on the hot path, and costs one copy of the
//! kept half each time the report grows by that much.

use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

/// The bound on an agent's report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keep {
    /// Everything (`--keep-report 0`): for a campaign whose every row is wanted.
    All,
    /// At most this many bytes.
    Bytes(u64),
    /// The rows of at most the last this many seconds.
    Seconds(f64),
}

/// The bound when none is given: weeks of a low-rate fleet (10 pps to 8
/// peers at a 5 s interval writes about 90 MB a day), and far more than a
/// campaign of hours at hundreds of peers writes.
pub const DEFAULT: &str = "1G";

/// The smallest size bound: a few intervals of a large host's rows.
pub(crate) const MIN_BYTES: u64 = 64 << 10;

/// The smallest age bound.
pub(crate) const MIN_SECONDS: f64 = 60.0;

/// `--keep-report`: `0`, a size (`512M`, `2G`; K, M, G, T are binary) or an age
/// (`90m`, `12h`, `14d`, or `s`): `M` is MiB, `m` minutes.
pub fn parse(text: &str) -> Result<Keep, String> {
    let t = text.trim();
    let why = || {
        format!(
            "--keep-report '{text}': want a size (512M, 2G: at least 64K) or an age (12h, 14d: at least 60s) of the report to keep, or 0 to keep it all"
        )
    };
    if t == "0" {
        return Ok(Keep::All);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(why)?;
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| why())?;
    if !(n.is_finite() && n > 0.0) {
        return Err(why());
    }
    let bytes = |shift: u32| (n * (1u64 << shift) as f64) as u64;
    let seconds = |per: f64| n * per;
    // Sizes in capitals (k and g too), ages in lower case: `M` is MiB and
    // `m` minutes.
    let keep = match unit {
        "K" | "k" => Keep::Bytes(bytes(10)),
        "M" => Keep::Bytes(bytes(20)),
        "G" | "g" => Keep::Bytes(bytes(30)),
        "T" | "t" => Keep::Bytes(bytes(40)),
        "s" => Keep::Seconds(seconds(1.0)),
        "m" => Keep::Seconds(seconds(60.0)),
        "h" => Keep::Seconds(seconds(3600.0)),
        "d" => Keep::Seconds(seconds(86400.0)),
        _ => return Err(why()),
    };
    match keep {
        Keep::Bytes(b) if b < MIN_BYTES => Err(why()),
        Keep::Seconds(s) if s < MIN_SECONDS => Err(why()),
        keep => Ok(keep),
    }
}

/// Where a cut keeps from: the first row at or past a byte offset, or the
/// first row of an interval at or after a label.
#[derive(Debug, Clone, Copy)]
pub enum CutFrom {
    Offset(u64),
    Label(i64),
}

impl Keep {
    /// Whether a report of `size` bytes whose oldest row is labelled
    /// `oldest`, at interval `newest`, is past its bound; where to cut it.
    pub fn cut(&self, size: u64, oldest: Option<i64>, newest: i64) -> Option<CutFrom> {
        match *self {
            Keep::All => None,
            Keep::Bytes(limit) => (size > limit).then(|| CutFrom::Offset(size - limit / 2)),
            Keep::Seconds(age) => {
                let oldest = oldest?;
                ((newest - oldest) as f64 > age * 1.5).then(|| CutFrom::Label(newest - age as i64))
            }
        }
    }
}

/// What a cut left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cut {
    /// Bytes of the report now.
    pub size: u64,
    /// The label of its oldest row, if it has one.
    pub oldest: Option<i64>,
    /// Rows dropped.
    pub dropped: u64,
}

/// The label of a report row (its first cell).
fn label(row: &[u8]) -> Option<i64> {
    let end = row.iter().position(|&b| b == b',')?;
    std::str::from_utf8(&row[..end]).ok()?.parse().ok()
}

/// The label of the report's oldest row.
pub(crate) fn oldest_label(path: &Path) -> Option<i64> {
    let mut lines = BufReader::new(std::fs::File::open(path).ok()?).split(b'\n');
    lines.next()?.ok()?;
    label(&lines.next()?.ok()?)
}

/// The `began_by` a cut report's first host row carries: the summary reads
/// its beginning as a cut, not as a host that came up late.
pub(crate) const CUT_MARK: &str = "keep";

/// `row` with its cell `column` set to `value` (a cell past the row's end
/// is left as it is).
fn with_cell(row: &[u8], column: usize, value: &str) -> Vec<u8> {
    let body = row.strip_suffix(b"\r\n").unwrap_or(row);
    let mut cells: Vec<&[u8]> = body.split(|&b| b == b',').collect();
    if column >= cells.len() {
        return row.to_vec();
    }
    cells[column] = value.as_bytes();
    let mut out = cells.join(&b","[..]);
    out.extend_from_slice(&row[body.len()..]);
    out
}

/// Cuts the report at `path` to its header and its rows from `from` on,
/// its first host row marked `began_by=keep`: written to a side file
/// beside it, renamed over it.
pub fn cut(path: &Path, from: CutFrom) -> io::Result<Cut> {
    let mut reader = BufReader::new(std::fs::File::open(path)?);
    let side = path.with_extension("csv.cut");
    let mut out = io::BufWriter::new(std::fs::File::create(&side)?);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    out.write_all(&line)?;
    let header = String::from_utf8_lossy(&line).trim_end().to_string();
    let column = |name: &str| header.split(',').position(|c| c == name);
    let (dir, began_by) = (column("dir"), column("began_by"));
    let mut at = line.len() as u64;
    let mut dropped = 0;
    let mut oldest = None;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let keep = match from {
            CutFrom::Offset(offset) => at >= offset,
            CutFrom::Label(first) => label(&line).is_some_and(|l| l >= first),
        };
        at += line.len() as u64;
        if keep {
            oldest = label(&line);
            break;
        }
        dropped += 1;
    }
    // The kept rows up to the first host row, which is marked.
    while !line.is_empty() {
        let is_host = dir.is_some_and(|d| line.split(|&b| b == b',').nth(d) == Some(b"host"));
        match (is_host, began_by) {
            (true, Some(column)) => {
                out.write_all(&with_cell(&line, column, CUT_MARK))?;
                break;
            }
            _ => out.write_all(&line)?,
        }
        line.clear();
        reader.read_until(b'\n', &mut line)?;
    }
    io::copy(&mut reader, &mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    let size = file.metadata()?.len();
    drop(file);
    std::fs::rename(&side, path)?;
    Ok(Cut {
        size,
        oldest,
        dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_is_a_size_or_an_age_or_nothing() {
        assert_eq!(parse("0"), Ok(Keep::All));
        assert_eq!(parse("64K"), Ok(Keep::Bytes(64 << 10)));
        assert_eq!(parse("1G"), Ok(Keep::Bytes(1 << 30)));
        assert_eq!(parse("1.5m"), Ok(Keep::Seconds(90.0)));
        assert_eq!(parse("14d"), Ok(Keep::Seconds(14.0 * 86400.0)));
        for bad in ["", "G", "-1G", "63K", "30s", "5x", "NaNG", "1 G"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn past_its_bound_a_report_keeps_its_newest_half_or_its_age() {
        let bytes = Keep::Bytes(1000);
        assert!(bytes.cut(1000, Some(1), 9).is_none());
        assert!(matches!(
            bytes.cut(1001, Some(1), 9),
            Some(CutFrom::Offset(501))
        ));
        let age = Keep::Seconds(100.0);
        assert!(age.cut(1 << 30, Some(0), 150).is_none());
        assert!(matches!(age.cut(0, Some(0), 151), Some(CutFrom::Label(51))));
        assert!(Keep::All.cut(u64::MAX, Some(0), i64::MAX).is_none());
    }

    #[test]
    fn a_cut_keeps_the_header_and_whole_rows_from_where_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.csv");
        let rows: String = (10..20)
            .map(|ts| format!("{ts},h1,tx,\r\n{ts},h1,host,\r\n"))
            .collect();
        std::fs::write(&path, format!("ts,host,dir,began_by\r\n{rows}")).unwrap();
        let by_label = cut(&path, CutFrom::Label(15)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        // The first host row kept says the report was cut there.
        assert!(
            text.starts_with("ts,host,dir,began_by\r\n15,h1,tx,\r\n15,h1,host,keep\r\n16,h1,tx,\r\n16,h1,host,\r\n"),
            "{text}"
        );
        assert!(text.ends_with("19,h1,host,\r\n"), "{text}");
        assert_eq!((by_label.oldest, by_label.dropped), (Some(15), 10));
        assert_eq!(by_label.size, text.len() as u64);
        // An offset inside a row keeps from the next whole one.
        let header = "ts,host,dir,began_by\r\n".len() as u64;
        let by_offset = cut(&path, CutFrom::Offset(header + 3)).unwrap();
        assert_eq!((by_offset.oldest, by_offset.dropped), (Some(15), 1));
        assert_eq!(oldest_label(&path), Some(15));
        assert!(!dir.path().join("report.csv.cut").exists());
    }
}
