//! Live text of `llm` steps (`output_delta`): published by the process that
//! runs the step, heard by whoever watches the run. Never stored.
//!
//! In one process a broadcast channel carries every piece at once. On
//! PostgreSQL the pieces also go out as `NOTIFY cairn_live` (at most once
//! per [`GATHER`]: a piece after a quiet spell at once, the pieces that
//! follow it gathered until [`GATHER`] has passed, many pieces to a payload
//! under the server's 8,000-byte cap), and a hub with subscribers
//! `LISTEN`s, so a console served by one process shows the text of a step
//! another process runs. Only while some
//! process watches: a hub with subscribers keeps a row in `live_watchers`
//! current, and a publisher looks there at most once per [`WATCHERS_EVERY`]
//! and sends nothing while it is empty, so thousands of streams nobody
//! watches cost no statements. A watcher that arrives misses at most that
//! long of text from other processes. SQLite has no notifications: there a
//! watcher in another process sees the text when its block is journaled.
//!
//! Everything here is best effort: a full queue, a lagging subscriber or a
//! lost connection drops pieces, never a step. A watcher that missed pieces
//! still gets the whole block from the journal (`OutputDelta::after_seq`).

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use cairn_core::OutputDelta;
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

/// The notification channel of live text.
const CHANNEL: &str = "cairn_live";
/// Pieces a subscriber may fall behind before it skips some.
const SUBSCRIBER_LAG: usize = 4096;
/// Pieces waiting for a `NOTIFY` before new ones are dropped.
const QUEUE: usize = 4096;
/// Notifications of one process go at most once per this long: pieces
/// that come sooner after the last are gathered into the next.
const GATHER: Duration = Duration::from_millis(40);
/// How long the first subscriber waits for `LISTEN` (then it goes on; the
/// task keeps trying).
const LISTEN_WAIT: Duration = Duration::from_secs(3);
/// Text per piece: the payload cap is 8,000 bytes, with JSON around.
const MAX_TEXT: usize = 6000;
/// Pieces per notification while their JSON fits this.
const MAX_PAYLOAD: usize = 7_800;
/// How often a publisher looks whether anyone watches.
const WATCHERS_EVERY: Duration = Duration::from_secs(1);
/// How long a watcher's row lasts without renewal; it is renewed at a third.
const WATCHER_FOR_SECS: f64 = 30.0;

/// The live text of one store: clone it freely.
#[derive(Clone)]
pub struct LiveHub {
    inner: Arc<Inner>,
}

struct Inner {
    local: broadcast::Sender<OutputDelta>,
    /// This process, so its own notifications are not delivered twice.
    origin: Uuid,
    pg: Option<PgPool>,
    /// The `NOTIFY` queue, its task started by the first piece.
    outbox: OnceLock<mpsc::Sender<OutputDelta>>,
    /// The `LISTEN` task, started by the first subscriber.
    listening: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for LiveHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveHub")
            .field("postgres", &self.inner.pg.is_some())
            .finish()
    }
}

/// A notification: pieces and the process that sent them.
#[derive(Serialize, Deserialize)]
struct Packet {
    origin: Uuid,
    deltas: Vec<OutputDelta>,
}

/// The notification of earlier versions, one piece each: still heard.
#[derive(Serialize, Deserialize)]
struct Wire {
    origin: Uuid,
    #[serde(flatten)]
    delta: OutputDelta,
}

impl LiveHub {
    /// A hub for one process (SQLite).
    pub fn local() -> LiveHub {
        Self::new(None)
    }

    /// A hub that also crosses processes through the server's notifications.
    pub(crate) fn postgres(pool: PgPool) -> LiveHub {
        Self::new(Some(pool))
    }

