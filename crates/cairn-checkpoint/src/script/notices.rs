//! Notices of open waits and their links (`NoticeStore`). The outbox is
//! the waits table itself: a wait is opened in its step's commit, so a
//! notice can never be lost between the commit and its delivery; `notices`
//! records each wait's attempts until one is acknowledged.

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::{Actor, AuditEntry, Origin, Via, WaitId, WaitRecord};

use crate::contract::{LinkRecord, NewLink, NoticeAttempt, NoticeStore};
use crate::raw::{decode_wait, nil_run, wait_cols};
use crate::sql::{query, Conn, Row};
use crate::Result;

use super::boundary::{bounded, placed};
use super::storable::text_ok;
use super::{ScriptHost, TxKind};

async fn due_in(c: &mut Conn<'_>, channel: &str, limit: u32) -> Result<Vec<WaitRecord>> {
    let rows = c
        .fetch_all(
            query(concat!(
                "SELECT ",
                wait_cols!(),
                " FROM waits WHERE status = 'open' AND NOT EXISTS (SELECT 1 FROM notices n \
                 WHERE n.wait_id = waits.id AND n.channel = :channel \
                 AND (n.delivered_at IS NOT NULL \
                 OR n.next_at > {now})) ORDER BY created_at, id LIMIT :limit"
            ))
            .bind("limit", limit)
            .bind("channel", channel),
        )
        .await?;
    rows.iter().map(decode_wait).collect()
}

/// Open waits with a deadline within `lead` whose reminder on `channel`
/// was not delivered and is due, opened at least `lead` ago (a wait
/// shorter than its lead gets none: its first notice is recent enough).
async fn reminders_in(
    c: &mut Conn<'_>,
    channel: &str,
    lead: f64,
    limit: u32,
) -> Result<Vec<WaitRecord>> {
    let rows = c
        .fetch_all(
            query(concat!(
                "SELECT ",
                wait_cols!(),
                " FROM waits WHERE status = 'open' AND deadline IS NOT NULL \
                 AND deadline > {now} AND deadline <= {later:lead} AND created_at <= {ago:lead} \
                 AND NOT EXISTS (SELECT 1 FROM notices n \
                 WHERE n.wait_id = waits.id AND n.channel = :channel \
                 AND (n.delivered_at IS NOT NULL \
                 OR n.next_at > {now})) ORDER BY deadline, id LIMIT :limit"
            ))
            .bind("limit", limit)
            .bind("lead", lead)
            .bind("channel", channel),
        )
        .await?;
    rows.iter().map(decode_wait).collect()
}

async fn record_in(c: &mut Conn<'_>, a: &NoticeAttempt) -> Result<()> {
    c.execute(
        query(
            "INSERT INTO notices (wait_id, channel, attempts, next_at, delivered_at, \
             last_status, last_error) VALUES (:wait, :channel, 1, {later:secs}, \
             CASE WHEN :delivered THEN {now} ELSE NULL END, :status, :error) \
             ON CONFLICT (wait_id, channel) DO UPDATE SET attempts = notices.attempts + 1, \
             next_at = excluded.next_at, delivered_at = excluded.delivered_at, \
             last_status = excluded.last_status, last_error = excluded.last_error",
        )
        .bind("wait", a.wait)
        .bind("channel", a.channel)
        .bind("secs", a.retry_in.as_secs_f64())
        .bind("delivered", a.delivered)
        .bind("status", a.status.map(i64::from))
        .bind("error", a.error.as_deref()),
    )
    .await?;
    Ok(())
}

/// Stores the links not stored yet, each audited as `link_issued` (by its
/// principal, `via: link`) in the same transaction.
async fn issue_in(c: &mut Conn<'_>, links: &[NewLink]) -> Result<()> {
    for link in links {
        let stored = c
            .execute(
                query(
                    "INSERT INTO links (hash, principal, wait_id, expires_at) \
                 VALUES (:hash, :principal, :wait, {later:secs}) ON CONFLICT (hash) DO NOTHING",
                )
                .bind("hash", link.hash.as_str())
                .bind("principal", link.principal.as_str())
                .bind("wait", link.wait)
                .bind("secs", link.ttl.as_secs_f64()),
            )
            .await?;
        if stored > 0 {
            let by = Actor::new(&link.principal).from(Origin {
                via: Some(Via::Link),
                ..Origin::default()
            });
            let detail = serde_json::json!({"expires_in_secs": link.ttl.as_secs()});
            let entry = AuditEntry {
                wait_id: Some(link.wait),
                ..AuditEntry::of(&by, "link_issued", detail)
            };
            super::audited::record_in(c, &entry).await?;
        }
    }
    Ok(())
}

