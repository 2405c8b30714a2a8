//! `mx demo`: the whole lifecycle (gen, start, status, summarize, report,
//! stop, clean) on a fleet of local agents on 127.77.0.x, through the local
//! transport: no ssh, no root, one command, a summary at the end and the
//! report page left behind. Each step is this very mx run as a user would
//! type it, printed before it runs.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::cli::DemoArgs;
use crate::error::{Error, Result};
use crate::units;

/// The demo's hosts live on 127.77.0.x: loopback, and out of the way of 127.0.0.1.
const DEMO_NET: [u8; 3] = [127, 77, 0];

fn step(out: &mut dyn Write, dir: &Path, args: &[&str]) -> Result<i32> {
    writeln!(out, "\n$ mx {}", args.join(" "))?;
    out.flush()?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::refused(format!("cannot find mx itself: {e}")))?;
    let status = Command::new(exe)
        .args(args)
        .current_dir(dir)
        .env_remove("MX_MATRIX")
        .env_remove("MX_SERVERS")
        .env_remove("MX_REPORTS")
        .env_remove("MX_REMOTE_DIR")
        .status()
        .map_err(|e| Error::refused(format!("cannot run mx: {e}")))?;
    Ok(status.code().unwrap_or(1))
}

pub fn run(args: &DemoArgs, out: &mut dyn Write) -> Result<u8> {
    check(args)?;
    // The directory stays: the report page is what the demo leaves the user.
    let dir = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "cannot create", &e))?;
            dir.clone()
        }
        None => tempfile::Builder::new()
            .prefix("mx-demo-")
            .tempdir()
            .map_err(|e| Error::refused(format!("cannot make a demo directory: {e}")))?
            .keep(),
    };
    let code = lifecycle(args, &dir, out)?;
    let page = dir.join(REPORT_PAGE);
    if page.exists() {
        let path = dir.to_string_lossy();
        let removal = format!("rm -r {}", shlex::try_quote(&path).unwrap_or(path.clone()));
        writeln!(
            out,
            "\n[mx] the demo's report page: {} (open it in a browser); the fleet is gone, its directory stays ({} removes it)",
            page.display(),
            removal
        )?;
    }
    Ok(code)
}

/// The demo's own values, refused before anything starts.
fn check(args: &DemoArgs) -> Result<()> {
    if !(2..=250).contains(&args.hosts) {
        return Err(Error::refused(format!(
            "--hosts must be between 2 and 250 (got {})",
            args.hosts
        )));
    }
    if !(args.seconds >= 4.0 && args.seconds.is_finite()) {
        return Err(Error::refused(format!(
            "--seconds must be at least 4 (got {})",
            units::g(args.seconds)
        )));
    }
    if !(args.pps > 0.0 && args.pps.is_finite()) {
        return Err(Error::refused(format!(
            "--pps must be greater than 0 (got {})",
            units::g(args.pps)
        )));
    }
    Ok(())
}

/// Every step, in `dir`, as a user would type it; the exit status of the
/// first that failed.
fn lifecycle(args: &DemoArgs, dir: &Path, out: &mut dyn Write) -> Result<u8> {
    let servers: String = (1..=args.hosts)
        .map(|i| format!("h{i}={}.{}.{}.{i}\n", DEMO_NET[0], DEMO_NET[1], DEMO_NET[2]))
        .collect();
    std::fs::write(dir.join("servers.txt"), servers)
        .map_err(|e| Error::io(dir, "cannot write servers.txt", &e))?;
    writeln!(
        out,
        "mx demo: {} local hosts on {}.{}.{}.x, {}s of traffic, in {}",
        args.hosts,
        DEMO_NET[0],
        DEMO_NET[1],
        DEMO_NET[2],
        units::g(args.seconds),
        dir.display()
    )?;
    writeln!(
        out,
        "(--local hosts runs every host in its own sandbox directory here, with the same scripts ssh would run; drop it to drive a real fleet)"
    )?;
    let pps = units::g(args.pps);
    let window = units::g((args.seconds - 3.0).floor().max(1.0));
    let local = ["--local", "hosts"];
    let lifecycle: [(Vec<&str>, Option<f64>); 7] = [
        (vec!["gen", "--servers", "servers.txt", "--pps", &pps], None),
        (
            [&["start"][..], &local, &["--interval", "1"]].concat(),
            Some(args.seconds / 2.0),
        ),
        ([&["status"][..], &local].concat(), Some(args.seconds / 2.0)),
        (
            [&["summarize"][..], &local, &["--window", &window]].concat(),
            None,
        ),
        (
            [
                "report",
                "--no-collect",
                "--window",
                &window,
                "-o",
                REPORT_PAGE,
            ]
            .to_vec(),
            None,
        ),
        ([&["stop"][..], &local].concat(), None),
        ([&["clean"][..], &local, &["--yes"]].concat(), None),
    ];
    let mut failed = None;
    for (argv, then_wait) in &lifecycle {
        let code = step(out, dir, argv)?;
        if code != 0 && failed.is_none() {
            failed = Some(code);
            if argv[0] == "gen" || argv[0] == "start" {
                // Nothing to measure: clean up what may have started, and stop.
                step(out, dir, &[&["clean"][..], &local, &["--yes"]].concat())?;
                break;
            }
        }
        if let Some(seconds) = then_wait {
            std::thread::sleep(Duration::from_secs_f64(*seconds));
        }
    }
    Ok(failed.map_or(0, |c| c.clamp(1, 255) as u8))
}

/// The page `mx demo` leaves in its directory.
const REPORT_PAGE: &str = "report.html";
