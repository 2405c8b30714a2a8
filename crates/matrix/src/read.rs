//! Reading `matrix.csv`, including files edited by hand.
//!
//! The rules are the original tool's: every line is trimmed; blank
//! lines are skipped; a line starting with `#` is a comment wherever it stands, and
//! its `key=value` tokens set the config (later ones win); every other line is a
//! CSV row (standard quoting, CRLF or LF). The first row is the header of host
//! tokens; each later row is a sender, its cells mapped to the header by position.
//!
//! Every refusal names the file and, where one is at fault, the line
//! (`matrix.csv:7: cell a -> b: 'x' is not a packet rate ...`).
//!
//! Stricter than the original in two places, where its forgiveness hides a
//! mistake that quietly changes the run:
//! - a row host written twice is refused, naming both lines (the original merges
//!   the rows: a row copy-pasted for another host and not renamed
//!   would silently drop that host's flows);
//! - two hosts at one address and UDP port are refused (one agent would answer
//!   for both, and the summary would still call every flow on target).
//!
//! A value on the diagonal, or a cell past the header's last host, is ignored as
//! the original ignores it, but no longer silently: each is a warning on the
//! loaded matrix ([`Matrix::warnings`]) that the commands print. Nothing `mx gen`
//! writes is refused or warned about.
//!
//! The grid of a sparse 10,000-host matrix is ~100 MB of commas, so rows are split
//! without copying when they hold no quotes, and a cell repeated from the one before
//! (the common case: one rate everywhere) is not parsed again.

use std::collections::HashMap;
use std::path::Path;

use super::pools::{Between, Pool, Pools};
use super::shape::LayerPlan;
use super::{
    Cell, Config, FORMAT_VERSION, HostToken, MAX_HOSTS, Matrix, Rate, Rotation, ShuffleKey,
};
use super::{Host, token::TokenError};
use mx_base::error::{Error, Result};

/// The config keys a matrix header may set: the original's nine, ours
/// (`between`, `duplex`), and `dscp` (the original ignores it, and runs such
/// a matrix unmarked).
const CONFIG_KEYS: [&str; 12] = [
    "tx_size", "rx_size", "port", "peers", "seed", "layers", "dwell", "fill", "disk", "between",
    "duplex", "dscp",
];

/// Warnings listed one by one; past that, one line counts the rest (a filled-in
/// diagonal of a 10,000-host matrix is not 10,000 lines of stderr).
const MAX_WARNINGS: usize = 20;

/// The longest line a matrix may have. A full-mesh row of 65,535 hosts is
/// ~400 KB; a longer line is not a matrix, and reading it whole (a multi-GB
/// file with no newline) would only fill memory.
const MAX_LINE: usize = 64 << 20;

impl Matrix {
    /// Loads a matrix file, streaming it line by line: a 10,000-host sparse
    /// matrix is ~100 MB of text, and an agent holds only the parsed cells.
    /// A missing file says how to make one.
    pub fn load(path: &Path) -> Result<Matrix> {
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::refused(format!(
                    "matrix not found: {}  (make one with: mx gen --servers servers.txt --pps 10000)",
                    path.display()
                )));
            }
            Err(e) => return Err(Error::io(path, "cannot read the matrix", &e)),
        };
        let label = path.display().to_string();
        let mut reader = GridReader::new(&label);
        let mut input = std::io::BufReader::with_capacity(1 << 16, file);
        let mut line = Vec::new();
        for line_no in 1.. {
            line.clear();
            let mut capped = std::io::Read::take(&mut input, MAX_LINE as u64 + 1);
            let read = std::io::BufRead::read_until(&mut capped, b'\n', &mut line)
                .map_err(|e| Error::io(path, "cannot read the matrix", &e))?;
            if read == 0 {
                break;
            }
            if line.len() > MAX_LINE {
                return Err(reader.refuse_at(line_no, "a line over 64 MiB: not a matrix"));
            }
            reader.line(&line, line_no)?;
        }
        reader.finish()
    }

    /// Parses matrix text; `label` names it in errors (normally the file's path).
    pub fn parse(data: &[u8], label: &str) -> Result<Matrix> {
        let mut reader = GridReader::new(label);
        let mut start = 0;
        for (index, end) in memchr::memchr_iter(b'\n', data)
            .chain(std::iter::once(data.len()))
            .enumerate()
        {
            reader.line(&data[start..end], index + 1)?;
            start = (end + 1).min(data.len());
        }
        reader.finish()
    }

    /// The agent's stricter check on a layered matrix: its grid must be exactly the
    /// layer 0 its seed derives, or agents that re-derive the layers would disagree
    /// with what the file shows.
    pub fn check_layer_zero(&self, label: &str) -> Result<()> {
        let (Some(plan), Some(key), Some(rotation)) =
            (self.layer_plan(), self.config.shuffle, self.config.rotation)
        else {
            return Ok(());
        };
        let matches = self.rows().all(|(src, row)| {
            let mut want: Vec<u32> = plan.targets(src, 0).collect();
            want.sort_unstable();
            row.iter().map(|c| c.dst).eq(want)
        });
        if matches {
            Ok(())
        } else {
            Err(Error::refused(format!(
                "{label}: the grid does not match its layers header (edited by hand?) -- regenerate with `mx gen --peers {} --dwell {} --seed {}`",
                key.peers,
                mx_base::units::g(rotation.dwell),
                key.seed
            )))
        }
    }
}