fn decode_link(row: &Row) -> Result<LinkRecord> {
    let nil = nil_run();
    let wait = row
        .opt_uuid("wait_id", nil, "a link's wait")?
        .map(WaitId::from_uuid)
        .ok_or_else(|| cairn_core::Corruption::new(nil, "a link names no wait"))?;
    let run = row
        .opt_uuid("run_id", nil, "a link's run")?
        .map(cairn_core::RunId::from_uuid)
        .ok_or_else(|| cairn_core::Corruption::new(nil, "a link's wait has no run"))?;
    Ok(LinkRecord {
        principal: row.text("principal")?,
        wait,
        run,
        expires_at: row.time("expires_at", nil, "a link's expiry")?,
        consumed_at: row.opt_time("consumed_at", nil, "a link's use")?,
        expired: row.int("expired")? != 0,
    })
}

async fn link_in(c: &mut Conn<'_>, hash: &str) -> Result<Option<LinkRecord>> {
    let row = c
        .fetch_optional(
            query(
                "SELECT l.principal, l.wait_id, w.run_id, l.expires_at, l.consumed_at, \
                 CASE WHEN l.expires_at <= {now} THEN 1 ELSE 0 END AS expired \
                 FROM links l JOIN waits w ON w.id = l.wait_id WHERE l.hash = :hash",
            )
            .bind("hash", hash),
        )
        .await?;
    row.as_ref().map(decode_link).transpose()
}

async fn consume_in(c: &mut Conn<'_>, hash: &str) -> Result<Option<LinkRecord>> {
    let row = c
        .fetch_optional(
            query(
                "UPDATE links SET consumed_at = {now} WHERE hash = :hash \
                 AND consumed_at IS NULL AND expires_at > {now} \
                 RETURNING principal, wait_id, \
                 (SELECT run_id FROM waits WHERE waits.id = links.wait_id) AS run_id, \
                 expires_at, consumed_at, 0 AS expired",
            )
            .bind("hash", hash),
        )
        .await?;
    row.as_ref().map(decode_link).transpose()
}

#[async_trait]
impl<H: ScriptHost> NoticeStore for H {
    async fn due_notices(&self, channel: &str, limit: u32) -> Result<Vec<WaitRecord>> {
        let channel = channel.to_owned();
        let read = self.tx(
            TxKind::Single,
            script!(|c| due_in(c, &channel, limit).await),
        );
        placed(self.target(), None, read).await
    }

    async fn due_reminders(
        &self,
        channel: &str,
        lead: Duration,
        limit: u32,
    ) -> Result<Vec<WaitRecord>> {
        let channel = channel.to_owned();
        let lead = lead.as_secs_f64();
        let read = self.tx(
            TxKind::Single,
            script!(|c| reminders_in(c, &channel, lead, limit).await),
        );
        placed(self.target(), None, read).await
    }

    async fn record_notice(&self, attempt: &NoticeAttempt) -> Result<()> {
        text_ok("the delivery error", attempt.error.as_deref())?;
        let attempt = attempt.clone();
        let write = self.tx(TxKind::Single, script!(|c| record_in(c, &attempt).await));
        bounded("record_notice", self.target(), None, write).await
    }

    async fn issue_links(&self, links: &[NewLink]) -> Result<()> {
        let links = links.to_vec();
        let write = self.tx(TxKind::Write, script!(|c| issue_in(c, &links).await));
        bounded("issue_links", self.target(), None, write).await
    }

    async fn link(&self, hash: &str) -> Result<Option<LinkRecord>> {
        let hash = hash.to_owned();
        let read = self.tx(TxKind::Single, script!(|c| link_in(c, &hash).await));
        placed(self.target(), None, read).await
    }

    async fn consume_link(&self, hash: &str) -> Result<Option<LinkRecord>> {
        let hash = hash.to_owned();
        let write = self.tx(TxKind::Single, script!(|c| consume_in(c, &hash).await));
        bounded("consume_link", self.target(), None, write).await
    }
}
