//! The reads and writes every operation on runs shares, and nothing else:
//! a run and a step by id (`fetch_run`, `fetch_step`), a run's events and
//! the event log's one writer (`append_events`), and fencing
//! (`check_held`). A leaf: it calls no other `script/` module, so every
//! operation may call it without a cycle.

use cairn_core::{
    Corruption, CrewDef, EventRecord, Fence, Fingerprint, LeaseEpoch, NewEvent, RunId, RunRecord,
    RunStatus, StepIdx, StepRecord,
};

use crate::plan::check_holder;
use crate::raw::{
    decode_event, decode_run, decode_run_with, decode_step, run_cols, run_cols_but_def, step_cols,
};
use crate::sql::{query, Conn, Row};
use crate::{Error, Result};

const RUN_BY_ID: &str = concat!("SELECT ", run_cols!(), " FROM runs WHERE id = :id");

const RUN_BY_ID_LOCKED: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE id = :id {for_update}"
);

const RUN_BUT_DEF_BY_ID_LOCKED: &str = concat!(
    "SELECT ",
    run_cols_but_def!(),
    " FROM runs WHERE id = :id {for_update}"
);

const RUN_BUT_DEF_BY_ID: &str =
    concat!("SELECT ", run_cols_but_def!(), " FROM runs WHERE id = :id");

/// The run, locked against other writers until the transaction ends when
/// `lock` (PostgreSQL; SQLite's write transaction already is).
pub(crate) async fn fetch_run(c: &mut Conn<'_>, id: RunId, lock: bool) -> Result<RunRecord> {
    let sql = if lock { RUN_BY_ID_LOCKED } else { RUN_BY_ID };
    decode_run(&run_row(c, sql, id).await?)
}

/// The row `sql` selects for run `id` (bound as `:id`); `RunNotFound` when
/// there is none.
async fn run_row(c: &mut Conn<'_>, sql: &'static str, id: RunId) -> Result<Row> {
    c.fetch_found(query(sql).bind("id", id), || Error::RunNotFound(id))
        .await
}

/// The run read again in a transaction that already holds its crew
/// definition (`def`), which is not read nor decoded again.
pub(super) async fn fetch_run_again(
    c: &mut Conn<'_>,
    id: RunId,
    def: CrewDef,
) -> Result<RunRecord> {
    decode_run_with(&run_row(c, RUN_BUT_DEF_BY_ID, id).await?, Some(def))
}

/// The run, locked, read without its crew definition when it is still
/// stored under `fingerprint`, whose definition (`def`) the caller read
/// with it; otherwise read whole.
pub(super) async fn fetch_run_known(
    c: &mut Conn<'_>,
    id: RunId,
    fingerprint: &Fingerprint,
    def: &CrewDef,
) -> Result<RunRecord> {
    let row = run_row(c, RUN_BUT_DEF_BY_ID_LOCKED, id).await?;
    match row.text("crew_fingerprint")? == fingerprint.as_str() {
        true => decode_run_with(&row, Some(def.clone())),
        false => fetch_run(c, id, true).await,
    }
}

const STEP_AT: &str = concat!(
    "SELECT ",
    step_cols!(),
    " FROM steps WHERE run_id = :run AND idx = :idx"
);

pub(super) async fn fetch_step(
    c: &mut Conn<'_>,
    id: RunId,
    idx: StepIdx,
) -> Result<Option<StepRecord>> {
    at_step(c, STEP_AT, id, idx, |r| decode_step(id, r)).await
}

/// The first row `sql` selects for step `idx` of run `id` (bound as `:run`
/// and `:idx`), decoded by `decode`.
pub(super) async fn at_step<T>(
    c: &mut Conn<'_>,
    sql: &'static str,
    id: RunId,
    idx: StepIdx,
    decode: impl FnOnce(&Row) -> Result<T>,
) -> Result<Option<T>> {
    let q = query(sql).bind("run", id).bind("idx", idx.get());
    c.fetch_optional(q).await?.as_ref().map(decode).transpose()
}

/// Fails with `RunNotFound` unless run `id` exists. Only that it exists: a
/// corrupt run's events stay readable, and it pages like another.
pub(super) async fn check_exists(c: &mut Conn<'_>, id: RunId) -> Result<()> {
    run_row(c, "SELECT 1 AS one FROM runs WHERE id = :id", id).await?;
    Ok(())
}

/// `RunStore::load`'s read: the run and its step rows, undecoded (the caller
/// decodes them after the transaction, off SQLite's writer thread).
pub(super) async fn load_in(
    c: &mut Conn<'_>,
    id: RunId,
) -> Result<(RunRecord, Vec<crate::sql::Row>)> {
    let run = fetch_run(c, id, false).await?;
    let sql = concat!(
        "SELECT ",
        step_cols!(),
        " FROM steps WHERE run_id = :run ORDER BY idx"
    );
    let rows = c.fetch_all(query(sql).bind("run", id)).await?;
    Ok((run, rows))
}

