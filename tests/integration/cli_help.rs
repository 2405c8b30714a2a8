//! The command line: bare `mx`, `--version`, `mx help` generated from the parser,
//! environment defaults.

use clap::CommandFactory;
use matrix_orchestrator::cli::Cli;

use crate::util::Sandbox;

#[test]
fn bare_mx_prints_usage_and_where_to_start_and_exits_2() {
    let run = Sandbox::new().mx(&[]);
    assert_eq!(run.code, 2);
    assert!(
        run.stdout.starts_with("usage: mx [-h] [-V]"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("start here:  mx gen --servers servers.txt --pps 20000 && mx run --for 60")
    );
    assert!(
        run.stdout
            .contains("stuck?       mx hints        every switch:  mx help")
    );
}

#[test]
fn version() {
    let run = Sandbox::new().mx(&["--version"]);
    assert_eq!(run.code, 0);
    // The version alone on the first line (scripts parse `^mx X.Y.Z$`), then
    // the license notice; -V is the first line alone.
    let mut lines = run.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("mx {}", env!("CARGO_PKG_VERSION")).as_str())
    );
    let notice: Vec<&str> = lines.collect();
    assert!(notice[0].starts_with("Copyright (C) 2026 "), "{notice:?}");
    assert!(
        notice.iter().any(|l| l.contains("GPL-3.0-or-later")),
        "{notice:?}"
    );
    assert!(
        notice.iter().any(|l| l.contains("no warranty")),
        "{notice:?}"
    );
    let short = Sandbox::new().mx(&["-V"]);
    assert_eq!(short.stdout, format!("mx {}\n", env!("CARGO_PKG_VERSION")));
}

