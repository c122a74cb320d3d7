//! Claims: `LeaseStore::claim` takes one run's lease, `LeaseStore::claim_next` the
//! oldest runnable run's. What a claim does to the cursor's step is
//! `plan_claim`'s (pure); this module reads what it needs and writes what
//! it says, in four steps: is the run claimable (`claimable`), the plan,
//! the lease (`take_lease`), the cursor's step (`apply_step`).

use std::sync::Arc;
use std::time::Duration;

use cairn_core::{
    Corruption, LeaseEpoch, NewEvent, RunId, RunRecord, RunStatus, StepIdx, StepRecord, StepStatus,
};

use crate::contract::LeaseStore;
use crate::plan::{claim_events, judge_death, plan_claim, ClaimStep, Death, Waited};
use crate::raw::{decode_run_with, decode_step, error_json, run_cols_but_def, step_cols};
use crate::sql::{query, Conn};
use crate::{failpoint, ClaimRequest, Claimed, Error, NewRun, Result, Started, Takeover};

use super::operator::write_context;
use super::rows::{fetch_run, fetch_run_again, fetch_run_known, fetch_step, insert_events};
use super::runs::{insert_run_in, submit_in};
use super::storable::claim_ok;
use super::threads::busy_before;
use super::waits::latest_wait;
use super::{ScriptHost, TxKind};

/// The claim of `LeaseStore::claim`, inside the caller's transaction.
pub(super) async fn claim_in(c: &mut Conn<'_>, id: RunId, req: &ClaimRequest) -> Result<Claimed> {
    let before = claimable(c, id, req).await?;
    let cursor = before.cursor;
    let row = fetch_step(c, id, cursor).await?;
    let waited = match &row {
        Some(r) if r.status == StepStatus::Waiting => match joined(c, id, r).await? {
            true => Waited::Join,
            false if super::signals::woken_in(c, id, r.idx, r.attempt).await? => Waited::Signal,
            false => latest_wait(c, id, r.idx)
                .await?
                .map_or(Waited::Nothing, |w| Waited::Wait(Box::new(w))),
        },
        _ => Waited::Nothing,
    };
    let mut plan = plan_claim(&before, row.clone(), &waited, req)?;
    if plan.took_over {
        let death = death_of_holder(c, id).await?;
        plan = judge_death(plan, row.as_ref(), death, req.crash_loop_cap, cursor);
        if matches!(plan.step, ClaimStep::SharedDeath { .. }) {
            mark_companions(c, id).await?;
        }
    }
    if let Some(context) = &req.context {
        write_context(c, id, &before.input, context).await?;
    }
    // The run row is locked (PostgreSQL) or the file is (SQLite), so the
    // new epoch is known before it is written, and with it the events.
    let epoch = LeaseEpoch(before.lease_epoch.0 + 1);
    let events = claim_events(req, epoch, &before, &plan);
    let (run, last_seq) = take_lease(c, before, req, &events).await?;
    let (run, at_cursor) = apply_step(c, run, cursor, &plan.step, row).await?;
    insert_events(c, id, last_seq, &events).await?;
    Ok(Claimed {
        fence: cairn_core::Fence::new(run.lease_epoch, req.owner.as_str()),
        run,
        at_cursor,
        took_over: plan.took_over,
        first_run: matches!(plan.step, ClaimStep::Insert { .. }),
    })
}

/// `RunStore::start`'s transaction: the submit, then the claim of the run it
/// created, unless it has a thread (whose earlier runs it may wait
/// behind). The claim takes the definition the submit stored.
pub(super) async fn start_in(
    c: &mut Conn<'_>,
    new: NewRun,
    def: serde_json::Value,
    mut req: ClaimRequest,
) -> Result<Started> {
    if new.thread_id.is_some() {
        let submitted = submit_in(c, new, def).await?;
        return Ok(Started {
            submitted,
            claimed: None,
        });
    }
    let submitted = insert_run_in(c, new, def).await?;
    if !submitted.created {
        return Ok(Started {
            submitted,
            claimed: None,
        });
    }
    let run = &submitted.run;
    req.read_crew = Some((
        run.crew_fingerprint.clone(),
        Arc::new(run.crew_definition.clone()),
    ));
    let claimed = claim_in(c, run.id, &req).await?;
    Ok(Started {
        submitted,
        claimed: Some(claimed),
    })
}

