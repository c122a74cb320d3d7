//! Transactions on the pool ([`pool_tx`]) or on a PostgreSQL lane
//! (`lane_tx`), and the rule every script keeps inside one: it pends only
//! on its connection's statements.

use std::task::Poll;

use sqlx::Executor;

use crate::sql::{statement_pended, Conn, Lane, Pool, Prepare};
use crate::{Error, Result};

use super::{BoxFuture, ScriptFn, TxKind};

/// [`ScriptHost::tx`] on the pool: every kind, the hot ones as their plain
/// counterparts.
pub(crate) async fn pool_tx<T>(db: &Pool, kind: TxKind, f: ScriptFn<T>) -> Result<T> {
    let mut tx = match kind {
        TxKind::Single if !db.needs_transactions() => {
            let mut held = db.acquire().await?;
            let done = only_statements(f(&mut held.conn()?)).await;
            // A refusal the script decided (a run not found) came after
            // whole answers; a database's or the script's own failure may
            // have left the connection mid-answer.
            if !matches!(
                done,
                Err(Error::Database(_) | Error::ScriptWaited | Error::Statement(_))
            ) {
                held.keep();
            }
            return done;
        }
        _ => match db.lane().await? {
            Some(lane) => return lane_tx(lane, kind, f).await,
            None => match kind {
                TxKind::Write | TxKind::HotWrite | TxKind::Single => db.write().await?,
                TxKind::Read | TxKind::HotRead => db.read().await?,
            },
        },
    };
    match only_statements(f(&mut tx.conn())).await {
        Ok(out) => {
            tx.commit().await?;
            Ok(out)
        }
        Err(e) => {
            // The script's error is the answer, whatever the rollback says.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// A transaction on a PostgreSQL lane, so that a process's statements go
/// to the connections it already warmed (a resume's read, claim and commit
/// on one server process instead of three, two of them opened for it). The
/// lane is kept only if the transaction ended whole; otherwise it closes,
/// and the server rolls back whatever was open.
async fn lane_tx<T>(mut lane: Lane, kind: TxKind, f: ScriptFn<T>) -> Result<T> {
    let begin = match kind {
        TxKind::Read | TxKind::HotRead => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        TxKind::Write | TxKind::HotWrite | TxKind::Single => "BEGIN",
    };
    let lost = || Error::Statement("a lane was used after it was given back".into());
    lane.conn().ok_or_else(lost)?.execute(begin).await?;
    let done = {
        let conn = lane.conn().ok_or_else(lost)?;
        only_statements(f(&mut Conn::Postgres(conn, Prepare::Cached))).await
    };
    let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = lane.conn().ok_or_else(lost)?.execute(end).await;
    match (done, ended) {
        (Ok(out), Ok(_)) => {
            lane.keep();
            Ok(out)
        }
        (Ok(_), Err(e)) => Err(e.into()),
        // The script's error is the answer, whatever the rollback says.
        (Err(e), ended) => {
            let whole = !matches!(
                e,
                Error::Database(_) | Error::ScriptWaited | Error::Statement(_)
            );
            if whole && ended.is_ok() {
                lane.keep();
            }
            Err(e)
        }
    }
}

/// Polls a script, refusing (`Error::ScriptWaited`) as soon as it pends on
/// anything but one of its connection's statements: the writer-thread rule
/// (module doc), enforced on every backend so a script that breaks it fails
/// on PostgreSQL as it would on SQLite's writer thread.
pub(crate) async fn only_statements<T>(mut script: BoxFuture<'_, Result<T>>) -> Result<T> {
    std::future::poll_fn(|cx| {
        statement_pended();
        match script.as_mut().poll(cx) {
            Poll::Pending if !statement_pended() => Poll::Ready(Err(Error::ScriptWaited)),
            polled => polled,
        }
    })
    .await
}
