//! Rows as the storage script reads them, and their one conversion into domain
//! records. Anything that does not decode is a [`Corruption`] naming the run,
//! never a skipped row.

use chrono::{DateTime, Utc};
use serde_json::Value;

use cairn_core::{
    Attempt, Corruption, CrewDef, ErrorInfo, Fingerprint, LeaseEpoch, Role, RunId, RunRecord,
    RunStatus, StepIdx, StepRecord,
};

use crate::StoreStats;

pub(crate) struct RawStep {
    pub idx: i64,
    pub role: String,
    pub status: String,
    pub attempt: i64,
    pub output: Option<Value>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_nanos: Option<i64>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<Value>,
    pub takeovers: i64,
}

fn error_info(
    run: RunId,
    what: impl FnOnce() -> String,
    v: Option<Value>,
) -> Result<Option<ErrorInfo>, Corruption> {
    v.map(|v| {
        serde_json::from_value(v)
            .map_err(|e| Corruption::new(run, format!("{} error does not decode: {e}", what())))
    })
    .transpose()
}

fn non_negative(run: RunId, what: &str, v: i64) -> Result<u32, Corruption> {
    u32::try_from(v).map_err(|_| Corruption::new(run, format!("{what} is {v}")))
}

impl RawStep {
    pub fn into_record(self, run: RunId) -> Result<StepRecord, Corruption> {
        let idx = non_negative(run, "step index", self.idx)?;
        // Only an error names the step (a resume decodes 1,000 rows).
        let what = || format!("step {idx}");
        let tokens = |v: Option<i64>| -> Result<Option<u64>, Corruption> {
            v.map(|t| {
                u64::try_from(t)
                    .map_err(|_| Corruption::new(run, format!("{} tokens are {t}", what())))
            })
            .transpose()
        };
        Ok(StepRecord {
            idx: StepIdx(idx),
            role: Role::new(self.role),
            status: self
                .status
                .parse()
                .map_err(|e: String| Corruption::new(run, format!("{} status: {e}", what())))?,
            attempt: Attempt(non_negative(run, "attempt", self.attempt)?),
            output: self.output,
            input_tokens: tokens(self.input_tokens)?,
            output_tokens: tokens(self.output_tokens)?,
            cost_usd: tokens(self.cost_nanos)?.map(cairn_core::Usd),
            started_at: self.started_at,
            finished_at: self.finished_at,
            error: error_info(run, what, self.error)?,
            takeovers: non_negative(run, "takeovers", self.takeovers)?,
        })
    }
}

/// Serializes an error for a JSON column.
pub(crate) fn error_json(e: &Option<ErrorInfo>) -> Option<Value> {
    error_value(e.as_ref())
}

/// [`error_json`] of a borrowed error.
pub(crate) fn error_value(e: Option<&ErrorInfo>) -> Option<Value> {
    e.map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
}

/// Checks a reused idempotency key against what the new submit asked for.
pub(crate) fn check_same_submission(
    existing: &RunRecord,
    new: &crate::NewRun,
) -> Result<(), crate::Error> {
    let what = if existing.crew_fingerprint != new.crew.fingerprint() {
        "crew"
    } else if existing.input != new.input {
        "input"
    } else {
        return Ok(());
    };
    Err(crate::Error::IdempotencyConflict {
        key: new.idempotency_key.clone().unwrap_or_default(),
        run: existing.id,
        what,
    })
}

/// [`StoreStats`] from the rows both backends read.
pub(crate) fn stats_from(
    rows: Vec<(String, i64)>,
    ready: i64,
    takeovers: i64,
) -> Result<StoreStats, Corruption> {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let runs_by_status = rows
        .into_iter()
        .map(|(status, n)| {
            let status = status.parse::<RunStatus>().map_err(|e: String| {
                Corruption::new(
                    RunId::from_uuid(uuid::Uuid::nil()),
                    format!("run status: {e}"),
                )
            })?;
            Ok((status, count(n)))
        })
        .collect::<Result<_, Corruption>>()?;
    Ok(StoreStats {
        runs_by_status,
        ready: count(ready),
        takeovers: count(takeovers),
        blocked: 0,
    })
}