    fn new(pg: Option<PgPool>) -> LiveHub {
        LiveHub {
            inner: Arc::new(Inner {
                local: broadcast::channel(SUBSCRIBER_LAG).0,
                origin: Uuid::now_v7(),
                pg,
                outbox: OnceLock::new(),
                listening: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// Sends a piece to this process's subscribers now and, on PostgreSQL,
    /// to other processes' shortly. Needs a Tokio runtime (the first piece
    /// starts the sending task).
    pub fn publish(&self, delta: OutputDelta) {
        let _ = self.inner.local.send(delta.clone());
        let Some(pool) = &self.inner.pg else { return };
        let outbox = self.inner.outbox.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(send_notifications(pool.clone(), self.inner.origin, rx));
            tx
        });
        if outbox.try_send(delta).is_err() {
            tracing::debug!("live text: the notification queue is full; a piece is dropped");
        }
    }

    /// Every piece published from now on, by any run (filter by `run_id`).
    /// On PostgreSQL the first subscriber starts listening and waits (up to
    /// [`LISTEN_WAIT`]) until the server listens, so other processes'
    /// pieces from then on arrive too.
    pub async fn subscribe(&self) -> broadcast::Receiver<OutputDelta> {
        let receiver = self.inner.local.subscribe();
        if let Some(pool) = &self.inner.pg {
            self.inner
                .listening
                .get_or_init(|| async {
                    let (ready, listening) = tokio::sync::oneshot::channel();
                    tokio::spawn(listen(
                        pool.clone(),
                        self.inner.origin,
                        Arc::downgrade(&self.inner),
                        ready,
                    ));
                    let _ = tokio::time::timeout(LISTEN_WAIT, listening).await;
                })
                .await;
        }
        receiver
    }
}

/// The `NOTIFY` task: gathers queued pieces, joins consecutive pieces of the
/// same block and sends them. Ends when the hub is gone.
async fn send_notifications(pool: PgPool, origin: Uuid, mut rx: mpsc::Receiver<OutputDelta>) {
    let mut watched = Watched::default();
    let mut last_sent: Option<tokio::time::Instant> = None;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        // A piece after a quiet spell goes at once (a watcher's first
        // token waits for no window); within GATHER of the last
        // notification pieces are gathered until GATHER has passed since
        // it, so a stream still costs at most one notification per GATHER.
        let until = last_sent.map(|t| t + GATHER);
        if let Some(until) = until.filter(|u| *u > tokio::time::Instant::now()) {
            while let Ok(Some(next)) = tokio::time::timeout_at(until, rx.recv()).await {
                batch.push(next);
            }
        }
        while let Ok(next) = rx.try_recv() {
            batch.push(next);
        }
        if !watched.now(&pool).await {
            continue;
        }
        last_sent = Some(tokio::time::Instant::now());
        for payload in pack(origin, join(batch)) {
            crate::counters::sent(1);
            if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(payload)
                .execute(&pool)
                .await
            {
                tracing::debug!(error = %e, "live text: NOTIFY failed; pieces dropped");
                break;
            }
        }
    }
}

/// Whether any process watches live text: looked up at most once per
/// [`WATCHERS_EVERY`]; a failed lookup counts as watched (best effort
/// errs on sending).
#[derive(Default)]
struct Watched {
    looked: Option<tokio::time::Instant>,
    any: bool,
}

impl Watched {
    async fn now(&mut self, pool: &PgPool) -> bool {
        if self.looked.is_some_and(|t| t.elapsed() < WATCHERS_EVERY) {
            return self.any;
        }
        crate::counters::sent(1);
        self.any = sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM live_watchers WHERE until > now())",
        )
        .fetch_one(pool)
        .await
        .unwrap_or(true);
        self.looked = Some(tokio::time::Instant::now());
        self.any
    }
}

/// Pieces as notification payloads, as many to a payload as fit
/// [`MAX_PAYLOAD`] (a piece alone may be longer; the server then refuses
/// that notification and its pieces are dropped).
fn pack(origin: Uuid, deltas: Vec<OutputDelta>) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut packet = Packet {
        origin,
        deltas: Vec::new(),
    };
    let mut size = 0;
    let mut flush = |packet: &mut Packet| {
        if let Ok(p) = serde_json::to_string(&*packet) {
            payloads.push(p);
        }
        packet.deltas.clear();
    };
    for delta in deltas {
        let len = serde_json::to_string(&delta).map_or(0, |d| d.len() + 1);
        if !packet.deltas.is_empty() && size + len > MAX_PAYLOAD - 60 {
            flush(&mut packet);
            size = 0;
        }
        size += len;
        packet.deltas.push(delta);
    }
    if !packet.deltas.is_empty() {
        flush(&mut packet);
    }
    payloads
}

/// A notification's pieces, in either shape.
fn unpack(payload: &str) -> Option<(Uuid, Vec<OutputDelta>)> {
    if let Ok(p) = serde_json::from_str::<Packet>(payload) {
        return Some((p.origin, p.deltas));
    }
    let w = serde_json::from_str::<Wire>(payload).ok()?;
    Some((w.origin, vec![w.delta]))
}

/// Consecutive pieces of one block as one, each at most [`MAX_TEXT`] bytes.
fn join(batch: Vec<OutputDelta>) -> Vec<OutputDelta> {
    let mut out: Vec<OutputDelta> = Vec::new();
    for delta in batch {
        match out.last_mut() {
            Some(last)
                if last.run_id == delta.run_id
                    && last.idx == delta.idx
                    && last.attempt == delta.attempt
                    && last.after_seq == delta.after_seq
                    && last.text.len() + delta.text.len() <= MAX_TEXT =>
            {
                last.text.push_str(&delta.text);
            }
            _ => out.extend(split(delta)),
        }
    }
    out
}

/// A piece cut at character boundaries into parts of at most [`MAX_TEXT`].
fn split(delta: OutputDelta) -> Vec<OutputDelta> {
    if delta.text.len() <= MAX_TEXT {
        return vec![delta];
    }
    let mut parts = Vec::new();
    let mut rest = delta.text.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(MAX_TEXT);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        parts.push(OutputDelta {
            text: head.to_owned(),
            ..delta.clone()
        });
        rest = tail;
    }
    parts
}

