//! The flags of the pages mx prints about itself: `mx help`, `mx man` and
//! `mx completions`.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (elvish and powershell too)
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write mx.1 and mx-COMMAND.1 for every command into DIR instead of printing mx.1
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct HelpArgs {
    /// Show only this command's page, as `mx COMMAND --help` does
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}
