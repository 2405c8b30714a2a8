//! Writing `matrix.csv` exactly as the original tool does: `#` header
//! lines ending in LF, then the grid through a CSV writer, so its lines end in CRLF.
//! Files are written to a temporary name beside the target and renamed into place,
//! so a crash or a full disk never leaves half a matrix behind.

use std::io::{self, Write};
use std::path::Path;

use super::{FORMAT_VERSION, Matrix, Rate};
use mx_base::error::Result;
use mx_base::files::write_atomically;
use mx_base::units;

/// The text `mx gen` writes for a rate: `max`, an integer from 100 up, and three
/// decimals below so that small rates are not rounded to zero (`0.500`).
pub fn gen_rate_text(rate: Rate) -> String {
    match rate.pps() {
        None => "max".to_string(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// The text written for a rate: gen's form when it reads back as the same number
/// (always, for what gen makes), else the shortest exact form (a hand-edited
/// `150.5` stays `150.5`).
pub(crate) fn rate_text(rate: Rate) -> String {
    let text = gen_rate_text(rate);
    match (rate.pps(), text.parse::<f64>()) {
        (Some(v), Ok(back)) if back != v => format!("{v}"),
        _ => text,
    }
}

impl Matrix {
    /// Writes the whole file.
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        self.write_head(out)?;
        self.write_grid(out)
    }

    /// The `#` lines above the grid: format, sizes, port, disk, class,
    /// pools, shuffle and layers (a host's slice carries them as they are).
    pub(crate) fn write_head(&self, out: &mut dyn Write) -> io::Result<()> {
        let c = &self.config;
        writeln!(
            out,
            "# mx matrix v{FORMAT_VERSION} -- rows send, columns receive, cells are packets/sec"
        )?;
        let disk = if c.disk.is_on() {
            format!(" disk={}", c.disk.name())
        } else {
            String::new()
        };
        // The default class writes nothing: a file says `dscp=` only when it
        // marks, so matrices without it read as they always did.
        let dscp = c.dscp.setting(" ");
        writeln!(
            out,
            "# tx_size={} rx_size={} port={}{disk}{dscp}",
            c.tx_size, c.rx_size, c.port
        )?;
        writeln!(
            out,
            "# every request of {} bytes is answered with a reply of {} bytes",
            c.tx_size, c.rx_size
        )?;
        if let Some(sentence) = c.disk.sentence() {
            writeln!(out, "# {sentence}")?;
        }
        if !c.dscp.is_default() {
            writeln!(out, "# {}", c.dscp.sentence())?;
        }
        self.write_pools(out)?;
        let pooled = self.pools().between.is_some();
        if let Some(key) = c.shuffle {
            if pooled {
                writeln!(
                    out,
                    "# peers={} seed={} -- seeded pool orders: every sender talks to exactly {} host{} of the other pool, dealt evenly",
                    key.peers,
                    key.seed,
                    key.peers,
                    if key.peers == 1 { "" } else { "s" }
                )?;
            } else {
                writeln!(
                    out,
                    "# peers={} seed={} -- k-regular shuffle: every host sends to and receives from exactly {} others",
                    key.peers, key.seed, key.peers
                )?;
            }
        }
        if let Some(r) = c.rotation {
            let fill = if r.fill { " fill=1" } else { "" };
            let (kind, pairs) = if pooled {
                ("pool-to-pool layers on those orders", "cross-pool pair")
            } else {
                ("disjoint-shift layers on that one shuffle", "ordered pair")
            };
            writeln!(
                out,
                "# layers={} dwell={}{fill} -- {kind}: the grid below",
                r.layers,
                units::g(r.dwell)
            )?;
            writeln!(
                out,
                "#   is layer 0; every agent derives layer (walltime // dwell) % layers itself,"
            )?;
            if r.fill {
                writeln!(
                    out,
                    "#   and one full cycle measures every {pairs} at least once (the remainder"
                )?;
                writeln!(
                    out,
                    "#   layer is padded with repeats, so every layer carries exactly the same load)"
                )?;
            } else {
                writeln!(
                    out,
                    "#   and one full cycle measures every {pairs} exactly once"
                )?;
            }
        }
        Ok(())
    }

    /// `# pool NAME: host ...` per pool, and the pair a pool-to-pool matrix
    /// connects. Pools name hosts, not columns: hand edits to the grid keep them.
    fn write_pools(&self, out: &mut dyn Write) -> io::Result<()> {
        let pools = self.pools();
        for pool in &pools.pools {
            write!(out, "# pool {}:", pool.name)?;
            for &member in &pool.members {
                write!(out, " {}", self.hosts()[member as usize].name)?;
            }
            writeln!(out)?;
        }
        if let Some(b) = pools.between {
            let (s, r) = (&pools.pools[b.senders].name, &pools.pools[b.receivers].name);
            let what = if b.duplex {
                format!("{s} and {r} send to each other; no flow stays inside a pool")
            } else {
                format!("{s} sends, {r} answers; no flow stays inside a pool")
            };
            writeln!(
                out,
                "# between={s},{r} duplex={} -- {what}",
                u8::from(b.duplex)
            )?;
        }
        Ok(())
    }

    /// The grid: `src\dst` and the tokens, then one row per host; CRLF line ends.
    /// Host tokens never need quoting (the token grammar refuses `,` `"` and blanks).
    fn write_grid(&self, out: &mut dyn Write) -> io::Result<()> {
        let n = self.host_count();
        let mut line: Vec<u8> = Vec::with_capacity(16 * n);
        self.header_line(&mut line);
        line.extend_from_slice(b"\r\n");
        out.write_all(&line)?;

        // One rate usually fills the grid: format it once.
        let mut last: Option<(Rate, String)> = None;
        for (src, row) in self.rows() {
            line.clear();
            line.extend_from_slice(self.hosts()[src as usize].token.as_bytes());
            let mut column = 0usize;
            for cell in row {
                let dst = cell.dst as usize;
                // One comma opens each column up to and including this one.
                line.resize(line.len() + (dst - column) + 1, b',');
                if last.as_ref().is_none_or(|(r, _)| *r != cell.rate) {
                    last = Some((cell.rate, rate_text(cell.rate)));
                }
                line.extend_from_slice(last.as_ref().expect("just set").1.as_bytes());
                column = dst + 1;
            }
            line.resize(line.len() + (n - column), b',');
            line.extend_from_slice(b"\r\n");
            out.write_all(&line)?;
        }
        Ok(())
    }

    /// The grid's first line, `src\dst` and the host tokens (no line end).
    pub(crate) fn header_line(&self, line: &mut Vec<u8>) {
        line.extend_from_slice(b"src\\dst");
        for host in self.hosts() {
            line.push(b',');
            line.extend_from_slice(host.token.as_bytes());
        }
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// Writes the matrix to `path` atomically (temp file beside it, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomically(path, |out| self.write_to(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_texts() {
        assert_eq!(gen_rate_text(Rate::UNPACED), "max");
        assert_eq!(gen_rate_text(Rate::per_second(42633.2)), "42633");
        assert_eq!(gen_rate_text(Rate::per_second(0.5)), "0.500");
        assert_eq!(rate_text(Rate::per_second(20000.0)), "20000");
        assert_eq!(rate_text(Rate::per_second(0.5)), "0.500");
        assert_eq!(rate_text(Rate::per_second(150.5)), "150.5");
        assert_eq!(rate_text(Rate::per_second(0.0001)), "0.0001");
    }
}
