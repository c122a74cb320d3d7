//! A crew version with a `children` step, both backends (issue 46): its
//! fingerprint leaves out every directory, so the same files loaded from
//! two places are one version (one `crews list` entry, a diff by version
//! number, a run moved from a copy that its server still offers), and a
//! database that an earlier release filled with fingerprints counting the
//! child crew's directory has them moved to the definitions' own when it is
//! opened, its runs carrying on.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{self, agent_template, Case, Kind};

both_backends!(
    a_children_crew_is_one_version_wherever_its_files_lie,
    versions_an_earlier_release_stored_are_moved_to_their_fingerprint,
);

/// Crew `topics` version `version`: `pick` (reviewed), `each` (one child
/// of `topic.toml`), `sum` (its text given).
fn topics(version: &str, sum: &str) -> String {
    let agents = [
        agent_template("pick", "rivers") + "review = true\n",
        "[[agents]]\nrole = \"each\"\nkind = \"children\"\ncrew = \"topic.toml\"\n\
         children = [{ key = \"a\", input = { t = \"rivers\" } }]\n"
            .to_owned(),
        agent_template("sum", sum),
    ];
    format!(
        "name = \"topics\"\nversion = \"{version}\"\n\n{}",
        agents.join("\n")
    )
}

/// The crew files in directory `name` of the case: `topics.toml` (1),
/// `topics-2.toml` (2: another `sum`) and the child crew `topic.toml`.
fn crew_dir(case: &Case, name: &str) -> PathBuf {
    let dir = case.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    let topic = format!(
        "name = \"topic\"\nversion = \"1\"\n\n{}",
        agent_template("write", "about {{ input.t }}")
    );
    std::fs::write(dir.join("topic.toml"), topic).unwrap();
    std::fs::write(dir.join("topics.toml"), topics("1", "sum v1")).unwrap();
    std::fs::write(dir.join("topics-2.toml"), topics("2", "sum v2")).unwrap();
    dir
}

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_owned()
}

/// `cairn run FILE`, stopped at `pick`'s review: the run id.
fn run_to_review(case: &Case, crew: &str) -> String {
    let run = case
        .cairn(&["run", crew, "--input", "{}", "--json"])
        .expect_code(4)
        .json();
    run["id"].as_str().unwrap().to_owned()
}

/// The stored versions of `topics` as (version, fingerprint, unfinished).
fn versions(case: &Case) -> Vec<(String, String, u64)> {
    let crews = case
        .cairn(&["crews", "list", "--json"])
        .expect_code(0)
        .json();
    crews
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "topics")
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap().to_owned();
            let unfinished = c["unfinished"].as_u64().unwrap();
            (text("version"), text("fingerprint"), unfinished)
        })
        .collect()
}

/// Approves the run's open review; it then runs to its end.
fn approve(case: &Case, run: &str) {
    let waits = case
        .cairn(&["waits", "list", "--run", run, "--json"])
        .json();
    let wait = waits[0]["id"].as_str().unwrap();
    case.cairn(&["waits", "answer", wait, "--approve"])
        .expect_code(0);
}

