//! `mx completions SHELL` and `mx man`: the shell completion scripts and the
//! manual pages, generated from the clap declarations in [`crate::cli`]
//! (clap_complete, clap_mangen), so neither can drift from what the parser
//! accepts. Each page adds what clap does not know: EXIT STATUS, the
//! ENVIRONMENT variables its switches read (from the same declarations),
//! SUMMARY COLUMNS (summarize and run) and EXAMPLES.

use std::io::Write;

use crate::cli::{CompletionsArgs, ManArgs};
use crate::error::{Error, Exit, Result};
use crate::files::write_atomically;

/// Prints the completion script for `args.shell`.
pub fn completions(args: &CompletionsArgs, out: &mut dyn Write) -> Result<u8> {
    let mut cli = crate::cli::command();
    clap_complete::generate(args.shell, &mut cli, "mx", out);
    Ok(0)
}

/// Prints mx.1, or writes mx.1 and one mx-COMMAND.1 per command into a
/// directory (each written whole, then renamed into place).
pub fn man(args: &ManArgs, out: &mut dyn Write) -> Result<u8> {
    let mut cli = crate::cli::command();
    cli.build();
    let Some(dir) = &args.output else {
        render(cli, out)?;
        return Ok(0);
    };
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "cannot create", &e))?;
    let mut pages = vec![("mx.1".to_string(), cli.clone())];
    for sub in cli.get_subcommands() {
        let name = sub.get_name();
        pages.push((
            format!("mx-{name}.1"),
            sub.clone()
                .name(format!("mx-{name}"))
                .bin_name(format!("mx {name}")),
        ));
    }
    for (file, page) in pages {
        let path = dir.join(&file);
        write_atomically(&path, |w| render(page, w))?;
        writeln!(out, "[mx] wrote {}", path.display())?;
    }
    Ok(0)
}

/// A few commands as users type them, per page (`mx` for mx.1).
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "mx",
        &[
            ("mx demo", "A whole run on local agents: no ssh, no root."),
            (
                "mx gen --servers servers.txt --pps 10000",
                "Every host sends 10 kpps of requests to every other.",
            ),
            ("mx check --nic-gbps 25", "Will the NICs carry it?"),
            (
                "mx run --for 60",
                "Start the fleet, hold 60 s, summarize, stop.",
            ),
            ("mx clean", "Stop everything and leave no trace."),
        ],
    ),
    (
        "gen",
        &[
            (
                "mx gen --servers servers.txt --pps 20000 --tx-size 64 --rx-size 512",
                "A full mesh at 20 kpps per pair, 64-byte requests, 512-byte replies.",
            ),
            (
                "mx gen --peers 8 --seed 1 --pps 1000",
                "Each host sends to and hears from 8 others (a k-regular shuffle).",
            ),
        ],
    ),
    (
        "check",
        &[(
            "mx check --nic-gbps 25 --nic-mpps 15",
            "Each host's load against a 25 Gb/s, 15 Mpps NIC, each way.",
        )],
    ),
    (
        "hints",
        &[(
            "mx hints --servers servers.txt --pps-per-host 2000000",
            "The settings for 2 Mpps out of every host, with the arithmetic.",
        )],
    ),
    (
        "start",
        &[(
            "mx start --interval 5",
            "Deploy and start every agent; a report row every 5 s.",
        )],
    ),
    (
        "status",
        &[("mx status --watch 5", "A line per host, redrawn every 5 s.")],
    ),
    (
        "summarize",
        &[
            (
                "mx summarize --window 60",
                "Collect the reports and summarize the last 60 s.",
            ),
            (
                "mx summarize --no-collect --json",
                "The reports already in --reports, as one JSON document.",
            ),
        ],
    ),
    (
        "run",
        &[
            (
                "mx run --for 120",
                "A whole run: start, hold 120 s, summarize, stop.",
            ),
            (
                "mx run --for 30 --ramp 0.5:3",
                "Climb from half the matrix's rates to three times, a step at a time.",
            ),
        ],
    ),
    (
        "compare",
        &[(
            "mx compare before/ after/",
            "Two runs' reports side by side, each change with its noise.",
        )],
    ),
    (
        "report",
        &[(
            "mx report -o run.html",
            "One HTML page: the summary, heatmaps, the run over time.",
        )],
    ),
    (
        "doctor",
        &[("mx doctor", "Is every host reachable and ready?")],
    ),
    (
        "stop",
        &[("mx stop", "Stop every agent; reports stay on the hosts.")],
    ),
    (
        "clean",
        &[(
            "mx clean --yes",
            "Stop and remove everything, without asking.",
        )],
    ),
    (
        "reload",
        &[(
            "mx reload",
            "After editing matrix.csv: restart only the hosts it changed.",
        )],
    ),
];

