//! Putting mx on a host: the agent binary and the matrix staged here, then
//! copied into the remote directory (made first; a host whose agent runs is
//! refused, since a running executable cannot be overwritten). A host that
//! already holds the same agent binary (its SHA-256 read in the step that
//! makes the directory) gets the matrix alone: a start at 1,000 hosts moves
//! the binary only where it changed.

use std::path::{Path, PathBuf};

use sha2::Digest;

use super::transport::Outcome;
use super::{COPY_TIMEOUT, Fleet, STEP_TIMEOUT, scripts};
use crate::error::{Error, Result};
use crate::matrix::{Host, Matrix};

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
/// (`mx`, `matrix.csv`), into a staging directory. `deploy` is the matrix to
/// send when it differs from the file (retargeted by --bind).
pub fn stage(fleet: &Fleet, binary: &Path, deploy: Option<&Matrix>) -> Result<Staged> {
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
    let dir = fleet.dir(host);
    let script = if check_running {
        scripts::prepare(&dir, &fleet.hint("stop"))
    } else {
        scripts::make_dir(&dir)
    };
    let script = format!("{script}\n{}", scripts::agent_sha256(&dir));
    let ready = fleet.transport.run(host, &script, STEP_TIMEOUT);
    if !ready.ok() {
        return ready;
    }
    let have = ready.text.lines().find_map(|l| l.strip_prefix("sha256="));
    let unchanged = have == Some(staged.agent_sha256.as_str());
    let files = if unchanged {
        &staged.files[1..]
    } else {
        &staged.files[..]
    };
    let copied = fleet.transport.push(host, files, &dir, COPY_TIMEOUT);
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
