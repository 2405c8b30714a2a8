//! `mx export`: a run as overlays for the datacenter floor-plan viewer, one
//! sample per host per overlay: `test <TAB> target <TAB> value [<TAB> k=v ...]`,
//! with `!test` lines that carry each overlay's unit, direction, decimals,
//! pinned scale and preset aggregation (facts.md 6).
//!
//! The numbers are summarize's ([`crate::summary::figures`]), by the same rules:
//! an overlay is emitted only when the number behind it was measured, never as
//! a zero that a rack average would swallow.

pub mod overlays;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use crate::cli::ExportArgs;
use crate::error::{EXIT_PROBLEMS, Error, Result};
use crate::report::Column;
use crate::report::read::{Kind, for_each_row, report_files};
use crate::summary::aggregate::ReportSet;
use crate::summary::figures::{self, Context, HostFigures};
use crate::units::{self, wire_bits};

use overlays::Overlay;

/// One exported value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub overlay: Overlay,
    pub target: String,
    pub value: Value,
    pub extras: Vec<(&'static str, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Number(f64),
    Text(&'static str),
}

/// `%.4g`, or `%.0f` where that would use an exponent (so 12345 stays 12345).
pub fn value_text(v: f64) -> String {
    let g = g4(v);
    if g.contains('e') {
        format!("{v:.0}")
    } else {
        g
    }
}

/// C's `%.4g`.
fn g4(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let sci = format!("{v:.3e}");
    let exponent: i32 = sci
        .split_once('e')
        .map_or(0, |(_, e)| e.parse().unwrap_or(0));
    if (-4..4).contains(&exponent) {
        let fixed = format!("{:.*}", (3 - exponent).max(0) as usize, v);
        if fixed.contains('.') {
            fixed
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        } else {
            fixed
        }
    } else {
        sci
    }
}

/// `mxname target` lines of a --names file.
fn read_names(path: &Path) -> Result<HashMap<String, String>> {
    let text = crate::input::read_list(path, "names file", "")?;
    let mut names = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let content = line.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content
            .split(|c: char| c.is_whitespace() || c == '=')
            .filter(|f| !f.is_empty())
            .collect();
        if fields.len() != 2 {
            return Err(Error::refused(format!(
                "{} line {}: want `mxname target`, got '{line}'",
                path.display(),
                i + 1
            )));
        }
        check_field(
            &format!("{} line {}: target", path.display(), i + 1),
            fields[1],
            "choose a target without",
        )?;
        names.insert(fields[0].to_string(), fields[1].to_string());
    }
    Ok(names)
}

/// Refuses text that would break a results line (`test<TAB>target<TAB>value
/// k=v ...`): whitespace, which separates its fields, or a quote, which opens a
/// quoted value. `fix` says what to do instead.
fn check_field(what: &str, text: &str, fix: &str) -> Result<()> {
    let Some(bad) = text
        .chars()
        .find(|c| matches!(c, ' ' | '\t' | '\r' | '\n' | '"'))
    else {
        return Ok(());
    };
    let holds = match bad {
        ' ' => "whitespace (a space), which separates the fields of",
        '\t' => "whitespace (a tab), which separates the fields of",
        '\r' => "whitespace (a carriage return), which would break",
        '\n' => "whitespace (a line feed), which would break",
        _ => "a quote (\"), which opens a quoted value in",
    };
    let shown: String = text
        .chars()
        .map(|c| match c {
            '\t' => "\\t".to_string(),
            '\r' => "\\r".to_string(),
            '\n' => "\\n".to_string(),
            c => c.to_string(),
        })
        .collect();
    Err(Error::refused(format!(
        "{what} '{shown}' holds {holds} a results line -- {fix}"
    )))
}

/// `YYYY-MM-DD HH:MM:SS`, this machine's local time, of Unix seconds `ts`.
fn local_time(ts: i64) -> String {
    crate::units::local_date_time(ts as f64)
}

struct Builder<'a> {
    samples: Vec<Sample>,
    target_of: &'a dyn Fn(&str) -> String,
    run: Option<&'a str>,
}

