//! The usage line argparse would print (`usage: mx start [-h] [--matrix FILE]
//! ...`), generated from the clap declarations so that every help page opens
//! as the original's did.

/// argparse's usage width: an 80-column terminal less its 2-column margin.
const USAGE_WIDTH: usize = 78;

/// `cmd`'s usage as argparse writes it, without the `usage: ` prefix: `-h`, then
/// each visible switch in declaration order (`[--matrix FILE]`, `[-y]`, required
/// ones bare, switches that conflict as `[--pps N|max | --gbps G]`), then the
/// positionals and the sub-commands (`{gen,check,...} ...`); wrapped to 78
/// columns under the first switch, as argparse does.
pub fn argparse_usage(prog: &str, cmd: &clap::Command) -> String {
    let visible: Vec<&clap::Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
    // Conflicts are declared on one side; a group is the same from either.
    let partners = |arg: &clap::Arg| -> Vec<&clap::Arg> {
        visible
            .iter()
            .copied()
            .filter(|other| other.get_id() != arg.get_id() && !other.is_positional())
            .filter(|other| {
                let conflicts = |a: &clap::Arg, b: &clap::Arg| {
                    cmd.get_arg_conflicts_with(a)
                        .iter()
                        .any(|c| c.get_id() == b.get_id())
                };
                conflicts(arg, other) || conflicts(other, arg)
            })
            .collect()
    };
    let mut options: Vec<String> = Vec::new();
    if !cmd.is_disable_help_flag_set() {
        options.push("[-h]".to_string());
    }
    if cmd.get_version().is_some() && !cmd.is_disable_version_flag_set() {
        options.push("[-V]".to_string());
    }
    let mut placed: Vec<&clap::Id> = Vec::new();
    for arg in visible.iter().filter(|a| !a.is_positional()) {
        if placed.contains(&arg.get_id()) {
            continue;
        }
        let mut group = vec![*arg];
        group.extend(partners(arg));
        group.retain(|a| !placed.contains(&a.get_id()));
        placed.extend(group.iter().map(|a| a.get_id()));
        let text = group
            .iter()
            .map(|a| switch_usage(a))
            .collect::<Vec<_>>()
            .join(" | ");
        if group.len() == 1 && arg.is_required_set() {
            options.push(text);
        } else {
            options.push(format!("[{text}]"));
        }
    }
    let mut positionals: Vec<String> = visible
        .iter()
        .filter(|a| a.is_positional())
        .map(|a| {
            let name = value_names(a);
            if a.is_required_set() {
                name
            } else {
                format!("[{name}]")
            }
        })
        .collect();
    let commands: Vec<&str> = cmd
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .map(|sub| sub.get_name())
        .collect();
    if !commands.is_empty() {
        positionals.push(format!("{{{}}}", commands.join(",")));
        positionals.push("...".to_string());
    }
    wrap_usage(prog, &options, &positionals)
}

/// One switch as argparse shows it: its first option string (the short one when
/// there is one), then its value names.
fn switch_usage(arg: &clap::Arg) -> String {
    let flag = match (arg.get_short(), arg.get_long()) {
        (Some(short), _) => format!("-{short}"),
        (None, Some(long)) => format!("--{long}"),
        (None, None) => arg.get_id().to_string(),
    };
    let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    if arg.get_action().takes_values() && optional {
        // argparse's nargs='?': the value may be left out.
        format!("{flag} [{}]", value_names(arg))
    } else if arg.get_action().takes_values() {
        format!("{flag} {}", value_names(arg))
    } else {
        flag
    }
}

fn value_names(arg: &clap::Arg) -> String {
    match arg.get_value_names() {
        Some(names) if !names.is_empty() => names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        _ => arg.get_id().as_str().to_uppercase(),
    }
}