/// Whether the waiting step's attempt started children whose join is
/// decided (the step then runs again, the same attempt, and reads it).
async fn joined(c: &mut Conn<'_>, id: RunId, row: &StepRecord) -> Result<bool> {
    Ok(c.fetch_optional(
        query(
            "SELECT 1 AS one FROM joins WHERE run_id = :run AND step_idx = :idx \
                 AND attempt = :attempt AND status <> 'open'",
        )
        .bind("run", id)
        .bind("idx", row.idx.get())
        .bind("attempt", row.attempt.get()),
    )
    .await?
    .is_some())
}

/// The run, locked, if `req` may claim it now: its status allows it, no
/// earlier run of its thread is busy, its back-off has passed. A forced
/// crew (`req.replace_crew`) is stored on it first.
async fn claimable(c: &mut Conn<'_>, id: RunId, req: &ClaimRequest) -> Result<RunRecord> {
    let mut before = match &req.read_crew {
        Some((fingerprint, def)) => fetch_run_known(c, id, fingerprint, def).await?,
        None => fetch_run(c, id, true).await?,
    };
    match before.status {
        RunStatus::Queued => {}
        RunStatus::Running if req.takeover == Takeover::Force => {}
        RunStatus::Running if req.takeover.allowed() => {
            check_lease_takeable(c, id, &req.takeover).await?
        }
        status => {
            return Err(Error::WrongState {
                run: id,
                status,
                action: "claim it",
            })
        }
    }
    if let (RunStatus::Queued, Some(thread)) = (before.status, &before.thread_id) {
        // Runs of a thread run in submission order.
        if let Some((behind, _)) = busy_before(c, thread, id).await?.first() {
            return Err(Error::QueuedBehind {
                run: id,
                behind: *behind,
            });
        }
    }
    if let Some(def) = &req.replace_crew {
        let (fingerprint, json) = (def.fingerprint(), def.to_json());
        super::crews::remember_in(c, def, &fingerprint, &json).await?;
        c.execute(
            query(
                "UPDATE runs SET crew_name = :name, crew_version = :version, \
                 crew_fingerprint = :fingerprint, crew_def = 'null', step_count = :steps \
                 WHERE id = :id",
            )
            .bind("id", id)
            .bind("name", def.name.as_str())
            .bind("version", def.version.as_str())
            .bind("fingerprint", fingerprint.as_str())
            .bind("steps", def.step_count()),
        )
        .await?;
        before.step_count = def.step_count();
        before.crew_definition = def.clone();
    }
    if before.not_before.is_some() {
        check_due(c, id).await?;
    }
    Ok(before)
}

/// What is known of the death of run `id`'s holder, at a takeover: the
/// other runs it still holds, and whether an earlier takeover found it dead
/// with others ([`Death`]).
async fn death_of_holder(c: &mut Conn<'_>, id: RunId) -> Result<Death> {
    let row = c
        .fetch_optional(
            query(
                // Whether there is a companion (0 or 1), not how many: a
                // count walked every run a dead worker held, at each of
                // their takeovers.
                "SELECT (SELECT count(*) FROM (SELECT 1 FROM runs o \
                   WHERE o.lease_owner = r.lease_owner AND o.status = 'running' \
                   AND o.id <> r.id LIMIT 1) AS one) AS companions, \
                 s.died_shared AS died_shared, s.shared_deaths AS shared_deaths \
                 FROM runs r JOIN steps s ON s.run_id = r.id AND s.idx = r.cursor \
                 WHERE r.id = :id",
            )
            .bind("id", id),
        )
        .await?;
    let Some(row) = row else {
        return Ok(Death {
            companions: 0,
            marked_shared: false,
            shared_before: 0,
        });
    };
    Ok(Death {
        companions: u32::try_from(row.int("companions")?).unwrap_or(u32::MAX),
        marked_shared: row.int("died_shared")? != 0,
        shared_before: u32::try_from(row.int("shared_deaths")?).unwrap_or(0),
    })
}

