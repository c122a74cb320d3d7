//! Human waits through the `cairn` binary, both backends: a review rejected
//! with feedback (the re-run sees it on stdin) then approved, an edit (the
//! original kept in the event), approval before a step, repeated and refused
//! answers, `--enqueue` then `cairn resume`, deadlines via `waits expire`, a
//! cancel closing the open wait, and a re-submit of a waiting run.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{agent_sh, agent_template, crew_toml, step, wait_until, Case, Kind, Spawned};

both_backends!(
    review_rejected_with_feedback_then_approved,
    review_edit_commits_the_edited_output_and_keeps_the_original,
    approval_before_a_step_runs_it_or_fails_the_run,
    answers_are_idempotent_and_wrong_ones_are_refused,
    enqueued_answer_waits_for_a_resume,
    an_enqueued_answer_a_worker_takes_at_once_is_a_success,
    deadline_fails_the_run_or_approves_it,
    cancel_of_a_waiting_run_cancels_its_wait,
    resubmitting_a_waiting_run_returns_it,
);

/// A reviewed writer and a publisher rendering its draft. The writer saves
/// the context it read on stdin as `ctx-ATTEMPT.json` and logs each run.
pub(crate) fn review_crew(case: &Case, extra: &str) -> String {
    let d = case.path("");
    let script = format!(
        "cat > {d}/ctx-$CAIRN_ATTEMPT.json; echo $CAIRN_ATTEMPT >> {d}/writer.log; \
         printf '{{\"draft\": \"v%s\"}}' $CAIRN_ATTEMPT",
        d = d.display()
    );
    let agents = [
        agent_sh("writer", &script) + "review = true\n" + extra,
        agent_template("publisher", "published {{ outputs.writer.draft }}"),
    ];
    case.write("crew.toml", &crew_toml("review", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

/// How often the writer ran.
pub(crate) fn writer_runs(case: &Case) -> usize {
    std::fs::read_to_string(case.path("writer.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// The context the writer read on stdin at `attempt`.
fn context_seen(case: &Case, attempt: u32) -> Value {
    let text = std::fs::read_to_string(case.path(&format!("ctx-{attempt}.json")))
        .unwrap_or_else(|e| panic!("the writer's attempt {attempt} left no context: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("context is not JSON ({e}): {text}"))
}

/// `cairn waits list --json [ARGS]`, which must be an array; every wait
/// (`--all`) unless ARGS name a `--status`.
#[track_caller]
fn waits(case: &Case, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["waits", "list", "--json"];
    all.extend(args);
    if !args.contains(&"--status") {
        all.push("--all");
    }
    match case.cairn(&all).expect_code(0).json() {
        Value::Array(waits) => waits,
        other => panic!("waits list --json is not an array: {other:#}"),
    }
}

/// The one open wait of run `id`.
#[track_caller]
fn open_wait(case: &Case, id: &str) -> Value {
    let open = waits(case, &["--run", id, "--status", "open"]);
    assert_eq!(open.len(), 1, "expected one open wait: {open:#?}");
    open.into_iter().next().unwrap()
}

/// `cairn waits answer WAIT FLAGS --json`, exiting `code`: the run.
#[track_caller]
fn answered(case: &Case, wait: &str, flags: &[&str], code: i32) -> Value {
    let args = [&["waits", "answer", wait][..], flags, &["--json"]].concat();
    case.cairn(&args).expect_code(code).json()
}

fn wait_id(wait: &Value) -> String {
    wait["id"].as_str().expect("wait id").to_owned()
}

/// Step 0 of `run`, the writer: its status, attempt and output.
#[track_caller]
fn assert_writer(run: &Value, status: &str, attempt: u64, output: Value) {
    let writer = step(run, 0);
    assert_eq!(writer["status"], status, "{writer:#}");
    assert_eq!(writer["attempt"], attempt, "{writer:#}");
    assert_eq!(writer["output"], output, "{writer:#}");
}

/// A new case with a run of [`review_crew`] waiting on its review: the
/// case, the run and the wait.
#[track_caller]
fn waiting_review(kind: Kind) -> (Case, String, String) {
    let case = Case::new(kind);
    let crew = review_crew(&case, "");
    let (id, _) = run_waiting(&case, &crew);
    let wait = wait_id(&open_wait(&case, &id));
    (case, id, wait)
}

/// Past the 200 ms deadline of `wait`, `cairn waits expire --json`
/// expires it alone, leaving it `status`: what the command printed.
#[track_caller]
fn expire_one(case: &Case, wait: &Value, status: &str) -> Value {
    std::thread::sleep(Duration::from_millis(300));
    let expired = case
        .cairn(&["waits", "expire", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(expired.as_array().unwrap().len(), 1, "{expired:#}");
    assert_eq!(expired[0]["id"], wait["id"], "{expired:#}");
    assert_eq!(expired[0]["status"], status, "{expired:#}");
    expired
}

/// `cairn run CREW --json`, expecting it to stop waiting (exit 4), its
/// document naming its open wait (`waits`).
#[track_caller]
fn run_waiting(case: &Case, crew: &str) -> (String, Value) {
    let run = case.cairn(&["run", crew, "--json"]).expect_code(4).json();
    assert_eq!(run["status"], "waiting", "{run:#}");
    let id = run["id"].as_str().unwrap().to_owned();
    // The document carries the open wait: no second call to answer it.
    let open = open_wait(case, &id);
    assert_eq!(run["waits"].as_array().map(Vec::len), Some(1), "{run:#}");
    assert_eq!(run["waits"][0]["id"], open["id"], "{run:#}");
    assert_eq!(run["waits"][0]["status"], "open", "{run:#}");
    (id, run)
}

fn review_rejected_with_feedback_then_approved(kind: Kind) {
    let case = Case::new(kind);
    let crew = review_crew(&case, "");
    let (id, run) = run_waiting(&case, &crew);
    assert_eq!(run["cursor"], 0, "{run:#}");
    let writer = step(&run, 0);
    assert_eq!(writer["status"], "waiting", "{writer:#}");
    assert_eq!(writer["attempt"], 1, "{writer:#}");
    assert_eq!(
        writer["output"],
        json!({"draft": "v1"}),
        "stored while it waits"
    );
    assert_eq!(context_seen(&case, 1)["feedback"], json!([]));

    let all = waits(&case, &[]);
    assert_eq!(all.len(), 1, "{all:#?}");
    let first = &all[0];
    for field in ["id", "run_id", "step_idx", "kind", "status", "prompt"] {
        assert!(first.get(field).is_some(), "no `{field}`: {first:#}");
    }
    assert_eq!(first["run_id"], id.as_str(), "{first:#}");
    assert_eq!(first["step_idx"], 0, "{first:#}");
    assert_eq!(first["kind"], "review", "{first:#}");
    assert_eq!(first["status"], "open", "{first:#}");
    assert_eq!(
        first["prompt"],
        json!({"draft": "v1"}),
        "the prompt is the draft"
    );
    let first_id = wait_id(first);

    // Rejected: the writer runs again with the feedback, and is reviewed again.
    let run = answered(&case, &first_id, &["--reject", "shorter"], 4);
    assert_eq!(run["status"], "waiting", "{run:#}");
    assert_writer(&run, "waiting", 2, json!({"draft": "v2"}));
    let seen = context_seen(&case, 2);
    assert_eq!(
        seen["feedback"],
        json!(["shorter"]),
        "the re-run's stdin: {seen:#}"
    );
    assert_eq!(seen["step"]["attempt"], 2, "{seen:#}");
    assert_eq!(writer_runs(&case), 2);

    let all = waits(&case, &["--run", &id]);
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_eq!(all[0]["id"], first_id.as_str());
    assert_eq!(all[0]["status"], "answered", "{:#}", all[0]);
    let second = open_wait(&case, &id);
    assert_ne!(wait_id(&second), first_id, "the re-run opens a new wait");
    assert_eq!(second["prompt"], json!({"draft": "v2"}), "{second:#}");

    let run = answered(&case, &wait_id(&second), &["--approve"], 0);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_writer(&run, "succeeded", 2, json!({"draft": "v2"}));
    assert_eq!(step(&run, 1)["output"], "published v2", "{run:#}");
    assert_eq!(writer_runs(&case), 2, "approval ran the writer again");
    assert!(waits(&case, &["--status", "open"]).is_empty());
}

fn review_edit_commits_the_edited_output_and_keeps_the_original(kind: Kind) {
    let (case, id, wait) = waiting_review(kind);
    let edit = case.write("edit.json", "{\"draft\": \"edited by bob\"}\n");
    let edit = format!("@{}", edit.display());

    let run = answered(&case, &wait, &["--edit", &edit, "--by", "bob"], 0);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_writer(&run, "succeeded", 1, json!({"draft": "edited by bob"}));
    assert_eq!(step(&run, 1)["output"], "published edited by bob");
    assert_eq!(writer_runs(&case), 1, "an edit does not re-run the step");

    let events = case.events(&id);
    let answered = case.events_of(&id, "wait_answered");
    assert_eq!(answered.len(), 1, "{events:#}");
    let data = &answered[0]["data"];
    assert_eq!(data["wait"], wait.as_str(), "{data:#}");
    assert_eq!(data["note"], "bob", "locally `--by` is a note: {data:#}");
    assert_eq!(data["answer"]["decision"], "edit", "{data:#}");
    assert_eq!(
        data["answer"]["output"],
        json!({"draft": "edited by bob"}),
        "{data:#}"
    );
    assert_eq!(
        data["original"],
        json!({"draft": "v1"}),
        "the draft before the edit: {data:#}"
    );
}

/// A first step, then `effect` (approval before it) that touches a file.
fn approval_crew(case: &Case) -> String {
    let effect = case.path("effect");
    let agents = [
        agent_sh("first", "cat > /dev/null; echo '\"one\"'"),
        agent_sh(
            "effect",
            &format!(
                "cat > /dev/null; touch {}; echo '\"done\"'",
                effect.display()
            ),
        ) + "approval = \"before\"\n",
    ];
    case.write("crew.toml", &crew_toml("approval", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

fn approval_before_a_step_runs_it_or_fails_the_run(kind: Kind) {
    let case = Case::new(kind);
    let crew = approval_crew(&case);
    let effect = case.path("effect");

    let (id, run) = run_waiting(&case, &crew);
    assert_eq!(run["cursor"], 1, "{run:#}");
    assert_eq!(step(&run, 0)["status"], "succeeded", "{run:#}");
    assert!(!effect.exists(), "the step ran before its approval");
    let wait = open_wait(&case, &id);
    assert_eq!(wait["kind"], "approval", "{wait:#}");
    assert_eq!(wait["step_idx"], 1, "{wait:#}");
    let run = answered(&case, &wait_id(&wait), &["--approve"], 0);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 1)["output"], "done", "{run:#}");
    assert!(effect.exists(), "the approved step did not run");

    // Another run: rejected, the step never runs and the run fails.
    std::fs::remove_file(&effect).unwrap();
    let (id, _) = run_waiting(&case, &crew);
    let wait = wait_id(&open_wait(&case, &id));
    let run = answered(&case, &wait, &["--reject", "no"], 3);
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["error"]["kind"], "rejected", "{run:#}");
    assert!(
        run["error"]["message"].as_str().unwrap().contains("no"),
        "{run:#}"
    );
    assert_eq!(step(&run, 1)["status"], "failed", "{run:#}");
    assert_eq!(step(&run, 1)["output"], Value::Null, "{run:#}");
    assert!(!effect.exists(), "the rejected step ran");
    assert_eq!(case.show(&id)["status"], "failed");
}

fn answers_are_idempotent_and_wrong_ones_are_refused(kind: Kind) {
    let (case, id, wait) = waiting_review(kind);

    // `--answer` is for questions; the message says what fits a review.
    let out = case
        .cairn(&["waits", "answer", &wait, "--answer", "42"])
        .expect_code(2);
    out.expect_stderr(&["review", "approve", "edit", "reject"]);
    assert_eq!(open_wait(&case, &id)["status"], "open");

    case.cairn(&["waits", "answer", &wait, "--approve"])
        .expect_code(0);
    let run = case.show(&id);
    let events = case.events(&id);
    let wait_row = waits(&case, &["--run", &id]);
    assert_eq!(run["status"], "succeeded", "{run:#}");

    // The same answer again: a no-op.
    case.cairn(&["waits", "answer", &wait, "--approve"])
        .expect_code(0);
    assert_eq!(case.events(&id), events, "the repeat wrote events");
    assert_eq!(case.show(&id), run, "the repeat changed the run");
    assert_eq!(waits(&case, &["--run", &id]), wait_row);
    assert_eq!(writer_runs(&case), 1);

    // Another answer to the closed wait: refused, naming its status.
    let out = case
        .cairn(&["waits", "answer", &wait, "--reject", "changed my mind"])
        .expect_code(2);
    out.expect_stderr(&[&wait, "answered"]);
    assert_eq!(case.events(&id), events);

    let unknown = "01900000-0000-7000-8000-000000000000";
    case.cairn(&["waits", "answer", unknown, "--approve"])
        .expect_code(2)
        .expect_stderr(&[unknown, "not found"]);
    case.cairn(&["waits", "answer", "not-a-wait", "--approve"])
        .expect_code(2)
        .expect_one_line_error(&["not-a-wait", "wait id"]);
    // No decision at all.
    case.cairn(&["waits", "answer", &wait]).expect_code(2);
    assert_eq!(case.events(&id), events);
}

fn enqueued_answer_waits_for_a_resume(kind: Kind) {
    let (case, id, wait) = waiting_review(kind);

    let run = case
        .cairn(&[
            "waits",
            "answer",
            &wait,
            "--reject",
            "shorter",
            "--enqueue",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(run["status"], "queued", "{run:#}");
    assert_eq!(writer_runs(&case), 1, "--enqueue executed the step");
    assert!(waits(&case, &["--status", "open"]).is_empty());
    assert_eq!(case.show(&id)["status"], "queued");

    let run = case.cairn(&["resume", &id, "--json"]).expect_code(4).json();
    assert_eq!(run["status"], "waiting", "{run:#}");
    assert_eq!(step(&run, 0)["attempt"], 2, "{run:#}");
    assert_eq!(writer_runs(&case), 2);
    assert_eq!(context_seen(&case, 2)["feedback"], json!(["shorter"]));

    // An approval enqueued too: the publisher runs only on resume.
    let wait = wait_id(&open_wait(&case, &id));
    let run = answered(&case, &wait, &["--approve", "--enqueue"], 0);
    assert_eq!(run["status"], "queued", "{run:#}");
    assert_eq!(run["cursor"], 1, "{run:#}");
    assert!(
        run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["role"] != "publisher" || s["status"] != "succeeded"),
        "{run:#}"
    );
    let run = case.cairn(&["resume", &id, "--json"]).expect_code(0).json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 1)["output"], "published v2", "{run:#}");
}

/// Issue 29.5: a worker claims the run an `--enqueue` answer queued before
/// the command reads it back (the failpoint holds the command 2.5 s after
/// the answer landed). The answer was recorded and the run is `running`:
/// that is the success `--enqueue` asked for, exit 0, not exit 1 with
/// nothing said (a script would retry and be told "already answered").
fn an_enqueued_answer_a_worker_takes_at_once_is_a_success(kind: Kind) {
    let case = Case::new(kind);
    let started = case.path("slow.started");
    let agents = [
        agent_template("writer", "draft") + "review = true\n",
        agent_sh(
            "slow",
            &format!("touch {}; sleep 4; echo '{{}}'", started.display()),
        ),
    ];
    let crew = case.write("crew.toml", &crew_toml("enqueued", &agents));
    let (id, _) = run_waiting(&case, crew.to_str().unwrap());
    let wait = wait_id(&open_wait(&case, &id));

    let _worker = Spawned(case.spawn(&["worker", "--poll-ms", "30"], &[]));
    let out = case.cairn_env(
        &["waits", "answer", &wait, "--approve", "--enqueue", "--json"],
        &[("CAIRN_FAILPOINTS", "pause_after:answer_wait:2500")],
    );
    assert!(
        out.stderr.contains("failpoint pause_after:answer_wait"),
        "the pause was not reached: {out:?}"
    );
    assert!(started.exists(), "the worker did not take the run in 2.5 s");
    let run = out.expect_code(0).json();
    assert_eq!(run["status"], "running", "{run:#}");
    assert!(waits(&case, &["--status", "open"]).is_empty());
    wait_until(
        "the worker to finish the run",
        Duration::from_secs(60),
        || case.show(&id)["status"] == "succeeded",
    );
}

fn deadline_fails_the_run_or_approves_it(kind: Kind) {
    let case = Case::new(kind);

    let crew = review_crew(&case, "wait_deadline_ms = 200\non_deadline = \"fail\"\n");
    let (failing, _) = run_waiting(&case, &crew);
    let wait = open_wait(&case, &failing);
    assert!(wait["deadline"].is_string(), "{wait:#}");
    expire_one(&case, &wait, "expired");
    let run = case.show(&failing);
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["error"]["kind"], "deadline", "{run:#}");
    let events = case.events(&failing);
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "wait_expired"),
        "{events:#}"
    );

    let crew = review_crew(&case, "wait_deadline_ms = 200\non_deadline = \"approve\"\n");
    let (approving, _) = run_waiting(&case, &crew);
    let wait = open_wait(&case, &approving);
    let expired = expire_one(&case, &wait, "answered");
    assert_eq!(expired[0]["answered_by"], "deadline", "{expired:#}");
    assert_eq!(case.show(&approving)["status"], "queued");
    let run = case
        .cairn(&["resume", &approving, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 1)["output"], "published v1", "{run:#}");

    // Nothing is due any more; the failed run stays failed.
    let none = case
        .cairn(&["waits", "expire", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(none, json!([]));
    assert_eq!(case.show(&failing)["status"], "failed");
}

fn cancel_of_a_waiting_run_cancels_its_wait(kind: Kind) {
    let (case, id, wait) = waiting_review(kind);
    let run = case
        .cairn(&["runs", "cancel", &id, "--reason", "not needed", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(run["status"], "cancelled", "{run:#}");
    let all = waits(&case, &["--run", &id]);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0]["status"], "cancelled", "{:#}", all[0]);
    let events = case.events(&id);

    case.cairn(&["waits", "answer", &wait, "--approve"])
        .expect_code(2)
        .expect_stderr(&[&wait, "cancelled"]);
    assert_eq!(case.events(&id), events, "the refused answer wrote events");
    assert_eq!(case.show(&id)["status"], "cancelled");
    assert_eq!(writer_runs(&case), 1);
}

/// README: submitting again with the same idempotency key returns the same
/// run (and continues it if it can). A waiting run cannot go on without an
/// answer, so `cairn run` prints it, with the waiting exit code.
fn resubmitting_a_waiting_run_returns_it(kind: Kind) {
    let case = Case::new(kind);
    let crew = review_crew(&case, "");
    let args = [
        "run",
        crew.as_str(),
        "--idempotency-key",
        "draft-1",
        "--json",
    ];
    let first = case.cairn(&args).expect_code(4).json();
    assert_eq!(first["status"], "waiting", "{first:#}");
    let events = case.events(first["id"].as_str().unwrap());

    let again = case.cairn(&args).expect_code(4);
    assert!(
        !again.stdout.is_empty(),
        "the same run was not printed; stderr: {}",
        again.stderr
    );
    assert_eq!(again.json(), first, "not the same run");
    assert_eq!(case.list().len(), 1);
    assert_eq!(writer_runs(&case), 1, "the re-submit executed the writer");
    assert_eq!(case.events(first["id"].as_str().unwrap()), events);
}
