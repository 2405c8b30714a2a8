//! A host's slice of a matrix: what its agent needs of it, and no more. A
//! matrix grows with the square of the fleet (a 10,000-host `--peers 8`
//! matrix is 100 MB of mostly empty cells); a slice grows with the fleet.
//! `mx start` copies each host its slice; the controller keeps `matrix.csv`
//! as it is, and the slice is derived from it, never edited.
//!
//! ```text
//! # mx slice v1 host=h2 run=9760af4e2790a7f8 -- h2's part of a matrix, cut by mx: ...
//! # tx_size=64 rx_size=512 port=5300          (the matrix's `#` lines, as it writes them)
//! src\dst,h1=10.0.0.1,h2=10.0.0.2,h3=10.0.0.3 (its host header, whole)
//! rates 1000*3                                (a layered matrix: each row's rate, run-length)
//! row 1 0=1000 2=1000                         (the host's own row)
//! row 0 1=1000                                (and each cell that sends to it)
//! row 2 1=1000
//! end lines=7 sha256=<the SHA-256 of every byte above this line>
//! ```
//!
//! What the agent derives from a slice is what it derives from the whole
//! matrix, for its host: its flows in every layer, what each source sends it
//! (its answer budgets), its run print and its stamp. A layered matrix's
//! rows are layer 0 of a seeded plan, which the slice rebuilds from the seed
//! and each row's rate (a row's cells all send at its rate in every layer).
//!
//! A row that sends to every other host at one rate (a full mesh's) is
//! written `row 1 *=1000`.
//!
//! A matrix also gives one slice for every host (`hosts=all` where a host's
//! slice names its host), for a transport that sends one file to every host
//! (Slurm's `sbcast`). Of a layered matrix: the head and the rates line,
//! from which each agent rebuilds every row from the seed; a row whose cells
//! do not all send at its rate (a hand edit) is written whole. At 10,000
//! hosts with `--peers 8` it is the host header and a few bytes more, where
//! the matrix is 100 MB. Of a grid: the head and every row that sends, its
//! cells alone (a 10,000-host `--peers 8` grid's 80,000 cells, not its
//! 100,000,000 mostly empty ones). Its `run=` is the print of every host's
//! traffic at once ([`fleet_print`](super::run_print::fleet_print)).
//!
//! The end line makes a slice cut short, or changed on its way, refused; the
//! first line's run print (the print of the host's traffic that its reports
//! carry) makes a slice that reads as other traffic than it was cut from
//! refused too.

use std::io::Write;

use sha2::{Digest, Sha256};

use super::SLICE_MARK as MARK;
use super::read::parse_rate;
use super::run_print::RunPrints;
use super::write::rate_text;
use super::{Cell, Matrix, Rate};
use mx_base::error::{Error, Result};

const VERSION: u32 = 1;

/// Cuts every host's slice of one matrix, the parts they share (the head,
/// the run prints' common terms, who sends to whom) made once.
pub struct Slicer {
    matrix: Matrix,
    /// The matrix's `#` lines and its host header, with line ends.
    head: Vec<u8>,
    /// `rates ...` of a layered matrix, with its line end; empty otherwise.
    rates: Vec<u8>,
    /// The cells into each host: by receiver, (sender, rate).
    into: Vec<Vec<(u32, Rate)>>,
    prints: RunPrints,
}

impl Slicer {
    pub fn new(matrix: Matrix) -> Slicer {
        let mut head = Vec::new();
        matrix
            .write_head(&mut head)
            .expect("writing to a Vec cannot fail");
        matrix.header_line(&mut head);
        head.push(b'\n');
        let rates = match matrix.config.rotation {
            Some(_) => rates_line(&matrix),
            None => Vec::new(),
        };
        let mut into = vec![Vec::new(); matrix.host_count()];
        for (src, row) in matrix.rows() {
            for cell in row {
                into[cell.dst as usize].push((src, cell.rate));
            }
        }
        Slicer {
            prints: RunPrints::new(&matrix),
            matrix,
            head,
            rates,
            into,
        }
    }

