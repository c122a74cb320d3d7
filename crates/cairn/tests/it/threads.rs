//! Threads through the library: the thread id rule (refused before
//! anything is stored), resume by run and thread, forks and their thread,
//! and the thread documents. Both backends.

use serde_json::json;

use cairn::{
    Actor, Crew, Engine, Error, ErrorClass, ForkRequest, ResumeOptions, RunFilter, RunStatus,
    StepIdx, SubmitOptions,
};
use cairn_testkit::{both, Kind};

both!(
    a_bad_thread_id_is_refused_before_anything_is_stored,
    resume_refuses_a_run_of_another_thread_before_writing,
    a_fork_keeps_its_thread_unless_given_another,
    thread_documents_sum_their_runs,
);

fn crew() -> Crew {
    crate::template_crew("threads", "echo", "{{ input.text }}")
}

fn in_thread(thread: &str) -> SubmitOptions {
    SubmitOptions {
        thread_id: Some(thread.to_owned()),
        ..SubmitOptions::default()
    }
}

async fn event_count(engine: &Engine, id: cairn::RunId) -> usize {
    engine.events(id).await.unwrap().len()
}

async fn a_bad_thread_id_is_refused_before_anything_is_stored(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let crew = crew();
    let too_long = "x".repeat(257);
    for (bad, problem) in [
        ("", "is empty"),
        (too_long.as_str(), "257 bytes"),
        ("a\0b", "NUL"),
    ] {
        let err = engine
            .submit(&crew, json!({"text": "hi"}), in_thread(bad))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::BadThreadId(_)), "{err:?}");
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert_eq!(err.code(), "bad_thread_id");
        let msg = err.to_string();
        assert!(msg.contains("thread_id") && msg.contains(problem), "{msg}");
        let err = engine
            .run(&crew, json!({"text": "hi"}), in_thread(bad))
            .await
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert_eq!(
            engine.thread(bad).await.unwrap_err().class(),
            ErrorClass::BadInput
        );
    }
    assert!(engine.list(&RunFilter::default()).await.unwrap().is_empty());
    // The longest id is fine.
    let longest = "y".repeat(256);
    let done = engine
        .run(&crew, json!({"text": "hi"}), in_thread(&longest))
        .await
        .unwrap();
    assert_eq!(done.run.thread_id.as_deref(), Some(longest.as_str()));
}

async fn resume_refuses_a_run_of_another_thread_before_writing(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let crew = crew();
    let id = engine
        .submit(&crew, json!({"text": "hi"}), in_thread("chat-1"))
        .await
        .unwrap()
        .run
        .id;
    let loose = crate::submitted(&engine, &crew, json!({"text": "hi"})).await;
    let resume = |thread: &str| ResumeOptions {
        thread_id: Some(thread.to_owned()),
        ..ResumeOptions::default()
    };
    for (run, actual) in [(id, "its thread is `chat-1`"), (loose, "no thread")] {
        let before = event_count(&engine, run).await;
        let err = engine.resume(run, resume("chat-2")).await.unwrap_err();
        assert!(matches!(err, Error::WrongThread { .. }), "{err:?}");
        assert_eq!(err.class(), ErrorClass::Conflict);
        assert_eq!(err.code(), "wrong_thread");
        let msg = err.to_string();
        for needle in [run.to_string().as_str(), "`chat-2`", actual] {
            assert!(msg.contains(needle), "{msg} lacks {needle}");
        }
        // Nothing was written: still queued, no claim event.
        assert_eq!(engine.get_run(run).await.unwrap().status, RunStatus::Queued);
        assert_eq!(event_count(&engine, run).await, before);
    }
    let err = engine.resume(id, resume("")).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput);
    let done = engine.resume(id, resume("chat-1")).await.unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
}

async fn a_fork_keeps_its_thread_unless_given_another(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let crew = crew();
    let source = engine
        .run(&crew, json!({"text": "hi"}), in_thread("chat-1"))
        .await
        .unwrap()
        .run
        .id;
    let fork = |thread: Option<&str>| ForkRequest {
        from_step: StepIdx(0),
        input: None,
        thread_id: thread.map(str::to_owned),
        crew: None,
        rerun_children: false,
    };
    let op = Actor::new("op");
    let kept = engine.fork(source, &fork(None), &op).await.unwrap();
    assert_eq!(kept.thread_id.as_deref(), Some("chat-1"));
    let moved = engine
        .fork(source, &fork(Some("chat-2")), &op)
        .await
        .unwrap();
    assert_eq!(moved.thread_id.as_deref(), Some("chat-2"));
    let err = engine
        .fork(source, &fork(Some("a\0b")), &op)
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput);
    assert_eq!(engine.list(&RunFilter::default()).await.unwrap().len(), 3);
}

async fn thread_documents_sum_their_runs(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let crew = crew();
    assert!(engine.threads().await.unwrap().is_empty());
    let mut ids = vec![];
    for (thread, text) in [("a", "1"), ("b", "2"), ("a", "3")] {
        let run = engine
            .run(&crew, json!({ "text": text }), in_thread(thread))
            .await
            .unwrap()
            .run;
        ids.push(run.id);
    }
    let view = engine.thread("a").await.unwrap();
    assert_eq!(view.thread_id, "a");
    assert_eq!(
        view.runs.iter().map(|r| r.id).collect::<Vec<_>>(),
        [ids[0], ids[2]]
    );
    assert_eq!(view.totals.runs, 2);
    let doc = serde_json::to_value(&view).unwrap();
    assert_eq!(
        doc["totals"],
        json!({"runs": 2, "input_tokens": 0, "output_tokens": 0})
    );
    let listed = engine.threads().await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|t| t.thread_id.as_str())
            .collect::<Vec<_>>(),
        ["b", "a"]
    );
    let err = engine.thread("c").await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::NotFound);
    assert_eq!(err.code(), "thread_not_found");
}
