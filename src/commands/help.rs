//! `mx help` (every command and switch on one page) and the bare `mx` screen.
//! Both are rendered from the clap declarations in [`crate::cli`], so the text
//! cannot drift from what the parser accepts.

use std::collections::BTreeMap;
use std::io::Write;

use crate::error::{EXIT_REFUSED, Error, Result};

const SEPARATOR_WIDTH: usize = 74;

/// `mx help`: the top-level help, each sub-command's full help, the environment.
/// `mx help COMMAND`: that command's page alone, as `mx COMMAND --help` prints it.
pub fn run(command: Option<&str>, out: &mut dyn Write) -> Result<u8> {
    if let Some(name) = command {
        return one_command(name, out);
    }
    let mut cli = crate::cli::command();
    cli.build();
    let separator = "=".repeat(SEPARATOR_WIDTH);
    writeln!(
        out,
        "mx {} -- every command, every switch. `mx <command> --help` shows one.",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(out)?;
    write!(out, "{}", cli.render_help())?;
    // Per variable: the switches it is the default of, as the pages above show
    // them; a variable behind hidden switches only (MX_SSH, MX_SCP: the
    // original hides --ssh/--scp too) is described instead, since no page
    // shows a switch to point at.
    let mut environment: BTreeMap<String, (Vec<String>, Option<String>)> = BTreeMap::new();
    for sub in cli.get_subcommands() {
        let name = sub.get_name();
        if name == "help" {
            continue;
        }
        writeln!(out, "{separator}")?;
        let mut sub = sub.clone().bin_name(format!("mx {name}"));
        write!(out, "{}", sub.render_help())?;
        for arg in sub.get_arguments() {
            let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else {
                continue;
            };
            let (uses, description) = environment
                .entry(var.to_string_lossy().into_owned())
                .or_default();
            if arg.is_hide_set() {
                description.get_or_insert_with(|| hidden_variable(arg));
            } else {
                uses.push(format!("mx {name} --{long}"));
            }
        }
    }
    writeln!(out, "{separator}")?;
    writeln!(
        out,
        "Environment (a variable set to the empty string counts as unset):"
    )?;
    let width = environment.keys().map(String::len).max().unwrap_or(0);
    for (var, (uses, description)) in &environment {
        if uses.is_empty() {
            let description = description.as_deref().unwrap_or_default();
            writeln!(out, "  {var:<width$} {description}")?;
        } else {
            writeln!(out, "  {var:<width$} default for {}", uses.join(", "))?;
        }
    }
    Ok(0)
}

/// What a variable behind a hidden switch does, from that switch's help text
/// and default: `the ssh command ...; default: ssh`.
fn hidden_variable(arg: &clap::Arg) -> String {
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    let mut chars = help.chars();
    let help: String = chars
        .next()
        .map(|first| first.to_lowercase().chain(chars).collect())
        .unwrap_or_default();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if defaults.is_empty() {
        help
    } else {
        format!("{help}; default: {}", defaults.join(" "))
    }
}

/// One command's page: the very text `mx <name> --help` prints, rendered by the
/// same parser from the same arguments, so the two cannot differ.
fn one_command(name: &str, out: &mut dyn Write) -> Result<u8> {
    let cli = crate::cli::command();
    if cli.find_subcommand(name).is_none() {
        let names: Vec<&str> = cli.get_subcommands().map(|sub| sub.get_name()).collect();
        return Err(Error::refused(format!(
            "no command '{name}' -- the commands are {} (`mx help` shows them all)",
            names.join(", ")
        )));
    }
    match cli.try_get_matches_from(["mx", name, "--help"]) {
        Err(page) if page.kind() == clap::error::ErrorKind::DisplayHelp => {
            write!(out, "{}", page.render())?;
            Ok(0)
        }
        _ => unreachable!("`mx {name} --help` shows the help page"),
    }
}

/// `mx` with no command: what it is, how to start, where to look. Exit 2.
pub fn no_command(out: &mut dyn Write) -> Result<u8> {
    let mut cli = crate::cli::command();
    write!(out, "{}", cli.render_help())?;
    writeln!(out)?;
    writeln!(
        out,
        "start here:  mx gen --servers servers.txt --pps 20000 && mx run --for 60"
    )?;
    writeln!(out, "stuck?       mx hints        every switch:  mx help")?;
    Ok(EXIT_REFUSED)
}
