//! `mx report`: the page as a person sees it, in headless Chromium (Debian's
//! `chromium`; `.ci/run` installs it). The page loads with the network cut
//! and no console error, the loss heatmap has N x N cells with the sick
//! column's cells carrying the loss and blank cells hatched (not 0), and the
//! screenshot is not blank. One run from hand-written reports (quick, any
//! machine with Chromium), one from the lab with 5% dropped into one host.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::compare::{HOSTS, noisy, reports, write_run};
use crate::lab::Lab;
use crate::summarize::mesh_reports;
use crate::util::Sandbox;

/// Chromium, headless, with every network request failing: what the page
/// needs must be in the file.
fn chromium(args: &[&str], page: &Path) -> std::process::Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs (Debian's `chromium`; .ci/run installs it)")
}

/// The console's complaints in Chromium's log.
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught") || l.contains("ERR_"))
        .collect()
}

/// What Chromium made of the page: its DOM after loading, and a screenshot.
struct Rendered {
    dom: String,
    png: PathBuf,
}

fn render(sb: &Sandbox, page: &Path) -> Rendered {
    let dom = chromium(&["--dump-dom"], page);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let stderr = String::from_utf8_lossy(&dom.stderr).to_string();
    assert_eq!(console_errors(&stderr), Vec::<&str>::new(), "{stderr}");
    let png = sb.file("shot.png");
    let shot = chromium(
        &[
            "--window-size=1100,2400",
            &format!("--screenshot={}", png.display()),
        ],
        page,
    );
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    Rendered {
        dom: String::from_utf8(dom.stdout).unwrap(),
        png,
    }
}

/// The `<figure>` of picture `id` in the DOM.
fn figure<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<figure id=\"{id}\""))
        .unwrap_or_else(|| panic!("no figure {id}"));
    let end = start + dom[start..].find("</figure>").unwrap();
    &dom[start..end]
}

/// The loss heatmap's cells: (title, data-value) of each, in drawing order.
fn cells(heatmap: &str) -> Vec<(String, Option<f64>)> {
    heatmap
        .split("<rect ")
        .skip(1)
        .filter(|r| r.contains("class=\"cell") || r.contains("class=\"self\""))
        .map(|r| {
            let value = r
                .split_once("data-value=\"")
                .and_then(|(_, v)| v.split('"').next()?.parse().ok());
            let title = r.split_once("<title>").map_or(String::new(), |(_, t)| {
                t.split("</title>").next().unwrap().to_string()
            });
            (title, value)
        })
        .collect()
}

/// The screenshot holds a picture: many colours, much of it not white.
fn not_blank(png: &Path) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let colours: std::collections::HashSet<&[u8]> = pixels.iter().copied().collect();
    let inked = pixels
        .iter()
        .filter(|p| p[..3].iter().any(|&c| c < 200))
        .count();
    assert!(colours.len() > 50, "{} colours", colours.len());
    assert!(
        inked * 100 > pixels.len(),
        "{inked} of {} pixels inked",
        pixels.len()
    );
}

/// The checks every page passes, with `sick` the host whose column loses
/// `loss` % (within `tolerance`) and every other pair under `clean`.
fn check_page(
    sb: &Sandbox,
    page: &Path,
    hosts: &[&str],
    sick: &str,
    loss: f64,
    tolerance: f64,
    clean: f64,
) {
    let html = std::fs::read_to_string(page).unwrap();
    // Nothing to fetch: no script, stylesheet, image or font from anywhere.
    for fetch in ["src=", "<link", "@import", "url(http"] {
        assert!(!html.contains(fetch), "{fetch} in the page");
    }
    let shown = render(sb, page);
    let heatmap = figure(&shown.dom, "loss_heatmap");
    let cells = cells(heatmap);
    let n = hosts.len();
    assert_eq!(cells.len(), n * n, "{heatmap}");
    for src in hosts {
        for dst in hosts.iter().filter(|d| *d != src) {
            let title = format!("{src} -&gt; {dst}: ");
            let (t, value) = cells
                .iter()
                .find(|(t, _)| t.starts_with(&title))
                .unwrap_or_else(|| panic!("no cell {title}"));
            let value = value.unwrap_or_else(|| panic!("{t}: measured, so not blank"));
            assert!(t.ends_with("% lost"), "{t}");
            if *dst == sick {
                assert!((value - loss).abs() <= tolerance, "the sick column: {t}");
            } else {
                assert!(value < clean, "{t}");
            }
        }
    }
    // The summary's words are on the page, as summarize prints them.
    assert!(shown.dom.contains("WHAT TO DO NEXT"));
    not_blank(&shown.png);
}

#[test]
fn a_report_of_a_sick_receiver_shows_its_column() {
    let sb = Sandbox::new();
    let hosts = ["a", "b", "c", "d"];
    let into_d = |_: &str, dst: &str| if dst == "d" { 0.8 } else { 1.0 };
    mesh_reports(&hosts, into_d, into_d).write(&sb);
    let run = sb.mx(&["report", "--no-collect", "-o", "page.html", "--svg", "svg"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("[mx] wrote page.html ("),
        "{}",
        run.stdout
    );
    check_page(&sb, &sb.file("page.html"), &hosts, "d", 20.0, 0.05, 0.05);
    // Each picture is its own SVG file too.
    let svg = sb.read("svg/loss_heatmap.svg");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.contains("a -&gt; d: 20.0 % lost"), "{svg}");
    for file in [
        "delivered_heatmap.svg",
        "rtt_p99_heatmap.svg",
        "packets_over_time.svg",
        "loss_over_time.svg",
    ] {
        assert!(sb.file(&format!("svg/{file}")).exists(), "{file}");
    }
}

