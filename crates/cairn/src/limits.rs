//! Budgets raised by operators (`runs continue --budget`), and provider
//! keys' shared pauses as operators see them (`cairn limits`,
//! `GET /v1/limits`): every key a pause or a limit ever named, with its
//! pause, limits, permits in use and queue; limits set by hand; a pause
//! set by hand; a pause ended early. What a key is and how a
//! step waits for it: `cairn_core::meter::keys`, DESIGN.md "Provider keys".

use std::time::Duration;

use cairn_checkpoint::AfterRaise;
use cairn_core::{Actor, Budget, KeyLimits, KeyPause, KeyState, RunId, RunRecord};

use crate::{Engine, Result};

impl Engine {
    /// Every provider key ever paused, by name, with its pause (if it still
    /// stands) and the queued runs deferred on it.
    pub async fn keys(&self) -> Result<Vec<KeyState>> {
        Ok(self.store().keys().await?)
    }

    /// Pauses `key` for every run for `wait` from now, recorded with who
    /// and why. A longer pause already standing wins. Steps calling the key
    /// wait for its end without calling (and spend no retry). A key name
    /// that breaks the rule is `bad_key`, a pause past
    /// [`cairn_core::LONGEST_PAUSE`] `bad_age`; nothing is stored then.
    pub async fn pause_key(&self, key: &str, wait: Duration, actor: &Actor) -> Result<KeyState> {
        cairn_core::check_key(key)?;
        let pause = KeyPause {
            key: key.to_owned(),
            wait,
            reason: actor
                .reason
                .clone()
                .unwrap_or_else(|| "paused by an operator".to_owned()),
            by: actor.by.clone(),
        };
        pause.check()?;
        self.store().pause_key(&pause).await?;
        self.key(key).await
    }

    /// Ends `key`'s pause; the runs deferred on it are claimable at once.
    /// A key no pause ever named is `key_not_found`.
    pub async fn resume_key(&self, key: &str) -> Result<KeyState> {
        Ok(self.store().resume_key(key).await?)
    }

    /// Sets `key`'s limits (in-flight calls, requests and tokens per
    /// minute), replacing any it had: a limit left out is removed, and
    /// none at all leaves the key unlimited. The key need not have been
    /// seen yet (limits may be set before the first call). Each limit is
    /// at least 1 (`bad_limit` otherwise, nothing stored); a key name that
    /// breaks the rule is `bad_key`.
    pub async fn set_limits(&self, key: &str, limits: &KeyLimits) -> Result<KeyState> {
        cairn_core::check_key(key)?;
        limits.check()?;
        Ok(self.store().set_limits(key, limits).await?)
    }

    /// Drops `key`'s limits, an operator's included: its next call applies
    /// the limits its crew (an agent's `limits`) or its process
    /// (`CAIRN_LIMITS`) declares, if any. A key never named is
    /// `key_not_found`.
    pub async fn reset_limits(&self, key: &str) -> Result<KeyState> {
        Ok(self.store().reset_limits(key).await?)
    }

    /// Raises the run's budget by `by` (its own limits, or its crew's where
    /// it has none; a limit it lacks is not added), recorded as a
    /// `budget_raised` event with who and why. Refused for a finished run.
    pub async fn raise_budget(&self, id: RunId, by: &Budget, actor: &Actor) -> Result<RunRecord> {
        let then = AfterRaise::Stay;
        Ok(self.store().raise_budget(id, by, then, actor).await?)
    }

    /// [`Engine::raise_budget`], then what the budget stopped carries on
    /// (`cairn runs continue RUN --budget …`): an interrupted run is
    /// continued, a waiting parent's interrupted descendants are, a queued
    /// or running run only takes the raise. Refused for any other run,
    /// and then nothing is written: the raise and the continue are one
    /// transaction.
    pub async fn continue_with_budget(
        &self,
        id: RunId,
        by: &Budget,
        actor: &Actor,
    ) -> Result<RunRecord> {
        let then = AfterRaise::Continue;
        Ok(self.store().raise_budget(id, by, then, actor).await?)
    }

    async fn key(&self, key: &str) -> Result<KeyState> {
        self.keys()
            .await?
            .into_iter()
            .find(|k| k.key == key)
            .ok_or_else(|| cairn_checkpoint::Error::KeyNotFound(key.to_owned()).into())
    }
}
