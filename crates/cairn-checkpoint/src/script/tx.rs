//! Transactions on the pool ([`pool_tx`]), and the rule every script
//! keeps inside one: it pends only on its connection's statements.

use std::task::Poll;

use super::{BoxFuture, ScriptFn, TxKind};
use crate::sql::{statement_pended, Pool};
use crate::{Error, Result};

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
        TxKind::Write | TxKind::HotWrite | TxKind::Single => db.write().await?,
        TxKind::Read | TxKind::HotRead => db.read().await?,
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
