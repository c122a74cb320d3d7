//! The final state after healing, as the checker reads it: the runs and
//! their events, the waits with their decisions and the signals stored
//! (read with `cairn --json` on the database itself, not through the
//! server), the effects log the step programs kept, and how many faults
//! overlapped each attempt's effects.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use cairn_history::{
    Attempt, CommittedRow, Effect, FaultWindow, FinalState, RowKind, Run, RunStatus, StoredSignal,
    Wait,
};
use serde_json::Value;

use super::answers::decision_of;
use crate::support::Case;

/// Waits (up to `limit`) until no run is queued, running or waiting, and
/// returns every run as `runs list --json` shows it. Once a second the
/// runs waiting (for a person or a signal) are given to `finish`, which
/// answers or signals them.
pub fn wait_until_settled(
    case: &Case,
    limit: Duration,
    mut finish: impl FnMut(&[&Value]),
) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    let mut last_finish: Option<Instant> = None;
    loop {
        let runs = match case
            .cairn(&["runs", "list", "--json", "--limit", "100000"])
            .json()
        {
            Value::Array(runs) => runs,
            other => panic!("runs list --json is not an array: {other}"),
        };
        let status = |s: &'static [&'static str]| {
            move |r: &&Value| r["status"].as_str().is_some_and(|x| s.contains(&x))
        };
        let busy = runs.iter().filter(status(&["queued", "running"])).count();
        let waiting: Vec<&Value> = runs.iter().filter(status(&["waiting"])).collect();
        if busy == 0 && waiting.is_empty() {
            return runs;
        }
        assert!(
            Instant::now() < deadline,
            "{busy} runs still queued or running, {} waiting, {} s after healing",
            waiting.len(),
            limit.as_secs()
        );
        if !waiting.is_empty() && last_finish.is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            finish(&waiting);
            last_finish = Some(Instant::now());
        }
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
    let mut answered: BTreeMap<String, Wait> = BTreeMap::new();
    let mut received: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (id, events) in ids.iter().zip(&events) {
        let events = events.as_array().cloned().unwrap_or_default();
        let seqs = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
        state.events.insert(id.clone(), seqs);
        for e in &events {
            let data = &e["data"];
            match e["kind"].as_str() {
                Some("wait_answered") => {
                    let (Some(wait), Some(decision)) =
                        (data["wait"].as_str(), decision_of(&data["answer"]))
                    else {
                        continue;
                    };
                    let wait = answered.entry(wait.to_owned()).or_insert_with(|| Wait {
                        id: wait.to_owned(),
                        run: id.clone(),
                        decisions: vec![],
                    });
                    wait.decisions.push(decision);
                }
                Some("signal_received") => {
                    let (Some(signal), Some(name)) = (data["id"].as_str(), data["name"].as_str())
                    else {
                        continue;
                    };
                    let at = (id.clone(), signal.to_owned());
                    received.entry(at).or_default().push(name.to_owned());
                }
                _ => {}
            }
        }
    }
    state.rows = rows_stored(case);
    state.waits = waits_of(case, &mut answered);
    state.signals = signals_of(case, runs, &received);
    let timed = effects_of(effects);
    state.attempts = attempts_of(&timed, windows);
    state.effects = timed.into_iter().map(|(e, _)| e).collect();
    state
}

/// Every wait (`waits list --all --json` on the database) with its
/// decisions: one per `wait_answered` event of it (`answered`, by wait),
/// and the answer its row stores if no event gave that one; an answer
/// event whose wait has no row is a wait too.
fn waits_of(case: &Case, answered: &mut BTreeMap<String, Wait>) -> Vec<Wait> {
    let waits = case.cairn(&["waits", "list", "--all", "--json"]).json();
    let waits = waits.as_array().cloned().unwrap_or_default();
    let mut out: Vec<Wait> = waits
        .iter()
        .filter_map(|w| {
            let id = w["id"].as_str()?;
            let mut wait = answered.remove(id).unwrap_or_else(|| Wait {
                id: id.to_owned(),
                run: w["run_id"].as_str().unwrap_or_default().to_owned(),
                decisions: vec![],
            });
            if let Some(stored) = decision_of(&w["answer"]) {
                if !wait.decisions.contains(&stored) {
                    wait.decisions.push(stored);
                }
            }
            Some(wait)
        })
        .collect();
    out.extend(std::mem::take(answered).into_values());
    out
}

