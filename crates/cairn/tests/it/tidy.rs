//! House rules checked on the source tree: every Rust file opens with a `//!`
//! line saying what it owns, and nothing points at files outside the
//! repository (a person who clones it must find everything it refers to).
//! And the architecture's guard rails: only storage (and the bench and the
//! test kit) names a database driver (and sqlx's MySQL driver, with `rsa`,
//! stays out of Cargo.lock), the server and the CLI reach the engine only
//! through the `cairn` facade, `src` files and functions stay short, and
//! every dependency is versioned once, in the root `[workspace.dependencies]`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::workspace_root;

use serde_json::Value;

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

/// `cargo metadata --no-deps` of the workspace: its crates and what each
/// declares (inheritance from `[workspace.dependencies]` already resolved).
fn metadata() -> Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--no-deps", "--offline"])
        .args(["--format-version", "1"])
        .arg("--manifest-path")
        .arg(workspace_root().join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every workspace crate as (name, declared dependencies as (package name,
/// kind: "normal", "dev" or "build")).
fn workspace_crates() -> BTreeMap<String, Vec<(String, String)>> {
    let meta = metadata();
    let mut crates = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let deps = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let kind = d["kind"].as_str().unwrap_or("normal").to_owned();
                (d["name"].as_str().unwrap().to_owned(), kind)
            })
            .collect();
        crates.insert(package["name"].as_str().unwrap().to_owned(), deps);
    }
    assert!(crates.len() > 5, "found only {} crates", crates.len());
    crates
}