/// Marks the in-flight steps of the other runs run `id`'s dead holder
/// still holds: each is judged a shared death at its own takeover, however
/// many of them have been taken over by then.
async fn mark_companions(c: &mut Conn<'_>, id: RunId) -> Result<()> {
    c.execute(
        query(
            // By key: the holder's runs (a few, through `runs_by_status`),
            // then each one's step at its cursor.
            // Only those not marked yet: the holder's first takeover marks
            // them all, and rewriting them at each of the others made a
            // worker's 500 runs cost 500 × 499 row writes.
            "UPDATE steps SET died_shared = 1 WHERE status = 'running' AND died_shared = 0 \
             AND (run_id, idx) IN \
             (SELECT o.id, o.cursor FROM runs o WHERE o.status = 'running' AND o.id <> :id \
               AND o.lease_owner = (SELECT lease_owner FROM runs WHERE id = :id))",
        )
        .bind("id", id),
    )
    .await?;
    Ok(())
}

/// Refuses a run whose retry back-off has not passed (database clock).
async fn check_due(c: &mut Conn<'_>, id: RunId) -> Result<()> {
    let wait_ms = c
        .fetch_optional(
            query("SELECT {not_before_ms} AS wait_ms FROM runs WHERE id = :id").bind("id", id),
        )
        .await?
        .map(|r| r.int("wait_ms"))
        .transpose()?
        .unwrap_or(0);
    if wait_ms > 0 {
        return Err(Error::NotYet {
            run: id,
            wait: Duration::from_millis(wait_ms as u64),
        });
    }
    Ok(())
}

/// Refuses to take over a run whose lease has not expired (database clock).
async fn check_lease_takeable(c: &mut Conn<'_>, id: RunId, takeover: &Takeover) -> Result<()> {
    let row = c
        .fetch_optional(
            query(
                "SELECT lease_owner, lease_expires_at, \
                 CASE WHEN lease_expires_at > {now} THEN 1 ELSE 0 END AS live \
                 FROM runs WHERE id = :id",
            )
            .bind("id", id),
        )
        .await?
        .ok_or(Error::RunNotFound(id))?;
    let owner = row.opt_text("lease_owner")?.unwrap_or_default();
    let dead = matches!(takeover, Takeover::IfHeldBy(dead) if *dead == owner);
    if row.int("live")? == 0 || dead {
        return Ok(());
    }
    Err(Error::LeaseHeld {
        run: id,
        owner,
        expires_at: row.time("lease_expires_at", id, "lease_expires_at")?,
    })
}

/// The lease taken in one statement with the events' numbers and the run
/// as the claim leaves it: that run, and the last event number reserved.
async fn take_lease(
    c: &mut Conn<'_>,
    before: RunRecord,
    req: &ClaimRequest,
    events: &[NewEvent],
) -> Result<(RunRecord, i64)> {
    let id = before.id;
    let claimed = c
        .fetch_optional(
            query(concat!(
                "UPDATE runs SET status = 'running', lease_epoch = lease_epoch + 1, \
                 lease_owner = :owner, lease_expires_at = {lease_until}, not_before = NULL, \
                 deferred_key = NULL, blocked_at = NULL, \
                 event_seq = event_seq + :events, updated_at = {now} WHERE id = :id \
                 RETURNING event_seq, ",
                run_cols_but_def!()
            ))
            .bind("id", id)
            .bind("owner", req.owner.as_str())
            .bind("lease_secs", req.lease.as_secs_f64())
            .bind("events", events.len() as i64),
        )
        .await?
        .ok_or(Error::RunNotFound(id))?;
    let last_seq = claimed.int("event_seq")?;
    let run = decode_run_with(&claimed, Some(before.crew_definition))?;
    if run.lease_epoch.0 != before.lease_epoch.0 + 1 {
        return Err(Error::Statement(format!(
            "the claim of run {id} wrote epoch {} where it read {}",
            run.lease_epoch.0, before.lease_epoch.0
        )));
    }
    Ok((run, last_seq))
}

