//! Notices of open waits and the links they carry (`cairn serve` delivers
//! them: `cairn-server`'s `notify.rs`). A wait's row is the outbox: its
//! notice is due until one attempt is acknowledged, whichever process
//! restarts. A link lets one principal answer one wait once, until it
//! expires; only its token's digest is stored, and the vote it casts goes
//! through the same rules as any other (`via: link`).

use cairn_checkpoint::{LinkRecord, NewLink, NoticeAttempt};
use cairn_core::{Access, Actor, Answer, Origin, Principal, Via, WaitId, WaitRecord};

use crate::people::digest;
use crate::{Engine, Result};

/// What using a link did.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkUse {
    /// The answer (a vote, under a policy) was recorded; the wait now.
    Answered(Box<WaitRecord>),
    /// No link has this token.
    Unknown,
    /// The link was used already.
    Used,
    /// The link expired.
    Expired,
    /// Its principal was disabled, or is no longer an operator.
    NotAllowed(String),
}

impl Engine {
    /// Open waits whose notice on `channel` (`webhook`, `mail`) is due,
    /// oldest first.
    pub async fn due_notices(&self, channel: &str, limit: u32) -> Result<Vec<WaitRecord>> {
        Ok(self.store().due_notices(channel, limit).await?)
    }

    /// Open waits whose deadline is within `lead` and whose reminder on
    /// `channel` (`webhook-reminder`, `mail-reminder`) is due.
    pub async fn due_reminders(
        &self,
        channel: &str,
        lead: std::time::Duration,
        limit: u32,
    ) -> Result<Vec<WaitRecord>> {
        Ok(self.store().due_reminders(channel, lead, limit).await?)
    }

    /// Records an attempt to deliver a wait's notice.
    pub async fn record_notice(&self, attempt: &NoticeAttempt) -> Result<()> {
        Ok(self.store().record_notice(attempt).await?)
    }

    /// Who may answer `wait` and has not yet: the enabled operators and
    /// admins its policy admits (all of them without one), by name.
    pub async fn eligible(&self, wait: WaitId) -> Result<Vec<Principal>> {
        let ballot = self.store().ballot(wait).await?;
        let policy = ballot.approvers;
        let voted = |name: &str| ballot.votes.iter().any(|v| v.by == name);
        let principals = self.store().principals().await?;
        Ok(principals
            .into_iter()
            .filter(|p| !p.is_disabled() && p.role.covers(Access::Operator))
            .filter(|p| !voted(&p.name))
            .filter(|p| {
                let voter = cairn_core::Voter {
                    name: &p.name,
                    groups: &p.groups,
                    is_own: false,
                    local: false,
                };
                policy
                    .as_ref()
                    .is_none_or(|policy| policy.admits(&voter).is_ok())
            })
            .collect())
    }

    /// Stores links (a link issued before keeps its expiry).
    pub async fn issue_links(&self, links: &[NewLink]) -> Result<()> {
        Ok(self.store().issue_links(links).await?)
    }

    /// The link whose token is `token`, if any; nothing changes.
    pub async fn link(&self, token: &str) -> Result<Option<LinkRecord>> {
        Ok(self.store().link(&digest(token)).await?)
    }

    /// Uses the link `token` to answer its wait as its principal: the
    /// link is used once whatever the answer does (a refused vote too).
    pub async fn answer_by_link(
        &self,
        token: &str,
        answer: &Answer,
        reason: Option<String>,
        client: Option<String>,
    ) -> Result<LinkUse> {
        let hash = digest(token);
        let Some(link) = self.store().consume_link(&hash).await? else {
            return Ok(match self.store().link(&hash).await? {
                None => LinkUse::Unknown,
                Some(l) if l.consumed_at.is_some() => LinkUse::Used,
                Some(_) => LinkUse::Expired,
            });
        };
        let allowed = self.store().principal(&link.principal).await?;
        if !allowed.is_some_and(|p| !p.is_disabled() && p.role.covers(Access::Operator)) {
            return Ok(LinkUse::NotAllowed(link.principal));
        }
        let actor = Actor::new(link.principal).from(Origin {
            via: Some(Via::Link),
            client,
            ..Origin::default()
        });
        let actor = match reason.filter(|r| !r.trim().is_empty()) {
            Some(reason) => actor.because(reason),
            None => actor,
        };
        let wait = self.answer_as(link.wait, answer, &actor).await?;
        Ok(LinkUse::Answered(Box::new(wait)))
    }
}
