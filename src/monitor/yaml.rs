//! The little YAML the files need: mappings, lists and strings, each
//! string double-quoted with JSON's escapes (a subset of YAML's), so that
//! PromQL's quotes and braces and a template's `{{ }}` are never read as
//! YAML.

use std::fmt::Write as _;

/// A YAML value.
pub(crate) enum Yaml {
    Str(String),
    List(Vec<Yaml>),
    Map(Vec<(&'static str, Yaml)>),
}

impl Yaml {
    pub fn str(text: impl Into<String>) -> Yaml {
        Yaml::Str(text.into())
    }

    /// The document, newline-terminated.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out
    }

    /// Writes the value as a block at `indent` (a mapping's entries or a
    /// list's items each on a line of its own).
    fn write(&self, out: &mut String, indent: usize) {
        let pad = " ".repeat(indent);
        match self {
            Yaml::Str(s) => {
                let _ = writeln!(out, "{pad}{}", quoted(s));
            }
            Yaml::List(items) => {
                for item in items {
                    match item {
                        Yaml::Str(s) => {
                            let _ = writeln!(out, "{pad}- {}", quoted(s));
                        }
                        _ => {
                            // The item's first line after the dash, the rest
                            // under it.
                            let mut inner = String::new();
                            item.write(&mut inner, indent + 2);
                            let _ = write!(out, "{pad}- {}", &inner[indent + 2..]);
                        }
                    }
                }
            }
            Yaml::Map(entries) => {
                for (key, value) in entries {
                    match value {
                        Yaml::Str(s) => {
                            let _ = writeln!(out, "{pad}{key}: {}", quoted(s));
                        }
                        Yaml::List(items) if items.is_empty() => {
                            let _ = writeln!(out, "{pad}{key}: []");
                        }
                        Yaml::Map(entries) if entries.is_empty() => {
                            let _ = writeln!(out, "{pad}{key}: {{}}");
                        }
                        _ => {
                            let _ = writeln!(out, "{pad}{key}:");
                            value.write(out, indent + 2);
                        }
                    }
                }
            }
        }
    }
}

/// A string as a YAML double-quoted scalar.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lists_and_quoted_strings_nest_by_indent() {
        let doc = Yaml::Map(vec![(
            "groups",
            Yaml::List(vec![Yaml::Map(vec![
                ("name", Yaml::str("mx")),
                (
                    "rules",
                    Yaml::List(vec![Yaml::Map(vec![
                        ("record", Yaml::str("a:b")),
                        ("expr", Yaml::str("sum by (x) (m{l=\"v\"})")),
                    ])]),
                ),
                ("files", Yaml::List(vec![Yaml::str("t.json")])),
                ("labels", Yaml::Map(vec![])),
            ])]),
        )]);
        assert_eq!(
            doc.render(),
            "groups:\n  - name: \"mx\"\n    rules:\n      - record: \"a:b\"\n        expr: \"sum by (x) (m{l=\\\"v\\\"})\"\n    files:\n      - \"t.json\"\n    labels: {}\n"
        );
    }
}