/// What the plan does to the cursor's step (`row`, as read): the run (read
/// again if a crash loop failed it) and the step as the claim leaves it.
async fn apply_step(
    c: &mut Conn<'_>,
    run: RunRecord,
    cursor: StepIdx,
    step: &ClaimStep,
    row: Option<StepRecord>,
) -> Result<(RunRecord, Option<StepRecord>)> {
    let id = run.id;
    let at_cursor = match step {
        ClaimStep::Nothing => row,
        ClaimStep::Insert { role } => {
            let inserted = c
                .fetch_optional(
                    query(concat!(
                        "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                         VALUES (:run, :idx, :role, 'running', 1, {now}) RETURNING ",
                        step_cols!()
                    ))
                    .bind("run", id)
                    .bind("idx", cursor.get())
                    .bind("role", role.as_str()),
                )
                .await?;
            inserted.map(|r| decode_step(id, &r)).transpose()?
        }
        ClaimStep::Restart {
            attempt,
            takeovers_delta,
        } => {
            let restarted = c
                .fetch_optional(
                    query(concat!(
                        "UPDATE steps SET status = 'running', attempt = :attempt, \
                         takeovers = CASE WHEN attempt <> :attempt THEN 0 ELSE takeovers + :delta END, \
                         shared_deaths = CASE WHEN attempt <> :attempt THEN 0 ELSE shared_deaths END, \
                         finished_at = NULL, started_at = {now} WHERE run_id = :run AND idx = :idx \
                         RETURNING ",
                        step_cols!()
                    ))
                    .bind("run", id)
                    .bind("idx", cursor.get())
                    .bind("attempt", *attempt)
                    .bind("delta", *takeovers_delta),
                )
                .await?;
            restarted.map(|r| decode_step(id, &r)).transpose()?
        }
        ClaimStep::SharedDeath { attempt } => {
            let restarted = c
                .fetch_optional(
                    query(concat!(
                        "UPDATE steps SET status = 'running', attempt = :attempt, \
                         takeovers = takeovers + 1, shared_deaths = shared_deaths + 1, died_shared = 0, \
                         finished_at = NULL, started_at = {now} WHERE run_id = :run AND idx = :idx \
                         RETURNING ",
                        step_cols!()
                    ))
                    .bind("run", id)
                    .bind("idx", cursor.get())
                    .bind("attempt", *attempt),
                )
                .await?;
            restarted.map(|r| decode_step(id, &r)).transpose()?
        }
        ClaimStep::CrashLoop { error } => {
            let err = error_json(&Some(error.clone()));
            c.execute(
                query(
                    "UPDATE steps SET status = 'failed', error = :error, finished_at = {now} \
                     WHERE run_id = :run AND idx = :idx",
                )
                .bind("run", id)
                .bind("idx", cursor.get())
                .bind("error", err.clone()),
            )
            .await?;
            c.execute(
                query(
                    "UPDATE runs SET status = 'failed', error = :error, lease_owner = NULL, \
                     lease_expires_at = NULL, finished_at = {now} WHERE id = :id",
                )
                .bind("id", id)
                .bind("error", err),
            )
            .await?;
            super::ends::ended_in(c, id).await?;
            let run = fetch_run_again(c, id, run.crew_definition).await?;
            return Ok((run, fetch_step(c, id, cursor).await?));
        }
    };
    Ok((run, at_cursor))
}

