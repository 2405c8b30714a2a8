//! The command line: bare `mx`, `--version`, `mx help` generated from the parser,
//! environment defaults.

use clap::CommandFactory;
use matrix_orchestrator::cli::Cli;

use crate::util::Sandbox;

#[test]
fn bare_mx_prints_usage_and_where_to_start_and_exits_2() {
    let run = Sandbox::new().mx(&[]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.contains("Usage: mx [COMMAND]"), "{}", run.stdout);
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
    assert_eq!(run.stdout, format!("mx {}\n", env!("CARGO_PKG_VERSION")));
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
            run.stdout.contains(&format!("Usage: mx {name}")),
            "mx help lacks the usage of {name}"
        );
        for arg in sub.get_arguments() {
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
            .contains("MX_MATRIX    default for mx check --matrix")
    );
    assert!(
        run.stdout
            .contains("MX_SERVERS   default for mx gen --servers, mx hints --servers")
    );
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
    sb.write("servers.txt", "a\nb\n");
    let run = sb.mx_env(&["gen"], &[("MX_SERVERS", "")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = sb.mx_env(&["check"], &[("MX_MATRIX", "")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("matrix matrix.csv:"));
}
