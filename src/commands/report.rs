//! `mx report -o FILE`: collect (unless `--no-collect`), then write the run as
//! one self-contained HTML page ([`crate::summary::render::page`]), and with `--svg
//! DIR` each of its pictures as an SVG file. Every file is written whole,
//! then renamed into place.

use std::io::Write;

use crate::cli::ReportArgs;
use crate::error::{EXIT_PROBLEMS, Error, Result};
use crate::files::write_atomically;
use crate::fleet::collect::missed_reports;
use crate::summary::render::page::page;
use crate::summary::{Options, Summary};
use crate::units::{local_date_time, wall_now};

pub fn run(args: &ReportArgs, out: &mut dyn Write) -> Result<u8> {
    let missed = if args.no_collect {
        Vec::new()
    } else {
        let fleet = super::open_fleet(&args.fleet)?;
        missed_reports(&fleet, &args.read.reports.dir, out)?
    };
    let opts = Options {
        window: args.window,
        top: 10,
        top_hosts: 15,
        series: true,
    };
    let matrix = super::summarize::matrix_for_reports(
        &args.fleet.matrix,
        &args.read.reports.dir,
        args.read.trust,
    )?;
    let unreachable: Vec<String> = missed.iter().map(|m| m.host.clone()).collect();
    let summary = Summary::read_collected(&args.read.reports.dir, matrix, opts, &unreachable)?;
    let before = match &args.compare {
        Some(run) => {
            let a = super::compare::load(run, args.window, &args.fleet.matrix)?;
            let this = format!("this run ({})", args.read.reports.dir.display());
            let names = (run.display().to_string(), this);
            Some(super::compare::compared(
                &a,
                &summary.document(),
                (&names.0, &names.1),
                args.force,
            )?)
        }
        None => None,
    };
    let page = page(&summary, &local_date_time(wall_now()), before.as_ref());
    let path = &args.output;
    write_atomically(path, |w| w.write_all(page.html.as_bytes()))?;
    writeln!(
        out,
        "[mx] wrote {} ({} kB, needs nothing from the network): open it in a browser",
        path.display(),
        page.html.len().div_ceil(1000)
    )?;
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "cannot create", &e))?;
        for picture in &page.pictures {
            write_atomically(&dir.join(&picture.file), |w| {
                w.write_all(picture.svg.as_bytes())
            })?;
        }
        let names: Vec<&str> = page.pictures.iter().map(|p| p.file.as_str()).collect();
        writeln!(out, "[mx] wrote {}/{{{}}}", dir.display(), names.join(","))?;
    }
    if !missed.is_empty() {
        writeln!(
            out,
            "[mx] {} host(s)' reports could not be collected just now: the page is stale for them",
            missed.len()
        )?;
        return Ok(EXIT_PROBLEMS);
    }
    Ok(0)
}
