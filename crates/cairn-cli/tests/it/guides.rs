//! Every `sh` block of the README and the guides in `docs/` runs as
//! written, in a fresh directory with `examples/` beside it and `cairn` on
//! the PATH: each `cairn` line must exit as its comment says (`exit N`), or
//! else with 0 or 4 (a run waiting for a person). `RUN_ID` stands for the
//! newest run and `WAIT_ID` for the oldest open wait, as a reader would
//! copy them; each block starts on a database holding one finished run,
//! as a reader's would. Blocks that start a server or a worker (they run until
//! stopped) or install the binary are skipped, and listed: the curl
//! walkthrough test covers `cairn serve`, and the worker tests `cairn
//! worker`; so are backups and restores (their tools and a backup taken
//! before). Blocks with no `cairn` line (cargo, curl, scripts) are not run
//! here: the walkthrough test runs the curl block as written.

use std::path::{Path, PathBuf};

use crate::support::{Case, Kind, CAIRN};

/// Lines that mark a block as not run here, and why.
const SKIPPED: [(&str, &str); 7] = [
    (
        "cairn serve",
        "runs until stopped; the curl walkthrough test serves",
    ),
    (
        "cairn worker",
        "runs until stopped; the worker tests run workers",
    ),
    (
        "--server URL",
        "needs a server; both_ways.rs runs every command against one",
    ),
    ("cargo install", "builds the binary the tests already use"),
    (
        "sqlite3 ",
        "a backup with the sqlite3 shell, which CI does not install",
    ),
    ("mv cairn.db", "a restore needs a backup taken before"),
    ("pg_dump", "a PostgreSQL backup with its own tools"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `sh` blocks of `file`: (line of the opening fence, the lines).
fn sh_blocks(file: &Path) -> Vec<(usize, Vec<String>)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut blocks = vec![];
    let mut open: Option<(usize, Vec<String>)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut open, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) if lang.trim() == "sh" => open = Some((n + 1, vec![])),
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, lines)), None) => lines.push(line.to_owned()),
            _ => {}
        }
    }
    blocks
}

/// `line` without a trailing `# comment` (a `#` outside quotes, after a
/// space), and the comment.
fn split_comment(line: &str) -> (&str, &str) {
    let mut quote = None;
    let mut prev = ' ';
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev == ' ' => return (line[..at].trim_end(), &line[at..]),
            _ => {}
        }
        prev = c;
    }
    (line.trim_end(), "")
}

/// The exit code a comment promises (`exit 4`), if any.
fn promised_exit(comment: &str) -> Option<i32> {
    let rest = comment.split("exit ").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The block as a bash script that records each command's exit code.
fn script(lines: &[String], codes: &Path) -> String {
    let mut out = String::from(
        "last_run() { cairn runs list --limit 1 --json | jq -r '.[0].id'; }\n\
         open_wait() { cairn waits list --json | jq -r '.[0].id'; }\n",
    );
    for (i, line) in lines.iter().enumerate() {
        let (command, _) = split_comment(line);
        if command.is_empty() {
            continue;
        }
        let command = command
            .replace("RUN_ID", "\"$(last_run)\"")
            .replace("WAIT_ID", "\"$(open_wait)\"");
        out.push_str(&format!(
            "{command}\necho \"{i} $?\" >> {}\n",
            codes.display()
        ));
    }
    out
}

#[test]
fn every_command_in_the_guides_runs_as_written() {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let (mut ran, mut skipped) = (0, vec![]);
    for file in &files {
        for (at, lines) in sh_blocks(file) {
            let name = format!("{}:{at}", file.file_name().unwrap().to_string_lossy());
            let skip = SKIPPED
                .iter()
                .find(|(mark, _)| lines.iter().any(|l| split_comment(l).0.contains(mark)));
            if let Some((mark, why)) = skip {
                skipped.push(format!("{name} ({mark}: {why})"));
                continue;
            }
            if !lines.iter().any(|l| l.trim_start().starts_with("cairn ")) {
                continue;
            }
            ran += run_block(&name, &lines);
        }
    }
    eprintln!("ran {ran} commands; skipped blocks: {skipped:#?}");
    assert!(ran >= 15, "only {ran} commands found in the guides");
}

/// Runs one block in a fresh directory; the number of commands it ran.
fn run_block(name: &str, lines: &[String]) -> usize {
    let case = Case::new(Kind::Sqlite);
    let home = case.path("home");
    let bin = case.path("bin");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(CAIRN, bin.join("cairn")).unwrap();
    let work = case.path("work");
    std::fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::symlink(root().join("examples"), work.join("examples")).unwrap();
    // README's first stop writes research.toml in the working directory.
    std::fs::copy(
        root().join("examples/research.toml"),
        work.join("research.toml"),
    )
    .unwrap();
    // A reader in the middle of the guides has a database with a run in it.
    let research = root().join("examples/research.toml");
    let input = r#"{"topic": "rust"}"#;
    case.cairn(&["run", research.to_str().unwrap(), "--input", input])
        .expect_code(0);
    let codes = case.path("codes");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(script(lines, &codes))
        .current_dir(&work)
        .env("PATH", path)
        .env("HOME", &home)
        .env("CAIRN_DATABASE_URL", case.url())
        .env("CAIRN_NOTES_LOG", case.path("notes.log"))
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_PROGRESS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let codes = std::fs::read_to_string(&codes).unwrap_or_default();
    let mut ran = 0;
    for record in codes.lines() {
        let (i, code) = record.split_once(' ').unwrap();
        let (i, code): (usize, i32) = (i.parse().unwrap(), code.parse().unwrap());
        let (command, comment) = split_comment(&lines[i]);
        let ok = match promised_exit(comment) {
            Some(want) => code == want,
            None => code == 0 || code == 4,
        };
        assert!(ok, "{name}: `{command}` exited {code}\nstderr:\n{stderr}");
        ran += usize::from(command.trim_start().starts_with("cairn "));
    }
    let commands = lines
        .iter()
        .filter(|l| !split_comment(l).0.is_empty())
        .count();
    assert_eq!(
        codes.lines().count(),
        commands,
        "{name}: not every line ran\n{stderr}"
    );
    ran
}
