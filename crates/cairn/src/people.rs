//! People: principals and their tokens, the console's sessions, and the
//! audit (`cairn principals`, `cairn audit`, DESIGN.md "People"). A token
//! is `cairn_<id>_<secret>`: the id finds its principal, and only the
//! SHA-256 of the whole token is stored, compared in constant time. Who
//! may do what is the server's to enforce (`cairn_core::people::Access`);
//! direct database access passes every check, so it is recorded as
//! `via: local` under the operating system's user.

use std::time::Duration;

use cairn_checkpoint::{NewSession, TokenDigest};
use cairn_core::{Actor, AuditEntry, AuditFilter, NewPrincipal, Origin, Principal, Via};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{Engine, Result};

/// A principal with a token just issued: the only time the token is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    #[serde(flatten)]
    pub principal: Principal,
    pub token: String,
}

/// A console session just opened: the cookie's value (shown once) and the
/// session's form token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedSession {
    pub cookie: String,
    pub csrf: String,
}

/// A console session found by its cookie: whose, the token it was opened
/// with, and its form token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub principal: String,
    pub token_id: Option<String>,
    pub csrf: String,
}

/// 244 random bits (two UUID v4s), hex.
pub fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The hex SHA-256 of `text`.
pub fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A new token and what storage keeps of it.
fn new_token() -> (String, TokenDigest) {
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let token = format!("cairn_{id}_{}", secret());
    let hash = digest(&token);
    (token, TokenDigest { id, hash })
}

/// The id part of a token of ours, if `token` has the shape of one.
fn token_id(token: &str) -> Option<&str> {
    let rest = token.strip_prefix("cairn_")?;
    let (id, secret) = rest.split_once('_')?;
    (id.len() == 12 && !secret.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(id)
}

/// Who acts in local mode (direct database access): the operating
/// system's user as the environment names it (`USER`, else `LOGNAME`),
/// else `uid:<n>`; `via: local`, and what `--by` said kept as a note.
pub fn local_actor(note: Option<String>, reason: Option<String>) -> Actor {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        .unwrap_or_else(uid_name);
    let note = note.filter(|n| !n.trim().is_empty() && n != &user);
    let actor = Actor::new(user).from(Origin {
        via: Some(Via::Local),
        note,
        ..Origin::default()
    });
    match reason.filter(|r| !r.trim().is_empty()) {
        Some(reason) => actor.because(reason),
        None => actor,
    }
}

#[cfg(unix)]
fn uid_name() -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map_or_else(|_| "local".to_owned(), |m| format!("uid:{}", m.uid()))
}

#[cfg(not(unix))]
fn uid_name() -> String {
    "local".to_owned()
}

impl Engine {
    /// Adds a principal and issues its first token. A name or group that
    /// breaks the rule is `bad_principal`, a name taken `principal_exists`;
    /// nothing is stored then.
    pub async fn add_principal(&self, new: NewPrincipal, by: &Actor) -> Result<Issued> {
        let new = new.checked()?;
        let (token, digest) = new_token();
        let principal = self.store().add_principal(&new, &digest, by).await?;
        Ok(Issued { principal, token })
    }

    /// Every principal, by name (never a token).
    pub async fn principals(&self) -> Result<Vec<Principal>> {
        Ok(self.store().principals().await?)
    }

    /// The principal of this name, if any.
    pub async fn principal(&self, name: &str) -> Result<Option<Principal>> {
        Ok(self.store().principal(name).await?)
    }

    /// Disables a principal: its token and console sessions stop working.
    pub async fn disable_principal(&self, name: &str, by: &Actor) -> Result<Principal> {
        Ok(self.store().disable_principal(name, by).await?)
    }

    /// Issues a principal a new token; the old one and its sessions end.
    pub async fn rotate_token(&self, name: &str, by: &Actor) -> Result<Issued> {
        let (token, digest) = new_token();
        let principal = self.store().rotate_token(name, &digest, by).await?;
        Ok(Issued { principal, token })
    }

