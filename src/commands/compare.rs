//! `mx compare A B`: two runs side by side, each change with its noise and
//! a verdict ([`crate::summary::compare`]). A run is a reports directory
//! (summarized here, the same way `summarize` would) or a summary saved
//! with `summarize --json`.

use std::io::Write;
use std::path::Path;

use super::summarize::optional_matrix;
use crate::cli::CompareArgs;
use crate::error::{Error, Result};
use crate::summary::compare::{Comparison, compare, render};
use crate::summary::document::{Document, SCHEMA};
use crate::summary::{Options, Summary};

pub fn run(args: &CompareArgs, out: &mut dyn Write) -> Result<u8> {
    let a = load(&args.a, args.window, &args.matrix)?;
    let b = load(&args.b, args.window, &args.matrix)?;
    let (sa, sb) = (args.a.display().to_string(), args.b.display().to_string());
    let comparison = compared(&a, &b, (&sa, &sb), args.force)?;
    if args.json {
        let mut text = serde_json::to_string_pretty(&comparison).expect("a comparison serializes");
        text.push('\n');
        out.write_all(text.as_bytes())?;
    } else {
        out.write_all(render(&comparison, args.top).as_bytes())?;
    }
    Ok(0)
}

/// B against A; runs of different shapes are refused, saying how they
/// differ, unless `force`.
pub fn compared(
    a: &Document,
    b: &Document,
    names: (&str, &str),
    force: bool,
) -> Result<Comparison> {
    let comparison = compare(a, b, names);
    if !comparison.shape_differences.is_empty() && !force {
        return Err(Error::refused(format!(
            "{} and {} are runs of different shapes: {} -- their figures are not like for like (--force compares them anyway)",
            names.0,
            names.1,
            comparison.shape_differences.join("; ")
        )));
    }
    Ok(comparison)
}

/// A run's summary document: a directory's reports summarized (the newest
/// `window` seconds, the pools from `matrix` when there), or a file's JSON
/// read back (refused, naming the file, when it is not one).
pub fn load(path: &Path, window: f64, matrix: &Path) -> Result<Document> {
    if path.is_dir() {
        let opts = Options {
            window,
            top: 0,
            top_hosts: 0,
            series: true,
        };
        let summary = Summary::read(path, optional_matrix(matrix)?, opts)
            .map_err(|e| Error::refused(format!("{}: {}", path.display(), e.message())))?;
        return Ok(summary.document());
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, "cannot read", &e))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::refused(format!(
            "{}: not JSON ({e}) -- give a reports directory or a file saved with `mx summarize --json`",
            path.display()
        ))
    })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(other) => {
            return Err(Error::refused(format!(
                "{}: a document of schema {other}, not {SCHEMA} -- save the summary again with this mx's `summarize --json`",
                path.display()
            )));
        }
        None => {
            return Err(Error::refused(format!(
                "{}: not an mx summary (no \"schema\" key) -- give a reports directory or a file saved with `mx summarize --json`",
                path.display()
            )));
        }
    }
    serde_json::from_value(value).map_err(|e| {
        Error::refused(format!(
            "{}: an {SCHEMA} document with a bad key ({e})",
            path.display()
        ))
    })
}
