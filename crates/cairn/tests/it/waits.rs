//! Human waits through the engine, both backends: review after a step
//! (approve, edit, reject with feedback), approval before a step, a question
//! asked mid-step and answered by another process, deadlines, double answers.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use cairn::{
    async_trait, Agent, Answer, Crew, Engine, ErrorKind, EventKind, OnDeadline, RunId, RunStatus,
    StepContext, StepOutput, StepStatus, Stop, WaitKind, WaitRecord, WaitStatus,
};
use cairn_testkit::{both, Kind, TestDb};

/// Writes a draft that shows the attempt and the feedback it saw.
#[derive(Clone, Default)]
struct Writer(Arc<AtomicU32>);

#[async_trait]
impl Agent for Writer {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(StepOutput::new(json!({
            "draft": format!("v{}", cx.step.attempt),
            "feedback": cx.feedback,
        })))
    }
}

/// Asks for a budget, then uses it.
#[derive(Clone, Default)]
struct Planner(Arc<AtomicU32>);

#[async_trait]
impl Agent for Planner {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let budget = cx.ask("budget", "What is the budget?")?;
        Ok(StepOutput::new(json!({"plan": format!("spend {budget}")})))
    }
}

fn reviewed(writer: &Writer) -> Crew {
    Crew::builder("review", "1")
        .agent_named("writer", "writer", writer.clone())
        .review()
        .template("publisher", "{{ outputs.writer.draft }}")
        .build()
        .unwrap()
}

/// Rebuilds a changed definition through the builder, with `writer` attached.
fn crew_from(def: cairn::CrewDef, writer: &Writer) -> Crew {
    let mut b = Crew::builder(def.name, def.version);
    for a in def.agents {
        b = match a.kind {
            cairn::AgentKind::Rust { .. } => {
                b.agent_named(a.role.as_str(), "writer", writer.clone())
            }
            cairn::AgentKind::Template { template } => b.template(a.role.as_str(), template),
            _ => unreachable!(),
        };
        if a.review {
            b = b.review();
        }
        if a.approval.is_some() {
            b = b.approval_before();
        }
        if let Some(ms) = a.wait_deadline_ms {
            b = b.wait_deadline(
                Duration::from_millis(ms),
                a.on_deadline.clone().unwrap_or(OnDeadline::Fail),
            );
        }
    }
    b.build().unwrap()
}

async fn open_wait(engine: &Engine, run: RunId) -> WaitRecord {
    let open = crate::open_waits(engine, run).await;
    assert_eq!(open.len(), 1, "{open:?}");
    open.into_iter().next().unwrap()
}

/// A run of `reviewed(writer)` waiting on its review: its id and the wait.
async fn waiting_review(engine: &Engine, writer: &Writer) -> (RunId, WaitRecord) {
    let id = crate::ran(engine, &reviewed(writer), json!({}))
        .await
        .run
        .id;
    (id, open_wait(engine, id).await)
}

both!(
    review_approve_commits_the_output_and_advances,
    review_edit_commits_the_edited_output_and_keeps_the_original_in_the_event,
    review_reject_runs_the_step_again_with_the_feedback,
    approval_before_waits_then_runs_or_fails_the_run,
    a_question_is_answered_and_the_step_resumes_in_another_process,
    answering_twice_is_a_no_op_and_a_closed_wait_refuses,
    deadlines_fail_the_run_or_apply_the_default,
);

async fn review_approve_commits_the_output_and_advances(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let writer = Writer::default();
    let done = crate::ran(&engine, &reviewed(&writer), json!({})).await;
    assert_eq!(done.run.status, RunStatus::Waiting);
    let view = engine.show(done.run.id).await.unwrap();
    assert_eq!(view.steps[0].status, StepStatus::Waiting);
    assert_eq!(
        view.steps[0].output.as_ref().unwrap()["draft"],
        "v1",
        "stored while it waits"
    );
    let wait = open_wait(&engine, done.run.id).await;
    assert_eq!((wait.kind, wait.step_idx.get()), (WaitKind::Review, 0));
    assert_eq!(wait.prompt["draft"], "v1");

    engine
        .answer(wait.id, &Answer::Approve, "alice")
        .await
        .unwrap();
    let end = engine.execute(done.run.id).await.unwrap();
    assert_eq!(end.run.status, RunStatus::Succeeded);
    let view = engine.show(done.run.id).await.unwrap();
    assert_eq!(view.steps[0].status, StepStatus::Succeeded);
    assert_eq!(view.steps[1].output, Some(json!("v1")));
    assert_eq!(
        writer.0.load(Ordering::SeqCst),
        1,
        "approval did not re-run the step"
    );
}

async fn review_edit_commits_the_edited_output_and_keeps_the_original_in_the_event(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let writer = Writer::default();
    let (id, wait) = waiting_review(&engine, &writer).await;
    let edited = json!({"draft": "edited by bob"});
    engine
        .answer(
            wait.id,
            &Answer::Edit {
                output: edited.clone(),
            },
            "bob",
        )
        .await
        .unwrap();
    engine.execute(id).await.unwrap();
    let view = engine.show(id).await.unwrap();
    assert_eq!(view.steps[0].output, Some(edited));
    assert_eq!(view.steps[1].output, Some(json!("edited by bob")));
    let events = engine.events(id).await.unwrap();
    let answered = events
        .iter()
        .find(|e| e.kind == EventKind::WaitAnswered)
        .unwrap();
    assert_eq!(answered.data["original"]["draft"], "v1");
    assert_eq!(answered.data["by"], "bob");
}

