//! What Cargo cannot say about the house's layering, held by a test.
//!
//! The layers are crates (`crates/`), and Cargo's dependency graph is their
//! order: the summary cannot reach the fleet, nor the agent the command
//! line, because neither depends on the other. What is left to this test:
//! - that the crates' manifests keep the graph the layers allow (a new
//!   `mx-agent` line in the summary's manifest would compile);
//! - inside the binary's crate, that the pure renderings (the monitor's
//!   files, the floor-plan export) never reach the fleet, the agent or the
//!   command line;
//! - inside any folder of any crate, no circle of files;
//! - `unsafe` forbidden in every crate but the UDP one, and allowed in it
//!   only in its `sys` module.
//!
//! Sources are read with `syn`: each file's `crate::`, `super::` and
//! `self::` paths (in code and in macro bodies; not in its `#[cfg(test)]`
//! items), resolved to the modules they name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The crates of `crates/` (by directory) and the `mx-` crates each may
/// depend on: down the layers, and never summary -> agent (analysis takes
/// the report schema's codecs), fleet -> agent (name resolution belongs to
/// the matrix, quoting to the fleet), nor summary <-> fleet (collecting
/// before summarizing is the command's job).
const CRATES: &[(&str, &[&str])] = &[
    ("base", &[]),
    ("wire", &[]),
    ("udp", &["wire"]),
    ("report", &["base"]),
    ("matrix", &["base", "wire"]),
    ("agent", &["base", "wire", "udp", "matrix", "report"]),
    ("summary", &["base", "matrix", "report"]),
    ("fleet", &["base", "matrix", "report"]),
];

/// The binary's crate (`src/`): its parts top to bottom by the first path
/// segment under `crate::`; the crates it re-exports below its own.
const PARTS: &[(&str, &[&str])] = &[
    ("entry", &["main"]),
    ("commands", &["commands", "cli"]),
    ("export", &["export"]),
    ("monitor", &["monitor"]),
    ("fleet", &["fleet"]),
    ("summary", &["summary"]),
    ("agent", &["agent"]),
    ("report", &["report"]),
    ("matrix", &["matrix"]),
    (
        "base",
        &["units", "error", "files", "private_dir", "input", "lib"],
    ),
];

/// The parts of [`PARTS`] that are crates of their own, re-exported.
const CRATE_PARTS: std::ops::RangeFrom<usize> = 4..;

/// Pairs of the binary's crate kept apart although the order allows them:
/// the renderings are pure, from the matrix and the summary's figures.
const NEVER: &[(&str, &str)] = &[
    ("export", "fleet"),
    ("monitor", "fleet"),
    ("export", "agent"),
    ("monitor", "agent"),
];

/// A module's path under `crate` (`["transport", "ssh"]`); the crate root
/// is empty.
type Module = Vec<String>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate's source folder: the binary's (`mx`) and each of `crates/`.
fn sources() -> Vec<(String, PathBuf)> {
    let mut out = vec![("mx".to_string(), root().join("src"))];
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, dir.join("src")));
    }
    out
}

/// Every module of the crate whose sources are in `src`, and its file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
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
            let rel = path.strip_prefix(src).unwrap().with_extension("");
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

/// The `crate`/`super`/`self` paths of a file's code: (head, the segments
/// after it), with `use a::{b, c::d}` groups expanded.
#[derive(Default)]
struct Paths(Vec<(String, Vec<String>)>);

const HEADS: [&str; 3] = ["crate", "super", "self"];

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

impl Paths {
    fn of_use(&mut self, tree: &syn::UseTree, mut prefix: Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.of_use(&p.tree, prefix);
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.push(prefix);
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.push(prefix);
            }
            syn::UseTree::Glob(_) => self.push(prefix),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.of_use(item, prefix.clone());
                }
            }
        }
    }

    fn push(&mut self, mut segments: Vec<String>) {
        if segments
            .first()
            .is_some_and(|h| HEADS.contains(&h.as_str()))
        {
            let head = segments.remove(0);
            self.0.push((head, segments));
        }
    }

    /// Paths inside a macro's tokens (`format!("{}", crate::units::g(x))`),
    /// which `syn` leaves unparsed.
    fn of_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        use proc_macro2::TokenTree;
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.of_tokens(g.stream()),
                TokenTree::Ident(id) if HEADS.contains(&id.to_string().as_str()) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) =
                        (trees.get(j), trees.get(j + 1))
                    {
                        let Some(TokenTree::Ident(next)) = trees.get(j + 2) else {
                            break;
                        };
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.push(segments);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Const(c) => &c.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.of_use(&u.tree, Vec::new());
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.of_tokens(mac.tokens.clone());
    }
}

fn paths(code: &str) -> Vec<(String, Vec<String>)> {
    let file = syn::parse_file(code).unwrap_or_else(|e| panic!("{e}"));
    let mut found = Paths::default();
    found.visit_file(&file);
    found.0
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
        let code = std::fs::read_to_string(file).unwrap();
        for (head, mut segments) in paths(&code) {
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

/// The `mx-` crates a manifest depends on (its `[dependencies]`), by
/// directory name (`mx-base` -> `base`).
fn mx_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut section = String::new();
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[dependencies]"
            && let Some(name) = line.split('=').next().map(str::trim)
            && let Some(dir) = name.strip_prefix("mx-")
        {
            out.insert(dir.to_string());
        }
    }
    out
}

