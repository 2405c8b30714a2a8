//! Putting mx on a host: the agent binary and the host's part of the matrix
//! staged here, then copied into the remote directory (made first; a host
//! whose agent runs is refused, since a running executable cannot be
//! overwritten). A host that already holds the same agent binary (its
//! SHA-256 read in the step that makes the directory) gets its matrix
//! alone: a start at 1,000 hosts moves the binary only where it changed.
//! Over ssh, a host that can unpack it (the same step says how) gets the
//! agent packed ([`Packing`]): zstd, 2.6 MB for 6 MB, else gzip, 2.8 MB.
//!
//! Each host gets its slice of the matrix (`mx_matrix::slice`), under the
//! matrix's remote name: what its agent needs, growing with the fleet, where
//! the whole matrix grows with its square (100 MB at 10,000 hosts with
//! `--peers 8`, about 300 KB a slice). A slice is cut as its host's copy
//! begins and removed once it is over: at most `--jobs` are on disk here at
//! once. A transport that broadcasts one copy to every host (Slurm's
//! sbcast) sends the whole matrix.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

use sha2::Digest;

use super::packing::{self, Packing};
use super::transport::{Copy, Outcome};
use super::{COPY_TIMEOUT, Fleet, STEP_TIMEOUT, scripts};
use mx_base::error::{Error, Result};
use mx_matrix::slice::Slicer;
use mx_matrix::{Host, Matrix};

/// The matrix's name on the hosts: a slice of it, or (broadcast) all of it.
const REMOTE_MATRIX: &str = "matrix.csv";

/// The files a deploy copies, staged under their remote names.
pub struct Staged {
    /// The agent binary (`mx`), then the matrix (`matrix.csv`): whole, or
    /// for a transport that copies one file to every host, every host's
    /// slice of a layered one.
    pub files: Vec<PathBuf>,
    /// Cuts each host's slice; `None` where the transport copies one file
    /// to every host.
    slicer: Option<Slicer>,
    /// The agent binary's SHA-256, lowercase hex (as `sha256sum` prints it).
    pub agent_sha256: String,
    /// The agent packed each way ([`Packing::ALL`], in its order), once it
    /// is: packing is spent while the hosts' directories are made (about
    /// half a second for gzip, a fifth for zstd), and kept in this user's
    /// cache for the next start.
    packed: Vec<(Packing, Packed)>,
    /// Holds the files until the deploy is over (dropped last).
    _dir: tempfile::TempDir,
}

/// The agent packed in the background; `None` if it could not be (no
/// `zstd` on this machine).
struct Packed {
    packing: Mutex<Option<JoinHandle<Option<PathBuf>>>>,
    done: OnceLock<Option<PathBuf>>,
}

impl Packed {
    /// Packs `agent` (whose SHA-256 is `sha`) `how` into `to` (mode 0700,
    /// as the agent it unpacks to), from this user's cache when it holds it.
    fn start(how: Packing, agent: PathBuf, sha: String, to: PathBuf) -> Packed {
        let packing = std::thread::spawn(move || {
            let packed = match cache_dir() {
                Some(cache) => cached(&cache, how, &agent, &sha, &to),
                None => pack(how, &agent, &to),
            };
            packed.ok().map(|()| to)
        });
        Packed {
            packing: Mutex::new(Some(packing)),
            done: OnceLock::new(),
        }
    }

    /// The packed agent, waiting for it.
    fn get(&self) -> Option<&Path> {
        self.done
            .get_or_init(|| {
                let packing = self.packing.lock().expect("unpoisoned").take();
                packing.and_then(|p| p.join().ok().flatten())
            })
            .as_deref()
    }
}

impl Drop for Staged {
    /// Waits for the packing, which writes into the staging directory.
    fn drop(&mut self) {
        for (_, packed) in &self.packed {
            packed.get();
        }
    }
}

/// Where the packed agent is kept from one start to the next, for this
/// user alone (made 0700; refused if another user could write it or a
/// parent): `$XDG_CACHE_HOME/mx`, else `~/.cache/mx`. One file, of the
/// agent last deployed: a start packs a new agent once.
fn cache_dir() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = set("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    std::fs::create_dir_all(&base).ok()?;
    mx_base::private_dir::make_private(&base.join("mx")).ok()
}

/// `agent` packed `how` into `to`, through the cache: taken from it when it
/// holds this agent (by `sha`), else packed into it (under a temporary
/// name, then renamed), the other agents packed before removed.
fn cached(cache: &Path, how: Packing, agent: &Path, sha: &str, to: &Path) -> std::io::Result<()> {
    let this_agent = format!("agent-{sha}");
    let name = format!("{this_agent}{}", how.suffix());
    let kept = cache.join(&name);
    if !kept.is_file() {
        let fresh = tempfile::Builder::new()
            .prefix(".agent-")
            .tempfile_in(cache)?
            .into_temp_path();
        pack(how, agent, &fresh)?;
        fresh.persist(&kept).map_err(|e| e.error)?;
        for entry in std::fs::read_dir(cache)?.flatten() {
            let other = entry.file_name();
            let other = other.to_string_lossy();
            if other.starts_with("agent-") && !other.starts_with(&this_agent) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    std::fs::copy(&kept, to)?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700))
}