impl Builder<'_> {
    fn push(
        &mut self,
        overlay: Overlay,
        host: &str,
        value: Option<f64>,
        mut extras: Vec<(&'static str, String)>,
    ) {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            return;
        };
        if let Some(run) = self.run {
            extras.push(("run", run.to_string()));
        }
        self.samples.push(Sample {
            overlay,
            target: (self.target_of)(host),
            value: Value::Number(v),
            extras,
        });
    }

    fn state(&mut self, host: &str, state: &'static str) {
        let mut extras = Vec::new();
        if let Some(run) = self.run {
            extras.push(("run", run.to_string()));
        }
        self.samples.push(Sample {
            overlay: overlays::STATE,
            target: (self.target_of)(host),
            value: Value::Text(state),
            extras,
        });
    }
}

pub fn run(args: &ExportArgs, out: &mut dyn Write) -> Result<u8> {
    let without = "choose one without";
    check_field("--test-prefix", &args.test_prefix, without)?;
    check_field("--target-prefix", &args.target_prefix, without)?;
    if let Some(run) = &args.run {
        check_field("--run", run, without)?;
    }
    let names = match &args.names {
        Some(path) => read_names(path)?,
        None => HashMap::new(),
    };
    let reports = &args.reports.dir;
    let matrix_path = &args.fleet.matrix;
    if !args.no_collect {
        if !matrix_path.exists() {
            return Err(Error::refused(format!(
                "matrix not found: {} -- `mx export --no-collect` exports the reports already in {}/ without it",
                matrix_path.display(),
                reports.display()
            )));
        }
        let fleet = crate::fleet::Fleet::open(&args.fleet)?;
        // The samples may be going to stdout: the collect's narration goes to stderr.
        crate::fleet::commands::collect_reports(&fleet, reports, &mut std::io::stderr())?;
    }
    let mut set = ReportSet::read(reports, args.window)?;
    let matrix = if matrix_path.exists() {
        Some(crate::matrix::Matrix::load(matrix_path)?)
    } else {
        eprintln!(
            "[mx] export: no matrix at {}: exporting the reports alone (no NO-DATA states, no coverage)",
            matrix_path.display()
        );
        None
    };
    if set.rows_in_window == 0 {
        return Err(Error::refused(format!(
            "no rows in the last {}s -- widen --window, or --window 0 for the whole history",
            units::g(args.window)
        )));
    }
    if let Some(m) = &matrix {
        for h in m.hosts() {
            set.id(&h.name);
        }
    }
    let ctx = Context::new(&set, matrix);
    let prefix = args.target_prefix.clone();
    let target_of =
        |host: &str| format!("{prefix}{}", names.get(host).map_or(host, String::as_str));
    // The prefix and the --names targets are checked; a host name left as it
    // is must be clean too (a matrix never holds such a name; a report might).
    let fix = format!(
        "no matrix host can be named so: check the reports in {}/",
        reports.display()
    );
    for name in &set.names {
        if !names.contains_key(name) {
            check_field("host name", name, &fix)?;
        }
    }

    let hosts = figures::hosts(&set, &ctx);
    let exact_rtt = hosts.iter().all(|h| h.rtt_exact || h.rtt_p99.is_none());
    let mut by_name: Vec<&HostFigures> = hosts.iter().collect();
    by_name.sort_by(|a, b| set.name(a.id).cmp(set.name(b.id)));
    let mut b = Builder {
        samples: Vec::new(),
        target_of: &target_of,
        run: args.run.as_deref(),
    };
    let fold = args.peers && !ctx.layered;

    // Raw per-interval host-row samples, in file order.
    if args.raw {
        raw_samples(&mut b, reports, set.start)?;
    }
    let senders: Vec<f64> = hosts.iter().map(|h| h.sent).filter(|&s| s > 0.0).collect();
    let median = {
        let mut v = senders.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    };
    let nic_bits = args.nic_gbps.map(|g| g * 1e9);
    for h in &by_name {
        let name = set.name(h.id);
        let own = set.hosts.get(&h.id);
        if !args.raw {
            if !fold {
                b.push(overlays::PPS_O, name, Some(h.sent), vec![]);
            }
            b.push(overlays::REP_PPS, name, Some(h.back), vec![]);
            if !fold && h.sent > 0.0 {
                b.push(overlays::LOSS, name, Some(h.loss), vec![]);
            }
            if h.target > 0.0 {
                b.push(
                    overlays::ACHIEVED,
                    name,
                    Some(h.sent / h.target * 100.0),
                    vec![],
                );
            }
            b.push(
                overlays::RTT_AVG,
                name,
                h.rtt_avg.filter(|&v| v > 0.0),
                vec![],
            );
            // Exact where every host's reports carry histograms; else each
            // host's worst flow's worst interval, and labelled so.
            let (p50, p99) = if exact_rtt {
                (overlays::RTT_P50, overlays::RTT_P99)
            } else {
                (overlays::RTT_P50_WORST, overlays::RTT_P99_WORST)
            };
            b.push(p50, name, h.rtt_p50.filter(|&v| v > 0.0), vec![]);
            if !fold {
                b.push(p99, name, h.rtt_p99.filter(|&v| v > 0.0), vec![]);
            }
            b.push(
                overlays::RTT_MAX,
                name,
                h.rtt_max.filter(|&v| v > 0.0),
                vec![],
            );
            b.push(overlays::CPU, name, own.and_then(|o| o.cpu.get()), vec![]);
            b.push(
                overlays::CPU_CORE,
                name,
                own.and_then(|o| o.cpu_core.get()),
                vec![],
            );
            b.push(
                overlays::AGENT_CPU,
                name,
                own.and_then(|o| o.agent_cpu.get()),
                vec![],
            );
        }
        if h.sent > 0.0 {
            b.push(
                overlays::REQUEST_GBPS,
                name,
                Some(wire_bits(h.sent, ctx.tx_size) / 1e9),
                vec![],
            );
        }
        if senders.len() >= 2 {
            b.push(
                overlays::REL_MEDIAN,
                name,
                median.map(|m| h.sent / m * 100.0),
                vec![],
            );
        }
        if h.has_rx {
            b.push(overlays::SERVED_PPS, name, Some(h.serving), vec![]);
            b.push(
                overlays::EGRESS_GBPS,
                name,
                Some(h.egress_bits / 1e9),
                vec![],
            );
            if let Some(nic) = nic_bits {
                b.push(
                    overlays::LINE_UTIL,
                    name,
                    Some(h.egress_bits / nic * 100.0),
                    vec![],
                );
            }
        }
        b.push(overlays::FORWARD_LOSS, name, h.forward_loss(), vec![]);
        b.push(overlays::RETURN_LOSS, name, h.return_loss(), vec![]);
        if ctx.layered
            && let Some(m) = &ctx.matrix
        {
            let covered = set.coverage.keys().filter(|(src, _)| *src == h.id).count();
            let others = m.host_count().saturating_sub(1).max(1);
            b.push(
                overlays::COVERAGE,
                name,
                Some(covered as f64 / others as f64 * 100.0),
                vec![],
            );
        }
        b.push(overlays::PEERS, name, Some(h.peers as f64), vec![]);
        b.push(overlays::INTERVALS, name, Some(h.nticks as f64), vec![]);
        b.push(overlays::WORKERS, name, h.workers.map(f64::from), vec![]);
    }
    // Did each host report? Silent: rows only before the window.
    for h in &by_name {
        b.state(set.name(h.id), "REPORTING");
    }
    let reporting: Vec<u32> = by_name.iter().map(|h| h.id).collect();
    let mut silent: Vec<&str> = set
        .last_seen
        .keys()
        .filter(|id| !reporting.contains(id))
        .map(|&id| set.name(id))
        .collect();
    silent.sort_unstable();
    for host in &silent {
        b.state(host, "SILENT");
    }
    if args.peers {
        peer_samples(&mut b, &set, &ctx, fold);
    }
    let never: Vec<String> = ctx.matrix.as_ref().map_or(Vec::new(), |m| {
        m.hosts()
            .iter()
            .filter(|h| {
                set.id_of(&h.name)
                    .is_none_or(|id| !set.last_seen.contains_key(&id))
            })
            .map(|h| h.name.clone())
            .collect()
    });
    for host in &never {
        b.state(host, "NO-DATA");
    }

    let measured = b.samples.iter().any(|s| s.overlay != overlays::STATE);
    if !measured {
        eprintln!(
            "mx: nothing to export from {}/ -- no measured rows in the window",
            reports.display()
        );
        return Ok(EXIT_PROBLEMS);
    }
    let text = render(
        args,
        &set,
        &ctx,
        &b.samples,
        reporting.len(),
        &silent,
        &never,
        fold,
    );
    let destination = if args.output == Path::new("-") {
        out.write_all(text.as_bytes())?;
        "stdout".to_string()
    } else {
        write_output(&args.output, &text, args.append)?;
        args.output.display().to_string()
    };
    let overlays_used: std::collections::BTreeSet<&str> =
        b.samples.iter().map(|s| s.overlay.name).collect();
    eprintln!(
        "[mx] export: {} sample(s) over {} overlay(s) on {} host(s) -> {destination}",
        b.samples.len(),
        overlays_used.len(),
        reporting.len()
    );
    for line in gap_notes(args, &set, &hosts, &silent, &never) {
        eprintln!("[mx] export: {line}");
    }
    Ok(0)
}