// ------------------------------------------------------------- from rows

use cairn_core::{EventKind, EventRecord, JournalEntry, WaitId, WaitRecord};

use crate::sql::Row;

pub(crate) fn nil_run() -> RunId {
    RunId::from_uuid(uuid::Uuid::nil())
}

/// The columns `decode_run` reads, in the order of the `runs` table. A run
/// stored since migration 0017 holds JSON `null` in `crew_def` and its
/// definition in `crews` (by fingerprint); an older run, inline.
macro_rules! run_cols {
    () => {
        concat!(
            "COALESCE(NULLIF(crew_def, 'null'), (SELECT definition FROM crews \
             WHERE crews.fingerprint = runs.crew_fingerprint)) AS crew_def, ",
            run_cols_but_def!()
        )
    };
}
/// [`run_cols`] without the crew definition, for a run read again in the
/// transaction that just read (or wrote) its definition.
macro_rules! run_cols_but_def {
    () => {
        "id, crew_name, crew_version, crew_fingerprint, input, idempotency_key, \
         thread_id, status, cursor, step_count, lease_epoch, not_before, cancel_requested_at, \
         parent_run_id, parent_step_idx, error, created_at, updated_at, finished_at, \
         child_key, parent_attempt, depth, priority, budget, trace, upgrade, tenant"
    };
}
/// The columns `decode_step` reads.
macro_rules! step_cols {
    () => {
        "idx, role, status, attempt, output, input_tokens, output_tokens, cost_nanos, started_at, \
         finished_at, error, takeovers"
    };
}
/// The columns `decode_wait` reads.
macro_rules! wait_cols {
    () => {
        "id, run_id, step_idx, attempt, kind, status, prompt, question_id, deadline, \
         on_deadline, answer, answered_by, answered_at, created_at"
    };
}
pub(crate) use {run_cols, run_cols_but_def, step_cols, wait_cols};

pub(crate) fn decode_run(row: &Row) -> crate::Result<RunRecord> {
    decode_run_with(row, None)
}

/// Crew definitions already decoded, by their stored text. A definition
/// never changes once stored and thousands of runs share one, while
/// decoding a 1,000-agent crew's 58 KB takes a millisecond or more; the text
/// is compared whole, so a changed (or corrupted) row is decoded afresh.
static DECODED_CREWS: std::sync::Mutex<Vec<(Box<[u8]>, CrewDef)>> = std::sync::Mutex::new(vec![]);

/// How many definitions [`DECODED_CREWS`] keeps (the most recently decoded).
const DECODED_CREWS_KEPT: usize = 16;

/// Empties [`DECODED_CREWS`], as in a process just started. For the
/// benchmark's "fresh process" resume; nothing else needs it.
pub fn forget_decoded_crews() {
    DECODED_CREWS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
}

fn decoded_crew(text: &[u8]) -> std::result::Result<CrewDef, serde_json::Error> {
    let kept = DECODED_CREWS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, def)) = kept.iter().find(|(t, _)| **t == *text) {
        return Ok(def.clone());
    }
    drop(kept);
    let def: CrewDef = serde_json::from_slice(text)?;
    let mut kept = DECODED_CREWS.lock().unwrap_or_else(|p| p.into_inner());
    if kept.len() >= DECODED_CREWS_KEPT {
        kept.remove(0);
    }
    kept.push((text.into(), def.clone()));
    Ok(def)
}