fn a_children_crew_is_one_version_wherever_its_files_lie(kind: Kind) {
    let case = Case::new(kind);
    let (here, there) = (crew_dir(&case, "crews"), crew_dir(&case, "copy"));
    let ours = run_to_review(&case, &file(&here, "topics.toml"));
    let theirs = run_to_review(&case, &file(&there, "topics.toml"));
    let v1 = versions(&case);
    assert_eq!(v1.len(), 1, "one version, two directories: {v1:?}");
    assert_eq!(v1[0].2, 2, "{v1:?}");

    // Each moved to version 2 from the other directory's file: still one.
    for (run, dir) in [(&ours, &there), (&theirs, &here)] {
        let to = file(dir, "topics-2.toml");
        let args = ["runs", "upgrade", "--crew", "topics", "--to", &to];
        let moved = case
            .cairn(&[&args[..], &["--run", run, "--json"]].concat())
            .expect_code(0)
            .json();
        assert_eq!(moved[0]["moved"], true, "{moved:#}");
    }
    let both = versions(&case);
    assert_eq!(both.len(), 2, "{both:?}");
    assert_eq!((both[1].0.as_str(), both[1].2), ("2", 2), "{both:?}");

    // A diff by version numbers: the `children` step is the same; `sum`
    // changed, and the diff says in what.
    let diff = case
        .cairn(&["crews", "diff", "topics", "1", "2", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(diff["steps"][1]["change"], "same", "{diff:#}");
    assert_eq!(diff["steps"][2]["change"], "changed", "{diff:#}");
    assert_eq!(diff["steps"][2]["fields"], serde_json::json!(["template"]));
    let text = case
        .cairn(&["crews", "diff", "topics", "1", "2"])
        .expect_code(0);
    assert!(
        text.stdout
            .contains("sum (template) -> sum (template): template"),
        "{}",
        text.stdout
    );

    // The server, loading the files of `crews`, offers the version the
    // runs moved to from `copy`: they are its own, not foreign.
    let served = support::serve(&case, &["--crews", here.to_str().unwrap()], &[]);
    let loaded = support::get(&served.listen, "/v1/crews");
    let offered: Vec<&Value> = loaded
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["fingerprint"])
        .collect();
    for run in [&ours, &theirs] {
        let stored = case.show(run)["crew_fingerprint"].clone();
        assert!(offered.contains(&&stored), "{stored} in {loaded:#}");
    }
    drop(served);

    approve(&case, &ours);
    let done = case.show(&ours);
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(support::step(&done, 2)["output"], "sum v2");

    // Another definition given the same version number: `2` names two
    // versions, and the refusal lists the fingerprints to choose from.
    let edited = case.write("topics-2b.toml", &topics("2", "sum v2, edited"));
    std::fs::copy(here.join("topic.toml"), case.path("topic.toml")).unwrap();
    let edited = edited.to_str().unwrap();
    let args = ["runs", "upgrade", "--crew", "topics", "--to", edited];
    case.cairn(&[&args[..], &["--run", &theirs]].concat())
        .expect_code(0);
    let twos: Vec<String> = versions(&case)
        .into_iter()
        .filter(|(v, _, _)| v == "2")
        .map(|(_, f, _)| f)
        .collect();
    assert_eq!(twos.len(), 2, "{twos:?}");
    let refused = case.cairn(&["crews", "diff", "topics", "1", "2"]);
    refused.expect_one_line_error(&[
        "crew `topics` has 2 stored versions `2`, one per fingerprint",
        "name one by its fingerprint",
        &twos[0],
        &twos[1],
    ]);
    assert_eq!(refused.code(), Some(2));
    let by_print = &twos[1].trim_start_matches("sha256:")[..10];
    let diff = case
        .cairn(&["crews", "diff", "topics", "1", by_print, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(diff["to"]["fingerprint"], twos[1].as_str(), "{diff:#}");
}

/// The fingerprint a release before issue 46's fix gave a stored
/// definition: the SHA-256 of its JSON without its own `dir` only.
fn earlier_fingerprint(def: &Value) -> String {
    let mut def = def.clone();
    def.as_object_mut().unwrap().remove("dir");
    let mut sum = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    let mut stdin = sum.stdin.take().unwrap();
    stdin.write_all(def.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = sum.wait_with_output().unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    format!("sha256:{}", &hex[..16])
}

fn versions_an_earlier_release_stored_are_moved_to_their_fingerprint(kind: Kind) {
    let case = Case::new(kind);
    let (here, there) = (crew_dir(&case, "crews"), crew_dir(&case, "copy"));
    let ours = run_to_review(&case, &file(&here, "topics.toml"));
    let theirs = run_to_review(&case, &file(&there, "topics.toml"));
    let [(_, now, _)] = versions(&case).try_into().unwrap();

    // As an earlier release stored them: one version per directory, each
    // under a fingerprint that counts its child crew's directory.
    let def = case
        .cairn(&["crews", "show", "topics", "1", "--json"])
        .json();
    let text = def.to_string();
    assert!(!text.contains('\''), "{text}");
    let (here_s, there_s) = (here.to_str().unwrap(), there.to_str().unwrap());
    let copy: Value = serde_json::from_str(&text.replace(here_s, there_s)).unwrap();
    let mut sql = String::new();
    for (run, def) in [(&ours, &def), (&theirs, &copy)] {
        let old = earlier_fingerprint(def);
        assert_ne!(old, now);
        sql.push_str(&format!(
            "INSERT INTO crews (fingerprint, name, version, definition, first_seen, needs_code) \
             SELECT '{old}', name, version, '{def}', first_seen, needs_code FROM crews \
             WHERE fingerprint = '{now}';\n\
             UPDATE runs SET crew_fingerprint = '{old}' WHERE id = '{run}';\n"
        ));
    }
    sql.push_str(&format!("DELETE FROM crews WHERE fingerprint = '{now}';"));
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(case.db.exec(&sql));

    // Opened by this release: one version again, under its own fingerprint,
    // holding both runs, which carry on from their stored definition.
    assert_eq!(versions(&case), [("1".to_owned(), now.clone(), 2)]);
    for run in [&ours, &theirs] {
        assert_eq!(case.show(run)["crew_fingerprint"], now.as_str());
        approve(&case, run);
        assert_eq!(case.show(run)["status"], "succeeded");
    }
    case.cairn(&["doctor"]).expect_code(0);
}
