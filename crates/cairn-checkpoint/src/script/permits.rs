//! Provider keys' limits and permits (`cairn_core::meter::keys`): set by an
//! operator, asked before every model call, released after it. A key
//! without limits costs a call one read (its pause, as before limits
//! existed); a limited key's admission is one write transaction that locks
//! the key's row, so every process on the database sees one count.
//!
//! A permit counts only while its run is `running` under the epoch it was
//! taken with and that lease has not expired: a process that dies, or loses
//! the run to a takeover, releases its permits with its leases, without
//! anyone deleting them (the next admission on the key does).

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::meter::keys::window;
use cairn_core::{
    Admission, Buckets, Decision, Held, KeyAsk, KeyLimits, KeyPause, KeyState, LimitsFrom, Permit,
    RunId,
};

use crate::contract::KeyStore;
use crate::raw::nil_run;
use crate::sql::{query, Conn, Row};
use crate::Result;

use super::boundary::{bounded, placed};
use super::pauses::limits_of;
use super::storable::text_ok;
use super::{ScriptHost, TxKind};

/// How many permits of `:key` other runs than `:run` hold: those whose run
/// still holds the lease it took them under (`keys_in` counts the same per
/// key, for every run).
const LIVE: &str = "SELECT count(*) AS n FROM key_permits p JOIN runs r ON r.id = p.run_id \
     WHERE p.key = :key AND r.status = 'running' AND r.lease_epoch = p.epoch \
     AND r.lease_expires_at > {now} AND p.run_id <> :run";

/// `KeyStore::admit`'s first look, without a transaction: the answer for a
/// key that is paused or has no limits, `None` for a limited key (which
/// [`admit_in`] decides under its row's lock).
pub(super) async fn unlimited_in(c: &mut Conn<'_>, ask: &KeyAsk) -> Result<Option<Admission>> {
    let row = c
        .fetch_optional(
            query(
                "SELECT {paused_ms} AS paused, in_flight_limit, rpm, tpm, max_pause_ms, \
                 limits_from FROM provider_keys WHERE key = :key",
            )
            .bind("key", ask.key.as_str()),
        )
        .await?;
    let declared = declared(ask);
    let Some(row) = row else {
        return Ok(declared.is_none().then_some(Admission::Go(None)));
    };
    if let Some(wait) = paused(&row)? {
        return Ok(Some(wait));
    }
    let stored = limits_of(&row)?;
    if declared.is_some_and(|d| d.replaces(stored, from_of(&row))) {
        return Ok(None);
    }
    Ok((!stored.gates()).then_some(Admission::Go(None)))
}

/// Who set a key row's limits (column `limits_from`).
fn from_of(row: &Row) -> Option<LimitsFrom> {
    row.opt_text("limits_from")
        .ok()
        .flatten()
        .and_then(|f| LimitsFrom::parse(&f))
}

/// What the step declares for its key, if it sets any limit.
fn declared(ask: &KeyAsk) -> Option<cairn_core::Declared> {
    ask.declared.filter(|d| d.limits.any())
}

/// Writes a declaration to the key (creating it), with who declared it;
/// the buckets stay as they are.
async fn declare_in(c: &mut Conn<'_>, key: &str, d: cairn_core::Declared) -> Result<()> {
    c.execute(
        query(
            "INSERT INTO provider_keys (key, in_flight_limit, rpm, tpm, max_pause_ms, \
             limits_from) VALUES (:key, :in_flight, :rpm, :tpm, :max_pause, :from) \
             ON CONFLICT (key) DO UPDATE SET in_flight_limit = excluded.in_flight_limit, \
             rpm = excluded.rpm, tpm = excluded.tpm, max_pause_ms = excluded.max_pause_ms, \
             limits_from = excluded.limits_from",
        )
        .bind("key", key)
        .bind("in_flight", d.limits.in_flight)
        .bind("rpm", d.limits.rpm)
        .bind("tpm", d.limits.tpm)
        .bind("max_pause", max_pause_of(&d.limits))
        .bind("from", d.from.as_str()),
    )
    .await?;
    Ok(())
}

/// The key's row, locked for the admission's transaction.
async fn locked_key(c: &mut Conn<'_>, key: &str) -> Result<Option<Row>> {
    c.fetch_optional(
        query(
            "SELECT {paused_ms} AS paused, in_flight_limit, rpm, tpm, max_pause_ms, \
             limits_from, tokens_milli, {refilled_ms} AS since \
             FROM provider_keys WHERE key = :key {for_update}",
        )
        .bind("key", key),
    )
    .await
}

