//! clap's refusals as mx's: one line, `mx: gen --pps: negative packet rate
//! '-5'`, naming the command, the flag and the value, exit status 2, as
//! every other refusal of mx is. clap would print three lines or more (its
//! error, a tip, the usage) and a hint to `--help`; the usage is one
//! `mx <command> --help` away, and the line says so where it helps.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The one line for clap's error `e` over the command line `argv`
/// (`mx gen --pps -5`), without the `mx: ` prefix.
pub fn refusal_line(e: &clap::Error, argv: &[String]) -> String {
    let command = command_of(argv);
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => Some(v.join(", ")),
        Some(ContextValue::StyledStr(s)) => Some(s.to_string()),
        _ => None,
    };
    let flag = text(ContextKind::InvalidArg).map(|a| flag_name(&a));
    let value = text(ContextKind::InvalidValue);
    let suggested = text(ContextKind::SuggestedArg)
        .or_else(|| text(ContextKind::SuggestedSubcommand))
        .map(|s| format!(" (did you mean '{s}'?)"))
        .unwrap_or_default();
    let help = format!("`{command} --help` lists them");
    let at = |flag: &str| format!("{} {flag}", command.trim_start_matches("mx ").trim());
    match (e.kind(), flag) {
        (ErrorKind::ValueValidation, Some(flag)) => {
            let why = std::error::Error::source(e)
                .map(|s| s.to_string())
                .unwrap_or_default();
            let value = value.unwrap_or_default();
            format!("{}: {}", at(&flag).trim(), reason(&why, &value))
        }
        (ErrorKind::InvalidValue, Some(flag)) => {
            let value = value.unwrap_or_default();
            match text(ContextKind::ValidValue) {
                Some(valid) => format!("{}: '{value}': want one of {valid}", at(&flag).trim()),
                None => format!("{}: '{value}' is not a value it takes", at(&flag).trim()),
            }
        }
        (ErrorKind::UnknownArgument, Some(flag)) => {
            format!(
                "{}: no option '{flag}'{suggested} -- {help}",
                scope(&command)
            )
        }
        (ErrorKind::InvalidSubcommand, _) => format!(
            "no command '{}'{suggested} -- `mx help` lists them",
            text(ContextKind::InvalidSubcommand).unwrap_or_default()
        ),
        (ErrorKind::MissingRequiredArgument, _) => format!(
            "{}: {} must be given -- {help}",
            scope(&command),
            text(ContextKind::InvalidArg)
                .map(|a| flag_name(&a))
                .unwrap_or_default()
        ),
        (ErrorKind::ArgumentConflict, Some(flag)) => format!(
            "{}: {flag} cannot be given with {}",
            scope(&command),
            text(ContextKind::PriorArg)
                .map(|a| flag_name(&a))
                .unwrap_or_else(|| "another of its options".to_string())
        ),
        _ => {
            // Any other: clap's own first line, without its "error: ".
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            format!(
                "{}: {} -- {help}",
                scope(&command),
                first.trim_start_matches("error: ")
            )
        }
    }
}

/// `mx gen`: the command `argv` names (its first word that is one), or
/// `mx` when it names none.
fn command_of(argv: &[String]) -> String {
    let cli = super::command();
    let known: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
    argv.iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|a| known.contains(&a.as_str()))
        .map_or_else(|| "mx".to_string(), |c| format!("mx {c}"))
}

/// The command's words without the leading `mx` (`gen`), or `mx` itself.
fn scope(command: &str) -> String {
    match command.strip_prefix("mx ") {
        Some(rest) => rest.to_string(),
        None => command.to_string(),
    }
}

/// `--pps <N|max>` -> `--pps`.
fn flag_name(arg: &str) -> String {
    arg.split_whitespace().next().unwrap_or(arg).to_string()
}

/// What was wrong with `value`, in words: a validator's own message as it
/// is; the standard parsers' terse ones said whole.
fn reason(why: &str, value: &str) -> String {
    match why {
        "invalid float literal" => format!("'{value}' is not a number"),
        "invalid digit found in string" => format!("'{value}' is not a whole number"),
        "number too large to fit in target type" | "number too small to fit in target type" => {
            format!("'{value}' is out of range")
        }
        "cannot parse integer from empty string" | "cannot parse float from empty string" => {
            "an empty value".to_string()
        }
        _ if why.is_empty() => format!("'{value}' is not a value it takes"),
        _ => why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(argv: &[&str]) -> String {
        let e = crate::cli::command()
            .try_get_matches_from(argv)
            .expect_err("refused");
        let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        refusal_line(&e, &argv)
    }

    #[test]
    fn each_refusal_is_one_line_naming_the_command_the_flag_and_the_value() {
        let cases: [(&[&str], &str); 7] = [
            (
                &["mx", "gen", "--pps", "-5"],
                "gen --pps: negative packet rate '-5'",
            ),
            (
                &["mx", "start", "--interval", "abc"],
                "start --interval: 'abc' is not a number",
            ),
            (
                &["mx", "run", "--for", "-1"],
                "run --for: negative duration '-1'",
            ),
            (
                &["mx", "status", "--watch", "-1"],
                "status --watch: negative duration '-1'",
            ),
            (
                &["mx", "check", "--nic-gbps", "-1"],
                "check --nic-gbps: negative rate '-1'",
            ),
            (
                &["mx", "gen", "--ppps", "5"],
                "gen: no option '--ppps' (did you mean '--pps'?) -- `mx gen --help` lists them",
            ),
            (&["mx", "frob"], "no command 'frob' -- `mx help` lists them"),
        ];
        for (argv, want) in cases {
            let got = refusal(argv);
            assert_eq!(got, want, "{argv:?}");
            assert!(!got.contains('\n'), "{got}");
        }
        // A validator that names its flag keeps its words.
        assert!(
            refusal(&["mx", "gen", "--dscp", "XX"]).starts_with("gen --dscp: --dscp wants 0..63"),
            "{}",
            refusal(&["mx", "gen", "--dscp", "XX"])
        );
    }
}