impl Matrix {
    /// A matrix from a slice's head (its `#` lines and the host header, by
    /// line number, read as a matrix's are) and the rows the slice holds,
    /// one per host of the header.
    pub(crate) fn from_slice_head(
        head: &[(usize, &[u8])],
        rows: Vec<Vec<Cell>>,
        label: &str,
    ) -> Result<Matrix> {
        let mut reader = GridReader::new(label);
        reader.slice = true;
        for &(line_no, line) in head {
            reader.line(line, line_no)?;
        }
        if reader.tokens.len() != rows.len() {
            return Err(reader.refuse(format!(
                "its header names {} hosts and it holds rows for {}",
                reader.tokens.len(),
                rows.len()
            )));
        }
        reader.rows = rows;
        reader.grid_rows = 2;
        reader.finish()
    }
}

/// An integer key's value and the line it was on (`None`: absent).
type KeyAt = Option<(i64, usize)>;

/// A config value as found, with the line it was on (the last occurrence wins).
struct RawValue {
    text: String,
    line: usize,
}

/// The state of one pass over the file.
struct GridReader<'a> {
    label: &'a str,
    config: HashMap<&'static str, RawValue>,
    /// Header: host tokens in column order, and for each grid column the host it
    /// maps to (`None` for a blank header cell, which still takes a position).
    header_line: usize,
    tokens: Vec<HostToken>,
    columns: Vec<Option<u32>>,
    /// Grid columns up to the header's last host (trailing blank header cells,
    /// as a spreadsheet pads them, are not columns); a cell beyond is ignored.
    host_columns: usize,
    by_name: HashMap<String, u32>,
    rows: Vec<Vec<Cell>>,
    /// Line of each host's row, 0 when it has none yet: a second row is refused.
    row_lines: Vec<usize>,
    warnings: Vec<String>,
    /// Warnings past [`MAX_WARNINGS`], counted but not listed.
    unlisted_warnings: usize,
    grid_rows: usize,
    scratch: Vec<u8>,
    last_cell: Vec<u8>,
    last_rate: Option<Rate>,
    /// `# pool NAME: host host ...` lines as found: name, member names, line.
    pool_lines: Vec<(String, Vec<String>, usize)>,
    /// Reading a host's slice: its rows are that host's part, and may hold
    /// no cell at all (a host that neither sends nor is sent to).
    slice: bool,
}

impl<'a> GridReader<'a> {
    fn new(label: &'a str) -> Self {
        GridReader {
            label,
            config: HashMap::new(),
            header_line: 0,
            tokens: Vec::new(),
            columns: Vec::new(),
            host_columns: 0,
            by_name: HashMap::new(),
            rows: Vec::new(),
            row_lines: Vec::new(),
            warnings: Vec::new(),
            unlisted_warnings: 0,
            grid_rows: 0,
            scratch: Vec::new(),
            last_cell: Vec::new(),
            last_rate: None,
            pool_lines: Vec::new(),
            slice: false,
        }
    }

    fn refuse_at(&self, line: usize, message: impl std::fmt::Display) -> Error {
        Error::refused(format!("{}:{line}: {message}", self.label))
    }

    fn refuse(&self, message: impl std::fmt::Display) -> Error {
        Error::refused(format!("{}: {message}", self.label))
    }

