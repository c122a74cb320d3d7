//! The kill campaign at every write boundary (docs/reliability.md): for
//! each write the engine makes (submit, start, claim, a worker's claim and
//! takeover, heartbeat, step commit, opening, answering and expiring a
//! wait, journal item, operator action, fork, compaction), the `cairn`
//! process is SIGKILLed just before its transaction and just after its
//! commit (`CAIRN_FAILPOINTS=before:OP` / `after:OP`, see
//! `cairn_checkpoint::failpoint`), the work is finished the way an
//! operator would, and then every design invariant a reader can check from
//! outside is checked: `cairn doctor` finds nothing; each run's status,
//! cursor, step rows and open waits agree; event numbers run 1..n without
//! a gap or a repeat; no finished step ran again, and only the step in
//! flight at the kill may have run twice.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use serde_json::Value;

use crate::support::{
    agent_scripted, agent_sh, crew_toml, one_call_script, q, step, tool_block, wait_until, Case,
    Kind, Spawned,
};
use crate::waits::{review_crew, writer_runs};

both_backends!(
    submit,
    start,
    claim,
    worker_claim_and_takeover,
    heartbeat,
    step_commit,
    open_wait,
    answer_wait,
    expire_wait,
    operator_action,
    fork,
    journal_append,
    compaction,
);

const PHASES: [&str; 2] = ["before", "after"];

/// SIGKILLed at `point` (the failpoint must be reached).
#[track_caller]
fn killed_at(case: &Case, args: &[&str], point: &str) {
    case.killed_at(args, point);
}

/// Every invariant of every run in the database, read through the CLI.
#[track_caller]
fn check_invariants(case: &Case, point: &str) {
    let doctor = case.cairn(&["doctor", "--json"]);
    assert_eq!(
        doctor.code(),
        Some(0),
        "{point}: cairn doctor found a problem: {}{}",
        doctor.stdout,
        doctor.stderr
    );
    let waits = match case.cairn(&["waits", "list", "--all", "--json"]).json() {
        Value::Array(w) => w,
        other => panic!("{point}: waits list is not an array: {other}"),
    };
    for listed in case.list() {
        let id = listed["id"].as_str().unwrap();
        let run = case.show(id);
        let status = run["status"].as_str().unwrap();
        let cursor = run["cursor"].as_u64().unwrap() as usize;
        let count = run["step_count"].as_u64().unwrap() as usize;
        let steps = run["steps"].as_array().unwrap();
        // Rows are 0..k without a gap, none past the cursor, all before it
        // succeeded (invariant 4: a cursor agrees with the rows).
        for (i, row) in steps.iter().enumerate() {
            assert_eq!(row["idx"], i, "{point}: rows have a gap: {run:#}");
            if i < cursor {
                assert_eq!(row["status"], "succeeded", "{point}: {run:#}");
            }
        }
        assert!(
            steps.len() <= cursor + 1,
            "{point}: a row past the cursor: {run:#}"
        );
        let at = steps.get(cursor).map(|r| r["status"].as_str().unwrap());
        let open: Vec<&Value> = waits
            .iter()
            .filter(|w| w["run_id"] == id && w["status"] == "open")
            .collect();
        match status {
            "succeeded" => {
                assert_eq!(cursor, count, "{point}: {run:#}");
                assert_eq!(steps.len(), count, "{point}: {run:#}");
            }
            "running" => assert_eq!(at, Some("running"), "{point}: {run:#}"),
            "waiting" => {
                assert_eq!(at, Some("waiting"), "{point}: {run:#}");
                assert_eq!(
                    open.len(),
                    1,
                    "{point}: a waiting run has one open wait: {open:#?}"
                );
                assert_eq!(open[0]["step_idx"], cursor, "{point}: {open:#?}");
            }
            "queued" => assert!(
                !matches!(at, Some("running" | "succeeded" | "waiting")),
                "{point}: {run:#}"
            ),
            _ => {}
        }
        if status != "waiting" {
            assert!(
                open.is_empty(),
                "{point}: an open wait of a `{status}` run: {open:#?}"
            );
        }
        let seqs: Vec<u64> = case
            .events(id)
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "{point}: event numbers of run {id}");
    }
}

