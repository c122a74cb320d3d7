//! Provider keys: what a provider's rate limit pauses. Every `llm` step that
//! calls the same provider with the same API key shares one key (built by
//! `cairn_agent::limit_key`); a "too many requests" that says how long to
//! stay away pauses the key for every run on the database, and steps that
//! find it paused wait for its end instead of calling (deferred, the same
//! attempt, no retry spent). [`KeyState`]'s serde form is the JSON contract
//! of `cairn limits list --json` and `GET /v1/limits`: extend it, never
//! rename.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A provider key as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyState {
    pub key: String,
    /// Paused until then (database clock); absent when it is not paused.
    pub paused_until: Option<DateTime<Utc>>,
    /// Why it was last paused (the provider's answer, or an operator's
    /// reason).
    pub reason: Option<String>,
    /// Who last paused it: `provider` for a rate limit, else the operator.
    pub paused_by: Option<String>,
    pub paused_at: Option<DateTime<Utc>>,
    /// How many pauses began (one that met a pause still standing, from
    /// another run refused at the same time, is not counted again).
    pub pauses: u64,
    /// Queued runs deferred on it, waiting for its pause to end (its queue).
    pub deferred_runs: u64,
}

/// A pause to record: `key` paused for `wait` from now (database clock). A
/// longer pause already standing wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPause {
    pub key: String,
    pub wait: Duration,
    pub reason: String,
    /// `provider` for a rate limit; an operator's name otherwise.
    pub by: String,
}

impl KeyPause {
    /// Who a provider's own pause is recorded as.
    pub const PROVIDER: &'static str = "provider";
}
