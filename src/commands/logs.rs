//! `mx logs`: every agent's log, fetched into `--output` as `<host>.log`.

use std::io::Write;

use crate::cli::LogsArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::collect::{Check, Wanted, fetch};

pub fn run(args: &LogsArgs, out: &mut dyn Write) -> Result<u8> {
    let fleet = super::open_fleet(&args.fleet)?;
    let logs = Wanted {
        file: "agent.log",
        suffix: ".log",
        missing: "no log",
        check: Check::Nothing,
    };
    let missed = fetch(&fleet, out, &logs, &args.output, false)?;
    Ok(if missed.is_empty() { 0 } else { EXIT_PROBLEMS })
}