/// The oldest runnable run of one branch of `claim_next`: `status` and the
/// condition that makes a run of it runnable. A run whose crew version
/// has Rust agents is runnable only for a claimer that registered that
/// version (`crate::registry`): the versions it cannot run are one
/// uncorrelated subquery (none, in a fleet without Rust agents), read once
/// per claim, not a lookup per candidate run.
fn oldest_of(status: &str, ready: &str) -> String {
    format!(
        "SELECT * FROM (SELECT id, claim_at FROM runs {{index=runs_{status}}} \
         WHERE status = '{status}' AND {ready} \
         AND NOT EXISTS (SELECT 1 FROM runs e WHERE e.thread_id = runs.thread_id \
           AND e.status IN ('queued', 'running', 'waiting', 'interrupted') \
           AND (e.created_at, e.id) < (runs.created_at, runs.id)) \
         AND (COALESCE((SELECT s.shared_deaths FROM steps s WHERE s.run_id = runs.id \
               AND s.idx = runs.cursor AND s.status = 'running'), 0) <= 1 \
           OR NOT EXISTS (SELECT 1 FROM runs h WHERE h.lease_owner = :owner \
               AND h.status = 'running' AND h.lease_expires_at > {{now}})) \
         AND crew_fingerprint NOT IN (SELECT k.fingerprint FROM crews k WHERE k.needs_code \
               AND NOT EXISTS (SELECT 1 FROM process_crews o \
               WHERE o.process = :owner AND o.fingerprint = k.fingerprint)) \
         ORDER BY claim_at, id LIMIT 1 {{skip_locked}}) AS c_{status}"
    )
}

/// `claim_next`'s choice, of both branches.
static CLAIM_NEXT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| claim_sql(&[queued_branch(), expired_branch()]));
/// The same of the queued branch only: a batch's picks once it found no
/// lease expired (`claim_batch_in`).
static CLAIM_QUEUED: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| claim_sql(&[queued_branch()]));

fn queued_branch() -> String {
    oldest_of(
        "queued",
        "NOT held AND (not_before IS NULL OR not_before <= {now})",
    )
}

fn expired_branch() -> String {
    oldest_of("running", "lease_expires_at < {now}")
}

/// `claim_next`'s choice: the first in claim order (`claim_at`: submitted
/// less its priority's head start) of the branches' runs (the first due
/// queued run, the first running run whose lease expired), unless this
/// claimer holds a step that must run alone. Each step row of a candidate
/// is read by its key in a scalar subquery (never turned into a join): a
/// generic plan made while the tables are young would otherwise scan every
/// step row per claim. The claimer's own alone steps are found from the
/// other side, through the partial index of steps with two shared deaths
/// (a handful at most), each one's run read by its key in a scalar
/// subquery, not by reading the runs it holds: a join there, which
/// PostgreSQL may reorder (`CROSS JOIN` binds only SQLite), read every
/// running run per pick, 19 ms with 9,600 running.
fn claim_sql(branches: &[String]) -> String {
    format!(
        "SELECT id FROM ({}) AS runnable \
         WHERE NOT EXISTS (SELECT 1 FROM steps s {{index=steps_shared_deaths}} \
               WHERE s.shared_deaths > 1 AND s.status = 'running' \
               AND (SELECT h.lease_owner FROM runs h WHERE h.id = s.run_id \
                 AND h.cursor = s.idx AND h.status = 'running' \
                 AND h.lease_expires_at > {{now}}) = :owner) \
         ORDER BY claim_at, id LIMIT 1",
        branches.join(" UNION ALL ")
    )
}

/// Whether any lease has expired: a read of the running runs, which
/// [`ExpiryMemo`] spaces out.
const ANY_EXPIRED: &str =
    "SELECT 1 AS expired FROM runs WHERE status = 'running' AND lease_expires_at < {now} LIMIT 1";

