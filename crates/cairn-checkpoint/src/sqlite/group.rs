//! Group commit: the step commits of concurrent runs in one process share
//! one transaction and one flush to disk. A single run commits exactly as
//! before (a batch of one is the plain transaction); with many runs in
//! flight, the commits that queued while one flush was under way go out
//! together in the next.
//!
//! Leader and followers, no task of its own: each caller queues its commit
//! and takes the writer lock; if a leader before it already committed it,
//! it has its answer; otherwise it leads: it takes what is queued (its own
//! commit among it), writes each commit inside a savepoint of one
//! transaction, commits once, and answers every caller. A commit that is
//! refused (stale epoch, cancel, a step not running) is rolled back to its
//! savepoint alone, so it never fails the others; each caller learns its
//! own outcome only after the flush.
//!
//! Cancellation: a leader dropped mid-batch drops its transaction (rolled
//! back) and the answers it owed; their callers get a lost-connection
//! error, which the storage script's retry turns into a check of whether
//! the commit landed (`script::retried`), as for a lost acknowledgement.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot::{self, error::TryRecvError};

use crate::error::db_message;
use crate::sql::query;
use crate::{DbFault, Error, Result, StepCommit};

use super::SqliteStore;

/// The most step commits one transaction carries.
const MAX_BATCH: usize = 64;

/// The queue of commits waiting for a leader, and the writer lock.
#[derive(Default)]
pub(crate) struct Group {
    queue: Mutex<Vec<Pending>>,
    writer: tokio::sync::Mutex<()>,
    stats: Mutex<GroupStats>,
}

/// What the group commit did so far (for the benchmark and the tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Transactions written (each one flush).
    pub batches: u64,
    /// Step commits they carried, refused ones included.
    pub commits: u64,
    /// The most commits one transaction carried.
    pub largest: usize,
}

struct Pending {
    commit: StepCommit,
    done: oneshot::Sender<Result<()>>,
}

fn lock(queue: &Mutex<Vec<Pending>>) -> MutexGuard<'_, Vec<Pending>> {
    queue.lock().unwrap_or_else(|p| p.into_inner())
}

impl SqliteStore {
    pub(crate) async fn group_commit(&self, c: &StepCommit) -> Result<()> {
        let (done, mut answer) = oneshot::channel();
        lock(&self.group.queue).push(Pending {
            commit: c.clone(),
            done,
        });
        let _writer = self.group.writer.lock().await;
        loop {
            match answer.try_recv() {
                Ok(result) => return result,
                Err(TryRecvError::Closed) => return Err(self.abandoned(c)),
                Err(TryRecvError::Empty) => {}
            }
            // Ours is queued and unanswered: lead a batch (again, if more
            // than a batch was ahead of ours).
            let batch: Vec<Pending> = {
                let mut queue = lock(&self.group.queue);
                let n = queue.len().min(MAX_BATCH);
                queue.drain(..n).collect()
            };
            if batch.is_empty() {
                return Err(self.abandoned(c));
            }
            self.commit_batch(batch).await;
        }
    }

    /// What the group commit did so far.
    pub fn group_stats(&self) -> GroupStats {
        *self.group.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes a batch and answers each of its callers.
    async fn commit_batch(&self, mut batch: Vec<Pending>) {
        {
            let mut stats = self.group.stats.lock().unwrap_or_else(|p| p.into_inner());
            stats.batches += 1;
            stats.commits += batch.len() as u64;
            stats.largest = stats.largest.max(batch.len());
        }
        if batch.len() == 1 {
            if let Some(one) = batch.pop() {
                let result = self.commit_one(&one.commit).await;
                let _ = one.done.send(result);
            }
            return;
        }
        let mut tx = match self.db.write().await {
            Ok(tx) => tx,
            Err(e) => return self.fail_all(batch, e),
        };
        // Per commit: `None` applied, `Some(outcome)` rolled back to its
        // savepoint (what its statements returned).
        let written: Result<Vec<Option<Result<u64>>>> = async {
            let mut refused = Vec::with_capacity(batch.len());
            for p in &batch {
                let mut c = tx.conn();
                let (statements, expected) = match Self::commit_query(&p.commit) {
                    Ok(q) => q,
                    Err(e) => {
                        refused.push(Some(Err(e)));
                        continue;
                    }
                };
                c.execute(query("SAVEPOINT step_commit")).await?;
                match c.execute(statements).await {
                    Ok(rows) if rows == expected => refused.push(None),
                    outcome => {
                        refused.push(Some(outcome));
                        c.execute(query("ROLLBACK TO step_commit")).await?;
                    }
                }
                c.execute(query("RELEASE step_commit")).await?;
            }
            Ok(refused)
        }
        .await;
        let refused = match written {
            Ok(refused) => refused,
            Err(e) => return self.fail_all(batch, e),
        };
        if let Err(e) = tx.commit().await {
            return self.fail_all(batch, e);
        }
        for (p, refused) in batch.into_iter().zip(refused) {
            let result = match refused {
                None => Ok(()),
                Some(outcome) => Err(self.refusal(&p.commit, outcome).await),
            };
            let _ = p.done.send(result);
        }
    }

    /// Nothing of the batch was committed: each caller gets the error.
    fn fail_all(&self, batch: Vec<Pending>, e: Error) {
        let (fault, message) = match &e {
            Error::Database(db) => (DbFault::of(db), db_message(db)),
            other => (DbFault::Other, other.to_string()),
        };
        for p in batch {
            let _ = p.done.send(Err(Error::Db {
                fault,
                target: self.target.clone(),
                run: Some(p.commit.run_id),
                message: message.clone(),
            }));
        }
    }

    fn abandoned(&self, c: &StepCommit) -> Error {
        Error::Db {
            fault: DbFault::Connection,
            target: self.target.clone(),
            run: Some(c.run_id),
            message: "the group commit carrying this step stopped before it answered".into(),
        }
    }
}
