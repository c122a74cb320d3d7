//! The codemap and the module graph, checked: `docs/ARCHITECTURE.md` stays
//! a codemap (at most 450 lines), every path it names exists, and every
//! storage `script/` module is in it; and no crate has a module cycle
//! (modules that use each other, siblings or cousins; a module and its own
//! ancestors do not count).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::workspace_root;

fn codemap() -> String {
    std::fs::read_to_string(workspace_root().join("docs/ARCHITECTURE.md")).unwrap()
}

/// The backquoted spans of `text` that name a file or directory of the
/// repository: a `/` in them, no space or `::`, ending in a known
/// extension or a `/`.
fn named_paths(text: &str) -> BTreeSet<String> {
    let exts = [".rs", ".md", ".sql", ".toml", ".json", ".yml", "/"];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.contains('/') && !s.contains([' ', '<', '*', '{']) && !s.contains("::"))
        .filter(|s| !s.starts_with('/') && !s.contains("://"))
        .filter(|s| exts.iter().any(|e| s.ends_with(e)))
        .map(|s| s.trim_end_matches(['.', ',']).to_owned())
        .collect()
}

#[test]
fn the_codemap_is_short_and_every_path_it_names_exists() {
    let text = codemap();
    let lines = text.lines().count();
    assert!(
        lines <= 450,
        "docs/ARCHITECTURE.md has {lines} lines: a codemap orients, at most 450"
    );
    let paths = named_paths(&text);
    assert!(paths.len() > 50, "the scanner found only {paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !workspace_root().join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "the codemap names paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_codemap_names_every_storage_script_module() {
    let text = codemap();
    let dir = workspace_root().join("crates/cairn-checkpoint/src/script");
    let mut absent = vec![];
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("crates/cairn-checkpoint/src/script/{name}");
        if name.ends_with(".rs") && name != "tests.rs" && !text.contains(&path) {
            absent.push(path);
        }
    }
    assert!(absent.is_empty(), "not in docs/ARCHITECTURE.md: {absent:?}");
}

/// Module cycles allowed: none. (A cycle that must exist for a while is
/// listed here, as `"CRATE: module module …"`, with the issue that removes
/// it.)
const KNOWN_CYCLES: &[&str] = &[];

/// A crate's modules (path segments under `src`, `lib.rs` the empty path)
/// and their files; test modules (`tests.rs`, `tests/`) are left out.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && name != "tests" {
                stack.push(path);
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut segs: Vec<String> = rel
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect();
                if matches!(segs.last().map(String::as_str), Some("mod")) {
                    segs.pop();
                }
                if segs == ["lib"] || segs == ["main"] {
                    segs.clear();
                }
                out.insert(segs, path);
            }
        }
    }
    out
}

/// The `crate::`, `super::` and `self::` paths a file's code names (its
/// `use` trees expanded one level of braces; comments and a trailing
/// `#[cfg(test)] mod` left out).
fn named_modules(text: &str) -> Vec<Vec<String>> {
    let code: String = text
        .split("#[cfg(test)]\nmod ")
        .next()
        .unwrap_or_default()
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(":: ", "::")
        .replace("{ ", "{");
    let mut out = vec![];
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[i..];
            let head: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segs: Vec<String> = head
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if rest[head.len()..].starts_with('{') {
                let body = &rest[head.len() + 1..];
                let body = &body[..body.find('}').unwrap_or(body.len())];
                for item in body.split(',') {
                    let mut more = segs.clone();
                    more.extend(
                        item.split("::")
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                    );
                    out.push(more);
                }
                segs.clear();
            }
            if !segs.is_empty() {
                out.push(segs);
            }
        }
    }
    out
}

/// The modules of `m` (in file `file`) that it names, resolved to the
/// longest known module; ancestors and descendants left out.
fn edges(
    m: &[String],
    file: &Path,
    known: &BTreeMap<Vec<String>, PathBuf>,
) -> BTreeSet<Vec<String>> {
    let is_mod_rs = matches!(
        file.file_name().and_then(|n| n.to_str()),
        Some("mod.rs" | "lib.rs" | "main.rs")
    );
    let mut out = BTreeSet::new();
    for path in named_modules(&std::fs::read_to_string(file).unwrap()) {
        let (mut base, mut segs): (Vec<String>, &[String]) = match path[0].as_str() {
            "crate" => (vec![], &path[1..]),
            "self" if is_mod_rs => (m.to_vec(), &path[1..]),
            "self" => (m.to_vec(), &path[1..]),
            _ => (m[..m.len().saturating_sub(1)].to_vec(), &path[1..]),
        };
        while segs.first().is_some_and(|s| s == "super") {
            base.pop();
            segs = &segs[1..];
        }
        let target = (0..=segs.len()).rev().find_map(|k| {
            let mut cand = base.clone();
            cand.extend_from_slice(&segs[..k]);
            known.contains_key(&cand).then_some(cand)
        });
        if let Some(t) = target.filter(|t| !t.starts_with(m) && !m.starts_with(t)) {
            out.insert(t);
        }
    }
    out
}

/// The strongly connected groups of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    let mut reach: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = BTreeMap::new();
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start];
        while let Some(v) = todo.pop() {
            for w in graph.get(v).into_iter().flatten() {
                if seen.insert(w) {
                    todo.push(w);
                }
            }
        }
        reach.insert(start, seen);
    }
    let mut groups: Vec<Vec<Vec<String>>> = vec![];
    for v in graph.keys() {
        let group: Vec<Vec<String>> = graph
            .keys()
            .filter(|w| reach[v].contains(w) && reach[w].contains(v))
            .cloned()
            .collect();
        if group.len() > 1 && !groups.contains(&group) {
            groups.push(group);
        }
    }
    groups
}

#[test]
fn no_crate_has_a_module_cycle() {
    let mut found = vec![];
    for entry in std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .flatten()
    {
        let src = entry.path().join("src");
        if !src.is_dir() {
            continue;
        }
        let known = modules(&src);
        let graph = known
            .iter()
            .map(|(m, f)| (m.clone(), edges(m, f, &known)))
            .collect();
        for group in cycles(&graph) {
            let names: Vec<String> = group.iter().map(|m| m.join("/")).collect();
            found.push(format!(
                "{}: {}",
                entry.file_name().to_string_lossy(),
                names.join(" ")
            ));
        }
    }
    found.sort();
    assert_eq!(
        found, KNOWN_CYCLES,
        "module cycles (a cycle fixed leaves KNOWN_CYCLES too)"
    );
}
