//! How an export is written: the viewer's results TSV, or NDJSON
//! (`--json`), two implementations of one [`Format`] over the same samples.

use std::fmt::Write as _;

use super::overlays::Overlay;
use super::{Export, Options, Sample, Value};
use crate::units;

/// `%.4g`, or `%.0f` where that would use an exponent (so 12345 stays 12345).
/// Zero of either sign is `0`.
pub(crate) fn value_text(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let g = units::g_digits(v, 4);
    if g.contains('e') {
        format!("{v:.0}")
    } else {
        g
    }
}

/// `YYYY-MM-DD HH:MM:SS`, this machine's local time, of Unix seconds `ts`.
pub(crate) fn local_time(ts: i64) -> String {
    crate::units::local_date_time(ts as f64)
}

/// Up to 8 names, then how many more.
pub fn few(names: &[&str]) -> String {
    let mut s = names.iter().take(8).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 8 {
        s.push_str(&format!(" (+{} more)", names.len() - 8));
    }
    s
}

/// What an export says about itself before its samples: the run, the window and
/// the hosts that are missing, as `#` comment lines, in the TSV and the NDJSON
/// alike (the original's, which scripts that read its output skip: a header
/// object would be taken for a sample).
pub struct Header<'a> {
    pub hosts: usize,
    pub window: f64,
    pub samples: usize,
    pub tx_size: u32,
    pub rx_size: u32,
    pub rotation: Option<crate::matrix::Rotation>,
    /// The disk mode of a disk run (its matrix's `disk=`), else `None`.
    pub disk: Option<&'static str>,
    /// The class of a marked run (its matrix's `dscp=`), else `None`.
    pub dscp: Option<crate::matrix::Dscp>,
    /// Earliest and latest ts in the window.
    pub from: i64,
    pub to: i64,
    pub nic_gbps: Option<f64>,
    /// The line-utilization overlay's name, prefix included.
    pub line_util: String,
    pub silent: &'a [&'a str],
    pub never: &'a [String],
}

impl Header<'_> {
    fn window_text(&self) -> String {
        if self.window > 0.0 {
            format!("last {}s", units::g(self.window))
        } else {
            "whole history".to_string()
        }
    }

    /// The `#` lines.
    fn lines(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "# mx {} export -- {} host(s), {}, {} sample(s)",
            env!("CARGO_PKG_VERSION"),
            self.hosts,
            self.window_text(),
            self.samples
        );
        let layers = self.rotation.map_or(String::new(), |r| {
            format!(", {} layers x {}s dwell", r.layers, units::g(r.dwell))
        });
        let disk = self.disk.map_or(String::new(), |d| format!(", disk={d}"));
        let dscp = self.dscp.unwrap_or_default().setting(", ");
        let _ = writeln!(
            t,
            "# run shape: {} bytes out -> {} bytes back{layers}{disk}{dscp}",
            self.tx_size, self.rx_size
        );
        let _ = writeln!(
            t,
            "# window covers {} .. {}",
            local_time(self.from),
            local_time(self.to)
        );
        if let Some(g) = self.nic_gbps {
            let _ = writeln!(
                t,
                "# NIC line rate {} Gb/s: {} included",
                units::g(g),
                self.line_util
            );
        }
        if !self.silent.is_empty() {
            let _ = writeln!(
                t,
                "# {} host(s) went quiet before the window: {}",
                self.silent.len(),
                few(self.silent)
            );
        }
        if !self.never.is_empty() {
            let _ = writeln!(
                t,
                "# {} host(s) in the matrix never reported at all: {}",
                self.never.len(),
                few(&self.never.iter().map(String::as_str).collect::<Vec<_>>())
            );
        }
        t
    }
}

