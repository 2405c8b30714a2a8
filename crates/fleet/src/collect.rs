//! Fetching files back from the hosts (reports, logs): each into a side file
//! renamed over the local copy only when whole, so a transfer cut half way
//! never truncates what was already collected.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::transport::Outcome;
use super::{COPY_TIMEOUT, Fleet};
use mx_base::error::{Error, Result};

/// A host whose file could not be fetched, or arrived and was not one: its
/// name, why, and the earlier copy kept in its place (with when that was
/// fetched), if there is one.
pub struct Missed {
    pub host: String,
    pub why: String,
    pub earlier: Option<(PathBuf, std::time::SystemTime)>,
}

/// What a file fetched must be before it replaces the earlier copy: a
/// report must read as one (its header), so that one damaged file among
/// thousands is named and left out, not the summary of all refused.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Report,
    Nothing,
}

/// A file to fetch from every host, and how to keep it.
pub struct Wanted<'a> {
    /// Its name in each host's remote dir.
    pub file: &'a str,
    /// Each host's copy is `<host><suffix>` where it goes.
    pub suffix: &'a str,
    /// What a host whose file did not come is said to lack.
    pub missing: &'a str,
    pub check: Check,
}

/// Fetches `wanted` from every host's remote dir into `into`, `--jobs` at a
/// time, each checked as it arrives. Returns the hosts it could not fetch
/// from, or whose file was not what it should be.
pub fn fetch(
    fleet: &Fleet,
    out: &mut dyn Write,
    wanted: &Wanted,
    into: &Path,
    quiet: bool,
) -> Result<Vec<Missed>> {
    let Wanted {
        file,
        suffix,
        missing,
        check,
    } = *wanted;
    if !fleet.dry_run {
        std::fs::create_dir_all(into).map_err(|e| Error::io(into, "cannot create", &e))?;
    }
    let label = format!(
        "collecting {}s into {}/",
        if file == "agent.log" { "log" } else { "report" },
        into.display()
    );
    let whys = std::sync::Mutex::new(std::collections::HashMap::new());
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
        let checked = match check {
            Check::Report if got.ok() && !fleet.dry_run => mx_report::read::check_report(&part)
                .map_err(|e| e.to_string().replace(&part.display().to_string(), file)),
            _ => Ok(()),
        };
        let got = match checked {
            Ok(()) => got,
            Err(why) => Outcome {
                code: 1,
                text: format!("arrived, and is not a report: {why}"),
            },
        };
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
        if !got.ok() {
            whys.lock()
                .expect("unpoisoned")
                .insert(host.name.clone(), got.text.clone());
        }
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
    let mut whys = whys.into_inner().expect("unpoisoned");
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
                why: whys.remove(&host.name).unwrap_or_default(),
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
    let reports_wanted = Wanted {
        file: "report.csv",
        suffix: ".csv",
        missing: "no report yet",
        check: Check::Report,
    };
    fetch(fleet, out, &reports_wanted, reports, true)
}