/// [`decode_run`] of a row read with [`run_cols_but_def`]: `def` is the
/// definition the caller already holds (decoding 58 KB of JSON for a
/// 1,000-agent crew takes about half a millisecond).
pub(crate) fn decode_run_with(row: &Row, def: Option<CrewDef>) -> crate::Result<RunRecord> {
    let id = RunId::from_uuid(
        row.opt_uuid("id", nil_run(), "a run id")?
            .ok_or_else(|| Corruption::new(nil_run(), "a run has no id"))?,
    );
    let corrupt = |d: String| Corruption::new(id, d);
    let crew_definition: CrewDef = match def {
        Some(def) => def,
        None => row
            .json_text("crew_def", decoded_crew)?
            .ok_or_else(|| corrupt("the stored crew definition is missing".into()))?
            .map_err(|e| corrupt(format!("stored crew definition does not decode: {e}")))?,
    };
    Ok(RunRecord {
        id,
        crew: row.text("crew_name")?,
        crew_version: row.text("crew_version")?,
        crew_fingerprint: Fingerprint::from_stored(row.text("crew_fingerprint")?),
        status: row
            .text("status")?
            .parse()
            .map_err(|e: String| corrupt(format!("run status: {e}")))?,
        cursor: StepIdx(non_negative(id, "cursor", row.int("cursor")?)?),
        step_count: non_negative(id, "step count", row.int("step_count")?)?,
        input: row.json("input", id, "input")?,
        idempotency_key: row.opt_text("idempotency_key")?,
        thread_id: row.opt_text("thread_id")?,
        priority: cairn_core::Priority::new(row.int("priority")?)
            .map_err(|e| corrupt(e.to_string()))?,
        tenant: row
            .opt_text("tenant")?
            .map(|t| cairn_core::Tenant::new(t).map_err(|e| corrupt(e.to_string())))
            .transpose()?,
        budget: row
            .opt_json("budget", id, "budget")?
            .map(|b| serde_json::from_value(b).map_err(|e| corrupt(format!("budget: {e}"))))
            .transpose()?,
        trace: trace_of(row)?,
        upgrade: upgrade_of(row),
        blocked: None,
        lease_epoch: LeaseEpoch(row.int("lease_epoch")?),
        not_before: row.opt_time("not_before", id, "not_before")?,
        cancel_requested_at: row.opt_time("cancel_requested_at", id, "cancel_requested_at")?,
        parent_run_id: row
            .opt_uuid("parent_run_id", id, "parent run id")?
            .map(RunId::from_uuid),
        parent_step_idx: row
            .opt_int("parent_step_idx")?
            .map(|i| non_negative(id, "parent step", i).map(StepIdx))
            .transpose()?,
        child: child_of(id, row)?,
        error: error_info(id, || "run".into(), row.opt_json("error", id, "run error")?)?,
        created_at: row.time("created_at", id, "created_at")?,
        updated_at: row.time("updated_at", id, "updated_at")?,
        finished_at: row.opt_time("finished_at", id, "finished_at")?,
        crew_definition,
    })
}

/// Where a child run hangs, from its row (`None` for a run no step started).
fn child_of(id: RunId, row: &Row) -> crate::Result<Option<cairn_core::ChildOf>> {
    let Some(key) = row.opt_text("child_key")? else {
        return Ok(None);
    };
    let parent = row
        .opt_uuid("parent_run_id", id, "parent run id")?
        .ok_or_else(|| Corruption::new(id, "a child run has no parent"))?;
    let number = |col: &str| -> crate::Result<u32> {
        Ok(non_negative(id, col, row.opt_int(col)?.unwrap_or(-1))?)
    };
    Ok(Some(cairn_core::ChildOf {
        parent_run_id: RunId::from_uuid(parent),
        step_idx: StepIdx(number("parent_step_idx")?),
        attempt: cairn_core::Attempt(number("parent_attempt")?),
        key,
        depth: number("depth")?,
    }))
}

/// A run's own upgrade policy; one this build does not know reads as none
/// (its crew's policy applies).
fn upgrade_of(row: &Row) -> Option<cairn_core::upgrade::UpgradePolicy> {
    row.opt_text("upgrade")
        .ok()
        .flatten()
        .and_then(|p| cairn_core::upgrade::UpgradePolicy::parse(&p))
}

/// A run's stored trace context. One that no longer decodes is dropped
/// rather than failing the run: a trace is never worth a run.
fn trace_of(row: &Row) -> crate::Result<Option<cairn_core::TraceContext>> {
    Ok(row
        .opt_text("trace")?
        .and_then(|t| serde_json::from_str(&t).ok()))
}

