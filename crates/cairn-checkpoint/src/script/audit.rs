//! The audit (`AuditStore`): its reads, and a refusal's entry. Entries
//! are written in the transaction of what they record (`audited.rs`).

use async_trait::async_trait;
use cairn_core::{AuditEntry, AuditFilter, RunId, WaitId};
use serde_json::Value;

use crate::contract::AuditStore;
use crate::raw::nil_run;
use crate::sql::{query, Conn, Row};
use crate::{Error, Result};

use super::boundary::{bounded, placed};
use super::storable::{json_ok, text_ok};
use super::{ScriptHost, TxKind};

/// `AuditStore::audit`.
async fn audit_in(c: &mut Conn<'_>, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT id, at, principal, via, token_id, client, action, run_id, wait_id, \
                 detail FROM audit WHERE (:principal IS NULL OR principal = :principal) \
                 AND (:since IS NULL OR at >= {time:since}) AND (:after IS NULL OR id > :after) \
                 ORDER BY id LIMIT :limit",
            )
            .bind("principal", filter.principal.as_deref())
            .bind(
                "since",
                filter
                    .since
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            )
            .bind("after", filter.after)
            .bind("limit", i64::from(filter.limit.unwrap_or(1000).min(10_000))),
        )
        .await?;
    rows.iter().map(decode).collect()
}

fn decode(row: &Row) -> Result<AuditEntry> {
    let nil = nil_run();
    let bad = |what: &str| Error::Corruption(cairn_core::Corruption::new(nil, what.to_owned()));
    let via = row.text("via")?;
    Ok(AuditEntry {
        id: row.int("id")?,
        at: row.time("at", nil, "an audit entry's time")?,
        principal: row.text("principal")?,
        via: serde_json::from_value(Value::String(via.clone()))
            .map_err(|_| bad(&format!("an audit entry's channel `{via}` is not one")))?,
        token: row.opt_text("token_id")?,
        client: row.opt_text("client")?,
        action: row.text("action")?,
        run_id: row
            .opt_uuid("run_id", nil, "an audit entry's run")?
            .map(RunId::from_uuid),
        wait_id: row
            .opt_uuid("wait_id", nil, "an audit entry's wait")?
            .map(WaitId::from_uuid),
        detail: row.json("detail", nil, "an audit entry's detail")?,
    })
}

#[async_trait]
impl<H: ScriptHost> AuditStore for H {
    async fn record(&self, entry: &AuditEntry) -> Result<()> {
        text_ok("the principal", Some(&entry.principal))?;
        text_ok("the action", Some(&entry.action))?;
        text_ok("the client", entry.client.as_deref())?;
        json_ok("the detail", Some(&entry.detail))?;
        let (run, entry) = (entry.run_id, entry.clone());
        let write = self.tx(
            TxKind::Single,
            script!(|c| super::audited::record_in(c, &entry).await),
        );
        bounded("record_audit", self.target(), run, write).await
    }

    async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let filter = filter.clone();
        let read = self.tx(TxKind::Read, script!(|c| audit_in(c, &filter).await));
        placed(self.target(), None, read).await
    }
}