/// Each step of the counting crew ran once, but `twice` (the step in
/// flight at the kill), which may have run twice.
#[track_caller]
fn ran_once(case: &Case, steps: u32, twice: Option<u32>, point: &str) {
    for i in 0..steps {
        let n = case.executed(i);
        let most = if Some(i) == twice { 2 } else { 1 };
        assert!(
            (1..=most).contains(&n),
            "{point}: step {i} ran {n} times: {:?}",
            case.executions()
        );
    }
}

fn succeeded(case: &Case, id: &str, point: &str) {
    let run = case.show(id);
    assert_eq!(run["status"], "succeeded", "{point}: {run:#}");
}

fn submit(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:submit");
        let case = Case::new(kind);
        let crew = case.counting_crew(3);
        let crew = crew.to_str().unwrap();
        let args = ["submit", crew, "--idempotency-key", "k-1"];
        killed_at(&case, &args, &point);
        let stored = case.list();
        assert_eq!(
            stored.len(),
            usize::from(phase == "after"),
            "{point}: {stored:#?}"
        );
        // The client does not know whether it landed: it submits again.
        let id = case.cairn(&args).expect_code(0).stdout.trim().to_owned();
        if let Some(first) = stored.first() {
            assert_eq!(
                first["id"],
                id.as_str(),
                "{point}: the same key gave another run"
            );
        }
        assert_eq!(case.list().len(), 1, "{point}");
        case.cairn(&["resume", &id]).expect_code(0);
        succeeded(&case, &id, &point);
        ran_once(&case, 3, None, &point);
        check_invariants(&case, &point);
    }
}

/// `cairn run` submits and claims in one transaction (`RunStore::start`):
/// killed before it, nothing is stored and the command is simply typed
/// again; after it, the run is `running` under the dead process's lease and
/// a plain `cairn resume` (the holder is provably dead on this machine)
/// runs every step once.
fn start(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:start");
        let case = Case::new(kind);
        let crew = case.counting_crew(3);
        let crew = crew.to_str().unwrap();
        killed_at(&case, &["run", crew], &point);
        let stored = case.list();
        if phase == "before" {
            assert!(stored.is_empty(), "{point}: {stored:#?}");
            case.cairn(&["run", crew]).expect_code(0);
            let id = case.only_run_id();
            succeeded(&case, &id, &point);
        } else {
            let id = case.only_run_id();
            let run = case.show(&id);
            assert_eq!(run["status"], "running", "{point}: {run:#}");
            assert_eq!(run["lease_epoch"], 1, "{point}: {run:#}");
            assert_eq!(step(&run, 0)["status"], "running", "{point}: {run:#}");
            assert!(case.executions().is_empty(), "{point}: a step ran");
            check_invariants(&case, &point);
            case.cairn(&["resume", &id]).expect_code(0);
            succeeded(&case, &id, &point);
        }
        ran_once(&case, 3, None, &point);
        check_invariants(&case, &point);
    }
}

/// The claim of a submitted run (`cairn resume` of a queued run; a run
/// `cairn run` made is claimed by its start).
fn claim(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:claim");
        let case = Case::new(kind);
        let crew = case.counting_crew(3);
        let id = case.submit(&crew);
        killed_at(&case, &["resume", &id], &point);
        let run = case.show(&id);
        let expected = if phase == "before" {
            "queued"
        } else {
            "running"
        };
        assert_eq!(run["status"], expected, "{point}: {run:#}");
        assert!(case.executions().is_empty(), "{point}: a step ran");
        check_invariants(&case, &point);
        case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
        succeeded(&case, &id, &point);
        ran_once(&case, 3, None, &point);
        check_invariants(&case, &point);
    }
}

