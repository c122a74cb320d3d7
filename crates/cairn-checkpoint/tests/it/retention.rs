//! Retention: `MaintenanceStore::compact` removes what its policy names, counts
//! exactly what disappeared (a dry run counts the same and removes
//! nothing), and never anything an unfinished run needs: after any
//! compaction every queued, running, waiting, interrupted and failed run
//! still goes on to the end with the outputs it would have had (a fork
//! whose source was removed included). Both backends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::{
    Action, CompactPolicy, Compacted, Error, JournalAppend, OnBusy, RunFilter, StepTransition,
    Store, WaitFilter,
};
use cairn_core::{
    Actor, Answer, Attempt, ErrorInfo, ErrorKind, JournalKind, NewWait, RunId, RunStatus, StepIdx,
    WaitKind,
};
use cairn_testkit::{both, Kind, TestDb};
use serde_json::{json, Value};

use crate::{claim_req, fresh, new_run, store, success};

both!(
    a_dry_run_counts_what_a_compaction_removes_and_removes_nothing,
    unfinished_runs_finish_alike_after_any_compaction,
    a_periodic_task_is_taken_once_per_interval,
    each_criterion_removes_what_it_names_alone,
    keep_per_thread_protects_each_threads_newest_from_every_rule,
    a_thread_is_compacted_alone,
);

/// With `thread`, the criteria apply to that thread's runs only: its 3
/// finished runs go, with their journal items and events; every other
/// run keeps every row; a dry run counts the same.
async fn a_thread_is_compacted_alone(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    mix(&store).await;
    let others = |runs: Vec<cairn_core::RunRecord>| -> Vec<RunId> {
        runs.into_iter()
            .filter(|r| r.thread_id.as_deref() != Some("t"))
            .map(|r| r.id)
            .collect()
    };
    let before = census(&store).await;
    let outside = others(store.list_runs(&RunFilter::default()).await.unwrap());
    let policy = CompactPolicy {
        finished_older_than: Some(Duration::ZERO),
        events_older_than: Some(Duration::ZERO),
        journals: true,
        thread: Some("t".into()),
        ..CompactPolicy::default()
    };
    let dry = store
        .compact(&CompactPolicy {
            dry_run: true,
            ..policy.clone()
        })
        .await
        .unwrap();
    let removed = store.compact(&policy).await.unwrap();
    assert_eq!(dry, removed);
    assert_eq!((removed.runs, removed.journal_items), (3, 3), "{removed:?}");
    let after = census(&store).await;
    assert_eq!(rows(removed.clone()), minus(before.0, after.0));
    // The ids reported (the dry run's too) are the runs that disappeared.
    let mut gone: Vec<RunId> = before
        .1
        .keys()
        .filter(|id| !after.1.contains_key(*id))
        .copied()
        .collect();
    let mut named = removed.run_ids.clone();
    gone.sort();
    named.sort();
    assert_eq!(named, gone);
    // Every run of no thread is as it was, rows and all.
    for id in outside {
        assert_eq!(after.1.get(&id), before.1.get(&id), "run {id} changed");
    }
}

/// A policy, what its removal must satisfy, and what that is in words.
type Expect<'a> = (CompactPolicy, &'a dyn Fn(&Compacted) -> bool, &'a str);

/// Each criterion alone removes what it names (a NULL bound for the ones
/// left out must not turn the others off), and a dry run counts the same.
async fn each_criterion_removes_what_it_names_alone(kind: Kind) {
    let zero = Some(Duration::ZERO);
    let alone = |f: &dyn Fn(&mut CompactPolicy)| {
        let mut p = CompactPolicy::default();
        f(&mut p);
        p
    };
    // `mix`: 4 succeeded runs (3 of thread t) and 1 cancelled, each
    // succeeded one with a journal item; 1 failed.
    let cases: [Expect; 5] = [
        (
            alone(&|p| p.journals = true),
            &|c| c.journal_items == 4 && c.runs == 0 && c.events == 0,
            "journals: the finished runs' 4 items",
        ),
        (
            alone(&|p| p.events_older_than = zero),
            &|c| c.events > 0 && c.runs == 0 && c.journal_items == 0,
            "events: some, and no run",
        ),
        (
            alone(&|p| p.finished_older_than = zero),
            &|c| c.runs == 5,
            "finished: 5 runs",
        ),
        (
            alone(&|p| p.failed_older_than = zero),
            &|c| c.runs == 1,
            "failed: 1 run",
        ),
        (
            alone(&|p| p.keep_per_thread = Some(1)),
            &|c| c.runs == 2,
            "keep 1: thread t's 2 older runs",
        ),
    ];
    for (policy, expect, what) in cases {
        let (_db, store) = fresh(kind).await;
        mix(&store).await;
        let dry = CompactPolicy {
            dry_run: true,
            ..policy.clone()
        };
        let counted = store.compact(&dry).await.unwrap();
        let removed = store.compact(&policy).await.unwrap();
        assert!(expect(&removed), "{what}: removed {removed:?}");
        assert_eq!(counted, removed, "{what}: the dry run counted otherwise");
    }
}

