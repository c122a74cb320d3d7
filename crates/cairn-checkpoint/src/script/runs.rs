//! The operations on runs as a whole: submit (and a thread's `on_busy`),
//! listing, stats, set-aside, heartbeats. The reads and writes every
//! operation shares (`fetch_run`, `append_events`, `check_held`, `load_in`)
//! are `rows.rs`.

use async_trait::async_trait;
use cairn_core::event::payload::{RunFailed, RunSubmitted};
use cairn_core::{
    Actor, Corruption, ErrorInfo, ErrorKind, EventData, EventKind, EventRecord, Fence, Fingerprint,
    NewEvent, RunId, RunRecord, RunStatus, StepRecord,
};

use crate::contract::RunStore;
use crate::raw::{
    check_same_submission, decode_listed, decode_run, decode_run_with, error_json, run_cols,
    run_cols_but_def, stats_from,
};
use crate::sql::{query, Conn};
use crate::{Action, Error, NewRun, OnBusy, Result, RunFilter, StoreStats, Submitted};

use super::boundary::{bounded, placed};
use super::ends::act_in;
use super::rows::{append_events, check_exists, fetch_run, insert_events};
use super::storable::{events_ok, submit_ok, text_ok};
use super::threads::{busy_before, lock_thread};
use super::{ScriptHost, TxKind};

/// `list_runs`, each way: one keyset condition and order per direction.
macro_rules! list_runs_sql {
    ($cmp:literal, $order:literal) => {
        concat!(
            "SELECT ",
            run_cols!(),
            " FROM runs WHERE (:status IS NULL OR status = :status) \
             AND (:crew IS NULL OR crew_name = :crew) \
             AND (:thread IS NULL OR thread_id = :thread) \
             AND (:tenant IS NULL OR tenant = :tenant) \
             AND (:parent IS NULL OR (parent_run_id = :parent AND child_key IS NOT NULL)) \
             AND (:after IS NULL OR (created_at, id) ",
            $cmp,
            " (SELECT created_at, id FROM runs WHERE id = :after)) ORDER BY ",
            $order,
            " LIMIT :limit"
        )
    };
}
const LIST_OLDEST_FIRST: &str = list_runs_sql!(">", "created_at, id");
const LIST_NEWEST_FIRST: &str = list_runs_sql!("<", "created_at DESC, id DESC");

/// `RunStore::list_runs`.
pub(super) async fn list_runs_in(c: &mut Conn<'_>, filter: &RunFilter) -> Result<Vec<RunRecord>> {
    if let Some(after) = filter.after {
        // The cursor must name a run, or the page would silently be empty.
        check_exists(c, after).await?;
    }
    let sql = match filter.newest_first {
        false => LIST_OLDEST_FIRST,
        true => LIST_NEWEST_FIRST,
    };
    let rows = c
        .fetch_all(
            query(sql)
                .bind("status", filter.status.map(|s| s.as_str()))
                .bind("crew", filter.crew.as_deref())
                .bind("thread", filter.thread.as_deref())
                .bind("tenant", filter.tenant.as_deref())
                .bind("parent", filter.parent)
                .bind("after", filter.after)
                .bind("limit", filter.limit.map_or(i64::MAX, i64::from)),
        )
        .await?;
    rows.iter().map(decode_listed).collect()
}

/// `RunStore::stats`.
pub(super) async fn stats_in(c: &mut Conn<'_>) -> Result<StoreStats> {
    let rows = c
        .fetch_all(query(
            "SELECT status, count(*) AS n FROM runs GROUP BY status ORDER BY status",
        ))
        .await?;
    let by_status = rows
        .iter()
        .map(|r| Ok((r.text("status")?, r.int("n")?)))
        .collect::<Result<Vec<_>>>()?;
    let row = c
        .fetch_found(
            query(
                "SELECT (SELECT count(*) FROM runs WHERE status = 'queued' \
                     AND (not_before IS NULL OR not_before <= {now})) AS ready, \
                    (SELECT count(*) FROM events WHERE kind = 'run_claimed' \
                     AND data->>'from_status' = 'running') AS takeovers",
            ),
            || Error::Statement("the stats query returned no row".into()),
        )
        .await?;
    Ok(stats_from(
        by_status,
        row.int("ready")?,
        row.int("takeovers")?,
    )?)
}