/// `cairn worker` on the case's database, output to `worker-NAME.*`.
fn worker(case: &Case, name: &str, env: &[(&str, &str)]) -> Spawned {
    let mut cmd = case.command();
    cmd.args([
        "worker",
        "--db",
        case.url(),
        "--lease-ms",
        "1000",
        "--heartbeat-ms",
        "300",
    ])
    .args(["--poll-ms", "50"])
    .env("CAIRN_LOG", "warn")
    .envs(env.iter().copied())
    .stdout(std::fs::File::create(case.path(&format!("worker-{name}.stdout"))).unwrap())
    .stderr(std::fs::File::create(case.path(&format!("worker-{name}.stderr"))).unwrap());
    Spawned(cmd.spawn().expect("spawn cairn worker"))
}

/// Runs a worker without failpoints until run `id` is finished, then stops it.
fn finish_with_a_worker(case: &Case, id: &str, point: &str) {
    let mut w = worker(case, "finisher", &[]);
    wait_until(
        &format!("{point}: the run to finish"),
        Duration::from_secs(60),
        || {
            matches!(
                case.show(id)["status"].as_str(),
                Some("succeeded" | "failed")
            )
        },
    );
    kill(w.pid(), Signal::SIGTERM).unwrap();
    let status = w.wait(point);
    assert!(
        status.success(),
        "{point}: the finishing worker exited {status}"
    );
}

/// A worker killed at its claim of a queued run (`claim_next`), and at its
/// takeover of a run whose holder died (its first `claim_next` then is the
/// takeover).
fn worker_claim_and_takeover(kind: Kind) {
    for phase in PHASES {
        for what in ["claim", "takeover"] {
            let point = format!("{phase}:claim_next");
            let case = Case::new(kind);
            let crew = case.counting_crew(3);
            let crew = crew.to_str().unwrap();
            let id = case
                .cairn(&["submit", crew])
                .expect_code(0)
                .stdout
                .trim()
                .to_owned();
            if what == "takeover" {
                // The first holder dies after claiming: the run is left
                // running under a 1 s lease, which then expires.
                let mut first = worker(&case, "first", &[("CAIRN_FAILPOINTS", "after:claim_next")]);
                expect_killed(&case, &mut first, "first", &point);
                assert_eq!(case.show(&id)["status"], "running", "{point}");
                std::thread::sleep(Duration::from_millis(1200));
            }
            let mut w = worker(&case, "killed", &[("CAIRN_FAILPOINTS", &point)]);
            expect_killed(&case, &mut w, "killed", &point);
            check_invariants(&case, &point);
            finish_with_a_worker(&case, &id, &point);
            succeeded(&case, &id, &point);
            ran_once(&case, 3, None, &point);
            check_invariants(&case, &point);
        }
    }
}

#[track_caller]
fn expect_killed(case: &Case, w: &mut Spawned, name: &str, point: &str) {
    let status = w.wait(point);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{point}: worker {name} was not killed: {}",
        std::fs::read_to_string(case.path(&format!("worker-{name}.stderr"))).unwrap_or_default()
    );
}

