//! Fetching files back from the hosts (reports, logs): each into a side file
//! renamed over the local copy only when whole, so a transfer cut half way
//! never truncates what was already collected.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::transport::Outcome;
use super::{COPY_TIMEOUT, Fleet};
use mx_base::error::{Error, Result};

/// A host whose file could not be fetched: its name, and the earlier copy
/// kept in its place (with when that was fetched), if there is one.
pub struct Missed {
    pub host: String,
    pub earlier: Option<(PathBuf, std::time::SystemTime)>,
}

/// Fetches `file` from every host's remote dir into `into/<host><suffix>`.
/// Returns the hosts it could not fetch from.
pub fn fetch(
    fleet: &Fleet,
    out: &mut dyn Write,
    file: &str,
    into: &Path,
    suffix: &str,
    quiet: bool,
    missing: &str,
) -> Result<Vec<Missed>> {
    if !fleet.dry_run {
        std::fs::create_dir_all(into).map_err(|e| Error::io(into, "cannot create", &e))?;
    }
    let label = format!(
        "collecting {}s into {}/",
        if file == "agent.log" { "log" } else { "report" },
        into.display()
    );
    let done = fleet.step(out, &label, &fleet.all(), quiet, |host| {
        let to = into.join(format!("{}{suffix}", host.name));
        // Into a side file, renamed over the copy only when whole: a transfer
        // cut half way (a link going down) must not truncate what we had.
        let part = into.join(format!(".{}{suffix}.part", host.name));
        let got = fleet.transport.pull(
            host,
            &format!("{}/{file}", fleet.dir(host)),
            &part,
            COPY_TIMEOUT,
        );
        let got = if got.ok() && !fleet.dry_run {
            match std::fs::rename(&part, &to) {
                Ok(()) => got,
                Err(e) => Outcome {
                    code: 1,
                    text: format!("cannot keep {}: {e}", to.display()),
                },
            }
        } else {
            let _ = std::fs::remove_file(&part);
            got
        };
        match (got.ok(), quiet) {
            (true, false) if !fleet.dry_run => Outcome {
                code: 0,
                text: format!("-> {}", to.display()),
            },
            (true, _) => got,
            (false, _) if to.exists() => Outcome {
                code: got.code,
                text: format!("not collected, the earlier copy kept: {}", got.text),
            },
            (false, _) => Outcome {
                code: got.code,
                text: format!("{missing}: {}", got.text),
            },
        }
    })?;
    Ok(fleet
        .hosts()
        .iter()
        .enumerate()
        .filter(|(i, _)| !done.contains(i))
        .map(|(_, host)| {
            let copy = into.join(format!("{}{suffix}", host.name));
            let earlier = std::fs::metadata(&copy)
                .and_then(|m| m.modified())
                .ok()
                .map(|when| (copy, when));
            Missed {
                host: host.name.clone(),
                earlier,
            }
        })
        .collect())
}

/// Collects every host's report.csv into `reports/<host>.csv`; true when
/// every host's came.
pub fn collect_reports(fleet: &Fleet, reports: &Path, out: &mut dyn Write) -> Result<bool> {
    Ok(missed_reports(fleet, reports, out)?.is_empty())
}

/// Collects every host's report.csv into `reports/<host>.csv`; returns the
/// hosts whose report did not come.
pub fn missed_reports(fleet: &Fleet, reports: &Path, out: &mut dyn Write) -> Result<Vec<Missed>> {
    fetch(
        fleet,
        out,
        "report.csv",
        reports,
        ".csv",
        true,
        "no report yet",
    )
}