/// A run row for a listing: [`decode_run`], or, when it does not decode,
/// what does with the corruption as the run's error (kind `corruption`;
/// an unreadable status reads `failed`, a crew definition without agents,
/// a `null` input), so one corrupt run never fails a listing of others
/// and is still named in it. Only a row without a readable id fails.
pub(crate) fn decode_listed(row: &Row) -> crate::Result<RunRecord> {
    let corrupt = match decode_run(row) {
        Err(crate::Error::Corruption(c)) => c,
        other => return other,
    };
    let id = RunId::from_uuid(
        row.opt_uuid("id", nil_run(), "a run id")?
            .ok_or_else(|| Corruption::new(nil_run(), "a run has no id"))?,
    );
    let text = |col: &str| row.text(col).unwrap_or_default();
    let count = |col: &str| {
        row.int(col)
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0)
    };
    let time = |col: &str| row.opt_time(col, id, col).ok().flatten();
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    Ok(RunRecord {
        id,
        crew: text("crew_name"),
        crew_version: text("crew_version"),
        crew_fingerprint: Fingerprint::from_stored(text("crew_fingerprint")),
        status: text("status").parse().unwrap_or(RunStatus::Failed),
        cursor: StepIdx(count("cursor")),
        step_count: count("step_count"),
        input: row.json("input", id, "input").unwrap_or(Value::Null),
        idempotency_key: row.opt_text("idempotency_key").ok().flatten(),
        thread_id: row.opt_text("thread_id").ok().flatten(),
        priority: row
            .int("priority")
            .ok()
            .and_then(|p| cairn_core::Priority::new(p).ok())
            .unwrap_or_default(),
        tenant: row
            .opt_text("tenant")
            .ok()
            .flatten()
            .and_then(|t| cairn_core::Tenant::new(t).ok()),
        budget: row
            .opt_json("budget", id, "budget")
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_value(b).ok()),
        trace: trace_of(row).ok().flatten(),
        upgrade: upgrade_of(row),
        blocked: None,
        lease_epoch: LeaseEpoch(row.int("lease_epoch").unwrap_or(0)),
        not_before: time("not_before"),
        cancel_requested_at: time("cancel_requested_at"),
        parent_run_id: row
            .opt_uuid("parent_run_id", id, "parent run id")
            .ok()
            .flatten()
            .map(RunId::from_uuid),
        parent_step_idx: row
            .opt_int("parent_step_idx")
            .ok()
            .flatten()
            .and_then(|i| u32::try_from(i).ok())
            .map(StepIdx),
        child: child_of(id, row).ok().flatten(),
        error: Some(ErrorInfo::new(
            cairn_core::ErrorKind::Corruption,
            corrupt.to_string(),
            false,
        )),
        created_at: time("created_at").unwrap_or(epoch),
        updated_at: time("updated_at").unwrap_or(epoch),
        finished_at: time("finished_at"),
        crew_definition: CrewDef {
            name: text("crew_name"),
            version: text("crew_version"),
            agents: vec![],
            dir: None,
            budget: None,
            upgrade: None,
        },
    })
}

pub(crate) fn decode_step(run: RunId, row: &Row) -> crate::Result<StepRecord> {
    let idx = row.int("idx")?;
    // The columns are named without the step, which is named only on an
    // error (a resume decodes 1,000 rows).
    let raw = (|| {
        Ok::<_, crate::Error>(RawStep {
            idx,
            role: row.text("role")?,
            status: row.text("status")?,
            attempt: row.int("attempt")?,
            output: row.opt_json("output", run, "output")?,
            input_tokens: row.opt_int("input_tokens")?,
            output_tokens: row.opt_int("output_tokens")?,
            cost_nanos: row.opt_int("cost_nanos")?,
            started_at: row.time("started_at", run, "started_at")?,
            finished_at: row.opt_time("finished_at", run, "finished_at")?,
            error: row.opt_json("error", run, "error")?,
            takeovers: row.int("takeovers")?,
        })
    })()
    .map_err(|e| match e {
        crate::Error::Corruption(c) => {
            Corruption::new(c.run, format!("step {idx} {}", c.detail)).into()
        }
        e => e,
    })?;
    Ok(raw.into_record(run)?)
}