    /// Something accepted but ignored: kept for the commands to print.
    fn warn_at(&mut self, line: usize, message: impl std::fmt::Display) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings
                .push(format!("{}:{line}: {message}", self.label));
        } else {
            self.unlisted_warnings += 1;
        }
    }

    /// One line of the file, classified.
    fn line(&mut self, line: &[u8], line_no: usize) -> Result<()> {
        if memchr::memchr(0, line).is_some() {
            return Err(self.refuse_at(line_no, "binary data (a NUL byte): not a matrix"));
        }
        let line = line.trim_ascii();
        match line.first() {
            None => Ok(()),
            Some(b'#') => self.config_line(line, line_no),
            Some(_) => self.grid_line(line, line_no),
        }
    }

    fn config_line(&mut self, line: &[u8], line_no: usize) -> Result<()> {
        // Comments are free text; only `key=value` tokens with a known key count.
        let text = String::from_utf8_lossy(line);
        if line_no == 1 && text.starts_with(super::SLICE_MARK) {
            return Err(self.refuse_at(
                line_no,
                "one host's slice of a matrix (what mx start copies to each host), not a matrix: give the matrix.csv it was cut from",
            ));
        }
        if let Some(version) = text
            .strip_prefix("# mx matrix v")
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|digits| digits.parse::<u32>().ok())
            && version > FORMAT_VERSION
        {
            return Err(self.refuse_at(
                line_no,
                format!(
                    "a v{version} matrix, from a newer mx: this one reads v{FORMAT_VERSION} -- upgrade mx, or regenerate the matrix with this one"
                ),
            ));
        }
        if let Some(pool) = text
            .trim_start_matches('#')
            .trim_start()
            .strip_prefix("pool ")
        {
            return self.pool_line(pool, line_no);
        }
        for token in text.trim_start_matches('#').split_whitespace() {
            let Some((key, value)) = token.split_once('=') else {
                continue;
            };
            if let Some(&key) = CONFIG_KEYS.iter().find(|&&k| k == key) {
                self.config.insert(
                    key,
                    RawValue {
                        text: value.to_string(),
                        line: line_no,
                    },
                );
            }
        }
        Ok(())
    }

    /// `# pool NAME: host host ...` (the `# pool ` already taken off).
    fn pool_line(&mut self, rest: &str, line_no: usize) -> Result<()> {
        let Some((name, members)) = rest.split_once(':') else {
            return Err(self.refuse_at(
                line_no,
                "a pool line is '# pool NAME: host host ...' (no ':' after the name)",
            ));
        };
        let name = name.trim();
        if !Pools::valid_name(name) {
            return Err(self.refuse_at(
                line_no,
                format!("bad pool name '{name}' (letters, digits, '_', '-' and '.')"),
            ));
        }
        if let Some((_, _, first)) = self.pool_lines.iter().find(|(n, _, _)| n == name) {
            return Err(self.refuse_at(
                line_no,
                format!("pool '{name}' is written twice (first on line {first})"),
            ));
        }
        let members = members.split_whitespace().map(str::to_string).collect();
        self.pool_lines.push((name.to_string(), members, line_no));
        Ok(())
    }

    /// The pools of the `# pool` lines over the header's hosts, and the
    /// `between=` pair. A pool member that is not a host is left out, with a
    /// warning (the host was deleted by hand); a host in two pools, an
    /// empty pool or a `between=` that names no pool is refused.
    fn pools(&mut self) -> Result<Pools> {
        let mut pools = Pools::default();
        let mut pool_line_of: HashMap<u32, (usize, usize)> = HashMap::new();
        for (name, members, line) in std::mem::take(&mut self.pool_lines) {
            let mut pool = Pool {
                name: name.clone(),
                members: Vec::with_capacity(members.len()),
            };
            for member in &members {
                let Some(&host) = self.by_name.get(member) else {
                    self.warn_at(
                        line,
                        format!(
                            "pool {name} names '{member}', which is not a host of the matrix -- left out of the pool"
                        ),
                    );
                    continue;
                };
                if let Some((other, other_line)) = pool_line_of.get(&host) {
                    let other = &pools.pools[*other].name;
                    let what = if *other == name {
                        format!("pool {name} names host '{member}' twice")
                    } else {
                        format!(
                            "host '{member}' is in pool {other} (line {other_line}) and in pool {name}: a host belongs to one pool"
                        )
                    };
                    return Err(self.refuse_at(line, what));
                }
                pool_line_of.insert(host, (pools.pools.len(), line));
                pool.members.push(host);
            }
            if pool.members.is_empty() {
                return Err(self.refuse_at(line, format!("pool {name} has no host of the matrix")));
            }
            pools.pools.push(pool);
        }
        if let Some(raw) = self.config.get("between") {
            let index = |name: &str| pools.pools.iter().position(|p| p.name == name);
            let pair = raw
                .text
                .split_once(',')
                .and_then(|(a, b)| Some((index(a.trim())?, index(b.trim())?)));
            let Some((senders, receivers)) = pair.filter(|(a, b)| a != b) else {
                let known: Vec<&str> = pools.pools.iter().map(|p| p.name.as_str()).collect();
                return Err(self.refuse_at(
                    raw.line,
                    format!(
                        "bad between='{}' in the config header (want two different pools of the '# pool' lines: {})",
                        raw.text,
                        if known.is_empty() { "there are none".to_string() } else { known.join(", ") }
                    ),
                ));
            };
            let duplex = match self.int("duplex")? {
                None | Some((0, _)) => false,
                Some((1, _)) => true,
                Some((_, line)) => {
                    return Err(self.refuse_at(line, "duplex must be 0 or 1"));
                }
            };
            pools.between = Some(Between {
                senders,
                receivers,
                duplex,
            });
        }
        Ok(pools)
    }

    fn grid_line(&mut self, line: &[u8], line_no: usize) -> Result<()> {
        let mut fields: Vec<Vec<u8>> = Vec::new();
        let mut scratch = std::mem::take(&mut self.scratch);
        let blank = if self.grid_rows == 0 {
            // The header is short; collect it whole.
            for_each_field(line, &mut scratch, Fields::All, |_, f| {
                fields.push(f.trim_ascii().to_vec());
                Ok(())
            })?;
            let blank = fields.iter().all(Vec::is_empty);
            if !blank {
                self.header(&fields, line_no)?;
            }
            blank
        } else {
            self.host_row(line, line_no, &mut scratch)?
        };
        self.scratch = scratch;
        if !blank {
            self.grid_rows += 1;
        }
        Ok(())
    }

    fn header(&mut self, fields: &[Vec<u8>], line_no: usize) -> Result<()> {
        self.header_line = line_no;
        // A header deleted: the first row of rates would read as hosts
        // named 100 and max, and the error would be about them.
        let named: Vec<&Vec<u8>> = fields.iter().skip(1).filter(|f| !f.is_empty()).collect();
        let corner = fields.first().map(Vec::as_slice).unwrap_or_default();
        if corner != b"src\\dst" && !named.is_empty() && named.iter().all(|f| parse_rate(f).is_ok())
        {
            return Err(self.refuse_at(
                line_no,
                "a row of rates where the header belongs: the grid's first line names the hosts (src\\dst,h1,h2,...), then a row per host -- was the header line deleted?",
            ));
        }
        // Cell 0 is the corner (`src\dst`) and is ignored.
        for field in fields.iter().skip(1) {
            if field.is_empty() {
                self.columns.push(None);
                continue;
            }
            let text = self.utf8(field, line_no)?;
            let token = HostToken::parse(text).map_err(|e| self.refuse_at(line_no, e))?;
            if self.by_name.contains_key(&token.name) {
                return Err(self.refuse_at(
                    line_no,
                    format!("duplicate host '{}' in the header", token.name),
                ));
            }
            let index = self.tokens.len() as u32;
            self.by_name.insert(token.name.clone(), index);
            self.columns.push(Some(index));
            self.tokens.push(token);
        }
        if self.tokens.len() < 2 {
            // One cell holding it all: another separator than the comma.
            let separator = [b';', b'\t', b'|']
                .into_iter()
                .find(|c| fields.iter().any(|f| f.contains(c)));
            let why = match separator {
                Some(c) => {
                    let shown = if c == b'\t' {
                        "a tab".to_string()
                    } else {
                        format!("'{}'", c as char)
                    };
                    format!(
                        "need at least 2 hosts, and the header's cells are separated by {shown}, not commas: matrix.csv is comma-separated (saved from a spreadsheet? save it as CSV with commas)"
                    )
                }
                None => "need at least 2 hosts".to_string(),
            };
            return Err(self.refuse_at(line_no, why));
        }
        self.host_columns = self
            .columns
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1);
        if self.tokens.len() > MAX_HOSTS {
            return Err(self.refuse_at(
                line_no,
                format!(
                    "{} hosts is more than the {MAX_HOSTS} the wire format can address",
                    self.tokens.len()
                ),
            ));
        }
        self.rows = vec![Vec::new(); self.tokens.len()];
        self.row_lines = vec![0; self.tokens.len()];
        Ok(())
    }

    /// Reads one sender row; returns true when the row was blank (and ignored).
    fn host_row(&mut self, line: &[u8], line_no: usize, scratch: &mut Vec<u8>) -> Result<bool> {
        let mut src: Option<u32> = None;
        let mut blank = true;
        let mut cells: Vec<Cell> = Vec::new();
        let mut pending: Option<Error> = None;
        for_each_field(line, scratch, Fields::NonEmpty, |column, field| {
            let field = field.trim_ascii();
            if field.is_empty() {
                return Ok(());
            }
            blank = false;
            if column == 0 {
                src = Some(self.row_sender(field, line_no)?);
                return Ok(());
            }
            // Cells past the header's last host are ignored, as the original
            // does, with a warning. (A cell under a blank header cell between
            // hosts is ignored silently, as before.)
            if column > self.host_columns {
                if let Some(src) = src {
                    self.warn_past_header(src, column, field, line_no);
                }
                return Ok(());
            }
            let Some(dst) = self.columns[column - 1] else {
                return Ok(());
            };
            let rate = self.cell_rate(field);
            let Some(src) = src else {
                // A row whose first cell is blank but has rates: no sender to
                // give them to. Refused once the row is read.
                pending.get_or_insert_with(|| {
                    self.refuse_at(
                        line_no,
                        "a row with rates but no sender host in its first cell",
                    )
                });
                return Ok(());
            };
            if let Some(cell) = self.row_cell((src, dst), rate, field, line_no)? {
                cells.push(cell);
            }
            Ok(())
        })?;
        if let Some(err) = pending {
            return Err(err);
        }
        if let Some(src) = src {
            self.row_lines[src as usize] = line_no;
            self.rows[src as usize] = cells;
        }
        Ok(blank)
    }

    /// The host a row's first cell names: one of the header's, and not one
    /// whose row came before. The original merges a repeated row into the
    /// first; we refuse it (see the module comment).
    fn row_sender(&self, field: &[u8], line_no: usize) -> Result<u32> {
        let text = self.utf8(field, line_no)?;
        let token = HostToken::parse(text).map_err(|e| self.refuse_at(line_no, e))?;
        let index = self.by_name.get(&token.name).copied().ok_or_else(|| {
            self.refuse_at(
                line_no,
                format!("row host '{}' is not in the header row", token.name),
            )
        })?;
        let first = self.row_lines[index as usize];
        if first != 0 {
            return Err(self.refuse_at(
                line_no,
                format!(
                    "row host '{}' is written twice (first on line {first}) -- each host has one row",
                    token.name
                ),
            ));
        }
        Ok(index)
    }

    /// Warns of a cell in `column` (0-based, the sender's is 0) past the
    /// header's last host, naming that host and both columns 1-based as a
    /// spreadsheet shows them.
    fn warn_past_header(&mut self, src: u32, column: usize, field: &[u8], line_no: usize) {
        let last = self.host_columns - 1;
        let message = format!(
            "cell {} -> column {}: '{}' is past the last host of the header ('{}', column {}) -- ignored",
            self.tokens[src as usize].name,
            column + 1,
            shown(field),
            self.tokens[self.columns[last].expect("a host column") as usize].name,
            last + 2,
        );
        self.warn_at(line_no, message);
    }

    /// One cell's flow from `src` to `dst`, if it is one. The diagonal is
    /// ignored, with a warning (a 0 there says "no flow", which is true,
    /// and goes unremarked); a cell that is not a rate refuses the file.
    fn row_cell(
        &mut self,
        (src, dst): (u32, u32),
        rate: Result<Option<Rate>, CellError>,
        field: &[u8],
        line_no: usize,
    ) -> Result<Option<Cell>> {
        let (s, d) = (
            &self.tokens[src as usize].name,
            &self.tokens[dst as usize].name,
        );
        match rate {
            Ok(None) => Ok(None),
            Ok(Some(rate)) if dst != src => Ok(Some(Cell { dst, rate })),
            Ok(Some(_)) => {
                let message = format!(
                    "cell {s} -> {s}: '{}' is on the diagonal (a host does not send to itself) -- ignored",
                    shown(field),
                );
                self.warn_at(line_no, message);
                Ok(None)
            }
            Err(kind) => {
                let cell = String::from_utf8_lossy(field);
                let what = match kind {
                    CellError::NotARate => format!(
                        "cell {s} -> {d}: '{cell}' is not a packet rate (a number, empty, or 'max')"
                    ),
                    CellError::Negative => {
                        format!("cell {s} -> {d}: negative packet rate '{cell}'")
                    }
                    CellError::BeyondAnyNic => {
                        format!("cell {s} -> {d}: {}", super::load::beyond_any_nic(&cell))
                    }
                };
                Err(self.refuse_at(line_no, what))
            }
        }
    }

    /// Parses a cell, reusing the previous cell's result when the text repeats.
    fn cell_rate(&mut self, field: &[u8]) -> Result<Option<Rate>, CellError> {
        if field == self.last_cell.as_slice() {
            return Ok(self.last_rate);
        }
        let rate = parse_rate(field)?;
        self.last_cell.clear();
        self.last_cell.extend_from_slice(field);
        self.last_rate = rate;
        Ok(rate)
    }

    fn utf8<'f>(&self, field: &'f [u8], line_no: usize) -> Result<&'f str> {
        std::str::from_utf8(field).map_err(|_| self.refuse_at(line_no, "not UTF-8 text"))
    }

    fn int(&self, key: &str) -> Result<Option<(i64, usize)>> {
        let Some(raw) = self.config.get(key) else {
            return Ok(None);
        };
        match raw.text.trim().parse::<i64>() {
            Ok(v) => Ok(Some((v, raw.line))),
            Err(_) => Err(self.refuse_at(
                raw.line,
                format!("bad {key}='{}' in the config header", raw.text),
            )),
        }
    }

    fn finish(mut self) -> Result<Matrix> {
        if self.grid_rows < 2 {
            return Err(self.refuse("need a header row and at least one host row"));
        }
        let mut config = Config::default();
        for (key, slot) in [
            ("tx_size", &mut config.tx_size),
            ("rx_size", &mut config.rx_size),
        ] {
            if let Some((size, line)) = self.int(key)? {
                *slot = super::packet_size(key, size).map_err(|e| self.refuse_at(line, e))?;
            }
        }
        if let Some((port, line)) = self.int("port")? {
            if !(1..=65535).contains(&port) {
                return Err(self.refuse_at(
                    line,
                    format!("port must be between 1 and 65535 (got {port})"),
                ));
            }
            config.port = port as u16;
        }
        if let Some(raw) = self.config.get("disk") {
            config.disk = super::DiskMode::parse(&raw.text).ok_or_else(|| {
                self.refuse_at(
                    raw.line,
                    format!(
                        "bad disk='{}' in the config header (want one of: off, requests, replies, both)",
                        raw.text
                    ),
                )
            })?;
        }
        if let Some(raw) = self.config.get("dscp") {
            config.dscp = super::Dscp::parse(&raw.text).map_err(|why| {
                self.refuse_at(
                    raw.line,
                    format!("bad dscp='{}' in the config header (want {why})", raw.text),
                )
            })?;
        }
        let peers = self.int("peers")?;
        let seed = self.int("seed")?;
        let layers = self.int("layers")?;
        let fill = self.int("fill")?;
        if let (Some((peers, _)), Some((seed, _))) = (peers, seed)
            && (1..=i64::from(u32::MAX)).contains(&peers)
        {
            config.shuffle = Some(ShuffleKey {
                peers: peers as u32,
                seed,
            });
        }

        let hosts: Vec<Host> = self
            .tokens
            .iter()
            .cloned()
            .map(|t| Host::from_token(t, config.port))
            .collect();
        if let Some((a, b)) = super::shared_endpoint(&hosts) {
            return Err(self.refuse_at(
                self.header_line,
                super::shared_endpoint_message(&hosts[a], &hosts[b]),
            ));
        }
        let n = hosts.len();
        let pools = self.pools()?;
        if let Some((layer_count, line)) = layers.filter(|&(l, _)| l > 1) {
            config.rotation =
                Some(self.rotation(n, &pools, layer_count, line, (peers, seed, fill))?);
        }
        if !self.slice && self.rows.iter().all(Vec::is_empty) {
            return Err(self.refuse("every cell is empty -- no flows to run"));
        }
        let mut warnings = self.warnings;
        if self.unlisted_warnings > 0 {
            warnings.push(format!(
                "{}: {} more cells ignored like these (the first {MAX_WARNINGS} are listed)",
                self.label, self.unlisted_warnings
            ));
        }
        let mut matrix = Matrix::from_parts(config, hosts, self.rows).with_pools(pools);
        // Address literals of two families in one group of flows cannot run
        // (names are resolved, and checked, where they are resolved).
        super::family::decide(&matrix, &super::family::literal_offers(&matrix))
            .map_err(|why| Error::refused(format!("{}: {why}", self.label)))?;
        matrix.warnings = warnings;
        Ok(matrix)
    }

    /// Validates the rotation keys of a layered matrix.
    fn rotation(
        &self,
        hosts: usize,
        pools: &Pools,
        layers: i64,
        line: usize,
        (peers, seed, fill): (KeyAt, KeyAt, KeyAt),
    ) -> Result<Rotation> {
        let incomplete = || {
            self.refuse_at(
                line,
                format!(
                    "layers={layers} needs peers, seed and dwell in the header -- regenerate with `mx gen --peers K --dwell T`"
                ),
            )
        };
        let dwell = match self.config.get("dwell") {
            None => return Err(incomplete()),
            Some(raw) => match raw.text.trim().parse::<f64>() {
                Ok(d) if d.is_finite() => (d, raw.line),
                _ => {
                    return Err(self.refuse_at(
                        raw.line,
                        format!("bad dwell='{}' in the config header", raw.text),
                    ));
                }
            },
        };
        let (Some((peers, _)), Some((seed, _))) = (peers, seed) else {
            return Err(incomplete());
        };
        let most = pools.max_peers().unwrap_or(hosts - 1);
        if peers < 1 || peers as usize > most || seed < 0 || dwell.0 <= 0.0 {
            return Err(incomplete());
        }
        let (derived, whom) = match pools.between {
            Some(_) => (pools.layer_count(peers as usize), "its pools".to_string()),
            None => (
                LayerPlan::layer_count(hosts, peers as usize),
                format!("{hosts} hosts"),
            ),
        };
        if derived as i64 != layers {
            return Err(self.refuse_at(
                line,
                format!(
                    "layers={layers} but {whom} at {peers} peers per layer partition into {derived} layers -- the header was edited; regenerate with `mx gen`"
                ),
            ));
        }
        Ok(Rotation {
            layers: layers as u32,
            dwell: dwell.0,
            fill: fill.is_some_and(|(f, _)| f != 0),
        })
    }
}

