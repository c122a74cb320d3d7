//! Signals (`SignalStore`) and what a `signal` step's commit writes. A
//! send resolves its target, takes the run's row lock, stores the signal
//! (its id unique: a second send finds the first) and wakes the run if
//! its open wait names it. A step that starts to wait writes its wait
//! under the same row lock (its commit updated the run's row first) and
//! looks for a signal buffered meanwhile, so a send and a wait that race
//! always meet. A consuming step's commit marks its signal consumed in
//! the commit's transaction: a crash before leaves it buffered.

use async_trait::async_trait;
use cairn_core::event::payload::{SignalReceived, SignalTimedOut};
use cairn_core::signal::{check_name, check_text, MAX_BUFFERED_PER_RUN, SIGNAL_RETENTION};
use cairn_core::{Attempt, EventData, Heard, NewEvent, RunId, RunStatus, Signal, StepIdx, Target};
use serde_json::Value;

use crate::contract::{Listening, NewSignal, Sent, SignalStore};
use crate::raw::nil_run;
use crate::sql::{query, Conn, Row};
use crate::{Error, NewRun, OnBusy, Result, StepCommit, StepTransition};

use super::boundary::{bounded, placed};
use super::storable::{actor_ok, json_ok};
use super::{ScriptHost, TxKind};

fn decode(r: &Row) -> Result<Signal> {
    let run = RunId::from_uuid(
        r.opt_uuid("run_id", nil_run(), "a signal's run")?
            .unwrap_or_default(),
    );
    let consumed_by = match (r.opt_int("consumed_step")?, r.opt_int("consumed_attempt")?) {
        (Some(s), Some(a)) => Some((StepIdx(s as u32), Attempt(a as u32))),
        _ => None,
    };
    Ok(Signal {
        id: r.text("id")?,
        run_id: run,
        name: r.text("name")?,
        payload: r.json("payload", run, "a signal's payload")?,
        sent_at: r.time("sent_at", run, "a signal's time")?,
        sent_by: r.opt_text("sent_by")?,
        consumed_at: r.opt_time("consumed_at", run, "a signal's consumption")?,
        consumed_by,
    })
}

async fn by_id_in(c: &mut Conn<'_>, id: &str) -> Result<Option<Signal>> {
    let sql = "SELECT id, run_id, name, payload, sent_at, sent_by, consumed_at, consumed_step, \
               consumed_attempt FROM signals WHERE id = :id";
    let row = c.fetch_optional(query(sql).bind("id", id)).await?;
    row.as_ref().map(decode).transpose()
}

/// A run a target names: its id, status and tenant.
type Found = (RunId, RunStatus, Option<String>);

/// The unfinished runs `target` names (a run id or key names at most one).
async fn resolve_in(c: &mut Conn<'_>, target: &Target) -> Result<Vec<Found>> {
    let rows = match target {
        Target::Run(id) => {
            let sql = "SELECT id, status, tenant FROM runs WHERE id = :v";
            c.fetch_all(query(sql).bind("v", *id)).await?
        }
        Target::Key(k) => {
            let sql = "SELECT id, status, tenant FROM runs WHERE idempotency_key = :v";
            c.fetch_all(query(sql).bind("v", k.as_str())).await?
        }
        Target::Thread(t) => {
            // As a submit to the thread does: two sends that would each
            // start its run see each other, and start one.
            super::threads::lock_thread(c, t).await?;
            let sql = "SELECT id, status, tenant FROM runs WHERE thread_id = :v \
                       AND status IN ('queued', 'running', 'waiting', 'interrupted') \
                       ORDER BY created_at";
            c.fetch_all(query(sql).bind("v", t.as_str())).await?
        }
    };
    rows.iter()
        .map(|r| {
            let id = RunId::from_uuid(r.opt_uuid("id", nil_run(), "a run id")?.unwrap_or_default());
            let status: RunStatus = r
                .text("status")?
                .parse()
                .map_err(|e: String| Error::Corruption(cairn_core::Corruption::new(id, e)))?;
            Ok((id, status, r.opt_text("tenant")?))
        })
        .collect()
}