/// How long a look that found no lease expired stands for a store's later
/// claims. Finding an expired lease reads the running runs (an index of
/// their claim order, not of their leases, so that a heartbeat's update of
/// the lease stays off every index): with 10,000 running on PostgreSQL,
/// looking at every claim batch took a third of the claimer's time. A
/// lease that expires is taken over at most this much later.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// When a store's claims last found no lease expired, so that the claims
/// within [`LOOK_EVERY`] of it read only queued runs.
#[derive(Debug, Default)]
pub struct ExpiryMemo(std::sync::Mutex<Option<std::time::Instant>>);

impl ExpiryMemo {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<std::time::Instant>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a claim now must look for expired leases.
    pub(super) fn must_look(&self) -> bool {
        self.slot().is_none_or(|at| at.elapsed() >= LOOK_EVERY)
    }

    /// What a claim's look found.
    pub(super) fn found(&self, expired: bool) {
        *self.slot() = (!expired).then(std::time::Instant::now);
    }
}

/// A claim's choice of statement: both branches when it must look and some
/// lease has expired, the queued branch alone otherwise. Returns whether
/// it looked.
///
/// On PostgreSQL the claim's transaction first turns sequential and bitmap
/// scans off for itself ([`PLAN_BY_INDEX`]): a connection caches each
/// statement and, after five runs, may keep one generic plan, made with the
/// statistics of that moment. Made while the tables were young, the
/// claim's was a sequential scan of the runs with an anti-join reading them
/// all again per run: 80 s for one claim with 20,000 queued (measured with
/// `PREPARE`), until autovacuum's analyze replaced it, up to a minute
/// later. With sequential scans off, the statistics of a young table
/// (about 20 queued rows) still chose a bitmap scan of every queued run,
/// each one's subqueries evaluated, then a sort for the first: 12.6 ms a
/// pick with 5,000 queued (10,341 buffers), so a burst of 10,000 took 41 s
/// to claim. Without either, the plan walks `runs_queued` in claim order
/// and stops at the first runnable run: 0.55 ms there (201 buffers).
/// Planning each claim anew instead cost 2.3 ms a claim.
async fn choose(c: &mut Conn<'_>, look: bool) -> Result<(&'static str, Option<bool>)> {
    if c.dialect() == crate::sql::Dialect::Postgres {
        c.execute(query(PLAN_BY_INDEX)).await?;
    }
    if !look {
        return Ok((&CLAIM_QUEUED, None));
    }
    let expired = c.fetch_optional(query(ANY_EXPIRED)).await?.is_some();
    let pick: &'static str = if expired { &CLAIM_NEXT } else { &CLAIM_QUEUED };
    Ok((pick, Some(expired)))
}

/// A claim transaction's planner settings on PostgreSQL (one round trip):
/// indexes walked in order ([`choose`]), and no JIT compilation, which a
/// statement whose only plan is a disabled one (costed at 10^10) would
/// otherwise trigger, at hundreds of milliseconds.
const PLAN_BY_INDEX: &str = "SELECT set_config('enable_seqscan', 'off', true), \
     set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)";

/// A request as `claim_next` makes it: a claimer takes expired leases over.
pub(super) fn as_claimer(req: &ClaimRequest) -> ClaimRequest {
    ClaimRequest {
        takeover: match &req.takeover {
            Takeover::Never => Takeover::IfExpired,
            other => other.clone(),
        },
        ..req.clone()
    }
}

/// `LeaseStore::claim_batch`: up to `max` claims in one transaction; a batch
/// that meets an error falls back to one `claim_next` (which sets a
/// corrupt run aside).
pub(super) async fn claim_batch<H: ScriptHost>(
    host: &H,
    req: &ClaimRequest,
    max: usize,
) -> Result<Vec<Claimed>> {
    if max <= 1 {
        return Ok(host.claim_next(req).await?.into_iter().collect());
    }
    failpoint::store("before", "claim_next");
    claim_ok(req)?;
    let batch_req = as_claimer(req);
    let look = host.expiry().must_look();
    let batch = host
        .tx(
            TxKind::Write,
            script!(|c| claim_batch_in(c, &batch_req, max, look).await),
        )
        .await;
    if let Ok((_, Some(expired))) = &batch {
        host.expiry().found(*expired);
    }
    match batch.map(|(claimed, _)| claimed) {
        Ok(claimed) if !claimed.is_empty() => {
            failpoint::store("after", "claim_next");
            Ok(claimed)
        }
        Ok(_) => Ok(vec![]),
        Err(_) => Ok(host.claim_next(req).await?.into_iter().collect()),
    }
}

