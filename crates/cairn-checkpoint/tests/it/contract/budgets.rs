//! Budgets: what a run and its descendants spent, from their journals and
//! tool events (`spent`); a child's model call holding its estimate
//! against a budgeted ancestor until released (`reserve_budget`,
//! `release_budget`); an operator's raise of a run's budget
//! (`raise_budget`); and a thread's budget over all its runs
//! (`set_thread_budget`, `thread_budget`).

use std::time::Duration;

use cairn_checkpoint::{AfterRaise, Error, JournalAppend, StepTransition};
use cairn_core::{
    budget_key, Attempt, Budget, BudgetAsk, ErrorInfo, ErrorKind, EventKind, JournalKind,
    LeaseEpoch, RunId, RunStatus, StepIdx, TreeAnswer, Usd,
};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::children::spawned_under;
use super::{claim_by, kinds, operator, Db};
use crate::{claim_req, fresh, new_run, submitted_and_claimed, success};

both!(
    a_runs_spending_is_counted_from_its_journal_its_tools_and_its_children,
    a_childs_call_waits_while_siblings_hold_the_room_it_needs,
    a_release_wakes_a_sibling_deferred_for_room_and_a_spent_budget_refuses,
    a_raise_adds_to_the_runs_limits_and_continues_what_the_budget_stopped,
    a_raise_of_a_finished_run_is_refused_and_writes_nothing,
    a_threads_budget_is_set_and_raised_and_a_bad_one_writes_nothing,
    a_threads_budget_counts_what_its_runs_and_their_children_spent,
);

fn tokens(n: u64) -> Budget {
    Budget {
        tokens: Some(n),
        ..Budget::default()
    }
}

/// A finished model response of step 0 of `run`, as an `llm` agent
/// journals it.
async fn turn_end(store: &Db, run: RunId, epoch: LeaseEpoch, input: u64, output: u64, cost: u64) {
    let mut payload = json!({"stop_reason": "end", "input_tokens": input,
                             "output_tokens": output, "ms": 5});
    if cost > 0 {
        payload["cost_nanos"] = json!(cost);
    }
    let item = JournalAppend {
        run_id: run,
        fence: crate::fence(epoch),
        idx: StepIdx(0),
        attempt: Attempt(1),
        generation: 0,
        kind: JournalKind::TurnEnd,
        payload,
        event: None,
    };
    store.append_journal(&item).await.unwrap();
}

/// `run` (under its lease's epoch) asks to hold `ask`, and may go on.
async fn may_go(store: &Db, run: (cairn_core::RunId, cairn_core::LeaseEpoch), ask: BudgetAsk) {
    let answer = store.reserve_budget(run.0, run.1, &ask).await;
    assert_eq!(answer.unwrap(), TreeAnswer::Go, "{ask:?}");
}

fn ask(input: u64, total: u64) -> BudgetAsk {
    BudgetAsk {
        input_tokens: input,
        tokens: total,
        ..BudgetAsk::default()
    }
}

/// A claimed parent with budget `budget` whose step 0 spawned children
/// `a` and `b`, both claimed: the parent and the children's leases.
async fn budgeted_tree(store: &Db, budget: Budget) -> (RunId, Vec<(RunId, LeaseEpoch)>) {
    let mut parent = new_run(2, None);
    parent.budget = Some(budget);
    let rule = cairn_core::JoinRule::All;
    let (id, kids) = spawned_under(store, parent, &["a", "b"], rule, None).await;
    let mut held = vec![];
    for kid in kids {
        let c = store.claim(kid, &claim_req(false)).await.unwrap();
        held.push((kid, c.run.lease_epoch));
    }
    (id, held)
}

async fn a_runs_spending_is_counted_from_its_journal_its_tools_and_its_children(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    assert_eq!(store.spent(id).await.unwrap().tokens, 0);
    turn_end(&store, id, epoch, 100, 20, 5_000).await;
    turn_end(&store, id, epoch, 50, 5, 0).await;
    let tool = crate::event(EventKind::ToolExecuted, json!({"tool": "search"}));
    store
        .record_events(id, &crate::fence(epoch), &[tool])
        .await
        .unwrap();
    let spent = store.spent(id).await.unwrap();
    assert_eq!(
        (spent.tokens, spent.input_tokens, spent.output_tokens),
        (175, 150, 25)
    );
    assert_eq!((spent.model_calls, spent.tool_calls), (2, 1));
    assert_eq!(spent.cost_usd, Usd(5_000));

    let (parent, kids) = budgeted_tree(&store, tokens(10_000)).await;
    let (kid, kid_epoch) = kids[0];
    turn_end(&store, kid, kid_epoch, 30, 3, 0).await;
    let of_kid = store.spent(kid).await.unwrap();
    assert_eq!((of_kid.tokens, of_kid.model_calls), (33, 1));
    let of_parent = store.spent(parent).await.unwrap();
    assert_eq!(
        (of_parent.tokens, of_parent.model_calls),
        (33, 1),
        "its tree's"
    );
    assert_eq!(
        store.spent(id).await.unwrap(),
        spent,
        "another tree's are not"
    );
}

