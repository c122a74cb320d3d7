//! A deploy of this version over databases an earlier release made: runs
//! in every state a deploy meets (succeeded, waiting for a person, failed,
//! queued, and killed mid-step under the old release's lease format),
//! written by release `ad95b9c`'s binary on SQLite and on PostgreSQL
//! (`scripts/make-upgrade-fixture`, which the next release runs again with
//! this one's binary). This version opens them, reads them, and carries
//! every run on: nothing is lost, and no finished step runs again.

use std::collections::HashMap;
use std::path::PathBuf;

use cairn_testkit::{Kind, TestDb};

use crate::support::{self, Case};

both_backends!(a_database_of_the_previous_release_carries_on);

/// The fixture of release `rev`.
fn fixture(rev: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/upgrade-{rev}"))
}

/// The database of `kind` as release `rev` left it, and its run ids by name.
fn old_database(kind: Kind, rev: &str) -> (Case, HashMap<String, String>) {
    let dir = fixture(rev);
    let db = support::test_db(kind);
    let env = match kind {
        Kind::Sqlite => {
            std::fs::copy(dir.join("cairn.db"), support::sqlite_path(&db.url)).unwrap();
            "sqlite.env"
        }
        Kind::Postgres => {
            let dump = std::fs::read_to_string(dir.join("postgres.sql")).unwrap();
            load(&db, &dump);
            "postgres.env"
        }
    };
    let ids = std::fs::read_to_string(dir.join(env))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (Case::with_db(db), ids)
}

fn load(db: &TestDb, dump: &str) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(db.load_dump(dump, "upgrade_fixture"));
}

fn a_database_of_the_previous_release_carries_on(kind: Kind) {
    let (case, ids) = old_database(kind, "ad95b9c");
    let id = |name: &str| ids[name].as_str();
    let status = |name: &str| case.show(id(name))["status"].as_str().unwrap().to_owned();

    // Opened (migrations checked against the old ones) and read as it was.
    case.cairn(&["doctor"]).expect_code(0);
    let listed = case.list();
    assert_eq!(listed.len(), 5, "{listed:?}");
    for (name, was) in [
        ("succeeded", "succeeded"),
        ("waiting", "waiting"),
        ("failed", "failed"),
        ("queued", "queued"),
        ("killed", "running"),
    ] {
        assert_eq!(status(name), was, "{name}");
    }
    let done = case.show(id("succeeded"));
    assert_eq!(support::step(&done, 1)["output"], "second-done");

    // The run killed under the old release's lease (long expired): a plain
    // resume takes it over and finishes it; its finished first step stays.
    let killed = case.show(id("killed"));
    let first_finished = support::step(&killed, 0)["finished_at"].clone();
    case.cairn(&["resume", id("killed")]).expect_code(0);
    let resumed = case.show(id("killed"));
    assert_eq!(resumed["status"], "succeeded");
    assert_eq!(support::step(&resumed, 0)["finished_at"], first_finished);
    assert_eq!(support::step(&resumed, 0)["attempt"], 1);

    // The queued run executes; the failed one is retried (and fails again,
    // as its crew says); the waiting one takes its answers.
    case.cairn(&["resume", id("queued")]).expect_code(0);
    case.cairn(&["runs", "retry", id("failed")]).expect_code(3);
    assert_eq!(support::step(&case.show(id("failed")), 0)["attempt"], 2);
    let wait = |run: &str| {
        let waits = case
            .cairn(&["waits", "list", "--run", run, "--json"])
            .json();
        waits[0]["id"].as_str().unwrap().to_owned()
    };
    let review = wait(id("waiting"));
    case.cairn(&["waits", "answer", &review, "--approve"])
        .expect_code(4);
    let approval = wait(id("waiting"));
    case.cairn(&["waits", "answer", &approval, "--approve"])
        .expect_code(0);
    assert_eq!(status("waiting"), "succeeded");

    // Its thread, and new runs beside the old ones.
    let thread = case.cairn(&["threads", "show", "t1", "--json"]).json();
    assert_eq!(thread["runs"].as_array().unwrap().len(), 2, "{thread}");
    let crew = case.counting_crew(2);
    case.cairn(&["run", crew.to_str().unwrap()]).expect_code(0);
    case.cairn(&["doctor"]).expect_code(0);
}