/// One way of writing an export: its header, one line per overlay (unless
/// `--no-meta`), then one line per sample.
pub trait Format {
    fn header(&mut self, header: &Header<'_>);
    /// An overlay's description: its name and meta (`key`, `value`) pairs.
    fn overlay(&mut self, name: &str, meta: &[(&'static str, String)]);
    fn sample(&mut self, name: &str, sample: &Sample, value: &str);
    fn finish(self: Box<Self>) -> String;
}

/// The viewer's results TSV: `#` header lines, `!test` lines, samples.
#[derive(Default)]
pub(crate) struct Tsv(String);

impl Format for Tsv {
    fn header(&mut self, header: &Header<'_>) {
        self.0.push_str(&header.lines());
    }

    fn overlay(&mut self, name: &str, meta: &[(&'static str, String)]) {
        let meta: Vec<String> = meta.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(self.0, "!test\t{name}\t{}", meta.join(" "));
    }

    fn sample(&mut self, name: &str, s: &Sample, value: &str) {
        let _ = write!(self.0, "{name}\t{}\t{value}", s.target);
        for (k, v) in &s.extras {
            let _ = write!(self.0, "\t{k}={v}");
        }
        self.0.push('\n');
    }

    fn finish(self: Box<Self>) -> String {
        self.0
    }
}

/// NDJSON: the `#` header lines, then every line one JSON object, keys
/// sorted; overlays keyed `"!test"`.
#[derive(Default)]
pub(crate) struct Ndjson(String);

impl Ndjson {
    /// One object on a line, spaced as the original's (Python's `json.dumps`:
    /// `{"a": 1, "b": "x"}`), so text matched against its lines still matches.
    fn line(&mut self, value: &serde_json::Value) {
        let mut bytes = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut bytes, PythonSpacing);
        if serde::Serialize::serialize(value, &mut ser).is_ok() {
            self.0.push_str(&String::from_utf8_lossy(&bytes));
            self.0.push('\n');
        }
    }
}

/// JSON spaced as Python's `json.dumps` writes it: `", "` between members
/// and items, `": "` after a key.
struct PythonSpacing;

/// `", "` before every member or item but the first.
fn python_separator<W: ?Sized + std::io::Write>(
    writer: &mut W,
    first: bool,
) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

impl serde_json::ser::Formatter for PythonSpacing {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        python_separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        python_separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

impl Format for Ndjson {
    fn header(&mut self, header: &Header<'_>) {
        self.0.push_str(&header.lines());
    }

    fn overlay(&mut self, name: &str, meta: &[(&'static str, String)]) {
        let mut obj = serde_json::Map::new();
        obj.insert("!test".into(), name.into());
        for (k, v) in meta {
            obj.insert((*k).into(), v.trim_matches('"').to_string().into());
        }
        self.line(&serde_json::Value::Object(obj));
    }

    fn sample(&mut self, name: &str, s: &Sample, value: &str) {
        let mut obj = serde_json::Map::new();
        if !s.extras.is_empty() {
            let meta: serde_json::Map<String, serde_json::Value> = s
                .extras
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone().into()))
                .collect();
            obj.insert("meta".into(), meta.into());
        }
        obj.insert("target".into(), s.target.clone().into());
        obj.insert("test".into(), name.into());
        let json_value = match value.parse::<f64>() {
            Ok(n) => serde_json::Number::from_f64(n)
                .map_or(value.to_string().into(), serde_json::Value::Number),
            Err(_) => value.to_string().into(),
        };
        obj.insert("value".into(), json_value);
        self.line(&serde_json::Value::Object(obj));
    }

    fn finish(self: Box<Self>) -> String {
        self.0
    }
}

/// The whole export in `format`.
pub fn render(export: &Export, opts: &Options, mut format: Box<dyn Format>) -> String {
    let silent: Vec<&str> = export.silent.iter().map(String::as_str).collect();
    format.header(&export.header(opts, &silent));
    let nic = opts.nic_gbps.map(units::g);
    let test_name = |o: &Overlay| format!("{}{}", opts.test_prefix, o.name);
    if !opts.no_meta {
        // One description per overlay, in order of first sample.
        let mut seen: Vec<Overlay> = Vec::new();
        for s in &export.samples {
            if !seen.contains(&s.overlay) {
                seen.push(s.overlay);
            }
        }
        for o in &seen {
            let pin = (o.name == "request_gbps" || o.name == "egress_gbps")
                .then(|| nic.clone())
                .flatten();
            format.overlay(
                &test_name(o),
                &o.meta(pin.as_deref(), export.fold && o.name == "pps"),
            );
        }
    }
    for s in &export.samples {
        let value = match s.value {
            Value::Number(v) => value_text(v),
            Value::Text(text) => text.to_string(),
        };
        format.sample(&test_name(&s.overlay), s, &value);
    }
    format.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_percent_4g_or_whole_numbers() {
        assert_eq!(value_text(1998400.0), "1998400");
        assert_eq!(value_text(0.36), "0.36");
        assert_eq!(value_text(12.3456), "12.35");
        assert_eq!(value_text(100.0), "100");
        assert_eq!(value_text(0.00001), "0");
        assert_eq!(value_text(2.0 / 3.0), "0.6667");
        assert_eq!(value_text(-0.0), "0");
    }
}