async fn a_childs_call_waits_while_siblings_hold_the_room_it_needs(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    // No budgeted ancestor: nothing to hold.
    let loose = submitted_and_claimed(&store, 1).await;
    let free = store
        .reserve_budget(loose.run.id, loose.run.lease_epoch, &ask(10, 900))
        .await;
    assert_eq!(free.unwrap(), TreeAnswer::Free);

    let (parent, kids) = budgeted_tree(&store, tokens(1_000)).await;
    let [(a, ea), (b, eb)] = kids[..] else {
        unreachable!()
    };
    may_go(&store, (a, ea), ask(100, 950)).await;
    match store.reserve_budget(b, eb, &ask(100, 200)).await.unwrap() {
        TreeAnswer::Wait { why, key } => {
            assert_eq!(key, budget_key(parent));
            assert!(why.contains(&parent.to_string()), "{why}");
        }
        other => panic!("950 held, 100 more of 1,000: {other:?}"),
    }
    store.release_budget(a).await.unwrap();
    may_go(&store, (b, eb), ask(100, 200)).await;
    // Asking again replaces a run's own hold: a's 950, then 500; with
    // 1,450 held, b's next 100 would not fit.
    may_go(&store, (a, ea), ask(100, 950)).await;
    may_go(&store, (a, ea), ask(100, 500)).await;
    may_go(&store, (b, eb), ask(100, 300)).await;
    // Releasing a run that holds nothing is harmless.
    store.release_budget(a).await.unwrap();
    store.release_budget(a).await.unwrap();
}

async fn a_release_wakes_a_sibling_deferred_for_room_and_a_spent_budget_refuses(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (parent, kids) = budgeted_tree(&store, tokens(1_000)).await;
    let [(a, ea), (b, eb)] = kids[..] else {
        unreachable!()
    };
    store.reserve_budget(a, ea, &ask(100, 950)).await.unwrap();
    // b waits for room: deferred on its tree's budget key, a minute out.
    let mut deferral = success(b, eb, 0, 1);
    (deferral.child, deferral.events) = (true, vec![]);
    deferral.transition = StepTransition::Deferred {
        error: ErrorInfo::new(ErrorKind::BudgetExceeded, "no room", true),
        after: Duration::from_secs(60),
        key: budget_key(parent),
        pause: false,
    };
    store.commit_step(&deferral).await.unwrap();
    let worker = claim_by("w", Duration::from_secs(30));
    assert!(store.claim_next(&worker).await.unwrap().is_none());
    store.release_budget(a).await.unwrap();
    let woken = store.claim_next(&worker).await.unwrap().expect("b woken");
    assert_eq!(woken.run.id, b);

    turn_end(&store, a, ea, 850, 50, 0).await;
    match store.reserve_budget(a, ea, &ask(200, 300)).await.unwrap() {
        TreeAnswer::Refused { why } => assert!(why.contains("cairn runs continue"), "{why}"),
        other => panic!("900 of 1,000 spent, 200 more asked: {other:?}"),
    }
    let warned = kinds(&store, parent).await;
    assert!(
        warned.contains(&EventKind::BudgetWarning),
        "80 % reached: {warned:?}"
    );
}

async fn a_raise_adds_to_the_runs_limits_and_continues_what_the_budget_stopped(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let mut run = new_run(2, None);
    run.budget = Some(tokens(100));
    let id = store.submit(run).await.unwrap().run.id;
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    let mut stop = success(id, c.run.lease_epoch, 0, 2);
    let error = ErrorInfo::new(ErrorKind::BudgetExceeded, "100 tokens spent", false);
    stop.transition = StepTransition::Interrupted { error };
    store.commit_step(&stop).await.unwrap();

    let by = operator("ops");
    let raise = Budget {
        model_calls: Some(4),
        ..tokens(50)
    };
    let raised = store
        .raise_budget(id, &raise, AfterRaise::Continue, &by)
        .await
        .unwrap();
    assert_eq!(raised.status, RunStatus::Queued, "continued");
    assert_eq!(
        raised.budget,
        Some(tokens(150)),
        "a limit it lacks is not raised"
    );
    assert_eq!(store.get_run(id).await.unwrap(), raised);
    let events = store.events(id).await.unwrap();
    let [.., raised_event, continued] = &events[..] else {
        unreachable!()
    };
    assert_eq!(raised_event.kind, EventKind::BudgetRaised);
    assert_eq!(raised_event.data["budget"], json!({"tokens": 150}));
    assert_eq!(raised_event.data["by"], json!("ops"));
    assert_eq!(continued.kind, EventKind::RunContinued);

    let stay = store
        .raise_budget(id, &tokens(10), AfterRaise::Stay, &by)
        .await
        .unwrap();
    assert_eq!(
        (stay.status, stay.budget),
        (RunStatus::Queued, Some(tokens(160)))
    );
    // A running run only takes the raise.
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    let on = store
        .raise_budget(id, &tokens(1), AfterRaise::Continue, &by)
        .await
        .unwrap();
    assert_eq!(
        (on.status, on.lease_epoch),
        (RunStatus::Running, c.run.lease_epoch)
    );
}