/// A pause still standing in column `paused` (milliseconds left).
fn paused(row: &Row) -> Result<Option<Admission>> {
    Ok(row
        .opt_int("paused")?
        .filter(|ms| *ms > 0)
        .map(|ms| Admission::Wait {
            after: Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
            why: Held::Paused,
        }))
}

/// `KeyStore::admit`: a key without limits costs one read (as a pause alone
/// needs); a limited key's admission is decided in a write transaction.
pub(super) async fn admit<H: super::ScriptHost + ?Sized>(
    host: &H,
    ask: &KeyAsk,
) -> Result<Admission> {
    let first = ask.clone();
    let read = host.tx(
        super::TxKind::Single,
        script!(|c| unlimited_in(c, &first).await),
    );
    if let Some(answer) = super::boundary::placed(host.target(), None, read).await? {
        return Ok(answer);
    }
    let ask = ask.clone();
    let write = host.tx(super::TxKind::Write, script!(|c| admit_in(c, &ask).await));
    super::boundary::bounded("admit", host.target(), None, write).await
}

/// `KeyStore::release`.
pub(super) async fn release<H: super::ScriptHost + ?Sized>(
    host: &H,
    permit: &Permit,
    used: u64,
) -> Result<()> {
    let permit = permit.clone();
    let write = host.tx(
        super::TxKind::Write,
        script!(|c| release_in(c, &permit, used).await),
    );
    super::boundary::bounded("release", host.target(), None, write).await
}

/// `KeyStore::set_limits`.
pub(super) async fn set_limits<H: super::ScriptHost + ?Sized>(
    host: &H,
    key: &str,
    limits: &KeyLimits,
) -> Result<KeyState> {
    super::boundary::bounded("set_limits", host.target(), None, async {
        super::storable::text_ok("the provider key", Some(key))?;
        let (key, limits) = (key.to_owned(), *limits);
        host.tx(
            super::TxKind::Write,
            script!(|c| set_limits_in(c, &key, &limits).await),
        )
        .await
    })
    .await
}

/// `KeyStore::reset_limits`: drops the operator's limits (and any declared
/// ones), so the next admission applies what its crew or process
/// declares. A key never named is [`crate::Error::KeyNotFound`].
pub(super) async fn reset_limits<H: super::ScriptHost + ?Sized>(
    host: &H,
    key: &str,
) -> Result<KeyState> {
    super::storable::text_ok("the provider key", Some(key))?;
    let key = key.to_owned();
    let write = host.tx(
        super::TxKind::Write,
        script!(|c| let n = c
                    .execute(
                        query(
                            "UPDATE provider_keys SET in_flight_limit = NULL, rpm = NULL, \
                             tpm = NULL, max_pause_ms = NULL, requests_milli = NULL, tokens_milli = NULL, \
                             refilled_at = NULL, limits_from = NULL WHERE key = :key",
                        )
                        .bind("key", key.as_str()),
                    )
                    .await?;
                if n == 0 {
                    return Err(crate::Error::KeyNotFound(key));
                }
                wake_one(c, &key).await?;
                let mut keys = super::pauses::keys_in(c, Some(&key)).await?;
                keys.pop().ok_or(crate::Error::KeyNotFound(key))),
    );
    super::boundary::bounded("reset_limits", host.target(), None, write).await
}

/// `KeyStore::admit` for a limited key, in a write transaction.
pub(super) async fn admit_in(c: &mut Conn<'_>, ask: &KeyAsk) -> Result<Admission> {
    let declared = declared(ask);
    let mut row = locked_key(c, &ask.key).await?;
    if let (None, Some(d)) = (&row, declared) {
        declare_in(c, &ask.key, d).await?;
        row = locked_key(c, &ask.key).await?;
    }
    let Some(row) = row else {
        return Ok(Admission::Go(None));
    };
    if let Some(wait) = paused(&row)? {
        return Ok(wait);
    }
    let mut limits = limits_of(&row)?;
    if let Some(d) = declared.filter(|d| d.replaces(limits, from_of(&row))) {
        declare_in(c, &ask.key, d).await?;
        limits = d.limits;
    }
    if !limits.gates() {
        return Ok(Admission::Go(None));
    }
    // A run holds one permit at most: one it still holds (a call whose
    // step was dropped mid-way) is not counted, and the grant replaces it.
    let in_use = match limits.in_flight {
        Some(_) => live_permits(c, &ask.key, ask.run).await?,
        None => 0,
    };
    let stored = Buckets {
        requests_full_for: match limits.rpm {
            Some(rpm) => requests_full_for(c, &ask.key, rpm).await?,
            None => None,
        },
        tokens: milli(row.opt_int("tokens_milli")?),
    };
    let since =
        Duration::from_millis(u64::try_from(row.opt_int("since")?.unwrap_or(0)).unwrap_or(0));
    match limits.decide(stored, since, in_use, ask.tokens) {
        Decision::Wait { after, why } => Ok(Admission::Wait { after, why }),
        Decision::Grant { tokens } => grant(c, ask, &limits, tokens).await,
    }
}

