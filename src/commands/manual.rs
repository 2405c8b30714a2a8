//! `mx completions SHELL` and `mx man`: the shell completion scripts and the
//! manual pages, generated from the clap declarations in [`crate::cli`]
//! (clap_complete, clap_mangen), so neither can drift from what the parser
//! accepts.

use std::io::Write;

use crate::cli::{CompletionsArgs, ManArgs};
use crate::error::{Error, Result};
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
        clap_mangen::Man::new(cli).render(out)?;
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
        write_atomically(&path, |w| clap_mangen::Man::new(page).render(w))?;
        writeln!(out, "[mx] wrote {}", path.display())?;
    }
    Ok(0)
}