/// A crew whose step 0 lasts 1.5 s (its lease is beaten every second), then
/// two counting steps.
fn slow_crew(case: &Case) -> String {
    let log = case.path("executions.log");
    let slow = agent_sh(
        "slow",
        &format!(
            "echo 0 >> {}; cat > /dev/null; sleep 1.5; echo '{{}}'",
            log.display()
        ),
    );
    let mut agents = vec![slow];
    for i in 1..3 {
        agents.push(case.counting_agent(&format!("step-{i:02}")));
    }
    case.write("crew.toml", &crew_toml("slow", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

fn heartbeat(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:heartbeat");
        let case = Case::new(kind);
        let crew = slow_crew(&case);
        killed_at(&case, &["run", &crew], &point);
        let id = case.only_run_id();
        assert_eq!(case.show(&id)["status"], "running", "{point}");
        check_invariants(&case, &point);
        case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
        succeeded(&case, &id, &point);
        // Step 0 was in flight: it ran again.
        assert_eq!(case.executed(0), 2, "{point}");
        ran_once(&case, 3, Some(0), &point);
        check_invariants(&case, &point);
    }
}

fn step_commit(kind: Kind) {
    for phase in PHASES {
        // The second step's commit.
        let point = format!("{phase}:commit_step#2");
        let case = Case::new(kind);
        let crew = case.counting_crew(3);
        killed_at(&case, &["run", crew.to_str().unwrap()], &point);
        let id = case.only_run_id();
        let run = case.show(&id);
        let row = step(&run, 1);
        let expected = if phase == "before" {
            "running"
        } else {
            "succeeded"
        };
        assert_eq!(row["status"], expected, "{point}: {run:#}");
        check_invariants(&case, &point);
        case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
        succeeded(&case, &id, &point);
        // Uncommitted, step 1 runs again; committed, never.
        let twice = (phase == "before").then_some(1);
        assert_eq!(
            case.executed(1),
            1 + usize::from(twice.is_some()),
            "{point}"
        );
        ran_once(&case, 3, twice, &point);
        check_invariants(&case, &point);
    }
}

/// The one open wait's id.
fn open_wait_id(case: &Case, point: &str) -> String {
    let open = case.cairn(&["waits", "list", "--json"]).json();
    let open = open.as_array().unwrap();
    assert_eq!(open.len(), 1, "{point}: {open:#?}");
    open[0]["id"].as_str().unwrap().to_owned()
}

fn open_wait(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:open_wait");
        let case = Case::new(kind);
        let crew = review_crew(&case, "");
        killed_at(&case, &["run", &crew], &point);
        let id = case.only_run_id();
        check_invariants(&case, &point);
        if phase == "before" {
            // The draft was written but not committed: the resume writes it
            // again and opens the wait.
            assert_eq!(case.show(&id)["status"], "running", "{point}");
            case.cairn(&["resume", &id, "--takeover"]).expect_code(4);
        }
        assert_eq!(case.show(&id)["status"], "waiting", "{point}");
        let wait = open_wait_id(&case, &point);
        case.cairn(&["waits", "answer", &wait, "--approve"])
            .expect_code(0);
        succeeded(&case, &id, &point);
        assert_eq!(
            writer_runs(&case),
            1 + usize::from(phase == "before"),
            "{point}"
        );
        check_invariants(&case, &point);
    }
}

fn answer_wait(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:answer_wait");
        let case = Case::new(kind);
        let crew = review_crew(&case, "");
        case.cairn(&["run", &crew]).expect_code(4);
        let id = case.only_run_id();
        let wait = open_wait_id(&case, &point);
        killed_at(&case, &["waits", "answer", &wait, "--approve"], &point);
        let expected = if phase == "before" {
            "waiting"
        } else {
            "queued"
        };
        assert_eq!(case.show(&id)["status"], expected, "{point}");
        check_invariants(&case, &point);
        // The operator does not know whether it landed: the same answer
        // again is accepted either way, and drives the run.
        case.cairn(&["waits", "answer", &wait, "--approve"])
            .expect_code(0);
        if phase == "after" {
            case.cairn(&["resume", &id]).expect_code(0);
        }
        succeeded(&case, &id, &point);
        assert_eq!(writer_runs(&case), 1, "{point}");
        check_invariants(&case, &point);
    }
}

fn expire_wait(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:expire_wait");
        let case = Case::new(kind);
        let crew = review_crew(&case, "wait_deadline_ms = 100\non_deadline = \"fail\"\n");
        case.cairn(&["run", &crew]).expect_code(4);
        let id = case.only_run_id();
        std::thread::sleep(Duration::from_millis(200));
        killed_at(&case, &["waits", "expire"], &point);
        let expected = if phase == "before" {
            "waiting"
        } else {
            "failed"
        };
        assert_eq!(case.show(&id)["status"], expected, "{point}");
        check_invariants(&case, &point);
        case.cairn(&["waits", "expire"]).expect_code(0);
        let run = case.show(&id);
        assert_eq!(run["status"], "failed", "{point}: {run:#}");
        assert_eq!(run["error"]["kind"], "deadline", "{point}: {run:#}");
        check_invariants(&case, &point);
    }
}

