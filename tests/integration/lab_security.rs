//! A shared server, over real sshd: another local user (an unprivileged
//! account the test makes) plants what mx would use before the operator's
//! first start. mx, running as root on the hosts, must never copy into or
//! run from a directory that user owns or can write, nor go through their
//! symlink; and what it makes is its user's alone.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::lab::Lab;
use crate::util::OtherUser;

/// Mode bits of `path` itself (a symlink's own).
fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_a_remote_directory_another_user_planted_is_refused_and_ours_is_private() {
    let lab = Lab::up(97, 2);
    let sb = lab.controller("200");
    let other = OtherUser::get();
    let var_tmp = lab.var_tmp(1);
    let planted = var_tmp.join("mx");
    let planted_text = planted.display().to_string();
    let start = || lab.mx(&sb, &["start", "--interval", "1"]);
    let refused_with = |run: &crate::util::Run, why: &str| {
        assert_ne!(run.code, 0, "{}", run.stdout);
        let line = format!("  h1  /var/tmp/mx {why} -- choose another --remote-dir");
        assert!(
            run.stdout.contains(&line),
            "want {line:?} in:\n{}",
            run.stdout
        );
        assert!(
            run.stdout.contains("no agent was started"),
            "{}",
            run.stdout
        );
        assert!(lab.agents(1).is_empty() && lab.agents(2).is_empty());
    };

    // 1. An empty directory, open to all, made by the other user first.
    other.run(&["mkdir", "-m", "0777", &planted_text]);
    let run = start();
    refused_with(
        &run,
        &format!(
            "belongs to another user (owner {} (uid {}), mode 0777): whoever owns it could replace the agent",
            other.name, other.uid
        ),
    );
    assert_eq!(entries(&planted), 0, "nothing copied into it");

    // 2. A symlink to an empty directory the other user owns.
    std::fs::remove_dir(&planted).unwrap();
    let theirs = var_tmp.join("theirs");
    other.run(&["mkdir", "-m", "0755", &theirs.display().to_string()]);
    other.run(&["ln", "-s", "theirs", &planted_text]);
    let run = start();
    refused_with(
        &run,
        &format!(
            "is a symlink (owner {} (uid {}), mode 0777): mx never runs through one",
            other.name, other.uid
        ),
    );
    assert_eq!(entries(&theirs), 0, "nothing copied through the link");
    // Nor does clean delete through it, or stop look into it.
    let clean = lab.mx(&sb, &["clean", "--yes"]);
    assert_ne!(clean.code, 0, "{}", clean.stdout);
    assert!(
        clean.stdout.contains("/var/tmp/mx is a symlink"),
        "{}",
        clean.stdout
    );
    assert!(theirs.exists() && std::fs::symlink_metadata(&planted).is_ok());
    std::fs::remove_file(&planted).unwrap();

    // 3. A parent the other user can write (not sticky): the directory could
    //    be swapped under mx, so none is made in it.
    let open = var_tmp.join("open");
    other.run(&["mkdir", "-m", "0777", &open.display().to_string()]);
    let run = lab.mx(
        &sb,
        &[
            "start",
            "--interval",
            "1",
            "--remote-dir",
            "/var/tmp/open/mx",
        ],
    );
    assert_ne!(run.code, 0);
    let line = format!(
        "  h1  /var/tmp/open/mx is not safe: /var/tmp/open (owner {} (uid {}), mode 0777) lets another user replace what is in it -- choose another --remote-dir",
        other.name, other.uid
    );
    assert!(
        run.stdout.contains(&line),
        "want {line:?} in:\n{}",
        run.stdout
    );
    assert_eq!(entries(&open), 0, "nothing made in it");
    // doctor says the same before any start, and what to do.
    let doctor = lab.mx(&sb, &["doctor", "--remote-dir", "/var/tmp/open/mx"]);
    assert_ne!(doctor.code, 0);
    assert!(
        doctor.stdout.contains(
            "[mx] 1 host(s) have a remote directory another user could take over: h1 -- choose another --remote-dir"
        ),
        "{}",
        doctor.stdout
    );
    assert!(!doctor.stdout.contains("fix ssh"), "{}", doctor.stdout);

    // 4. Ours, left at 0755 by an earlier mx on h2: taken and tightened. On
    //    h1 a fresh one. Nothing under either is writable by group or
    //    others; the agent runs from them, as root.
    let earlier = lab.var_tmp(2).join("mx");
    std::fs::create_dir(&earlier).unwrap();
    std::fs::set_permissions(&earlier, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(earlier.join(".mx-remote-dir"), "").unwrap();
    let run = start();
    assert_eq!(run.code, 0, "{}", run.stdout);
    for i in [1, 2] {
        let dir = lab.var_tmp(i).join("mx");
        assert_eq!(mode(&dir), 0o700, "h{i}");
        assert_eq!(lab.agents(i).len(), 1, "h{i} runs its agent");
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            assert_eq!(mode(&path) & 0o022, 0, "{}", path.display());
            // What mx wrote here is private; the earlier mark on h2 is as
            // it was left (0644).
            let want = if path.ends_with("mx") { 0o700 } else { 0o600 };
            if i == 1 {
                assert_eq!(mode(&path), want, "{}", path.display());
            }
            assert_eq!(std::fs::metadata(&path).unwrap().uid(), 0);
            files += 1;
        }
        // mx, matrix.csv, the mark, the log, the report, pid, stamp, start.
        assert!(files >= 6, "h{i}: {files} files");
    }
    lab.stop_and_clean(&sb);
}