/// How long until `key`'s request window has room for one more
/// ([`window::full_for`], from the age of the `rpm`-th newest request it
/// admitted within the last minute: `window::REQUEST_WINDOW`, the 60000
/// below). Reads at most `rpm` index entries, newest first.
async fn requests_full_for(c: &mut Conn<'_>, key: &str, rpm: u32) -> Result<Option<Duration>> {
    let row = c
        .fetch_optional(
            query(
                "SELECT {now_ms} - at_ms AS age FROM key_requests \
                 WHERE key = :key AND at_ms > {now_ms} - 60000 \
                 ORDER BY at_ms DESC LIMIT 1 OFFSET :skip",
            )
            .bind("key", key)
            .bind("skip", i64::from(rpm) - 1),
        )
        .await?;
    let age = match row {
        Some(r) => Some(Duration::from_millis(
            u64::try_from(r.int("age")?).unwrap_or(0),
        )),
        None => None,
    };
    Ok(window::full_for(age))
}

/// Adds a granted request to `key`'s window and drops those that left it.
async fn admitted_request(c: &mut Conn<'_>, key: &str) -> Result<()> {
    c.execute(
        query("DELETE FROM key_requests WHERE key = :key AND at_ms <= {now_ms} - 60000")
            .bind("key", key),
    )
    .await?;
    c.execute(
        query("INSERT INTO key_requests (key, at_ms) VALUES (:key, {now_ms})").bind("key", key),
    )
    .await?;
    Ok(())
}

/// Writes a granted call's request and tokens back, and its permit.
async fn grant(
    c: &mut Conn<'_>,
    ask: &KeyAsk,
    limits: &KeyLimits,
    tokens: Option<f64>,
) -> Result<Admission> {
    if limits.rpm.is_some() {
        admitted_request(c, &ask.key).await?;
    }
    if limits.tpm.is_some() {
        c.execute(
            query(
                "UPDATE provider_keys SET tokens_milli = :tokens, refilled_at = {now} \
                 WHERE key = :key",
            )
            .bind("tokens", tokens.map(to_milli))
            .bind("key", ask.key.as_str()),
        )
        .await?;
    }
    let reserved = match limits.tpm {
        Some(cap) => ask.tokens.min(u64::from(cap)),
        None => 0,
    };
    let row = c
        .fetch_optional(
            query(
                "INSERT INTO key_permits (key, run_id, epoch, reserved, acquired_at) \
                 VALUES (:key, :run, :epoch, :reserved, {now}) \
                 ON CONFLICT (run_id) DO UPDATE SET key = excluded.key, \
                 epoch = excluded.epoch, reserved = excluded.reserved, \
                 acquired_at = excluded.acquired_at RETURNING id",
            )
            .bind("key", ask.key.as_str())
            .bind("run", ask.run)
            .bind("epoch", ask.epoch.0)
            .bind("reserved", i64::try_from(reserved).unwrap_or(i64::MAX)),
        )
        .await?;
    let id = match row {
        Some(r) => r.int("id")?,
        None => 0,
    };
    Ok(Admission::Go(Some(Permit {
        id,
        key: ask.key.clone(),
        reserved,
        wakes: limits.in_flight.is_some(),
    })))
}

/// `KeyStore::release`.
pub(super) async fn release_in(c: &mut Conn<'_>, permit: &Permit, used: u64) -> Result<()> {
    let gone = c
        .execute(query("DELETE FROM key_permits WHERE id = :id").bind("id", permit.id))
        .await?;
    // What the call used beyond (or short of) its reservation; a permit
    // already dropped (its lease lost) still settles its tokens.
    let unused = i64::try_from(permit.reserved).unwrap_or(i64::MAX)
        - i64::try_from(used).unwrap_or(i64::MAX);
    if permit.reserved > 0 && unused != 0 {
        c.execute(
            query(
                "UPDATE provider_keys SET tokens_milli = tokens_milli + :delta \
                 WHERE key = :key AND tokens_milli IS NOT NULL",
            )
            .bind("delta", unused.saturating_mul(1000))
            .bind("key", permit.key.as_str()),
        )
        .await?;
    }
    if gone > 0 && permit.wakes {
        wake_one(c, &permit.key).await?;
    }
    Ok(())
}

