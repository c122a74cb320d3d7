//! Provider keys' shared pauses (`cairn_core::meter::keys`): recorded by a step
//! whose call a provider refused with a time to wait (at once, and again in
//! its deferral's commit; held to the key's `max_pause_ms`), read before
//! every model call, listed, and ended by an operator, which also makes the
//! runs deferred on the key claimable at once.

use std::time::Duration;

use cairn_core::event::payload::KeyResumed;
use cairn_core::{EventData, KeyLimits, KeyPause, KeyState, NewEvent, Paused, RunId};

use crate::raw::nil_run;
use crate::sql::{query, Conn, Row};
use crate::{Error, Result};

/// Pauses a key; a later end already standing wins, and a pause that
/// meets one standing is not counted again (the agent's immediate pause
/// and its deferral's commit; 64 runs refused at once). Answers the
/// milliseconds the pause that stands has left.
const PAUSE: &str = "INSERT INTO provider_keys (key, paused_until, reason, paused_by, paused_at, \
     pauses) VALUES (:key, {later:secs}, :reason, :by, {now}, 1) \
     ON CONFLICT (key) DO UPDATE SET \
       paused_until = CASE WHEN provider_keys.paused_until > excluded.paused_until \
         THEN provider_keys.paused_until ELSE excluded.paused_until END, \
       reason = excluded.reason, paused_by = excluded.paused_by, \
       paused_at = excluded.paused_at, \
       pauses = provider_keys.pauses + CASE WHEN provider_keys.paused_until > {now} \
         THEN 0 ELSE 1 END \
     RETURNING {paused_ms} AS ms";

/// `KeyStore::pause_key`, and a deferral's commit that observed the refusal.
/// A provider's pause is held to the key's `max_pause_ms` (the default
/// without one), its reason saying so; no pause outlasts
/// `cairn_core::LONGEST_PAUSE`.
pub(super) async fn pause_in(c: &mut Conn<'_>, pause: &KeyPause) -> Result<Paused> {
    let mut pause = match pause.by == KeyPause::PROVIDER {
        true => pause.clone().capped(max_pause_in(c, &pause.key).await?),
        false => pause.clone(),
    };
    pause.wait = pause.wait.min(cairn_core::LONGEST_PAUSE);
    let row = c
        .fetch_optional(
            query(PAUSE)
                .bind("key", pause.key.as_str())
                .bind("secs", pause.wait.as_secs_f64())
                .bind("reason", pause.reason.as_str())
                .bind("by", pause.by.as_str()),
        )
        .await?;
    Ok(Paused {
        after: row.map_or(pause.wait, |r| millis(&r)),
        reason: pause.reason,
    })
}

/// The longest a provider's answer may pause `key`: its `max_pause_ms`,
/// else `cairn_core::DEFAULT_MAX_PAUSE`.
async fn max_pause_in(c: &mut Conn<'_>, key: &str) -> Result<Duration> {
    let row = c
        .fetch_optional(
            query("SELECT max_pause_ms FROM provider_keys WHERE key = :key").bind("key", key),
        )
        .await?;
    let ms = match row {
        Some(r) => r.opt_int("max_pause_ms")?,
        None => None,
    };
    Ok(ms
        .and_then(|ms| u64::try_from(ms).ok())
        .map_or(cairn_core::DEFAULT_MAX_PAUSE, Duration::from_millis))
}

/// `KeyStore::paused_for`: how long `key` stays paused, if it is.
pub(super) async fn paused_for_in(c: &mut Conn<'_>, key: &str) -> Result<Option<Duration>> {
    let row = c
        .fetch_optional(
            query(
                "SELECT {paused_ms} AS ms FROM provider_keys \
                 WHERE key = :key AND paused_until > {now}",
            )
            .bind("key", key),
        )
        .await?;
    Ok(row.map(|r| millis(&r)))
}