/// Notes of one kind past this many are summed up in one line.
const NOTES_PER_KIND: usize = 10;

/// Which host lost which overlays, and why (after the summary line, facts.md 6):
/// no rx rows of its own (served, egress, line utilization); the loss split,
/// naming the peers that left it unknown; nothing but a SILENT or NO-DATA state.
fn gap_notes(
    args: &ExportArgs,
    set: &ReportSet,
    hosts: &[HostFigures],
    silent: &[&str],
    never: &[String],
) -> Vec<String> {
    let name = |o: &Overlay| format!("{}{}", args.test_prefix, o.name);
    let names = |overlays: &[Overlay]| overlays.iter().map(&name).collect::<Vec<_>>().join(" / ");
    let mut by_name: Vec<&HostFigures> = hosts.iter().collect();
    by_name.sort_by(|a, b| set.name(a.id).cmp(set.name(b.id)));
    let mut served = vec![overlays::SERVED_PPS, overlays::EGRESS_GBPS];
    if args.nic_gbps.is_some() {
        served.push(overlays::LINE_UTIL);
    }
    let no_rx: Vec<(String, String)> = by_name
        .iter()
        .filter(|h| !h.has_rx)
        .map(|h| {
            (
                set.name(h.id).to_string(),
                format!(
                    "{} has no {}: its report holds no rx row in the window (no requests counted arriving from any peer)",
                    set.name(h.id),
                    names(&served)
                ),
            )
        })
        .collect();
    let split = names(&[overlays::FORWARD_LOSS, overlays::RETURN_LOSS]);
    let no_split: Vec<(String, String)> = by_name
        .iter()
        .filter(|h| h.sent > 0.0 && h.arrived.is_none())
        .map(|h| {
            let mut peers: Vec<&str> = h.forward_gaps.iter().map(|&p| set.name(p)).collect();
            peers.sort_unstable();
            let what = "wrote no rx row about it";
            let why = match peers.len() {
                0 => "it has no flow of its own in the window".to_string(),
                1 => format!("peer {} {what}", peers[0]),
                n => format!("{n} peers {} {what}", few(&peers)),
            };
            (
                set.name(h.id).to_string(),
                format!(
                    "{} has no {split}: the loss split is unknown ({why})",
                    set.name(h.id),
                ),
            )
        })
        .collect();
    let silent_notes: Vec<(String, String)> = silent
        .iter()
        .map(|host| {
            let last = set
                .id_of(host)
                .and_then(|id| set.last_seen.get(&id))
                .map_or(String::new(), |ts| {
                    format!(" (ts {ts}, {})", local_time(*ts))
                });
            (
                host.to_string(),
                format!(
                    "{host} has only {}=SILENT: its last row{last} is before the window",
                    name(&overlays::STATE)
                ),
            )
        })
        .collect();
    let never_notes: Vec<(String, String)> = never
        .iter()
        .map(|host| {
            (
                host.clone(),
                format!(
                    "{host} has only {}=NO-DATA: it is in the matrix and never reported",
                    name(&overlays::STATE)
                ),
            )
        })
        .collect();
    let mut lines = Vec::new();
    for notes in [no_rx, no_split, silent_notes, never_notes] {
        let shown = notes.len().min(NOTES_PER_KIND);
        lines.extend(notes[..shown].iter().map(|(_, line)| line.clone()));
        if notes.len() > shown {
            let rest: Vec<&str> = notes[shown..].iter().map(|(h, _)| h.as_str()).collect();
            lines.push(format!(
                "and {} more host(s) the same way: {}",
                rest.len(),
                few(&rest)
            ));
        }
    }
    lines
}

