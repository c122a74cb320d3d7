//! The JSON contracts, both backends: the run object of `run --json` /
//! `runs show --json` (field names, RFC 3339 UTC times, token usage), the
//! array of `runs list --json` (oldest first, `--status`, `--limit`), and
//! global `--json` / `--db` accepted anywhere on the line.

use serde_json::{json, Value};

use crate::support::{agent_sh, agent_template, crew_toml, serve, step, Case, Kind};

both_backends!(
    run_json_is_one_object_with_the_documented_fields,
    runs_list_json_is_oldest_first_and_filters,
    json_and_db_are_accepted_anywhere_on_the_line,
    a_priority_and_a_tenant_are_stored_both_ways_and_bad_ones_are_refused,
);

const TOPIC: &str = r#"{"topic": "anywhere"}"#;

const RUN_FIELDS: &[&str] = &["id", "crew", "status", "cursor", "created_at", "steps"];
const STEP_FIELDS: &[&str] = &[
    "idx",
    "role",
    "status",
    "attempt",
    "output",
    "input_tokens",
    "output_tokens",
    "started_at",
    "finished_at",
    "error",
];

/// A two-step crew: a command that reports tokens, then a template.
fn contract_crew(case: &Case) -> String {
    let agents = [
        agent_sh(
            "researcher",
            r#"cat > /dev/null
echo 'cairn-usage: {"input_tokens": 5, "output_tokens": 7}' >&2
echo '{"facts": ["a", "b"]}'"#,
        ),
        agent_template(
            "writer",
            "On {{ input.topic }}: {{ outputs.researcher.facts | join(', ') }}",
        ),
    ];
    case.write("contract.toml", &crew_toml("contract", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

/// A one-step crew whose step fails.
fn failing_crew(case: &Case) -> String {
    let agents = [case.failing_agent("doomed")];
    case.write("failing.toml", &crew_toml("failing", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

/// Parses an RFC 3339 UTC time field; panics naming it otherwise.
#[track_caller]
fn utc_time(v: &Value, field: &str) -> chrono::DateTime<chrono::FixedOffset> {
    let s = v[field]
        .as_str()
        .unwrap_or_else(|| panic!("`{field}` is not a string: {v:#}"));
    assert!(
        s.ends_with('Z') || s.ends_with("+00:00"),
        "`{field}` = {s:?} is not UTC"
    );
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("`{field}` = {s:?} is not RFC 3339: {e}"))
}

#[track_caller]
fn has_fields(v: &Value, fields: &[&str]) {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v:#}"));
    for f in fields {
        assert!(obj.contains_key(*f), "missing `{f}` in {v:#}");
    }
}

fn run_json_is_one_object_with_the_documented_fields(kind: Kind) {
    let case = Case::new(kind);
    let crew = contract_crew(&case);
    let out = case
        .cairn(&["run", &crew, "--input", r#"{"topic": "rust"}"#, "--json"])
        .expect_code(0);
    let run = out.json();
    has_fields(&run, RUN_FIELDS);
    let id = run["id"].as_str().expect("id is a string");
    assert!(uuid_like(id), "id {id:?} is not a UUID");
    assert_eq!(run["crew"], "contract");
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["cursor"], 2);
    assert_eq!(run["input"]["topic"], "rust");
    let created = utc_time(&run, "created_at");
    utc_time(&run, "updated_at");
    let finished = utc_time(&run, "finished_at");
    assert!(finished >= created, "{run:#}");

    let steps = run["steps"].as_array().expect("steps is an array");
    assert_eq!(steps.len(), 2, "{run:#}");
    for (i, s) in steps.iter().enumerate() {
        has_fields(s, STEP_FIELDS);
        assert_eq!(s["idx"], i);
        assert_eq!(s["status"], "succeeded");
        assert_eq!(s["attempt"], 1);
        assert_eq!(s["error"], Value::Null);
        let started = utc_time(s, "started_at");
        let done = utc_time(s, "finished_at");
        assert!(done >= started, "{s:#}");
    }
    let researcher = step(&run, 0);
    assert_eq!(researcher["role"], "researcher");
    assert_eq!(
        researcher["output"],
        serde_json::json!({"facts": ["a", "b"]})
    );
    assert_eq!(researcher["input_tokens"], 5, "{researcher:#}");
    assert_eq!(researcher["output_tokens"], 7, "{researcher:#}");
    let writer = step(&run, 1);
    assert_eq!(writer["role"], "writer");
    assert_eq!(writer["output"], "On rust: a, b");
    assert_eq!(writer["input_tokens"], Value::Null);
    assert_eq!(writer["output_tokens"], Value::Null);

    // `runs show --json` prints the same object.
    assert_eq!(case.show(id), run);
}

fn runs_list_json_is_oldest_first_and_filters(kind: Kind) {
    let case = Case::new(kind);
    let ok = contract_crew(&case);
    let bad = failing_crew(&case);
    let id_of = |out: crate::support::Out| out.json()["id"].as_str().unwrap().to_owned();
    let a = id_of(
        case.cairn(&["run", &ok, "--input", r#"{"topic": "a"}"#, "--json"])
            .expect_code(0),
    );
    let b = id_of(case.cairn(&["run", &bad, "--json"]).expect_code(3));
    let c = id_of(
        case.cairn(&["run", &ok, "--input", r#"{"topic": "c"}"#, "--json"])
            .expect_code(0),
    );

    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["runs", "list", "--json"];
        all.extend_from_slice(args);
        let list = case.cairn(&all).expect_code(0).json();
        let arr = list
            .as_array()
            .unwrap_or_else(|| panic!("runs list --json is not an array: {list:#}"));
        arr.iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };

    let list = case.list();
    assert_eq!(list.len(), 3);
    let mut last = None;
    for r in &list {
        has_fields(r, &["id", "crew", "status", "created_at"]);
        assert!(r.get("steps").is_none(), "list items carry no steps: {r:#}");
        let created = utc_time(r, "created_at");
        assert!(
            last.is_none_or(|l| l <= created),
            "not oldest first: {list:#?}"
        );
        last = Some(created);
    }
    assert_eq!(list[0]["crew"], "contract");
    assert_eq!(list[1]["crew"], "failing");
    assert_eq!(list[1]["status"], "failed");
    assert_eq!(list[2]["status"], "succeeded");
    let (a, b, c) = (a.as_str(), b.as_str(), c.as_str());
    assert_eq!(ids(&[]), [a, b, c]);

    assert_eq!(ids(&["--status", "failed"]), [b]);
    assert_eq!(ids(&["--status", "succeeded"]), [a, c]);
    assert_eq!(ids(&["--status", "running"]), Vec::<String>::new());
    // `--limit` takes the newest N, as in the text (issue 27; the array
    // stays oldest first); `--oldest --limit` the oldest N.
    assert_eq!(ids(&["--limit", "2"]), [b, c]);
    assert_eq!(ids(&["--limit", "1", "--status", "succeeded"]), [c]);
    assert_eq!(ids(&["--oldest", "--limit", "2"]), [a, b]);
}

fn json_and_db_are_accepted_anywhere_on_the_line(kind: Kind) {
    let case = Case::new(kind);
    let crew = contract_crew(&case);
    let url = case.url().to_owned();
    let db = url.as_str();
    // `run`, with both options before the subcommand.
    let run = case
        .raw(&["--json", "--db", db, "run", &crew, "--input", TOPIC], &[])
        .expect_code(0)
        .json();
    let id = run["id"].as_str().unwrap().to_owned();
    let id = id.as_str();
    // `run`, with both options between its arguments.
    let again = case
        .raw(&["run", "--db", db, &crew, "--json", "--input", TOPIC], &[])
        .expect_code(0)
        .json();
    assert_eq!(again["status"], "succeeded");

    let show = case.show(id);
    assert_eq!(show, run);
    for args in [
        vec!["--json", "--db", db, "runs", "show", id],
        vec!["--db", db, "runs", "--json", "show", id],
        vec!["runs", "--db", db, "show", "--json", id],
        vec!["runs", "show", id, "--json", "--db", db],
        vec!["--json", "runs", "show", "--db", db, id],
    ] {
        let got = case.raw(&args, &[]).expect_code(0).json();
        assert_eq!(got, show, "cairn {args:?}");
    }
    for args in [
        vec!["--json", "--db", db, "runs", "list"],
        vec!["runs", "list", "--db", db, "--json"],
        vec!["runs", "--json", "list", "--limit", "5", "--db", db],
    ] {
        let got = case.raw(&args, &[]).expect_code(0).json();
        assert_eq!(
            got.as_array().map(Vec::len),
            Some(2),
            "cairn {args:?}: {got:#}"
        );
    }
    // Without --json the same command prints text, not JSON.
    let text = case
        .raw(&["runs", "show", id, "--db", db], &[])
        .expect_code(0);
    assert!(
        serde_json::from_str::<Value>(&text.stdout).is_err(),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains(id), "{}", text.stdout);
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36
        && s.chars().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `--priority` and `--tenant` reach the run locally and through a server
/// (the run's JSON carries them); a priority out of range or a bad tenant
/// is refused before anything is stored, locally and by the server.
fn a_priority_and_a_tenant_are_stored_both_ways_and_bad_ones_are_refused(kind: Kind) {
    let case = Case::new(kind);
    let crews = case.path("crews");
    std::fs::create_dir_all(&crews).unwrap();
    let crew = crews.join("hello.toml");
    std::fs::write(&crew, crew_toml("hello", &[agent_template("greet", "hi")])).unwrap();
    let crew = crew.to_str().unwrap();
    let local = case
        .cairn(&[
            "submit",
            crew,
            "--priority",
            "7",
            "--tenant",
            "acme",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(
        (&local["priority"], &local["tenant"]),
        (&json!(7), &json!("acme")),
        "{local}"
    );
    let crews = crews.to_str().unwrap();
    let served = serve(&case, &["--crews", crews, "--concurrency", "0"], &[]);
    let url = Some(served.url.as_str());
    let args = ["submit", "hello", "--priority", "-3", "--tenant", "globex"];
    let remote = case
        .cairn_at(url, &[&args[..], &["--json"]].concat())
        .expect_code(0)
        .json();
    assert_eq!(
        (&remote["priority"], &remote["tenant"]),
        (&json!(-3), &json!("globex")),
        "{remote}"
    );
    let untenanted = case
        .cairn(&["submit", crew, "--json"])
        .expect_code(0)
        .json();
    assert!(untenanted.get("tenant").is_none(), "{untenanted}");
    // `runs list --tenant` lists that tenant's runs only, both ways.
    let acme = case
        .cairn(&["runs", "list", "--tenant", "acme", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(acme.as_array().map(Vec::len), Some(1), "{acme}");
    assert_eq!(acme[0]["id"], local["id"]);
    let globex = case
        .cairn_at(url, &["runs", "list", "--tenant", "globex", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(globex.as_array().map(Vec::len), Some(1), "{globex}");
    assert_eq!(globex[0]["id"], remote["id"]);
    let bad = ["--tenant", "a,b"];
    let local_bad = case.cairn(&[&["submit", crew][..], &bad].concat());
    let remote_bad = case.raw(
        &[&["submit", "hello", "--server", &served.url][..], &bad].concat(),
        &[],
    );
    for refused in [local_bad, remote_bad] {
        refused.expect_code(2).expect_stderr(&["tenant", "`,`"]);
    }
    assert_eq!(case.show(local["id"].as_str().unwrap())["priority"], 7);
    let refused = case
        .cairn(&["submit", crew, "--priority", "1001"])
        .expect_code(2);
    refused.expect_stderr(&["--priority", "-1000 to 1000"]);
    assert_eq!(case.list().len(), 3, "nothing stored by the refusals");
}
