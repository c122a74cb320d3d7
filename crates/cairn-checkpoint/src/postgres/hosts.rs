//! Several servers in one PostgreSQL URL (libpq's
//! `postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write`):
//! which of them a store uses, and following a failover without a restart.
//! At connect the hosts are tried in the URL's order and the first that
//! fits `target_session_attrs` is used ([`first_fit`]), every refusal
//! named. After a fault that may pass (a lost connection, a server
//! read-only now), [`Failover::reprobe`] looks again (one probe at a time,
//! at most once per [`PROBE_EVERY`]) and, if another host fits now, points
//! the pool at it (`Pool::set_connect_options`) and retires what was opened
//! before the switch: pooled connections (the pool's `before_acquire` asks
//! [`Failover::retired`]), idle lanes (`Lanes::retire`) and the `LISTEN`
//! connection (`PgStore::wait_for_work` compares [`Failover::switches`]).
//!
//! A URL of one host has no `Failover` and behaves as before. A probe opens
//! connections of its own, never the pool's, and never switches to a host
//! that does not fit.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::Connection;

use crate::sql::Lanes;

/// The least time between two probes of a store's hosts.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(250);

/// libpq's `target_session_attrs`: which server of a URL's hosts a store
/// uses. Only the kinds that can take writes; `read-only`, `standby` and
/// `prefer-standby` are refused, since Cairn writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionAttrs {
    /// The first host that accepts the connection (libpq's default).
    #[default]
    Any,
    /// A host whose sessions may write: `SHOW transaction_read_only` is
    /// `off` (not a standby, not made read-only).
    ReadWrite,
    /// A host that is not in recovery: `SELECT pg_is_in_recovery()` is
    /// false (not a standby).
    Primary,
}

impl SessionAttrs {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionAttrs::Any => "any",
            SessionAttrs::ReadWrite => "read-write",
            SessionAttrs::Primary => "primary",
        }
    }
}

impl FromStr for SessionAttrs {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "any" => Ok(SessionAttrs::Any),
            "read-write" => Ok(SessionAttrs::ReadWrite),
            "primary" => Ok(SessionAttrs::Primary),
            "read-only" | "standby" | "prefer-standby" => Err(format!(
                "target_session_attrs `{s}` asks for a server that may refuse writes, and \
                 Cairn writes: use `read-write`, `primary` or `any`"
            )),
            other => Err(format!(
                "target_session_attrs `{other}` is not `read-write`, `primary` or `any`"
            )),
        }
    }
}

/// The servers a PostgreSQL URL names, in its order (each with the URL's
/// user, password, database and parameters), and which kind to use.
#[derive(Debug, Clone)]
pub struct PgHosts {
    pub hosts: Vec<PgConnectOptions>,
    pub attrs: SessionAttrs,
}

impl PgHosts {
    /// One server, as before multi-host URLs: used whatever it is.
    pub fn one(pg: PgConnectOptions) -> PgHosts {
        PgHosts {
            hosts: vec![pg],
            attrs: SessionAttrs::Any,
        }
    }
}

/// `HOST:PORT` of a server, for messages (an IPv6 address in brackets).
pub(crate) fn name(pg: &PgConnectOptions) -> String {
    match pg.get_host() {
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]:{}", pg.get_port()),
        h => format!("{h}:{}", pg.get_port()),
    }
}

/// The first of `hosts`, tried in order from `from` (around the list),
/// that accepts a connection within `timeout` and fits `attrs`: its index
/// and that connection. Otherwise each host's name and why it was refused.
pub(crate) async fn first_fit(
    hosts: &[PgConnectOptions],
    attrs: SessionAttrs,
    timeout: Duration,
    from: usize,
) -> Result<(usize, PgConnection), Vec<(String, String)>> {
    let mut refused = vec![];
    for i in (0..hosts.len()).map(|k| (from + k) % hosts.len()) {
        match try_host(&hosts[i], attrs, timeout).await {
            Ok(conn) => return Ok((i, conn)),
            Err(why) => refused.push((name(&hosts[i]), why)),
        }
    }
    Err(refused)
}

/// A connection to `pg` if it answers within `timeout` and fits `attrs`.
async fn try_host(
    pg: &PgConnectOptions,
    attrs: SessionAttrs,
    timeout: Duration,
) -> Result<PgConnection, String> {
    let late = || format!("no answer within {} ms", timeout.as_millis());
    let mut conn = match tokio::time::timeout(timeout, PgConnection::connect_with(pg)).await {
        Err(_) => return Err(late()),
        Ok(Err(e)) => return Err(e.to_string()),
        Ok(Ok(conn)) => conn,
    };
    let fits = match tokio::time::timeout(timeout, fits(&mut conn, attrs)).await {
        Err(_) => Err(late()),
        Ok(fits) => fits,
    };
    match fits {
        Ok(()) => Ok(conn),
        Err(why) => {
            let _ = conn.close().await;
            Err(why)
        }
    }
}

/// Whether the server behind `conn` is of the kind `attrs` asks for, as
/// libpq checks it.
async fn fits(conn: &mut PgConnection, attrs: SessionAttrs) -> Result<(), String> {
    let failed = |e: sqlx::Error| format!("cannot tell whether it takes writes: {e}");
    match attrs {
        SessionAttrs::Any => Ok(()),
        SessionAttrs::ReadWrite => {
            let read_only: String = sqlx::query_scalar("SHOW transaction_read_only")
                .persistent(false)
                .fetch_one(&mut *conn)
                .await
                .map_err(failed)?;
            match read_only.as_str() {
                "on" => Err("read-only (transaction_read_only is on), and \
                             target_session_attrs=read-write"
                    .into()),
                _ => Ok(()),
            }
        }
        SessionAttrs::Primary => {
            let recovering: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
                .persistent(false)
                .fetch_one(&mut *conn)
                .await
                .map_err(failed)?;
            match recovering {
                true => Err("a standby (in recovery), and target_session_attrs=primary".into()),
                false => Ok(()),
            }
        }
    }
}