pub(crate) enum CellError {
    NotARate,
    Negative,
    /// A finite rate past what any NIC carries (a typo: `1e30`).
    BeyondAnyNic,
}

/// A cell's rate: blank or 0 is no flow, `max`/`inf`/`unpaced` (any case) unpaced.
pub(crate) fn parse_rate(field: &[u8]) -> Result<Option<Rate>, CellError> {
    if field.is_empty() {
        return Ok(None);
    }
    if [&b"max"[..], b"inf", b"unpaced"]
        .iter()
        .any(|word| field.eq_ignore_ascii_case(word))
    {
        return Ok(Some(Rate::UNPACED));
    }
    let text = std::str::from_utf8(field).map_err(|_| CellError::NotARate)?;
    match text.parse::<f64>() {
        Err(_) => Err(CellError::NotARate),
        Ok(v) if v.is_nan() => Err(CellError::NotARate),
        Ok(v) if v < 0.0 => Err(CellError::Negative),
        Ok(0.0) => Ok(None),
        Ok(v) if v.is_infinite() => Ok(Some(Rate::UNPACED)),
        Ok(v) if v > super::load::FASTEST_NIC_PPS => Err(CellError::BeyondAnyNic),
        Ok(v) => Ok(Some(Rate::per_second(v))),
    }
}