/// A retry of a failed run and a cancel of a queued one, each killed
/// around its write and then issued again.
fn operator_action(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:act");
        let case = Case::new(kind);
        // Fails until the flag file exists.
        let flag = case.path("fixed");
        let flaky = agent_sh(
            "flaky",
            &format!(
                "cat > /dev/null; test -e {f} || {{ echo broken >&2; exit 3; }}; echo '{{}}'",
                f = q(&flag.display().to_string())
            ),
        );
        let crew = case.write("crew.toml", &crew_toml("flaky", &[flaky]));
        case.cairn(&["run", crew.to_str().unwrap()]).expect_code(3);
        let id = case.only_run_id();
        killed_at(&case, &["runs", "retry", &id], &point);
        let expected = if phase == "before" {
            "failed"
        } else {
            "queued"
        };
        assert_eq!(case.show(&id)["status"], expected, "{point}");
        check_invariants(&case, &point);
        std::fs::write(&flag, "").unwrap();
        if phase == "before" {
            // Nothing landed: the retry again runs it.
            case.cairn(&["runs", "retry", &id]).expect_code(0);
        } else {
            // It landed: a second retry is refused as the wrong state, and
            // a resume runs the queued run.
            case.cairn(&["runs", "retry", &id]).expect_code(2);
            case.cairn(&["resume", &id]).expect_code(0);
        }
        succeeded(&case, &id, &point);
        check_invariants(&case, &point);

        let crew = case.counting_crew(2);
        let queued = case
            .cairn(&["submit", crew.to_str().unwrap()])
            .expect_code(0);
        let queued = queued.stdout.trim().to_owned();
        let second = format!("{phase}:act");
        killed_at(&case, &["runs", "cancel", &queued], &second);
        let expected = if phase == "before" {
            "queued"
        } else {
            "cancelled"
        };
        assert_eq!(case.show(&queued)["status"], expected, "{second}");
        if phase == "before" {
            case.cairn(&["runs", "cancel", &queued]).expect_code(0);
        }
        assert_eq!(case.show(&queued)["status"], "cancelled", "{second}");
        assert!(
            case.executions().is_empty(),
            "{second}: a cancelled run ran"
        );
        check_invariants(&case, &second);
    }
}