/// `LeaseStore::set_aside`, inside the caller's transaction: reads nothing it
/// would have to decode.
pub(super) async fn set_aside_in(
    c: &mut Conn<'_>,
    corruption: &Corruption,
    held: Option<&Fence>,
) -> Result<bool> {
    let id = corruption.run;
    let error = ErrorInfo::new(ErrorKind::Corruption, corruption.to_string(), false);
    let json = error_json(&Some(error.clone()));
    let changed = c
        .execute(
            query(
                "UPDATE runs SET status = 'failed', error = :error, lease_owner = NULL, \
                 lease_expires_at = NULL, not_before = NULL, finished_at = {now}, \
                 updated_at = {now} WHERE id = :id AND status IN ('queued', 'running') \
                 AND (:held IS NULL OR (lease_epoch = :held AND lease_owner = :owner))",
            )
            .bind("id", id)
            .bind("error", json.clone())
            .bind("held", held.map(|f| f.epoch.0))
            .bind("owner", held.map(|f| &*f.owner)),
        )
        .await?;
    if changed == 0 {
        return Ok(false);
    }
    c.execute(
        query(
            "UPDATE steps SET status = 'failed', error = :error, finished_at = {now} \
             WHERE run_id = :run AND status = 'running'",
        )
        .bind("run", id)
        .bind("error", json),
    )
    .await?;
    let event = NewEvent::typed(EventData::RunFailed(RunFailed {
        error,
        idx: None,
        attempts: None,
        set_aside: true,
    }));
    append_events(c, id, &[event]).await?;
    super::ends::ended_in(c, id).await?;
    Ok(true)
}

/// Moves `tenant`'s claim-order clock on by one run (`cairn_core::meter::tenant`),
/// creating it at now; the submit's insert reads the slot it moved from.
/// On PostgreSQL the upsert locks the tenant's row until the submit
/// commits, so two submits of one tenant take two slots.
async fn next_of_tenant(c: &mut Conn<'_>, tenant: &cairn_core::Tenant) -> Result<()> {
    c.execute(
        query(
            "INSERT INTO tenants (tenant, next_at) VALUES (:tenant, {later:spacing}) \
             ON CONFLICT (tenant) DO UPDATE SET next_at = {tenant_next}",
        )
        .bind("tenant", tenant.as_str())
        .bind("spacing", cairn_core::Tenant::SPACING_SECS),
    )
    .await?;
    Ok(())
}

/// `RunStore::submit`'s transaction; `def` is the crew definition as stored.
/// A created run wakes the workers that listen.
pub(super) async fn submit_in(
    c: &mut Conn<'_>,
    new: NewRun,
    def: serde_json::Value,
) -> Result<Submitted> {
    let submitted = insert_run_in(c, new, def).await?;
    if submitted.created {
        c.notify_runnable(submitted.run.id).await?;
    }
    Ok(submitted)
}

/// The submit without the wake-up: `RunStore::start` claims the run itself.
pub(super) async fn insert_run_in(
    c: &mut Conn<'_>,
    new: NewRun,
    def: serde_json::Value,
) -> Result<Submitted> {
    if let Some(thread) = &new.thread_id {
        lock_thread(c, thread).await?;
    }
    if let Some(tenant) = &new.tenant {
        next_of_tenant(c, tenant).await?;
    }
    let fingerprint = new.crew.fingerprint();
    let id = RunId::new();
    let budget = new.budget.map(|b| serde_json::json!(b));
    let trace = new.trace.map(|t| t.context(id));
    // The new run as stored, read back by the insert itself; no row
    // when the idempotency key is taken.
    let inserted = c
        .fetch_optional(
            query(concat!(
                "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, \
                 input, idempotency_key, thread_id, status, cursor, step_count, lease_epoch, \
                 event_seq, created_at, updated_at, priority, claim_at, budget, trace, upgrade, \
                 tenant) \
                 VALUES (:id, :name, :version, :fingerprint, 'null', :input, :key, :thread, \
                 'queued', 0, :steps, 0, 1, {now}, {now}, :priority, {claim_at}, :budget, \
                 :trace, :upgrade, :tenant) \
                 ON CONFLICT (idempotency_key) DO NOTHING RETURNING ",
                run_cols_but_def!()
            ))
            .bind("id", id)
            .bind("name", new.crew.name.as_str())
            .bind("version", new.crew.version.as_str())
            .bind("fingerprint", fingerprint.as_str())
            .bind("input", &new.input)
            .bind("key", &new.idempotency_key)
            .bind("thread", &new.thread_id)
            .bind("steps", new.crew.step_count())
            .bind("priority", i64::from(new.priority.get()))
            .bind("head", new.priority.head_start_secs() as f64)
            .bind("tenant", new.tenant.as_ref().map(|t| t.as_str()))
            .bind("spacing", cairn_core::Tenant::SPACING_SECS)
            .bind("budget", budget)
            .bind("trace", trace.map(|t| serde_json::json!(t).to_string()))
            .bind("upgrade", new.upgrade.map(|u| u.as_str())),
        )
        .await?;
    let Some(inserted) = inserted else {
        return existing_submission(c, &new).await;
    };
    super::crews::remember_in(c, &new.crew, &fingerprint, &def).await?;
    if trace.is_some_and(|t| t.sampled) {
        super::traces::start_in(c, id).await?;
    }
    insert_events(c, id, 1, &[submitted_event(&new, &fingerprint)]).await?;
    if let (Some(thread), OnBusy::Reject | OnBusy::Interrupt) = (&new.thread_id, new.on_busy) {
        apply_on_busy(c, thread, id, new.on_busy).await?;
    }
    let run = decode_run_with(&inserted, Some(new.crew))?;
    Ok(Submitted { run, created: true })
}