    /// The matrix it cuts.
    pub fn matrix(&self) -> &Matrix {
        &self.matrix
    }

    /// Host `me`'s slice, whole.
    pub fn slice(&self, me: u32) -> Vec<u8> {
        let name = &self.matrix.hosts()[me as usize].name;
        let mut out = Vec::with_capacity(self.head.len() + self.rates.len() + 4096);
        writeln!(
            out,
            "{MARK}{VERSION} host={name} run={} -- {name}'s part of a matrix, cut by mx for its agent: not a file to edit",
            self.prints.of(&self.matrix, me)
        )
        .expect("writing to a Vec cannot fail");
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.rates);
        self.row_line(&mut out, me, self.matrix.row(me));
        for &(src, rate) in &self.into[me as usize] {
            row_line(&mut out, src, [(me, rate)].into_iter());
        }
        seal(&mut out);
        out
    }

    /// Every host's slice in one file, for a transport that copies one file
    /// to every host: a layered matrix's rows as its seed and their rates,
    /// a grid's as their cells.
    pub fn every_host(&self) -> Vec<u8> {
        let layered = self.matrix.config.rotation.is_some();
        let mut out = Vec::with_capacity(self.head.len() + self.rates.len() + 4096);
        writeln!(
            out,
            "{MARK}{VERSION} {EVERY_HOST} run={} -- every host's part of a matrix, cut by mx for its agents: not a file to edit",
            super::run_print::fleet_print(&self.matrix)
        )
        .expect("writing to a Vec cannot fail");
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.rates);
        for (src, row) in self.matrix.rows() {
            let rebuilt = layered && {
                let rate = self.matrix.row_rate(src);
                row.iter().all(|c| Some(c.rate) == rate)
            };
            if !rebuilt && !row.is_empty() {
                self.row_line(&mut out, src, row);
            }
        }
        seal(&mut out);
        out
    }

    /// `row SRC DST=RATE ...`, or `row SRC *=RATE` for a row that sends to
    /// every other host at one rate.
    fn row_line(&self, out: &mut Vec<u8>, src: u32, cells: &[Cell]) {
        let every_other = cells.len() + 1 == self.matrix.host_count()
            && cells.iter().all(|c| c.rate == cells[0].rate);
        if every_other {
            writeln!(out, "row {src} *={}", rate_text(cells[0].rate))
                .expect("writing to a Vec cannot fail");
        } else {
            row_line(out, src, cells.iter().map(|c| (c.dst, c.rate)));
        }
    }
}

/// The first line's word for a slice of every host (where one host's slice
/// has `host=NAME`).
const EVERY_HOST: &str = "hosts=all";

/// Ends a slice: its line count and the SHA-256 of every byte before it.
fn seal(out: &mut Vec<u8>) {
    let lines = memchr::memchr_iter(b'\n', out.as_slice()).count();
    let sha = hex(&Sha256::digest(out.as_slice()));
    writeln!(out, "end lines={lines} sha256={sha}").expect("writing to a Vec cannot fail");
}

/// `rates <rate>*<count> ...`: each row's rate in host order, runs of one
/// rate as one term; `-` for a row with no cells.
fn rates_line(matrix: &Matrix) -> Vec<u8> {
    let mut line = b"rates".to_vec();
    let mut runs: Vec<(Option<Rate>, usize)> = Vec::new();
    for (src, _) in matrix.rows() {
        let rate = matrix.row_rate(src);
        match runs.last_mut() {
            Some((r, count)) if *r == rate => *count += 1,
            _ => runs.push((rate, 1)),
        }
    }
    for (rate, count) in runs {
        let text = rate.map_or("-".to_string(), rate_text);
        write!(line, " {text}*{count}").expect("writing to a Vec cannot fail");
    }
    line.push(b'\n');
    line
}