fn fork(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:fork");
        let case = Case::new(kind);
        let crew = case.counting_crew(3);
        case.cairn(&["run", crew.to_str().unwrap()]).expect_code(0);
        let id = case.only_run_id();
        killed_at(&case, &["runs", "fork", &id, "--from-step", "1"], &point);
        let runs = case.list();
        assert_eq!(
            runs.len(),
            1 + usize::from(phase == "after"),
            "{point}: {runs:#?}"
        );
        check_invariants(&case, &point);
        let child = match runs.iter().find(|r| r["id"] != id.as_str()) {
            Some(child) => child["id"].as_str().unwrap().to_owned(),
            None => case
                .cairn(&["runs", "fork", &id, "--from-step", "1", "--json"])
                .expect_code(0)
                .json()["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        };
        case.cairn(&["resume", &child]).expect_code(0);
        succeeded(&case, &child, &point);
        // The parent ran 0, 1, 2; the fork 1 and 2 only.
        assert_eq!(case.executions(), vec![0, 1, 2, 1, 2], "{point}");
        check_invariants(&case, &point);
    }
}

/// The scripted model calls a tool once, then answers.
fn model() -> String {
    let call = r#"{ id = "c_1", name = "lookup", arguments = { order = "A-1" } }"#;
    one_call_script("Looking it up.", call, "Done.")
}

fn llm_crew(case: &Case) -> String {
    let model = case.write("model.toml", &model());
    let log = case.path("tool.log");
    let tool = format!(
        "cat > /dev/null; echo \"$CAIRN_IDEMPOTENCY_KEY\" >> {}; echo '{{\"ok\": true}}'",
        log.display()
    );
    let clerk = agent_scripted("clerk", &model, "Look the order up.")
        + &tool_block("lookup", &["sh", "-c", &tool], true);
    let text = crew_toml("clerk", &[clerk]);
    case.write("crew.toml", &text).to_str().unwrap().to_owned()
}

/// Killed around each journal item of an `llm` step in turn: the resumed
/// step finishes with one final answer, and its journal has no item twice.
fn journal_append(kind: Kind) {
    for nth in 1..=4 {
        for phase in PHASES {
            let point = format!("{phase}:append_journal#{nth}");
            let case = Case::new(kind);
            let crew = llm_crew(&case);
            killed_at(&case, &["run", &crew], &point);
            let id = case.only_run_id();
            check_invariants(&case, &point);
            case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
            let run = case.show(&id);
            assert_eq!(run["status"], "succeeded", "{point}: {run:#}");
            assert_eq!(step(&run, 0)["output"], "Done.", "{point}: {run:#}");
            let journal = case.cairn(&["runs", "journal", &id, "--json"]).json();
            let items = journal.as_array().cloned().unwrap_or_default();
            // No text, tool call or result twice, but an item a repair
            // dropped (an unfinished text), which may come again.
            let dropped: Vec<&Value> = items
                .iter()
                .filter(|e| e["kind"] == "repair")
                .flat_map(|e| e["payload"]["seqs"].as_array().into_iter().flatten())
                .collect();
            let kinds = [
                "assistant_text",
                "tool_call_started",
                "tool_call",
                "tool_result",
            ];
            let mut seen = std::collections::HashSet::new();
            for item in items
                .iter()
                .filter(|e| kinds.iter().any(|k| e["kind"] == *k))
            {
                if dropped.contains(&&item["seq"]) {
                    continue;
                }
                let key = (item["kind"].to_string(), item["payload"].to_string());
                assert!(
                    seen.insert(key),
                    "{point}: a journal item twice: {items:#?}"
                );
            }
            // The idempotent tool ran under one key, again only if its
            // result was not journaled before the kill.
            let calls = std::fs::read_to_string(case.path("tool.log")).unwrap_or_default();
            let calls: Vec<&str> = calls.lines().collect();
            assert!((1..=2).contains(&calls.len()), "{point}: {calls:?}");
            assert!(
                calls.iter().all(|k| *k == format!("{id}/0/c_1")),
                "{point}: {calls:?}"
            );
            check_invariants(&case, &point);
        }
    }
}

fn compaction(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:compact");
        let case = Case::new(kind);
        let crew = case.counting_crew(2);
        let crew = crew.to_str().unwrap();
        case.cairn(&["run", crew]).expect_code(0);
        let queued = case
            .cairn(&["submit", crew])
            .expect_code(0)
            .stdout
            .trim()
            .to_owned();
        let args = ["compact", "--finished-older-than", "0s"];
        killed_at(&case, &args, &point);
        assert_eq!(
            case.list().len(),
            if phase == "before" { 2 } else { 1 },
            "{point}"
        );
        check_invariants(&case, &point);
        case.cairn(&args).expect_code(0);
        let left = case.list();
        assert_eq!(left.len(), 1, "{point}: {left:#?}");
        assert_eq!(left[0]["id"], queued.as_str(), "{point}");
        case.cairn(&["resume", &queued]).expect_code(0);
        check_invariants(&case, &point);
    }
}

both_backends!(lost_acknowledgements_are_recognised);

