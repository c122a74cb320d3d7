//! House rules checked on the source tree: every Rust file opens with a `//!`
//! line saying what it owns, and nothing points at files outside the
//! repository (a person who clones it must find everything it refers to).

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![];
    rust_files(&root.join("crates"), &mut files);
    rust_files(&root.join("examples"), &mut files);
    assert!(files.len() > 10, "found only {} files", files.len());
    let missing: Vec<_> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` opening line: {missing:?}"
    );
}

/// Files a reader follows references in: Rust, Markdown, TOML, shell
/// scripts (by extension or by a `#!` line) and the justfile. Build output
/// and git's own files are skipped.
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                text_files(&path, out);
            }
        } else if name == "justfile"
            || path
                .extension()
                .is_some_and(|e| ["rs", "md", "toml", "sh"].iter().any(|x| e == *x))
            || (path.extension().is_none()
                && std::fs::read(&path).is_ok_and(|b| b.starts_with(b"#!")))
        {
            out.push(path);
        }
    }
}

/// What on `line` points outside the repository, if anything: the folder
/// beside it where the model, the style guide and the issue seeds used to
/// live, or a seed by number (three digits). The needles are assembled so
/// this file does not match itself.
fn outside_reference(line: &str) -> Option<String> {
    let folder = ["sha", "red"].concat();
    let mut needles = vec![format!("../{folder}")];
    for name in ["DESIGN.md", "STYLE.md", "seeds"] {
        needles.push(format!("{folder}/{name}"));
    }
    if let Some(n) = needles.into_iter().find(|n| line.contains(n.as_str())) {
        return Some(n);
    }
    let seed = "seed ";
    let lower = line.to_ascii_lowercase();
    lower.match_indices(seed).find_map(|(at, _)| {
        let rest = &lower.as_bytes()[at + seed.len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        (digits == 3).then(|| line[at..at + seed.len() + 3].to_owned())
    })
}

#[test]
fn no_reference_leaves_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![];
    text_files(&root, &mut files);
    files.sort();
    assert!(files.len() > 10, "found only {} files", files.len());
    let mut found = vec![];
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let shown = file.strip_prefix(&root).unwrap_or(file).display();
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = outside_reference(line) {
                found.push(format!("{shown}:{}: `{what}` in: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "references to files outside the repository (the model is docs/DESIGN.md):\n{}",
        found.join("\n")
    );
}
