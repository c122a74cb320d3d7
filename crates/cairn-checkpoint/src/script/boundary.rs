//! The write boundary, in one place: every write operation of the script
//! goes through [`bounded`] (its crash points, `failpoint.rs`, and its
//! errors placed); a step commit, a journal item, an answer and an action
//! through [`retried`], which tries a write whose connection failed again
//! and first asks whether the earlier try landed (`*_landed` below). A
//! read's errors are placed by [`placed`].

use std::future::Future;
use std::time::{Duration, Instant};

use cairn_core::event::payload::RunCancelled;
use cairn_core::{Actor, EventData, EventKind, RunId, RunRecord};

use crate::raw::decode_event;
use crate::sql::query;
use crate::{failpoint, Action, Error, Result, StepCommit};

use super::rows::{fetch_run, fetch_step, lease_owner_in};
use super::{ScriptHost, TxKind};

const RETRY_FIRST_PAUSE: Duration = Duration::from_millis(50);
const RETRY_MAX_PAUSE: Duration = Duration::from_secs(1);

/// A read (or a write that is no write boundary): its database errors
/// placed, naming the database and the run.
pub(super) async fn placed<T>(
    target: &str,
    run: Option<RunId>,
    read: impl Future<Output = Result<T>>,
) -> Result<T> {
    read.await.map_err(|e| e.placed(target, run))
}

/// One write operation: its crash points before and after (nothing without
/// the `failpoints` feature), its errors placed.
pub(super) async fn bounded<T>(
    op: &'static str,
    target: &str,
    run: Option<RunId>,
    write: impl Future<Output = Result<T>>,
) -> Result<T> {
    failpoint::store("before", op);
    let done = write.await.map_err(|e| e.placed(target, run))?;
    failpoint::store("after", op);
    if failpoint::lose_ack(op) {
        let lost = std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "failpoint lose_ack: the commit landed, its acknowledgement was lost",
        );
        return Err(Error::Database(sqlx::Error::Io(lost)).placed(target, run));
    }
    Ok(done)
}

/// A commit that survives a lost acknowledgement: when `write` fails with
/// a lost connection, it is tried again with back-off for up to the store's
/// window ([`ScriptHost::retry_for`], `OpenOptions::retry_for`: half the
/// lease), and before each new try `landed` reads whether the
/// earlier one committed after all (the answer was lost, not the write):
/// then its result is the commit's. A write that did not land is sent
/// again and fenced like the first, so a real loss of the lease is still
/// refused.
pub(super) async fn retried<H: ScriptHost + ?Sized, T, W, L>(
    op: &'static str,
    host: &H,
    run: Option<RunId>,
    mut write: impl FnMut() -> W,
    mut landed: impl FnMut() -> L,
) -> Result<T>
where
    W: Future<Output = Result<T>>,
    L: Future<Output = Result<Option<T>>>,
{
    let target = host.target();
    let give_up = Instant::now() + host.retry_for();
    let mut pause = RETRY_FIRST_PAUSE;
    let mut again = false;
    loop {
        let tried = async {
            if again {
                if let Some(done) = landed().await.map_err(|e| e.placed(target, run))? {
                    tracing::info!(op, run = ?run, "a write whose answer was lost had landed");
                    return Ok(done);
                }
            }
            bounded(op, target, run, write()).await
        }
        .await;
        match tried {
            Err(e @ Error::Db { fault, .. })
                if fault.may_pass() && Instant::now() + pause < give_up =>
            {
                tracing::warn!(op, error = %e, "lost the connection during a write; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX_PAUSE);
                again = true;
            }
            done => return done,
        }
    }
}

/// Whether a step commit landed: the run is still at the commit's epoch
/// and the step's row holds the commit's status, attempt and output.
/// Before the commit the row was `running` (the claim made it so), and
/// only the epoch's holder commits it. If the epoch moved, another process
/// claimed the run: the commit is sent again and refused as stale, landed
/// or not, and the executor stops as after any loss of its lease.
pub(super) async fn commit_landed<H: ScriptHost + ?Sized>(
    host: &H,
    commit: &StepCommit,
) -> Result<Option<()>> {
    let (id, idx) = (commit.run_id, commit.idx);
    let (run, owner, row) = host
        .tx(
            TxKind::Read,
            script!(|c| Ok((
                fetch_run(c, id, false).await?,
                lease_owner_in(c, id).await?,
                fetch_step(c, id, idx).await?,
            ))),
        )
        .await?;
    let rows = commit.rows();
    // The owner is `None` once the commit ended the run's lease.
    let ours = run.lease_epoch == commit.fence.epoch
        && owner.is_none_or(|o| *o == *commit.fence.owner)
        && row.is_some_and(|r| {
            r.status == rows.status
                && r.attempt == commit.attempt
                && r.output.as_ref() == rows.output
        });
    Ok(ours.then_some(()))
}

/// Whether an operator action landed: the run's newest event is this
/// action's, by this actor for this reason.
pub(super) async fn action_landed<H: ScriptHost + ?Sized>(
    host: &H,
    id: RunId,
    action: Action,
    actor: &Actor,
) -> Result<Option<RunRecord>> {
    let (run, newest) = host
        .tx(
            TxKind::Single,
            script!(|c| let run = fetch_run(c, id, false).await?;
                    let newest = c
                        .fetch_optional(
                            query(
                                "SELECT seq, at, kind, data FROM events WHERE run_id = :run \
                                 ORDER BY seq DESC LIMIT 1",
                            )
                            .bind("run", id),
                        )
                        .await?;
                    newest
                        .map(|row| decode_event(id, &row))
                        .transpose()
                        .map(|event| (run, event))),
        )
        .await?;
    let Some(event) = newest else { return Ok(None) };
    let kinds: &[EventKind] = match action {
        Action::Retry | Action::RetryRerunningChildren => &[EventKind::RunRetried],
        Action::Continue => &[EventKind::RunContinued],
        Action::Cancel => &[EventKind::RunCancelRequested, EventKind::RunCancelled],
    };
    let by = match event.payload() {
        Ok(EventData::RunRetried(a) | EventData::RunContinued(a))
        | Ok(EventData::RunCancelRequested(a))
        | Ok(EventData::RunCancelled(RunCancelled::ByOperator(a))) => Some(a.actor),
        _ => None,
    };
    let ours = kinds.contains(&event.kind) && by.as_ref() == Some(actor);
    Ok(ours.then_some(run))
}