/// The one unfinished run the signal goes to, started if it may be.
async fn recipient_in(c: &mut Conn<'_>, new: &NewSignal) -> Result<(RunId, bool)> {
    let target = new.target.to_string();
    let none = |why: String| Error::NoSignalTarget {
        target: target.clone(),
        why,
    };
    let found = resolve_in(c, &new.target).await?;
    let live: Vec<&Found> = found.iter().filter(|(_, s, _)| !is_finished(*s)).collect();
    match (live.as_slice(), found.first()) {
        ([(one, _, tenant)], _) => {
            let theirs = tenant.as_ref().is_some_and(|t| new.tenants.contains(t));
            match new.tenants.is_empty() || theirs {
                true => Ok((*one, false)),
                false => Err(Error::SignalForbidden(format!(
                    "run {one} is not a run of the sender's tenants ({})",
                    new.tenants.join(", ")
                ))),
            }
        }
        ([], Some((id, status, _))) => Err(none(format!("run {id} is `{status}`"))),
        ([], None) => match (&new.target, &new.start) {
            (Target::Run(id), _) => Err(Error::RunNotFound(*id)),
            (_, None) => Err(none("no run has it (give `start` to start one)".into())),
            (_, Some(start)) => Ok((start_in(c, new, start).await?, true)),
        },
        (several, _) => Err(Error::AmbiguousSignalTarget {
            target,
            runs: several.iter().map(|(id, _, _)| *id).collect(),
        }),
    }
}

fn is_finished(s: RunStatus) -> bool {
    matches!(
        s,
        RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
    )
}

/// Signal-with-submit: a run of `start`'s crew under the target's key or
/// on its thread.
async fn start_in(c: &mut Conn<'_>, new: &NewSignal, start: &crate::StartWith) -> Result<RunId> {
    let (key, thread) = match &new.target {
        Target::Key(k) => (Some(k.clone()), None),
        Target::Thread(t) => (None, Some(t.clone())),
        Target::Run(id) => return Err(Error::RunNotFound(*id)),
    };
    let tenant = match new.tenants.as_slice() {
        [] => None,
        [one] => Some(
            cairn_core::Tenant::new(one.clone()).map_err(|e| Error::BadSignal(e.to_string()))?,
        ),
        _ => {
            return Err(Error::SignalForbidden(
                "a sender bound to several tenants cannot start a run: it would not know whose"
                    .into(),
            ))
        }
    };
    let run = NewRun {
        idempotency_key: key,
        thread_id: thread,
        on_busy: OnBusy::Queue,
        tenant,
        by: Some(new.by.clone()),
        ..NewRun::new(start.crew.clone(), start.input.clone())
    };
    let def = super::storable::submit_ok(&run)?;
    Ok(super::runs::submit_in(c, run, def).await?.run.id)
}

