//! The differential test: random sequences of store operations (submit,
//! claim, claim_next, takeover, commit a success, a retry, a failure, a wait,
//! an interruption or a spawn of children (whose ends settle the join, and
//! whose parent's cancel reaches them), a stale commit, answer, expire, retry, continue,
//! cancel, fork, heartbeat, journal) applied to a SQLite file and to a
//! PostgreSQL schema must give the same observable results: every answer
//! and error, and then every run, step, event and wait, with ids replaced
//! by the order they were made in and times left out.
//!
//! A seed reproduces a sequence: `CAIRN_DIFF_SEED=N` runs that one alone,
//! `CAIRN_DIFF_SEEDS` sets how many (default 12) and `CAIRN_DIFF_OPS` how
//! many operations each (default 50).

use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::{
    Action, ClaimRequest, Claimed, ForkRequest, JournalAppend, NewChild, Next, SpawnCommit,
    StepTransition, Store, WaitFilter,
};
use cairn_core::{
    Actor, Answer, Attempt, ErrorInfo, ErrorKind, EventKind, JoinRule, JournalKind, LeaseEpoch,
    NewWait, OnDeadline, OnParentClose, Role, RunId, StepIdx, Usage, WaitId, WaitKind,
};
use cairn_testkit::TestDb;
use serde_json::{json, Value};

use crate::{claim_req, new_run, store};

/// A small deterministic generator (xorshift64*), so a seed names a
/// sequence on every machine.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// One operation, with its arguments drawn before it is applied to either
/// backend, so both see exactly the same call.
#[derive(Debug, Clone)]
enum Op {
    Submit {
        steps: usize,
        key: Option<u8>,
        input: u8,
    },
    Claim {
        run: usize,
        takeover: bool,
    },
    ClaimNext,
    Commit {
        run: usize,
        how: Commit,
        stale: bool,
    },
    Answer {
        wait: usize,
        answer: Answer,
    },
    Expire {
        wait: usize,
    },
    Act {
        run: usize,
        action: Action,
    },
    Fork {
        run: usize,
        from: u32,
        input: Option<u8>,
    },
    Heartbeat {
        run: usize,
    },
    Journal {
        run: usize,
    },
}

#[derive(Debug, Clone)]
pub(crate) enum Commit {
    Success,
    Retry,
    Fail,
    Wait(WaitKind, WaitId, bool),
    Interrupt,
    /// A `children` step's spawn: this many children (a one-step crew),
    /// one in flight at a time, joined by the rule.
    Spawn(usize, JoinRule),
}

/// What each backend made so far: run ids in order of creation (the same
/// ordinal names the same run on both), and wait ids (chosen by the test).
#[derive(Default)]
struct Made {
    runs: [Vec<RunId>; 2],
    waits: Vec<WaitId>,
}

impl Made {
    /// `text` with every id replaced by its ordinal, per backend `b`.
    fn label(&self, b: usize, text: &str) -> String {
        let mut out = text.to_owned();
        for (i, id) in self.runs[b].iter().enumerate() {
            out = out.replace(&id.to_string(), &format!("run#{i}"));
        }
        for (i, id) in self.waits.iter().enumerate() {
            out = out.replace(&id.to_string(), &format!("wait#{i}"));
        }
        out
    }
}

fn draw(rng: &mut Rng, made: &Made) -> Op {
    let runs = made.runs[0].len();
    let run = rng.below(runs);
    match rng.below(if runs == 0 { 1 } else { 20 }) {
        0 | 1 => {
            // A key names one crew, so reusing it tests both the repeat
            // (same input) and the conflict (another input).
            let key = rng.chance(40).then(|| rng.below(3) as u8);
            Op::Submit {
                steps: key.map_or(1 + rng.below(3), |k| 1 + usize::from(k)),
                key,
                // 2: an input with a NUL, which both must refuse alike.
                input: match rng.below(5) {
                    4 => 2,
                    n => (n % 2) as u8,
                },
            }
        }
        2..=4 => Op::Claim {
            run,
            takeover: rng.chance(40),
        },
        5 => Op::ClaimNext,
        6..=10 => {
            let how = match rng.below(11) {
                0..=4 => Commit::Success,
                5 => Commit::Retry,
                6 => Commit::Fail,
                7 => Commit::Interrupt,
                8 => Commit::Spawn(
                    1 + rng.below(3),
                    [JoinRule::All, JoinRule::AllOk, JoinRule::FirstOk][rng.below(3)],
                ),
                _ => Commit::Wait(
                    [WaitKind::Review, WaitKind::Approval, WaitKind::Question][rng.below(3)],
                    WaitId::new(),
                    rng.chance(30),
                ),
            };
            Op::Commit {
                run,
                how,
                stale: rng.chance(10),
            }
        }
        11 | 12 if !made.waits.is_empty() => Op::Answer {
            wait: rng.below(made.waits.len()),
            answer: match rng.below(4) {
                0 => Answer::Approve,
                1 => Answer::Edit {
                    output: json!({"edited": true}),
                },
                2 => Answer::Reject {
                    feedback: "again".into(),
                },
                _ => Answer::Answer { value: json!(42) },
            },
        },
        13 if !made.waits.is_empty() => Op::Expire {
            wait: rng.below(made.waits.len()),
        },
        14 | 15 => Op::Act {
            run,
            action: [Action::Retry, Action::Continue, Action::Cancel][rng.below(3)],
        },
        16 => Op::Fork {
            run,
            from: rng.below(3) as u32,
            input: rng.chance(30).then(|| rng.below(2) as u8),
        },
        17 => Op::Heartbeat { run },
        18 => Op::Journal { run },
        _ => Op::ClaimNext,
    }
}

