//! Audit entries written in the transaction of what they record, from
//! three writers: a run event whose actor names a channel ([`events_in`],
//! called for every appended event by `rows.rs`), a change to a principal
//! (`people.rs`), and a refusal (`AuditStore::record`, `audit.rs`). A leaf:
//! it knows only the statement it writes.

use cairn_core::{AuditEntry, NewEvent, RunId, Via, WaitId};
use serde_json::Value;

use crate::sql::{query, Conn};
use crate::Result;

const INSERT: &str = "INSERT INTO audit \
     (at, principal, via, token_id, client, action, run_id, wait_id, detail) \
     VALUES ({now}, :principal, :via, :token, :client, :action, :run, :wait, :detail)";

/// Stores `entry` (its `id` and `at` are the store's).
pub(super) async fn record_in(c: &mut Conn<'_>, entry: &AuditEntry) -> Result<()> {
    c.execute(
        query(INSERT)
            .bind("principal", entry.principal.as_str())
            .bind("via", entry.via.as_str())
            .bind("token", entry.token.as_deref())
            .bind("client", entry.client.as_deref())
            .bind("action", entry.action.as_str())
            .bind("run", entry.run_id)
            .bind("wait", entry.wait_id)
            .bind("detail", &entry.detail),
    )
    .await?;
    Ok(())
}

/// The audit entries of run `run`'s new events: those whose actor names
/// the channel it came through (`Origin::via`); others are the engine's.
pub(super) async fn events_in(c: &mut Conn<'_>, run: RunId, events: &[NewEvent]) -> Result<()> {
    for entry in entries_of(run, events) {
        record_in(c, &entry).await?;
    }
    Ok(())
}

/// The audit entries of run `run`'s new `events` (see [`events_in`]).
pub(crate) fn entries_of(run: RunId, events: &[NewEvent]) -> Vec<AuditEntry> {
    events.iter().filter_map(|e| entry_of(run, e)).collect()
}

/// An event as an audit entry, if its payload names a channel.
fn entry_of(run: RunId, event: &NewEvent) -> Option<AuditEntry> {
    let data = &event.data;
    let via: Via = serde_json::from_value(data.get("via")?.clone()).ok()?;
    let text = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_owned);
    let wait_id = text("wait").and_then(|w| w.parse::<WaitId>().ok());
    Some(AuditEntry {
        id: 0,
        at: chrono::Utc::now(),
        principal: text("by").unwrap_or_default(),
        via,
        token: text("token"),
        client: text("client"),
        action: event.kind.as_str().to_owned(),
        run_id: Some(run),
        wait_id,
        detail: data.clone(),
    })
}