/// `from` packed `how` into `to`. gzip here, at its default level (6: 2.86
/// MB of a 6.19 MB agent in about half a second; 9 saves 0.5% for 2.5 times
/// the time). zstd by this machine's `zstd` (an error where it has none),
/// at level 9: 2.58 MB of a 6.06 MB agent in 0.18 s, and its unpacking on
/// every fresh host 4 times faster than gzip's (level 19 saves 0.24 MB
/// more a host but takes 2.7 s, which the first start of a build would
/// wait for); its frames carry a checksum of their content, which
/// `zstd -d` checks.
pub(crate) fn pack(how: Packing, from: &Path, to: &Path) -> std::io::Result<()> {
    let mut input = std::fs::File::open(from)?;
    let out = std::fs::File::create(to)?;
    out.set_permissions(std::fs::Permissions::from_mode(0o700))?;
    match how {
        Packing::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            std::io::copy(&mut input, &mut gz)?;
            gz.finish()?.sync_all()
        }
        Packing::Zstd => {
            let status = std::process::Command::new("zstd")
                .args(["-q", "-9", "--check", "-c"])
                .stdin(input)
                .stdout(out.try_clone()?)
                .stderr(std::process::Stdio::null())
                .status()?;
            if !status.success() {
                return Err(std::io::Error::other(format!("zstd said {status}")));
            }
            out.sync_all()
        }
    }
}

/// What a deploy says of a host that had the agent already.
pub const AGENT_UNCHANGED: &str = "agent unchanged (same sha256): matrix copied";

/// What a deploy says of a host that got the agent packed `how`.
pub fn agent_packed(how: Packing) -> String {
    format!("agent copied packed ({}), unpacked there", how.tool())
}

/// Copies the agent binary and the matrix, both under their remote names
/// (`mx`, `matrix.csv`) and with the modes they get on the hosts (0700,
/// 0600), into a staging directory of this user's alone: a fresh one (mode
/// 0700) under parents no other user can write, or the agent a root fleet
/// runs could be swapped on its way. `deploy` is the matrix to send when it
/// differs from the file (retargeted by --bind). The hosts' slices are cut
/// from it (the fleet's matrix when `None`) as each host's copy begins, or
/// where one file goes to every host (Slurm), every host's slice is staged
/// (or the matrix, where it is the smaller); a layered grid that is not the
/// layer 0 its seed derives is refused here, as an agent would refuse the
/// whole matrix.
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
    let to_matrix = staging.path().join(REMOTE_MATRIX);
    let matrix = deploy.unwrap_or(&fleet.matrix);
    matrix.check_layer_zero(&fleet.matrix_path.display().to_string())?;
    let slicer = Slicer::new(matrix.clone());
    match deploy {
        Some(matrix) => matrix.save(&to_matrix)?,
        None => {
            std::fs::copy(&fleet.matrix_path, &to_matrix)
                .map_err(|e| Error::io(&fleet.matrix_path, "cannot stage the matrix", &e))?;
        }
    }
    // A transport that copies one file to every host gets every host's
    // slice in one, or a grid's matrix itself where that is smaller.
    if fleet.transport.broadcasts() {
        let whole = std::fs::metadata(&to_matrix).map_or(u64::MAX, |m| m.len());
        if let Some(every_host) = every_host_slice(&slicer, whole) {
            std::fs::write(&to_matrix, every_host)
                .map_err(|e| Error::io(&to_matrix, "cannot stage the matrix", &e))?;
        }
    }
    for (file, mode) in [(&to_agent, 0o700), (&to_matrix, 0o600)] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(file, "cannot stage", &e))?;
    }
    let bytes = std::fs::read(&to_agent).map_err(|e| Error::io(binary, "cannot read", &e))?;
    let agent_sha256: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let packed = if fleet.transport.unpacks() {
        Packing::ALL
            .into_iter()
            .map(|how| {
                let to = staging
                    .path()
                    .join(format!("{}{}", scripts::AGENT_BIN, how.suffix()));
                let packed = Packed::start(how, to_agent.clone(), agent_sha256.clone(), to);
                (how, packed)
            })
            .collect()
    } else {
        Vec::new()
    };
    let slicer = (!fleet.transport.broadcasts()).then_some(slicer);
    Ok(Staged {
        files: vec![to_agent, to_matrix],
        slicer,
        agent_sha256,
        packed,
        _dir: staging,
    })
}

