//! `mx monitor`: the files that wire an always-on fleet (`mx start
//! --metrics PORT`) into Prometheus and Grafana, written from the matrix
//! ([`crate::monitor`]), each whole (a temp file renamed).

use std::io::Write;

use crate::agent::config::MetricsAt;
use crate::cli::MonitorArgs;
use crate::error::{Error, Result};
use crate::files::write_atomically;
use crate::matrix::Matrix;
use crate::monitor::{self, Settings, dashboard, rules, targets};
use crate::units;

pub fn run(args: &MonitorArgs, out: &mut dyn Write) -> Result<u8> {
    let settings = settings(args)?;
    let matrix = Matrix::load(&args.matrix)?;
    std::fs::create_dir_all(&args.dir).map_err(|e| Error::io(&args.dir, "cannot create", &e))?;
    let source = args.matrix.display().to_string();
    let files: [(&str, String, String); 4] = [
        (
            "targets.json",
            targets::file_sd(&matrix, settings.port),
            format!(
                "{} targets (file_sd), labelled mx_host",
                matrix.host_count()
            ),
        ),
        (
            "rules.yml",
            rules::rules_yml(&settings, &source),
            format!(
                "each leg's loss as its sender counts it, per pair and into and out of each host, over {}; one alert per fault (into, out of, between) over {}% (and {} packets) for {}, an agent gone, RTT p99 over {}",
                settings.window,
                units::g(settings.loss_ratio * 100.0),
                settings.min_lost,
                settings.alert_for,
                args.rtt_p99
            ),
        ),
        (
            "prometheus.yml",
            monitor::config::prometheus_yml(&settings),
            format!(
                "scrapes targets.json every {} with rules.yml",
                settings.scrape_interval
            ),
        ),
        (
            "dashboard.json",
            dashboard::dashboard_json(&settings),
            "Grafana: loss sender x receiver, into and out of each host, RTT, duplicates"
                .to_string(),
        ),
    ];
    writeln!(
        out,
        "mx monitor -- {source}: {} hosts, {} flows; the agents serve /metrics on port {}",
        matrix.host_count(),
        matrix.flow_count(),
        settings.port
    )?;
    for (name, text, what) in &files {
        let path = args.dir.join(name);
        write_atomically(&path, |f| f.write_all(text.as_bytes()))?;
        writeln!(out, "  wrote {:<28} {what}", path.display())?;
    }
    let (most, all) = targets::series(&matrix);
    writeln!(
        out,
        "  series: at most {most} a host, {all} in all (docs/always-on.md says what one Prometheus holds)"
    )?;
    let config = args.dir.join("prometheus.yml");
    writeln!(out, "[mx] next: promtool check config {}", config.display())?;
    writeln!(
        out,
        "[mx]       prometheus --config.file={}",
        config.display()
    )?;
    // The agents serve only when started with --metrics (their flags are
    // stamped: a running fleet started without it is started again).
    let local = std::env::var("MX_LOCAL")
        .ok()
        .filter(|dir| !dir.is_empty())
        .map(|dir| format!(" --local {}", shlex::try_quote(&dir).unwrap_or_default()))
        .unwrap_or_default();
    writeln!(
        out,
        "[mx]       the agents serve /metrics when started with it: mx start{local} --interval 5 --metrics {} (a fleet running without it: mx stop{local} first)",
        args.metrics
    )?;
    Ok(0)
}

/// The flags, checked: one line naming the value at fault.
fn settings(args: &MonitorArgs) -> Result<Settings> {
    let port = match super::agent::metrics_addr(&args.metrics)? {
        MetricsAt::Port(port) => port,
        MetricsAt::Addr(addr) => addr.port(),
    };
    let duration = |flag: &str, text: &str| {
        monitor::duration_seconds(text)
            .map(|seconds| (text.trim().to_string(), seconds))
            .map_err(|why| Error::refused(format!("{flag} {why}")))
    };
    let (window, window_s) = duration("--window", &args.window)?;
    let (alert_for, _) = duration("--alert-for", &args.alert_for)?;
    let (scrape_interval, scrape_s) = duration("--scrape-interval", &args.scrape_interval)?;
    if window_s < 4.0 * scrape_s {
        return Err(Error::refused(format!(
            "--window {window} holds fewer than 4 scrapes at --scrape-interval {scrape_interval}: a rate over it would rest on one or two samples -- give a window of at least {}s",
            units::g(4.0 * scrape_s)
        )));
    }
    let rtt_p99_us = crate::summary::ramp::parse_micros(&args.rtt_p99).ok_or_else(|| {
        Error::refused(format!(
            "--rtt-p99 '{}': want a positive duration with its unit: 800us, 5ms, 0.2s",
            args.rtt_p99
        ))
    })?;
    Ok(Settings {
        port,
        loss_ratio: args.loss_pct / 100.0,
        min_lost: args.min_lost,
        alert_for,
        rtt_p99_seconds: rtt_p99_us / 1e6,
        window,
        scrape_interval,
        job: "mx".to_string(),
    })
}
