//! Directories private to the user mx runs as, judged as OpenSSH's
//! StrictModes judges `~/.ssh`: a path in a world-writable directory (`/tmp`,
//! `/var/tmp`) belongs to whoever made it first, so mx trusts one only when
//! it is a real directory (never a symlink), owned by this user and writable
//! by no one else, under parents that only root and this user can write to
//! (or that are sticky, as `/tmp` is: nobody can rename or remove what
//! another user made in it).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Group- and other-writable bits.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// Sticky bit: in such a directory only an entry's owner may rename or
/// remove it.
const STICKY: u32 = 0o1000;

/// `path` for this user alone: made with mode 0700 when it is missing; when
/// it exists, taken only if it is a real directory this user owns (and then
/// tightened to 0700: an earlier mx left it 0755). Its parents must be
/// safe too. Why not, in one line naming the path, its owner and its mode.
pub fn make_private(path: &Path) -> Result<PathBuf, String> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    check_parents(parent)?;
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: cannot make it: {e}", path.display())),
    }
    let meta = owned_here(path)?;
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
            format!(
                "{}: cannot make it private (mode 0700): {e}",
                path.display()
            )
        })?;
    }
    Ok(path.to_path_buf())
}

/// Whether `path`, an existing directory, is private to this user by the
/// rules of [`make_private`] (without changing its mode: one that others can
/// write is refused).
pub fn check_private(path: &Path) -> Result<(), String> {
    let meta = owned_here(path)?;
    if meta.mode() & WRITABLE_BY_OTHERS != 0 {
        return Err(format!(
            "{} is writable by other users ({})",
            path.display(),
            described(&meta)
        ));
    }
    check_parents(path)
}

/// The directory at `path`, checked to be a real directory this user owns.
fn owned_here(path: &Path) -> Result<std::fs::Metadata, String> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| format!("{}: cannot read it: {e}", path.display()))?;
    if meta.file_type().is_symlink() {
        return Err(format!(
            "{} is a symlink ({}), not a directory mx made",
            path.display(),
            described(&meta)
        ));
    }
    if !meta.is_dir() {
        return Err(format!(
            "{} is not a directory ({})",
            path.display(),
            described(&meta)
        ));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!(
            "{} belongs to another user ({}): whoever owns it can use what mx puts there",
            path.display(),
            described(&meta)
        ));
    }
    Ok(meta)
}

/// Every directory from `dir` up to `/` is writable by no one but root and
/// this user, or is sticky.
fn check_parents(dir: &Path) -> Result<(), String> {
    let real = std::fs::canonicalize(dir)
        .map_err(|e| format!("{}: cannot read it: {e}", dir.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    for ancestor in real.ancestors() {
        let meta = std::fs::metadata(ancestor)
            .map_err(|e| format!("{}: cannot read it: {e}", ancestor.display()))?;
        let trusted_owner = meta.uid() == 0 || meta.uid() == me;
        let others_write = meta.mode() & WRITABLE_BY_OTHERS != 0;
        if !trusted_owner || (others_write && meta.mode() & STICKY == 0) {
            return Err(format!(
                "{} is not safe for mx's files: {} ({}) lets another user replace what is in it",
                dir.display(),
                ancestor.display(),
                described(&meta)
            ));
        }
    }
    Ok(())
}

/// `owner uid 1001, mode 0777`.
fn described(meta: &std::fs::Metadata) -> String {
    format!(
        "owner uid {}, mode {:04o}",
        meta.uid(),
        meta.mode() & 0o7777
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_made_0700_and_an_own_0755_one_is_tightened() {
        let root = tempfile::tempdir().unwrap();
        let fresh = root.path().join("fresh");
        make_private(&fresh).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&fresh), 0o700);
        let earlier = root.path().join("earlier");
        std::fs::create_dir(&earlier).unwrap();
        std::fs::set_permissions(&earlier, std::fs::Permissions::from_mode(0o755)).unwrap();
        make_private(&earlier).unwrap();
        assert_eq!(mode(&earlier), 0o700);
    }

    #[test]
    fn a_symlink_or_a_file_is_refused_naming_the_path() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let why = make_private(&link).unwrap_err();
        assert!(
            why.starts_with(&format!("{} is a symlink", link.display())),
            "{why}"
        );
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(
            make_private(&file)
                .unwrap_err()
                .contains("is not a directory")
        );
    }

    #[test]
    fn a_parent_others_can_write_without_the_sticky_bit_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = make_private(&open.join("mx")).unwrap_err();
        assert!(why.contains("mode 0777"), "{why}");
        assert!(!open.join("mx").exists(), "made in an unsafe parent");
        // Sticky, as /tmp is: fine.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        make_private(&open.join("mx")).unwrap();
    }
}
