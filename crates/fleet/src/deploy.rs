//! Putting mx on a host: the agent binary and the matrix staged here, then
//! copied into the remote directory (made first; a host whose agent runs is
//! refused, since a running executable cannot be overwritten). A host that
//! already holds the same agent binary (its SHA-256 read in the step that
//! makes the directory) gets the matrix alone: a start at 1,000 hosts moves
//! the binary only where it changed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::Digest;

use super::transport::{Copy, Outcome};
use super::{COPY_TIMEOUT, Fleet, STEP_TIMEOUT, scripts};
use mx_base::error::{Error, Result};
use mx_matrix::{Host, Matrix};

/// The files a deploy copies, staged under their remote names.
pub struct Staged {
    /// Holds the files until the deploy is over.
    _dir: tempfile::TempDir,
    /// The agent binary (`mx`), then the matrix (`matrix.csv`).
    pub files: Vec<PathBuf>,
    /// The agent binary's SHA-256, lowercase hex (as `sha256sum` prints it).
    pub agent_sha256: String,
}

/// What a deploy says of a host that had the agent already.
pub const AGENT_UNCHANGED: &str = "agent unchanged (same sha256): matrix copied";

/// Copies the agent binary and the matrix, both under their remote names
/// (`mx`, `matrix.csv`) and with the modes they get on the hosts (0700,
/// 0600), into a staging directory of this user's alone: a fresh one (mode
/// 0700) under parents no other user can write, or the agent a root fleet
/// runs could be swapped on its way. `deploy` is the matrix to send when it
/// differs from the file (retargeted by --bind).
pub fn stage(fleet: &Fleet, binary: &Path, deploy: Option<&Matrix>) -> Result<Staged> {
    let staging = tempfile::Builder::new()
        .prefix("mx-stage-")
        .tempdir()
        .map_err(|e| Error::refused(format!("cannot stage files: {e}")))?;
    mx_base::private_dir::check_private(staging.path()).map_err(|why| {
        Error::refused(format!(
            "cannot stage the agent safely: {why} (set TMPDIR to a directory of your own)"
        ))
    })?;
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
    for (file, mode) in [(&to_agent, 0o700), (&to_matrix, 0o600)] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(file, "cannot stage", &e))?;
    }
    let bytes = std::fs::read(&to_agent).map_err(|e| Error::io(binary, "cannot read", &e))?;
    let agent_sha256 = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Staged {
        _dir: staging,
        files: vec![to_agent, to_matrix],
        agent_sha256,
    })
}

/// Makes the remote dir (refusing a host whose agent runs) and copies the
/// staged files, the agent binary only when the host's differs.
pub fn deploy(fleet: &Fleet, host: &Host, staged: &Staged, check_running: bool) -> Outcome {
    let ready = make_ready(fleet, host, check_running);
    if !ready.ok() {
        return ready;
    }
    let unchanged = holds_agent(&ready, staged);
    let copied = fleet.transport.push(
        host,
        staged.to_copy(unchanged),
        &fleet.dir(host),
        COPY_TIMEOUT,
    );
    copy_outcome(fleet, ready, copied, unchanged)
}

/// [`deploy`] on each of `hosts` (indices into the matrix), in order. A
/// transport that broadcasts (Slurm) makes every host's directory first,
/// then copies to all of them at once: once to the hosts that need the
/// agent, once (the matrix alone) to those that hold it already.
pub fn deploy_all(
    fleet: &Fleet,
    hosts: &[usize],
    staged: &Staged,
    check_running: bool,
) -> Vec<Outcome> {
    if !fleet.transport.broadcasts() {
        return fleet.each(hosts, |host| deploy(fleet, host, staged, check_running));
    }
    let mut outcomes = fleet.each(hosts, |host| make_ready(fleet, host, check_running));
    let ready: Vec<(usize, bool)> = (0..hosts.len())
        .filter(|&i| outcomes[i].ok())
        .map(|i| (i, holds_agent(&outcomes[i], staged)))
        .collect();
    for unchanged in [false, true] {
        let group: Vec<usize> = ready
            .iter()
            .filter(|(_, u)| *u == unchanged)
            .map(|(i, _)| *i)
            .collect();
        if group.is_empty() {
            continue;
        }
        let targets: Vec<&Host> = group.iter().map(|&i| &fleet.hosts()[hosts[i]]).collect();
        let dir = fleet.dir(targets[0]);
        let copy = Copy {
            files: staged.to_copy(unchanged),
            dir: &dir,
            timeout: COPY_TIMEOUT,
        };
        let copied = fleet.transport.push_all(&targets, &copy);
        for (i, copied) in group.into_iter().zip(copied) {
            let made = outcomes[i].clone();
            outcomes[i] = copy_outcome(fleet, made, copied, unchanged);
        }
    }
    outcomes
}

impl Staged {
    /// The matrix alone, for a host whose running agent re-reads it.
    pub fn matrix_only(&self) -> &[PathBuf] {
        &self.files[1..]
    }

    /// The files a host gets: the matrix alone when it holds this agent.
    fn to_copy(&self, holds_agent: bool) -> &[PathBuf] {
        if holds_agent {
            &self.files[1..]
        } else {
            &self.files[..]
        }
    }
}

/// Whether the step that made a host's directory (`ready`) found this very
/// agent binary there.
fn holds_agent(ready: &Outcome, staged: &Staged) -> bool {
    let have = ready.text.lines().find_map(|l| l.strip_prefix("sha256="));
    have == Some(staged.agent_sha256.as_str())
}

/// Makes the remote dir on `host` (with `check_running`, refusing a host
/// whose agent runs), and says the SHA-256 of the agent binary there.
fn make_ready(fleet: &Fleet, host: &Host, check_running: bool) -> Outcome {
    let dir = fleet.dir(host);
    let script = if check_running {
        scripts::prepare(&dir, &fleet.hint("stop"))
    } else {
        scripts::make_dir(&dir)
    };
    let script = format!("{script}\n{}", scripts::agent_sha256(&dir));
    fleet.transport.run(host, &script, STEP_TIMEOUT)
}

/// A host's deploy, from its directory made (`ready`) and its copy (the
/// matrix alone when the host held the agent: `unchanged`).
fn copy_outcome(fleet: &Fleet, ready: Outcome, copied: Outcome, unchanged: bool) -> Outcome {
    match (fleet.dry_run, copied.ok()) {
        (true, _) => Outcome {
            code: 0,
            text: format!("{}\n{}", ready.text, copied.text),
        },
        (false, true) if unchanged => Outcome {
            code: 0,
            text: AGENT_UNCHANGED.to_string(),
        },
        (false, true) => copied,
        (false, false) => Outcome {
            code: copied.code,
            text: format!("copy failed: {}", copied.text),
        },
    }
}