pub(crate) fn decode_wait(row: &Row) -> crate::Result<WaitRecord> {
    let run = RunId::from_uuid(
        row.opt_uuid("run_id", nil_run(), "a wait's run id")?
            .ok_or_else(|| Corruption::new(nil_run(), "a wait has no run"))?,
    );
    let id = WaitId::from_uuid(
        row.opt_uuid("id", run, "a wait id")?
            .ok_or_else(|| Corruption::new(run, "a wait has no id"))?,
    );
    let corrupt = |d: String| Corruption::new(run, format!("wait {id}: {d}"));
    let decode = |col: &str, what: &str| -> crate::Result<Option<Value>> {
        row.opt_json(col, run, &format!("wait {what}"))
    };
    Ok(WaitRecord {
        id,
        run_id: run,
        step_idx: StepIdx(non_negative(run, "wait step", row.int("step_idx")?)?),
        attempt: Attempt(non_negative(run, "wait attempt", row.int("attempt")?)?),
        kind: row.text("kind")?.parse().map_err(corrupt)?,
        status: row.text("status")?.parse().map_err(corrupt)?,
        prompt: row.json("prompt", run, "wait prompt")?,
        question_id: row.opt_text("question_id")?,
        deadline: row.opt_time("deadline", run, "wait deadline")?,
        on_deadline: decode("on_deadline", "on_deadline")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| corrupt(format!("on_deadline: {e}")))?,
        answer: decode("answer", "answer")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| corrupt(format!("answer: {e}")))?,
        answered_by: row.opt_text("answered_by")?,
        answered_at: row.opt_time("answered_at", run, "wait answered_at")?,
        created_at: row.time("created_at", run, "wait created_at")?,
        parents: vec![],
    })
}

pub(crate) fn decode_journal(run: RunId, row: &Row) -> crate::Result<JournalEntry> {
    let seq = row.int("seq")?;
    let what = format!("journal item {seq}");
    Ok(JournalEntry {
        seq,
        attempt: Attempt(non_negative(run, &what, row.int("attempt")?)?),
        generation: non_negative(run, &what, row.int("generation")?)?,
        kind: crate::plan::journal_kind(run, seq, &row.text("kind")?)?,
        payload: row.json("payload", run, "journal payload")?,
        created_at: row.time("created_at", run, "journal time")?,
    })
}

pub(crate) fn decode_event(run: RunId, row: &Row) -> crate::Result<EventRecord> {
    let seq = row.int("seq")?;
    let kind = row.text("kind")?;
    Ok(EventRecord {
        run_id: run,
        seq,
        at: row.time("at", run, "event time")?,
        kind: EventKind::parse(&kind).ok_or_else(|| {
            Corruption::new(run, format!("event {seq} has unknown kind `{kind}`"))
        })?,
        data: row.json("data", run, "event data")?,
    })
}

/// A row of the thread summary query.
pub(crate) fn decode_thread(row: &Row) -> crate::Result<crate::ThreadSummary> {
    let thread_id = row.text("thread_id")?;
    let count = |col: &str| -> crate::Result<u64> {
        let n = row.int(col)?;
        u64::try_from(n).map_err(|_| {
            Corruption::new(nil_run(), format!("thread `{thread_id}`: {col} is {n}")).into()
        })
    };
    Ok(crate::ThreadSummary {
        runs: count("runs")?,
        input_tokens: count("input_tokens")?,
        output_tokens: count("output_tokens")?,
        cost_usd: cairn_core::Usd(count("cost_nanos")?),
        last_run_at: row.time("last_run_at", nil_run(), "a thread's last run time")?,
        thread_id,
    })
}
