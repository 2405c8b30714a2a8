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
    let mut environment: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for sub in cli.get_subcommands() {
        let name = sub.get_name();
        if name == "help" {
            continue;
        }
        writeln!(out, "{separator}")?;
        let mut sub = sub.clone().bin_name(format!("mx {name}"));
        write!(out, "{}", sub.render_help())?;
        for arg in sub.get_arguments() {
            if let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) {
                environment
                    .entry(var.to_string_lossy().into_owned())
                    .or_default()
                    .push(format!("mx {name} --{long}"));
            }
        }
    }
    writeln!(out, "{separator}")?;
    writeln!(
        out,
        "Environment (a variable set to the empty string counts as unset):"
    )?;
    for (var, uses) in &environment {
        writeln!(out, "  {var:<12} default for {}", uses.join(", "))?;
    }
    Ok(0)
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
