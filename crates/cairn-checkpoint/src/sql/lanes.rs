//! PostgreSQL connections kept out of the pool for single statements (a
//! step commit outside a transaction, a single read). sqlx pings every
//! connection it takes back into its pool (a `Sync` round trip, in a task
//! of its own), so a statement through the pool costs the server a second
//! wake-up, and the next statement finds that connection still busy and
//! takes another. A lane is a connection detached from the pool, handed to
//! one statement at a time and kept between them: no ping between uses, and
//! one pinged only after sitting idle for [`PING_AFTER_IDLE`], as the pool
//! does on acquire. A lane is opened only while fewer than its count are
//! open; the pool is opened that many connections smaller, so the
//! process's cap holds. A statement that fails (or is dropped) closes its
//! lane: only a connection that answered whole is used again. After a
//! failover to another host (`postgres/hosts.rs`) the lanes opened before
//! it are retired ([`Lanes::retire`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnection, PgPool};
use sqlx::Connection;

use crate::Result;

/// A connection idle for this long is pinged before it is used again.
pub(crate) const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The lanes of one store.
#[derive(Debug, Default)]
pub struct Lanes {
    idle: Mutex<Vec<(PgConnection, Instant)>>,
    open: AtomicUsize,
    max: usize,
    /// Bumped by [`Lanes::retire`]: a lane of an older one is not kept.
    generation: AtomicU64,
}

/// How many lanes a store with `cap` connections keeps: two, if it can
/// spare them and still leave its pool two.
pub(crate) fn lanes_for(cap: u32) -> u32 {
    if cap >= 4 {
        2
    } else {
        0
    }
}

impl Lanes {
    pub(crate) fn new(max: u32) -> Arc<Lanes> {
        Arc::new(Lanes {
            max: max as usize,
            ..Lanes::default()
        })
    }

    /// A lane for one statement: an idle one (pinged first if it sat idle
    /// long), or a new one taken from `pool` while fewer than the count are
    /// open; `None` when every lane is busy (use the pool).
    pub(crate) async fn take(self: &Arc<Self>, pool: &PgPool) -> Result<Option<Lane>> {
        while let Some((mut conn, since)) = self.pop() {
            if since.elapsed() < PING_AFTER_IDLE || conn.ping().await.is_ok() {
                return Ok(Some(self.lane(conn)));
            }
            // Dead: closed by the drop; its place is free again.
            self.open.fetch_sub(1, Ordering::AcqRel);
        }
        if !self.reserve() {
            return Ok(None);
        }
        match pool.acquire().await {
            Ok(conn) => Ok(Some(self.lane(conn.detach()))),
            Err(e) => {
                self.open.fetch_sub(1, Ordering::AcqRel);
                Err(e.into())
            }
        }
    }

    /// Takes `conn`, opened outside the pool, as an idle lane; gives it
    /// back when no lane is free (the caller closes it). Its cached
    /// statements are forgotten first: the migration's were deallocated.
    pub(crate) async fn adopt(&self, mut conn: PgConnection) -> Option<PgConnection> {
        if !self.reserve() {
            return Some(conn);
        }
        if conn.clear_cached_statements().await.is_err() {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Some(conn);
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.push((conn, Instant::now()));
        None
    }

    /// A place for one more open lane, if fewer than the count are open.
    fn reserve(&self) -> bool {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    /// The pool now connects to another host: the idle lanes close, and
    /// those lent out close when given back, so every lane opened from now
    /// on comes from the pool (which retires its own old connections).
    pub(crate) fn retire(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|p| p.into_inner()));
        self.open.fetch_sub(idle.len(), Ordering::AcqRel);
    }

    fn pop(&self) -> Option<(PgConnection, Instant)> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn lane(self: &Arc<Self>, conn: PgConnection) -> Lane {
        Lane {
            conn: Some(conn),
            lanes: self.clone(),
            generation: self.generation.load(Ordering::Acquire),
        }
    }
}

/// One lane, lent to one statement.
#[derive(Debug)]
pub struct Lane {
    conn: Option<PgConnection>,
    lanes: Arc<Lanes>,
    generation: u64,
}

impl Lane {
    pub(crate) fn conn(&mut self) -> Option<&mut PgConnection> {
        self.conn.as_mut()
    }

    /// The statement answered whole: the connection is kept for the next
    /// (unless the lanes were retired since it was lent; then it closes).
    pub(crate) fn keep(mut self) {
        // Checked under the lock `retire` takes after bumping the
        // generation, so a lane is either taken by it or never kept.
        let mut idle = self.lanes.idle.lock().unwrap_or_else(|p| p.into_inner());
        if self.generation != self.lanes.generation.load(Ordering::Acquire) {
            return;
        }
        if let Some(conn) = self.conn.take() {
            idle.push((conn, Instant::now()));
        }
    }
}

impl Drop for Lane {
    /// Not kept: the connection closes (a statement that failed or was
    /// dropped may have left it mid-answer), and its place is free.
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.lanes.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
