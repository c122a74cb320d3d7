//! The process registry (`crate::registry`), each operation one
//! transaction: a process's beat and leave, the registered processes, the
//! blocked runs and their once-per-stall `run_blocked` event.

use async_trait::async_trait;
use cairn_core::upgrade::Blocked;
use cairn_core::{EventData, Fingerprint, NewEvent, RunId};

use crate::raw::nil_run;
use crate::sql::{query, Conn};
use crate::{BlockedRun, Offered, ProcessBeat, ProcessRecord, Result, WorkerStore};

use super::boundary::{bounded, placed};
use super::{crews, ScriptHost, TxKind};

/// The condition on crew `k` that no live process offers it.
macro_rules! unoffered {
    () => {
        "k.needs_code AND NOT EXISTS (SELECT 1 FROM process_crews o \
     JOIN processes p ON p.id = o.process \
     WHERE o.fingerprint = k.fingerprint AND p.expires_at > {now})"
    };
}

/// The condition on run `r` that a claim could take it now, but for code.
macro_rules! runnable {
    () => {
        "((r.status = 'queued' AND NOT r.held) \
     OR (r.status = 'running' AND r.lease_expires_at < {now}))"
    };
}

/// Forgets processes expired over an hour ago, then beats for this one.
async fn beat_in(c: &mut Conn<'_>, beat: &ProcessBeat) -> Result<()> {
    c.execute(query("DELETE FROM processes WHERE expires_at < {ago:hour}").bind("hour", 3600.0))
        .await?;
    c.execute(
        query(
            "INSERT INTO processes (id, host, pid, started_at, beat_at, expires_at) \
             VALUES (:id, :host, :pid, {now}, {now}, {lease_until}) \
             ON CONFLICT (id) DO UPDATE SET beat_at = {now}, expires_at = {lease_until}",
        )
        .bind("id", beat.id.as_str())
        .bind("host", beat.host.as_str())
        .bind("pid", i64::from(beat.pid))
        .bind("lease_secs", beat.ttl.as_secs_f64()),
    )
    .await?;
    for def in beat.offers.iter().flatten() {
        let (fingerprint, json) = (def.fingerprint(), def.to_json());
        crews::remember_in(c, def, &fingerprint, &json).await?;
        c.execute(
            query(
                "INSERT INTO process_crews (process, fingerprint) VALUES (:id, :fingerprint) \
                 ON CONFLICT (process, fingerprint) DO NOTHING",
            )
            .bind("id", beat.id.as_str())
            .bind("fingerprint", fingerprint.as_str()),
        )
        .await?;
    }
    Ok(())
}

async fn leave_in(c: &mut Conn<'_>, id: &str) -> Result<bool> {
    // `process_crews` goes with it (ON DELETE CASCADE).
    let gone = c
        .execute(query("DELETE FROM processes WHERE id = :id").bind("id", id))
        .await?;
    Ok(gone > 0)
}

async fn processes_in(c: &mut Conn<'_>) -> Result<Vec<ProcessRecord>> {
    let rows = c
        .fetch_all(query(
            "SELECT p.id, p.host, p.pid, p.started_at, p.beat_at, p.expires_at, \
             CASE WHEN p.expires_at > {now} THEN 1 ELSE 0 END AS live, \
             (SELECT COUNT(*) FROM runs h WHERE h.lease_owner = p.id \
               AND h.status = 'running') AS held \
             FROM processes p ORDER BY p.started_at, p.id",
        ))
        .await?;
    let offers = c
        .fetch_all(query(
            "SELECT o.process, k.name, k.version, k.fingerprint, \
             CASE WHEN k.needs_code THEN 1 ELSE 0 END AS needs_code \
             FROM process_crews o JOIN crews k ON k.fingerprint = o.fingerprint \
             ORDER BY o.process, k.name, k.first_seen",
        ))
        .await?;
    let when = |r: &crate::sql::Row, col: &str| r.time(col, nil_run(), "a process's time");
    let mut found = Vec::with_capacity(rows.len());
    for r in &rows {
        let id = r.text("id")?;
        let mut offered = Vec::new();
        for o in offers
            .iter()
            .filter(|o| o.text("process").ok().as_ref() == Some(&id))
        {
            offered.push(Offered {
                name: o.text("name")?,
                version: o.text("version")?,
                fingerprint: Fingerprint::from_stored(o.text("fingerprint")?),
                needs_code: o.int("needs_code")? != 0,
            });
        }
        found.push(ProcessRecord {
            host: r.text("host")?,
            pid: u32::try_from(r.int("pid")?).unwrap_or(0),
            started_at: when(r, "started_at")?,
            beat_at: when(r, "beat_at")?,
            expires_at: when(r, "expires_at")?,
            live: r.int("live")? != 0,
            offers: offered,
            held: u64::try_from(r.int("held")?).unwrap_or(0),
            id,
        });
    }
    Ok(found)
}

