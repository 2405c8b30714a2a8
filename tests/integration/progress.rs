//! The live view: `mx run --for N` says how the run goes while it runs, and
//! `status --watch` redraws its look in place, on a terminal (a real
//! pseudo-terminal, util-linux `script`) and as plain lines in a pipe.

use crate::fleet_local::fleet_dir_with;

/// Looks are 5 s apart: a 12 s run has two or more.
const RUN: [&str; 9] = [
    "run",
    "--local",
    "hosts",
    "--for",
    "12",
    "--interval",
    "1",
    "--window",
    "3",
];

/// The live lines' figures: `sent X, back Y, loss Z%` for a clean run.
fn clean_figures(line: &str) -> bool {
    line.contains(" sent ")
        && line.contains(" kpps, back ")
        && line.contains(", loss 0.00%, no host losing")
}

#[test]
fn agent_run_prints_a_live_line_per_look_in_a_pipe() {
    let sb = fleet_dir_with(63, &["h1", "h2"], &["--pps", "1000"]);
    let run = sb.mx(&RUN);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // No terminal: plain lines, no escape codes, one per look.
    assert!(!run.stdout.contains('\x1b'), "{:?}", run.stdout);
    let live: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("[mx] ") && l.contains("s of 12s: "))
        .collect();
    assert!(live.len() >= 2, "{}", run.stdout);
    // Each says the elapsed time, and what the rows say once there are some.
    assert!(live.iter().any(|l| clean_figures(l)), "{live:#?}");
    for line in &live {
        assert!(
            clean_figures(line) || line.ends_with("waiting for the first whole interval's rows"),
            "{line}"
        );
    }
    // Before the summary, not after it.
    let summary = run.stdout.find("mx summarize --").unwrap();
    assert!(run.stdout.find(live[0]).unwrap() < summary);
}

#[test]
fn agent_run_redraws_one_live_line_on_a_terminal() {
    let sb = fleet_dir_with(63, &["h1", "h2"], &["--pps", "1000"]);
    let shown = sb.mx_on_terminal(&RUN, 60);
    assert!(shown.contains("mx summarize -- "), "{shown:?}");
    // indicatif's bar: redrawn in place (carriage return, line cleared),
    // its last state left on the screen at the full length.
    assert!(shown.contains("\r\x1b[2K[mx] "), "{shown:?}");
    assert!(
        shown.contains("[mx] 12s of 12s [===================="),
        "{shown:?}"
    );
    let frames: Vec<&str> = shown.split("\r\x1b[2K").skip(1).collect();
    assert!(frames.len() >= 3, "{shown:?}");
    assert!(
        frames.iter().any(|f| clean_figures(f)),
        "a frame with the rows' figures: {frames:#?}"
    );
    // Not the plain lines of a pipe.
    assert!(!shown.contains("s of 12s: "), "{shown:?}");
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}

#[test]
fn status_watch_redraws_its_look_in_place_on_a_terminal() {
    let sb = fleet_dir_with(63, &["h1", "h2"], &["--pps", "1000"]);
    let shown = sb.mx_on_terminal(&["status", "--local", "hosts", "--watch", "1"], 4);
    assert!(shown.matches("mx status -- ").count() >= 2, "{shown:?}");
    // The look before is taken off the screen line by line (3 lines: the
    // heading and two hosts), not by clearing the whole screen.
    assert!(shown.contains("\x1b[3A"), "{shown:?}");
    assert!(shown.contains("\x1b[2K"), "{shown:?}");
    assert!(!shown.contains("\x1b[2J"), "{shown:?}");
}