/// Every signal stored: the rows of `signal list RUN --json` (on the
/// database) of each run of the asking crew or with a `signal_received`
/// event, and once more for each further `signal_received` of one id
/// (`received`, by run and id): a signal stored twice, in the table or in
/// the events, is seen twice.
fn signals_of(
    case: &Case,
    runs: &[Value],
    received: &BTreeMap<(String, String), Vec<String>>,
) -> Vec<StoredSignal> {
    let heard: std::collections::BTreeSet<&str> =
        received.keys().map(|(run, _)| run.as_str()).collect();
    let ids: Vec<String> = runs
        .iter()
        .filter(|r| {
            r["crew"] == super::ASKING || r["id"].as_str().is_some_and(|id| heard.contains(id))
        })
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect();
    let listed = crate::workers::parallel(&ids, 4, |id| {
        case.cairn(&["signal", "list", id, "--json"]).json()
    });
    let mut out = vec![];
    for listed in &listed {
        for s in listed["signals"].as_array().into_iter().flatten() {
            let field = |f: &str| s[f].as_str().unwrap_or_default().to_owned();
            out.push(StoredSignal {
                run: field("run_id"),
                name: field("name"),
                id: field("id"),
            });
        }
    }
    for ((run, id), names) in received {
        for name in names.iter().skip(1) {
            out.push(StoredSignal {
                run: run.clone(),
                name: name.clone(),
                id: id.clone(),
            });
        }
    }
    out
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

/// Every committed step checkpoint and journal item with the lease stored
/// with it (its epoch and owner, written by the fenced commit itself), in
/// the order the database committed them (the time it stamped on each),
/// read with SQL on the database itself: `runs show` has no lease.
fn rows_stored(case: &Case) -> Vec<CommittedRow> {
    let (agg, tab, nl, text, micros) = match case.db.kind {
        cairn_testkit::Kind::Postgres => (
            "string_agg",
            "E'\\t'",
            "E'\\n'",
            "::text",
            "(extract(epoch FROM {at}) * 1000000)::bigint::text",
        ),
        cairn_testkit::Kind::Sqlite => (
            "group_concat",
            "char(9)",
            "char(10)",
            "",
            "CAST(CAST((julianday({at}) - 2440587.5) * 86400000000.0 AS INTEGER) AS TEXT)",
        ),
    };
    // Found once for both reads (a URL of several hosts asks each).
    let primary = writable(case);
    let db = primary.as_ref().unwrap_or(&case.db);
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let lines = |table: &str, idx: &str, item: &str, at: &str, filter: &str| {
        let columns = [
            format!("run_id{text}"),
            format!("CAST({idx} AS TEXT)"),
            format!("CAST({item} AS TEXT)"),
            "COALESCE(CAST(lease_epoch AS TEXT), '-')".to_owned(),
            "COALESCE(lease_owner, '-')".to_owned(),
            micros.replace("{at}", at),
        ];
        let sql = format!(
            "SELECT {agg}({}, {nl}) FROM {table} {filter}",
            columns.join(&format!(" || {tab} || "))
        );
        rt.block_on(db.scalar(&sql)).unwrap_or_default()
    };
    let steps = lines(
        "steps",
        "idx",
        "0",
        "finished_at",
        "WHERE status = 'succeeded'",
    );
    let items = lines("journal", "step_idx", "seq", "created_at", "");
    let row = |line: &str, journal: bool| -> Option<CommittedRow> {
        let f: Vec<&str> = line.split('\t').collect();
        let [run, step, item, epoch, owner, at] = f[..] else {
            return None;
        };
        Some(CommittedRow {
            run: run.to_owned(),
            step: step.parse().ok()?,
            kind: match journal {
                true => RowKind::JournalItem {
                    item: item.parse().ok()?,
                },
                false => RowKind::Step,
            },
            epoch: epoch.parse().ok(),
            owner: (owner != "-").then(|| owner.to_owned()),
            order: at.parse().ok()?,
        })
    };
    let steps = steps.lines().filter_map(|l| row(l, false));
    steps
        .chain(items.lines().filter_map(|l| row(l, true)))
        .collect()
}

/// Where the case's database takes writes, when its URL names several
/// hosts (the failover campaigns'): that URL is Cairn's to parse, not
/// sqlx's, so each host is asked on its own, and the first out of
/// recovery is the one. `None`: the case's own URL will do.
fn writable(case: &Case) -> Option<cairn_testkit::TestDb> {
    let url = case.url();
    let (scheme_user, rest) = url.split_once('@')?;
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let db = path.split('?').next().unwrap_or_default();
    if !hosts.contains(',') {
        return None;
    }
    let primary = hosts.split(',').find_map(|host| {
        let one = format!("{scheme_user}@{host}/{db}");
        // psql, not a pool: a stopped host (the old primary) just fails.
        let out = std::process::Command::new("psql")
            .args([one.as_str(), "-Atc", "SELECT pg_is_in_recovery()"])
            .output()
            .ok()?;
        let primary = out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "f";
        primary.then(|| cairn_testkit::TestDb::postgres_at(one))
    });
    Some(primary.unwrap_or_else(|| panic!("no host of {url} takes writes")))
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
