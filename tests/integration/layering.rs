//! The source's layering, held by a test: the parts of `src/`, in the order
//! data flows down them, and what must never reach what. A part may use the
//! parts below it, never one above; a few pairs are kept apart although
//! their order would allow it. Inside a folder, no circle of files.
//!
//! The test reads each file's `crate::`, `super::` and `self::` paths (code,
//! not comments, not its `#[cfg(test)]` module), resolves them to the
//! modules they name and checks them against the table below, which is the
//! README's "Where things are" table in code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The parts, top to bottom, and the first path segment under `crate::` of
/// each (`main` for src/main.rs).
const PARTS: &[(&str, &[&str])] = &[
    ("entry", &["main"]),
    ("commands", &["commands", "cli"]),
    ("fleet", &["fleet"]),
    ("export", &["export"]),
    ("monitor", &["monitor"]),
    ("summary", &["summary"]),
    ("agent", &["agent"]),
    ("report", &["report"]),
    ("matrix", &["matrix", "input"]),
    ("base", &["units", "error", "files", "private_dir", "lib"]),
];

/// Pairs kept apart although the order allows them: analysis is pure and
/// takes the report schema's codecs, not the agent's (summary -> agent);
/// name resolution belongs to the matrix and quoting to the fleet (fleet ->
/// agent).
const NEVER: &[(&str, &str)] = &[("summary", "agent"), ("fleet", "agent")];

/// A module's path under `crate` (`["fleet", "transport", "ssh"]`); the
/// crate root is empty.
type Module = Vec<String>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module of the crate and its file.
fn modules() -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src()).unwrap().with_extension("");
            let mut module: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                module.pop();
            }
            out.insert(module, path);
        }
    }
    out
}

/// The code of a file: no comments, no test module.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or("");
    text.lines()
        .map(|line| match line.find("//") {
            // `//` inside a string is rare in paths' company; a URL in a
            // string loses its tail here, which no path needs.
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a file names: (`crate` | `super` | `self`, the segments after
/// it), with `use a::{b, c::d}` groups expanded.
fn paths(code: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let Some(head) = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|h| bytes[i..].starts_with(h.as_bytes()) && (i == 0 || !is_ident(bytes[i - 1])))
        else {
            i += 1;
            continue;
        };
        let start = i + head.len();
        let mut end = start;
        while end < bytes.len() && (is_ident(bytes[end]) || bytes[end..].starts_with(b"::")) {
            end += if bytes[end] == b':' { 2 } else { 1 };
        }
        let segments = |text: &str| -> Vec<String> {
            text.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        };
        let base = segments(&code[start..end]);
        let head = head.trim_end_matches("::").to_string();
        if bytes.get(end) == Some(&b'{') {
            let mut depth = 1;
            let mut j = end + 1;
            while j < bytes.len() && depth > 0 {
                match bytes[j] {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            for item in split_top(&code[end + 1..j - 1]) {
                let item: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut full = base.clone();
                full.extend(segments(&item));
                out.push((head.clone(), full));
            }
            i = j;
        } else {
            out.push((head, base));
            i = end;
        }
    }
    out
}

/// The items of a `{...}` group, split at its top-level commas.
fn split_top(group: &str) -> Vec<&str> {
    let (mut depth, mut from, mut out) = (0, 0, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&group[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&group[from..]);
    out
}

/// The longest module that `path` starts with.
fn resolve(path: &[String], modules: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|m| modules.contains_key(m))
}

/// Every module each module uses (itself left out).
fn uses(modules: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, file) in modules {
        // `self` is the module itself, `super` the one that holds it (for a
        // folder's mod.rs, the folder above).
        for (head, mut segments) in paths(&code(file)) {
            let mut base = match head.as_str() {
                "crate" => Vec::new(),
                "self" => module.clone(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            while segments.first().is_some_and(|s| s == "super") {
                base.pop();
                segments.remove(0);
            }
            base.extend(segments);
            if let Some(target) = resolve(&base, modules)
                && &target != module
            {
                out.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    out
}

/// The part a module belongs to, by its first segment.
fn part_of(module: &Module) -> usize {
    let first = module.first().map_or("lib", String::as_str);
    PARTS
        .iter()
        .position(|(_, tops)| tops.contains(&first))
        .unwrap_or_else(|| {
            panic!("src/{first}: in no part of the table (tests/integration/layering.rs)")
        })
}

#[test]
fn no_part_reaches_one_above_it_nor_one_it_must_not() {
    let modules = modules();
    let mut wrong = Vec::new();
    for (from, targets) in uses(&modules) {
        let (a, name_a) = (part_of(&from), PARTS[part_of(&from)].0);
        for to in targets {
            let (b, name_b) = (part_of(&to), PARTS[part_of(&to)].0);
            if a == b {
                continue;
            }
            if b < a || NEVER.contains(&(name_a, name_b)) {
                wrong.push(format!(
                    "{} ({name_a}) uses {} ({name_b})",
                    modules[&from].strip_prefix(src()).unwrap().display(),
                    to.join("::")
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    // The table covers every top-level file and folder of src/.
    for module in modules.keys() {
        part_of(module);
    }
}

#[test]
fn no_folder_holds_a_circle_of_files() {
    let modules = modules();
    let uses = uses(&modules);
    // Per folder, the graph of its files and subfolders (each counted as one
    // node); the folder's own mod.rs is its root, and left out: it declares
    // its children and may re-export them.
    let folders: BTreeSet<Module> = modules
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| m[..m.len() - 1].to_vec())
        .collect();
    let mut circles = Vec::new();
    for folder in folders {
        let depth = folder.len();
        let child = |m: &Module| -> Option<Module> {
            (m.len() > depth && m[..depth] == folder[..]).then(|| m[..=depth].to_vec())
        };
        let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (from, targets) in &uses {
            let Some(a) = child(from) else { continue };
            for to in targets {
                if let Some(b) = child(to)
                    && a != b
                {
                    graph.entry(a.clone()).or_default().insert(b);
                }
            }
        }
        for cycle in cycles(&graph) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            circles.push(names.join(" -> "));
        }
    }
    assert!(
        circles.is_empty(),
        "files that use each other:\n{}",
        circles.join("\n")
    );
}

/// The strongly connected components of more than one node (Tarjan).
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        on_stack: BTreeSet<&'g Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = s.graph.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn the_checks_see_a_circle_and_a_reach_upwards() {
    // The reader itself: groups, nesting, super and self.
    let found = paths(
        "use crate::{agent::budget, units};\nuse super::super::x::{self, y::Z};\nlet a = self::b::c();",
    );
    let found: Vec<String> = found
        .iter()
        .map(|(h, s)| format!("{h}::{}", s.join("::")))
        .collect();
    assert_eq!(
        found,
        [
            "crate::agent::budget",
            "crate::units",
            "super::super::x::self",
            "super::super::x::y::Z",
            "self::b::c"
        ]
    );
    // Two files that use each other are a circle; a chain is not.
    let m = |s: &str| -> Module { s.split("::").map(str::to_string).collect() };
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    graph.entry(m("f::a")).or_default().insert(m("f::b"));
    graph.entry(m("f::b")).or_default().insert(m("f::c"));
    assert!(cycles(&graph).is_empty());
    graph.entry(m("f::c")).or_default().insert(m("f::a"));
    assert_eq!(cycles(&graph), vec![vec![m("f::a"), m("f::b"), m("f::c")]]);
    // The summary reaching the agent is refused although it sits above it.
    assert!(NEVER.contains(&("summary", "agent")));
    assert!(part_of(&m("summary::analysis::figures")) < part_of(&m("agent::worker")));
}