/// `keep_per_thread` with an age: every finished run old enough goes but
/// each thread's newest, which no rule removes.
async fn keep_per_thread_protects_each_threads_newest_from_every_rule(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    mix(&store).await;
    let thread_t = RunFilter {
        thread: Some("t".into()),
        status: Some(RunStatus::Succeeded),
        newest_first: true,
        ..RunFilter::default()
    };
    let newest = store.list_runs(&thread_t).await.unwrap()[0].id;
    let policy = CompactPolicy {
        finished_older_than: Some(Duration::ZERO),
        keep_per_thread: Some(1),
        ..CompactPolicy::default()
    };
    let removed = store.compact(&policy).await.unwrap();
    // 4 succeeded + 1 cancelled, less thread t's newest: thread t's other
    // two by the keep rule, the run of no thread and the cancelled one by
    // their age.
    assert_eq!(removed.runs, 4, "{removed:?}");
    let by_rule = (
        removed.rules.beyond_keep,
        removed.rules.finished,
        removed.rules.failed,
    );
    assert_eq!(by_rule, (2, 2, 0), "{removed:?}");
    let left = store.list_runs(&thread_t).await.unwrap();
    assert_eq!(left.iter().map(|r| r.id).collect::<Vec<_>>(), vec![newest]);
}

/// Two workers (here two stores on one database) asking for the same task
/// in the same interval: exactly one gets it.
async fn a_periodic_task_is_taken_once_per_interval(kind: Kind) {
    let db = TestDb::of(kind).await;
    let (a, b) = (store(&db).await, store(&db).await);
    let hour = Duration::from_secs(3600);
    assert!(a.claim_task("compact", hour, "a").await.unwrap());
    assert!(!b.claim_task("compact", hour, "b").await.unwrap());
    assert!(!a.claim_task("compact", hour, "a").await.unwrap());
    // Another task is its own; an interval of zero is due at once again.
    assert!(b.claim_task("other", Duration::ZERO, "b").await.unwrap());
    assert!(a.claim_task("other", Duration::ZERO, "a").await.unwrap());
}

/// Every row a user can see, by table, and each run's observable state.
async fn census(store: &Arc<dyn Store>) -> (Compacted, BTreeMap<RunId, String>) {
    let mut total = Compacted::default();
    let mut runs = BTreeMap::new();
    for run in store.list_runs(&RunFilter::default()).await.unwrap() {
        let (r, steps) = store.load(run.id).await.unwrap();
        let events = store.events(r.id).await.unwrap();
        let mut journal = 0;
        for s in &steps {
            journal += store.journal(r.id, s.idx, None).await.unwrap().len() as u64;
        }
        let filter = WaitFilter {
            run: Some(r.id),
            ..WaitFilter::default()
        };
        let waits = store.list_waits(&filter).await.unwrap();
        total.runs += 1;
        total.steps += steps.len() as u64;
        total.events += events.len() as u64;
        total.journal_items += journal;
        total.waits += waits.len() as u64;
        let state = format!(
            "{} {} {:?} journal {journal} waits {:?}",
            r.status,
            r.cursor,
            steps
                .iter()
                .map(|s| (s.status, s.attempt, s.output.clone()))
                .collect::<Vec<_>>(),
            waits.iter().map(|w| w.status).collect::<Vec<_>>()
        );
        runs.insert(r.id, state);
    }
    (total, runs)
}

/// The rows counted by table (the per-rule split is not rows).
/// The row counts of `c` (not which rule or which runs).
fn rows(c: Compacted) -> Compacted {
    Compacted {
        rules: Default::default(),
        run_ids: vec![],
        ..c
    }
}

fn minus(a: Compacted, b: Compacted) -> Compacted {
    Compacted {
        rules: Default::default(),
        runs: a.runs - b.runs,
        steps: a.steps - b.steps,
        events: a.events - b.events,
        journal_items: a.journal_items - b.journal_items,
        waits: a.waits - b.waits,
        run_ids: vec![],
    }
}

async fn journal_item(store: &Arc<dyn Store>, id: RunId, epoch: cairn_core::LeaseEpoch, idx: u32) {
    store
        .append_journal(&JournalAppend {
            run_id: id,
            fence: crate::fence(epoch),
            idx: StepIdx(idx),
            attempt: Attempt(1),
            generation: 0,
            kind: JournalKind::AssistantText,
            payload: json!({"text": "thinking"}),
            event: None,
        })
        .await
        .unwrap();
}