/// Every host's slice in one file, for a transport that sends one file to
/// every host: always for a layered matrix (the host list and a line of
/// rates, whatever the fleet's size); for a grid, when it is smaller than
/// the matrix's `whole` bytes (a few hosts' matrix is smaller than a
/// slice's first and end lines, and a dense grid's cells one by one can
/// take more room than its CSV).
fn every_host_slice(slicer: &Slicer, whole: u64) -> Option<Vec<u8>> {
    let every_host = slicer.every_host();
    let layered = slicer.matrix().config.rotation.is_some();
    (layered || (every_host.len() as u64) < whole).then_some(every_host)
}

/// Makes the remote dir (refusing a host whose agent runs) and copies the
/// staged files, the agent binary only when the host's differs.
pub fn deploy(fleet: &Fleet, host: &Host, staged: &Staged, check_running: bool) -> Outcome {
    let ready = make_ready(fleet, host, check_running);
    if !ready.ok() {
        return ready;
    }
    let unchanged = holds_agent(&ready, staged);
    let matrix = match staged.copy_of_matrix_for(host) {
        Ok(matrix) => matrix,
        Err(failed) => return failed,
    };
    let packing = (!unchanged)
        .then(|| staged.packing_for(&unpacks(fleet, &ready)))
        .flatten();
    let files = staged.to_copy(unchanged, packing, matrix.path());
    let copied = fleet
        .transport
        .push(host, &files, &fleet.dir(host), COPY_TIMEOUT);
    match (copy_outcome(fleet, ready, copied, unchanged), packing) {
        (done, Some(how)) if done.ok() && !fleet.dry_run => Outcome {
            code: 0,
            text: agent_packed(how),
        },
        (done, _) => done,
    }
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
        let files = staged.to_copy(unchanged, None, &staged.files[1]);
        let copy = Copy {
            files: &files,
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
    /// The matrix `host` gets: its slice, cut into the staging directory now
    /// and removed when the returned file is dropped; the whole matrix where
    /// the transport broadcasts.
    pub fn matrix_for(&self, host: &Host) -> Result<HostMatrix> {
        let Some(slicer) = &self.slicer else {
            return Ok(HostMatrix {
                path: self.files[1].clone(),
                own_dir: None,
            });
        };
        let me = slicer
            .matrix()
            .index_of(&host.name)
            .ok_or_else(|| Error::refused(format!("host '{}' is not in the matrix", host.name)))?;
        let staging = self.files[1].parent().expect("a staged file's directory");
        let dir = staging.join(format!("slice-{me}"));
        let staged = HostMatrix {
            path: dir.join(REMOTE_MATRIX),
            own_dir: Some(dir.clone()),
        };
        let cut = || -> std::io::Result<()> {
            std::fs::create_dir(&dir)?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&staged.path)?;
            std::io::Write::write_all(&mut file, &slicer.slice(me))
        };
        cut().map_err(|e| Error::io(&staged.path, "cannot stage the slice", &e))?;
        Ok(staged)
    }

    /// [`Staged::matrix_for`], its failure as the host's step outcome: the
    /// copy failed, and why.
    pub fn copy_of_matrix_for(&self, host: &Host) -> std::result::Result<HostMatrix, Outcome> {
        self.matrix_for(host).map_err(|e| Outcome {
            code: 1,
            text: format!("copy failed: {e}"),
        })
    }

    /// The agent packed `how`: waiting for it, `None` where it could not be.
    fn packed(&self, how: Packing) -> Option<&Path> {
        let (_, packed) = self.packed.iter().find(|(p, _)| *p == how)?;
        packed.get()
    }

    /// The agent packed `how`'s size and the agent's, in bytes (`None` when
    /// it could not be packed so).
    pub fn packed_sizes(&self, how: Packing) -> Option<(u64, u64)> {
        let packed = std::fs::metadata(self.packed(how)?).ok()?.len();
        let agent = std::fs::metadata(&self.files[0]).ok()?.len();
        Some((packed, agent))
    }

    /// How the agent goes to a host that can unpack it each of `offered`
    /// ways (in order of preference): the first one this machine could pack
    /// (waiting for it).
    pub fn packing_for(&self, offered: &[Packing]) -> Option<Packing> {
        offered
            .iter()
            .copied()
            .find(|&how| self.packed(how).is_some())
    }

    /// The files a host gets: its `matrix` alone when it holds this agent,
    /// else the agent too, `packed` where the host can unpack it that way.
    pub fn to_copy(
        &self,
        holds_agent: bool,
        packed: Option<Packing>,
        matrix: &Path,
    ) -> Vec<PathBuf> {
        let matrix = matrix.to_path_buf();
        if holds_agent {
            return vec![matrix];
        }
        match packed.and_then(|how| self.packed(how)) {
            Some(agent) => vec![agent.to_path_buf(), matrix],
            None => vec![self.files[0].clone(), matrix],
        }
    }
}