fn row_line(out: &mut Vec<u8>, src: u32, cells: impl Iterator<Item = (u32, Rate)>) {
    write!(out, "row {src}").expect("writing to a Vec cannot fail");
    for (dst, rate) in cells {
        write!(out, " {dst}={}", rate_text(rate)).expect("writing to a Vec cannot fail");
    }
    out.push(b'\n');
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `data` begins as a slice does.
pub fn is_slice(data: &[u8]) -> bool {
    data.starts_with(MARK.as_bytes())
}

/// A slice read back: the matrix as its host's agent sees it, and that
/// host's index in it (`None` for a slice of every host: each agent finds
/// itself in it, as in a whole matrix).
pub struct Slice {
    pub matrix: Matrix,
    pub me: Option<u32>,
}

/// What an agent runs from: a host's slice or a whole matrix (the original
/// tool's `mx agent --matrix matrix.csv`), told apart by the first line;
/// with the host a slice was cut for.
pub fn load(path: &std::path::Path) -> Result<(Matrix, Option<u32>)> {
    use std::io::Read;
    let cannot = |e: std::io::Error| Error::io(path, "cannot read the matrix", &e);
    let mut first = [0u8; MARK.len()];
    let peeked = match std::fs::File::open(path) {
        Ok(mut file) => file.read(&mut first).map_err(cannot)?,
        // A missing file is said as the matrix reader says it.
        Err(_) => return Ok((Matrix::load(path)?, None)),
    };
    if !is_slice(&first[..peeked]) {
        return Ok((Matrix::load(path)?, None));
    }
    let data = std::fs::read(path).map_err(cannot)?;
    let slice = read(&data, &path.display().to_string())?;
    Ok((slice.matrix, slice.me))
}

/// Reads a slice, a host's or every host's; `label` names it in a refusal
/// (its path). Refused in one line: a slice cut short or changed since it
/// was cut, one of a newer mx, or one whose traffic is not the print it was
/// cut with.
pub fn read(data: &[u8], label: &str) -> Result<Slice> {
    let refuse = |why: String| Error::refused(format!("{label}: {why}"));
    let body = verified_body(data).map_err(&refuse)?;
    let mut lines = body
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix(b"\r").unwrap_or(l)));
    let (_, first) = lines.next().unwrap_or_default();
    let (host, run) = first_line(first).map_err(&refuse)?;
    let mut head: Vec<(usize, &[u8])> = Vec::new();
    let mut hosts = None;
    for (no, line) in lines.by_ref() {
        head.push((no, line));
        if line.starts_with(b"src\\dst,") {
            hosts = Some(line.iter().filter(|&&b| b == b',').count());
            break;
        }
    }
    let n = hosts.ok_or_else(|| refuse("no host header (src\\dst,...)".to_string()))?;
    let mut rows: Vec<Vec<Cell>> = vec![Vec::new(); n];
    let mut seen = vec![false; n];
    let mut rates = None;
    for (no, line) in lines {
        let at = |why: String| refuse(format!("line {no}: {why}"));
        if let Some(rest) = line.strip_prefix(b"rates ") {
            rates = Some(rates_of(rest, n).map_err(at)?);
        } else if let Some(rest) = line.strip_prefix(b"row ") {
            let (src, cells) = row_of(rest, n).map_err(at)?;
            if std::mem::replace(&mut seen[src as usize], true) {
                return Err(at(format!("a second row for host {src}")));
            }
            rows[src as usize] = cells;
        } else if !line.is_empty() {
            return Err(at("neither a row nor a rates line".to_string()));
        }
    }
    let mut matrix = Matrix::from_slice_head(&head, rows, label)?;
    let Some(host) = host else {
        if matrix.config.rotation.is_some() {
            rebuild_every_row(&mut matrix, rates.as_deref(), &seen).map_err(&refuse)?;
        }
        let read_as = super::run_print::fleet_print(&matrix);
        if read_as != run {
            return Err(refuse(format!(
                "cut as traffic {run}, and reads as {read_as}: not the matrix it was cut from -- start again (mx start)"
            )));
        }
        return Ok(Slice { matrix, me: None });
    };
    let me = matrix.index_of(&host).ok_or_else(|| {
        refuse(format!(
            "cut for host '{host}', which its header does not name"
        ))
    })?;
    if let Some(plan) = matrix.layer_plan() {
        let rates =
            rates.ok_or_else(|| refuse("a layered matrix's slice with no rates line".into()))?;
        for src in (0..n as u32).filter(|&s| s != me) {
            let Some(rate) = rates[src as usize] else {
                continue;
            };
            // Layer 0 of the plan at the row's rate, and the cell into this
            // host at the rate the matrix gives it.
            let into = matrix.rows[src as usize].first().copied();
            if into.is_some_and(|cell| !plan.targets(src, 0).any(|dst| dst == cell.dst)) {
                return Err(refuse(format!(
                    "host {src}'s cell into {host} is not in the layer 0 its seed derives"
                )));
            }
            matrix.rows[src as usize] = seeded_row(&plan, src, rate, into);
        }
    }
    let read_as = super::run_print::run_print(&matrix, me);
    if read_as != run {
        return Err(refuse(format!(
            "cut as traffic {run}, and reads as {read_as}: not the matrix it was cut from -- start again (mx start)"
        )));
    }
    Ok(Slice {
        matrix,
        me: Some(me),
    })
}

