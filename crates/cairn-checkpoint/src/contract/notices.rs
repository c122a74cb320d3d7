//! Notices of open waits (a signed webhook per wait) and the single-use
//! links they carry.

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::{RunId, WaitId, WaitRecord};
use chrono::{DateTime, Utc};

use crate::Result;

/// How one delivery attempt of a wait's notice went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeAttempt {
    pub wait: WaitId,
    /// `webhook` or `mail`.
    pub channel: &'static str,
    /// The receiver acknowledged it (a 2xx).
    pub delivered: bool,
    /// Its HTTP status, if it answered.
    pub status: Option<u16>,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// When to try again, if it failed.
    pub retry_in: Duration,
}

/// A link to issue: the digest of its token, whose it is, for which wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLink {
    pub hash: String,
    pub principal: String,
    pub wait: WaitId,
    pub ttl: Duration,
}

/// A stored link, as its token's digest found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRecord {
    pub principal: String,
    pub wait: WaitId,
    /// The wait's run.
    pub run: RunId,
    pub expires_at: DateTime<Utc>,
    pub consumed_at: Option<DateTime<Utc>>,
    /// Whether it expired, by the database clock.
    pub expired: bool,
}

/// Notices and links.
#[async_trait]
pub trait NoticeStore: Send + Sync + 'static {
    /// Open waits whose notice on `channel` was not delivered and is due
    /// (never tried, or its retry time passed), oldest first, at most `limit`.
    async fn due_notices(&self, channel: &str, limit: u32) -> Result<Vec<WaitRecord>>;

    /// Open waits whose deadline is within `lead` and whose reminder on
    /// `channel` (`webhook-reminder`, `mail-reminder`) is due, soonest
    /// deadline first, at most `limit`. A wait opened less than `lead` ago
    /// gets none.
    async fn due_reminders(
        &self,
        channel: &str,
        lead: Duration,
        limit: u32,
    ) -> Result<Vec<WaitRecord>>;

    /// Records an attempt to deliver a wait's notice.
    async fn record_notice(&self, attempt: &NoticeAttempt) -> Result<()>;

    /// Stores links; a link already issued keeps its expiry. Each new one
    /// is audited (`link_issued`, by its principal, `via: link`).
    async fn issue_links(&self, links: &[NewLink]) -> Result<()>;

    /// The link whose token has this digest, if any (nothing changes).
    async fn link(&self, hash: &str) -> Result<Option<LinkRecord>>;

    /// Uses a link: it must exist, be unused and unexpired; it is then
    /// used, once, whatever happens next. `None` otherwise (the caller
    /// reads `link` to say why).
    async fn consume_link(&self, hash: &str) -> Result<Option<LinkRecord>>;
}
