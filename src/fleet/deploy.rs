//! Putting mx on a host: the agent binary and the matrix staged here, then
//! copied into the remote directory (made first; a host whose agent runs is
//! refused, since a running executable cannot be overwritten).

use std::path::{Path, PathBuf};

use super::transport::{Copy, Outcome};
use super::{COPY_TIMEOUT, Fleet, STEP_TIMEOUT, scripts};
use crate::error::{Error, Result};
use crate::matrix::{Host, Matrix};

/// Copies the agent binary and the matrix, both under their remote names
/// (`mx`, `matrix.csv`), into a staging directory. `deploy` is the matrix to
/// send when it differs from the file (retargeted by --bind).
pub fn stage(
    fleet: &Fleet,
    binary: &Path,
    deploy: Option<&Matrix>,
) -> Result<(tempfile::TempDir, Vec<PathBuf>)> {
    let staging =
        tempfile::tempdir().map_err(|e| Error::refused(format!("cannot stage files: {e}")))?;
    let to_agent = staging.path().join(scripts::AGENT_BIN);
    std::fs::copy(binary, &to_agent)
        .map_err(|e| Error::io(binary, "cannot stage the agent", &e))?;
    let to_matrix = staging.path().join("matrix.csv");
    match deploy {
        Some(matrix) => matrix.save(&to_matrix)?,
        None => {
            std::fs::copy(&fleet.matrix_path, &to_matrix)
                .map_err(|e| Error::io(&fleet.matrix_path, "cannot stage the matrix", &e))?;
        }
    }
    Ok((staging, vec![to_agent, to_matrix]))
}

/// Makes the remote dir (refusing a host whose agent runs) and copies `files`.
pub fn deploy(fleet: &Fleet, host: &Host, files: &[PathBuf], check_running: bool) -> Outcome {
    let ready = make_ready(fleet, host, check_running);
    if !ready.ok() {
        return ready;
    }
    let copied = fleet
        .transport
        .push(host, files, &fleet.dir(host), COPY_TIMEOUT);
    copy_outcome(fleet, ready, copied)
}

/// [`deploy`] on each of `hosts` (indices into the matrix), in order. A
/// transport that broadcasts (Slurm) makes every host's directory first,
/// then copies the files to all of them at once.
pub fn deploy_all(
    fleet: &Fleet,
    hosts: &[usize],
    files: &[PathBuf],
    check_running: bool,
) -> Vec<Outcome> {
    if !fleet.transport.broadcasts() {
        return fleet.each(hosts, |host| deploy(fleet, host, files, check_running));
    }
    let mut outcomes = fleet.each(hosts, |host| make_ready(fleet, host, check_running));
    let ready: Vec<usize> = (0..hosts.len()).filter(|&i| outcomes[i].ok()).collect();
    let Some(&first) = ready.first() else {
        return outcomes;
    };
    let targets: Vec<&Host> = ready.iter().map(|&i| &fleet.hosts()[hosts[i]]).collect();
    let dir = fleet.dir(&fleet.hosts()[hosts[first]]);
    let copy = Copy {
        files,
        dir: &dir,
        timeout: COPY_TIMEOUT,
    };
    let copied = fleet.transport.push_all(&targets, &copy);
    for (i, copied) in ready.into_iter().zip(copied) {
        let made = outcomes[i].clone();
        outcomes[i] = copy_outcome(fleet, made, copied);
    }
    outcomes
}

/// Makes the remote dir on `host`; with `check_running`, refuses a host
/// whose agent runs.
fn make_ready(fleet: &Fleet, host: &Host, check_running: bool) -> Outcome {
    let dir = fleet.dir(host);
    let script = if check_running {
        scripts::prepare(&dir, &fleet.hint("stop"))
    } else {
        scripts::make_dir(&dir)
    };
    fleet.transport.run(host, &script, STEP_TIMEOUT)
}

/// A host's deploy, from its directory made (`ready`) and its copy.
fn copy_outcome(fleet: &Fleet, ready: Outcome, copied: Outcome) -> Outcome {
    match (fleet.dry_run, copied.ok()) {
        (true, _) => Outcome {
            code: 0,
            text: format!("{}\n{}", ready.text, copied.text),
        },
        (false, true) => copied,
        (false, false) => Outcome {
            code: copied.code,
            text: format!("copy failed: {}", copied.text),
        },
    }
}