/// The rows of a slice of every host: layer 0 of the seeded plan at each
/// row's rate, but for the rows written whole (`written`).
fn rebuild_every_row(
    matrix: &mut Matrix,
    rates: Option<&[Option<Rate>]>,
    written: &[bool],
) -> std::result::Result<(), String> {
    let plan = matrix.layer_plan().ok_or("a layered matrix with no plan")?;
    let rates = rates.ok_or("a layered matrix's slice with no rates line")?;
    for src in 0..written.len() as u32 {
        match rates[src as usize] {
            Some(rate) if !written[src as usize] => {
                matrix.rows[src as usize] = seeded_row(&plan, src, rate, None);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Host `src`'s row as its seed derives it (layer 0 of `plan`), every cell
/// at the row's `rate` but `written`, a cell the slice gives as it is.
fn seeded_row(
    plan: &super::shape::Layers,
    src: u32,
    rate: Rate,
    written: Option<Cell>,
) -> Vec<Cell> {
    let mut row: Vec<Cell> = plan
        .targets(src, 0)
        .map(|dst| match written {
            Some(cell) if cell.dst == dst => cell,
            _ => Cell { dst, rate },
        })
        .collect();
    row.sort_unstable_by_key(|c| c.dst);
    row
}

/// The slice above its end line, once the end line vouches for it.
fn verified_body(data: &[u8]) -> std::result::Result<&[u8], String> {
    let cut = || "cut short (its end line is missing): copy it again (mx start)".to_string();
    let trimmed = data.strip_suffix(b"\n").ok_or_else(cut)?;
    let start = memchr::memrchr(b'\n', trimmed).map_or(0, |i| i + 1);
    let (body, end) = (&data[..start], &trimmed[start..]);
    let end = std::str::from_utf8(end).map_err(|_| cut())?;
    let mut words = end.split(' ');
    if words.next() != Some("end") {
        return Err(cut());
    }
    let (mut lines, mut sha) = (None, None);
    for word in words {
        match word.split_once('=') {
            Some(("lines", v)) => lines = v.parse::<usize>().ok(),
            Some(("sha256", v)) => sha = Some(v),
            _ => {}
        }
    }
    let (Some(lines), Some(sha)) = (lines, sha) else {
        return Err(cut());
    };
    let have = memchr::memchr_iter(b'\n', body).count();
    if have != lines || hex(&Sha256::digest(body)) != sha {
        return Err(format!(
            "changed since it was cut ({have} lines of the {lines} it was cut with, or other bytes): copy it again (mx start)"
        ));
    }
    Ok(body)
}

/// The host (`None` for every host: `hosts=all`) and the run print of
/// `# mx slice v1 host=NAME run=PRINT -- ...`.
fn first_line(line: &[u8]) -> std::result::Result<(Option<String>, String), String> {
    let text = String::from_utf8_lossy(line);
    let rest = text
        .strip_prefix(MARK)
        .ok_or_else(|| "not a slice (its first line)".to_string())?;
    let version: u32 = rest
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| "not a slice (no version)".to_string())?;
    if version > VERSION {
        return Err(format!(
            "a v{version} slice, from a newer mx: this agent reads v{VERSION} -- start with one mx"
        ));
    }
    let word = |key: &str| {
        rest.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
            .ok_or_else(|| format!("its first line names no {key}"))
    };
    let every = rest.split_whitespace().any(|w| w == EVERY_HOST);
    let host = if every { None } else { Some(word("host=")?) };
    Ok((host, word("run=")?))
}

/// The `rates` terms: `n` rates (`None` for a row with no cells).
fn rates_of(text: &[u8], n: usize) -> std::result::Result<Vec<Option<Rate>>, String> {
    let mut rates = Vec::with_capacity(n);
    for term in text.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
        let star = memchr::memrchr(b'*', term).ok_or("a rate without its count")?;
        let count: usize = std::str::from_utf8(&term[star + 1..])
            .ok()
            .and_then(|c| c.parse().ok())
            .ok_or("a bad count")?;
        let rate = match &term[..star] {
            b"-" => None,
            field => Some(rate(field)?),
        };
        if rates.len() + count > n {
            return Err(format!("rates for more than its {n} hosts"));
        }
        rates.extend(std::iter::repeat_n(rate, count));
    }
    if rates.len() != n {
        return Err(format!("rates for {} of its {n} hosts", rates.len()));
    }
    Ok(rates)
}

/// `SRC DST=RATE ...`: a sender and its cells, sorted by receiver; or
/// `SRC *=RATE`: every other host at one rate.
fn row_of(text: &[u8], n: usize) -> std::result::Result<(u32, Vec<Cell>), String> {
    let mut words = text.split(|&b| b == b' ').filter(|t| !t.is_empty());
    let index = |w: &[u8]| -> std::result::Result<u32, String> {
        std::str::from_utf8(w)
            .ok()
            .and_then(|t| t.parse::<u32>().ok())
            .filter(|&i| (i as usize) < n)
            .ok_or_else(|| {
                format!(
                    "'{}' is not one of its {n} hosts",
                    String::from_utf8_lossy(w)
                )
            })
    };
    let src = index(words.next().ok_or("an empty row")?)?;
    let mut cells: Vec<Cell> = Vec::new();
    let mut words = words.peekable();
    if let Some(every) = words.peek().and_then(|w| w.strip_prefix(b"*=")) {
        let rate = rate(every)?;
        words.next();
        if words.next().is_some() {
            return Err(format!("host {src}'s row sends to every host, and more"));
        }
        let others = (0..n as u32).filter(|&dst| dst != src);
        return Ok((src, others.map(|dst| Cell { dst, rate }).collect()));
    }
    for word in words {
        let eq = memchr::memchr(b'=', word).ok_or("a cell without its rate")?;
        let dst = index(&word[..eq])?;
        if dst == src || cells.last().is_some_and(|c| c.dst >= dst) {
            return Err(format!("host {src}'s cells out of order"));
        }
        cells.push(Cell {
            dst,
            rate: rate(&word[eq + 1..])?,
        });
    }
    Ok((src, cells))
}

fn rate(field: &[u8]) -> std::result::Result<Rate, String> {
    match parse_rate(field) {
        Ok(Some(rate)) => Ok(rate),
        _ => Err(format!(
            "'{}' is not a rate",
            String::from_utf8_lossy(field)
        )),
    }
}

#[cfg(test)]
mod tests;
