//! Inbound webhooks: the hooks that map a POST to a signal, and their
//! secrets (`cairn_core::hook`).

use async_trait::async_trait;
use cairn_core::{Hook, Scheme};

use crate::Result;

/// A hook to create; `secret` is what its scheme checks against (a
/// token's digest, or the signing secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHook {
    pub name: String,
    pub scheme: Scheme,
    pub secret: String,
    pub signal: String,
    pub target: String,
    pub payload: Option<String>,
    pub id: Option<String>,
    pub start: Option<String>,
    pub by: Option<String>,
}

/// Hooks, by name.
#[async_trait]
pub trait HookStore: Send + Sync + 'static {
    /// Stores a hook; a name taken is `HookExists`, nothing stored.
    async fn create_hook(&self, new: &NewHook) -> Result<Hook>;

    /// Every hook, by name (never a secret).
    async fn hooks(&self) -> Result<Vec<Hook>>;

    /// The hook `name` and its stored secret (`HookNotFound` if none).
    async fn hook_secret(&self, name: &str) -> Result<(Hook, String)>;

    /// Deletes `name`: its token or secret stops working at once.
    async fn delete_hook(&self, name: &str) -> Result<()>;
}
