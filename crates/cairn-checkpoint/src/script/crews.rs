//! Crew versions (`crews`): every definition a run was stored with, kept
//! once by fingerprint ([`remember_in`], in the transaction that stores
//! the run), and read back by [`CrewStore::crews`](crate::CrewStore::crews) and
//! [`CrewStore::crew_version`](crate::CrewStore::crew_version).

use async_trait::async_trait;
use cairn_core::event::payload::{CrewAt, CrewUpgraded};
use cairn_core::{CrewDef, Fingerprint, RunId};

use crate::contract::CrewStore;
use crate::raw::nil_run;
use crate::sql::{query, Conn};
use crate::{CrewVersion, Error, Result};

use super::boundary::placed;
use super::rows::{append_events, fetch_run};
use super::{ScriptHost, TxKind};

/// Keeps `def` (as stored: `json`) among the crew versions, if it is new.
pub(super) async fn remember_in(
    c: &mut Conn<'_>,
    def: &CrewDef,
    fingerprint: &Fingerprint,
    json: &serde_json::Value,
) -> Result<()> {
    c.execute(
        query(
            "INSERT INTO crews (fingerprint, name, version, definition, first_seen, needs_code) \
             VALUES (:fingerprint, :name, :version, :def, {now}, \
               CASE WHEN :code = 1 THEN TRUE ELSE FALSE END) \
             ON CONFLICT (fingerprint) DO NOTHING",
        )
        .bind("fingerprint", fingerprint.as_str())
        .bind("name", def.name.as_str())
        .bind("version", def.version.as_str())
        .bind("def", json)
        .bind("code", i64::from(cairn_core::upgrade::needs_code(def))),
    )
    .await
    .map(drop)
}

/// Every stored version, by name then first seen, with its unfinished
/// runs (one pass over the unfinished runs, by the status index).
pub(super) async fn crews_in(c: &mut Conn<'_>) -> Result<Vec<CrewVersion>> {
    let rows = c
        .fetch_all(query(
            "SELECT k.fingerprint, k.name, k.version, k.first_seen, \
             COALESCE(u.n, 0) AS unfinished FROM crews k LEFT JOIN \
             (SELECT crew_fingerprint, COUNT(*) AS n FROM runs WHERE status IN \
             ('queued', 'running', 'waiting', 'interrupted', 'failed') \
             GROUP BY crew_fingerprint) u ON u.crew_fingerprint = k.fingerprint \
             ORDER BY k.name, k.first_seen, k.fingerprint",
        ))
        .await?;
    rows.iter()
        .map(|r| {
            Ok(CrewVersion {
                name: r.text("name")?,
                version: r.text("version")?,
                fingerprint: Fingerprint::from_stored(r.text("fingerprint")?),
                first_seen: r.time("first_seen", nil_run(), "a crew's first_seen")?,
                unfinished: u64::try_from(r.int("unfinished")?).unwrap_or(0),
            })
        })
        .collect()
}