async fn review_reject_runs_the_step_again_with_the_feedback(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let writer = Writer::default();
    let (id, first) = waiting_review(&engine, &writer).await;
    let reject = Answer::Reject {
        feedback: "shorter, please".into(),
    };
    engine.answer(first.id, &reject, "carol").await.unwrap();
    let again = engine.execute(id).await.unwrap();
    assert_eq!(
        again.run.status,
        RunStatus::Waiting,
        "the re-run is reviewed too"
    );
    let second = open_wait(&engine, id).await;
    assert_ne!(
        second.id, first.id,
        "a rejected review's re-run opens a new wait"
    );
    assert_eq!(second.attempt.get(), 2);
    assert_eq!(
        second.prompt,
        json!({"draft": "v2", "feedback": ["shorter, please"]})
    );
    let closed = crate::waits_of(&engine, id).await;
    assert_eq!(closed[0].status, WaitStatus::Answered);
    assert_eq!(writer.0.load(Ordering::SeqCst), 2);
}

async fn approval_before_waits_then_runs_or_fails_the_run(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let writer = Writer::default();
    let crew = Crew::builder("approval", "1")
        .agent_named("writer", "writer", writer.clone())
        .approval_before()
        .build()
        .unwrap();
    for (answer, want) in [
        (Answer::Approve, RunStatus::Succeeded),
        (
            Answer::Reject {
                feedback: "not today".into(),
            },
            RunStatus::Failed,
        ),
    ] {
        let calls = writer.0.load(Ordering::SeqCst);
        let id = crate::ran(&engine, &crew, json!({})).await.run.id;
        assert_eq!(
            writer.0.load(Ordering::SeqCst),
            calls,
            "nothing ran before approval"
        );
        let wait = open_wait(&engine, id).await;
        assert_eq!(wait.kind, WaitKind::Approval);
        engine.answer(wait.id, &answer, "dave").await.unwrap();
        let end = engine.execute(id).await;
        let run = engine.show(id).await.unwrap();
        assert_eq!(run.run.status, want, "{end:?}");
        if want == RunStatus::Failed {
            assert_eq!(run.run.error.unwrap().kind, ErrorKind::Rejected);
            assert_eq!(writer.0.load(Ordering::SeqCst), calls);
        } else {
            assert_eq!(writer.0.load(Ordering::SeqCst), calls + 1);
        }
    }
}

async fn a_question_is_answered_and_the_step_resumes_in_another_process(kind: Kind) {
    let db = TestDb::of(kind).await;
    let planner = Planner::default();
    let crew = Crew::builder("plan", "1")
        .agent_named("planner", "planner", planner.clone())
        .build()
        .unwrap();
    let id = {
        // The first process runs until the question, then goes away.
        let engine = super::engine(&db).await;
        let done = crate::ran(&engine, &crew, json!({})).await;
        assert_eq!(done.run.status, RunStatus::Waiting);
        done.run.id
    };
    let engine = super::engine(&db).await;
    let wait = open_wait(&engine, id).await;
    assert_eq!(wait.kind, WaitKind::Question);
    assert_eq!(wait.question_id.as_deref(), Some("budget"));
    assert_eq!(wait.prompt["question"], "What is the budget?");
    engine
        .answer(wait.id, &Answer::Answer { value: json!(500) }, "erin")
        .await
        .unwrap();
    engine.register(&crew);
    let end = engine.execute(id).await.unwrap();
    assert_eq!(end.run.status, RunStatus::Succeeded);
    let view = engine.show(id).await.unwrap();
    assert_eq!(view.steps[0].output, Some(json!({"plan": "spend 500"})));
    assert_eq!(
        view.steps[0].attempt.get(),
        1,
        "an answer continues the same attempt"
    );
    assert_eq!(planner.0.load(Ordering::SeqCst), 2);
}

async fn answering_twice_is_a_no_op_and_a_closed_wait_refuses(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let writer = Writer::default();
    let (id, wait) = waiting_review(&engine, &writer).await;
    let first = engine
        .answer(wait.id, &Answer::Approve, "alice")
        .await
        .unwrap();
    let events = engine.events(id).await.unwrap();
    let second = engine
        .answer(wait.id, &Answer::Approve, "alice")
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(
        engine.events(id).await.unwrap(),
        events,
        "the repeat wrote nothing"
    );
    let err = engine
        .answer(
            wait.id,
            &Answer::Reject {
                feedback: "changed my mind".into(),
            },
            "alice",
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is `answered`"), "{err}");
    let bad = engine
        .answer(cairn::WaitId::new(), &Answer::Approve, "x")
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("not found"), "{bad}");
}

async fn deadlines_fail_the_run_or_apply_the_default(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let writer = Writer::default();
    for (outcome, want) in [
        (OnDeadline::Fail, RunStatus::Failed),
        (
            OnDeadline::Default {
                answer: Answer::Approve,
            },
            RunStatus::Succeeded,
        ),
    ] {
        let mut def = reviewed(&writer).def().clone();
        def.agents[0].wait_deadline_ms = Some(100);
        def.agents[0].on_deadline = Some(outcome.clone());
        def.version = format!("{outcome:?}");
        let crew = crew_from(def, &writer);
        let id = crate::ran(&engine, &crew, json!({})).await.run.id;
        assert!(
            engine.expire_due_waits().await.unwrap().is_empty(),
            "not due yet"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
        let expired = engine.expire_due_waits().await.unwrap();
        assert_eq!(expired.len(), 1);
        if want == RunStatus::Succeeded {
            assert_eq!(expired[0].answered_by.as_deref(), Some("deadline"));
            engine.execute(id).await.unwrap();
        } else {
            assert_eq!(expired[0].status, WaitStatus::Expired);
        }
        let run = engine.show(id).await.unwrap().run;
        assert_eq!(run.status, want);
        if want == RunStatus::Failed {
            assert_eq!(run.error.unwrap().kind, ErrorKind::Deadline);
        }
    }
}