/// A cell's text for a warning: one line (control characters escaped) and short.
fn shown(field: &[u8]) -> String {
    const LONGEST: usize = 32;
    let text = String::from_utf8_lossy(field);
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == LONGEST {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Which fields [`for_each_field`] reports.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fields {
    All,
    /// Only non-empty ones: a sparse grid row is mostly commas, skipped in bulk.
    NonEmpty,
}

/// Calls `f(column, field)` for the CSV fields of one line. Lines without a quote
/// are split in place; quoted lines are decoded with csv-core (RFC 4180 quoting).
fn for_each_field(
    line: &[u8],
    scratch: &mut Vec<u8>,
    which: Fields,
    mut f: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    if memchr::memchr(b'"', line).is_some() {
        return for_each_quoted_field(line, scratch, which, f);
    }
    let mut column = 0;
    let mut start = 0;
    loop {
        if which == Fields::NonEmpty {
            let next = skip_commas(line, start);
            column += next - start;
            start = next;
        }
        let end = memchr::memchr(b',', &line[start..]).map_or(line.len(), |p| start + p);
        let field = &line[start..end];
        if which == Fields::All || !field.is_empty() {
            f(column, field)?;
        }
        if end == line.len() {
            return Ok(());
        }
        start = end + 1;
        column += 1;
    }
}

/// Index of the first byte at or after `start` that is not a comma; eight bytes
/// at a time, since a 10,000-host sparse row is ~10,000 commas in a row.
fn skip_commas(line: &[u8], mut start: usize) -> usize {
    const EIGHT_COMMAS: u64 = u64::from_ne_bytes([b','; 8]);
    while let Some(chunk) = line.get(start..start + 8) {
        let word = u64::from_ne_bytes(chunk.try_into().expect("eight bytes"));
        if word != EIGHT_COMMAS {
            break;
        }
        start += 8;
    }
    while line.get(start) == Some(&b',') {
        start += 1;
    }
    start
}

fn for_each_quoted_field(
    line: &[u8],
    scratch: &mut Vec<u8>,
    which: Fields,
    mut f: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut reader = csv_core::Reader::new();
    let mut input = line;
    // A decoded field is never longer than its input.
    scratch.clear();
    scratch.resize(line.len() + 1, 0);
    let mut written = 0;
    let mut column = 0;
    loop {
        // Once `input` is empty, the next call reads it as end of input.
        let (result, nin, nout) = reader.read_field(input, &mut scratch[written..]);
        input = &input[nin..];
        written += nout;
        match result {
            csv_core::ReadFieldResult::InputEmpty => {}
            csv_core::ReadFieldResult::OutputFull => scratch.resize(scratch.len() * 2, 0),
            csv_core::ReadFieldResult::Field { record_end } => {
                if which == Fields::All || written > 0 {
                    f(column, &scratch[..written])?;
                }
                column += 1;
                written = 0;
                if record_end {
                    return Ok(());
                }
            }
            csv_core::ReadFieldResult::End => return Ok(()),
        }
    }
}

impl From<TokenError> for Error {
    fn from(e: TokenError) -> Self {
        Error::refused(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str, which: Fields) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        for_each_field(line.as_bytes(), &mut scratch, which, |column, f| {
            out.push((column, String::from_utf8(f.to_vec()).unwrap()));
            Ok(())
        })
        .unwrap();
        out
    }

    fn all(line: &str) -> Vec<String> {
        fields(line, Fields::All)
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }

    #[test]
    fn fields_split_with_and_without_quotes() {
        assert_eq!(all("a,,b"), ["a", "", "b"]);
        assert_eq!(all("a,"), ["a", ""]);
        assert_eq!(all(",,"), ["", "", ""]);
        assert_eq!(all("\"a\",\"1,5\",\"x\"\"y\""), ["a", "1,5", "x\"y"]);
        assert_eq!(all("\"a\","), ["a", ""]);
    }

    #[test]
    fn non_empty_fields_keep_their_columns() {
        let want = |v: &[(usize, &str)]| -> Vec<(usize, String)> {
            v.iter().map(|&(c, f)| (c, f.to_string())).collect()
        };
        // Runs of commas longer and shorter than the eight-byte stride.
        let line = format!("h1{}5{}7,", ",".repeat(19), ",".repeat(3));
        assert_eq!(
            fields(&line, Fields::NonEmpty),
            want(&[(0, "h1"), (19, "5"), (22, "7")])
        );
        assert_eq!(fields(",,x", Fields::NonEmpty), want(&[(2, "x")]));
        assert_eq!(fields(",,,", Fields::NonEmpty), want(&[]));
        assert_eq!(
            fields("\"h\",,\"\",9", Fields::NonEmpty),
            want(&[(0, "h"), (3, "9")])
        );
    }

    fn refusal(text: &str) -> String {
        Matrix::parse(text.as_bytes(), "m.csv")
            .unwrap_err()
            .message()
            .to_string()
    }

    fn warnings(text: &str) -> Vec<String> {
        Matrix::parse(text.as_bytes(), "m.csv")
            .unwrap()
            .warnings()
            .to_vec()
    }

    #[test]
    fn a_missing_header_or_another_separator_is_said_for_what_it_is() {
        // The header line deleted: its first row is no host list.
        assert_eq!(
            refusal(
                "# tx_size=64 rx_size=64 port=5300\n\nh1=10.0.0.1,,100,100\nh2=10.0.0.2,100,,100\n"
            ),
            "m.csv:3: a row of rates where the header belongs: the grid's first line names the hosts (src\\dst,h1,h2,...), then a row per host -- was the header line deleted?"
        );
        // Semicolons (a spreadsheet's CSV), or tabs, for commas.
        assert_eq!(
            refusal("src\\dst;a;b\na;;5\nb;1;\n"),
            "m.csv:1: need at least 2 hosts, and the header's cells are separated by ';', not commas: matrix.csv is comma-separated (saved from a spreadsheet? save it as CSV with commas)"
        );
        assert!(refusal("src\\dst\ta\tb\n").contains("separated by a tab"));
        // A header of addresses, or of names that are numbers with a corner,
        // is a header.
        assert!(
            Matrix::parse(
                "src\\dst,10.0.0.1,10.0.0.2\n10.0.0.1,,5\n".as_bytes(),
                "m.csv"
            )
            .is_ok()
        );
        assert_eq!(
            refusal("src\\dst,a\na,,5\n"),
            "m.csv:1: need at least 2 hosts"
        );
    }

    #[test]
    fn a_second_row_for_a_host_is_refused_naming_both_lines() {
        assert_eq!(
            refusal("src\\dst,a,b,c\na,,5,\nb,1,,\n\n# c sends nothing\nb,,,9\n"),
            "m.csv:6: row host 'b' is written twice (first on line 3) -- each host has one row"
        );
        // The row names its host by the token's name, in any form.
        assert_eq!(
            refusal("src\\dst,a=10.0.0.1,b\na=10.0.0.1,,5\na,,6\n"),
            "m.csv:3: row host 'a' is written twice (first on line 2) -- each host has one row"
        );
        // A row with no rates is still the host's row.
        assert_eq!(
            refusal("src\\dst,a,b\na,,\nb,1,\na,,5\n"),
            "m.csv:4: row host 'a' is written twice (first on line 2) -- each host has one row"
        );
    }

    #[test]
    fn rates_in_a_row_with_no_sender_are_refused_whatever_they_are() {
        let refused = "m.csv:3: a row with rates but no sender host in its first cell";
        assert_eq!(refusal("src\\dst,a,b\na,,5\n,1,\n"), refused);
        // No sender to name in a cell's refusal: the row's is the one given.
        assert_eq!(refusal("src\\dst,a,b\na,,5\n,x,\n"), refused);
        // A row of empty cells is blank, whatever its commas.
        assert!(Matrix::parse("src\\dst,a,b\na,,5\n,,\n".as_bytes(), "m.csv").is_ok());
    }

    #[test]
    fn two_hosts_at_one_address_and_port_are_refused() {
        let both = |hosts: &str, at: &str| {
            format!(
                "m.csv:1: hosts {hosts} are both at {at} -- one agent would answer for both; give each host its own address or port"
            )
        };
        let header = |tokens: &str| format!("src\\dst,{tokens}\na,,5\n");
        assert_eq!(
            refusal(&header("a=127.0.0.61,b=127.0.0.61")),
            both("'a' and 'b'", "127.0.0.61:5300")
        );
        // Names compare without case; the address is trimmed.
        assert_eq!(
            refusal(&header("a=Web.Example,b= web.example ")),
            both("'a' and 'b'", "Web.Example:5300")
        );
        // The effective port: the token's, else the header's, wherever it stands.
        assert_eq!(
            refusal(&header("a=10.0.0.5,b=10.0.0.5:5300")),
            both("'a' and 'b'", "10.0.0.5:5300")
        );
        assert_eq!(
            refusal(&(header("a=10.0.0.5:7000,c=10.0.0.6,b=10.0.0.5") + "# port=7000\n")),
            both("'a' and 'b'", "10.0.0.5:7000")
        );
        // One address on two ports is two hosts.
        for tokens in [
            "a=10.0.0.5,b=10.0.0.5:5301",
            "a=10.0.0.5:5301,b=10.0.0.5:5302",
            "a=web.example,b=db.example",
            "a=10.0.0.5:5301,10.0.0.5",
        ] {
            let m = Matrix::parse(header(tokens).as_bytes(), "m.csv");
            assert!(m.is_ok(), "{tokens}: {:?}", m.err());
        }
    }

    #[test]
    fn ignored_cells_are_warnings_naming_the_cell() {
        assert_eq!(
            warnings("src\\dst,a,b\r\n# rates\r\na,99,5,7,8\r\nb,1,max\r\n"),
            [
                "m.csv:3: cell a -> a: '99' is on the diagonal (a host does not send to itself) -- ignored",
                "m.csv:3: cell a -> column 4: '7' is past the last host of the header ('b', column 3) -- ignored",
                "m.csv:3: cell a -> column 5: '8' is past the last host of the header ('b', column 3) -- ignored",
                "m.csv:4: cell b -> b: 'max' is on the diagonal (a host does not send to itself) -- ignored",
            ]
        );
        // Blank header cells at the end (a spreadsheet's padding) are not hosts' columns.
        assert_eq!(
            warnings("src\\dst,a,b,,\na,,5,\"7\"\n"),
            [
                "m.csv:2: cell a -> column 4: '7' is past the last host of the header ('b', column 3) -- ignored"
            ]
        );
    }

    #[test]
    fn hand_edits_that_change_nothing_are_silent() {
        for text in [
            // Blank, zero or whitespace cells anywhere, trailing commas, quotes, CRLF.
            "src\\dst,a,b,,\r\na,0,5,,, \r\n\r\n# b\r\n\"b\",\"20000.0\",\"\",\"\"\r\n",
            "# tx_size=64\nsrc\\dst,a,b\na, ,5\nb,1,0.0\n",
        ] {
            assert_eq!(warnings(text), Vec::<String>::new(), "{text:?}");
        }
        // What gen writes.
        let hosts: Vec<_> = ["a", "b", "c=10.0.0.3:5400"]
            .iter()
            .map(|t| HostToken::parse(t).unwrap())
            .collect();
        let traffic = crate::build::Traffic {
            rate: Rate::per_second(20000.0),
            tx_size: 64,
            rx_size: 64,
            port: 5300,
            disk: Default::default(),
            dscp: Default::default(),
        };
        let m = crate::build::build(hosts, crate::build::Shape::FullMesh, traffic);
        assert_eq!(
            warnings(&String::from_utf8(m.to_bytes()).unwrap()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn warnings_past_twenty_are_counted_not_listed() {
        let n = 30;
        let mut text = String::from("src\\dst");
        for i in 0..n {
            text.push_str(&format!(",h{i}"));
        }
        text.push('\n');
        for i in 0..n {
            text.push_str(&format!("h{i}"));
            for j in 0..n {
                text.push_str(if i == j { ",1" } else { ",2" });
            }
            text.push('\n');
        }
        let w = warnings(&text);
        assert_eq!(w.len(), MAX_WARNINGS + 1);
        assert_eq!(
            w[MAX_WARNINGS],
            "m.csv: 10 more cells ignored like these (the first 20 are listed)"
        );
    }

    #[test]
    fn a_cell_in_a_warning_is_one_short_line() {
        assert_eq!(shown(b"7"), "7");
        assert_eq!(shown(b"a\rb\x1b"), "a\\rb\\u{1b}");
        assert_eq!(shown(&[b'x'; 40]), format!("{}...", "x".repeat(32)));
    }

    #[test]
    fn rates() {
        let pps = |s: &str| parse_rate(s.as_bytes()).ok().flatten().map(|r| r.0);
        assert_eq!(pps("20000"), Some(20000.0));
        assert_eq!(pps("0.500"), Some(0.5));
        assert_eq!(pps("1e3"), Some(1000.0));
        assert_eq!(pps("MAX"), Some(f64::INFINITY));
        assert_eq!(pps("unpaced"), Some(f64::INFINITY));
        assert_eq!(pps("0"), None);
        assert_eq!(pps(""), None);
        assert!(matches!(parse_rate(b"-5"), Err(CellError::Negative)));
        assert!(matches!(parse_rate(b"fast"), Err(CellError::NotARate)));
        assert!(matches!(parse_rate(b"nan"), Err(CellError::NotARate)));
        // A typo past any NIC is refused; an infinite rate is `max`, as it
        // always was.
        assert!(matches!(parse_rate(b"1e30"), Err(CellError::BeyondAnyNic)));
        assert!(matches!(parse_rate(b"2e9"), Ok(Some(_))));
        assert_eq!(pps("1e400"), Some(f64::INFINITY));
    }
}
