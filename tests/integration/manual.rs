//! `mx completions` and `mx man`: generated from the clap declarations, and
//! the bash script really completes when bash loads it.

use std::process::Command;

use crate::util::Sandbox;

/// What bash's completion of `words` (the last one being typed) offers,
/// with mx's completion script loaded as bash-completion would load it.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}' || exit 9\n\
         complete -p mx >/dev/null || exit 8\n\
         COMP_WORDS=({})\n\
         COMP_CWORD={}\n\
         COMP_LINE='{}'\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         _mx mx '{}' '{}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &program])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_loads_the_completions_and_completes_commands_and_switches() {
    let sb = Sandbox::new();
    let run = sb.mx(&["completions", "bash"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let script = sb.write("mx.bash", &run.stdout);
    assert_eq!(bash_completes(&script, &["mx", "summ"]), ["summarize"]);
    let compare = bash_completes(&script, &["mx", "compare", "--fo"]);
    assert_eq!(compare, ["--force"]);
    let every = bash_completes(&script, &["mx", ""]);
    for command in ["gen", "start", "summarize", "compare", "completions", "man"] {
        assert!(every.iter().any(|c| c == command), "{command}: {every:?}");
    }
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let sb = Sandbox::new();
    for shell in ["zsh", "fish"] {
        let run = sb.mx(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        for command in ["summarize", "compare", "export"] {
            assert!(run.stdout.contains(command), "{shell} lacks {command}");
        }
    }
    let bad = sb.mx(&["completions", "tcsh"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

#[test]
fn man_prints_mx_1_and_writes_a_page_per_command() {
    let sb = Sandbox::new();
    let run = sb.mx(&["man"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!(".TH mx 1  \"mx {}\"", env!("CARGO_PKG_VERSION"))),
        "{}",
        &run.stdout[..200.min(run.stdout.len())]
    );
    let dir = sb.mx(&["man", "-o", "man1"]);
    assert_eq!(dir.code, 0, "{}", dir.stderr);
    let help = sb.mx(&["--help"]).stdout;
    for command in ["gen", "summarize", "compare", "clean"] {
        assert!(help.contains(command));
        let page = sb.read(&format!("man1/mx-{command}.1"));
        assert!(page.contains(&format!(".TH mx-{command} 1")), "{page}");
        assert!(page.contains(&format!("mx {command}")), "{page}");
    }
    assert!(sb.file("man1/mx.1").exists());
}

#[test]
fn man_pages_say_exit_status_environment_and_examples() {
    let sb = Sandbox::new();
    let dir = sb.mx(&["man", "-o", "man1"]);
    assert_eq!(dir.code, 0, "{}", dir.stderr);
    // Every page: the statuses scripts test.
    for entry in std::fs::read_dir(sb.file("man1")).unwrap() {
        let page = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let status = page.find(".SH \"EXIT STATUS\"").expect("EXIT STATUS");
        for code in ["0", "1", "2"] {
            assert!(
                page[status..].contains(&format!("\\fB{code}\\fR")),
                "{code}"
            );
        }
    }
    // A fleet command's page names the variables its switches read, with
    // the switch; one with no such switch has no ENVIRONMENT.
    let run = sb.read("man1/mx-run.1");
    let env = &run[run.find(".SH ENVIRONMENT").expect("ENVIRONMENT")..];
    for (var, switch) in [
        ("MX_SSH", "\\-\\-ssh"),
        ("MX_SCP", "\\-\\-scp"),
        ("MX_MATRIX", "\\-\\-matrix"),
        ("MX_REMOTE_DIR", "\\-\\-remote\\-dir"),
        ("MX_USER", "\\-\\-user"),
    ] {
        assert!(
            env.contains(&format!("\\fB{var}\\fR\n{switch}: ")),
            "{var} in\n{env}"
        );
    }
    assert!(!sb.read("man1/mx-completions.1").contains(".SH ENVIRONMENT"));
    // Examples, before the version.
    let top = sb.read("man1/mx.1");
    let examples = top.find(".SH EXAMPLES").expect("EXAMPLES");
    assert!(examples < top.find(".SH VERSION").unwrap());
    assert!(top[examples..].contains("\\fBmx run \\-\\-for 60\\fR"));
}

#[test]
fn the_readme_and_the_man_pages_say_what_each_summary_column_means() {
    use matrix_orchestrator::summary::render::text::HOST_COLUMNS;
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let sb = Sandbox::new();
    assert_eq!(sb.mx(&["man", "-o", "man1"]).code, 0);
    // roff writes a hyphen as `\-`, an apostrophe as `\*(Aq`.
    let roff = |text: &str| text.replace('-', "\\-").replace('\'', "\\*(Aq");
    for page in ["mx-summarize.1", "mx-run.1"] {
        let page = sb.read(&format!("man1/{page}"));
        let columns = &page[page.find(".SH \"SUMMARY COLUMNS\"").expect(".SH")..];
        for (column, meaning) in HOST_COLUMNS {
            assert!(
                columns.contains(&format!("\\fB{}\\fR\n{}\n", roff(column), roff(meaning))),
                "{column}"
            );
        }
    }
    for (column, meaning) in HOST_COLUMNS {
        assert!(
            readme.contains(&format!("| `{column}` | {meaning} |\n")),
            "README.md: {column}"
        );
    }
    // Every column the table can print is among them.
    for header in ["sent", "serving", "egress", "1 core", "agent", "unread"] {
        assert!(HOST_COLUMNS.iter().any(|(c, _)| *c == header), "{header}");
    }
}

#[test]
fn the_exit_codes_are_said_in_the_same_words_everywhere_130_included() {
    use matrix_orchestrator::error::Exit;
    let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let contract = Exit::contract();
    assert!(contract.contains("; 130 cut short by ctrl-c"), "{contract}");
    for doc in ["README.md", "docs/fleet.md"] {
        let text =
            std::fs::read_to_string(format!("{}/{doc}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(flat(&text).contains(&contract), "{doc} says:\n{contract}");
    }
    // The man pages: one entry a status, in the same words.
    let sb = Sandbox::new();
    let page = sb.mx(&["man"]).stdout;
    let status = &page[page.find(".SH \"EXIT STATUS\"").expect("EXIT STATUS")..];
    for (exit, meaning) in Exit::MEANINGS {
        let word = meaning.split_whitespace().nth(1).unwrap();
        assert!(
            status.contains(&format!("\\fB{}\\fR\n", exit.code())) && status.contains(word),
            "{}: {status}",
            exit.code()
        );
    }
}