fn request(takeover: bool) -> ClaimRequest {
    claim_req(takeover)
}

/// The commit `how` asks for, at the run's cursor and attempt as the
/// backend's own store reports them.
pub(crate) fn commit_for(
    run: &cairn_core::RunRecord,
    attempt: Attempt,
    how: &Commit,
    stale: bool,
) -> cairn_checkpoint::StepCommit {
    let idx = run.cursor;
    let epoch = LeaseEpoch(run.lease_epoch.0 - i64::from(stale));
    let last = idx.get() + 1 >= run.step_count;
    let error = |retryable| ErrorInfo::new(ErrorKind::ExitStatus, "exit 1", retryable);
    let (transition, events) = match how {
        Commit::Success => (
            StepTransition::Succeeded {
                output: json!({"step": idx, "attempt": attempt}),
                next: match last {
                    true => Next::RunSucceeded,
                    false => Next::Step(Role::new(format!("r{}", idx.next()))),
                },
            },
            vec![crate::event(EventKind::StepSucceeded, json!({"idx": idx}))],
        ),
        Commit::Retry => (
            StepTransition::Retry {
                error: error(true),
                after: Duration::ZERO,
            },
            vec![crate::event(EventKind::StepFailed, json!({"idx": idx}))],
        ),
        Commit::Fail => (
            StepTransition::Failed {
                error: error(false),
            },
            vec![crate::event(EventKind::RunFailed, json!({"idx": idx}))],
        ),
        Commit::Interrupt => (
            StepTransition::Interrupted {
                error: ErrorInfo::new(ErrorKind::Interrupted, "max_turns", false),
            },
            vec![crate::event(
                EventKind::StepInterrupted,
                json!({"idx": idx}),
            )],
        ),
        Commit::Spawn(n, rule) => (
            StepTransition::Spawn(Box::new(SpawnCommit {
                rule: *rule,
                quorum: 0,
                on_parent_close: OnParentClose::Cancel,
                concurrency: Some(1),
                depth: run.child.as_ref().map_or(0, |c| c.depth) + 1,
                crew: crate::new_run(1, None).crew,
                children: (0..*n)
                    .map(|i| NewChild {
                        id: cairn_core::child_id(run.id, idx, attempt, &i.to_string()),
                        key: i.to_string(),
                        input: json!({"item": i}),
                        crew: None,
                    })
                    .collect(),
                wall_time: None,
            })),
            vec![crate::event(
                EventKind::ChildrenSpawned,
                json!({"idx": idx, "children": n}),
            )],
        ),
        Commit::Wait(kind, id, due) => (
            StepTransition::Waiting {
                output: (*kind == WaitKind::Review).then(|| json!({"draft": idx})),
                wait: NewWait {
                    id: *id,
                    kind: *kind,
                    prompt: json!({"idx": idx}),
                    question_id: (*kind == WaitKind::Question).then(|| "q1".to_owned()),
                    deadline_ms: due.then_some(0),
                    on_deadline: due.then_some(OnDeadline::Fail),
                },
            },
            vec![crate::event(EventKind::WaitOpened, json!({"wait": id}))],
        ),
    };
    cairn_checkpoint::StepCommit {
        run_id: run.id,
        fence: crate::fence(epoch),
        idx,
        attempt,
        usage: Some(Usage {
            input_tokens: 7,
            output_tokens: 3,
            cost_usd: Default::default(),
        }),
        events,
        transition,
        child: run.child.is_some(),
    }
}