/// What a store on several hosts needs to follow a failover.
#[derive(Debug)]
pub(crate) struct Failover {
    /// The hosts as the pool connects to them (the store's session
    /// settings applied), in the URL's order.
    hosts: Vec<PgConnectOptions>,
    attrs: SessionAttrs,
    timeout: Duration,
    /// The host the pool connects to.
    current: AtomicUsize,
    /// The pool and its lanes, once they exist.
    pool: OnceLock<(PgPool, Arc<Lanes>)>,
    /// When the pool was last pointed at another host, if ever.
    switched: Mutex<Option<Instant>>,
    /// How many times it was.
    switches: AtomicU64,
    /// When the last probe ended; locked during one, so one at a time.
    probed: tokio::sync::Mutex<Option<Instant>>,
    /// A background task probes until a host fits ([`Failover::keep_probing`]).
    watching: std::sync::atomic::AtomicBool,
}

impl Failover {
    pub(crate) fn new(
        hosts: Vec<PgConnectOptions>,
        attrs: SessionAttrs,
        timeout: Duration,
        current: usize,
    ) -> Failover {
        Failover {
            hosts,
            attrs,
            timeout,
            current: AtomicUsize::new(current),
            pool: OnceLock::new(),
            switched: Mutex::new(None),
            switches: AtomicU64::new(0),
            probed: tokio::sync::Mutex::new(None),
            watching: Default::default(),
        }
    }

    /// The pool (and lanes) a switch repoints, once.
    pub(crate) fn attach(&self, pool: PgPool, lanes: Arc<Lanes>) {
        let _ = self.pool.set((pool, lanes));
    }

    /// How many times the pool was pointed at another host.
    pub(crate) fn switches(&self) -> u64 {
        self.switches.load(Ordering::Acquire)
    }

    /// Whether a pooled connection opened `age` ago was opened before the
    /// last switch (so, maybe, to the host left behind).
    pub(crate) fn retired(&self, age: Duration) -> bool {
        let switched = *self.switched.lock().unwrap_or_else(|p| p.into_inner());
        switched.is_some_and(|at| Instant::now().checked_sub(age).is_some_and(|t| t < at))
    }

    /// A statement failed with a fault that may pass: the hosts are tried
    /// again, the current one first, then those after it in the URL's order
    /// (around the list), and the pool follows the first that fits. Returns at once while
    /// another probe is under way or within [`PROBE_EVERY`] of the last.
    /// When no host fits (the old primary gone, the standby not promoted
    /// yet), probing goes on in the background ([`Failover::keep_probing`]).
    pub(crate) async fn reprobe(self: &Arc<Self>) {
        let Ok(mut probed) = self.probed.try_lock() else {
            return;
        };
        if probed.is_some_and(|t| t.elapsed() < PROBE_EVERY) {
            return;
        }
        let fits = self.probe_once(true).await;
        *probed = Some(Instant::now());
        drop(probed);
        if !fits {
            self.keep_probing();
        }
    }

    /// One probe: the pool follows the first host that fits, if one does.
    /// What was refused is a warning when `loud`, else a debug line (the
    /// background probes, every 250 ms).
    async fn probe_once(&self, loud: bool) -> bool {
        let current = self.current.load(Ordering::Acquire);
        match first_fit(&self.hosts, self.attrs, self.timeout, current).await {
            Ok((to, conn)) => {
                let _ = conn.close().await;
                if to != current {
                    self.switch(current, to);
                }
                true
            }
            Err(refused) => {
                let refused = refusals(&refused);
                let attrs = self.attrs.as_str();
                match loud {
                    true => tracing::warn!(%refused, "no PostgreSQL host fits \
                        target_session_attrs={attrs} now; probing again until one does"),
                    false => tracing::debug!(%refused, "no PostgreSQL host fits yet"),
                }
                false
            }
        }
    }

    /// Probes every [`PROBE_EVERY`] in the background until a host fits,
    /// so a promoted standby is found as soon as it takes writes. Waiting
    /// for the next fault instead could wait long: the pool retries its
    /// gone host until its acquire timeout (30 s) before it fails. One such
    /// task at a time; it ends with the store.
    fn keep_probing(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                let Some(failover) = me.upgrade() else {
                    return;
                };
                let mut probed = failover.probed.lock().await;
                let fits = failover.probe_once(false).await;
                *probed = Some(Instant::now());
                if fits {
                    failover.watching.store(false, Ordering::Release);
                    return;
                }
            }
        });
    }

    /// Points the pool at host `to` and retires what was opened before.
    fn switch(&self, from: usize, to: usize) {
        let Some((pool, lanes)) = self.pool.get() else {
            return;
        };
        // The options first, then the time: a connection opened between
        // the two goes to the new host and is retired needlessly, never
        // one to the old host kept.
        pool.set_connect_options(self.hosts[to].clone());
        self.current.store(to, Ordering::Release);
        *self.switched.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.switches.fetch_add(1, Ordering::AcqRel);
        lanes.retire();
        tracing::warn!(
            from = %name(&self.hosts[from]),
            to = %name(&self.hosts[to]),
            "PostgreSQL failover: the store now uses another host"
        );
    }
}

/// Each refused host and why, for a message.
pub(crate) fn refusals(refused: &[(String, String)]) -> String {
    refused
        .iter()
        .map(|(host, why)| format!("{host}: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}
