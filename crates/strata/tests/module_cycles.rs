//! No import cycles among the modules of any crate of the workspace (issue
//! 29): module A imports B when A's non-test code names `crate::…` or
//! `super::…` items of B (in a `use` or inline). A module using one of its
//! ancestors (a child using its parent's items) does not count: the parent
//! owns the child. Test code (a `#[cfg(test)] mod` to the end of a file,
//! files named `tests.rs` and files under `tests/`) is left out.
//!
//! Set `STRATA_MODULE_CYCLES_ROOT` to check another checkout (its root or
//! its `crates/`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `layer::delta` for
/// `src/layer/delta/mod.rs` or `src/layer/delta.rs`; empty for the root.
type ModPath = Vec<String>;

fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files
        .into_iter()
        .filter_map(|file| {
            let rel = file.strip_prefix(src).unwrap();
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let last = parts.pop()?;
            match last.as_str() {
                "lib.rs" | "main.rs" if parts.is_empty() => {}
                "mod.rs" => {}
                name => parts.push(name.trim_end_matches(".rs").to_owned()),
            }
            // Binaries under src/bin are crates of their own.
            if parts.first().is_some_and(|p| p == "bin") {
                return None;
            }
            Some((parts, file))
        })
        .collect()
}

/// The code of a file without comments, string literals' contents and its
/// trailing test module.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' && !(i > 0 && b[i - 1] == b'\'') {
            // A string: its contents dropped (raw strings of this code base
            // hold no quote before their end).
            let raw = i > 0 && (b[i - 1] == b'r' || b[i - 1] == b'#');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && !raw {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    if let Some(at) = test_module_start(&out) {
        out.truncate(at);
    }
    out
}

/// Where `#[cfg(test)]` followed by a `mod name {` begins, if anywhere.
fn test_module_start(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]") {
        let at = from + at;
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        let rest = rest
            .strip_prefix("pub(crate)")
            .or_else(|| rest.strip_prefix("pub"))
            .unwrap_or(rest)
            .trim_start();
        if let Some(rest) = rest.strip_prefix("mod ") {
            let name_end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if rest[name_end..].trim_start().starts_with('{') {
                return Some(at);
            }
        }
        from = at + 1;
    }
    None
}

/// The paths a `use` tree names, expanded: `a::{b, c::{d, e as f}}` gives
/// `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(tree: &str) -> Vec<String> {
    // Renames (`x as y`) dropped, then the whitespace.
    let mut plain = String::with_capacity(tree.len());
    let mut rest = tree;
    while let Some(at) = find_word(rest, "as") {
        plain.push_str(&rest[..at]);
        let after = rest[at + 2..].trim_start();
        let name_end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        rest = &after[name_end..];
    }
    plain.push_str(rest);
    let tree: String = plain.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    expand_into("", &tree, &mut out);
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<String>) {
    for item in split_top(tree) {
        if let Some(open) = item.find('{') {
            let head = item[..open].trim_end_matches("::");
            let inner = &item[open + 1..item.len() - 1];
            let next = join(prefix, head);
            expand_into(&next, inner, out);
        } else if !item.is_empty() {
            out.push(join(prefix, item));
        }
    }
}

fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (_, true) => prefix.to_owned(),
        _ => format!("{prefix}::{rest}"),
    }
}

/// Splits at the commas outside braces.
fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Every `crate::…`/`super::…`/`self::…` path the code names.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    // `use` statements, expanded.
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let tail = &rest[at + 3..];
        let end = tail.find(';').unwrap_or(tail.len());
        paths.extend(expand_use(&tail[..end]));
        rest = &tail[end..];
    }
    // Inline paths anywhere (those in `use` statements again: harmless).
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            let word_start = at == 0 || {
                let c = code.as_bytes()[at - 1];
                !(c.is_ascii_alphanumeric() || c == b'_' || c == b':')
            };
            let end = code[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            if word_start {
                paths.push(code[at..end].trim_end_matches(':').to_owned());
            }
            from = end.max(at + 1);
        }
    }
    paths
}

fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = s[from..].find(word) {
        let at = from + at;
        let before = at == 0
            || !s.as_bytes()[at - 1].is_ascii_alphanumeric() && s.as_bytes()[at - 1] != b'_';
        let after = s[at + word.len()..]
            .chars()
            .next()
            .is_some_and(char::is_whitespace);
        if before && after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The module a path names, given the module `here` (a `mod.rs` or root
/// file names its own module's children with `self::`; `super::` climbs):
/// the longest prefix of the path that is a module file.
fn resolve(here: &ModPath, path: &str, modules: &BTreeMap<ModPath, PathBuf>) -> Option<ModPath> {
    let mut segs = path.split("::").filter(|s| !s.is_empty());
    let mut at: ModPath = match segs.next()? {
        "crate" => Vec::new(),
        "super" => here[..here.len().checked_sub(1)?].to_vec(),
        "self" => here.clone(),
        _ => return None,
    };
    let mut segs = segs.peekable();
    while segs.peek() == Some(&"super") {
        segs.next();
        at.pop();
    }
    let mut best = at.clone();
    for s in segs {
        at.push(s.to_owned());
        if modules.contains_key(&at) {
            best = at.clone();
        } else {
            break;
        }
    }
    Some(best)
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = s.edges.get_key_value(w).map_or(w, |(k, _)| k);
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                scc.push(w.clone());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The import graph of the crate whose sources are in `src`.
fn import_graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let modules = module_files(src);
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (here, file) in &modules {
        let code = code(&std::fs::read_to_string(file).unwrap());
        let targets = edges.entry(here.clone()).or_default();
        for path in named_paths(&code) {
            let Some(to) = resolve(here, &path, &modules) else {
                continue;
            };
            // Itself, or an ancestor (a child using its parent): no edge.
            if to.len() <= here.len() && here[..to.len()] == to[..] {
                continue;
            }
            if modules.contains_key(&to) {
                targets.insert(to);
            }
        }
    }
    edges
}

fn name(m: &ModPath) -> String {
    if m.is_empty() {
        "(crate root)".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_crate_of_the_workspace_has_an_import_cycle() {
    let root = std::env::var_os("STRATA_MODULE_CYCLES_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    // A checkout's root or its `crates/`, either.
    let crates = match root.join("crates") {
        inner if inner.is_dir() => inner,
        _ => root,
    };
    let mut report = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        checked += 1;
        let graph = import_graph(&src);
        let imports: usize = graph.values().map(BTreeSet::len).sum();
        assert!(
            graph.len() < 3 || imports > 0,
            "{}: {} modules and no import found: the parser is broken",
            src.display(),
            graph.len()
        );
        for scc in cycles(&graph) {
            let members: BTreeSet<&ModPath> = scc.iter().collect();
            let mut lines = vec![format!(
                "{}: a cycle of {} modules: {}",
                src.display(),
                scc.len(),
                scc.iter().map(name).collect::<Vec<_>>().join(", ")
            )];
            for from in &scc {
                for to in graph[from].iter().filter(|t| members.contains(t)) {
                    lines.push(format!("    {} -> {}", name(from), name(to)));
                }
            }
            report.push(lines.join("\n"));
        }
    }
    assert!(checked >= 1, "no crate under {}", crates.display());
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_and_reads_use_trees() {
    assert_eq!(
        expand_use("crate::{a::B, c::{d, e as f}, g}"),
        ["crate::a::B", "crate::c::d", "crate::c::e", "crate::g"]
    );
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("x")).unwrap();
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).unwrap();
    write("lib.rs", "mod a;\nmod b;\nmod x;\nmod c;\n");
    write(
        "a.rs",
        "use crate::{b::Thing, c};\n// use crate::x::Nothing;\n",
    );
    write(
        "b.rs",
        "pub struct Thing;\nfn f() { let _ = super::x::y::value(); }\n",
    );
    write("x/mod.rs", "mod y;\nuse self::y::value;\n");
    write(
        "x/y.rs",
        "use super::super::a;\npub fn value() {}\nfn g() { let _ = \"crate::c\"; super::helper(); }\n",
    );
    write(
        "c.rs",
        "pub fn c() {}\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
    );
    let graph = import_graph(&src);
    let m = |s: &str| -> ModPath { s.split("::").map(str::to_owned).collect() };
    assert_eq!(graph[&m("a")], [m("b"), m("c")].into_iter().collect());
    assert_eq!(graph[&m("b")], [m("x::y")].into_iter().collect());
    // A child using its parent (x::y -> x) is no edge; a string, a comment
    // and a test module name nothing.
    assert_eq!(graph[&m("x::y")], [m("a")].into_iter().collect());
    assert!(graph[&m("c")].is_empty());
    assert_eq!(cycles(&graph), vec![vec![m("a"), m("b"), m("x::y")]]);
}