/// Remaining milliseconds in column `ms` (none left if it cannot be read).
fn millis(row: &Row) -> Duration {
    let ms = row.int("ms").unwrap_or(0);
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// In a deferral's commit (after its rows): the run waits on `key`, and
/// with `pause` its own refused call pauses the key for everyone.
pub(crate) async fn deferred_in(
    c: &mut Conn<'_>,
    run: RunId,
    key: &str,
    pause: Option<KeyPause>,
) -> Result<()> {
    if let Some(pause) = pause {
        pause_in(c, &pause).await?;
    }
    c.execute(
        query("UPDATE runs SET deferred_key = :key WHERE id = :run")
            .bind("key", key)
            .bind("run", run),
    )
    .await?;
    Ok(())
}

/// `KeyStore::resume_key`: ends `key`'s pause and makes the queued runs
/// deferred on it claimable now. An unknown key is an error, not a no-op.
pub(super) async fn resume_in(c: &mut Conn<'_>, key: &str) -> Result<KeyState> {
    let ended = c
        .execute(
            query("UPDATE provider_keys SET paused_until = NULL WHERE key = :key").bind("key", key),
        )
        .await?;
    if ended == 0 {
        return Err(Error::KeyNotFound(key.to_owned()));
    }
    let woken = c
        .fetch_all(
            query(
                "UPDATE runs SET not_before = {now} WHERE status = 'queued' \
                 AND deferred_key = :key RETURNING id",
            )
            .bind("key", key),
        )
        .await?;
    for row in &woken {
        let run = row
            .opt_uuid("id", nil_run(), "a woken run's id")?
            .map(RunId::from_uuid)
            .ok_or_else(|| cairn_core::Corruption::new(nil_run(), "a woken run has no id"))?;
        let event = NewEvent::typed(EventData::KeyResumed(KeyResumed {
            key: key.to_owned(),
        }));
        super::rows::append_events(c, run, &[event]).await?;
    }
    if !woken.is_empty() {
        c.notify_runnable(nil_run()).await?;
    }
    let mut keys = keys_in(c, Some(key)).await?;
    keys.pop().ok_or_else(|| Error::KeyNotFound(key.to_owned()))
}

/// `KeyStore::keys`: every key (or one), by name, with its limits, permits
/// in use and queue.
pub(super) async fn keys_in(c: &mut Conn<'_>, only: Option<&str>) -> Result<Vec<KeyState>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT k.key AS key, \
                   CASE WHEN k.paused_until > {now} THEN k.paused_until END AS paused_until, \
                   k.reason AS reason, k.paused_by AS paused_by, k.paused_at AS paused_at, \
                   k.pauses AS pauses, \
                   (SELECT count(*) FROM runs r WHERE r.deferred_key = k.key \
                      AND r.status = 'queued') AS deferred_runs, \
                   k.in_flight_limit AS in_flight_limit, k.rpm AS rpm, k.tpm AS tpm, \
                   k.max_pause_ms AS max_pause_ms, k.limits_from AS limits_from, \
                   (SELECT count(*) FROM key_permits p JOIN runs r ON r.id = p.run_id \
                      WHERE p.key = k.key AND r.status = 'running' \
                      AND r.lease_epoch = p.epoch AND r.lease_expires_at > {now}) \
                     AS permits_in_use \
                 FROM provider_keys k WHERE :only IS NULL OR k.key = :only ORDER BY k.key",
            )
            .bind("only", only),
        )
        .await?;
    rows.iter().map(decode_key).collect()
}

fn decode_key(row: &Row) -> Result<KeyState> {
    let what = "a provider key";
    let count = |col: &str| row.int(col).map(|n| u64::try_from(n).unwrap_or(0));
    Ok(KeyState {
        key: row.text("key")?,
        paused_until: row.opt_time("paused_until", nil_run(), what)?,
        reason: row.opt_text("reason")?,
        paused_by: row.opt_text("paused_by")?,
        paused_at: row.opt_time("paused_at", nil_run(), what)?,
        pauses: count("pauses")?,
        deferred_runs: count("deferred_runs")?,
        limits: limits_of(row)?,
        permits_in_use: count("permits_in_use")?,
        limits_from: row
            .opt_text("limits_from")?
            .and_then(|f| cairn_core::LimitsFrom::parse(&f)),
    })
}

/// A key row's limits (columns `in_flight_limit`, `rpm`, `tpm`,
/// `max_pause_ms`).
pub(super) fn limits_of(row: &Row) -> Result<KeyLimits> {
    let limit = |col: &str| -> Result<Option<u32>> {
        Ok(row.opt_int(col)?.and_then(|n| u32::try_from(n).ok()))
    };
    Ok(KeyLimits {
        in_flight: limit("in_flight_limit")?,
        rpm: limit("rpm")?,
        tpm: limit("tpm")?,
        max_pause_ms: row
            .opt_int("max_pause_ms")?
            .and_then(|n| u64::try_from(n).ok()),
    })
}
