//! The `mx` binary: parse the command line, run the command, map the outcome to
//! the exit-code contract of [`matrix_orchestrator::error`].

#![forbid(unsafe_code)]

use std::io::{self, Write};
use std::process::ExitCode;

use clap::FromArgMatches;
use matrix_orchestrator::cli::{self, Cli, Command};
use matrix_orchestrator::commands::{
    agent, check, clean, collect, compare, demo, doctor, export, generate, help, hints, logs,
    manual, monitor, reload, report, run, start, status, stop, summarize, trace,
};
use matrix_orchestrator::error::{EXIT_REFUSED, Result};

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = run(cli.command, &mut out).and_then(|code| {
        out.flush()?;
        Ok(code)
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            eprintln!("mx: {e}");
            ExitCode::from(e.code())
        }
    }
}

fn run(command: Option<Command>, out: &mut dyn Write) -> Result<u8> {
    match command {
        None => help::no_command(out),
        Some(Command::Gen(args)) => generate::run(&args, out),
        Some(Command::Check(args)) => check::run(&args, out),
        Some(Command::Hints(args)) => hints::run(&args, out),
        Some(Command::Agent(args)) => agent::run(&args),
        Some(Command::Summarize(args)) => summarize::run(&args, out),
        Some(Command::Export(args)) => export::run(&args, out),
        Some(Command::Compare(args)) => compare::run(&args, out),
        Some(Command::Report(args)) => report::run(&args, out),
        Some(Command::Start(args)) => start::run(&args, out),
        Some(Command::Status(args)) => status::run(&args, out),
        Some(Command::Stop(args)) => stop::run(&args, out),
        Some(Command::Clean(args)) => clean::run(&args, out),
        Some(Command::Reload(args)) => reload::run(&args, out),
        Some(Command::Doctor(args)) => doctor::run(&args, out),
        Some(Command::Logs(args)) => logs::run(&args, out),
        Some(Command::Collect(args)) => collect::run(&args, out),
        Some(Command::Trace(args)) => trace::run(&args, out),
        Some(Command::Monitor(args)) => monitor::run(&args, out),
        Some(Command::Run(args)) => run::run(&args, out),
        Some(Command::Demo(args)) => demo::run(&args, out),
        Some(Command::Help(args)) => help::run(args.command.as_deref(), out),
        Some(Command::Completions(args)) => manual::completions(&args, out),
        Some(Command::Man(args)) => manual::man(&args, out),
    }
}

/// The command line, or the exit status of a usage error (printed as mx's
/// one line, `mx: gen --pps: negative packet rate '-5'`) or of
/// `--help`/`--version`.
fn parse() -> std::result::Result<Cli, ExitCode> {
    let parsed = cli::command()
        .try_get_matches()
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    match parsed {
        Ok((cli, matches)) => {
            if cli::python_on_command_line(&matches) {
                eprintln!("mx: {}", cli::PYTHON_IGNORED);
            }
            Ok(cli)
        }
        Err(e) if e.use_stderr() => {
            let argv: Vec<String> = std::env::args().collect();
            eprintln!("mx: {}", cli::refusal_line(&e, &argv));
            Err(ExitCode::from(EXIT_REFUSED))
        }
        Err(e) => e.exit(),
    }
}
