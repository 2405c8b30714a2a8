//! Reading report.csv files back, whatever state they are in: reports of hosts
//! that died mid-run, a truncated last line, an empty file, a report of the
//! original Python tool (30 columns), blank cells. A file that is not a report
//! at all is refused, named, in one line.
//!
//! Rows are streamed to a callback as borrowed views, so a 12-million-row set
//! is read in bounded memory; columns are found by name from the header, so any
//! column order and any subset of our extra columns reads.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::Column;
use super::row::Dir;
use mx_base::error::{Error, Result};

/// Where each column of the schema sits in one file (None: the file has no
/// such column: a report of the original, or of an older mx).
#[derive(Debug, Clone, Default)]
struct Columns {
    ts: usize,
    host: usize,
    dir: usize,
    peer: usize,
    /// By `Column as usize`.
    index: Vec<Option<usize>>,
}

/// One row of a report, borrowed from the reader's buffer.
pub struct RowView<'a> {
    record: &'a csv::ByteRecord,
    columns: &'a Columns,
    pub ts: i64,
}

impl<'a> RowView<'a> {
    fn cell(&self, index: usize) -> &'a str {
        self.record
            .get(index)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
            .trim()
    }

    pub fn host(&self) -> &'a str {
        self.cell(self.columns.host)
    }

    pub fn peer(&self) -> &'a str {
        self.cell(self.columns.peer)
    }

    /// The row's side of the exchange (`dir`); `None` for an unknown one.
    pub fn dir(&self) -> Option<Dir> {
        Dir::parse(self.cell(self.columns.dir))
    }

    /// A cell, as text ("" when blank or absent).
    pub fn text(&self, column: Column) -> &'a str {
        self.columns.index[column as usize].map_or("", |i| self.cell(i))
    }

    /// A numeric cell; `None` when blank, absent or not a number.
    pub fn num(&self, column: Column) -> Option<f64> {
        let text = self.text(column);
        if text.is_empty() {
            return None;
        }
        text.parse::<f64>().ok().filter(|v| v.is_finite())
    }
}

/// The report files of a directory: every `*.csv`, sorted by name.
pub fn report_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::refused(format!(
                "no reports in {}/ -- is the run started? (mx status)",
                dir.display()
            ))
        } else {
            Error::io(dir, "cannot list the reports", &e)
        }
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv") && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::refused(format!(
            "no reports in {}/ -- is the run started? (mx status)",
            dir.display()
        )));
    }
    Ok(files)
}

fn not_a_report(path: &Path) -> Error {
    Error::refused(format!(
        "{}: not an mx report (its first line is not the report header: ts,host,dir,peer,...)",
        path.display()
    ))
}

fn columns_of(header: &csv::ByteRecord, path: &Path) -> Result<Columns> {
    let names: Vec<String> = header
        .iter()
        .map(|n| String::from_utf8_lossy(n).trim().to_string())
        .collect();
    // Columns are found by name (the first of a repeated one): any order and
    // any subset of ours reads; names the schema does not know are ignored.
    let index: Vec<Option<usize>> = Column::ALL
        .iter()
        .map(|c| names.iter().position(|n| n == c.name()))
        .collect();
    let find = |c: Column| index[c as usize].ok_or_else(|| not_a_report(path));
    Ok(Columns {
        ts: find(Column::Ts)?,
        host: find(Column::Host)?,
        dir: find(Column::Dir)?,
        peer: find(Column::Peer)?,
        index,
    })
}

/// Refuses a file whose first line is not a report header, reading at most
/// 64 KiB: a multi-GB file of anything else is turned away without being read.
fn check_header_line(file: &mut File, path: &Path) -> Result<()> {
    let mut head = Vec::with_capacity(4096);
    (&mut *file)
        .take(64 * 1024)
        .read_to_end(&mut head)
        .and_then(|_| file.seek(SeekFrom::Start(0)))
        .map_err(|e| Error::io(path, "cannot read the report", &e))?;
    if head.is_empty() {
        return Ok(());
    }
    match memchr::memchr(b'\n', &head) {
        Some(end) if head[..end].starts_with(b"ts,") => Ok(()),
        // A header still being written is a report with no rows yet.
        None if head.len() < 64 * 1024 && b"ts,".starts_with(&head[..head.len().min(3)]) => Ok(()),
        _ => Err(not_a_report(path)),
    }
}

/// Whether the file at `path` reads as a report: its first line the report
/// header, with the columns a summary needs. Reads at most 64 KiB: what a
/// collection checks of each report as it arrives, before it takes the
/// place of the copy collected before.
pub fn check_report(path: &Path) -> Result<()> {
    let mut file = File::open(path).map_err(|e| Error::io(path, "cannot read the report", &e))?;
    check_header_line(&mut file, path)?;
    let mut head = Vec::with_capacity(4096);
    file.take(64 * 1024)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(path, "cannot read the report", &e))?;
    let Some(end) = memchr::memchr(b'\n', &head) else {
        return Ok(());
    };
    let header = csv::ByteRecord::from(head[..end].split(|&b| b == b',').collect::<Vec<_>>());
    columns_of(&header, path).map(|_| ())
}

