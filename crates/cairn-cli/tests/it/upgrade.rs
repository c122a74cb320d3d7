//! A deploy of this version over databases earlier releases made: runs
//! in every state a deploy meets (succeeded, waiting for a person, failed,
//! queued, and killed mid-step under the old release's lease format),
//! written by the binaries of releases `ad95b9c` and `cd046a2` (the last
//! before crew versions were stored) on SQLite and on PostgreSQL
//! (`scripts/make-upgrade-fixture`, which the next release runs again with
//! this one's binary). This version opens them, reads them, finds each
//! run's crew version among the stored ones, and carries every run on:
//! nothing is lost, and no finished step runs again.

use std::collections::HashMap;
use std::path::PathBuf;

use cairn_testkit::{Kind, TestDb};

use crate::support::{self, Case};

both_backends!(
    a_database_of_release_ad95b9c_carries_on,
    a_database_of_release_cd046a2_carries_on,
);

fn a_database_of_release_ad95b9c_carries_on(kind: Kind) {
    a_database_of_an_earlier_release_carries_on(kind, "ad95b9c")
}

fn a_database_of_release_cd046a2_carries_on(kind: Kind) {
    a_database_of_an_earlier_release_carries_on(kind, "cd046a2")
}

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

fn a_database_of_an_earlier_release_carries_on(kind: Kind, rev: &str) {
    let (case, ids) = old_database(kind, rev);
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

    // Every run's crew version is among the stored ones (the migration
    // filled them in), with the unfinished runs counted.
    let crews = case
        .cairn(&["crews", "list", "--json"])
        .expect_code(0)
        .json();
    let crews = crews.as_array().unwrap();
    let mut unfinished = 0;
    for run in &listed {
        let stored = crews
            .iter()
            .find(|c| c["fingerprint"] == run["crew_fingerprint"])
            .unwrap_or_else(|| panic!("no stored version for {run:#}: {crews:#?}"));
        assert_eq!(stored["name"], run["crew"]);
        assert_eq!(stored["version"], run["crew_version"]);
        unfinished += u64::from(run["status"] != "succeeded");
    }
    let counted: u64 = crews
        .iter()
        .map(|c| c["unfinished"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, unfinished, "{crews:#?}");

    // A run remembers its crew file's directory (since `cd046a2`); that
    // release's fixture was made in a directory gone now, so its command
    // steps resume with the crew files copied here (`--crew`: the same
    // fingerprint, the directory of the file given), as a user's would
    // after moving them. Older runs run in the working directory.
    let crew = |name: &str| -> Vec<String> {
        let file = fixture(rev).join(format!("{name}.toml"));
        match file.exists() {
            true => {
                let here = case.path(&format!("{name}.toml"));
                std::fs::copy(&file, &here).unwrap();
                vec!["--crew".into(), here.to_str().unwrap().to_owned()]
            }
            false => vec![],
        }
    };
    let with = |args: &[&str], crew: &[String]| -> Vec<String> {
        args.iter()
            .map(|a| a.to_string())
            .chain(crew.iter().cloned())
            .collect()
    };
    let cairn = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        case.cairn(&args)
    };

    // The run killed under the old release's lease (long expired): a plain
    // resume takes it over and finishes it; its finished first step stays.
    let killed = case.show(id("killed"));
    let first_finished = support::step(&killed, 0)["finished_at"].clone();
    cairn(with(&["resume", id("killed")], &crew("killed"))).expect_code(0);
    let resumed = case.show(id("killed"));
    assert_eq!(resumed["status"], "succeeded");
    assert_eq!(support::step(&resumed, 0)["finished_at"], first_finished);
    assert_eq!(support::step(&resumed, 0)["attempt"], 1);

    // The queued run executes; the failed one is retried (and fails again,
    // as its crew says); the waiting one takes its answers.
    cairn(with(&["resume", id("queued")], &crew("steps"))).expect_code(0);
    cairn(with(&["runs", "retry", id("failed")], &crew("fail"))).expect_code(3);
    let failed = case.show(id("failed"));
    let error = support::step(&failed, 0)["error"]["message"].to_string();
    assert!(
        error.contains("exit"),
        "failed as its crew says: {failed:#}"
    );
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
