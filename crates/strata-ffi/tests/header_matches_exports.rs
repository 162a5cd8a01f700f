//! The hand-maintained `include/strata.h` must declare exactly the functions
//! the crate exports (`#[no_mangle] extern "C"`) with as many parameters as
//! each takes, and its status codes must
//! equal the crate's constants. `scripts/test-fio.sh` checks the built
//! `.so`'s dynamic symbols against the header as well.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn header() -> String {
    std::fs::read_to_string(crate_dir().join("include/strata.h")).unwrap()
}

fn header_functions() -> BTreeSet<String> {
    header_arities().into_keys().collect()
}

/// Parameters in a comma-separated list (`void` or nothing is 0).
fn count_params(list: &str) -> usize {
    let list = list.trim();
    if list.is_empty() || list == "void" {
        return 0;
    }
    list.split(',').filter(|p| !p.trim().is_empty()).count()
}

/// Each function the header declares, with its number of parameters.
fn header_arities() -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    // Strip /* */ comments, then look at each `extern ... name(` declaration.
    let text = header();
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..]
            .split_once("*/")
            .map_or("", |(_, after)| after);
    }
    code.push_str(rest);
    for decl in code.split(';') {
        let Some(at) = decl.find("extern ") else {
            continue;
        };
        let decl = &decl[at..];
        if !decl.contains('(') || decl.starts_with("extern \"C\"") {
            continue;
        }
        let open = decl.find('(').unwrap();
        let before_paren = &decl[..open];
        let name = before_paren
            .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap();
        let params = &decl[open + 1..decl.rfind(')').unwrap()];
        out.insert(name.to_string(), count_params(params));
    }
    out
}

fn exported_functions() -> BTreeSet<String> {
    exported_arities().into_keys().collect()
}

/// Each `#[no_mangle] extern "C" fn` of the crate, with its number of parameters.
fn exported_arities() -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(crate_dir().join("src")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let mut pending = false;
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let start = offset;
            offset += line.len();
            let line = line.trim();
            if line == "#[no_mangle]" {
                pending = true;
            } else if pending && line.contains("extern \"C\" fn ") {
                let rest = &text[start + text[start..].find("fn ").unwrap() + 3..];
                let open = rest.find('(').unwrap();
                let close = rest.find(')').unwrap(); // no parentheses inside Rust C-ABI parameter types here
                out.insert(
                    rest[..open].to_string(),
                    count_params(&rest[open + 1..close]),
                );
                pending = false;
            }
        }
    }
    out
}

#[test]
fn header_and_exports_agree_on_parameter_counts() {
    let h = header_arities();
    let e = exported_arities();
    let differ: Vec<_> = h
        .iter()
        .filter_map(|(name, n)| match e.get(name) {
            Some(m) if m != n => Some(format!("{name}: header {n}, Rust {m}")),
            _ => None,
        })
        .collect();
    assert!(differ.is_empty(), "{differ:?}");
    assert_eq!(h.get("strata_multi_get"), Some(&9));
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let h = header_functions();
    let e = exported_functions();
    assert!(!e.is_empty());
    assert_eq!(
        h,
        e,
        "only in header: {:?}; only exported: {:?}",
        h.difference(&e).collect::<Vec<_>>(),
        e.difference(&h).collect::<Vec<_>>()
    );
}

#[test]
fn header_status_codes_equal_the_crate_constants() {
    let consts = [
        ("STRATA_OK", strata_ffi::STRATA_OK),
        ("STRATA_NOT_FOUND", strata_ffi::STRATA_NOT_FOUND),
        (
            "STRATA_INVALID_ARGUMENT",
            strata_ffi::STRATA_INVALID_ARGUMENT,
        ),
        ("STRATA_CONFIG_ERROR", strata_ffi::STRATA_CONFIG_ERROR),
        ("STRATA_IO_ERROR", strata_ffi::STRATA_IO_ERROR),
        ("STRATA_CORRUPTION", strata_ffi::STRATA_CORRUPTION),
        (
            "STRATA_BUFFER_TOO_SMALL",
            strata_ffi::STRATA_BUFFER_TOO_SMALL,
        ),
        ("STRATA_CLOSED", strata_ffi::STRATA_CLOSED),
        ("STRATA_PANIC", strata_ffi::STRATA_PANIC),
        ("STRATA_ERROR", strata_ffi::STRATA_ERROR),
        ("STRATA_NOT_DURABLE", strata_ffi::STRATA_NOT_DURABLE),
        ("STRATA_CANCELLED", strata_ffi::STRATA_CANCELLED),
        ("STRATA_READ_ONLY", strata_ffi::STRATA_READ_ONLY),
    ];
    let h = header();
    let defines: Vec<(String, i32)> = h
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "#define").then_some(())?;
            let name = w.next()?;
            let value = w.next()?.parse().ok()?;
            Some((name.to_string(), value))
        })
        .collect();
    assert_eq!(defines.len(), consts.len(), "{defines:?}");
    for (name, value) in consts {
        assert!(
            defines.contains(&(name.to_string(), value)),
            "{name} = {value} not in header: {defines:?}"
        );
    }
}