/// `RunStore::events` and `RunStore::events_after`: from one snapshot, the run
/// exists and these are its events.
pub(super) async fn events_in(c: &mut Conn<'_>, id: RunId, after: i64) -> Result<Vec<EventRecord>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT seq, at, kind, data FROM events WHERE run_id = :run AND seq > :after \
                 ORDER BY seq",
            )
            .bind("run", id)
            .bind("after", after),
        )
        .await?;
    if rows.is_empty() {
        // No event after `after`: a run with none yet, or no run at all.
        check_exists(c, id).await?;
    }
    rows.iter().map(|r| decode_event(id, r)).collect()
}

/// The run's events of `kind`, by sequence (the run must exist). One
/// statement unless it finds none.
pub(super) async fn events_of_kind_in(
    c: &mut Conn<'_>,
    id: RunId,
    kind: cairn_core::EventKind,
) -> Result<Vec<EventRecord>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT seq, at, kind, data FROM events WHERE run_id = :run AND kind = :kind \
                 ORDER BY seq",
            )
            .bind("run", id)
            .bind("kind", kind.as_str()),
        )
        .await?;
    if rows.is_empty() {
        // None of that kind: a run without one, or no run at all.
        check_exists(c, id).await?;
    }
    rows.iter().map(|r| decode_event(id, r)).collect()
}

/// Appends events at the run's next sequence numbers.
pub(super) async fn append_events(c: &mut Conn<'_>, id: RunId, events: &[NewEvent]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let row = c
        .fetch_found(
            query("UPDATE runs SET event_seq = event_seq + :n WHERE id = :id RETURNING event_seq")
                .bind("id", id)
                .bind("n", events.len() as i64),
            || Error::RunNotFound(id),
        )
        .await?;
    insert_events(c, id, row.int("event_seq")?, events).await
}

/// The first event, `run_submitted`, of each run in `rows` (its `id` and
/// its `event`): children started, or copies of children kept.
pub(super) async fn submitted_in(c: &mut Conn<'_>, rows: &serde_json::Value) -> Result<()> {
    c.execute(
        query(
            "INSERT INTO events (run_id, seq, at, kind, data) \
             SELECT (j.value->>'id'){uuid}, 1, {now}, :kind, j.value->'event' \
             FROM {rows:rows}",
        )
        .bind("kind", cairn_core::EventKind::RunSubmitted.as_str())
        .bind("rows", rows.clone()),
    )
    .await?;
    Ok(())
}

/// Inserts `events` numbered so the last one is `last_seq`.
pub(super) async fn insert_events(
    c: &mut Conn<'_>,
    id: RunId,
    last_seq: i64,
    events: &[NewEvent],
) -> Result<()> {
    super::audited::events_in(c, id, events).await?;
    let first = last_seq - events.len() as i64 + 1;
    for (i, e) in events.iter().enumerate() {
        c.execute(
            query("INSERT INTO events (run_id, seq, at, kind, data) VALUES (:run, :seq, {now}, :kind, :data)")
                .bind("run", id)
                .bind("seq", first + i as i64)
                .bind("kind", e.kind.as_str())
                .bind("data", &e.data),
        )
        .await?;
    }
    Ok(())
}

/// Checks, inside a write transaction, that the run is `running` at `held`
/// (its epoch and owner; on PostgreSQL it also locks the run against a
/// concurrent claim).
pub(super) async fn check_held(c: &mut Conn<'_>, id: RunId, held: &Fence) -> Result<()> {
    let sql = "SELECT lease_epoch, lease_owner, status FROM runs WHERE id = :id {for_update}";
    let row = run_row(c, sql, id).await?;
    let status: RunStatus = row
        .text("status")?
        .parse()
        .map_err(|e: String| Corruption::new(id, format!("run status: {e}")))?;
    let owner = row.opt_text("lease_owner")?;
    let current = (LeaseEpoch(row.int("lease_epoch")?), owner.as_deref());
    check_holder(id, status, current, held)
}

/// The run's lease owner now (`None`: not running): what a refused
/// write is told apart by.
pub(super) async fn lease_owner_in(c: &mut Conn<'_>, id: RunId) -> Result<Option<String>> {
    let sql = "SELECT lease_owner FROM runs WHERE id = :id";
    run_row(c, sql, id).await?.opt_text("lease_owner")
}

/// `RunStore::record_events`: fenced like a journal item.
pub(super) async fn record_events_in(
    c: &mut Conn<'_>,
    id: RunId,
    held: &Fence,
    events: &[NewEvent],
) -> Result<()> {
    check_held(c, id, held).await?;
    append_events(c, id, events).await
}