/// The blocked runs, oldest first.
async fn blocked_in(c: &mut Conn<'_>) -> Result<Vec<BlockedRun>> {
    // The versions first: in a healthy fleet there are none, and the runs
    // are never read.
    let crews = c
        .fetch_all(query(concat!(
            "SELECT k.fingerprint FROM crews k WHERE ",
            unoffered!()
        )))
        .await?;
    let mut defs = std::collections::HashMap::new();
    for k in &crews {
        let fingerprint = Fingerprint::from_stored(k.text("fingerprint")?);
        if let Some(def) = crews::definition_in(c, &fingerprint).await? {
            defs.insert(fingerprint.clone(), Blocked::of(&def, fingerprint));
        }
    }
    if defs.is_empty() {
        return Ok(vec![]);
    }
    let rows = c
        .fetch_all(query(concat!(
            "SELECT r.id, r.crew_fingerprint, \
             CASE WHEN r.blocked_at IS NULL THEN 0 ELSE 1 END AS evented \
             FROM crews k JOIN runs r ON r.crew_fingerprint = k.fingerprint WHERE ",
            unoffered!(),
            " AND ",
            runnable!(),
            " ORDER BY r.created_at, r.id"
        )))
        .await?;
    let mut found = Vec::with_capacity(rows.len());
    for r in &rows {
        let Some(id) = r.opt_uuid("id", nil_run(), "a blocked run's id")? else {
            continue;
        };
        let fingerprint = Fingerprint::from_stored(r.text("crew_fingerprint")?);
        if let Some(blocked) = defs.get(&fingerprint) {
            found.push(BlockedRun {
                run: RunId::from_uuid(id),
                blocked: blocked.clone(),
                evented: r.int("evented")? != 0,
            });
        }
    }
    Ok(found)
}

async fn sweep_in(c: &mut Conn<'_>) -> Result<Vec<BlockedRun>> {
    let mut newly = Vec::new();
    for run in blocked_in(c).await?.into_iter().filter(|b| !b.evented) {
        // Once per stall even with two sweeps at a time: the second waits
        // for the first's row lock (PostgreSQL) and then finds it marked.
        let marked = c
            .execute(
                query("UPDATE runs SET blocked_at = {now} WHERE id = :id AND blocked_at IS NULL")
                    .bind("id", run.run),
            )
            .await?;
        if marked == 0 {
            continue;
        }
        let event = NewEvent::typed(EventData::RunBlocked(run.blocked.clone()));
        super::rows::append_events(c, run.run, &[event]).await?;
        newly.push(run);
    }
    Ok(newly)
}

#[async_trait]
impl<H: ScriptHost> WorkerStore for H {
    async fn beat_process(&self, beat: &ProcessBeat) -> Result<()> {
        let beat = beat.clone();
        let write = self.tx(TxKind::Write, script!(|c| beat_in(c, &beat).await));
        bounded("beat_process", self.target(), None, write).await
    }

    async fn leave(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        let write = self.tx(TxKind::Write, script!(|c| leave_in(c, &id).await));
        bounded("leave", self.target(), None, write).await
    }

    async fn processes(&self) -> Result<Vec<ProcessRecord>> {
        let read = self.tx(TxKind::Read, script!(|c| processes_in(c).await));
        placed(self.target(), None, read).await
    }

    async fn blocked(&self) -> Result<Vec<BlockedRun>> {
        let read = self.tx(TxKind::Read, script!(|c| blocked_in(c).await));
        placed(self.target(), None, read).await
    }

    async fn sweep_blocked(&self) -> Result<Vec<BlockedRun>> {
        let write = self.tx(TxKind::Write, script!(|c| sweep_in(c).await));
        bounded("sweep_blocked", self.target(), None, write).await
    }
}