/// Byte length of the part of the file that ends in a newline: a last line
/// cut short (a host that died mid-write, a copy in progress) is left out.
fn complete_length(file: &mut File) -> std::io::Result<u64> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(len);
    }
    // Find the last newline, scanning back a block at a time.
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block[..n])?;
        if let Some(pos) = memchr::memrchr(b'\n', &block[..n]) {
            return Ok(start + pos as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Calls `f` for every row of `path` that has a timestamp, in file order.
pub fn for_each_row(path: &Path, f: impl FnMut(&RowView<'_>)) -> Result<()> {
    let mut file = File::open(path).map_err(|e| Error::io(path, "cannot read the report", &e))?;
    check_header_line(&mut file, path)?;
    let length =
        complete_length(&mut file).map_err(|e| Error::io(path, "cannot read the report", &e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(path, "cannot read the report", &e))?;
    if length == 0 {
        return Ok(());
    }
    rows_of(file.take(length), path, f)
}

/// Calls `f` for every row with a timestamp of a report's text (its header
/// line first), read from `reader`; `path` names it in errors.
pub fn rows_of(
    reader: impl std::io::Read,
    path: &Path,
    mut f: impl FnMut(&RowView<'_>),
) -> Result<()> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(1 << 20)
        .from_reader(std::io::BufReader::with_capacity(1 << 20, reader));
    let mut record = csv::ByteRecord::new();
    let read = |reader: &mut csv::Reader<_>, record: &mut csv::ByteRecord| {
        reader
            .read_byte_record(record)
            .map_err(|e| Error::refused(format!("{}: {e}", path.display())))
    };
    if !read(&mut reader, &mut record)? {
        return Ok(());
    }
    let columns = columns_of(&record, path)?;
    while read(&mut reader, &mut record)? {
        let Some(ts) = record
            .get(columns.ts)
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| t.trim().parse::<f64>().ok())
        else {
            continue;
        };
        let row = RowView {
            record: &record,
            columns: &columns,
            ts: ts as i64,
        };
        f(&row);
    }
    Ok(())
}

/// The traffic print (`matrix_fp`) of the newest host row of `path` that
/// carries one: what its agent last ran. Read from the tail (the last 256
/// KiB, a host row every interval), the whole file where the tail holds
/// none; `None` for a report of an agent that wrote no print.
pub fn latest_matrix_print(path: &Path) -> Result<Option<String>> {
    let mut file = File::open(path).map_err(|e| Error::io(path, "cannot read the report", &e))?;
    check_header_line(&mut file, path)?;
    let length =
        complete_length(&mut file).map_err(|e| Error::io(path, "cannot read the report", &e))?;
    let mut header = Vec::new();
    std::io::BufRead::read_until(&mut std::io::BufReader::new(&mut file), b'\n', &mut header)
        .map_err(|e| Error::io(path, "cannot read the report", &e))?;
    let tail_start = length.saturating_sub(256 * 1024).max(header.len() as u64);
    let mut tail = vec![0u8; length.saturating_sub(tail_start) as usize];
    file.seek(SeekFrom::Start(tail_start))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|e| Error::io(path, "cannot read the report", &e))?;
    // A tail that starts inside a line skips to the next one.
    let body = if tail_start == header.len() as u64 {
        &tail[..]
    } else {
        memchr::memchr(b'\n', &tail).map_or(&tail[..0], |p| &tail[p + 1..])
    };
    let latest = newest_print(|f| rows_of((&header[..]).chain(body), path, f))?;
    if latest.is_none() && tail_start > header.len() as u64 {
        return newest_print(|f| for_each_row(path, f));
    }
    Ok(latest)
}

/// The print of the last host row `scan` shows that carries one.
fn newest_print(
    scan: impl FnOnce(&mut dyn FnMut(&RowView<'_>)) -> Result<()>,
) -> Result<Option<String>> {
    let mut latest = None;
    scan(&mut |row: &RowView<'_>| {
        let print = row.text(Column::MatrixFp);
        if row.dir() == Some(Dir::Host) && !print.is_empty() {
            latest = Some(print.to_string());
        }
    })?;
    Ok(latest)
}

/// The newest timestamp in `path`, read from its tail (reports are appended in
/// time order); the whole file is scanned only if the tail holds no row.
pub fn latest_ts(path: &Path) -> Result<Option<i64>> {
    let mut file = File::open(path).map_err(|e| Error::io(path, "cannot read the report", &e))?;
    check_header_line(&mut file, path)?;
    let length =
        complete_length(&mut file).map_err(|e| Error::io(path, "cannot read the report", &e))?;
    let tail_start = length.saturating_sub(256 * 1024);
    if tail_start > 0 {
        let mut tail = vec![0u8; (length - tail_start) as usize];
        file.seek(SeekFrom::Start(tail_start))
            .and_then(|_| file.read_exact(&mut tail))
            .map_err(|e| Error::io(path, "cannot read the report", &e))?;
        // Skip the first (possibly partial) line of the tail.
        let body = memchr::memchr(b'\n', &tail).map_or(&tail[..0], |p| &tail[p + 1..]);
        let latest = body
            .split(|&b| b == b'\n')
            .filter_map(|line| {
                let first = line.split(|&b| b == b',').next()?;
                std::str::from_utf8(first).ok()?.trim().parse::<f64>().ok()
            })
            .map(|t| t as i64)
            .max();
        if latest.is_some() {
            return Ok(latest);
        }
    }
    let mut latest = None;
    for_each_row(path, |row| {
        latest = Some(latest.map_or(row.ts, |l: i64| l.max(row.ts)))
    })?;
    Ok(latest)
}