/// The stored definition with `fingerprint`.
pub(super) async fn definition_in(
    c: &mut Conn<'_>,
    fingerprint: &Fingerprint,
) -> Result<Option<CrewDef>> {
    let row = c
        .fetch_optional(
            query("SELECT definition FROM crews WHERE fingerprint = :fingerprint")
                .bind("fingerprint", fingerprint.as_str()),
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let def = row
        .json_text("definition", |text| serde_json::from_slice::<CrewDef>(text))?
        .transpose()
        .map_err(|e| {
            Error::Corruption(cairn_core::Corruption::new(
                nil_run(),
                format!("the stored crew version {fingerprint} does not decode: {e}"),
            ))
        })?;
    Ok(def)
}

/// Moves crew versions stored under a fingerprint an earlier release
/// computed (one that counted the directories of the crews a step starts,
/// issue 46) to the fingerprint their definition has now, with their runs
/// and their offers: a stored run then matches its crew file wherever it
/// lies, and a version stored twice is merged into one (its earliest
/// `first_seen`). Called by each open after the migrations; it writes only
/// when a version needs moving. A crew that starts no child crew never
/// does: its fingerprint never changed.
pub(crate) async fn refingerprint(db: &crate::sql::Pool) -> Result<()> {
    let stale = {
        let mut held = db.acquire().await?;
        stale_in(&mut held.conn()?).await?
    };
    if stale.is_empty() {
        return Ok(());
    }
    let mut tx = db.write().await?;
    refingerprint_in(&mut tx.conn()).await?;
    tx.commit().await
}

/// [`refingerprint`] in the caller's transaction (PostgreSQL's migration
/// transaction, under its lock).
pub(crate) async fn refingerprint_in(c: &mut Conn<'_>) -> Result<()> {
    for (old, new) in stale_in(c).await? {
        move_version_in(c, &old, &new).await?;
    }
    Ok(())
}

/// The stored versions whose fingerprint is not their definition's, as
/// (stored, now). Only definitions that hold a child crew are read (the
/// rest cannot differ); one that does not decode is left as it is.
async fn stale_in(c: &mut Conn<'_>) -> Result<Vec<(String, Fingerprint)>> {
    let rows = c
        .fetch_all(query(
            "SELECT fingerprint, definition FROM crews WHERE \
             CAST(definition AS TEXT) LIKE '%\"crew_def\"%' \
             OR CAST(definition AS TEXT) LIKE '%\"child_crews\"%' \
             OR CAST(definition AS TEXT) LIKE '%\"delegate_defs\"%'",
        ))
        .await?;
    let mut stale = Vec::new();
    for row in &rows {
        let decoded = row.json_text("definition", |t| serde_json::from_slice::<CrewDef>(t))?;
        let Some(Ok(def)) = decoded else { continue };
        let (stored, now) = (row.text("fingerprint")?, def.fingerprint());
        if stored != now.as_str() {
            stale.push((stored, now));
        }
    }
    Ok(stale)
}

/// One version's move from fingerprint `old` to `new`.
async fn move_version_in(c: &mut Conn<'_>, old: &str, new: &Fingerprint) -> Result<()> {
    let new = new.as_str();
    let statements = [
        "INSERT INTO crews (fingerprint, name, version, definition, first_seen, needs_code) \
         SELECT :new, name, version, definition, first_seen, needs_code FROM crews \
         WHERE fingerprint = :old \
         ON CONFLICT (fingerprint) DO UPDATE SET first_seen = CASE \
         WHEN excluded.first_seen < crews.first_seen THEN excluded.first_seen \
         ELSE crews.first_seen END",
        "UPDATE runs SET crew_fingerprint = :new WHERE crew_fingerprint = :old",
        "INSERT INTO process_crews (process, fingerprint) \
         SELECT process, :new FROM process_crews WHERE fingerprint = :old \
         ON CONFLICT (process, fingerprint) DO NOTHING",
        "DELETE FROM process_crews WHERE fingerprint = :old",
        "DELETE FROM crews WHERE fingerprint = :old",
    ];
    for sql in statements {
        let q = query(sql).bind("old", old);
        let q = match sql.contains(":new") {
            true => q.bind("new", new),
            false => q,
        };
        c.execute(q).await?;
    }
    Ok(())
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> CrewStore for H {
    async fn upgrade_crew(&self, id: RunId, req: &crate::CrewUpgrade) -> Result<crate::CrewMove> {
        upgrade_crew(self, id, req).await
    }

    async fn crews(&self) -> Result<Vec<crate::CrewVersion>> {
        let read = self.tx(TxKind::Read, script!(|c| crews_in(c).await));
        placed(self.target(), None, read).await
    }

    async fn crew_version(
        &self,
        fingerprint: &cairn_core::Fingerprint,
    ) -> Result<Option<cairn_core::CrewDef>> {
        let f = fingerprint.clone();
        let read = self.tx(TxKind::Single, script!(|c| definition_in(c, &f).await));
        placed(self.target(), None, read).await
    }
}

/// `CrewStore::upgrade_crew`: the run's check, the move and its event in one
/// write transaction, so the judgement holds for the row it changes.
pub(super) async fn upgrade_crew<H: super::ScriptHost + ?Sized>(
    host: &H,
    id: RunId,
    req: &crate::CrewUpgrade,
) -> Result<crate::CrewMove> {
    super::boundary::bounded("upgrade_crew", host.target(), Some(id), async {
        super::storable::actor_ok(&req.actor)?;
        let req = req.clone();
        host.tx(
            super::TxKind::Write,
            script!(|c| upgrade_crew_in(c, id, &req).await),
        )
        .await
    })
    .await
}

pub(super) async fn upgrade_crew_in(
    c: &mut Conn<'_>,
    id: RunId,
    req: &crate::CrewUpgrade,
) -> Result<crate::CrewMove> {
    use cairn_core::upgrade::{check, check_forced};
    let (to, actor) = (&req.to, &req.actor);
    let run = fetch_run(c, id, true).await?;
    let fingerprint = to.fingerprint();
    if run.crew_fingerprint == fingerprint {
        // Already there: moved by an earlier transaction, not this one.
        return Ok(crate::CrewMove { run, moved: false });
    }
    let held = match &req.held {
        Some(fence) if fence.epoch == run.lease_epoch => {
            let owner = super::rows::lease_owner_in(c, id).await?;
            owner.as_deref() == Some(&*fence.owner)
        }
        _ => false,
    };
    if run.status == cairn_core::RunStatus::Running && !held {
        return Err(Error::WrongState {
            run: id,
            status: run.status,
            action: "move to another crew version while a step runs (wait for its boundary)",
        });
    }
    // Forced, only what leaves the run readable is overridden.
    let overridden = match req.force {
        true => check_forced(&run, to).map(|o| o.map(|e| e.to_string())),
        false => check(&run, to).map(|()| None),
    }
    .map_err(|source| Error::Incompatible { run: id, source })?;
    let json = to.to_json();
    remember_in(c, to, &fingerprint, &json).await?;
    c.execute(
        query(
            "UPDATE runs SET crew_version = :version, crew_fingerprint = :fingerprint, \
             crew_def = 'null', step_count = :steps, updated_at = {now} WHERE id = :id",
        )
        .bind("id", id)
        .bind("version", to.version.as_str())
        .bind("fingerprint", fingerprint.as_str())
        .bind("steps", to.step_count()),
    )
    .await?;
    let event = cairn_core::NewEvent::typed(cairn_core::EventData::CrewUpgraded(CrewUpgraded {
        from: CrewAt {
            version: run.crew_version.clone(),
            fingerprint: run.crew_fingerprint.clone(),
        },
        to: CrewAt {
            version: to.version.to_string(),
            fingerprint: fingerprint.clone(),
        },
        actor: actor.clone(),
        forced: overridden.is_some(),
        overridden,
    }));
    append_events(c, id, &[event]).await?;
    let run = fetch_run(c, id, false).await?;
    Ok(crate::CrewMove { run, moved: true })
}
