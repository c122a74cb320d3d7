//! Provider keys: pauses, limits and the permits that hold them.

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::{Admission, KeyAsk, KeyLimits, KeyPause, KeyState, Permit};

use crate::Result;

/// Provider keys: pauses, limits and the permits that hold them.
#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// How long calls on provider key `key` must still wait, if it is
    /// paused (database clock; `cairn_core::meter::keys`).
    async fn paused_for(&self, key: &str) -> Result<Option<Duration>>;

    /// Pauses a provider key for every run; a longer pause already standing
    /// wins, and a provider's is held to the key's `max_pause_ms`
    /// (`cairn_core::DEFAULT_MAX_PAUSE` without one). Answers how long the
    /// pause that stands has left, and the reason recorded.
    async fn pause_key(&self, pause: &KeyPause) -> Result<cairn_core::Paused>;

    /// Ends a key's pause, and makes the queued runs deferred on it
    /// claimable now. `KeyNotFound` if no pause ever named it.
    async fn resume_key(&self, key: &str) -> Result<KeyState>;

    /// Every provider key ever paused or limited, by name, with its limits,
    /// permits in use and queue.
    async fn keys(&self) -> Result<Vec<KeyState>>;

    /// Before a model call: whether it may start on its key now. A key
    /// without limits needs one read (its pause); a key with limits locks
    /// its row, counts the permits held by live leases, refills and takes
    /// from its buckets, and grants a permit tied to the run's lease
    /// (`cairn_core::meter::keys`). A run holds at most one permit: asking again
    /// drops any it still held.
    async fn admit(&self, ask: &KeyAsk) -> Result<Admission>;

    /// After the call: drops the permit, gives back the tokens reserved
    /// but not `used` (or takes the excess), and wakes one run deferred on
    /// the key when it limits calls in flight.
    async fn release(&self, permit: &Permit, used: u64) -> Result<()>;

    /// Replaces `key`'s limits (none: unlimited), creating the key if it is
    /// new; its buckets start full.
    async fn set_limits(&self, key: &str, limits: &KeyLimits) -> Result<KeyState>;

    /// Drops `key`'s limits, an operator's included: its next admission
    /// applies the limits its crew or process declares, if any
    /// (`cairn_core::meter::declared`).
    async fn reset_limits(&self, key: &str) -> Result<KeyState>;
}