/// One run in every status, finished ones in a thread too; each with a
/// journal item where it ran. The unfinished runs, by label.
async fn mix(store: &Arc<dyn Store>) -> BTreeMap<&'static str, RunId> {
    let mut left = BTreeMap::new();
    let submit = |steps: usize, thread: Option<&str>| {
        let mut run = new_run(steps, None);
        run.thread_id = thread.map(str::to_owned);
        run.on_busy = OnBusy::Queue;
        let store = store.clone();
        async move { store.submit(run).await.unwrap().run.id }
    };
    let claim = |id: RunId| {
        let store = store.clone();
        async move {
            store
                .claim(id, &claim_req(false))
                .await
                .unwrap()
                .run
                .lease_epoch
        }
    };
    // A two-step run, claimed, a journal item at step 0, which commits
    // `transition`: its id.
    let (submit, claim) = (&submit, &claim);
    let stopped_at_step_0 = |transition: StepTransition| async move {
        let id = submit(2, None).await;
        let e = claim(id).await;
        journal_item(store, id, e, 0).await;
        let mut commit = success(id, e, 0, 2);
        commit.transition = transition;
        store.commit_step(&commit).await.unwrap();
        id
    };
    // Finished: three succeeded runs of a thread, one succeeded alone, one
    // cancelled.
    let mut last = None;
    for thread in [Some("t"), Some("t"), Some("t"), None] {
        let id = submit(2, thread).await;
        let e = claim(id).await;
        journal_item(store, id, e, 0).await;
        store.commit_step(&success(id, e, 0, 2)).await.unwrap();
        store.commit_step(&success(id, e, 1, 2)).await.unwrap();
        last = Some(id);
    }
    // A fork of the last one from its step 1: queued, its step 0 copied.
    // Removing its (finished) source must not stop it.
    if let Some(source) = last {
        let req = cairn_checkpoint::ForkRequest {
            from_step: StepIdx(1),
            input: None,
            thread_id: None,
            crew: None,
            rerun_children: false,
        };
        let fork = store.fork(source, &req, &Actor::new("ops")).await.unwrap();
        left.insert("fork", fork.id);
    }
    let id = submit(2, None).await;
    store
        .act(id, Action::Cancel, &Actor::new("ops"))
        .await
        .unwrap();
    // Failed (parked, retryable).
    let id = stopped_at_step_0(StepTransition::Failed {
        error: ErrorInfo::new(ErrorKind::Agent, "no", false),
    })
    .await;
    left.insert("failed", id);
    // Running at step 1, with a journal on each step.
    let id = submit(3, None).await;
    let e = claim(id).await;
    journal_item(store, id, e, 0).await;
    store.commit_step(&success(id, e, 0, 3)).await.unwrap();
    journal_item(store, id, e, 1).await;
    left.insert("running", id);
    // Waiting for an answer at step 0.
    let id = stopped_at_step_0(StepTransition::Waiting {
        output: None,
        wait: NewWait {
            question_id: Some("budget".into()),
            ..crate::new_wait(WaitKind::Question, json!({"q": "budget?"}))
        },
    })
    .await;
    left.insert("waiting", id);
    // Interrupted at step 0.
    let id = stopped_at_step_0(StepTransition::Interrupted {
        error: ErrorInfo::new(ErrorKind::Interrupted, "max_turns", false),
    })
    .await;
    left.insert("interrupted", id);
    // Queued, in the thread behind its finished runs.
    left.insert("queued", submit(2, Some("t")).await);
    left
}

/// Takes an unfinished run to the end as an operator and a worker would;
/// its final state.
async fn finish(store: &Arc<dyn Store>, id: RunId) -> (RunStatus, Vec<Option<Value>>) {
    let run = store.get_run(id).await.unwrap();
    match run.status {
        RunStatus::Failed => {
            store
                .act(id, Action::Retry, &Actor::new("ops"))
                .await
                .unwrap();
        }
        RunStatus::Interrupted => {
            store
                .act(id, Action::Continue, &Actor::new("ops"))
                .await
                .unwrap();
        }
        RunStatus::Waiting => {
            let filter = WaitFilter {
                run: Some(id),
                ..WaitFilter::default()
            };
            let wait = store.list_waits(&filter).await.unwrap().remove(0);
            let answer = Answer::Answer { value: json!(500) };
            store
                .answer_wait(wait.id, &answer, &cairn_core::Actor::new("ops"))
                .await
                .unwrap();
        }
        _ => {}
    }
    let req = claim_req(true);
    let held = store.claim(id, &req).await.unwrap();
    let (epoch, steps) = (held.run.lease_epoch, held.run.step_count);
    for idx in held.run.cursor.get()..steps {
        let attempt = store.load(id).await.unwrap().1[idx as usize].attempt;
        let mut c = success(id, epoch, idx, steps);
        c.attempt = attempt;
        store.commit_step(&c).await.unwrap();
    }
    let (run, steps) = store.load(id).await.unwrap();
    (run.status, steps.into_iter().map(|s| s.output).collect())
}