/// argparse's `_format_usage` wrapping: when `usage: prog parts` is too wide, the
/// parts continue on lines indented under the first one (or, for a long prog,
/// under the prog itself).
fn wrap_usage(prog: &str, options: &[String], positionals: &[String]) -> String {
    const PREFIX: &str = "usage: ";
    let all: Vec<&str> = std::iter::once(prog)
        .chain(options.iter().map(String::as_str))
        .chain(positionals.iter().map(String::as_str))
        .collect();
    let one_line = all.join(" ");
    if PREFIX.len() + one_line.len() <= USAGE_WIDTH {
        return one_line;
    }
    // Lines of `parts`, each starting at column `indent` (the first one after
    // the prefix when `first` is its width).
    let lines_of = |parts: &[&str], indent: usize, first: Option<usize>| -> Vec<String> {
        let mut lines = Vec::new();
        let mut line: Vec<&str> = Vec::new();
        let mut len = first.unwrap_or(indent).saturating_sub(1);
        for part in parts {
            if len + 1 + part.len() > USAGE_WIDTH && !line.is_empty() {
                lines.push(line.join(" "));
                line.clear();
                len = indent.saturating_sub(1);
            }
            line.push(part);
            len += part.len() + 1;
        }
        if !line.is_empty() {
            lines.push(line.join(" "));
        }
        lines
    };
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let positionals: Vec<&str> = positionals.iter().map(String::as_str).collect();
    let (indent, mut lines) = if (PREFIX.len() + prog.len()) as f64 <= 0.75 * USAGE_WIDTH as f64 {
        let indent = PREFIX.len() + prog.len() + 1;
        let mut head = vec![prog];
        let lines = if options.is_empty() {
            head.extend(&positionals);
            lines_of(&head, indent, Some(PREFIX.len()))
        } else {
            head.extend(&options);
            let mut lines = lines_of(&head, indent, Some(PREFIX.len()));
            lines.extend(lines_of(&positionals, indent, None));
            lines
        };
        (indent, lines)
    } else {
        let indent = PREFIX.len();
        let mut lines = vec![prog.to_string()];
        lines.extend(lines_of(&options, indent, None));
        lines.extend(lines_of(&positionals, indent, None));
        (indent, lines)
    };
    let pad = " ".repeat(indent);
    for line in lines.iter_mut().skip(1) {
        line.insert_str(0, &pad);
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command;

    #[test]
    fn usage_lines_are_argparse_style() {
        let cli = command();
        let clean = cli.find_subcommand("clean").unwrap();
        let usage = argparse_usage("mx clean", clean);
        assert!(
            usage.starts_with("mx clean [-h] [--matrix FILE] [--user USER] [--jobs N]"),
            "{usage}"
        );
        assert!(usage.ends_with(" [-y]"), "{usage}");
        // Wrapped under the first switch, no line wider than argparse's 78.
        for line in usage.lines().skip(1) {
            assert!(line.starts_with(&" ".repeat("usage: mx clean ".len())));
            assert!(!line[16..].starts_with(' '), "{line:?}");
        }
        // The first line is printed after `usage: `; the others carry their
        // indent (argparse wraps each line, indent included, at 78).
        assert!(usage.lines().enumerate().all(|(i, l)| {
            let prefix = if i == 0 { "usage: ".len() } else { 0 };
            prefix + l.len() <= 78 || !l.contains(' ')
        }));
        // Conflicting switches share one bracket.
        let gen_usage = argparse_usage("mx gen", cli.find_subcommand("gen").unwrap());
        assert!(
            gen_usage.contains("[--pps N|max | --gbps G]"),
            "{gen_usage}"
        );
        assert!(gen_usage.contains("[-o FILE]"), "{gen_usage}");
        // Hidden switches stay hidden.
        assert!(!usage.contains("--ssh"));
        let top = argparse_usage("mx", &cli);
        // argparse gives the sub-commands lines of their own once it wraps.
        assert!(
            top.starts_with("mx [-h] [-V]\n          {gen,check,"),
            "{top}"
        );
        assert!(top.ends_with("}\n          ..."), "{top}");
        for sub in cli.get_subcommands() {
            assert!(
                top.contains(&format!(",{},", sub.get_name()))
                    || top.contains(&format!("{{{},", sub.get_name()))
                    || top.contains(&format!(",{}}}", sub.get_name())),
                "{} missing: {top}",
                sub.get_name()
            );
        }
    }

    #[test]
    fn short_usage_fits_on_one_line() {
        assert_eq!(
            wrap_usage("mx x", &["[-h]".into(), "[--a B]".into()], &[]),
            "mx x [-h] [--a B]"
        );
    }
}