#[test]
fn each_crate_depends_only_on_the_crates_beneath_it_that_it_may() {
    let mut wrong = Vec::new();
    for (name, src) in sources().into_iter().skip(1) {
        let Some((_, allowed)) = CRATES.iter().find(|(c, _)| *c == name) else {
            panic!("crates/{name}: in no row of CRATES (tests/integration/layering.rs)");
        };
        for dep in mx_dependencies(&src.parent().unwrap().join("Cargo.toml")) {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!("crates/{name} depends on mx-{dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    // The binary stands on them all, and the table names every crate.
    let of_binary = mx_dependencies(&root().join("Cargo.toml"));
    assert!(of_binary.contains("summary") && of_binary.contains("fleet"));
    assert_eq!(sources().len(), CRATES.len() + 1);
}

/// The part of the binary's crate a module belongs to, by its first segment.
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
fn in_the_binary_no_part_reaches_one_above_it_nor_one_it_must_not() {
    let src = root().join("src");
    let mut modules = modules(&src);
    // The crates it re-exports, each one module here.
    for top in PARTS[CRATE_PARTS].iter().flat_map(|(_, tops)| tops.iter()) {
        modules
            .entry(vec![top.to_string()])
            .or_insert_with(|| src.join("lib.rs"));
    }
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
                    modules[&from].strip_prefix(&src).unwrap().display(),
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
fn no_folder_of_any_crate_holds_a_circle_of_files() {
    let mut circles = Vec::new();
    for (name, src) in sources() {
        let modules = modules(&src);
        for cycle in circles_of(&modules) {
            circles.push(format!("{name}: {cycle}"));
        }
    }
    assert!(
        circles.is_empty(),
        "files that use each other:\n{}",
        circles.join("\n")
    );
}

/// The circles of files in any folder of one crate.
fn circles_of(modules: &BTreeMap<Module, PathBuf>) -> Vec<String> {
    let uses = uses(modules);
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
    circles
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

/// The inner attributes of a file (`#![forbid(unsafe_code)]`), as written.
fn inner_lints(path: &Path) -> Vec<String> {
    let file = syn::parse_file(&std::fs::read_to_string(path).unwrap()).unwrap();
    file.attrs
        .iter()
        .filter(|a| matches!(a.style, syn::AttrStyle::Inner(_)))
        .map(|a| {
            let meta = &a.meta;
            quote::quote!(#meta).to_string().replace(' ', "")
        })
        .collect()
}

#[test]
fn unsafe_is_forbidden_in_every_crate_but_the_udp_one_and_there_allowed_in_sys_alone() {
    for (name, src) in sources() {
        let roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .filter(|p| p.is_file())
            .collect();
        for root in roots {
            let want = if name == "udp" {
                "deny(unsafe_code)"
            } else {
                "forbid(unsafe_code)"
            };
            let lints = inner_lints(&root);
            assert!(
                lints.iter().any(|l| l == want),
                "{}: {lints:?}",
                root.display()
            );
        }
        for (module, file) in modules(&src) {
            let allows = inner_lints(&file).iter().any(|l| l == "allow(unsafe_code)");
            assert_eq!(
                allows,
                name == "udp" && module == ["sys"],
                "{}",
                file.display()
            );
        }
    }
}

#[test]
fn the_checks_see_a_circle_and_a_reach_upwards() {
    // The reader itself: groups, nesting, super and self, macro bodies; not
    // comments, strings nor test modules.
    let found = paths(
        "use crate::{agent::budget, units};\nuse super::super::x::{self, y::Z};\n\
         fn f() { let a = self::b::c(); println!(\"{}\", crate::units::g(1.0)); }\n\
         // crate::commented::out\nconst S: &str = \"crate::in_a_string\";\n\
         #[cfg(test)]\nmod tests { use crate::fleet; }",
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
            "self::b::c",
            "crate::units::g"
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
    // The export reaching the fleet is refused although it sits above it;
    // the summary may never depend on the agent.
    assert!(NEVER.contains(&("export", "fleet")));
    assert!(part_of(&m("export::overlays")) < part_of(&m("fleet::deploy")));
    let summary = CRATES.iter().find(|(c, _)| *c == "summary").unwrap();
    assert!(!summary.1.contains(&"agent"));
}

/// Functions of more than this many lines, signature to closing brace,
/// are split: a reader holds one in view.
const MOST_LINES_A_FUNCTION: usize = 100;

/// Every function's name and its length in lines.
#[derive(Default)]
struct Lengths(Vec<(String, usize)>);

impl Lengths {
    fn add(&mut self, sig: &syn::Signature, block: &syn::Block) {
        use syn::spanned::Spanned;
        let (start, end) = (sig.span().start().line, block.span().end().line);
        self.0
            .push((format!("{} (line {start})", sig.ident), end - start + 1));
    }
}

impl<'ast> Visit<'ast> for Lengths {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.add(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.add(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
}

#[test]
fn no_function_runs_over_100_lines() {
    let mut long = Vec::new();
    for (_, src) in sources() {
        for file in modules(&src).values() {
            let code = std::fs::read_to_string(file).unwrap();
            let mut lengths = Lengths::default();
            lengths.visit_file(&syn::parse_file(&code).unwrap());
            for (name, lines) in lengths.0 {
                if lines > MOST_LINES_A_FUNCTION {
                    long.push(format!("{}: {name}: {lines} lines", file.display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
    // The measure itself: a function of 101 lines is one too many.
    let body = "let x = 1;\n".repeat(99);
    let mut lengths = Lengths::default();
    lengths.visit_file(&syn::parse_file(&format!("/// Doc.\nfn f() {{\n{body}}}\n")).unwrap());
    assert_eq!(lengths.0, [("f (line 2)".to_string(), 101)]);
}