fn every_policy() -> Vec<CompactPolicy> {
    let zero = Some(Duration::ZERO);
    let all = CompactPolicy {
        events_older_than: zero,
        journals: true,
        finished_older_than: zero,
        failed_older_than: zero,
        keep_per_thread: Some(1),
        thread: None,
        dry_run: false,
    };
    vec![
        CompactPolicy {
            finished_older_than: zero,
            ..CompactPolicy::default()
        },
        CompactPolicy {
            journals: true,
            ..CompactPolicy::default()
        },
        CompactPolicy {
            events_older_than: zero,
            ..CompactPolicy::default()
        },
        CompactPolicy {
            keep_per_thread: Some(1),
            ..CompactPolicy::default()
        },
        CompactPolicy {
            finished_older_than: Some(Duration::from_secs(3600)),
            failed_older_than: Some(Duration::from_secs(3600)),
            ..CompactPolicy::default()
        },
        CompactPolicy {
            failed_older_than: None,
            ..all.clone()
        },
        all,
    ]
    .into_iter()
    .chain((1..=6).map(random_policy))
    .collect()
}

/// A policy drawn from `seed`: each criterion on or off, ages of 0 s (all
/// that qualifies) or an hour (nothing here), N of 0 to 2.
fn random_policy(seed: u64) -> CompactPolicy {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut draw = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut age = || match draw(3) {
        0 => None,
        1 => Some(Duration::ZERO),
        _ => Some(Duration::from_secs(3600)),
    };
    let (events, finished, failed) = (age(), age(), age());
    CompactPolicy {
        events_older_than: events,
        journals: draw(2) == 0,
        finished_older_than: finished,
        failed_older_than: failed,
        keep_per_thread: (draw(2) == 0).then(|| draw(3) as u32),
        thread: (draw(3) == 0).then(|| "t".to_owned()),
        dry_run: false,
    }
}

async fn a_dry_run_counts_what_a_compaction_removes_and_removes_nothing(kind: Kind) {
    for policy in every_policy() {
        let (_db, store) = fresh(kind).await;
        mix(&store).await;
        let before = census(&store).await;
        let dry = CompactPolicy {
            dry_run: true,
            ..policy.clone()
        };
        let counted = store.compact(&dry).await.unwrap();
        assert_eq!(census(&store).await, before, "{dry:?} changed something");
        let removed = store.compact(&policy).await.unwrap();
        let after = census(&store).await;
        assert_eq!(
            rows(removed.clone()),
            minus(before.0, after.0),
            "{policy:?}: counts"
        );
        // Each run removed whole is counted under exactly one rule.
        let r = removed.rules;
        assert_eq!(
            r.finished + r.failed + r.beyond_keep,
            removed.runs,
            "{policy:?}"
        );
        assert_eq!(
            counted, removed,
            "{policy:?}: the dry run counted otherwise"
        );
        // A second pass finds nothing left to remove but newer events.
        let again = store.compact(&policy).await.unwrap();
        assert_eq!(
            (again.runs, again.steps, again.journal_items),
            (0, 0, 0),
            "{policy:?}"
        );
    }
}

async fn unfinished_runs_finish_alike_after_any_compaction(kind: Kind) {
    // The outputs every unfinished run reaches without any compaction.
    let db = TestDb::of(kind).await;
    let twin = store(&db).await;
    let mut expected = BTreeMap::new();
    for (label, id) in mix(&twin).await {
        expected.insert(label, finish(&twin, id).await);
    }
    assert!(expected.values().all(|(s, _)| *s == RunStatus::Succeeded));
    for policy in every_policy() {
        let (_db, store) = fresh(kind).await;
        let left = mix(&store).await;
        store.compact(&policy).await.unwrap();
        for (label, id) in left {
            if policy.failed_older_than == Some(Duration::ZERO) && label == "failed" {
                // Removed whole, as the policy asked.
                assert!(matches!(
                    store.get_run(id).await,
                    Err(Error::RunNotFound(_))
                ));
                continue;
            }
            assert_eq!(
                finish(&store, id).await,
                expected[label],
                "{label} after {policy:?}"
            );
        }
    }
}