/// Applies `op` to one backend; the result as text, ids and times removed.
async fn apply(store: &Arc<dyn Store>, b: usize, op: &Op, made: &mut Made) -> String {
    let run_id = |made: &Made, i: usize| made.runs[b][i];
    let claimed = |r: Result<Claimed, _>| {
        r.map(|c: Claimed| {
            format!(
                "claimed epoch {} took_over {} at_cursor {:?}",
                c.run.lease_epoch,
                c.took_over,
                c.at_cursor
                    .map(|s| (s.idx, s.status, s.attempt, s.takeovers))
            )
        })
    };
    let out: Result<String, cairn_checkpoint::Error> = match op {
        Op::Submit { steps, key, input } => {
            let mut new = new_run(*steps, None);
            new.idempotency_key = key.map(|k| format!("key-{k}"));
            new.input = match input {
                2 => json!({"n": "\u{0}"}),
                n => json!({"n": n}),
            };
            store.submit(new).await.map(|s| {
                if s.created {
                    made.runs[b].push(s.run.id);
                }
                format!("submitted {} created {}", s.run.id, s.created)
            })
        }
        Op::Claim { run, takeover } => {
            claimed(store.claim(run_id(made, *run), &request(*takeover)).await)
        }
        Op::ClaimNext => match store.claim_next(&request(true)).await {
            Ok(Some(c)) => {
                let id = c.run.id;
                claimed(Ok(c)).map(|t| format!("{id} {t}"))
            }
            Ok(None) => Ok("nothing runnable".into()),
            Err(e) => Err(e),
        },
        Op::Commit { run, how, stale } => {
            let (run, steps) = store.load(run_id(made, *run)).await.unwrap();
            let attempt = steps
                .get(run.cursor.as_usize())
                .map_or(Attempt(1), |s| s.attempt);
            let c = commit_for(&run, attempt, how, *stale);
            let r = store.commit_step(&c).await.map(|()| "committed".to_owned());
            if let (Ok(_), StepTransition::Spawn(spawn)) = (&r, &c.transition) {
                made.runs[b].extend(spawn.children.iter().map(|c| c.id));
            }
            if let (Ok(_), Some(w)) = (&r, c.rows().open_wait) {
                if b == 0 {
                    made.waits.push(w.id);
                }
            }
            r
        }
        Op::Answer { wait, answer } => store
            .answer_wait(made.waits[*wait], answer, &cairn_core::Actor::new("op"))
            .await
            .map(|w| format!("{:?} {:?}", w.status, w.answer)),
        Op::Expire { wait } => store
            .expire_wait(made.waits[*wait])
            .await
            .map(|w| format!("{:?}", w.status)),
        Op::Act { run, action } => store
            .act(run_id(made, *run), *action, &Actor::new("op"))
            .await
            .map(|r| format!("{:?}", r.status)),
        Op::Fork { run, from, input } => {
            let req = ForkRequest {
                from_step: StepIdx(*from),
                input: input.map(|n| json!({"n": n})),
                thread_id: (*from == 0).then(|| "forked".to_owned()),
                crew: None,
                rerun_children: false,
            };
            store
                .fork(run_id(made, *run), &req, &Actor::new("op"))
                .await
                .map(|r| {
                    made.runs[b].push(r.id);
                    format!("forked {:?} at {} in {:?}", r.status, r.cursor, r.thread_id)
                })
        }
        Op::Heartbeat { run } => {
            let r = store.get_run(run_id(made, *run)).await.unwrap();
            store
                .heartbeat(r.id, &crate::fence(r.lease_epoch), Duration::from_secs(30))
                .await
                .map(|l| format!("{l:?}"))
        }
        Op::Journal { run } => {
            let r = store.get_run(run_id(made, *run)).await.unwrap();
            store
                .append_journal(&JournalAppend {
                    run_id: r.id,
                    fence: crate::fence(r.lease_epoch),
                    idx: r.cursor,
                    attempt: Attempt(1),
                    generation: 0,
                    kind: JournalKind::AssistantText,
                    // Every fourth run's items carry a NUL: refused alike.
                    payload: json!({"text": if *run % 4 == 3 { "h\u{0}" } else { "hi" }}),
                    event: Some(crate::event(EventKind::ModelCalled, json!({}))),
                })
                .await
                .map(|e| format!("journaled {}", e.seq))
        }
    };
    let text = match out {
        Ok(t) => t,
        // A back-off's remaining time is read off each database's clock.
        Err(cairn_checkpoint::Error::NotYet { .. }) => "error: not yet".into(),
        Err(e) => format!("error: {e}"),
    };
    made.label(b, &text)
}