/// Each kind of commit that is retried (step, journal item, answer,
/// operator action) lands but reports a lost connection
/// (`lose_ack:OP`): the retry finds its own write instead of writing
/// again or failing it as stale, so nothing is doubled and the run goes on.
fn lost_acknowledgements_are_recognised(kind: Kind) {
    // An answer sent again is a no-op that returns the wait: it needs no
    // check of its own, so only the others say they found their write.
    let lost = |case: &Case, args: &[&str], point: &str, code: i32| {
        let out = case
            .cairn_env(args, &[("CAIRN_FAILPOINTS", point), ("CAIRN_LOG", "info")])
            .expect_code(code);
        if point.contains("answer_wait") {
            out.expect_stderr(&["trying again"]);
        } else {
            out.expect_stderr(&["trying again", "had landed"]);
        }
    };
    let count = |case: &Case, id: &str, kind: &str| {
        case.events(id)
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == kind)
            .count()
    };

    let point = "lose_ack:commit_step#2";
    let case = Case::new(kind);
    let crew = case.counting_crew(3);
    lost(&case, &["run", crew.to_str().unwrap()], point, 0);
    let id = case.only_run_id();
    succeeded(&case, &id, point);
    ran_once(&case, 3, None, point);
    assert_eq!(count(&case, &id, "step_succeeded"), 3, "{point}");
    check_invariants(&case, point);

    let point = "lose_ack:append_journal#2";
    let case = Case::new(kind);
    let crew = llm_crew(&case);
    lost(&case, &["run", &crew], point, 0);
    let id = case.only_run_id();
    succeeded(&case, &id, point);
    let journal = case.cairn(&["runs", "journal", &id, "--json"]).json();
    let kinds = crate::support::strs(&journal, "kind");
    assert!(!kinds.contains(&"repair"), "{point}: {kinds:?}");
    let content: Vec<String> = journal
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] != "turn_end")
        .map(|e| format!("{}{}", e["kind"], e["payload"]))
        .collect();
    let unique: std::collections::HashSet<&String> = content.iter().collect();
    assert_eq!(
        unique.len(),
        content.len(),
        "{point}: an item twice: {journal:#}"
    );
    check_invariants(&case, point);

    let point = "lose_ack:answer_wait";
    let case = Case::new(kind);
    let crew = review_crew(&case, "");
    case.cairn(&["run", &crew]).expect_code(4);
    let id = case.only_run_id();
    let wait = open_wait_id(&case, point);
    lost(&case, &["waits", "answer", &wait, "--approve"], point, 0);
    succeeded(&case, &id, point);
    assert_eq!(count(&case, &id, "wait_answered"), 1, "{point}");
    check_invariants(&case, point);

    let point = "lose_ack:act";
    let case = Case::new(kind);
    let crew = case.counting_crew(2);
    let queued = case
        .cairn(&["submit", crew.to_str().unwrap()])
        .expect_code(0);
    let queued = queued.stdout.trim().to_owned();
    lost(&case, &["runs", "cancel", &queued], point, 0);
    assert_eq!(case.show(&queued)["status"], "cancelled", "{point}");
    assert_eq!(count(&case, &queued, "run_cancelled"), 1, "{point}");
    check_invariants(&case, point);
}

both_backends!(set_aside, retention_task);

/// Breaks a run's stored crew definition, as a corrupt row would.
fn corrupt(case: &Case, id: &str) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(case.db.exec(&format!(
            r#"UPDATE runs SET crew_def = '{{"not": "a crew"}}' WHERE id = '{id}'"#
        )));
}

/// A worker killed around setting a corrupt run aside: the next worker
/// sets it aside (once) and runs the healthy one behind it.
fn set_aside(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:set_aside");
        let case = Case::new(kind);
        let crew = case.counting_crew(2);
        let crew = crew.to_str().unwrap();
        let bad = case
            .cairn(&["submit", crew])
            .expect_code(0)
            .stdout
            .trim()
            .to_owned();
        let good = case
            .cairn(&["submit", crew])
            .expect_code(0)
            .stdout
            .trim()
            .to_owned();
        corrupt(&case, &bad);
        let mut w = worker(&case, "killed", &[("CAIRN_FAILPOINTS", &point)]);
        expect_killed(&case, &mut w, "killed", &point);
        let expected = if phase == "before" {
            "queued"
        } else {
            "failed"
        };
        // `runs show` refuses a corrupt run; the listing names it.
        let listed = |id: &str| {
            case.list()
                .into_iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("{point}: run {id} is not listed"))
        };
        assert_eq!(listed(&bad)["status"], expected, "{point}");
        assert!(case.executions().is_empty(), "{point}: a step ran");
        finish_with_a_worker(&case, &good, &point);
        succeeded(&case, &good, &point);
        ran_once(&case, 2, None, &point);
        let run = listed(&bad);
        assert_eq!(run["status"], "failed", "{point}: {run:#}");
        assert_eq!(run["error"]["kind"], "corruption", "{point}: {run:#}");
        let set_aside = case.events_of(&bad, "run_failed").len();
        assert_eq!(set_aside, 1, "{point}: set aside {set_aside} times");
    }
}

