//! `mx collect`: every host's report.csv into `reports/<host>.csv`, without
//! summarizing.

use std::io::Write;

use crate::cli::CollectArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::collect::collect_reports;

pub fn run(args: &CollectArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
    let ok = collect_reports(&fleet, &args.reports.dir, out)?;
    Ok(if ok { 0 } else { EXIT_PROBLEMS })
}