/// `cmd`'s page: clap's sections, then EXIT STATUS, ENVIRONMENT and
/// EXAMPLES, before VERSION.
fn render(cmd: clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let name = cmd
        .get_name()
        .strip_prefix("mx-")
        .unwrap_or("mx")
        .to_string();
    let env = environment(&cmd);
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    let page = String::from_utf8_lossy(&page);
    let ours = sections(&name, &env);
    let at = page.find("\n.SH VERSION").map_or(page.len(), |i| i + 1);
    w.write_all(page[..at].as_bytes())?;
    w.write_all(ours.as_bytes())?;
    w.write_all(page[at..].as_bytes())
}

/// The environment variables `cmd` (and its subcommands) read, each with the
/// switch it stands for and that switch's help, sorted by name.
fn environment(cmd: &clap::Command) -> Vec<(String, String)> {
    let mut found = std::collections::BTreeMap::new();
    let mut commands = vec![cmd];
    while let Some(cmd) = commands.pop() {
        commands.extend(cmd.get_subcommands());
        for arg in cmd.get_arguments() {
            let Some(var) = arg.get_env() else { continue };
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let switch = arg.get_long().map(|l| format!("--{l}")).unwrap_or_default();
            found
                .entry(var.to_string_lossy().into_owned())
                .or_insert_with(|| format!("{switch}: {help}"));
        }
    }
    found.into_iter().collect()
}

/// EXIT STATUS, ENVIRONMENT and EXAMPLES in roff.
fn sections(name: &str, env: &[(String, String)]) -> String {
    use roff::{Roff, bold, roman};
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (exit, meaning) in Exit::MEANINGS {
        let mut sentence = meaning.to_string();
        sentence[..1].make_ascii_uppercase();
        roff.control("TP", [])
            .text([bold(exit.code().to_string())])
            .text([roman(sentence + ".")]);
    }
    if !env.is_empty() {
        roff.control("SH", ["ENVIRONMENT"]);
        for (var, what) in env {
            roff.control("TP", [])
                .text([bold(var.as_str())])
                .text([roman(what.as_str())]);
        }
    }
    if ["summarize", "run"].contains(&name) {
        roff.control("SH", ["SUMMARY COLUMNS"]);
        roff.text([roman(
            "The per-host table of the summary, one row per host, averaged over the steady span:",
        )]);
        for (column, meaning) in crate::summary::render::text::HOST_COLUMNS {
            roff.control("TP", [])
                .text([bold(*column)])
                .text([roman(*meaning)]);
        }
    }
    if let Some((_, examples)) = EXAMPLES.iter().find(|(page, _)| *page == name) {
        roff.control("SH", ["EXAMPLES"]);
        for (command, what) in *examples {
            roff.control("TP", [])
                .text([bold(*command)])
                .text([roman(*what)]);
        }
    }
    // The page already defines the apostrophe string render() prefixes.
    roff.render()
        .lines()
        .skip_while(|line| !line.starts_with(".SH"))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_is_a_command_mx_accepts_on_the_page_it_is_on() {
        let cli = crate::cli::command();
        for (page, examples) in EXAMPLES {
            assert!(
                *page == "mx" || cli.find_subcommand(page).is_some(),
                "{page}"
            );
            for (example, _) in *examples {
                let words = shlex::split(example).unwrap();
                assert!(*page == "mx" || words[1] == *page, "{example} on {page}");
                if let Err(e) = cli.clone().try_get_matches_from(&words) {
                    panic!("{example}: {e}");
                }
            }
        }
    }
}