#[test]
fn a_report_compared_with_an_earlier_run_shows_each_change_and_its_verdict() {
    let sb = Sandbox::new();
    write_run(&sb, "before", &reports(&HOSTS, noisy));
    // This run: 5% of every flow's replies lost.
    write_run(
        &sb,
        "reports",
        &reports(&HOSTS, |s, d, ts| noisy(s, d, ts) * 0.95),
    );
    let run = sb.mx(&[
        "report",
        "--no-collect",
        "--compare",
        "before",
        "-o",
        "page.html",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let shown = render(&sb, &sb.file("page.html"));
    let fleet = shown
        .dom
        .split("<table class=\"change\" id=\"fleet\">")
        .nth(1)
        .expect("the fleet's table")
        .split("</table>")
        .next()
        .unwrap();
    let row = |figure: &str| {
        fleet
            .split("<tr>")
            .find(|r| r.starts_with(&format!("<td>{figure}</td>")))
            .unwrap_or_else(|| panic!("no row {figure}: {fleet}"))
    };
    assert!(
        row("loss").contains("<td>+5.00 pts, 95% "),
        "{}",
        row("loss")
    );
    assert!(row("loss").contains("<td class=\"worse\">worse</td>"));
    assert!(row("requests").contains("<td class=\"\">within noise</td>"));
    assert!(
        shown
            .dom
            .contains("mx compare -- A: before (8 intervals of 1s), B: this run (reports)")
    );
    // A run of another shape is refused, nothing written.
    write_run(&sb, "three", &reports(&HOSTS[..3], noisy));
    let refused = sb.mx(&[
        "report",
        "--no-collect",
        "--compare",
        "three",
        "-o",
        "other.html",
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("runs of different shapes"),
        "{}",
        refused.stderr
    );
    assert!(!sb.file("other.html").exists());
}

#[test]
fn a_report_of_1000_hosts_stays_readable_and_a_few_mb() {
    // 1,000 hosts in a ring, each sending to its next two, 4 intervals.
    let names: Vec<String> = (1..=1000).map(|i| format!("h{i:04}")).collect();
    let mut r = crate::summarize::Reports::default();
    for ts in 100..104 {
        for (i, src) in names.iter().enumerate() {
            for step in 1..=2 {
                let dst = &names[(i + step) % names.len()];
                r.tx(ts, src, dst, Some(1000.0), 1000.0, 1000.0, 50.0, 100.0);
                r.rx(ts, dst, src, 1000.0, 1000.0);
            }
            r.host(ts, src, 2000.0, 2000.0, 2000.0, 10.0, 20.0, 5.0, 2);
        }
    }
    let sb = Sandbox::new();
    r.write(&sb);
    let run = sb.mx(&["report", "--no-collect", "-o", "page.html"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let html = sb.read("page.html");
    assert!(html.len() < 5_000_000, "{} bytes", html.len());
    println!("a 1,000-host page: {} bytes", html.len());
    // The heatmaps are aggregated, and say so.
    let heatmap = figure(&html, "loss_heatmap");
    let drawn = heatmap.matches("class=\"cell").count();
    assert!((1000..=3600).contains(&drawn), "{drawn} cells");
    assert!(heatmap.contains("groups of"), "{heatmap}");
}

#[test]
fn the_console_check_catches_a_script_error() {
    // The check above can fail: a page whose script throws is caught.
    let sb = Sandbox::new();
    let page = sb.write(
        "bad.html",
        "<!DOCTYPE html><p>x</p><script>nosuch();</script>",
    );
    let out = chromium(&["--dump-dom"], &page);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!console_errors(&stderr).is_empty(), "{stderr}");
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_report_shows_5_percent_dropped_into_one_host_as_its_column() {
    let lab = Lab::up(97, 4);
    let sb = lab.controller("2000");
    // Requests entering h2 (to the agents' port): 5% dropped by its input hook.
    lab.exec(
        2,
        &["nft", "-f", "-"],
        "table inet mxfault {\n  chain c {\n    type filter hook input priority 0;\n    udp dport 5300 numgen random mod 10000 < 500 drop\n  }\n}\n",
    );
    let start = lab.mx(&sb, &["start", "--interval", "1", "--no-gso"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    std::thread::sleep(std::time::Duration::from_secs(12));
    let report = lab.mx(&sb, &["report", "-o", "report.html"]);
    assert_eq!(report.code, 0, "{}{}", report.stdout, report.stderr);
    assert_eq!(lab.mx(&sb, &["stop"]).code, 0);
    assert_eq!(lab.mx(&sb, &["clean", "--yes"]).code, 0);
    let page = sb.file("report.html");
    check_page(&sb, &page, &["h1", "h2", "h3", "h4"], "h2", 5.0, 1.0, 0.6);
    // Kept for a person to look at (the README's picture is one of these).
    let keep = std::env::temp_dir().join("mx-lab-report");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::copy(&page, keep.join("report.html")).unwrap();
    std::fs::copy(sb.file("shot.png"), keep.join("report.png")).unwrap();
}