/// Up to 8 names, then how many more.
fn few(names: &[&str]) -> String {
    let mut s = names.iter().take(8).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 8 {
        s.push_str(&format!(" (+{} more)", names.len() - 8));
    }
    s
}

fn write_output(path: &Path, text: &str, append: bool) -> Result<()> {
    if append {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, "cannot append to", &e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| Error::io(path, "cannot append to", &e))
    } else {
        crate::matrix::write::write_atomically(path, |out| out.write_all(text.as_bytes()))
    }
}

/// `--raw`: every windowed host row's own figures, tagged `ts=`.
fn raw_samples(b: &mut Builder<'_>, dir: &Path, start: i64) -> Result<()> {
    for file in report_files(dir)? {
        for_each_row(&file, |row| {
            if row.kind() != Kind::Host || row.ts < start {
                return;
            }
            let host = row.host().to_string();
            let ts = vec![("ts", row.ts.to_string())];
            for (overlay, column) in [
                (overlays::PPS_O, Column::Pps),
                (overlays::REP_PPS, Column::RepPps),
                (overlays::LOSS, Column::LossPct),
                (overlays::RTT_P50, Column::RttP50Us),
                (overlays::RTT_P99, Column::RttP99Us),
                (overlays::CPU, Column::CpuPct),
                (overlays::CPU_CORE, Column::CpuMaxPct),
                (overlays::AGENT_CPU, Column::AgentCpuPct),
            ] {
                let value = row.num(column).map(|v| {
                    if column == Column::LossPct {
                        v.max(0.0)
                    } else {
                        v
                    }
                });
                b.push(overlay, &host, value, ts.clone());
            }
            if let (Some(pps), Some(target)) = (row.num(Column::Pps), row.num(Column::TargetPps))
                && target != 0.0
            {
                b.push(
                    overlays::ACHIEVED,
                    &host,
                    Some(pps / target * 100.0),
                    ts.clone(),
                );
            }
        })?;
    }
    Ok(())
}