/// `LeaseStore::claim_batch`'s transaction: up to `max` claims in a row.
/// Each pick sees the claims before it (they are this transaction's
/// writes), so a run is never taken twice and a step that must run alone
/// stops the batch after it. Expired leases are looked for once, at the
/// start, if `look` ([`ExpiryMemo`]); the answer says what the look found.
pub(super) async fn claim_batch_in(
    c: &mut Conn<'_>,
    req: &ClaimRequest,
    max: usize,
    look: bool,
) -> Result<(Vec<Claimed>, Option<bool>)> {
    let (pick, looked) = choose(c, look).await?;
    let mut claimed = Vec::new();
    while claimed.len() < max {
        match pick_in(c, req, pick).await? {
            Some(one) => claimed.push(one),
            None => break,
        }
    }
    Ok((claimed, looked))
}

/// `LeaseStore::claim_next`'s transaction: the oldest runnable run, claimed
/// (expired leases looked for if `look`). A corruption names the run it is
/// about (the one picked unless it names another), so the caller can set
/// it aside after this transaction rolled back.
pub(super) async fn claim_next_in(
    c: &mut Conn<'_>,
    req: &ClaimRequest,
    look: bool,
) -> Result<(Option<Claimed>, Option<bool>)> {
    let (pick, looked) = choose(c, look).await?;
    Ok((pick_in(c, req, pick).await?, looked))
}

/// The run `pick` (a [`claim_sql`]) chooses, claimed.
async fn pick_in(
    c: &mut Conn<'_>,
    req: &ClaimRequest,
    pick: &'static str,
) -> Result<Option<Claimed>> {
    // The oldest runnable run: queued and due, or running under an expired
    // lease (its holder died or hung: a takeover). PostgreSQL skips rows
    // other claimers hold; SQLite's write lock admits one claimer at a time.
    //
    // A step whose holder died with others in flight twice (two shared
    // deaths) runs alone: it goes only to a claimer holding no other run,
    // and a claimer holding one gets nothing else until it is done. A death
    // there is evidence against that step (`crash_loop`). After one shared
    // death the runs are taken over side by side: a worker killed once with
    // 500 runs in flight (a deploy, the OOM killer) must not have them rerun
    // one at a time.
    //
    // Two branches, each on a partial index of its own status (migration
    // 0011), so a claim never walks the rows (and the dead versions
    // heartbeats leave) of runs that cannot be claimed: with thousands
    // running, one query over every run in creation order took 100 ms.
    let picked = c
        .fetch_optional(query(pick).bind("owner", req.owner.as_str()))
        .await?;
    let Some(row) = picked else {
        return Ok(None);
    };
    let nil = RunId::from_uuid(uuid::Uuid::nil());
    let id = RunId::from_uuid(
        row.opt_uuid("id", nil, "a runnable run's id")?
            .ok_or_else(|| Corruption::new(nil, "a runnable run has no id"))?,
    );
    // The pick found the lease expired on the row it locked (PostgreSQL
    // rechecks a locked row's conditions; SQLite's writer is alone), so
    // the claim need not read it again: one statement less per takeover.
    let picked = ClaimRequest {
        takeover: Takeover::Force,
        ..req.clone()
    };
    match claim_in(c, id, &picked).await {
        Ok(claimed) => Ok(Some(claimed)),
        Err(Error::Corruption(corrupt)) if corrupt.run == nil => {
            Err(Corruption::new(id, corrupt.detail).into())
        }
        Err(e) => Err(e),
    }
}
