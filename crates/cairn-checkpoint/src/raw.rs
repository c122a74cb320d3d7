//! Rows as the backends decode them, and their one conversion into domain
//! records. Anything that does not decode is a [`Corruption`] naming the run,
//! never a skipped row.

use chrono::{DateTime, Utc};
use serde_json::Value;

use cairn_core::{
    Attempt, Corruption, CrewDef, ErrorInfo, Fingerprint, LeaseEpoch, Role, RunId, RunRecord,
    RunStatus, StepIdx, StepRecord,
};

use crate::StoreStats;

pub(crate) struct RawRun {
    pub id: RunId,
    pub crew_name: String,
    pub crew_version: String,
    pub crew_fingerprint: String,
    pub crew_def: Value,
    pub input: Value,
    pub idempotency_key: Option<String>,
    pub thread_id: Option<String>,
    pub status: String,
    pub cursor: i64,
    pub step_count: i64,
    pub lease_epoch: i64,
    pub not_before: Option<DateTime<Utc>>,
    pub cancel_requested_at: Option<DateTime<Utc>>,
    pub parent_run_id: Option<RunId>,
    pub parent_step_idx: Option<i64>,
    pub error: Option<Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

pub(crate) struct RawStep {
    pub idx: i64,
    pub role: String,
    pub status: String,
    pub attempt: i64,
    pub output: Option<Value>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<Value>,
    pub takeovers: i64,
}

fn error_info(run: RunId, what: &str, v: Option<Value>) -> Result<Option<ErrorInfo>, Corruption> {
    v.map(|v| {
        serde_json::from_value(v)
            .map_err(|e| Corruption::new(run, format!("{what} error does not decode: {e}")))
    })
    .transpose()
}

fn non_negative(run: RunId, what: &str, v: i64) -> Result<u32, Corruption> {
    u32::try_from(v).map_err(|_| Corruption::new(run, format!("{what} is {v}")))
}

impl RawRun {
    pub fn into_record(self) -> Result<RunRecord, Corruption> {
        let run = self.id;
        let corrupt = |d: String| Corruption::new(run, d);
        let crew_definition: CrewDef = serde_json::from_value(self.crew_def)
            .map_err(|e| corrupt(format!("stored crew definition does not decode: {e}")))?;
        Ok(RunRecord {
            id: run,
            crew: self.crew_name,
            crew_version: self.crew_version,
            crew_fingerprint: Fingerprint::from_stored(self.crew_fingerprint),
            status: self
                .status
                .parse()
                .map_err(|e: String| corrupt(format!("run status: {e}")))?,
            cursor: StepIdx(non_negative(run, "cursor", self.cursor)?),
            step_count: non_negative(run, "step count", self.step_count)?,
            input: self.input,
            idempotency_key: self.idempotency_key,
            thread_id: self.thread_id,
            lease_epoch: LeaseEpoch(self.lease_epoch),
            not_before: self.not_before,
            cancel_requested_at: self.cancel_requested_at,
            parent_run_id: self.parent_run_id,
            parent_step_idx: self
                .parent_step_idx
                .map(|i| non_negative(run, "parent step", i).map(StepIdx))
                .transpose()?,
            error: error_info(run, "run", self.error)?,
            created_at: self.created_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
            crew_definition,
        })
    }
}

impl RawStep {
    pub fn into_record(self, run: RunId) -> Result<StepRecord, Corruption> {
        let idx = non_negative(run, "step index", self.idx)?;
        let what = format!("step {idx}");
        let tokens = |v: Option<i64>| -> Result<Option<u64>, Corruption> {
            v.map(|t| {
                u64::try_from(t).map_err(|_| Corruption::new(run, format!("{what} tokens are {t}")))
            })
            .transpose()
        };
        Ok(StepRecord {
            idx: StepIdx(idx),
            role: Role::new(self.role),
            status: self
                .status
                .parse()
                .map_err(|e: String| Corruption::new(run, format!("{what} status: {e}")))?,
            attempt: Attempt(non_negative(run, "attempt", self.attempt)?),
            output: self.output,
            input_tokens: tokens(self.input_tokens)?,
            output_tokens: tokens(self.output_tokens)?,
            started_at: self.started_at,
            finished_at: self.finished_at,
            error: error_info(run, &what, self.error)?,
            takeovers: non_negative(run, "takeovers", self.takeovers)?,
        })
    }
}

/// Serializes an error for a JSON column.
pub(crate) fn error_json(e: &Option<ErrorInfo>) -> Option<Value> {
    e.as_ref()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
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

pub(crate) struct RawWait {
    pub id: cairn_core::WaitId,
    pub run_id: RunId,
    pub step_idx: i64,
    pub attempt: i64,
    pub kind: String,
    pub status: String,
    pub prompt: Value,
    pub question_id: Option<String>,
    pub deadline: Option<DateTime<Utc>>,
    pub on_deadline: Option<Value>,
    pub answer: Option<Value>,
    pub answered_by: Option<String>,
    pub answered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl RawWait {
    pub fn into_record(self) -> Result<cairn_core::WaitRecord, Corruption> {
        let run = self.run_id;
        let what = format!("wait {}", self.id);
        let corrupt = |d: String| Corruption::new(run, format!("{what}: {d}"));
        Ok(cairn_core::WaitRecord {
            id: self.id,
            run_id: run,
            step_idx: StepIdx(non_negative(run, "wait step", self.step_idx)?),
            attempt: Attempt(non_negative(run, "wait attempt", self.attempt)?),
            kind: self.kind.parse().map_err(corrupt)?,
            status: self.status.parse().map_err(corrupt)?,
            prompt: self.prompt,
            question_id: self.question_id,
            deadline: self.deadline,
            on_deadline: self
                .on_deadline
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| corrupt(format!("on_deadline: {e}")))?,
            answer: self
                .answer
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| corrupt(format!("answer: {e}")))?,
            answered_by: self.answered_by,
            answered_at: self.answered_at,
            created_at: self.created_at,
        })
    }
}

fn parse_time(run: RunId, what: &str, text: &str) -> Result<DateTime<Utc>, Corruption> {
    DateTime::parse_from_rfc3339(text)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| Corruption::new(run, format!("{what} `{text}` is not a time: {e}")))
}

/// One packed step row: the columns of `load`'s `json_array`, in order.
type PackedStep = (
    i64,
    String,
    String,
    i64,
    Option<Value>,
    Option<i64>,
    Option<i64>,
    String,
    Option<String>,
    Option<Value>,
    i64,
);

/// Decodes `load`'s JSON aggregate of step rows (both backends).
pub(crate) fn unpack_steps(run: RunId, packed: &str) -> crate::Result<Vec<StepRecord>> {
    let rows: Vec<PackedStep> = serde_json::from_str(packed)
        .map_err(|e| Corruption::new(run, format!("step rows do not decode: {e}")))?;
    let mut steps = rows
        .into_iter()
        .map(|r| {
            let what = |col: &str| format!("step {} {col}", r.0);
            let raw = RawStep {
                idx: r.0,
                role: r.1,
                status: r.2,
                attempt: r.3,
                output: r.4,
                input_tokens: r.5,
                output_tokens: r.6,
                started_at: parse_time(run, &what("started_at"), &r.7)?,
                finished_at: r
                    .8
                    .map(|t| parse_time(run, &what("finished_at"), &t))
                    .transpose()?,
                error: r.9,
                takeovers: r.10,
            };
            Ok(raw.into_record(run)?)
        })
        .collect::<crate::Result<Vec<_>>>()?;
    steps.sort_by_key(|s| s.idx);
    Ok(steps)
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
    })
}