/// The matrix staged for one host; a slice's directory is removed on drop.
pub struct HostMatrix {
    path: PathBuf,
    own_dir: Option<PathBuf>,
}

impl HostMatrix {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for HostMatrix {
    fn drop(&mut self) {
        if let Some(dir) = &self.own_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The ways a host can take the agent packed: none unless its transport
/// unpacks as it copies; those its ready step found tools for.
fn unpacks(fleet: &Fleet, ready: &Outcome) -> Vec<Packing> {
    if fleet.transport.unpacks() {
        Packing::on_host(&ready.text)
    } else {
        Vec::new()
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
    let script = format!(
        "{script}\n{}\n{}",
        scripts::agent_sha256(&dir),
        packing::offered()
    );
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

#[cfg(test)]
mod tests {
    use super::*;
    use mx_matrix::build::{Shape, generated as grid};

    /// A packing that ends after `ms` with `path` (`None`: it failed).
    fn packing(ms: u64, path: Option<PathBuf>) -> Packed {
        let packing = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            path
        });
        Packed {
            packing: Mutex::new(Some(packing)),
            done: OnceLock::new(),
        }
    }

    #[test]
    fn a_host_gets_zstd_where_it_and_this_machine_have_it_else_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, name).unwrap();
            path
        };
        let (agent, matrix) = (file("mx"), file("matrix.csv"));
        let (zst, gz) = (file("mx.zst"), file("mx.gz"));
        let staged = |zstd: Option<PathBuf>| Staged {
            files: vec![agent.clone(), matrix.clone()],
            slicer: None,
            agent_sha256: "00".to_string(),
            packed: vec![
                (Packing::Zstd, packing(200, zstd)),
                (Packing::Gzip, packing(0, Some(gz.clone()))),
            ],
            _dir: tempfile::tempdir().unwrap(),
        };
        let both = [Packing::Zstd, Packing::Gzip];
        // zstd, waited for while it is being packed.
        let packed = staged(Some(zst.clone()));
        assert_eq!(packed.packing_for(&both), Some(Packing::Zstd));
        assert_eq!(packed.packing_for(&[Packing::Gzip]), Some(Packing::Gzip));
        assert_eq!(packed.packing_for(&[]), None);
        assert_eq!(
            packed.to_copy(false, Some(Packing::Zstd), &matrix),
            [zst, matrix.clone()]
        );
        assert_eq!(
            packed.to_copy(false, None, &matrix),
            [agent.clone(), matrix.clone()]
        );
        let matrix_alone = packed.to_copy(true, Some(Packing::Gzip), &matrix);
        assert_eq!(matrix_alone, std::slice::from_ref(&matrix));
        // No zstd on this machine: gzip, or nothing packed.
        let unpacked = staged(None);
        assert_eq!(unpacked.packing_for(&both), Some(Packing::Gzip));
        assert_eq!(unpacked.packing_for(&[Packing::Zstd]), None);
    }

    #[test]
    fn one_file_for_every_host_is_the_slice_of_a_layered_matrix_or_of_a_grid_where_smaller() {
        // Three hosts: the matrix is smaller than a slice's own first and
        // end lines; a grid's goes as it is, a layered one's as its slice.
        let small = grid(3, Shape::FullMesh);
        let whole = small.to_bytes().len() as u64;
        assert!(every_host_slice(&Slicer::new(small), whole).is_none());
        let layered = grid(
            3,
            Shape::Layered {
                peers: 1,
                seed: 5,
                dwell: 2.0,
                fill: false,
            },
        );
        let whole = layered.to_bytes().len() as u64;
        let slice = every_host_slice(&Slicer::new(layered), whole).expect("a layered slice");
        assert!(slice.len() as u64 > whole);
        // 300 hosts, 8 peers each: 2,400 cells of 90,000.
        let big = grid(300, Shape::KRegular { peers: 8, seed: 3 });
        let whole = big.to_bytes().len() as u64;
        let slice =
            every_host_slice(&Slicer::new(big.clone()), whole).expect("the slice is the smaller");
        // 28.6 kB of 110.4 kB: the host header and 2,400 cells.
        assert!(
            (slice.len() as u64) * 3 < whole,
            "{} of {whole}",
            slice.len()
        );
        let read = mx_matrix::slice::read(&slice, "s").unwrap();
        assert_eq!(read.me, None);
        let rows = |m: &Matrix| m.rows().map(|(_, r)| r.to_vec()).collect::<Vec<_>>();
        assert_eq!(rows(&read.matrix), rows(&big));
    }
}