/// A submit's first event, `run_submitted`.
pub(crate) fn submitted_event(new: &NewRun, fingerprint: &Fingerprint) -> NewEvent {
    NewEvent::typed(EventData::RunSubmitted(RunSubmitted {
        crew: new.crew.name.clone(),
        fingerprint: fingerprint.clone(),
        idempotency_key: Some(new.idempotency_key.clone()),
        thread_id: Some(new.thread_id.clone()),
        parent: None,
        copied_from: None,
        submitted_by: new.by.clone(),
    }))
}

/// The run that already holds a submit's idempotency key, if the submit is
/// the same (a crew or input that differs is refused).
async fn existing_submission(c: &mut Conn<'_>, new: &NewRun) -> Result<Submitted> {
    let row = c
        .fetch_found(
            query(concat!(
                "SELECT ",
                run_cols!(),
                " FROM runs WHERE idempotency_key = :key"
            ))
            .bind("key", &new.idempotency_key),
            || Error::Statement("a conflicting run vanished".into()),
        )
        .await?;
    let run = decode_run(&row)?;
    check_same_submission(&run, new)?;
    Ok(Submitted {
        run,
        created: false,
    })
}

/// A submit's `on_busy` (reject or interrupt) against the runs of `thread`
/// submitted before run `id`.
async fn apply_on_busy(c: &mut Conn<'_>, thread: &str, id: RunId, on_busy: OnBusy) -> Result<()> {
    for (busy, status) in busy_before(c, thread, id).await? {
        if on_busy == OnBusy::Reject {
            // Returning drops the transaction: nothing is stored.
            return Err(Error::ThreadBusy {
                thread: thread.to_owned(),
                run: busy,
                status,
            });
        }
        // Under the thread's lock nothing else submits to it, but a
        // worker may have finished the run since it was read: a run
        // that is already over needs no interrupt.
        let now = fetch_run(c, busy, true).await?.status;
        if matches!(
            now,
            RunStatus::Succeeded | RunStatus::Cancelled | RunStatus::Failed
        ) {
            continue;
        }
        let actor = Actor::new("on_busy=interrupt")
            .because(format!("run {id} was submitted to thread `{thread}`"));
        act_in(c, busy, Action::Cancel, &actor).await?;
    }
    Ok(())
}

/// `LeaseStore::heartbeat`: the lease extended only at the holder's epoch, and
/// in the same statement whether a cancel was requested.
/// `LeaseStore::heartbeat_many`: one statement for every run a process holds.
/// The runs not in the answer were not extended (their lease is lost).
/// Their rows are locked in id order, as a batch of step commits locks
/// them (`postgres/batch.rs`), so the two never deadlock.
pub(super) async fn heartbeat_many_in(
    c: &mut Conn<'_>,
    held: &[(RunId, Fence)],
    lease: std::time::Duration,
) -> Result<Vec<crate::Lease>> {
    let triples: Vec<serde_json::Value> = held
        .iter()
        .map(|(id, f)| serde_json::json!([id, f.epoch.0, &*f.owner]))
        .collect();
    let rows = c
        .fetch_all(
            query(
                "UPDATE runs SET lease_expires_at = {lease_until} \
                 WHERE status = 'running' AND id IN ( \
                   SELECT id FROM runs WHERE status = 'running' \
                     AND (id, lease_epoch, lease_owner) IN ({held:held}) ORDER BY id {for_update}) \
                 RETURNING id, CASE WHEN cancel_requested_at IS NULL THEN 0 ELSE 1 END AS cancel",
            )
            .bind("held", serde_json::Value::Array(triples))
            .bind("lease_secs", lease.as_secs_f64()),
        )
        .await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        if let Some(id) = row.opt_uuid("id", held[0].0, "a held run's id")? {
            found.insert(RunId::from_uuid(id), row.int("cancel")? != 0);
        }
    }
    Ok(held
        .iter()
        .map(|(id, _)| crate::Lease::from_beat(found.get(id).copied()))
        .collect())
}