#[test]
fn only_storage_names_a_database_driver() {
    // Storage owns SQL; the bench measures the reference commit through
    // rusqlite and sqlx, and the test kit makes and drops test databases.
    // cairn-sqlx is sqlx without MySQL: what the others name as `sqlx`.
    const MAY: [&str; 4] = [
        "cairn-checkpoint",
        "cairn-bench",
        "cairn-testkit",
        "cairn-sqlx",
    ];
    let driver = |name: &str| {
        name == "rusqlite"
            || name == "libsqlite3-sys"
            || name.starts_with("sqlx")
            || name == "cairn-sqlx"
    };
    let mut found = vec![];
    for (krate, deps) in workspace_crates() {
        for (dep, kind) in deps {
            if driver(&dep) && !MAY.contains(&krate.as_str()) {
                found.push(format!("{krate} depends on {dep} ({kind})"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "only {MAY:?} may name a database driver; SQL belongs in cairn-checkpoint:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_mysql_driver_in_the_lock() {
    // sqlx's MySQL driver brings `rsa` (RUSTSEC-2023-0071, no fix) into
    // Cargo.lock; it comes back with the `sqlx` crate itself or with a
    // feature of sqlx-macros other than `migrate` (crates/cairn-sqlx).
    let lock = std::fs::read_to_string(workspace_root().join("Cargo.lock")).unwrap();
    let found: Vec<_> = ["rsa", "sqlx-mysql", "sqlx"]
        .into_iter()
        .filter(|name| lock.lines().any(|l| l == format!("name = \"{name}\"")))
        .collect();
    assert!(
        found.is_empty(),
        "Cargo.lock has {found:?} again: name sqlx through cairn-sqlx only"
    );
}

#[test]
fn server_and_cli_name_only_the_facade() {
    // What the server and the CLI may name among the workspace's crates
    // today, as (crate, dependency, kind). Besides the `cairn` facade: the
    // server serves the console's pages (cairn-console sits beside it, above
    // the facade), the CLI's `serve` runs the server, and the test kit and
    // the history checker (pure functions, no engine) are test-only
    // helpers. Naming anything lower (cairn-core, cairn-checkpoint,
    // cairn-scheduler, ...) bypasses the facade.
    const ALLOWED: [(&str, &str, &str); 8] = [
        ("cairn-server", "cairn", "normal"),
        ("cairn-server", "cairn-console", "normal"),
        ("cairn-server", "cairn-testkit", "dev"),
        ("cairn-cli", "cairn", "normal"),
        ("cairn-cli", "cairn-server", "normal"),
        ("cairn-cli", "cairn", "dev"),
        ("cairn-cli", "cairn-testkit", "dev"),
        ("cairn-cli", "cairn-history", "dev"),
    ];
    let crates = workspace_crates();
    let mut found = vec![];
    for krate in ["cairn-server", "cairn-cli"] {
        let deps = crates.get(krate).unwrap_or_else(|| panic!("no {krate}"));
        for (dep, kind) in deps {
            let allowed = ALLOWED.contains(&(krate, dep.as_str(), kind.as_str()));
            if crates.contains_key(dep) && !allowed {
                found.push(format!("{krate} depends on {dep} ({kind})"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the server and the CLI reach the engine through the `cairn` facade:\n{}",
        found.join("\n")
    );
}

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 150;

/// Today's offenders, to be split and then struck off: a file by its path
/// from the root, a function as `path::name` (every function of that name in
/// the file). An entry that no longer offends fails the test too, so the
/// list only shrinks.
const LONG_ALLOWED: [&str; 3] = [
    "crates/cairn-bench/src/main.rs",
    "crates/cairn-scheduler/src/outcome/tests.rs::a_result_decides_its_outcome",
    "crates/cairn-scheduler/src/outcome/tests.rs::an_outcome_commits_its_rows_and_events",
];

/// The name of the function `line` starts, if it starts one: `fn`, after any
/// of `pub`, `pub(...)`, `default`, `const`, `async`, `unsafe`, `extern "C"`.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    loop {
        let word_end = rest.find(|c: char| !c.is_alphanumeric() && c != '_');
        let word = &rest[..word_end.unwrap_or(rest.len())];
        let after = &rest[word.len()..];
        match word {
            "pub" if after.starts_with('(') => rest = &after[after.find(')')? + 1..],
            "pub" | "default" | "const" | "async" | "unsafe" | "extern" => rest = after,
            "fn" => {
                let name = after.trim_start();
                let end = name
                    .find(|c: char| !c.is_alphanumeric() && c != '_')
                    .unwrap_or(name.len());
                return (end > 0 && after.starts_with(' ')).then(|| &name[..end]);
            }
            _ if rest.starts_with('"') => rest = &rest[1 + rest[1..].find('"')? + 1..],
            _ => return None,
        }
        rest = rest.trim_start();
    }
}

/// Each function in `text` as (name, first line, length in lines), by a line
/// scanner, not a parser: a function starts on a line that begins with `fn`
/// (after its qualifiers) at any indentation, its body at the first `{` from
/// there (a `;` ending a line first means a declaration without one), and it
/// ends on the first line after that which is exactly its indentation and
/// `}` (or on its first line, when that ends with `}`). Limits: it relies on
/// rustfmt's layout; a line that is exactly that indentation and `}` inside a
/// multi-line string ends a function early; functions generated by macros
/// are not seen; closures are part of their function; a nested function is
/// counted both alone and inside its parent.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = vec![];
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let indent = &line[..line.len() - line.trim_start().len()];
        let Some(body) = lines[start..]
            .iter()
            .position(|l| l.contains('{') || l.trim_end().ends_with(';'))
            .map(|at| start + at)
            .filter(|&at| lines[at].contains('{'))
        else {
            continue;
        };
        let closing = |at: usize| {
            let l = lines[at].trim_end();
            (at == start && l.ends_with('}')) || l.strip_prefix(indent) == Some("}")
        };
        if let Some(end) = (body..lines.len()).find(|&at| closing(at)) {
            found.push((name.to_owned(), start + 1, end - start + 1));
        }
    }
    found
}

#[test]
fn source_files_and_functions_stay_short() {
    let root = workspace_root();
    let mut files = vec![];
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    assert!(files.len() > 10, "found only {} files", files.len());
    let mut long = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            long.insert(
                shown.clone(),
                format!("{n} lines (at most {MAX_FILE_LINES})"),
            );
        }
        for (name, at, n) in functions(&text) {
            if n > MAX_FN_LINES {
                long.insert(
                    format!("{shown}::{name}"),
                    format!("fn at line {at}: {n} lines (at most {MAX_FN_LINES})"),
                );
            }
        }
    }
    let new: Vec<_> = long
        .iter()
        .filter(|(what, _)| !LONG_ALLOWED.contains(&what.as_str()))
        .map(|(what, why)| format!("{what}: {why}"))
        .collect();
    let stale: Vec<_> = LONG_ALLOWED
        .iter()
        .filter(|what| !long.contains_key(**what))
        .collect();
    assert!(
        new.is_empty(),
        "too long; split it (the allow-list is for today's offenders only):\n{}",
        new.join("\n")
    );
    assert!(
        stale.is_empty(),
        "no longer too long: strike these off LONG_ALLOWED in {}: {stale:?}",
        file!()
    );
}

/// `line` up to a `#` comment that is not inside a string.
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    for (at, c) in line.char_indices() {
        match c {
            '"' => in_string = !in_string,
            '#' if !in_string => return &line[..at],
            _ => {}
        }
    }
    line
}

/// What is wrong with one dependency declared in `manifest` as `key = value`
/// (`value` a whole inline table, or a `[dependencies.NAME]` table written as
/// one), if anything: it must inherit from the workspace, or be a path to a
/// workspace crate.
fn unversioned_problem(
    manifest: &Path,
    members: &BTreeSet<PathBuf>,
    key: &str,
    value: &str,
) -> Option<String> {
    let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    if let Some((_, sub)) = key.split_once('.') {
        return match sub {
            "workspace" if compact == "true" => None,
            "features" | "optional" | "default-features" => None,
            _ => Some(format!("`{key}`")),
        };
    }
    if !compact.starts_with('{') {
        return Some("a version of its own".into());
    }
    if compact.contains("workspace=true") {
        return None;
    }
    let path = compact
        .split_once("path=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(path, _)| path);
    match path {
        Some(path) if !compact.contains("version=") && !compact.contains("git=") => {
            let dir = manifest.parent().unwrap().join(path);
            let member = dir.canonicalize().is_ok_and(|d| members.contains(&d));
            (!member).then(|| format!("a path outside the workspace: {path}"))
        }
        _ => Some("a version of its own".into()),
    }
}

/// Every dependency `manifest` declares, as (section, key, value), the
/// value of a multi-line inline table or of a `[dependencies.NAME]` table
/// joined into one inline table.
fn declared_dependencies(manifest: &str) -> Vec<(String, String, String)> {
    let is_deps = |section: &str| {
        ["dependencies", "dev-dependencies", "build-dependencies"]
            .iter()
            .any(|d| section == *d || section.ends_with(&format!(".{d}")))
    };
    let mut found: Vec<(String, String, String)> = vec![];
    let mut section = String::new();
    let mut table_of: Option<usize> = None;
    let mut open = 0i32;
    for raw in manifest.lines() {
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if open > 0 {
            found.last_mut().unwrap().2.push_str(line);
            open += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            continue;
        }
        if line.starts_with('[') {
            section = line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned();
            table_of = None;
            if let Some((parent, name)) = section.rsplit_once('.') {
                if is_deps(parent) && !is_deps(&section) {
                    found.push((parent.to_owned(), name.trim_matches('"').into(), "{".into()));
                    table_of = Some(found.len() - 1);
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim().replace('"', ""), value.trim());
        if let Some(at) = table_of {
            found[at].2.push_str(&format!("{key}={value},"));
        } else if is_deps(&section) {
            open = value.matches('{').count() as i32 - value.matches('}').count() as i32;
            found.push((section.clone(), key, value.to_owned()));
        }
    }
    for (_, _, value) in &mut found {
        if value.starts_with('{') && !value.ends_with('}') {
            value.push('}');
        }
    }
    found
}

#[test]
fn every_dependency_is_versioned_in_the_workspace() {
    let root = workspace_root();
    let meta = metadata();
    let manifests: Vec<PathBuf> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p["manifest_path"].as_str().unwrap()))
        .collect();
    let members: BTreeSet<PathBuf> = manifests
        .iter()
        .map(|m| m.parent().unwrap().canonicalize().unwrap())
        .collect();
    assert!(manifests.len() > 5, "found only {} crates", manifests.len());
    let mut found = vec![];
    for manifest in &manifests {
        let text = std::fs::read_to_string(manifest).unwrap();
        let shown = manifest.strip_prefix(&root).unwrap_or(manifest).display();
        for (section, key, value) in declared_dependencies(&text) {
            if let Some(why) = unversioned_problem(manifest, &members, &key, &value) {
                found.push(format!("{shown} [{section}] {key}: {why} ({value})"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "version these in the root Cargo.toml's [workspace.dependencies] and write \
         `NAME.workspace = true` or `NAME = {{ workspace = true, features = [..] }}`:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanners_see_what_they_should() {
    let code = "\
pub(crate) async fn a() {
    let x = 1;
}
impl X {
    pub unsafe extern \"C\" fn b<T>(t: T)
    where
        T: Copy,
    {
        fn nested() -> u32 { 3 }
    }
    fn declared(&self);
}
fn(u32) -> u32
";
    let found = functions(code);
    let expect = [("a", 1, 3), ("b", 5, 6), ("nested", 9, 1)];
    let expect: Vec<_> = expect.map(|(n, at, len)| (n.to_owned(), at, len)).into();
    assert_eq!(found, expect);

    let manifest = "\
[dependencies]
a.workspace = true
b = { workspace = true, features = [\"x\"] } # a comment
c = \"1\"
d = { version = \"1\",
      default-features = false }
e = { path = \"../nowhere\" }

[target.'cfg(unix)'.dev-dependencies.f]
version = \"2\"
";
    let members = BTreeSet::new();
    let here = Path::new("/crates/x/Cargo.toml");
    let bad: Vec<_> = declared_dependencies(manifest)
        .into_iter()
        .filter(|(_, key, value)| unversioned_problem(here, &members, key, value).is_some())
        .map(|(section, key, _)| format!("{section} {key}"))
        .collect();
    let expect = [
        "dependencies c",
        "dependencies d",
        "dependencies e",
        "target.'cfg(unix)'.dev-dependencies f",
    ];
    assert_eq!(bad, expect);
}
