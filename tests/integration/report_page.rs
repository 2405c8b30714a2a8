//! `mx report`: the page as a person sees it, in headless Chromium (Debian's
//! `chromium`; `tests/run` installs it). The page loads with the network cut
//! and no console error; each loss heatmap (forward leg, return leg, round
//! trip) has N x N cells, the sick pairs' cells carrying the loss and blank
//! cells hatched (not 0); a drop into a host darkens its forward column and
//! its return row as drawn; the heatmaps take a good part of a 1400 px page
//! as laid out; and the screenshot is not blank. Runs from hand-written
//! reports (quick, any machine with Chromium), one from the lab with 5% of
//! the packets into one host dropped. Checks of the page's words and marks
//! (findings, named hosts, units, intervals left out) read its HTML.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::compare::{HOSTS, noisy, reports, write_run};
use crate::lab::Lab;
use crate::summarize::{dropped_into, mesh_reports, mesh_reports_over, mesh_reports_timed};
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
        .expect("chromium runs (Debian's `chromium`; tests/run installs it)")
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
            "--window-size=1400,2600",
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

/// Which pairs lose: in heatmap `map` (its figure's id), whether pair
/// `src -> dst` is one of the sick.
type Sick<'a> = &'a dyn Fn(&str, &str, &str) -> bool;

/// The checks every page passes: in each loss heatmap (forward leg, return
/// leg, round trip), the pairs `sick` says lose `loss` % (within
/// `tolerance`) and every other pair under `clean`.
fn check_page(
    sb: &Sandbox,
    page: &Path,
    hosts: &[&str],
    sick: Sick<'_>,
    loss: f64,
    tolerance: f64,
    clean: f64,
) {
    let html = std::fs::read_to_string(page).unwrap();
    // Nothing to fetch: no script, stylesheet, image or font from anywhere.
    for fetch in ["src=", "<link", "@import", "url(http", "<script"] {
        assert!(!html.contains(fetch), "{fetch} in the page");
    }
    let shown = render(sb, page);
    for map in [
        "forward_loss_heatmap",
        "return_loss_heatmap",
        "loss_heatmap",
    ] {
        let heatmap = figure(&shown.dom, map);
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
                if sick(map, src, dst) {
                    assert!((value - loss).abs() <= tolerance, "{map}, sick: {t}");
                } else {
                    assert!(value < clean, "{map}: {t}");
                }
            }
        }
    }
    // The findings are on the page, as summarize words them, first.
    let findings = shown
        .dom
        .find("<section id=\"findings\"><h2>What to do next</h2>");
    assert!(findings.is_some_and(|at| at < shown.dom.find("<h2>The run</h2>").unwrap()));
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
    // Requests into d lost, their replies whole: d's column forward and in
    // the round trip, nothing on the way back.
    let into_d = |map: &str, _: &str, dst: &str| map != "return_loss_heatmap" && dst == "d";
    check_page(
        &sb,
        &sb.file("page.html"),
        &hosts,
        &into_d,
        20.0,
        0.05,
        0.05,
    );
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

/// The cells of heatmap `id` in the DOM that are darker than its lightest
/// measured colour, as `src -> dst` (the hover titles).
fn dark_cells(dom: &str, id: &str) -> Vec<String> {
    let heatmap = figure(dom, id);
    let cells: Vec<(String, &str)> = heatmap
        .split("<rect ")
        .filter(|r| r.contains("class=\"cell\""))
        .map(|r| {
            let fill = r
                .split_once("fill=\"")
                .unwrap()
                .1
                .split('"')
                .next()
                .unwrap();
            let title = r
                .split_once("<title>")
                .unwrap()
                .1
                .split(": ")
                .next()
                .unwrap();
            (title.replace("&gt;", ">"), fill)
        })
        .collect();
    let light = "#fff5e1";
    let mut dark: Vec<String> = cells
        .iter()
        .filter(|(_, fill)| *fill != light)
        .map(|(t, _)| t.clone())
        .collect();
    dark.sort();
    dark
}

