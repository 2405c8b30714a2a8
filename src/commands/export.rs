//! `mx export`: collect every host's report (unless `--no-collect`), turn
//! the reports into floor-plan overlays ([`crate::export`], pure), and write
//! them, TSV or NDJSON, to stdout or a file written whole.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::ExportArgs;
use crate::error::{EXIT_PROBLEMS, Error, Result};
use crate::export::{Options, format, names};
use crate::files::write_atomically;
use crate::fleet::collect::collect_reports;

pub fn run(args: &ExportArgs, out: &mut dyn Write) -> Result<u8> {
    let opts = options(args)?;
    let reports: &PathBuf = &args.read.reports.dir;
    let matrix_path = &args.fleet.matrix;
    if !args.no_collect {
        if !matrix_path.exists() {
            return Err(Error::refused(format!(
                "matrix not found: {} -- `mx export --no-collect` exports the reports already in {}/ without it",
                matrix_path.display(),
                reports.display()
            )));
        }
        let fleet = super::open_fleet(&args.fleet)?;
        // The samples may be going to stdout: the collect's narration goes to stderr.
        collect_reports(&fleet, reports, &mut std::io::stderr())?;
    }
    let matrix = super::summarize::matrix_for_reports(matrix_path, reports, args.read.trust)?;
    let alone = matrix.is_none();
    let export = crate::export::from_reports(reports, matrix, &opts)?;
    // Said once the reports have read: a bad report is the one line to fix.
    if alone {
        eprintln!(
            "[mx] export: no matrix at {}: exporting the reports alone (no NO-DATA states, no coverage)",
            matrix_path.display()
        );
    }
    if !export.measured() {
        eprintln!(
            "mx: nothing to export from {}/ -- no measured rows in the window",
            reports.display()
        );
        return Ok(EXIT_PROBLEMS);
    }
    let format: Box<dyn format::Format> = if args.json {
        Box::<format::Ndjson>::default()
    } else {
        Box::<format::Tsv>::default()
    };
    let text = format::render(&export, &opts, format);
    let destination = if args.output == Path::new("-") {
        out.write_all(text.as_bytes())?;
        "stdout".to_string()
    } else {
        write_output(&args.output, &text, args.append)?;
        args.output.display().to_string()
    };
    let overlays_used: std::collections::BTreeSet<&str> =
        export.samples.iter().map(|s| s.overlay.name).collect();
    eprintln!(
        "[mx] export: {} sample(s) over {} overlay(s) on {} host(s) -> {destination}",
        export.samples.len(),
        overlays_used.len(),
        export.hosts.len()
    );
    for line in &export.notes {
        eprintln!("[mx] export: {line}");
    }
    Ok(0)
}

/// The options of `args`, checked: what would break a results line is
/// refused before anything is collected.
fn options(args: &ExportArgs) -> Result<Options> {
    let without = "choose one without";
    names::check_field("--test-prefix", &args.test_prefix, without)?;
    names::check_field("--target-prefix", &args.target_prefix, without)?;
    if let Some(run) = &args.run {
        names::check_field("--run", run, without)?;
    }
    Ok(Options {
        window: args.window,
        raw: args.raw,
        peers: args.peers,
        nic_gbps: args.nic_gbps,
        names: match &args.names {
            Some(path) => names::read_names(path)?,
            None => HashMap::new(),
        },
        target_prefix: args.target_prefix.clone(),
        test_prefix: args.test_prefix.clone(),
        run: args.run.clone(),
        no_meta: args.no_meta,
    })
}

/// `--output` and `--append`: a file written whole by rename, or appended to.
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
        write_atomically(path, |out| out.write_all(text.as_bytes()))
    }
}