    /// The enabled principal whose token `token` is, if any.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Principal>> {
        let Some(id) = token_id(token) else {
            return Ok(None);
        };
        let Some(found) = self.store().credential(id).await? else {
            return Ok(None);
        };
        let presented = digest(token);
        let same: bool = presented.as_bytes().ct_eq(found.hash.as_bytes()).into();
        Ok((same && !found.principal.is_disabled()).then_some(found.principal))
    }

    /// Opens a console session for `principal`, signed in with the token
    /// of id `token_id`, lasting `ttl`.
    pub async fn open_session(
        &self,
        principal: &str,
        token_id: Option<&str>,
        ttl: Duration,
    ) -> Result<OpenedSession> {
        let (cookie, csrf) = (secret(), secret());
        let session = NewSession {
            id_hash: digest(&cookie),
            principal: principal.to_owned(),
            token_id: token_id.map(str::to_owned),
            csrf: csrf.clone(),
            ttl,
        };
        self.store().open_session(&session).await?;
        Ok(OpenedSession { cookie, csrf })
    }

    /// The open session whose cookie is `cookie`, if any.
    pub async fn session(&self, cookie: &str) -> Result<Option<Session>> {
        let found = self.store().session(&digest(cookie)).await?;
        Ok(found.map(|s| Session {
            principal: s.principal,
            token_id: s.token_id,
            csrf: s.csrf,
        }))
    }

    /// Ends the session whose cookie is `cookie`.
    pub async fn close_session(&self, cookie: &str) -> Result<()> {
        Ok(self.store().close_session(&digest(cookie)).await?)
    }

    /// Audit entries, oldest first.
    pub async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        Ok(self.store().audit(filter).await?)
    }

    /// Audits a refused answer (nothing else was stored); a failure to
    /// record it is logged, never in place of the refusal.
    pub(crate) async fn audit_refusal(
        &self,
        wait: cairn_core::WaitId,
        answer: &cairn_core::Answer,
        by: &Actor,
        why: &(dyn std::fmt::Display + Sync),
    ) {
        let detail = serde_json::json!({"decision": answer.decision(), "why": why.to_string()});
        let entry = AuditEntry {
            wait_id: Some(wait),
            ..AuditEntry::of(by, "refused", detail)
        };
        if let Err(e) = self.store().record(&entry).await {
            tracing::warn!(%wait, error = %crate::ErrorChain(&e), "could not audit a refused answer");
        }
    }

    /// [`Engine::answer_as`] for a person who was shown the wait whose
    /// digest they quote ([`cairn_core::wait_digest`]): an answer quoting
    /// another digest is refused (audited) and nothing is stored. The
    /// prompt never changes once the wait opened, so checking first is as
    /// good as checking in the answer's transaction.
    pub async fn answer_quoting(
        &self,
        wait: cairn_core::WaitId,
        answer: &cairn_core::Answer,
        actor: &Actor,
        quoted: Option<&str>,
    ) -> Result<cairn_core::WaitRecord> {
        if let Some(quoted) = quoted {
            let current = self.store().ballot(wait).await?.digest;
            if quoted != current {
                let e = crate::Error::StaleDigest {
                    wait,
                    quoted: quoted.to_owned(),
                    current,
                };
                self.audit_refusal(wait, answer, actor, &e).await;
                return Err(e);
            }
        }
        self.answer_as(wait, answer, actor).await
    }

    /// Audits `action` by `actor` that no run event records (a provider
    /// key's pause or limits, a thread's budget, a compaction), right
    /// after it; a failure to record it is logged, never in its place.
    pub async fn audit_change(&self, actor: &Actor, action: &str, detail: serde_json::Value) {
        let entry = AuditEntry::of(actor, action, detail);
        if let Err(e) = self.store().record(&entry).await {
            tracing::warn!(error = %crate::ErrorChain(&e), action, "could not audit");
        }
    }

    /// Records an audit entry that changes nothing else (a refusal).
    pub async fn record_audit(&self, entry: &AuditEntry) -> Result<()> {
        Ok(self.store().record(entry).await?)
    }
}

/// What the audit says of a change to a provider key: the key as it
/// now stands.
pub fn key_detail(key: &crate::KeyState) -> serde_json::Value {
    serde_json::json!({"key": key.key, "limits": key.limits, "paused_until": key.paused_until})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_carries_its_id_and_only_its_digest_is_kept() {
        let (token, kept) = new_token();
        assert_eq!(token_id(&token), Some(kept.id.as_str()));
        assert_eq!(kept.hash, digest(&token));
        assert!(!kept.hash.contains(&token[19..]), "no secret in the digest");
        assert_ne!(new_token().0, token);
        for not_ours in [
            "",
            "cairn_",
            "cairn_abc_x",
            "cairn_zzzzzzzzzzzz_x",
            "a-legacy-token",
        ] {
            assert_eq!(token_id(not_ours), None, "{not_ours}");
        }
    }

    #[test]
    fn local_mode_names_the_user_and_keeps_by_as_a_note() {
        let actor = local_actor(Some("someone-else".into()), Some("why".into()));
        assert_eq!(actor.origin.via, Some(Via::Local));
        assert_ne!(actor.by, "someone-else");
        assert_eq!(actor.origin.note.as_deref(), Some("someone-else"));
        assert_eq!(actor.reason.as_deref(), Some("why"));
    }
}
