//! `prometheus.yml`: a Prometheus that scrapes the fleet's targets and
//! evaluates its rules, as a whole config (or the part to merge into one).

use super::Settings;
use super::yaml::Yaml;

/// The config, its paths beside it: `targets.json` and `rules.yml`.
pub(crate) fn prometheus_yml(s: &Settings) -> String {
    let doc = Yaml::Map(vec![
        (
            "global",
            Yaml::Map(vec![
                ("scrape_interval", Yaml::str(s.scrape_interval.clone())),
                ("evaluation_interval", Yaml::str(s.scrape_interval.clone())),
            ]),
        ),
        ("rule_files", Yaml::List(vec![Yaml::str("rules.yml")])),
        (
            "scrape_configs",
            Yaml::List(vec![Yaml::Map(vec![
                ("job_name", Yaml::str(s.job.clone())),
                (
                    "file_sd_configs",
                    Yaml::List(vec![Yaml::Map(vec![(
                        "files",
                        Yaml::List(vec![Yaml::str("targets.json")]),
                    )])]),
                ),
            ])]),
        ),
    ]);
    format!(
        "# Written by mx monitor: scrape the fleet (targets.json) every {}, with its rules (rules.yml).\n# Paths are read beside this file; to merge into your own, copy the job and the rule file.\n{}",
        s.scrape_interval,
        doc.render()
    )
}
