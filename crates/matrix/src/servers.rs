//! The server list (`servers.txt`): one host token per line, `#` starts a comment,
//! blank lines are skipped. The tokens go into the matrix verbatim.

use std::collections::BTreeMap;
use std::path::Path;

use super::{HostToken, MAX_HOSTS};
use mx_base::error::{Error, Result};

/// Reads and checks a server list: every token valid, names unique, at least two.
pub fn read_servers(path: &Path) -> Result<Vec<HostToken>> {
    let text = mx_base::input::read_list(path, "server list", "  (one host per line)")?;
    parse_servers(&text, &path.display().to_string())
}

/// Reads a pool's server list (`--pool NAME=FILE`): as a server list, but
/// one host is a pool (one server against a rack is a fair test).
pub(crate) fn read_pool(path: &Path) -> Result<Vec<HostToken>> {
    let text = mx_base::input::read_list(path, "pool's server list", "  (one host per line)")?;
    parse_list(&text, &path.display().to_string(), 1)
}

/// Parses server-list text; `label` names it in errors.
pub fn parse_servers(text: &str, label: &str) -> Result<Vec<HostToken>> {
    parse_list(text, label, 2)
}

/// Parses a list of at least `least` hosts.
fn parse_list(text: &str, label: &str, least: usize) -> Result<Vec<HostToken>> {
    let mut tokens = Vec::new();
    let mut lines_of: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let content = line.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let token = HostToken::parse(content)
            .map_err(|e| Error::refused(format!("{label}:{line_no}: {e}")))?;
        lines_of
            .entry(token.name.clone())
            .or_default()
            .push(line_no);
        tokens.push(token);
    }
    let duplicates: Vec<String> = lines_of
        .iter()
        .filter(|(_, lines)| lines.len() > 1)
        .map(|(name, lines)| {
            let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
            format!("{name} (lines {})", lines.join(", "))
        })
        .collect();
    if !duplicates.is_empty() {
        return Err(Error::refused(format!(
            "{label}: duplicate hosts: {}",
            duplicates.join(", ")
        )));
    }
    if tokens.len() < least {
        return Err(Error::refused(match least {
            1 => format!("{label}: no servers in it"),
            _ => format!("{label}: need at least {least} servers"),
        }));
    }
    if tokens.len() > MAX_HOSTS {
        return Err(Error::refused(format!(
            "{label}: {} servers is more than the {MAX_HOSTS} the wire format can address",
            tokens.len()
        )));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_blank_lines_and_crlf() {
        let text = "# the rack\r\n10.0.0.1\r\n\r\n  web=10.0.0.2:5400   # second\r\n";
        let hosts = parse_servers(text, "s.txt").unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["10.0.0.1", "web"]);
        assert_eq!(hosts[1].token, "web=10.0.0.2:5400");
    }

    #[test]
    fn refusals_name_the_file_and_line() {
        let err = parse_servers("a\nb\na\nc\nb\n", "s.txt").unwrap_err();
        assert_eq!(
            err.message(),
            "s.txt: duplicate hosts: a (lines 1, 3), b (lines 2, 5)"
        );
        let err = parse_servers("a\n", "s.txt").unwrap_err();
        assert_eq!(err.message(), "s.txt: need at least 2 servers");
        let err = parse_servers("a\nb:99999\n", "s.txt").unwrap_err();
        assert!(
            err.message()
                .starts_with("s.txt:2: bad port in host token 'b:99999'")
        );
    }
}
