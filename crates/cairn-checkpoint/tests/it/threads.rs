//! Threads: runs grouped by `thread_id`, summarised (runs, tokens, newest
//! submit) and listed oldest first; forks keep their source's thread unless
//! given another. Both backends.

use std::sync::Arc;

use cairn_checkpoint::{Error, ForkRequest, Store};
use cairn_core::{Actor, RunId, StepIdx};
use cairn_testkit::{both, Kind};
use serde_json::json;

use crate::{claim_req, fresh, new_run, success};

both!(
    threads_sum_runs_and_tokens_per_thread,
    thread_is_its_runs_oldest_first_with_the_summary,
    an_unknown_thread_is_not_found,
    thread_ids_are_stored_as_given,
    a_fork_keeps_its_thread_unless_given_another,
    thread_history_reads_only_the_newest_runs,
);

/// `thread_history(.., max_runs)`: the newest `max_runs` succeeded runs
/// before the given one, oldest first (older ones are not read).
async fn thread_history_reads_only_the_newest_runs(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let mut done = vec![];
    for _ in 0..5 {
        let id = submit_in(&store, 1, Some("t")).await;
        finish(&store, id, 1).await;
        done.push(id);
    }
    let now = submit_in(&store, 1, Some("t")).await;
    let ids = |turns: Vec<cairn_core::ThreadTurn>| -> Vec<RunId> {
        turns.into_iter().map(|t| t.run_id).collect()
    };
    let all = store.thread_history("t", now, 50).await.unwrap();
    assert_eq!(ids(all), done);
    let newest = store.thread_history("t", now, 2).await.unwrap();
    assert_eq!(ids(newest), done[3..].to_vec());
    // Before the third run: the two before it.
    let early = store.thread_history("t", done[2], 50).await.unwrap();
    assert_eq!(ids(early), done[..2].to_vec());
}

/// Submits a `steps`-step run in `thread`.
async fn submit_in(store: &Arc<dyn Store>, steps: usize, thread: Option<&str>) -> RunId {
    let mut run = new_run(steps, None);
    run.thread_id = thread.map(str::to_owned);
    store.submit(run).await.unwrap().run.id
}

/// Claims the run and commits all of its `steps` steps (step i reports
/// 10 + i input tokens and 1 output token).
async fn finish(store: &Arc<dyn Store>, id: RunId, steps: u32) {
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    for i in 0..steps {
        store
            .commit_step(&success(id, c.run.lease_epoch, i, steps))
            .await
            .unwrap();
    }
}

async fn threads_sum_runs_and_tokens_per_thread(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    assert!(store.threads(&Default::default()).await.unwrap().is_empty());
    // Times are kept to the millisecond: a pause keeps the three apart, so
    // the order below is the submissions' (a tie is broken by thread id).
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(5));
    let a1 = submit_in(&store, 2, Some("a")).await;
    pause().await;
    let b1 = submit_in(&store, 1, Some("b")).await;
    pause().await;
    let a2 = submit_in(&store, 3, Some("a")).await;
    let loose = submit_in(&store, 1, None).await;
    finish(&store, a1, 2).await; // 10 + 11 in, 2 out
    finish(&store, a2, 3).await; // 10 + 11 + 12 in, 3 out
    finish(&store, loose, 1).await; // in no thread: counted nowhere

    let threads = store.threads(&Default::default()).await.unwrap();
    // Ordered by their newest run: b's was submitted before a's second.
    let names: Vec<&str> = threads.iter().map(|t| t.thread_id.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    let (b, a) = (&threads[0], &threads[1]);
    assert_eq!((a.runs, a.input_tokens, a.output_tokens), (2, 54, 5));
    assert_eq!((b.runs, b.input_tokens, b.output_tokens), (1, 0, 0));
    let a2_run = store.get_run(a2).await.unwrap();
    let b1_run = store.get_run(b1).await.unwrap();
    assert_eq!(a.last_run_at, a2_run.created_at);
    assert_eq!(b.last_run_at, b1_run.created_at);

    // Pages of one, after each cursor in turn: the same threads in order.
    let mut paged = vec![];
    let mut page = cairn_checkpoint::ThreadPage {
        after: None,
        limit: Some(1),
    };
    loop {
        let got = store.threads(&page).await.unwrap();
        assert!(got.len() <= 1);
        let Some(last) = got.last() else { break };
        page.after = Some(last.thread_id.clone());
        paged.extend(got);
    }
    assert_eq!(paged, threads);
    // A cursor no run belongs to is not found, not an empty page.
    page.after = Some("nobody".into());
    let err = store.threads(&page).await.unwrap_err();
    assert!(
        matches!(err, cairn_checkpoint::Error::ThreadNotFound(_)),
        "{err:?}"
    );
}

