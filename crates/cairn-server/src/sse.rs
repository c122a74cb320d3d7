//! `GET /v1/runs/{id}/events`: a run's event log as Server-Sent Events.
//! Each event's `id` is its per-run `seq`, so a client that reconnects with
//! `Last-Event-ID: N` gets exactly the events after N. The stream polls the
//! store and ends once the run is succeeded, failed or cancelled and every
//! event has been sent, or when the server stops; with `?follow=false`, once
//! the events stored when it was asked for have been sent.
//!
//! Between stored events come `output_delta` events: an `llm` step's text
//! as it streams (`Engine::live_text`, from any process on PostgreSQL).
//! They are not stored and carry no `id`, so a reconnect never replays
//! them; the finished block arrives as a journal item.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::time::Instant;

use cairn::{Engine, EventRecord, OutputDelta, RunId, RunStatus};

use crate::error::ErrorChain;
use crate::extract::{ApiQuery, IdPath, RunIdPath};
use crate::{ApiError, AppState};

/// How often the store is polled for new events.
const POLL: Duration = Duration::from_millis(150);
/// Consecutive failed polls after which the stream ends (the client
/// reconnects with `Last-Event-ID` and loses nothing).
const MAX_FAILURES: u32 = 5;

/// `?follow=false`: send the events stored now, then end (no live text).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    follow: Option<bool>,
}

/// The handler. Refuses an unknown run (404) before the stream starts, and
/// a stream beyond the server's cap (503 `too_many_streams`): each open
/// stream polls the database, so their number is bounded. The stream holds
/// its permit until it ends or the client goes away.
pub(crate) async fn events(
    State(state): State<AppState>,
    IdPath(id): RunIdPath,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    stream(state, id, &headers, true, q.follow.unwrap_or(true)).await
}

/// The console's copy (`/runs/{id}/events`, behind its session cookie):
/// the same stream with unnamed events, so a page's `EventSource` hears
/// every kind through `onmessage`.
pub(crate) async fn console_events(
    State(state): State<AppState>,
    IdPath(id): RunIdPath,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    stream(state, id, &headers, false, true).await
}

async fn stream(
    state: AppState,
    id: RunId,
    headers: &HeaderMap,
    named: bool,
    follow: bool,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    let after = last_event_id(headers)?;
    let permit = state.streams().clone().try_acquire_owned().map_err(|_| {
        tracing::warn!(
            limit = state.max_event_streams(),
            "event stream refused: too many open"
        );
        ApiError::TooManyStreams {
            limit: state.max_event_streams(),
        }
    })?;
    state.engine().get_run(id).await?;
    // Before the first read, so no piece between it and the stream is lost.
    let live = match follow {
        true => Some(state.engine().live_text().await),
        false => None,
    };
    let tail = Tail {
        live,
        next_poll: Instant::now(),
        _permit: permit,
        engine: state.engine().clone(),
        id,
        after,
        pending: VecDeque::new(),
        finished: false,
        polled: false,
        failures: 0,
        shutdown: state.shutdown_signal(),
        named,
        follow,
    };
    let stream = futures_util::stream::unfold(tail, Tail::next);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The sequence number after which to start: `Last-Event-ID`, or 0.
fn last_event_id(headers: &HeaderMap) -> Result<i64, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(0);
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    text.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| ApiError::BadLastEventId(text.to_owned()))
}

/// Where a stream stands.
struct Tail {
    /// This stream's place under the cap, given back when it is dropped.
    _permit: OwnedSemaphorePermit,
    engine: Engine,
    id: RunId,
    /// The last `seq` sent (or the client's `Last-Event-ID`).
    after: i64,
    /// Read from the store, not sent yet.
    pending: VecDeque<EventRecord>,
    /// The run had ended when `pending` was read: end once it is drained.
    finished: bool,
    /// The store has been read at least once (the first read does not wait).
    polled: bool,
    failures: u32,
    shutdown: watch::Receiver<bool>,
    /// Each event carries its kind as the SSE event name (the API).
    named: bool,
    /// Live text of every run (this one's is sent); `None` once closed.
    live: Option<broadcast::Receiver<OutputDelta>>,
    /// When the store is read next.
    next_poll: Instant,
    /// `false`: end after the first read, whatever the run's status.
    follow: bool,
}

impl Tail {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Tail)> {
        loop {
            if let Some(record) = self.pending.pop_front() {
                self.after = record.seq;
                return Some((Ok(to_event(&record, self.named)), self));
            }
            if self.finished {
                return None;
            }
            if self.polled {
                let delta = tokio::select! {
                    _ = tokio::time::sleep_until(self.next_poll) => None,
                    // The server is stopping (or gone): end the stream so
                    // graceful shutdown is not held up by it.
                    _ = self.shutdown.wait_for(|stop| *stop) => return None,
                    delta = next_live(&mut self.live) => Some(delta),
                };
                match delta {
                    None => {}
                    Some(Some(d)) if d.run_id == self.id => {
                        let event = delta_event(&d, self.named);
                        return Some((Ok(event), self));
                    }
                    Some(_) => continue,
                }
            }
            self.polled = true;
            self.next_poll = Instant::now() + POLL;
            match self.poll().await {
                Ok(()) => self.failures = 0,
                Err(e) => {
                    self.failures += 1;
                    tracing::warn!(run = %self.id, failures = self.failures, error = %ErrorChain(&e), "event stream: cannot read the run's events");
                    if self.failures >= MAX_FAILURES {
                        return None;
                    }
                }
            }
        }
    }

    /// Reads the run's status, then its events. In that order: the events
    /// of a change are written in the change's transaction, so once the
    /// status read shows the run ended, the events read after it are all.
    async fn poll(&mut self) -> Result<(), cairn::Error> {
        let run = self.engine.get_run(self.id).await?;
        // Only what has not been sent: a poll reads new rows, not the log.
        let events = self.engine.events_after(self.id, self.after).await?;
        self.pending.extend(events);
        self.finished = !self.follow
            || matches!(
                run.status,
                RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
            );
        Ok(())
    }
}

/// The next live piece; `None` for a skipped stretch (a lagging stream
/// loses pieces, never events). Pends forever once the hub is closed.
async fn next_live(live: &mut Option<broadcast::Receiver<OutputDelta>>) -> Option<OutputDelta> {
    let Some(rx) = live else {
        return std::future::pending().await;
    };
    match rx.recv().await {
        Ok(d) => Some(d),
        Err(RecvError::Lagged(_)) => None,
        Err(RecvError::Closed) => {
            *live = None;
            None
        }
    }
}

/// An `output_delta` event: `{"kind", "run_id", "idx", "attempt",
/// "after_seq", "text"}`, without an `id`.
fn delta_event(delta: &OutputDelta, named: bool) -> Event {
    let event = Event::default().data(delta.event_json().to_string());
    match named {
        true => event.event("output_delta"),
        false => event,
    }
}

fn to_event(record: &EventRecord, named: bool) -> Event {
    let data = serde_json::to_string(record).unwrap_or_else(|e| {
        tracing::error!(run = %record.run_id, seq = record.seq, error = %e, "event stream: cannot serialize an event");
        "{}".to_owned()
    });
    let event = Event::default().id(record.seq.to_string()).data(data);
    match named {
        true => event.event(record.kind.as_str()),
        false => event,
    }
}
