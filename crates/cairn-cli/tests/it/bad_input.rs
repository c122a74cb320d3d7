//! Bad input: each mistake gets a clear message on stderr naming the
//! problem, a non-zero exit (2 for bad input, 1 for an unreachable database)
//! and writes nothing: a missing SQLite file stays missing.

use std::time::{Duration, Instant};

use crate::support::{agent_sh, crew_toml, Case, Kind, Out};

both_backends!(
    unknown_run_id_is_not_found,
    runs_events_of_an_unknown_run_is_not_found,
    run_id_that_is_not_a_uuid_is_refused,
);

/// A run id no database has.
const UNKNOWN: &str = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

/// A case whose SQLite file does not exist yet.
fn fresh() -> Case {
    let case = Case::new(Kind::Sqlite);
    assert!(!case.sqlite_file().exists());
    case
}

/// Asserts nothing was written: no database file, no WAL, no default db.
#[track_caller]
fn assert_nothing_written(case: &Case) {
    let file = case.sqlite_file();
    for f in [
        file.clone(),
        file.with_extension("db-wal"),
        file.with_extension("db-shm"),
        case.path("cairn.db"),
    ] {
        assert!(!f.exists(), "{} was created", f.display());
    }
}

/// A valid one-step crew.
fn good_crew(case: &Case) -> String {
    let agents = [agent_sh("only", "cat > /dev/null; echo '{}'")];
    case.write("good.toml", &crew_toml("good", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

/// `cairn run FILE` where FILE holds `toml`.
fn run_crew_text(case: &Case, toml: &str) -> Out {
    let crew = case.write("bad.toml", toml);
    case.cairn(&["run", crew.to_str().unwrap()])
}

#[test]
fn malformed_crew_toml_is_refused_in_one_line() {
    let case = fresh();
    let out = run_crew_text(
        &case,
        "name = \"x\"\nversion = \"1\"\n[[agents]\nrole = \"a\"\n",
    )
    .expect_code(2);
    out.expect_one_line_error(&["crew", "not valid", "line 3"]);
    assert_nothing_written(&case);
}

#[test]
fn duplicate_roles_are_refused() {
    let case = fresh();
    let agents = [agent_sh("twin", "true"), agent_sh("twin", "true")];
    let out = run_crew_text(&case, &crew_toml("dup", &agents)).expect_code(2);
    out.expect_one_line_error(&["twin", "more than once"]);
    assert_nothing_written(&case);
}

#[test]
fn unknown_agent_kind_is_refused() {
    let case = fresh();
    let toml = "name = \"k\"\nversion = \"1\"\n\n[[agents]]\nrole = \"a\"\nkind = \"telepathy\"\n";
    let out = run_crew_text(&case, toml).expect_code(2);
    out.expect_one_line_error(&["telepathy", "`a`"]);
    assert_nothing_written(&case);
}

/// `cairn ARGS` is refused (exit code 2) in one line naming `needles`,
/// having written nothing.
#[track_caller]
fn refused(case: &Case, args: &[&str], needles: &[&str]) {
    let out = case.cairn(args).expect_code(2);
    out.expect_one_line_error(needles);
    assert_nothing_written(case);
}

#[test]
fn missing_crew_file_is_refused() {
    let case = fresh();
    let missing = case.path("nowhere.toml");
    refused(
        &case,
        &["run", missing.to_str().unwrap()],
        &["nowhere.toml"],
    );
}

#[test]
fn malformed_input_json_is_refused() {
    let case = fresh();
    let crew = good_crew(&case);
    let args = ["run", &crew, "--input", "{\"topic\": "];
    refused(&case, &args, &["--input", "not valid JSON"]);
}

#[test]
fn input_from_a_missing_file_is_refused() {
    let case = fresh();
    let crew = good_crew(&case);
    let missing = case.path("missing-input.json");
    let arg = format!("@{}", missing.display());
    let args = ["run", &crew, "--input", &arg];
    refused(&case, &args, &["--input", "missing-input.json"]);
}

#[test]
fn database_url_that_does_not_parse_is_refused() {
    let case = fresh();
    let crew = good_crew(&case);
    for args in [
        vec!["run", crew.as_str(), "--db", "mysql://x"],
        vec!["runs", "list", "--db", "mysql://x"],
        vec!["--db", "mysql://x", "runs", "show", UNKNOWN],
    ] {
        let out = case.raw(&args, &[]).expect_code(2);
        out.expect_one_line_error(&["mysql://x", "not a database URL"]);
    }
    assert_nothing_written(&case);
}

#[test]
fn database_that_does_not_answer_is_named_without_its_password() {
    let case = fresh();
    let crew = good_crew(&case);
    let url = "postgres://postgres:hunter2@127.0.0.1:1/test";
    for args in [
        vec!["runs", "list", "--db", url],
        vec!["run", crew.as_str(), "--db", url],
    ] {
        let started = Instant::now();
        let out = case.raw(&args, &[]).expect_code(1);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
        out.expect_one_line_error(&["127.0.0.1:1"]);
        assert!(
            !out.stderr.contains("hunter2"),
            "the password leaked: {}",
            out.stderr
        );
    }
    assert_nothing_written(&case);
}

#[test]
fn read_commands_refuse_a_missing_sqlite_file_and_do_not_create_it() {
    let case = fresh();
    for args in [
        vec!["runs", "list"],
        vec!["runs", "list", "--json"],
        vec!["runs", "show", UNKNOWN],
        vec!["runs", "events", UNKNOWN],
        vec!["resume", UNKNOWN],
    ] {
        let out = case.cairn(&args);
        assert_ne!(out.code(), Some(0), "cairn {args:?} succeeded: {out:?}");
        out.expect_one_line_error(&["does not exist"]);
        assert_nothing_written(&case);
    }
    // The default database (`cairn.db` in the working directory) alike.
    let out = case.raw(&["runs", "list"], &[]);
    assert_ne!(out.code(), Some(0), "{out:?}");
    out.expect_one_line_error(&["cairn.db", "does not exist"]);
    assert_nothing_written(&case);
}

/// ARCHITECTURE.md: the CLI "validates everything the user typed before
/// opening the database". A typo in a read command's arguments must be
/// named as such, not hidden behind the state of the database.
#[test]
fn read_commands_validate_arguments_before_opening_the_database() {
    let case = fresh();
    for (args, needle) in [
        (vec!["resume", "not-a-uuid"], "not-a-uuid"),
        (vec!["runs", "show", "not-a-uuid"], "not-a-uuid"),
        (vec!["runs", "events", "not-a-uuid"], "not-a-uuid"),
        (vec!["runs", "list", "--status", "bogus"], "bogus"),
    ] {
        refused(&case, &args, &[needle]);
    }
}

#[test]
fn command_line_usage_errors_exit_2() {
    let case = fresh();
    for args in [
        vec!["frobnicate"],
        vec!["run"],
        vec!["runs", "list", "--limit", "many"],
        vec!["runs", "list", "--no-such-flag"],
    ] {
        let out = case.cairn(&args);
        assert_eq!(out.code(), Some(2), "cairn {args:?}: {out:?}");
        assert!(!out.stderr.trim().is_empty(), "cairn {args:?}: {out:?}");
        assert_nothing_written(&case);
    }
}

/// A database that exists (one run in it).
fn with_one_run(kind: Kind) -> Case {
    let case = Case::new(kind);
    let crew = good_crew(&case);
    case.cairn(&["run", &crew]).expect_code(0);
    case
}

fn unknown_run_id_is_not_found(kind: Kind) {
    let case = with_one_run(kind);
    let before = case.list();
    for args in [vec!["runs", "show", UNKNOWN], vec!["resume", UNKNOWN]] {
        let out = case.cairn(&args).expect_code(2);
        out.expect_one_line_error(&[UNKNOWN, "not found"]);
    }
    assert_eq!(case.list(), before);
}

fn runs_events_of_an_unknown_run_is_not_found(kind: Kind) {
    let case = with_one_run(kind);
    let out = case.cairn(&["runs", "events", UNKNOWN]).expect_code(2);
    out.expect_one_line_error(&[UNKNOWN, "not found"]);
}

fn run_id_that_is_not_a_uuid_is_refused(kind: Kind) {
    let case = with_one_run(kind);
    let before = case.list();
    for args in [
        vec!["runs", "show", "not-a-uuid"],
        vec!["runs", "events", "not-a-uuid"],
        vec!["resume", "not-a-uuid"],
        vec!["resume", "not-a-uuid", "--crew", "whatever.toml"],
    ] {
        let out = case.cairn(&args).expect_code(2);
        out.expect_one_line_error(&["not-a-uuid", "not a run id"]);
    }
    let out = case
        .cairn(&["runs", "list", "--status", "bogus"])
        .expect_code(2);
    out.expect_one_line_error(&["bogus"]);
    assert_eq!(case.list(), before);
}
