//! Principals and the console's sessions (`cairn_core::people`).

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::{Actor, NewPrincipal, Principal};
use chrono::{DateTime, Utc};

use crate::Result;

/// A token as storage keeps it: its public id, and the hex SHA-256 of the
/// whole token (the secret itself is never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenDigest {
    pub id: String,
    pub hash: String,
}

/// A principal found by its token's id, with the digest to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub principal: Principal,
    pub hash: String,
}

/// A console session to open: the digest of its cookie value, whose it
/// is, its form token, and how long it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub id_hash: String,
    pub principal: String,
    /// The id of the token signed in with: the session ends with it.
    pub token_id: Option<String>,
    pub csrf: String,
    pub ttl: Duration,
}

/// An open console session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub principal: String,
    pub token_id: Option<String>,
    pub csrf: String,
    pub expires_at: DateTime<Utc>,
}

/// Principals and the console's sessions. Each change to a principal is
/// recorded in the audit by `by`, in its transaction.
#[async_trait]
pub trait PeopleStore: Send + Sync + 'static {
    /// Adds a principal with its first token. [`Error::PrincipalExists`]
    /// if the name is taken; nothing is stored then.
    ///
    /// [`Error::PrincipalExists`]: crate::Error::PrincipalExists
    async fn add_principal(
        &self,
        new: &NewPrincipal,
        token: &TokenDigest,
        by: &Actor,
    ) -> Result<Principal>;

    /// Every principal, by name, disabled ones too.
    async fn principals(&self) -> Result<Vec<Principal>>;

    /// The principal of this name, if there is one.
    async fn principal(&self, name: &str) -> Result<Option<Principal>>;

    /// The principal whose current token has this id, if any (disabled too:
    /// the caller refuses it).
    async fn credential(&self, token_id: &str) -> Result<Option<Credential>>;

    /// Disables a principal: its token and sessions stop working at once.
    /// Disabling it again changes nothing.
    async fn disable_principal(&self, name: &str, by: &Actor) -> Result<Principal>;

    /// Replaces a principal's token (the old one stops working at once)
    /// and ends its console sessions.
    async fn rotate_token(&self, name: &str, token: &TokenDigest, by: &Actor) -> Result<Principal>;

    /// Opens a console session; expired sessions are dropped, and a
    /// principal keeps at most 1,000 (a sign-in beyond ends its oldest).
    async fn open_session(&self, session: &NewSession) -> Result<()>;

    /// The session with this cookie digest, unless it expired (database clock).
    async fn session(&self, id_hash: &str) -> Result<Option<SessionRecord>>;

    /// Ends a session (an unknown one: nothing to do).
    async fn close_session(&self, id_hash: &str) -> Result<()>;
}