/// `--peers`: one sample per flow, tagged `peer=` (and `layer=`).
fn peer_samples(b: &mut Builder<'_>, set: &ReportSet, ctx: &Context, fold: bool) {
    let (pps, loss, p99) = if fold {
        (overlays::PPS_O, overlays::LOSS, overlays::RTT_P99_FLOWS)
    } else {
        (
            overlays::PEER_PPS,
            overlays::PEER_LOSS,
            overlays::PEER_RTT_P99,
        )
    };
    for f in figures::flows(set, ctx) {
        let host = set.name(f.host).to_string();
        let mut extras = vec![("peer", (b.target_of)(set.name(f.peer)))];
        if let Some(layer) = f.layer {
            extras.push(("layer", layer.to_string()));
        }
        b.push(pps, &host, Some(f.sent), extras.clone());
        b.push(loss, &host, Some(f.loss), extras.clone());
        b.push(p99, &host, f.p99.filter(|&v| v > 0.0), extras);
    }
}

/// A number for the header: whole values as integers (60, not 60.0).
fn whole(v: f64) -> serde_json::Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        (v as i64).into()
    } else {
        serde_json::json!(v)
    }
}

/// What an export says about itself before its samples: the run, the window and
/// the hosts that are missing. The TSV carries it as `#` comment lines (the
/// viewer skips them); NDJSON as one object keyed `"!export"` (as overlays are
/// keyed `"!test"`), so every line of `--json` output parses.
struct Header<'a> {
    hosts: usize,
    window: f64,
    samples: usize,
    tx_size: u32,
    rx_size: u32,
    rotation: Option<crate::matrix::Rotation>,
    /// Earliest and latest ts in the window.
    from: i64,
    to: i64,
    nic_gbps: Option<f64>,
    /// The line-utilization overlay's name, prefix included.
    line_util: String,
    silent: &'a [&'a str],
    never: &'a [String],
}