pub(super) async fn heartbeat_in(
    c: &mut Conn<'_>,
    id: RunId,
    held: &Fence,
    lease: std::time::Duration,
) -> Result<crate::Lease> {
    let row = c
        .fetch_optional(
            query(
                "UPDATE runs SET lease_expires_at = {lease_until} \
                 WHERE id = :id AND lease_epoch = :epoch AND lease_owner = :owner \
                 AND status = 'running' RETURNING CASE WHEN cancel_requested_at IS NULL THEN 0 ELSE 1 END AS cancel",
            )
            .bind("id", id)
            .bind("epoch", held.epoch.0)
            .bind("owner", &*held.owner)
            .bind("lease_secs", lease.as_secs_f64()),
        )
        .await?;
    Ok(crate::Lease::from_beat(
        row.map(|r| r.int("cancel").map(|n| n != 0)).transpose()?,
    ))
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> RunStore for H {
    fn backend(&self) -> crate::Backend {
        self.db().backend()
    }

    async fn submit(&self, new: NewRun) -> Result<Submitted> {
        bounded("submit", self.target(), None, async {
            let def = submit_ok(&new)?;
            if let Some(started) = self.start_fresh(&new, &def, None).await? {
                return Ok(started.submitted);
            }
            self.tx(TxKind::HotWrite, script!(|c| submit_in(c, new, def).await))
                .await
        })
        .await
    }

    async fn load(&self, id: RunId) -> Result<(RunRecord, Vec<StepRecord>)> {
        placed(self.target(), Some(id), async {
            // One snapshot, so run and steps agree. The rows are decoded
            // after it, off SQLite's writer thread.
            let (run, rows) = self
                .tx(
                    TxKind::HotRead,
                    script!(|c| super::rows::load_in(c, id).await),
                )
                .await?;
            let steps = rows
                .iter()
                .map(|r| crate::raw::decode_step(id, r))
                .collect::<Result<Vec<_>>>()?;
            Ok((run, steps))
        })
        .await
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord> {
        let read = self.read_now(script!(|c| super::rows::fetch_run(c, id, false).await));
        placed(self.target(), Some(id), read).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        placed(self.target(), None, async {
            text_ok("the crew filter", filter.crew.as_deref())?;
            text_ok("the thread filter", filter.thread.as_deref())?;
            text_ok("the tenant filter", filter.tenant.as_deref())?;
            let filter = filter.clone();
            self.tx(TxKind::Single, script!(|c| list_runs_in(c, &filter).await))
                .await
        })
        .await
    }

    async fn stats(&self) -> Result<StoreStats> {
        let read = self.tx(TxKind::Single, script!(|c| stats_in(c).await));
        placed(self.target(), None, read).await
    }

    async fn events(&self, id: RunId) -> Result<Vec<EventRecord>> {
        self.events_after(id, 0).await
    }

    async fn events_after(&self, id: RunId, after: i64) -> Result<Vec<EventRecord>> {
        // One statement (no transaction) unless there is nothing after
        // `after`, when a second one tells a quiet run from none.
        let read = self.tx(
            TxKind::Single,
            script!(|c| super::rows::events_in(c, id, after).await),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn events_of_kind(&self, id: RunId, kind: EventKind) -> Result<Vec<EventRecord>> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| super::rows::events_of_kind_in(c, id, kind).await),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn record_events(&self, id: RunId, held: &Fence, events: &[NewEvent]) -> Result<()> {
        bounded("record_events", self.target(), Some(id), async {
            events_ok(events)?;
            let (events, held) = (events.to_vec(), held.clone());
            self.tx(
                TxKind::Write,
                script!(|c| super::rows::record_events_in(c, id, &held, &events).await),
            )
            .await
        })
        .await
    }
}