async fn a_raise_of_a_finished_run_is_refused_and_writes_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 1).await;
    let id = c.run.id;
    let error = ErrorInfo::new(ErrorKind::ExitStatus, "exit 1", false);
    let mut fail = success(id, c.run.lease_epoch, 0, 1);
    fail.transition = StepTransition::Failed { error };
    store.commit_step(&fail).await.unwrap();
    let before = super::stored(&store, id).await;
    for then in [AfterRaise::Stay, AfterRaise::Continue] {
        match store
            .raise_budget(id, &tokens(5), then, &operator("ops"))
            .await
        {
            Err(Error::WrongState { run, status, .. }) => {
                assert_eq!((run, status), (id, RunStatus::Failed));
            }
            other => panic!("{then:?}: expected WrongState, got {other:?}"),
        }
        let after = super::stored(&store, id).await;
        assert_eq!(after, before, "{then:?}: nothing written");
    }
}

async fn a_threads_budget_is_set_and_raised_and_a_bad_one_writes_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let by = operator("ops");
    assert_eq!(store.thread_budget("t").await.unwrap(), None);
    let set = store
        .set_thread_budget("t", &tokens(1_000), false, &by)
        .await
        .unwrap();
    assert_eq!((set.thread_id.as_str(), set.budget), ("t", tokens(1_000)));
    assert_eq!(
        (set.set_by.as_str(), set.reason.as_deref()),
        ("ops", Some("contract test"))
    );
    assert_eq!(set.spent.tokens, 0, "a thread with no run yet");
    let calls = Budget {
        model_calls: Some(5),
        ..Budget::default()
    };
    let both = store
        .set_thread_budget("t", &calls, false, &by)
        .await
        .unwrap();
    assert_eq!(
        both.budget,
        Budget {
            model_calls: Some(5),
            ..tokens(1_000)
        },
        "others stay"
    );
    let raised = store
        .set_thread_budget("t", &tokens(500), true, &by)
        .await
        .unwrap();
    assert_eq!(raised.budget.tokens, Some(1_500));

    let stored = store.thread_budget("t").await.unwrap();
    let lacking = Budget {
        tool_calls: Some(3),
        ..Budget::default()
    };
    let wall = Budget {
        wall_time: Some(60),
        ..Budget::default()
    };
    for (budget, raise) in [(lacking, true), (wall, false)] {
        let refused = store.set_thread_budget("t", &budget, raise, &by).await;
        assert!(
            matches!(refused, Err(Error::BadBudget { .. })),
            "{refused:?}"
        );
        assert_eq!(
            store.thread_budget("t").await.unwrap(),
            stored,
            "nothing written"
        );
    }
}

async fn a_threads_budget_counts_what_its_runs_and_their_children_spent(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    store
        .set_thread_budget("t", &tokens(1_000), false, &operator("ops"))
        .await
        .unwrap();
    for thread in ["t", "u"] {
        let mut run = new_run(1, None);
        run.thread_id = Some(thread.into());
        let id = store.submit(run).await.unwrap().run.id;
        let c = store.claim(id, &claim_req(false)).await.unwrap();
        turn_end(&store, id, c.run.lease_epoch, 30, 10, 0).await;
        // Ended, so the thread's next run may start.
        let done = success(id, c.run.lease_epoch, 0, 1);
        store.commit_step(&done).await.unwrap();
    }
    let counted = store.thread_budget("t").await.unwrap().unwrap();
    let spent = (counted.spent.tokens, counted.spent.model_calls);
    assert_eq!(spent, (40, 1), "t's run only");
    // A child of a run of the thread counts too.
    let mut parent = new_run(2, None);
    parent.thread_id = Some("t".into());
    let (_, kids) = spawned_under(&store, parent, &["k"], cairn_core::JoinRule::All, None).await;
    let c = store.claim(kids[0], &claim_req(false)).await.unwrap();
    turn_end(&store, kids[0], c.run.lease_epoch, 5, 5, 0).await;
    let counted = store.thread_budget("t").await.unwrap().unwrap();
    assert_eq!((counted.spent.tokens, counted.budget), (50, tokens(1_000)));
}