/// `src -> dst` for each pair of `hosts` whose receiver (`column`) or
/// sender (row) is `host`.
fn line_of(hosts: &[&str], host: &str, column: bool) -> Vec<String> {
    let mut out: Vec<String> = hosts
        .iter()
        .filter(|h| **h != host)
        .map(|h| {
            if column {
                format!("{h} -> {host}")
            } else {
                format!("{host} -> {h}")
            }
        })
        .collect();
    out.sort();
    out
}

/// The rendered layout of the page's figures in a window `width` px wide:
/// each figure's id with its SVG's left, top and width (pixels), and the
/// window's width. Chromium measures a copy of the page with a script that
/// writes what it measured into the DOM (the page itself has no script).
fn layout(sb: &Sandbox, page: &Path, width: u32) -> (Vec<(String, f64, f64, f64)>, f64) {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = "<script>const out=[...document.querySelectorAll('figure')].map(f=>{const r=f.querySelector('svg').getBoundingClientRect();return f.id+' '+r.left+' '+r.top+' '+r.width;});out.push('window '+window.innerWidth);const p=document.createElement('pre');p.id='measured';p.textContent=out.join(';');document.body.appendChild(p);</script></body>";
    let measured = sb.write("measured.html", &html.replace("</body>", probe));
    let out = chromium(
        &[&format!("--window-size={width},2000"), "--dump-dom"],
        &measured,
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    let text = dom
        .split("<pre id=\"measured\">")
        .nth(1)
        .and_then(|t| t.split("</pre>").next())
        .unwrap_or_else(|| panic!("nothing measured: {}", String::from_utf8_lossy(&out.stderr)));
    let mut window = 0.0;
    let mut figures = Vec::new();
    for item in text.split(';') {
        let parts: Vec<&str> = item.split(' ').collect();
        match parts[..] {
            ["window", w] => window = w.parse().unwrap(),
            [id, left, top, w] => figures.push((
                id.to_string(),
                left.parse().unwrap(),
                top.parse().unwrap(),
                w.parse().unwrap(),
            )),
            _ => panic!("{item}"),
        }
    }
    (figures, window)
}

/// At 1400 px the three loss heatmaps of `page` sit side by side, each a
/// good part of the page (not 110 px of it), and the charts over time most
/// of its width.
fn loss_maps_fill_the_page(sb: &Sandbox, page: &Path) {
    let (figures, window) = layout(sb, page, 1400);
    let at = |id: &str| {
        figures
            .iter()
            .find(|f| f.0 == id)
            .unwrap_or_else(|| panic!("no {id} in {figures:?}"))
    };
    let legs = [
        "forward_loss_heatmap",
        "return_loss_heatmap",
        "loss_heatmap",
    ]
    .map(at);
    for (id, left, top, width) in legs {
        assert!(*width >= window * 0.28, "{id}: {width} px of {window}");
        assert!(
            (top - legs[0].2).abs() < 1.0,
            "{id} is on the row: {figures:?}"
        );
        assert!(*left >= legs[0].1, "{id}");
    }
    assert!(at("packets_over_time").3 >= window * 0.6, "{figures:?}");
}

#[test]
fn a_drop_into_a_host_is_its_forward_column_and_return_row_as_chromium_draws_them() {
    let sb = Sandbox::new();
    let hosts = ["a", "b", "c", "d"];
    let (fwd, rep) = dropped_into("d");
    mesh_reports(&hosts, fwd, rep).write(&sb);
    let run = sb.mx(&["report", "--no-collect", "-o", "page.html", "--svg", "svg"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for file in [
        "forward_loss_heatmap.svg",
        "return_loss_heatmap.svg",
        "host_loss_over_time.svg",
    ] {
        assert!(run.stdout.contains(file), "{}", run.stdout);
        assert!(sb.file(&format!("svg/{file}")).exists(), "{file}");
    }
    let page = sb.file("page.html");
    let shown = render(&sb, &page);
    assert_eq!(
        dark_cells(&shown.dom, "forward_loss_heatmap"),
        line_of(&hosts, "d", true)
    );
    assert_eq!(
        dark_cells(&shown.dom, "return_loss_heatmap"),
        line_of(&hosts, "d", false)
    );
    let mut both = line_of(&hosts, "d", true);
    both.extend(line_of(&hosts, "d", false));
    both.sort();
    assert_eq!(dark_cells(&shown.dom, "loss_heatmap"), both);
    loss_maps_fill_the_page(&sb, &page);
}

#[test]
fn the_page_names_the_findings_hosts_in_words_and_pictures_in_readable_units() {
    let sb = Sandbox::new();
    let hosts = ["a", "b", "c", "d"];
    let (fwd, rep) = dropped_into("d");
    // One slow pair: a p99 of 10289 us, said in ms.
    let p99 = |src: &str, dst: &str| {
        if (src, dst) == ("a", "b") {
            10289.0
        } else {
            100.0
        }
    };
    mesh_reports_timed(&[100, 101, 102], &hosts, fwd, rep, p99, |_, _| {}).write(&sb);
    let run = sb.mx(&["report", "--no-collect", "-o", "page.html"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let html = sb.read("page.html");
    // The findings first, each with its blames as chips.
    let findings = html
        .split("<section id=\"findings\">")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .expect("the findings block");
    assert!(
        findings.contains("<li class=\"finding loss\"><p>"),
        "{findings}"
    );
    assert!(
        findings.contains("<span class=\"chip\">d into · "),
        "{findings}"
    );
    // d is named in every heatmap, and outlined where the loss is: its
    // column forward, its row on the way back, both in the round trip.
    for id in [
        "forward_loss_heatmap",
        "return_loss_heatmap",
        "loss_heatmap",
        "delivered_heatmap",
        "rtt_p99_heatmap",
    ] {
        let map = figure(&html, id);
        assert_eq!(map.matches("class=\"named\">d<").count(), 2, "{id}: {map}");
        assert!(!map.contains("class=\"named\">a<"), "{id}");
    }
    let outlines = |id: &str| figure(&html, id).matches("class=\"marked\"").count();
    assert_eq!(outlines("forward_loss_heatmap"), 1);
    assert_eq!(outlines("return_loss_heatmap"), 1);
    assert_eq!(outlines("loss_heatmap"), 2);
    // Units that scale: no microseconds past 9999, RTT in ms.
    let mut rest = html.as_str();
    while let Some(at) = rest.find("us") {
        let digits: String = rest[..at]
            .trim_end()
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect();
        if !digits.is_empty() && rest[at + 2..].starts_with(|c: char| !c.is_alphanumeric()) {
            let value: u64 = digits.chars().rev().collect::<String>().parse().unwrap();
            assert!(value <= 9999, "{value} us in the page");
        }
        rest = &rest[at + 2..];
    }
    let rtt = figure(&html, "rtt_p99_heatmap");
    assert!(rtt.contains("a -&gt; b: 10.3ms</title>"), "{rtt}");
    // Delivered against the target, in percent: 95% into d, 100% elsewhere.
    let delivered = figure(&html, "delivered_heatmap");
    assert!(
        delivered.contains("<title>a -&gt; d: 95.0% of target</title>"),
        "{delivered}"
    );
    assert!(
        delivered.contains("<title>d -&gt; a: 100.0% of target</title>"),
        "{delivered}"
    );
    assert!(
        delivered.contains(">90.0% of target or less<"),
        "{delivered}"
    );
}

#[test]
fn an_interval_a_host_stopped_in_is_left_out_of_the_lines_not_drawn_as_a_dip() {
    // c's agent stopped after interval 103: in 104 and 105 only a, b and d
    // sent, and their flows with c are left out. (Two intervals behind the
    // others: one behind, in reports collected mid-run, is a host that had
    // not written its newest row yet.)
    let sb = Sandbox::new();
    let hosts = ["a", "b", "c", "d"];
    let mut r = mesh_reports_over(
        &[100, 101, 102, 103],
        &hosts,
        |_, _| 1.0,
        |_, _| 0.98,
        |_, _| {},
    );
    let others = ["a", "b", "d"];
    let late = mesh_reports_over(&[104, 105], &others, |_, _| 1.0, |_, _| 0.98, |_, _| {});
    r.extend(late);
    r.write(&sb);
    let run = sb.mx(&["report", "--no-collect", "-o", "page.html"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let html = sb.read("page.html");
    let packets = figure(&html, "packets_over_time");
    assert!(
        packets.contains("left out: c went in it (partial)"),
        "{packets}"
    );
    // Sent and back are against their target, on an axis around them: 98%
    // back is a step, not a line's width off 100%, and 0% is off the axis.
    assert!(packets.contains("% of the target"), "{packets}");
    assert!(!packets.contains(">0.0%<"), "{packets}");
    let back = packets
        .split("<polyline ")
        .find(|l| l.contains("<title>replies back</title>"))
        .expect("the replies line");
    let points = back
        .split_once("points=\"")
        .unwrap()
        .1
        .split('"')
        .next()
        .unwrap();
    assert_eq!(
        points.split_whitespace().count(),
        4,
        "100-103 are a line, 104 is no point: {points}"
    );
    // 105, alone after the gap, is a point of its own.
    assert!(
        packets.contains("<circle ") && packets.contains("<title>replies back</title></circle>"),
        "{packets}"
    );
    // Hosts' lines are a chart of their own, apart from the fleet's legs.
    let fleet = figure(&html, "loss_over_time");
    assert!(
        fleet.contains("<title>forward (requests)</title>"),
        "{fleet}"
    );
    assert!(!fleet.contains("<title>a</title>"), "{fleet}");
    assert!(figure(&html, "host_loss_over_time").contains("<polyline "));
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_lab_report_shows_5_percent_dropped_into_one_host_as_its_forward_column_and_return_row() {
    let lab = Lab::up(132, 4);
    let sb = lab.controller("2000");
    // Every UDP packet entering h2, requests to it and replies to its own
    // requests alike: 5% dropped by its input hook.
    lab.exec(
        2,
        &["nft", "-f", "-"],
        "table inet mxfault {\n  chain c {\n    type filter hook input priority 0;\n    meta l4proto udp numgen random mod 10000 < 500 drop\n  }\n}\n",
    );
    let start = lab.mx(&sb, &["start", "--interval", "1", "--no-gso"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    // Ten steady intervals of 2,000 requests a flow: the 5% shows.
    crate::util::wait_for_steady(&lab.reports(), 10);
    // Collected mid-run: the newest interval may be partial, and is left
    // out of the lines.
    let report = lab.mx(&sb, &["report", "-o", "report.html"]);
    assert_eq!(report.code, 0, "{}{}", report.stdout, report.stderr);
    assert_eq!(lab.mx(&sb, &["stop"]).code, 0);
    assert_eq!(lab.mx(&sb, &["clean", "--yes"]).code, 0);
    let page = sb.file("report.html");
    let into_h2 = |map: &str, src: &str, dst: &str| match map {
        "forward_loss_heatmap" => dst == "h2",
        "return_loss_heatmap" => src == "h2",
        _ => src == "h2" || dst == "h2",
    };
    check_page(
        &sb,
        &page,
        &["h1", "h2", "h3", "h4"],
        &into_h2,
        5.0,
        1.0,
        0.6,
    );
    loss_maps_fill_the_page(&sb, &page);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<span class=\"chip\">h2 into"), "{html}");
    // Kept for a person to look at (the README's picture is this one).
    let keep = std::env::temp_dir().join("mx-lab-report");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::copy(&page, keep.join("report.html")).unwrap();
    std::fs::copy(sb.file("shot.png"), keep.join("report.png")).unwrap();
}
