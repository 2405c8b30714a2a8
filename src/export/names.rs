//! What a results line may hold, and the `--names` file that maps mx host
//! names to floor-plan targets.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};

/// `mxname target` lines of a --names file.
pub(crate) fn read_names(path: &Path) -> Result<HashMap<String, String>> {
    let text = crate::input::read_list(path, "names file", "")?;
    let mut names = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let content = line.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content
            .split(|c: char| c.is_whitespace() || c == '=')
            .filter(|f| !f.is_empty())
            .collect();
        if fields.len() != 2 {
            return Err(Error::refused(format!(
                "{} line {}: want `mxname target`, got '{line}'",
                path.display(),
                i + 1
            )));
        }
        check_field(
            &format!("{} line {}: target", path.display(), i + 1),
            fields[1],
            "choose a target without",
        )?;
        names.insert(fields[0].to_string(), fields[1].to_string());
    }
    Ok(names)
}

/// Refuses text that would break a results line (`test<TAB>target<TAB>value
/// k=v ...`): whitespace, which separates its fields, or a quote, which opens a
/// quoted value. `fix` says what to do instead.
pub(crate) fn check_field(what: &str, text: &str, fix: &str) -> Result<()> {
    let Some(bad) = text
        .chars()
        .find(|c| matches!(c, ' ' | '\t' | '\r' | '\n' | '"'))
    else {
        return Ok(());
    };
    let holds = match bad {
        ' ' => "whitespace (a space), which separates the fields of",
        '\t' => "whitespace (a tab), which separates the fields of",
        '\r' => "whitespace (a carriage return), which would break",
        '\n' => "whitespace (a line feed), which would break",
        _ => "a quote (\"), which opens a quoted value in",
    };
    let shown: String = text
        .chars()
        .map(|c| match c {
            '\t' => "\\t".to_string(),
            '\r' => "\\r".to_string(),
            '\n' => "\\n".to_string(),
            c => c.to_string(),
        })
        .collect();
    Err(Error::refused(format!(
        "{what} '{shown}' holds {holds} a results line -- {fix}"
    )))
}
