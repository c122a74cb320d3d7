//! The final state after healing, as the checker reads it: the runs and
//! their events (read with `cairn --json` on the database itself, not
//! through the server), the effects log the step programs kept, and how
//! many faults overlapped each attempt's effects.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use cairn_history::{
    Attempt, CommittedRow, Effect, FaultWindow, FinalState, RowKind, Run, RunStatus,
};
use serde_json::Value;

use crate::support::Case;

/// Waits (up to `limit`) until no run is queued or running, and returns
/// every run as `runs list --json` shows it.
pub fn wait_until_settled(case: &Case, limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let runs = match case
            .cairn(&["runs", "list", "--json", "--limit", "100000"])
            .json()
        {
            Value::Array(runs) => runs,
            other => panic!("runs list --json is not an array: {other}"),
        };
        let busy = runs
            .iter()
            .filter(|r| matches!(r["status"].as_str(), Some("queued" | "running")))
            .count();
        if busy == 0 {
            return runs;
        }
        assert!(
            Instant::now() < deadline,
            "{busy} runs still queued or running {} s after healing",
            limit.as_secs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The final state: `runs`, their events and committed steps, the effects
/// log at `effects`, and each attempt's faults among `windows`.
pub fn read(case: &Case, runs: &[Value], effects: &Path, windows: &[FaultWindow]) -> FinalState {
    let ids: Vec<String> = runs
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect();
    let events = crate::workers::parallel(&ids, 4, |id| case.events(id));
    let mut state = FinalState {
        runs: runs.iter().map(run_of).collect(),
        ..FinalState::default()
    };
    for (id, events) in ids.iter().zip(&events) {
        let events = events.as_array().cloned().unwrap_or_default();
        let seqs = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
        state.events.insert(id.clone(), seqs);
        state.rows.extend(rows_of(id, &events));
    }
    let timed = effects_of(effects);
    state.attempts = attempts_of(&timed, windows);
    state.effects = timed.into_iter().map(|(e, _)| e).collect();
    state
}

fn run_of(run: &Value) -> Run {
    let status = match run["status"].as_str() {
        Some("queued") => RunStatus::Queued,
        Some("running") => RunStatus::Running {
            lease_expired: false,
        },
        Some("waiting") => RunStatus::Waiting,
        _ => RunStatus::Finished,
    };
    Run {
        id: run["id"].as_str().unwrap_or_default().to_owned(),
        key: run["idempotency_key"].as_str().map(str::to_owned),
        parent: run["parent_run_id"].as_str().map(str::to_owned),
        status,
    }
}

/// Each `step_succeeded` of a run, with the lease in force by event order
/// (the last `run_claimed` before it).
fn rows_of(run: &str, events: &[Value]) -> Vec<CommittedRow> {
    let mut lease: Option<(u64, String)> = None;
    let mut rows = vec![];
    for e in events {
        match e["kind"].as_str() {
            Some("run_claimed") => {
                let epoch = e["data"]["epoch"].as_u64();
                let owner = e["data"]["owner"].as_str().map(str::to_owned);
                lease = epoch.zip(owner);
            }
            Some("step_succeeded") => rows.push(CommittedRow {
                run: run.to_owned(),
                step: e["data"]["idx"].as_u64().unwrap_or_default() as u32,
                kind: RowKind::Step,
                epoch: lease.as_ref().map(|l| l.0),
                owner: lease.as_ref().map(|l| l.1.clone()),
                order: e["seq"].as_u64().unwrap_or_default(),
            }),
            _ => {}
        }
    }
    rows
}

/// The effects log: `RUN STEP ATTEMPT WORKER NANOS` a line, each effect
/// with when it happened. The step programs do not know their lease's
/// epoch: 0.
fn effects_of(log: &Path) -> Vec<(Effect, u64)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [run, step, attempt, owner, at] = f[..] else {
                return None;
            };
            let effect = Effect {
                run: run.to_owned(),
                step: step.parse().ok()?,
                attempt: attempt.parse().ok()?,
                epoch: 0,
                owner: owner.to_owned(),
            };
            Some((effect, at.parse().ok()?))
        })
        .collect()
}

/// Each attempt with effects: the fault windows that overlap the span of
/// its effects (a second effect needs a fault between the two), and
/// idempotent (the programs only append a line).
fn attempts_of(effects: &[(Effect, u64)], windows: &[FaultWindow]) -> Vec<Attempt> {
    let mut spans: BTreeMap<(String, u32, u32), (u64, u64)> = BTreeMap::new();
    for &(ref e, at) in effects {
        let span = spans
            .entry((e.run.clone(), e.step, e.attempt))
            .or_insert((at, at));
        span.0 = span.0.min(at);
        span.1 = span.1.max(at);
    }
    spans
        .into_iter()
        .map(|((run, step, attempt), (first, last))| Attempt {
            run,
            step,
            attempt,
            faults: windows
                .iter()
                .filter(|w| w.start_ns <= last && w.end_ns >= first)
                .count() as u32,
            idempotent: true,
        })
        .collect()
}
