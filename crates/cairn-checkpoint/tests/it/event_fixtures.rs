//! Every event stored by an older release decodes as its kind's typed
//! payload and encodes back to the same JSON: the upgrade fixtures
//! (`crates/cairn-cli/tests/fixtures/upgrade-*`), each a SQLite database
//! (`cairn.db`, read from a copy, read-only) and a PostgreSQL dump
//! (`postgres.sql`, whose `INSERT` rows of the events table are parsed).

use std::path::{Path, PathBuf};

use cairn_core::{EventData, EventKind};
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-cli/tests/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("upgrade-"))
        })
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "no upgrade fixture under {}",
        root.display()
    );
    dirs
}

/// Why one stored event (`kind`, `data` as stored) is not typed exactly,
/// if it is not.
fn check(kind: &str, data: &str) -> Option<String> {
    let why = |what: String| Some(format!("`{kind}` {data}: {what}"));
    let Some(kind) = EventKind::parse(kind) else {
        return why("an unknown kind".into());
    };
    let value: Value = match serde_json::from_str(data) {
        Ok(v) => v,
        Err(e) => return why(format!("not JSON: {e}")),
    };
    match EventData::decode(kind, &value) {
        Err(e) => why(e.to_string()),
        Ok(typed) if typed.to_value() != value => {
            why(format!("encodes back as {}", typed.to_value()))
        }
        Ok(_) => None,
    }
}

/// The `(kind, data)` of every row of `cairn.db`'s events table, read from
/// a copy of the file opened read-only.
fn sqlite_events(dir: &Path) -> Vec<(String, String)> {
    // A copy in a directory dropped at the end: the fixture is never
    // opened, and nothing is left behind.
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
    let copy_dir = tmp.path();
    let copy = copy_dir.join("cairn.db");
    for suffix in ["", "-wal", "-shm"] {
        let from = dir.join(format!("cairn.db{suffix}"));
        let to = copy_dir.join(format!("cairn.db{suffix}"));
        let _ = std::fs::remove_file(&to);
        if from.exists() {
            std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        }
    }
    let db = rusqlite::Connection::open_with_flags(
        &copy,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    let mut stmt = db
        .prepare("SELECT kind, data FROM events ORDER BY run_id, seq")
        .unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
    rows.unwrap_or_else(|e| panic!("{}: {e}", copy.display()))
}

/// The values of one `INSERT INTO <schema>.events VALUES (…);` line of a
/// dump (`standard_conforming_strings = on`: a quote in a string is
/// doubled, nothing else is escaped), or `None` for another line.
fn insert_values(line: &str) -> Option<Vec<String>> {
    let rest = line.strip_prefix("INSERT INTO ")?;
    let (table, rest) = rest.split_once(' ')?;
    if table.rsplit('.').next() != Some("events") {
        return None;
    }
    let body = rest.strip_prefix("VALUES (")?.strip_suffix(");")?;
    let (mut values, mut chars) = (vec![], body.chars().peekable());
    loop {
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next()? {
                    '\'' if chars.peek() == Some(&'\'') => {
                        chars.next();
                        value.push('\'');
                    }
                    '\'' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| *c != ',') {
                value.push(c);
            }
        }
        values.push(value);
        match chars.next() {
            None => return Some(values),
            Some(',') => while chars.next_if_eq(&' ').is_some() {},
            Some(_) => return None,
        }
    }
}

/// The `(kind, data)` of every events row of `postgres.sql`.
fn postgres_events(dir: &Path) -> Vec<(String, String)> {
    let path = dir.join("postgres.sql");
    let dump = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        dump.contains("SET standard_conforming_strings = on;"),
        "{}: the parser reads standard strings only",
        path.display()
    );
    assert!(
        !dump
            .lines()
            .any(|l| l.starts_with("COPY ") && l.contains(".events ")),
        "{}: a COPY of the events table (only INSERT rows are read)",
        path.display()
    );
    dump.lines()
        .filter(|l| l.starts_with("INSERT INTO "))
        .filter_map(|line| {
            let values = insert_values(line);
            let is_events = line.contains(".events VALUES");
            assert!(
                values.is_some() || !is_events,
                "{}: unreadable row {line}",
                path.display()
            );
            values
        })
        .map(|v| {
            // run_id, seq, at, kind, data
            assert_eq!(v.len(), 5, "{}: {v:?}", path.display());
            (v[3].clone(), v[4].clone())
        })
        .collect()
}

fn check_all(source: &str, events: &[(String, String)]) -> Vec<String> {
    assert!(!events.is_empty(), "{source}: no event");
    println!("{source}: {} events", events.len());
    events
        .iter()
        .filter_map(|(kind, data)| check(kind, data).map(|why| format!("{source}: {why}")))
        .collect()
}

#[test]
fn every_fixture_event_decodes_as_its_kind() {
    let mut failures = vec![];
    for dir in fixtures() {
        let original = std::fs::read(dir.join("cairn.db")).unwrap_or_default();
        let sqlite = sqlite_events(&dir);
        failures.extend(check_all(&format!("{}/cairn.db", dir.display()), &sqlite));
        let postgres = postgres_events(&dir);
        failures.extend(check_all(
            &format!("{}/postgres.sql", dir.display()),
            &postgres,
        ));
        assert_eq!(
            std::fs::read(dir.join("cairn.db")).unwrap_or_default(),
            original,
            "{}: the fixture changed",
            dir.display()
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_dump_row_reads_with_its_quotes() {
    let line = "INSERT INTO s.events VALUES ('01a2', 3, '2026-11-26 00:05:01+00', \
                'step_failed', '{\"message\": \"it''s, broken\"}');";
    let values = insert_values(line);
    assert_eq!(
        values.as_deref().map(|v| (v[1].as_str(), v[4].as_str())),
        Some(("3", "{\"message\": \"it's, broken\"}"))
    );
    assert_eq!(insert_values("INSERT INTO s.runs VALUES (1);"), None);
}

#[test]
fn an_event_not_typed_exactly_is_named() {
    let missing = check("step_retry_scheduled", r#"{"idx": 0}"#);
    assert!(missing.is_some_and(|w| w.starts_with("`step_retry_scheduled` {\"idx\": 0}")));
    let dropped = check("key_resumed", r#"{"key": "k", "extra": 1}"#);
    assert!(dropped.is_some_and(|w| w.contains("encodes back as {\"key\":\"k\"}")));
    assert!(check("no_such_kind", "{}").is_some());
    assert_eq!(check("key_resumed", r#"{"key": "k"}"#), None);
}