/// A worker killed around taking the periodic retention task: before, the
/// next worker takes it at once; after, that interval's pass is lost with
/// the process (the task is taken until the interval ends) and the next
/// interval's pass removes the finished runs. A waiting run is untouched.
fn retention_task(kind: Kind) {
    for phase in PHASES {
        let point = format!("{phase}:claim_task");
        let case = Case::new(kind);
        let crew = case.counting_crew(2);
        let crew = crew.to_str().unwrap();
        case.cairn(&["run", crew]).expect_code(0);
        let queued = case.cairn(&["submit", crew, "--input", r#"{"later": 1}"#]);
        let queued = queued.expect_code(0).stdout.trim().to_owned();
        case.cairn(&["runs", "cancel", &queued]).expect_code(0);
        // An unfinished run no worker takes (it waits for a review): the
        // pass must leave it alone.
        let review = review_crew(&case, "");
        case.cairn(&["run", &review]).expect_code(4);
        let kept = case
            .list()
            .into_iter()
            .find(|r| r["status"] == "waiting")
            .expect("the waiting run")["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let before = case.show(&kept);
        let compact = ["--compact-every", "2s", "--finished-older-than", "0s"];
        let mut cmd = case.command();
        cmd.args(["worker", "--db", case.url(), "--poll-ms", "50"])
            .args(compact)
            .env("CAIRN_FAILPOINTS", &point)
            .env("CAIRN_LOG", "warn")
            .stdout(std::fs::File::create(case.path("worker-killed.stdout")).unwrap())
            .stderr(std::fs::File::create(case.path("worker-killed.stderr")).unwrap());
        let mut w = Spawned(cmd.spawn().expect("spawn cairn worker"));
        expect_killed(&case, &mut w, "killed", &point);
        let mut cmd = case.command();
        cmd.args(["worker", "--db", case.url(), "--poll-ms", "50"])
            .args(compact)
            .env("CAIRN_LOG", "warn")
            .stdout(std::fs::File::create(case.path("worker-next.stdout")).unwrap())
            .stderr(std::fs::File::create(case.path("worker-next.stderr")).unwrap());
        let mut next = Spawned(cmd.spawn().expect("spawn cairn worker"));
        // The finished and cancelled runs go, the waiting one stays.
        let gone = |id: &str| case.list().iter().all(|r| r["id"] != id);
        let started = std::time::Instant::now();
        while case.list().len() > 1 {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{point}: no retention pass in 20 s: {:#?}\n{}",
                case.list(),
                std::fs::read_to_string(case.path("worker-next.stderr")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        kill(next.pid(), Signal::SIGTERM).unwrap();
        let status = next.wait(&point);
        assert!(
            status.success(),
            "{point}: the next worker ended {status} after SIGTERM:\n{}",
            std::fs::read_to_string(case.path("worker-next.stderr")).unwrap_or_default()
        );
        assert!(gone(&queued), "{point}");
        assert_eq!(case.show(&kept), before, "{point}: the waiting run changed");
        // The first run's steps ran once; the cancelled run's never.
        assert_eq!(case.executions(), vec![0, 1], "{point}");
        assert_eq!(writer_runs(&case), 1, "{point}");
    }
}