/// Every `mx X.Y.Z` in `text`.
fn versions_named(text: &str) -> Vec<&str> {
    text.match_indices("mx ")
        .map(|(i, _)| {
            let rest = &text[i + 3..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('.')
        })
        .filter(|v| v.split('.').count() == 3 && v.split('.').all(|p| !p.is_empty()))
        .collect()
}

#[test]
fn one_version_everywhere_and_the_readme_says_what_it_means() {
    let version = env!("CARGO_PKG_VERSION");
    // 1.x is the Python original's line; this mx is 2.x (README, Versions).
    assert!(version.starts_with("2."), "{version}");
    let readme = include_str!("../../README.md");
    let section = readme
        .split("\n## Versions\n")
        .nth(1)
        .expect("the README has a Versions section");
    assert!(
        section.starts_with(&format!("\nThis is mx {version}. ")),
        "{}",
        &section[..80]
    );
    let named = versions_named(readme);
    assert!(named.len() >= 3, "{named:?}");
    assert!(named.iter().all(|v| *v == version), "{named:?}");
    // What prints it: --version, mx help's first line (the agent banner and
    // export's header are checked where those run).
    let sb = Sandbox::new();
    assert!(
        sb.mx(&["--version"])
            .stdout
            .starts_with(&format!("mx {version}\n"))
    );
    let help = sb.mx(&["help"]).stdout;
    assert!(
        help.starts_with(&format!("mx {version} -- every command, every switch.")),
        "{}",
        help.lines().next().unwrap_or_default()
    );
}

#[test]
fn help_lists_every_switch_of_every_command() {
    let run = Sandbox::new().mx(&["help"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut checked = 0;
    for sub in Cli::command().get_subcommands() {
        let name = sub.get_name();
        if name == "help" {
            continue;
        }
        assert!(
            run.stdout.contains(&format!("usage: mx {name}")),
            "mx help lacks the usage of {name}"
        );
        // Hidden switches (--ssh, --scp) are the exception, as in the original.
        for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(
                    run.stdout.contains(&format!("--{long}")),
                    "mx help lacks {name} --{long}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} switches seen");
    assert!(
        run.stdout
            .contains("MX_MATRIX     default for mx check --matrix")
    );
    assert!(
        run.stdout
            .contains("MX_SERVERS    default for mx gen --servers, mx hints --servers")
    );
}

#[test]
fn the_environment_list_names_only_switches_a_help_page_shows() {
    let sb = Sandbox::new();
    let page = sb.mx(&["help"]).stdout;
    let list = page
        .split("Environment (a variable set to the empty string counts as unset):\n")
        .nth(1)
        .expect("mx help ends with the environment");
    let mut named = 0;
    for line in list.lines() {
        let Some((_, uses)) = line.split_once(" default for ") else {
            continue;
        };
        for switch in uses.split(", ") {
            let (command, long) = switch
                .strip_prefix("mx ")
                .and_then(|s| s.split_once(' '))
                .unwrap_or_else(|| panic!("{line}"));
            let help = sb.mx(&[command, "--help"]).stdout;
            assert!(
                help.contains(&format!("  {long} ")) || help.contains(&format!(", {long} ")),
                "mx help names {switch}, which mx {command} --help does not show"
            );
            named += 1;
        }
    }
    assert!(named >= 40, "only {named} switches named");
    // The hidden --ssh/--scp are not named; their variables say what they do.
    assert!(!list.contains("--ssh") && !list.contains("--scp"), "{list}");
    assert!(list.contains(
        "  MX_SSH        the ssh command every fleet command runs, split at whitespace \
         (e.g. \"ssh -F my_config\"); default: ssh\n"
    ));
    assert!(list.contains("  MX_SCP        the scp command every fleet command runs,"));
    // And they still work: MX_SSH is the ssh the fleet commands run.
    sb.write(
        "matrix.csv",
        "src\\dst,a=127.0.0.1,b=127.0.0.2\na,,1\nb,1,\n",
    );
    let run = sb.mx_env(&["status", "--dry-run"], &[("MX_SSH", "ssh -F my_config")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("ssh -F my_config "), "{}", run.stdout);
}

#[test]
fn help_with_a_command_prints_that_commands_page() {
    let sb = Sandbox::new();
    let mut commands = 0;
    for sub in Cli::command().get_subcommands() {
        let name = sub.get_name();
        let page = sb.mx(&["help", name]);
        let flag = sb.mx(&[name, "--help"]);
        assert_eq!(page.code, 0, "mx help {name}: {}", page.stderr);
        assert_eq!(page.stderr, "");
        assert_eq!(
            page.stdout, flag.stdout,
            "mx help {name} vs mx {name} --help"
        );
        commands += 1;
    }
    assert!(commands >= 16, "only {commands} commands");
    let run = sb.mx(&["help", "nosuch"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .starts_with("mx: no command 'nosuch' -- the commands are gen, check, "),
        "{}",
        run.stderr
    );
    for sub in Cli::command().get_subcommands() {
        assert!(run.stderr.contains(sub.get_name()), "{}", run.stderr);
    }
}

#[test]
fn usage_errors_exit_2() {
    let sb = Sandbox::new();
    let run = sb.mx(&["gen", "--no-such-switch"]);
    assert_eq!(run.code, 2);
    let run = sb.mx(&["no-such-command"]);
    assert_eq!(run.code, 2);
}

#[test]
fn mx_servers_and_mx_matrix_supply_defaults() {
    let sb = Sandbox::new();
    sb.write("fleet.txt", "a\nb\n");
    let run = sb.mx_env(&["gen", "-o", "fleet.csv"], &[("MX_SERVERS", "fleet.txt")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = sb.mx_env(&["check"], &[("MX_MATRIX", "fleet.csv")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("matrix fleet.csv: 2 hosts, 2 flows"),
        "{}",
        run.stdout
    );
    // A flag beats the variable.
    let run = sb.mx_env(
        &["check", "--matrix", "other.csv"],
        &[("MX_MATRIX", "fleet.csv")],
    );
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("matrix not found: other.csv"));
}

#[test]
fn an_empty_variable_counts_as_unset() {
    let sb = Sandbox::new();
    sb.write("servers.txt", "a=198.18.0.1\nb=198.18.0.2\n");
    let run = sb.mx_env(&["gen"], &[("MX_SERVERS", "")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = sb.mx_env(&["check"], &[("MX_MATRIX", "")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("matrix matrix.csv:"));
}

/// The first option string of each visible switch: what argparse's usage shows.
fn usage_switches(sub: &clap::Command) -> Vec<String> {
    sub.get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .map(|a| match a.get_short() {
            Some(short) => format!("-{short}"),
            None => format!("--{}", a.get_long().expect("a switch has a name")),
        })
        .collect()
}

#[test]
fn every_help_opens_with_the_argparse_usage_line_listing_every_switch() {
    let sb = Sandbox::new();
    let page = sb.mx(&["help"]);
    assert_eq!(page.code, 0, "{}", page.stderr);
    let mut commands = 0;
    for sub in Cli::command().get_subcommands() {
        let name = sub.get_name();
        let run = sb.mx(&[name, "--help"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let head = format!("usage: mx {name} [-h]");
        assert!(
            run.stdout.starts_with(&head),
            "mx {name} --help starts with {:?}",
            run.stdout.lines().next()
        );
        // The usage block runs to the first blank line.
        let block = run.stdout.split("\n\n").next().unwrap();
        let tokens: Vec<&str> = block
            .split(|c: char| c.is_whitespace() || "[]|".contains(c))
            .collect();
        for switch in usage_switches(sub) {
            assert!(
                tokens.contains(&switch.as_str()),
                "mx {name}'s usage lacks {switch}:\n{block}"
            );
        }
        assert!(
            !block.contains("--ssh"),
            "hidden switches stay out of the usage"
        );
        // `-h` shows the same line, and `mx help` the same block.
        let short = sb.mx(&[name, "-h"]);
        assert!(short.stdout.starts_with(block), "mx {name} -h");
        assert!(
            name == "help" || page.stdout.contains(&format!("=\n{block}\n")),
            "mx help lacks the usage block of {name}:\n{block}"
        );
        commands += 1;
    }
    assert!(commands >= 16, "only {commands} commands");
    assert!(
        page.stdout
            .contains("usage: mx [-h] [-V]\n          {gen,check,")
    );
    // A usage error is one line, as every refusal, pointing at the help.
    let run = sb.mx(&["gen", "--no-such-switch"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "mx: gen: no option '--no-such-switch' -- `mx gen --help` lists them\n"
    );
}

const PYTHON_LINE: &str = "mx: --python has no effect here: the agent is mx itself, \
                           no interpreter runs on the hosts (ignored)\n";

#[test]
fn python_is_accepted_and_ignored_with_one_line() {
    let sb = Sandbox::new();
    sb.write("servers.txt", "h1=127.62.0.1\nh2=127.62.0.2\n");
    assert_eq!(sb.mx(&["gen"]).code, 0);
    let run = sb.mx(&["start", "--dry-run", "--python", "python3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, PYTHON_LINE);
    assert!(run.stdout.contains("DRY-RUN"), "{}", run.stdout);
    let run = sb.mx(&["doctor", "--local", "hosts", "--python=/usr/bin/python3.11"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stderr, PYTHON_LINE);
    let run = sb.mx(&["reload", "--dry-run", "--python", "python3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, PYTHON_LINE);
    let run = sb.mx(&[
        "run",
        "--dry-run",
        "--python",
        "python3",
        "--for",
        "1",
        "--no-collect",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, PYTHON_LINE);
    // MX_PYTHON, as a profile written for the original sets it: silent.
    let run = sb.mx_env(&["start", "--dry-run"], &[("MX_PYTHON", "python3")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    // Only where the original had it.
    let run = sb.mx(&["status", "--python", "python3"]);
    assert_eq!(run.code, 2);
    let page = sb.mx(&["help"]).stdout;
    assert!(page.contains("--python"));
    assert!(page.contains(
        "MX_PYTHON     default for mx start --python, mx reload --python, mx doctor --python, mx run --python"
    ));
}

#[test]
fn every_variable_help_names_is_in_the_docs_and_never_shown_with_a_value() {
    let help = Sandbox::new().mx(&["help"]).stdout;
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for page in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/docs")).unwrap() {
        let path = page.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    let names: std::collections::BTreeSet<&str> = flat
        .split("[env: ")
        .skip(1)
        .map(|rest| rest.split(']').next().unwrap())
        .collect();
    assert!(
        names.contains("MX_METRICS") && names.contains("IPERF_BIND"),
        "{names:?}"
    );
    for name in names {
        // Named, never `NAME=` (which reads as set to nothing) nor its value.
        assert!(!name.contains('='), "[env: {name}] in mx help");
        assert!(docs.contains(name), "{name} is in no page of the docs");
    }
}
