//! `mx logs`: every agent's log, fetched into `--output` as `<host>.log`.

use std::io::Write;

use crate::cli::LogsArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::collect::fetch;

pub fn run(args: &LogsArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
    let missed = fetch(
        &fleet,
        out,
        "agent.log",
        &args.output,
        ".log",
        false,
        "no log",
    )?;
    Ok(if missed.is_empty() { 0 } else { EXIT_PROBLEMS })
}
