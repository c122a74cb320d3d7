//! The storage contract, checked from its source: every concern trait stays
//! small (at most 12 methods), and every method of every trait is called by
//! the store's own suite (`crates/cairn-checkpoint/tests/it`, which runs on
//! both databases), so no part of the contract is reached only through the
//! engine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// Each contract trait (`pub trait X`) of `text` with its methods' names.
fn traits_of(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut traits = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("pub trait ") {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
            current = Some(name.clone());
            traits.insert(name, vec![]);
        } else if line == "}" {
            current = None;
        } else if let Some(trait_name) = &current {
            let decl = line.trim_start();
            let decl = decl.strip_prefix("async ").unwrap_or(decl);
            if let Some(rest) = decl.strip_prefix("fn ") {
                let method: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                traits.get_mut(trait_name).unwrap().push(method);
            }
        }
    }
    traits
}

/// Every contract trait: those of `contract/`.
fn contract() -> BTreeMap<String, Vec<String>> {
    let files = rust_files(&root().join("crates/cairn-checkpoint/src/contract"));
    let mut all = BTreeMap::new();
    for file in files {
        all.extend(traits_of(&std::fs::read_to_string(file).unwrap()));
    }
    all
}

#[test]
fn no_contract_trait_has_more_than_twelve_methods() {
    let traits = contract();
    assert!(traits.len() >= 12, "the scanner found only {traits:?}");
    let big: Vec<(&String, usize)> = traits
        .iter()
        .map(|(t, m)| (t, m.len()))
        .filter(|(_, n)| *n > 12)
        .collect();
    assert!(big.is_empty(), "split these by concern: {big:?}");
}

#[test]
fn the_stores_own_suite_calls_every_contract_method() {
    let suite: String = rust_files(&root().join("crates/cairn-checkpoint/tests/it"))
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let mut uncalled = vec![];
    let mut count = 0;
    for (name, methods) in contract() {
        for m in methods {
            count += 1;
            // `backend` and `live` are a store's properties, not operations.
            let called = [format!(".{m}("), format!("::{m}(")]
                .iter()
                .any(|call| suite.contains(call.as_str()));
            if !called && !["backend", "live"].contains(&m.as_str()) {
                uncalled.push(format!("{name}::{m}"));
            }
        }
    }
    assert!(count > 50, "the scanner found only {count} methods");
    assert!(
        uncalled.is_empty(),
        "contract methods no store test calls (add one to crates/cairn-checkpoint/tests/it): {uncalled:?}"
    );
}