async fn send_in(c: &mut Conn<'_>, new: &NewSignal, id: &str) -> Result<Sent> {
    if let Some(first) = by_id_in(c, id).await? {
        return Ok(duplicate(first));
    }
    let (run, started) = recipient_in(c, new).await?;
    // The run's row lock: a step starting to wait holds it in its commit.
    c.fetch_optional(query("SELECT id FROM runs WHERE id = :run {for_update}").bind("run", run))
        .await?;
    let (top, waiting) = seq_and_buffered_in(c, run).await?;
    if waiting >= i64::from(MAX_BUFFERED_PER_RUN) {
        return Err(Error::BadSignal(format!(
            "run {run} holds {waiting} signals nobody consumed, the most it keeps"
        )));
    }
    let inserted = c
        .execute(
            query(
                "INSERT INTO signals (id, run_id, seq, name, payload, sent_at, expires_at, sent_by) \
                 VALUES (:id, :run, :seq, :name, :payload, {now}, {later:keep}, :by) \
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind("id", id)
            .bind("run", run)
            .bind("seq", top + 1)
            .bind("name", new.name.as_str())
            .bind("payload", &new.payload)
            .bind("keep", SIGNAL_RETENTION.as_secs_f64())
            .bind("by", new.by.by.as_str()),
        )
        .await?;
    let signal = by_id_in(c, id).await?;
    let signal = signal.ok_or_else(|| corrupt(run, format!("signal `{id}` was not stored")))?;
    if inserted == 0 {
        return Ok(duplicate(signal));
    }
    let woke = wake_for_in(c, run, &new.name).await?;
    let event = NewEvent::typed(EventData::SignalReceived(SignalReceived {
        id: id.to_owned(),
        name: new.name.clone(),
        actor: new.by.clone(),
        woke,
        traceparent: new.traceparent.clone(),
    }));
    super::rows::append_events(c, run, &[event]).await?;
    Ok(Sent {
        signal,
        duplicate: false,
        woke,
        started,
    })
}

fn duplicate(first: Signal) -> Sent {
    Sent {
        signal: first,
        duplicate: true,
        woke: false,
        started: false,
    }
}

fn corrupt(run: RunId, what: String) -> Error {
    Error::Corruption(cairn_core::Corruption::new(run, what))
}

/// The run's newest signal's `seq`, and how many of its signals wait
/// unconsumed within their retention: one read of its rows.
async fn seq_and_buffered_in(c: &mut Conn<'_>, run: RunId) -> Result<(i64, i64)> {
    let row = c
        .fetch_optional(
            query(
                "SELECT COALESCE(MAX(seq), 0) AS top, COALESCE(SUM(CASE WHEN consumed_at IS NULL \
                 AND expires_at > {now} THEN 1 ELSE 0 END), 0) AS n FROM signals \
                 WHERE run_id = :run",
            )
            .bind("run", run),
        )
        .await?;
    match row {
        Some(r) => Ok((r.int("top")?, r.int("n")?)),
        None => Ok((0, 0)),
    }
}

/// Wakes `run` if its open wait names `name` (or, with no name, any
/// buffered signal it waits for): the wait is `heard`, the run `queued`.
async fn wake_for_in(c: &mut Conn<'_>, run: RunId, name: &str) -> Result<bool> {
    let Some(wait) = open_wait_in(c, run).await? else {
        return Ok(false);
    };
    if !wait.names.iter().any(|n| n == name) {
        return Ok(false);
    }
    wake_in(c, &wait, "heard").await
}

/// Closes `wait` as `status` and queues its run again, if it still waits
/// at that step.
async fn wake_in(c: &mut Conn<'_>, wait: &Listening, status: &str) -> Result<bool> {
    c.execute(
        query(
            "UPDATE signal_waits SET status = :status WHERE run_id = :run AND step_idx = :idx \
             AND attempt = :attempt AND status = 'open'",
        )
        .bind("status", status)
        .bind("run", wait.run_id)
        .bind("idx", wait.idx.get())
        .bind("attempt", wait.attempt.get()),
    )
    .await?;
    let woken = c
        .execute(
            query(
                "UPDATE runs SET status = 'queued', updated_at = {now} WHERE id = :run \
                 AND status = 'waiting' AND cursor = :idx",
            )
            .bind("run", wait.run_id)
            .bind("idx", wait.idx.get()),
        )
        .await?;
    if woken == 1 {
        c.notify_runnable(wait.run_id).await?;
    }
    Ok(woken == 1)
}

fn decode_wait(r: &Row) -> Result<Listening> {
    let run = RunId::from_uuid(
        r.opt_uuid("run_id", nil_run(), "a signal wait's run")?
            .unwrap_or_default(),
    );
    let names: Vec<String> =
        serde_json::from_value(r.json("names", run, "a signal wait's names")?)
            .map_err(|e| corrupt(run, format!("a signal wait's names: {e}")))?;
    Ok(Listening {
        run_id: run,
        idx: StepIdx(r.int("step_idx")? as u32),
        attempt: Attempt(r.int("attempt")? as u32),
        names,
        opened_at: r.time("opened_at", run, "a signal wait's opening")?,
        deadline: r.opt_time("deadline", run, "a signal wait's deadline")?,
    })
}

/// The run's open signal wait, while the run waits (a run cancelled while
/// it waited leaves its wait open, and waits for nothing).
async fn open_wait_in(c: &mut Conn<'_>, run: RunId) -> Result<Option<Listening>> {
    let row = c
        .fetch_optional(
            query(
                "SELECT w.run_id, w.step_idx, w.attempt, w.names, w.opened_at, w.deadline \
                 FROM signal_waits w JOIN runs r ON r.id = w.run_id \
                 WHERE w.run_id = :run AND w.status = 'open' AND r.status = 'waiting' \
                 ORDER BY w.step_idx DESC LIMIT 1",
            )
            .bind("run", run),
        )
        .await?;
    row.as_ref().map(decode_wait).transpose()
}

/// The oldest unexpired buffered signal of `names` for `run`.
async fn oldest_in(c: &mut Conn<'_>, run: RunId, names: &[String]) -> Result<Option<Signal>> {
    let mut oldest: Option<(i64, Signal)> = None;
    for name in names {
        let row = c
            .fetch_optional(
                query(
                    "SELECT id, run_id, name, payload, sent_at, sent_by, consumed_at, \
                     consumed_step, consumed_attempt, seq FROM signals WHERE run_id = :run \
                     AND name = :name AND consumed_at IS NULL AND expires_at > {now} \
                     ORDER BY seq LIMIT 1",
                )
                .bind("run", run)
                .bind("name", name.as_str()),
            )
            .await?;
        if let Some(row) = row {
            let seq = row.int("seq")?;
            if oldest.as_ref().is_none_or(|(s, _)| seq < *s) {
                oldest = Some((seq, decode(&row)?));
            }
        }
    }
    Ok(oldest.map(|(_, s)| s))
}

async fn heard_in(
    c: &mut Conn<'_>,
    run: RunId,
    idx: StepIdx,
    attempt: Attempt,
    names: &[String],
) -> Result<Heard> {
    if let Some(s) = oldest_in(c, run, names).await? {
        return Ok(Heard::Signal(Box::new(s)));
    }
    let row = c
        .fetch_optional(
            query(
                "SELECT status FROM signal_waits WHERE run_id = :run AND step_idx = :idx \
                 AND attempt = :attempt",
            )
            .bind("run", run)
            .bind("idx", idx.get())
            .bind("attempt", attempt.get()),
        )
        .await?;
    match row.map(|r| r.text("status")).transpose()?.as_deref() {
        Some("timed_out") => Ok(Heard::TimedOut),
        _ => Ok(Heard::Nothing),
    }
}

/// Whether the `signal` step at (`run`, `idx`, `attempt`) was woken (by
/// a signal or its timeout): a claim runs it again, the same attempt.
pub(super) async fn woken_in(
    c: &mut Conn<'_>,
    run: RunId,
    idx: StepIdx,
    attempt: Attempt,
) -> Result<bool> {
    let row = c
        .fetch_optional(
            query(
                "SELECT 1 AS one FROM signal_waits WHERE run_id = :run AND step_idx = :idx \
                 AND attempt = :attempt AND status IN ('heard', 'timed_out')",
            )
            .bind("run", run)
            .bind("idx", idx.get())
            .bind("attempt", attempt.get()),
        )
        .await?;
    Ok(row.is_some())
}

/// What a `signal` step's commit writes beyond its rows, in its
/// transaction: the signal it consumed, or the wait it opens.
pub(crate) async fn follow_up_in(c: &mut Conn<'_>, commit: &StepCommit) -> Result<()> {
    let (run, idx, attempt) = (commit.run_id, commit.idx, commit.attempt);
    match &commit.transition {
        StepTransition::Consumed { signal, .. } => {
            let consumed = c
                .execute(
                    query(
                        "UPDATE signals SET consumed_at = {now}, consumed_step = :idx, \
                         consumed_attempt = :attempt WHERE id = :id AND run_id = :run \
                         AND consumed_at IS NULL",
                    )
                    .bind("idx", idx.get())
                    .bind("attempt", attempt.get())
                    .bind("id", signal.as_str())
                    .bind("run", run),
                )
                .await?;
            if consumed != 1 {
                return Err(corrupt(
                    run,
                    format!(
                        "signal `{signal}` was consumed or deleted before step {idx} committed it"
                    ),
                ));
            }
        }
        StepTransition::Listening { names, timeout } => {
            let names_json = Value::from(names.clone());
            let timeout = timeout.map(|t| t.as_secs_f64());
            c.execute(
                query(
                    "INSERT INTO signal_waits (run_id, step_idx, attempt, names, status, opened_at, \
                     deadline) VALUES (:run, :idx, :attempt, :names, 'open', {now}, \
                     CASE WHEN :has_deadline THEN {later:timeout} END) \
                     ON CONFLICT (run_id, step_idx, attempt) DO UPDATE SET status = 'open', \
                     names = excluded.names",
                )
                .bind("run", run)
                .bind("idx", idx.get())
                .bind("attempt", attempt.get())
                .bind("names", names_json)
                .bind("has_deadline", timeout.is_some())
                .bind("timeout", timeout.unwrap_or(0.0)),
            )
            .await?;
            if oldest_in(c, run, names).await?.is_some() {
                if let Some(wait) = open_wait_in(c, run).await? {
                    wake_in(c, &wait, "heard").await?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Times out one due wait (if it is still open), waking its run.
async fn time_out_in(c: &mut Conn<'_>, wait: &Listening) -> Result<bool> {
    let woke = wake_in(c, wait, "timed_out").await?;
    if woke {
        let event = NewEvent::typed(EventData::SignalTimedOut(SignalTimedOut {
            idx: wait.idx,
            attempt: wait.attempt,
            names: wait.names.clone(),
        }));
        super::rows::append_events(c, wait.run_id, &[event]).await?;
    }
    Ok(woke)
}

async fn due_waits_in(c: &mut Conn<'_>, limit: u32) -> Result<Vec<Listening>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT run_id, step_idx, attempt, names, opened_at, deadline FROM signal_waits \
                 WHERE status = 'open' AND deadline <= {now} ORDER BY deadline LIMIT :limit",
            )
            .bind("limit", limit),
        )
        .await?;
    rows.iter().map(decode_wait).collect()
}

#[async_trait]
impl<H: ScriptHost> SignalStore for H {
    async fn send_signal(&self, new: &NewSignal) -> Result<Sent> {
        let bad = |e: cairn_core::signal::BadSignal| Error::BadSignal(e.0);
        check_name(&new.name).map_err(bad)?;
        if let Some(id) = &new.id {
            check_text(id, "a signal id").map_err(bad)?;
        }
        json_ok("the signal's payload", Some(&new.payload))?;
        actor_ok(&new.by)?;
        let id = new
            .id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let new = new.clone();
        let write = self.tx(TxKind::Write, script!(|c| send_in(c, &new, &id).await));
        bounded("send_signal", self.target(), None, write).await
    }

    async fn heard(
        &self,
        run: RunId,
        idx: StepIdx,
        attempt: Attempt,
        names: &[String],
    ) -> Result<Heard> {
        let names = names.to_vec();
        let read = self.tx(
            TxKind::Read,
            script!(|c| heard_in(c, run, idx, attempt, &names).await),
        );
        placed(self.target(), Some(run), read).await
    }

    async fn time_out_signal_waits(&self, limit: u32) -> Result<Vec<RunId>> {
        let read = self.tx(TxKind::Single, script!(|c| due_waits_in(c, limit).await));
        let due = placed(self.target(), None, read).await?;
        let mut woken = vec![];
        for wait in due {
            let run = wait.run_id;
            let write = self.tx(TxKind::Write, script!(|c| time_out_in(c, &wait).await));
            if bounded("time_out_signal_waits", self.target(), Some(run), write).await? {
                woken.push(run);
            }
        }
        Ok(woken)
    }

    async fn signals(&self, run: RunId) -> Result<Vec<Signal>> {
        let read = self.tx(
            TxKind::Read,
            script!(|c| {
                super::rows::check_exists(c, run).await?;
                let sql = "SELECT id, run_id, name, payload, sent_at, sent_by, consumed_at, \
                           consumed_step, consumed_attempt FROM signals WHERE run_id = :run \
                           ORDER BY seq";
                let rows = c.fetch_all(query(sql).bind("run", run)).await?;
                rows.iter().map(decode).collect::<Result<Vec<_>>>()
            }),
        );
        placed(self.target(), Some(run), read).await
    }

    async fn listening(&self, run: RunId) -> Result<Option<Listening>> {
        let read = self.tx(TxKind::Single, script!(|c| open_wait_in(c, run).await));
        placed(self.target(), Some(run), read).await
    }

    async fn buffered_signals(&self) -> Result<u64> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| {
                let sql = "SELECT COUNT(*) AS n FROM signals WHERE consumed_at IS NULL \
                           AND expires_at > {now}";
                let row = c.fetch_optional(query(sql)).await?;
                Ok(row.map_or(Ok(0), |r| r.int("n"))?.max(0) as u64)
            }),
        );
        placed(self.target(), None, read).await
    }

    async fn prune_signals(&self, limit: u32) -> Result<u64> {
        let write = self.tx(
            TxKind::Write,
            script!(|c| {
                c.execute(
                    query(
                        "DELETE FROM signals WHERE id IN (SELECT id FROM signals \
                         WHERE consumed_at IS NULL AND expires_at <= {now} LIMIT :limit)",
                    )
                    .bind("limit", limit),
                )
                .await
            }),
        );
        bounded("prune_signals", self.target(), None, write).await
    }
}