async fn thread_is_its_runs_oldest_first_with_the_summary(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let t1 = submit_in(&store, 1, Some("t")).await;
    let other = submit_in(&store, 1, Some("u")).await;
    let t2 = submit_in(&store, 2, Some("t")).await;
    finish(&store, t1, 1).await;
    finish(&store, other, 1).await;
    let (summary, runs) = store.thread("t").await.unwrap();
    assert_eq!(runs.iter().map(|r| r.id).collect::<Vec<_>>(), [t1, t2]);
    assert!(runs.iter().all(|r| r.thread_id.as_deref() == Some("t")));
    assert_eq!(summary.thread_id, "t");
    assert_eq!(
        (summary.runs, summary.input_tokens, summary.output_tokens),
        (2, 10, 1)
    );
    assert_eq!(summary.last_run_at, runs[1].created_at);
    // The same summary as the list's entry.
    let listed = store.threads(&Default::default()).await.unwrap();
    assert_eq!(listed.iter().find(|t| t.thread_id == "t"), Some(&summary));
}

async fn an_unknown_thread_is_not_found(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    submit_in(&store, 1, Some("known")).await;
    submit_in(&store, 1, None).await;
    for unknown in ["unknown", "KNOWN", "known ", ""] {
        match store.thread(unknown).await {
            Err(Error::ThreadNotFound(t)) => assert_eq!(t, unknown),
            other => panic!("{unknown:?}: {other:?}"),
        }
    }
}

async fn thread_ids_are_stored_as_given(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let long = "x".repeat(256);
    let ids = [
        "user/42 chat #7",
        "é—中文 🙂",
        "%2F'\"; DROP TABLE runs;--",
        long.as_str(),
    ];
    for t in ids {
        submit_in(&store, 1, Some(t)).await;
    }
    for t in ids {
        let (summary, runs) = store.thread(t).await.unwrap();
        assert_eq!(summary.thread_id, t);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].thread_id.as_deref(), Some(t));
    }
    assert_eq!(
        store.threads(&Default::default()).await.unwrap().len(),
        ids.len()
    );
}

async fn a_fork_keeps_its_thread_unless_given_another(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let source = submit_in(&store, 2, Some("origin")).await;
    finish(&store, source, 2).await;
    let op = Actor::new("op");
    let fork = |from: u32, thread: Option<&str>| ForkRequest {
        from_step: StepIdx(from),
        input: None,
        thread_id: thread.map(str::to_owned),
        crew: None,
        rerun_children: false,
    };
    let kept = store.fork(source, &fork(1, None), &op).await.unwrap();
    assert_eq!(kept.thread_id.as_deref(), Some("origin"));
    let moved = store
        .fork(source, &fork(1, Some("elsewhere")), &op)
        .await
        .unwrap();
    assert_eq!(moved.thread_id.as_deref(), Some("elsewhere"));
    let event = store.events(moved.id).await.unwrap().remove(0);
    assert_eq!(event.data["thread_id"], json!("elsewhere"));
    // A run in no thread can be forked into one.
    let loose = submit_in(&store, 1, None).await;
    finish(&store, loose, 1).await;
    let joined = store
        .fork(loose, &fork(0, Some("origin")), &op)
        .await
        .unwrap();
    assert_eq!(joined.thread_id.as_deref(), Some("origin"));
    let (summary, runs) = store.thread("origin").await.unwrap();
    assert_eq!(summary.runs, 3);
    assert_eq!(
        runs.iter().map(|r| r.id).collect::<Vec<_>>(),
        [source, kept.id, joined.id]
    );
    // The fork copied the source's finished steps, tokens included.
    assert_eq!(summary.input_tokens, 10 + 11 + 10);
    assert!(store.thread("elsewhere").await.is_ok());
}