/// Everything a user can observe of every run, as text.
async fn observe(store: &Arc<dyn Store>, b: usize, made: &Made) -> String {
    let mut out = String::new();
    for id in &made.runs[b] {
        let (r, steps) = store.load(*id).await.unwrap();
        let some = |t: Option<chrono::DateTime<chrono::Utc>>| t.is_some();
        out += &format!(
            "{} {} {} cursor {} of {} epoch {} key {:?} parent {:?}/{:?} input {} error {:?} \
             not_before {} cancel {} finished {}\n",
            r.id,
            r.crew_fingerprint,
            r.status,
            r.cursor,
            r.step_count,
            r.lease_epoch,
            r.idempotency_key,
            r.parent_run_id.map(|p| p.to_string()),
            r.parent_step_idx,
            r.input,
            r.error,
            some(r.not_before),
            some(r.cancel_requested_at),
            some(r.finished_at),
        );
        if let Some(c) = &r.child {
            out += &format!(
                "  child {} of {} step {} attempt {}\n",
                c.key, c.parent_run_id, c.step_idx, c.attempt
            );
        }
        for c in store.children(*id).await.unwrap() {
            out += &format!(
                "  has child {} {} {} {:?}\n",
                c.key, c.run_id, c.status, c.output
            );
        }
        for s in steps {
            out += &format!(
                "  step {} {} {} attempt {} output {:?} tokens {:?}/{:?} error {:?} takeovers {} finished {}\n",
                s.idx, s.role, s.status, s.attempt, s.output, s.input_tokens, s.output_tokens,
                s.error, s.takeovers, some(s.finished_at)
            );
        }
        for e in store.events(*id).await.unwrap() {
            out += &format!("  event {} {} {}\n", e.seq, e.kind.as_str(), e.data);
        }
        let filter = WaitFilter {
            run: Some(*id),
            ..WaitFilter::default()
        };
        for w in store.list_waits(&filter).await.unwrap() {
            out += &format!(
                "  wait {} step {} attempt {} {:?} {:?} prompt {} question {:?} answer {:?} by {:?} deadline {}\n",
                w.id, w.step_idx, w.attempt, w.kind, w.status, w.prompt, w.question_id,
                w.answer.map(|a| serde_json::to_value(a).unwrap_or(Value::Null)),
                w.answered_by, w.deadline.is_some()
            );
        }
    }
    made.label(b, &out)
}

/// Runs one sequence; returns each answer (SQLite's, equal to PostgreSQL's).
async fn run_seed(seed: u64, ops: usize) -> Vec<String> {
    let [sqlite, postgres] = TestDb::both().await;
    let stores = [store(&sqlite).await, store(&postgres).await];
    // SplitMix64 of the seed, so neighbouring seeds start far apart.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let mut rng = Rng((z ^ (z >> 31)) | 1);
    let mut made = Made::default();
    let mut log = vec![];
    for n in 0..ops {
        let op = draw(&mut rng, &made);
        let a = apply(&stores[0], 0, &op, &mut made).await;
        let p = apply(&stores[1], 1, &op, &mut made).await;
        log.push(format!("{n}: {op:?} -> {a}"));
        assert_eq!(
            a,
            p,
            "seed {seed}: sqlite and postgres answered op {n} differently\n{}",
            log.join("\n")
        );
    }
    let (a, p) = (
        observe(&stores[0], 0, &made).await,
        observe(&stores[1], 1, &made).await,
    );
    assert_eq!(
        a,
        p,
        "seed {seed}: the stores differ after\n{}",
        log.join("\n")
    );
    log
}

#[tokio::test]
async fn sqlite_and_postgres_agree_on_random_operation_sequences() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let ops = env("CAIRN_DIFF_OPS").unwrap_or(50) as usize;
    let seeds: Vec<u64> = match env("CAIRN_DIFF_SEED") {
        Some(s) => vec![s],
        None => (1..=env("CAIRN_DIFF_SEEDS").unwrap_or(12)).collect(),
    };
    let mut answers = vec![];
    for seed in seeds.iter().copied() {
        answers.extend(run_seed(seed, ops).await);
    }
    // The sequences reached every kind of outcome worth comparing, not just
    // refusals: a test that only compared errors would prove little.
    if seeds.len() > 1 {
        for reached in [
            "Submit",
            "created false",
            "took_over true",
            "Success",
            "Retry",
            "Wait(Review",
            "Wait(Question",
            "Interrupt",
            "-> committed",
            "Answered",
            "Expired",
            "Cancelled",
            "Queued",
            "forked",
            "-> Held",
            "-> CancelRequested",
            "journaled",
            "stale: true",
            "error: ",
        ] {
            assert!(
                answers.iter().any(|a| a.contains(reached)),
                "no sequence reached `{reached}`"
            );
        }
    }
}