impl Header<'_> {
    fn window_text(&self) -> String {
        if self.window > 0.0 {
            format!("last {}s", units::g(self.window))
        } else {
            "whole history".to_string()
        }
    }

    /// The `#` lines (facts.md 6).
    fn tsv(&self) -> String {
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
        let _ = writeln!(
            t,
            "# run shape: {} bytes out -> {} bytes back{layers}",
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

    /// One object, keys sorted like every line of the NDJSON:
    /// `{"!export": "mx <version>", "dwell_s", "from", "from_ts", "hosts", "layers",
    /// "never_reported", "nic_gbps", "rx_size", "samples", "silent", "to", "to_ts",
    /// "tx_size", "window", "window_s"}`; the optional keys only when they apply, the
    /// host lists whole.
    fn json(&self) -> serde_json::Value {
        use serde_json::{Value, json};
        let mut obj = serde_json::Map::new();
        let mut put = |k: &str, v: Value| {
            obj.insert(k.to_string(), v);
        };
        put(
            "!export",
            format!("mx {}", env!("CARGO_PKG_VERSION")).into(),
        );
        put("hosts", self.hosts.into());
        put("samples", self.samples.into());
        put("window", self.window_text().into());
        put("window_s", whole(self.window.max(0.0)));
        put("from", local_time(self.from).into());
        put("to", local_time(self.to).into());
        put("from_ts", self.from.into());
        put("to_ts", self.to.into());
        put("tx_size", self.tx_size.into());
        put("rx_size", self.rx_size.into());
        if let Some(r) = self.rotation {
            put("layers", r.layers.into());
            put("dwell_s", whole(r.dwell));
        }
        if let Some(g) = self.nic_gbps {
            put("nic_gbps", whole(g));
        }
        if !self.silent.is_empty() {
            put("silent", json!(self.silent));
        }
        if !self.never.is_empty() {
            put("never_reported", json!(self.never));
        }
        Value::Object(obj)
    }
}

#[allow(clippy::too_many_arguments)]
fn render(
    args: &ExportArgs,
    set: &ReportSet,
    ctx: &Context,
    samples: &[Sample],
    hosts: usize,
    silent: &[&str],
    never: &[String],
    fold: bool,
) -> String {
    let header = Header {
        hosts,
        window: args.window,
        samples: samples.len(),
        tx_size: ctx.tx_size,
        rx_size: ctx.rx_size,
        rotation: ctx.matrix.as_ref().and_then(|m| m.config.rotation),
        from: set.earliest_in_window.unwrap_or(set.latest),
        to: set.latest,
        nic_gbps: args.nic_gbps,
        line_util: format!("{}{}", args.test_prefix, overlays::LINE_UTIL.name),
        silent,
        never,
    };
    let mut t = if args.json {
        format!("{}\n", header.json())
    } else {
        header.tsv()
    };
    let nic = args.nic_gbps.map(units::g);
    // One !test line per overlay, in order of first sample.
    let mut seen: Vec<Overlay> = Vec::new();
    for s in samples {
        if !seen.contains(&s.overlay) {
            seen.push(s.overlay);
        }
    }
    let test_name = |o: &Overlay| format!("{}{}", args.test_prefix, o.name);
    let meta_of = |o: &Overlay| {
        let pin = (o.name == "request_gbps" || o.name == "egress_gbps")
            .then(|| nic.clone())
            .flatten();
        o.meta(pin.as_deref(), fold && o.name == "pps")
    };
    if !args.no_meta {
        for o in &seen {
            if args.json {
                let mut obj = serde_json::Map::new();
                obj.insert("!test".into(), test_name(o).into());
                for (k, v) in meta_of(o) {
                    obj.insert(k.into(), v.trim_matches('"').to_string().into());
                }
                let _ = writeln!(t, "{}", serde_json::Value::Object(obj));
            } else {
                let meta: Vec<String> =
                    meta_of(o).iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(t, "!test\t{}\t{}", test_name(o), meta.join(" "));
            }
        }
    }
    for s in samples {
        let value = match s.value {
            Value::Number(v) => value_text(v),
            Value::Text(text) => text.to_string(),
        };
        if args.json {
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
            obj.insert("test".into(), test_name(&s.overlay).into());
            let json_value = match value.parse::<f64>() {
                Ok(n) => serde_json::Number::from_f64(n)
                    .map_or(value.clone().into(), serde_json::Value::Number),
                Err(_) => value.clone().into(),
            };
            obj.insert("value".into(), json_value);
            let _ = writeln!(t, "{}", serde_json::Value::Object(obj));
        } else {
            let _ = write!(t, "{}\t{}\t{value}", test_name(&s.overlay), s.target);
            for (k, v) in &s.extras {
                let _ = write!(t, "\t{k}={v}");
            }
            t.push('\n');
        }
    }
    t
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
    }
}