/// The `LISTEN` task: forwards other processes' pieces to this process's
/// subscribers; reconnects after a failure; ends when the hub is gone.
async fn listen(
    pool: PgPool,
    origin: Uuid,
    hub: Weak<Inner>,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut listener: Option<PgListener> = None;
    let mut watcher = Watcher::default();
    loop {
        let Some(inner) = hub.upgrade() else {
            watcher.keep(&pool, origin, 0).await;
            return;
        };
        let subscribers = inner.local.receiver_count();
        drop(inner);
        let l = match &mut listener {
            Some(l) => l,
            None => match PgListener::connect_with(&pool).await {
                Ok(mut l) => match l.listen(CHANNEL).await {
                    Ok(()) => {
                        // Listening, and known to publishers as a watcher,
                        // before the first subscriber goes on.
                        watcher.keep(&pool, origin, subscribers.max(1)).await;
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(());
                        }
                        listener.insert(l)
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "live text: LISTEN failed; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                },
                Err(e) => {
                    tracing::debug!(error = %e, "live text: no listener connection; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
        };
        watcher.keep(&pool, origin, subscribers).await;
        // Wakes now and then to notice a hub that is gone.
        let notification = match tokio::time::timeout(Duration::from_secs(1), l.recv()).await {
            Err(_) => continue,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "live text: listener failed; reconnecting");
                listener = None;
                continue;
            }
            Ok(Ok(n)) => n,
        };
        let Some((from, deltas)) = unpack(notification.payload()) else {
            continue;
        };
        if from == origin {
            continue;
        }
        let Some(inner) = hub.upgrade() else { return };
        for delta in deltas {
            let _ = inner.local.send(delta);
        }
    }
}

/// This process's row in `live_watchers` while it has subscribers: renewed
/// at a third of its life, removed when the last subscriber is gone.
#[derive(Default)]
struct Watcher {
    renewed: Option<tokio::time::Instant>,
}

impl Watcher {
    async fn keep(&mut self, pool: &PgPool, origin: Uuid, subscribers: usize) {
        let due = self
            .renewed
            .is_none_or(|t| t.elapsed().as_secs_f64() > WATCHER_FOR_SECS / 3.0);
        let sql = match (subscribers > 0, self.renewed.is_some()) {
            (true, _) if due => {
                "INSERT INTO live_watchers (id, until) \
                 VALUES ($1, now() + make_interval(secs => $2)) \
                 ON CONFLICT (id) DO UPDATE SET until = EXCLUDED.until"
            }
            (false, true) => "DELETE FROM live_watchers WHERE id = $1 OR until < now() - make_interval(secs => $2)",
            _ => return,
        };
        crate::counters::sent(1);
        let done = sqlx::query(sql)
            .bind(origin)
            .bind(WATCHER_FOR_SECS)
            .execute(pool)
            .await;
        match (done, subscribers > 0) {
            (Ok(_), true) => self.renewed = Some(tokio::time::Instant::now()),
            (Ok(_), false) => self.renewed = None,
            (Err(e), _) => tracing::debug!(error = %e, "live text: cannot keep the watcher row"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{Attempt, RunId, StepIdx};

    fn piece(after_seq: i64, text: &str) -> OutputDelta {
        OutputDelta {
            run_id: RunId::from_uuid(Uuid::nil()),
            idx: StepIdx(1),
            attempt: Attempt(1),
            after_seq,
            text: text.to_owned(),
        }
    }

    #[test]
    fn consecutive_pieces_of_a_block_are_joined_and_blocks_kept_apart() {
        let joined = join(vec![piece(3, "Hel"), piece(3, "lo"), piece(5, " next")]);
        let texts: Vec<(i64, &str)> = joined
            .iter()
            .map(|d| (d.after_seq, d.text.as_str()))
            .collect();
        assert_eq!(texts, vec![(3, "Hello"), (5, " next")]);
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn pieces_are_packed_under_the_payload_cap_and_read_back_in_order() {
        let origin = Uuid::now_v7();
        let pieces: Vec<OutputDelta> = (0..400).map(|i| piece(i, "some text ")).collect();
        let payloads = pack(origin, pieces.clone());
        assert!(
            payloads.len() > 1 && payloads.len() < 40,
            "{}",
            payloads.len()
        );
        assert!(payloads.iter().all(|p| p.len() <= MAX_PAYLOAD));
        let mut back = vec![];
        for p in &payloads {
            let (from, deltas) = unpack(p).unwrap();
            assert_eq!(from, origin);
            back.extend(deltas);
        }
        assert_eq!(back, pieces);
        // A notification of an earlier version: one piece.
        let old = serde_json::to_string(&Wire {
            origin,
            delta: piece(7, "old"),
        })
        .unwrap();
        assert_eq!(unpack(&old), Some((origin, vec![piece(7, "old")])));
    }

    #[test]
    fn a_long_piece_is_cut_at_character_boundaries_under_the_payload_cap() {
        let text = "é".repeat(MAX_TEXT); // two bytes each
        let parts = split(piece(0, &text));
        assert!(parts.iter().all(|p| p.text.len() <= MAX_TEXT));
        let whole: String = parts.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(whole, text);
    }
}
