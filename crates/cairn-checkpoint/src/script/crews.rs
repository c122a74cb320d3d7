//! Crew versions (`crews`): every definition a run was stored with, kept
//! once by fingerprint ([`remember_in`], in the transaction that stores
//! the run), and read back by [`Store::crews`](crate::Store::crews) and
//! [`Store::crew_version`](crate::Store::crew_version).

use cairn_core::{CrewDef, Fingerprint};

use crate::raw::nil_run;
use crate::sql::{query, Conn};
use crate::{CrewVersion, Error, Result};

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