/// Makes the run deferred longest on a key that limits calls in flight
/// claimable now (a permit was freed).
async fn wake_one(c: &mut Conn<'_>, key: &str) -> Result<()> {
    let woken = c
        .fetch_all(
            query(
                "UPDATE runs SET not_before = {now} WHERE id IN (SELECT r.id FROM runs r \
                 JOIN provider_keys k ON k.key = r.deferred_key \
                 WHERE r.deferred_key = :key AND r.status = 'queued' \
                 AND k.in_flight_limit IS NOT NULL AND r.not_before > {now} \
                 ORDER BY r.not_before LIMIT 1) RETURNING id",
            )
            .bind("key", key),
        )
        .await?;
    if !woken.is_empty() {
        c.notify_runnable(nil_run()).await?;
    }
    Ok(())
}

/// `KeyStore::set_limits`: replaces the key's limits; its token bucket starts
/// full, and its request window keeps the requests sent in the last minute
/// (a lowered `rpm` holds at once).
pub(super) async fn set_limits_in(
    c: &mut Conn<'_>,
    key: &str,
    limits: &KeyLimits,
) -> Result<KeyState> {
    c.execute(
        query(
            "INSERT INTO provider_keys (key, in_flight_limit, rpm, tpm, max_pause_ms, \
             limits_from) VALUES (:key, :in_flight, :rpm, :tpm, :max_pause, 'operator') \
             ON CONFLICT (key) DO UPDATE SET in_flight_limit = excluded.in_flight_limit, \
             rpm = excluded.rpm, tpm = excluded.tpm, max_pause_ms = excluded.max_pause_ms, \
             requests_milli = NULL, tokens_milli = NULL, refilled_at = NULL, \
             limits_from = 'operator'",
        )
        .bind("key", key)
        .bind("in_flight", limits.in_flight)
        .bind("rpm", limits.rpm)
        .bind("tpm", limits.tpm)
        .bind("max_pause", max_pause_of(limits)),
    )
    .await?;
    // More permits may be free now.
    wake_one(c, key).await?;
    let mut keys = super::pauses::keys_in(c, Some(key)).await?;
    keys.pop()
        .ok_or_else(|| crate::Error::KeyNotFound(key.to_owned()))
}

/// How many permits of `key` other runs than `run` hold under live leases.
async fn live_permits(c: &mut Conn<'_>, key: &str, run: RunId) -> Result<u64> {
    let row = c
        .fetch_optional(query(LIVE).bind("key", key).bind("run", run))
        .await?;
    let n = match row {
        Some(r) => r.int("n")?,
        None => 0,
    };
    Ok(u64::try_from(n).unwrap_or(0))
}

/// `max_pause_ms` as a column value (checked limits fit).
fn max_pause_of(limits: &KeyLimits) -> Option<i64> {
    limits
        .max_pause_ms
        .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX))
}

fn milli(stored: Option<i64>) -> Option<f64> {
    stored.map(|m| m as f64 / 1000.0)
}

fn to_milli(units: f64) -> i64 {
    (units * 1000.0).round() as i64
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> KeyStore for H {
    async fn paused_for(&self, key: &str) -> Result<Option<Duration>> {
        let key = key.to_owned();
        let read = self.tx(
            TxKind::Single,
            script!(|c| super::pauses::paused_for_in(c, &key).await),
        );
        placed(self.target(), None, read).await
    }

    async fn pause_key(&self, pause: &KeyPause) -> Result<cairn_core::Paused> {
        bounded("pause_key", self.target(), None, async {
            text_ok("the provider key", Some(&pause.key))?;
            text_ok("the reason", Some(&pause.reason))?;
            text_ok("the operator", Some(&pause.by))?;
            let pause = pause.clone();
            self.tx(
                TxKind::Single,
                script!(|c| super::pauses::pause_in(c, &pause).await),
            )
            .await
        })
        .await
    }

    async fn resume_key(&self, key: &str) -> Result<KeyState> {
        bounded("resume_key", self.target(), None, async {
            text_ok("the provider key", Some(key))?;
            let key = key.to_owned();
            self.tx(
                TxKind::Write,
                script!(|c| super::pauses::resume_in(c, &key).await),
            )
            .await
        })
        .await
    }

    async fn keys(&self) -> Result<Vec<KeyState>> {
        let read = self.tx(
            TxKind::Read,
            script!(|c| super::pauses::keys_in(c, None).await),
        );
        placed(self.target(), None, read).await
    }

    async fn admit(&self, ask: &KeyAsk) -> Result<Admission> {
        admit(self, ask).await
    }

    async fn release(&self, permit: &Permit, used: u64) -> Result<()> {
        release(self, permit, used).await
    }

    async fn set_limits(&self, key: &str, limits: &KeyLimits) -> Result<KeyState> {
        set_limits(self, key, limits).await
    }

    async fn reset_limits(&self, key: &str) -> Result<KeyState> {
        reset_limits(self, key).await
    }
}
